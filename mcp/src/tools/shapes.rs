//! The JSON and content blocks of results: what the model reads.

use rayito::{EntryInfo, Execution, ExecutionResult, FileType};
use rmcp::model::{ContentBlock, ResourceContents};
use serde_json::{Value, json};

use super::record::{Record, json_block};
use crate::time::rfc3339;
use crate::truncate::truncate;

/// One `list_files` entry.
pub(super) fn entry_json(entry: &EntryInfo) -> Value {
    let kind = match entry.file_type {
        FileType::File => "file",
        FileType::Directory => "dir",
        FileType::Symlink => "symlink",
        _ => "other",
    };
    json!({
        "name": entry.name,
        "path": entry.path,
        "type": kind,
        "size": entry.size,
        "modified_time": entry.modified_time.map(rfc3339),
    })
}

/// The MIME types of a result, in the contract's order.
fn mime_types(result: &ExecutionResult) -> Vec<String> {
    result
        .formats()
        .into_iter()
        .map(|format| {
            match format {
                "text" => "text/plain",
                "html" => "text/html",
                "markdown" => "text/markdown",
                "svg" => "image/svg+xml",
                "png" => "image/png",
                "jpeg" => "image/jpeg",
                "pdf" => "application/pdf",
                "latex" => "text/latex",
                "javascript" => "application/javascript",
                "json" => "application/json",
                "data" => "e2b/data",
                "chart" => "e2b/chart",
                // Any other key is a MIME type already.
                other => other,
            }
            .to_owned()
        })
        .collect()
}

/// `run_code`'s content: the JSON block, then PNG and JPEG results as
/// images and SVG results as resources.
pub(super) fn execution_content(
    sandbox_id: &str,
    execution: &Execution,
    record: &mut Record,
) -> Vec<ContentBlock> {
    let (text, cut_text) = match execution.text() {
        Some(text) => {
            let (text, cut) = truncate(text);
            (Some(text), cut)
        }
        None => (None, false),
    };
    let (stdout, cut_out) = truncate(&execution.logs.stdout.concat());
    let (stderr, cut_err) = truncate(&execution.logs.stderr.concat());
    let mut cut_error = false;
    let error = execution.error.as_ref().map(|e| {
        let (value, cut_value) = truncate(&e.value);
        let (traceback, cut_traceback) = truncate(&e.traceback);
        cut_error = cut_value || cut_traceback;
        json!({"name": e.name, "value": value, "traceback": traceback})
    });
    let results: Vec<Value> = execution
        .results
        .iter()
        .enumerate()
        .map(|(index, r)| json!({"index": index, "mime_types": mime_types(r)}))
        .collect();
    let value = json!({
        "text": text,
        "stdout": stdout,
        "stderr": stderr,
        "error": error,
        "execution_count": execution.execution_count,
        "results": results,
        "truncated": execution.truncated || cut_text || cut_out || cut_err || cut_error,
    });
    let mut content = vec![json_block(&value, record)];
    let count = execution
        .execution_count
        .map_or_else(|| "unknown".to_owned(), |c| c.to_string());
    for (index, result) in execution.results.iter().enumerate() {
        if let Some(png) = &result.png {
            record.bytes_out += png.len();
            content.push(ContentBlock::image(png.clone(), "image/png"));
        }
        if let Some(jpeg) = &result.jpeg {
            record.bytes_out += jpeg.len();
            content.push(ContentBlock::image(jpeg.clone(), "image/jpeg"));
        }
        if let Some(svg) = &result.svg {
            record.bytes_out += svg.len();
            let uri = format!("rayito://{sandbox_id}/results/{count}/{index}.svg");
            content.push(ContentBlock::resource(
                ResourceContents::text(svg.clone(), uri).with_mime_type("image/svg+xml"),
            ));
        }
    }
    content
}
