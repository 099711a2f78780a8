//! The tools: what each takes, what it returns, and the one log line per
//! call. Every tool but `list_sandboxes` works on the lease's sandbox
//! (`crate::lease`); a failure is a result with `isError` and one sentence
//! for the model (`crate::failure`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::transfer::{DownloadUrlOptions, UploadMethod, UploadUrlOptions};
use rayito::{CommandOptions, FileType, ListQuery, RunCodeOptions, Sandbox, SandboxError};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};

mod record;
mod shapes;

use self::record::{Record, json_block};
use self::shapes::{entry_json, execution_content};
use crate::failure::Failure;
use crate::lease::Lease;
use crate::time::rfc3339;
use crate::truncate::{prefix_chars, truncate};

/// Default and bounds of `run_code`'s timeout (seconds).
const CODE_TIMEOUT: (u64, u64, u64) = (300, 1, 3_600);
/// Default and bounds of `run_command`'s timeout (seconds).
const COMMAND_TIMEOUT: (u64, u64, u64) = (60, 1, 3_600);
/// Default and bounds of `list_files`' depth.
const LIST_DEPTH: (u32, u32, u32) = (1, 1, 5);
/// The directory `list_files` lists by default.
const DEFAULT_LIST_PATH: &str = "/home/user";
/// Most entries one `list_files` returns (the rest: `truncated`).
const MAX_LIST_ENTRIES: usize = 1_000;
/// Most sandboxes one `list_sandboxes` returns (the rest: `truncated`).
const MAX_LISTED_SANDBOXES: usize = 200;
/// A file up to this size is read whole (its characters counted); a larger
/// one only for its first [`READ_PREFIX_BYTES`].
const READ_WHOLE_BYTES: u64 = 8 * 1024 * 1024;
/// What is read of a larger file: enough for the character limit.
const READ_PREFIX_BYTES: usize = 4 * crate::truncate::MAX_CHARS;
/// The suffix of a large file's content (`{n}`: the bytes left unread).
pub const MORE_BYTES_SUFFIX: &str = "\n[{n} more bytes]";
/// How long upload and download links live.
const LINK_LIFETIME: Duration = Duration::from_secs(3_600);

/// The MCP server: the tools over one shared lease (the HTTP mode makes
/// one per session, all over the same lease).
#[derive(Debug, Clone)]
pub struct SandboxTools {
    lease: Arc<Lease>,
    tool_router: ToolRouter<Self>,
}

/// `run_code`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RunCodeArgs {
    /// Python code to run in the sandbox's Jupyter kernel; variables,
    /// imports and the working directory live on between calls.
    pub code: String,
    /// Seconds before the cell is interrupted (1 to 3600; default 300).
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// `run_command`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RunCommandArgs {
    /// The command line, run with `bash -l -c`.
    pub cmd: String,
    /// Seconds before the command is ended (1 to 3600; default 60).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// The working directory (default: the sandbox user's home).
    #[serde(default)]
    pub cwd: Option<String>,
}

/// A path in the sandbox.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct PathArgs {
    /// An absolute path in the sandbox.
    pub path: String,
}

/// `write_file`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WriteFileArgs {
    /// An absolute path in the sandbox (parents are created).
    pub path: String,
    /// The file's text.
    pub content: String,
}

/// `list_files`' arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ListFilesArgs {
    /// The directory (default /home/user).
    #[serde(default)]
    pub path: Option<String>,
    /// Levels to descend (1 to 5; default 1).
    #[serde(default)]
    pub depth: Option<u32>,
}

/// `value`, or the default, refused outside `[min, max]` before any I/O.
fn bounded<T>(
    value: Option<T>,
    argument: &str,
    (default, min, max): (T, T, T),
) -> Result<T, Failure>
where
    T: PartialOrd + Copy + std::fmt::Display,
{
    let value = value.unwrap_or(default);
    if value < min || value > max {
        return Err(Failure::argument(
            argument,
            &format!("must be from {min} to {max}"),
        ));
    }
    Ok(value)
}

impl SandboxTools {
    /// The tools over `lease`.
    pub fn new(lease: Arc<Lease>) -> SandboxTools {
        SandboxTools {
            lease,
            tool_router: Self::tool_router(),
        }
    }

    /// The lease's sandbox, noted in the record.
    async fn sandbox(&self, record: &mut Record) -> Result<Arc<Sandbox>, Failure> {
        let sandbox = self.lease.get().await?;
        record.sandbox_id = Some(sandbox.id().to_owned());
        Ok(sandbox)
    }

    /// The failure of a call on `sandbox`; a sandbox found gone is
    /// forgotten, so that the next call creates a new one.
    async fn failed(&self, sandbox: &Sandbox, err: &SandboxError, path: Option<&str>) -> Failure {
        let failure = Failure::of(err, path);
        if failure.sandbox_gone {
            self.lease.forget(sandbox.id()).await;
        }
        failure
    }
}

#[tool_router]
impl SandboxTools {
    #[tool(
        description = "Run Python code in the sandbox's Jupyter kernel (state is kept between calls). Returns JSON {text, stdout, stderr, error, execution_count, results[{index, mime_types}], truncated}, then each PNG or JPEG result as an image and each SVG result as a resource."
    )]
    async fn run_code(
        &self,
        Parameters(args): Parameters<RunCodeArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut record = Record::new("run_code", args.code.len());
        let outcome = self.run_code_inner(&mut record, args).await;
        Ok(record.finish(outcome))
    }

    #[tool(
        description = "Run a shell command in the sandbox (bash -l -c) and wait for it. Returns JSON {stdout, stderr, exit_code, truncated}; a non-zero exit code is a result, not an error."
    )]
    async fn run_command(
        &self,
        Parameters(args): Parameters<RunCommandArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut record = Record::new("run_command", args.cmd.len());
        let outcome = self.run_command_inner(&mut record, args).await;
        Ok(record.finish(outcome))
    }

    #[tool(
        description = "Read a text file from the sandbox. Returns JSON {path, content, size, truncated}.",
        annotations(read_only_hint = true)
    )]
    async fn read_file(
        &self,
        Parameters(args): Parameters<PathArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut record = Record::new("read_file", 0);
        let outcome = self.read_file_inner(&mut record, args).await;
        Ok(record.finish(outcome))
    }

    #[tool(
        description = "Write a text file in the sandbox (parent directories are created; an existing file is replaced). Returns JSON {path, size}."
    )]
    async fn write_file(
        &self,
        Parameters(args): Parameters<WriteFileArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut record = Record::new("write_file", args.content.len());
        let outcome = self.write_file_inner(&mut record, args).await;
        Ok(record.finish(outcome))
    }

    #[tool(
        description = "List a directory of the sandbox. Returns JSON {path, entries[{name, path, type, size, modified_time}], truncated}; type is file, dir, symlink or other.",
        annotations(read_only_hint = true)
    )]
    async fn list_files(
        &self,
        Parameters(args): Parameters<ListFilesArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut record = Record::new("list_files", 0);
        let outcome = self.list_files_inner(&mut record, args).await;
        Ok(record.finish(outcome))
    }

    #[tool(
        description = "List the sandboxes of the account (never creates one). Returns JSON {sandboxes[{sandbox_id, state, template, template_version, started_at, current}], truncated}; current marks this server's sandbox.",
        annotations(read_only_hint = true)
    )]
    async fn list_sandboxes(&self) -> Result<CallToolResult, ErrorData> {
        let mut record = Record::new("list_sandboxes", 0);
        let outcome = self.list_sandboxes_inner(&mut record).await;
        Ok(record.finish(outcome))
    }

    #[tool(
        description = "Kill this server's sandbox and start a fresh one (files, variables and processes are lost). Returns JSON {previous_sandbox_id, sandbox_id}.",
        annotations(destructive_hint = true)
    )]
    async fn reset(&self) -> Result<CallToolResult, ErrorData> {
        let mut record = Record::new("reset", 0);
        let outcome = match self.lease.reset().await {
            Ok((previous, sandbox)) => {
                record.sandbox_id = Some(sandbox.id().to_owned());
                let value = json!({"previous_sandbox_id": previous, "sandbox_id": sandbox.id()});
                Ok(vec![json_block(&value, &mut record)])
            }
            Err(failure) => Err(failure),
        };
        Ok(record.finish(outcome))
    }

    #[tool(
        description = "The APIs this sandbox can call without their keys (secret gateways the operator configured). Returns JSON {gateways[{name, url, upstream, allow, last_error_class}]}: from code in the sandbox, send a request to url + the API's path (plain HTTP, loopback) with no credentials: the gateway adds them and forwards to upstream over HTTPS. Only the allow rules' methods and paths pass (else 403); over the rate, 429. Empty when none is configured.",
        annotations(read_only_hint = true)
    )]
    async fn gateways(&self) -> Result<CallToolResult, ErrorData> {
        let mut record = Record::new("gateways", 0);
        let outcome = match self.lease.gateways() {
            [] => Ok(vec![json_block(&json!({"gateways": []}), &mut record)]),
            configured => match self.gateways_inner(&mut record, configured).await {
                Ok(value) => Ok(vec![json_block(&value, &mut record)]),
                Err(failure) => Err(failure),
            },
        };
        Ok(record.finish(outcome))
    }

    #[tool(
        description = "A link to upload a file into the sandbox at path: PUT the bytes to url with the given headers before expires_at; the sandbox then moves them to path. Needs a staging bucket (RAYITO_TRANSFER_BUCKET). Returns JSON {path, method, url, headers, expires_at}."
    )]
    async fn upload(
        &self,
        Parameters(args): Parameters<PathArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut record = Record::new("upload", 0);
        let outcome = self.upload_inner(&mut record, args).await;
        Ok(record.finish(outcome))
    }

    #[tool(
        description = "A link to download a file of the sandbox (an HTTP GET before expires_at). Needs a staging bucket (RAYITO_TRANSFER_BUCKET). Returns JSON {path, url, size, sha256, expires_at}.",
        annotations(read_only_hint = true)
    )]
    async fn download(
        &self,
        Parameters(args): Parameters<PathArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut record = Record::new("download", 0);
        let outcome = self.download_inner(&mut record, args).await;
        Ok(record.finish(outcome))
    }
}

impl SandboxTools {
    async fn run_code_inner(
        &self,
        record: &mut Record,
        args: RunCodeArgs,
    ) -> Result<Vec<ContentBlock>, Failure> {
        let timeout = bounded(args.timeout, "timeout", CODE_TIMEOUT)?;
        let sandbox = self.sandbox(record).await?;
        let options = RunCodeOptions::new().timeout(Duration::from_secs(timeout));
        let execution = match sandbox.code().run_with(&args.code, options).await {
            Ok(execution) => execution,
            Err(e) => return Err(self.failed(&sandbox, &e, None).await),
        };
        Ok(execution_content(sandbox.id(), &execution, record))
    }

    async fn run_command_inner(
        &self,
        record: &mut Record,
        args: RunCommandArgs,
    ) -> Result<Vec<ContentBlock>, Failure> {
        let timeout = bounded(args.timeout, "timeout", COMMAND_TIMEOUT)?;
        let sandbox = self.sandbox(record).await?;
        let mut options = CommandOptions::new().timeout(Duration::from_secs(timeout));
        if let Some(cwd) = args.cwd.filter(|c| !c.is_empty()) {
            options = options.cwd(cwd);
        }
        let (stdout, stderr, exit_code, cut) =
            match sandbox.commands().run_with(&args.cmd, options).await {
                Ok(r) => (r.stdout, r.stderr, r.exit_code, r.truncated),
                // A non-zero exit is the command's answer, not a failure.
                Err(SandboxError::CommandExit {
                    exit_code,
                    stdout,
                    stderr,
                    truncated,
                    ..
                }) => (
                    stdout.into_string(),
                    stderr.into_string(),
                    exit_code,
                    truncated,
                ),
                Err(e) => return Err(self.failed(&sandbox, &e, None).await),
            };
        record.exit_code = Some(exit_code);
        let (stdout, cut_out) = truncate(&stdout);
        let (stderr, cut_err) = truncate(&stderr);
        let value = json!({
            "stdout": stdout,
            "stderr": stderr,
            "exit_code": exit_code,
            "truncated": cut || cut_out || cut_err,
        });
        Ok(vec![json_block(&value, record)])
    }

    async fn read_file_inner(
        &self,
        record: &mut Record,
        args: PathArgs,
    ) -> Result<Vec<ContentBlock>, Failure> {
        let path = args.path;
        let sandbox = self.sandbox(record).await?;
        let files = sandbox.files();
        let info = match files.get_info(&path).await {
            Ok(info) => info,
            Err(e) => return Err(self.failed(&sandbox, &e, Some(&path)).await),
        };
        if info.file_type == FileType::Directory {
            return Err(Failure::argument("path", "is a directory; use list_files"));
        }
        let whole = info.size <= READ_WHOLE_BYTES;
        let read = if whole {
            files.read(&path).await
        } else {
            read_prefix(&sandbox, &path).await
        };
        let data = match read {
            Ok(data) => data,
            Err(e) => return Err(self.failed(&sandbox, &e, Some(&path)).await),
        };
        let (content, cut) = if whole {
            truncate(&String::from_utf8_lossy(&data))
        } else {
            // Part of a large file: as many characters as a text may
            // hold, then how many bytes of the file were left out.
            let (mut content, consumed) = prefix_chars(&data, crate::truncate::MAX_CHARS);
            let left = info.size.saturating_sub(consumed as u64);
            content.push_str(&MORE_BYTES_SUFFIX.replace("{n}", &left.to_string()));
            (content, true)
        };
        let value = json!({
            "path": path,
            "content": content,
            "size": info.size,
            "truncated": cut,
        });
        Ok(vec![json_block(&value, record)])
    }

    async fn write_file_inner(
        &self,
        record: &mut Record,
        args: WriteFileArgs,
    ) -> Result<Vec<ContentBlock>, Failure> {
        let sandbox = self.sandbox(record).await?;
        let written = sandbox
            .files()
            .write(&args.path, args.content.into_bytes())
            .await;
        let entry = match written {
            Ok(entry) => entry,
            Err(e) => return Err(self.failed(&sandbox, &e, Some(&args.path)).await),
        };
        let value = json!({"path": entry.path, "size": entry.size});
        Ok(vec![json_block(&value, record)])
    }

    async fn list_files_inner(
        &self,
        record: &mut Record,
        args: ListFilesArgs,
    ) -> Result<Vec<ContentBlock>, Failure> {
        let depth = bounded(args.depth, "depth", LIST_DEPTH)?;
        let path = args
            .path
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| DEFAULT_LIST_PATH.to_owned());
        let sandbox = self.sandbox(record).await?;
        let entries = match sandbox.files().list_with_depth(&path, depth).await {
            Ok(entries) => entries,
            Err(e) => return Err(self.failed(&sandbox, &e, Some(&path)).await),
        };
        let truncated = entries.len() > MAX_LIST_ENTRIES;
        let listed: Vec<Value> = entries
            .iter()
            .take(MAX_LIST_ENTRIES)
            .map(entry_json)
            .collect();
        let value = json!({"path": path, "entries": listed, "truncated": truncated});
        Ok(vec![json_block(&value, record)])
    }

    async fn gateways_inner(
        &self,
        record: &mut Record,
        configured: &[(String, rayito::gateway::SecretGateway)],
    ) -> Result<Value, Failure> {
        let sandbox = self.sandbox(record).await?;
        let client = self
            .lease
            .client()
            .await
            .map_err(|e| Failure::of(&e, None))?;
        match crate::gateways::listing(client, &sandbox, configured).await {
            Ok(value) => Ok(value),
            Err(e) => Err(self.failed(&sandbox, &e, None).await),
        }
    }

    async fn list_sandboxes_inner(
        &self,
        record: &mut Record,
    ) -> Result<Vec<ContentBlock>, Failure> {
        let client = match self.lease.client().await {
            Ok(client) => client,
            Err(e) => return Err(Failure::of(&e, None)),
        };
        let current = self.lease.current_id().await;
        let mut list = client.list(ListQuery::new());
        let mut sandboxes = Vec::new();
        let mut truncated = false;
        while let Some(summary) = list.next().await {
            let summary = summary.map_err(|e| Failure::of(&e, None))?;
            if sandboxes.len() == MAX_LISTED_SANDBOXES {
                truncated = true;
                break;
            }
            sandboxes.push(json!({
                "sandbox_id": summary.sandbox_id,
                "state": summary.state.as_str(),
                "template": summary.template,
                "template_version": summary.template_version,
                "started_at": summary.started_at.map(rfc3339),
                "current": current.as_deref() == Some(summary.sandbox_id.as_str()),
            }));
        }
        let value = json!({"sandboxes": sandboxes, "truncated": truncated});
        Ok(vec![json_block(&value, record)])
    }

    async fn upload_inner(
        &self,
        record: &mut Record,
        args: PathArgs,
    ) -> Result<Vec<ContentBlock>, Failure> {
        let sandbox = self.sandbox(record).await?;
        let Some(staging) = sandbox.staging().cloned() else {
            return Err(Failure::not_configured());
        };
        let options = UploadUrlOptions::new(staging).expires_in(LINK_LIFETIME);
        let ticket = match sandbox.files().upload_url(&args.path, options).await {
            Ok(ticket) => ticket,
            Err(e) => return Err(self.failed(&sandbox, &e, Some(&args.path)).await),
        };
        let method = match ticket.method() {
            UploadMethod::Put => "PUT",
            UploadMethod::Post => "POST",
            // The server never asks for another method.
            _ => "PUT",
        };
        let value = json!({
            "path": args.path,
            "method": method,
            "url": ticket.url(),
            "headers": ticket.headers(),
            "expires_at": rfc3339(ticket.expires_at()),
        });
        Ok(vec![json_block(&value, record)])
    }

    async fn download_inner(
        &self,
        record: &mut Record,
        args: PathArgs,
    ) -> Result<Vec<ContentBlock>, Failure> {
        let sandbox = self.sandbox(record).await?;
        let Some(staging) = sandbox.staging().cloned() else {
            return Err(Failure::not_configured());
        };
        let options = DownloadUrlOptions::new(staging).expires_in(LINK_LIFETIME);
        let link = match sandbox.files().download_url(&args.path, options).await {
            Ok(link) => link,
            Err(e) => return Err(self.failed(&sandbox, &e, Some(&args.path)).await),
        };
        let value = json!({
            "path": args.path,
            "url": link.url(),
            "size": link.size(),
            "sha256": link.sha256(),
            "expires_at": rfc3339(link.expires_at()),
        });
        Ok(vec![json_block(&value, record)])
    }
}

/// The first [`READ_PREFIX_BYTES`] of a large file (the stream is dropped
/// after them, which cancels the read).
async fn read_prefix(sandbox: &Sandbox, path: &str) -> Result<Vec<u8>, SandboxError> {
    let mut chunks = sandbox.files().read_stream(path).await?;
    let mut data = Vec::with_capacity(READ_PREFIX_BYTES);
    while data.len() < READ_PREFIX_BYTES {
        match chunks.next().await {
            Some(chunk) => {
                let chunk = chunk?;
                let room = READ_PREFIX_BYTES - data.len();
                data.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            None => break,
        }
    }
    Ok(data)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SandboxTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "rayito-mcp",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "One code sandbox for this conversation, created on first use: run Python with run_code, shell commands with run_command, and move files with read_file, write_file and list_files. reset starts a fresh sandbox. gateways lists the APIs the sandbox can call without their keys, if any.",
            )
    }
}
