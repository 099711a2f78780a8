//! `rayito-mcp` over stdio on the local backend, driven by rmcp's own
//! client: every tool, an image result, timeouts, a missing file, the
//! server's own refusals, truncation, and what its log holds.

use crate::support;

use serde_json::{Value, json};
use support::{Server, json_of};

/// A cell whose results are a PNG (a valid 1x1 image), an SVG, a JPEG
/// (its start and end markers), and the main result `7`.
const IMAGES: &str = r#"
import base64, struct, zlib
def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
PNG = (b"\x89PNG\r\n\x1a\n"
       + _chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
       + _chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
       + _chunk(b"IEND", b""))
class Dot:
    def _repr_png_(self): return PNG
    def __repr__(self): return "Dot()"
class Shape:
    def _repr_svg_(self): return '<svg xmlns="http://www.w3.org/2000/svg"/>'
    def __repr__(self): return "Shape()"
class Photo:
    def _repr_jpeg_(self): return b"\xff\xd8\xff\xd9"
    def __repr__(self): return "Photo()"
print(base64.b64encode(PNG).decode())
display(Dot())
display(Shape())
display(Photo())
7
"#;

/// Every tool, over one server and one sandbox, then a reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_over_stdio_on_the_local_backend() {
    let server = Server::local(&[]).await;

    let listed = server.client.list_all_tools().await.expect("tools/list");
    // Hints for clients that ask before running a tool.
    let hint = |name: &str| {
        let tool = listed.iter().find(|t| t.name == name).unwrap();
        let annotations = tool.annotations.clone().unwrap_or_default();
        (annotations.read_only_hint, annotations.destructive_hint)
    };
    assert_eq!(hint("read_file"), (Some(true), None));
    assert_eq!(hint("list_sandboxes"), (Some(true), None));
    assert_eq!(hint("gateways"), (Some(true), None));
    assert_eq!(hint("reset"), (None, Some(true)));
    assert_eq!(hint("run_command"), (None, None));
    let mut tools: Vec<String> = listed.iter().map(|t| t.name.to_string()).collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            "download",
            "gateways",
            "list_files",
            "list_sandboxes",
            "read_file",
            "reset",
            "run_code",
            "run_command",
            "upload",
            "write_file"
        ]
    );

    // Listing never creates the lease.
    assert_eq!(
        server.json("list_sandboxes", json!({})).await,
        json!({"sandboxes": [], "truncated": false})
    );

    // Concurrent first calls share the one sandbox they create.
    let (a, b) = tokio::join!(
        server.call("run_command", json!({"cmd": "echo a"})),
        server.call("run_command", json!({"cmd": "echo b"})),
    );
    assert_eq!(json_of(&a)["stdout"], "a\n");
    assert_eq!(json_of(&b)["stdout"], "b\n");
    let sandboxes = server.json("list_sandboxes", json!({})).await;
    assert_eq!(
        sandboxes["sandboxes"].as_array().unwrap().len(),
        1,
        "{sandboxes}"
    );

    // run_code: the kernel keeps state between calls.
    server.json("run_code", json!({"code": "x = 21"})).await;
    let run = server
        .json("run_code", json!({"code": "print('hi')\nx * 2"}))
        .await;
    assert_eq!(run["text"], "42", "{run}");
    assert_eq!(run["stdout"], "hi\n");
    assert_eq!(run["stderr"], "");
    assert_eq!(run["error"], Value::Null);
    assert_eq!(run["execution_count"], 2);
    assert_eq!(
        run["results"],
        json!([{"index": 0, "mime_types": ["text/plain"]}])
    );
    assert_eq!(run["truncated"], false);

    // An exception is data.
    let raised = server.json("run_code", json!({"code": "1/0"})).await;
    assert_eq!(raised["error"]["name"], "ZeroDivisionError", "{raised}");
    assert_eq!(raised["error"]["value"], "division by zero");

    // An image result: the JSON block, then the PNG as image content and
    // the SVG as a resource named after the sandbox, count and index.
    let sandboxes = server.json("list_sandboxes", json!({})).await;
    let listed = sandboxes["sandboxes"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{sandboxes}");
    assert_eq!(listed[0]["current"], true);
    assert_eq!(listed[0]["state"], "RUNNING");
    assert!(listed[0]["started_at"].as_str().unwrap().ends_with('Z'));
    let id = listed[0]["sandbox_id"].as_str().unwrap().to_owned();

    let result = server.call("run_code", json!({"code": IMAGES})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let run = json_of(&result);
    let png_base64 = run["stdout"].as_str().unwrap().trim_end().to_owned();
    assert_eq!(run["text"], "7");
    assert_eq!(
        run["results"],
        json!([
            {"index": 0, "mime_types": ["text/plain", "image/png"]},
            {"index": 1, "mime_types": ["text/plain", "image/svg+xml"]},
            {"index": 2, "mime_types": ["text/plain", "image/jpeg"]},
            {"index": 3, "mime_types": ["text/plain"]},
        ]),
        "{run}"
    );
    let count = run["execution_count"].as_u64().unwrap();
    assert_eq!(result.content.len(), 4, "{result:?}");
    let image = result.content[1].as_image().expect("an image block");
    assert_eq!(image.mime_type, "image/png");
    assert_eq!(image.data, png_base64);
    let svg = result.content[2].as_resource().expect("a resource block");
    let rmcp::model::ResourceContents::TextResourceContents {
        uri,
        mime_type,
        text,
        ..
    } = &svg.resource
    else {
        panic!("a text resource: {svg:?}");
    };
    assert_eq!(uri, &format!("rayito://{id}/results/{count}/1.svg"));
    assert_eq!(mime_type.as_deref(), Some("image/svg+xml"));
    assert_eq!(text, r#"<svg xmlns="http://www.w3.org/2000/svg"/>"#);
    let jpeg = result.content[3].as_image().expect("an image block");
    assert_eq!(jpeg.mime_type, "image/jpeg");
    assert_eq!(jpeg.data, "/9j/2Q==");

    // run_command: a non-zero exit is a result.
    let ran = server
        .json(
            "run_command",
            json!({"cmd": "echo out; echo err >&2; exit 3"}),
        )
        .await;
    assert_eq!(
        ran,
        json!({"stdout": "out\n", "stderr": "err\n", "exit_code": 3, "truncated": false})
    );
    let ran = server
        .json("run_command", json!({"cmd": "pwd", "cwd": "/tmp"}))
        .await;
    assert_eq!(ran["stdout"], "/tmp\n");
    assert_eq!(ran["exit_code"], 0);

    // Files: write, read, list.
    let written = server
        .json(
            "write_file",
            json!({"path": "/home/user/notes/a.txt", "content": "héllo"}),
        )
        .await;
    assert_eq!(
        written,
        json!({"path": "/home/user/notes/a.txt", "size": 6})
    );
    let read = server
        .json("read_file", json!({"path": "/home/user/notes/a.txt"}))
        .await;
    assert_eq!(
        read,
        json!({"path": "/home/user/notes/a.txt", "content": "héllo", "size": 6, "truncated": false})
    );
    let listed = server
        .json("list_files", json!({"path": "/home/user/notes"}))
        .await;
    let entries = listed["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{listed}");
    assert_eq!(entries[0]["name"], "a.txt");
    assert_eq!(entries[0]["path"], "/home/user/notes/a.txt");
    assert_eq!(entries[0]["type"], "file");
    assert_eq!(entries[0]["size"], 6);
    assert!(entries[0]["modified_time"].as_str().unwrap().ends_with('Z'));
    // The default directory, two levels down.
    let listed = server.json("list_files", json!({"depth": 2})).await;
    assert_eq!(listed["path"], "/home/user");
    let paths: Vec<&str> = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"/home/user/notes"), "{listed}");
    assert!(paths.contains(&"/home/user/notes/a.txt"), "{listed}");
    let dir = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "/home/user/notes")
        .unwrap();
    assert_eq!(dir["type"], "dir");

    // Upload and download need a staging bucket.
    assert_eq!(
        server
            .error("upload", json!({"path": "/home/user/in.bin"}))
            .await,
        "upload and download need a staging bucket: set RAYITO_TRANSFER_BUCKET in the server's environment"
    );
    assert_eq!(
        server
            .error("download", json!({"path": "/home/user/notes/a.txt"}))
            .await,
        "upload and download need a staging bucket: set RAYITO_TRANSFER_BUCKET in the server's environment"
    );

    // reset: the old sandbox is killed, a new one has a fresh kernel.
    let reset = server.json("reset", json!({})).await;
    assert_eq!(reset["previous_sandbox_id"], id.as_str());
    let new_id = reset["sandbox_id"].as_str().unwrap().to_owned();
    assert_ne!(new_id, id);
    let fresh = server.json("run_code", json!({"code": "x"})).await;
    assert_eq!(fresh["error"]["name"], "NameError", "{fresh}");
    let sandboxes = server.json("list_sandboxes", json!({})).await;
    assert_eq!(
        sandboxes["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (
                s["sandbox_id"].as_str().unwrap(),
                s["current"].as_bool().unwrap()
            ))
            .collect::<Vec<_>>(),
        [(new_id.as_str(), true)],
        "{sandboxes}"
    );

    let log = server.close().await;
    assert!(log.contains("sandbox killed"), "{log}");
}

/// The failures a model meets, each as its sentence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_reach_the_model_as_sentences() {
    let server = Server::local(&[]).await;

    // A command past its timeout.
    let started = std::time::Instant::now();
    assert_eq!(
        server
            .error("run_command", json!({"cmd": "sleep 30", "timeout": 1}))
            .await,
        "timed out: the operation did not finish within its timeout; raise the timeout or split the work"
    );
    assert!(started.elapsed().as_secs() < 25, "{:?}", started.elapsed());

    // A cell past its timeout: the kernel's own error, as data.
    let run = server
        .json(
            "run_code",
            json!({"code": "import time\ntime.sleep(30)", "timeout": 1}),
        )
        .await;
    assert_eq!(run["error"]["name"], "ExecutionTimeout", "{run}");

    // A missing file and a missing directory.
    assert_eq!(
        server
            .error("read_file", json!({"path": "/home/user/missing.txt"}))
            .await,
        "file not found: /home/user/missing.txt"
    );
    assert_eq!(
        server
            .error("list_files", json!({"path": "/home/user/nowhere"}))
            .await,
        "file not found: /home/user/nowhere"
    );
    // A directory is not a file.
    assert_eq!(
        server
            .error("read_file", json!({"path": "/home/user"}))
            .await,
        "invalid argument: path: is a directory; use list_files"
    );

    // The server's own bounds, before any I/O.
    assert_eq!(
        server
            .error("run_command", json!({"cmd": "true", "timeout": 0}))
            .await,
        "invalid argument: timeout: must be from 1 to 3600"
    );
    assert_eq!(
        server
            .error("run_code", json!({"code": "1", "timeout": 3601}))
            .await,
        "invalid argument: timeout: must be from 1 to 3600"
    );
    assert_eq!(
        server.error("list_files", json!({"depth": 6})).await,
        "invalid argument: depth: must be from 1 to 5"
    );
    // A cwd that does not exist: the agent's refusal, named.
    let refused = server
        .error("run_command", json!({"cmd": "true", "cwd": "/nowhere"}))
        .await;
    assert!(refused.starts_with("invalid argument"), "{refused}");

    // A missing or mistyped argument: rmcp's own sentence, before the tool.
    assert_eq!(
        server.error("run_command", json!({})).await,
        "failed to deserialize parameters: missing field `cmd`"
    );
    let mistyped = server
        .error("run_command", json!({"cmd": "true", "timeout": "soon"}))
        .await;
    assert!(
        mistyped.starts_with("failed to deserialize parameters: invalid type: string \"soon\""),
        "{mistyped}"
    );

    // Output past 100,000 characters is cut, saying how much is left.
    let ran = server
        .json(
            "run_command",
            json!({"cmd": "python3 -c \"print('é' * 100010, end='')\""}),
        )
        .await;
    assert_eq!(ran["truncated"], true);
    assert_eq!(
        ran["stdout"].as_str().unwrap(),
        format!("{}\n[10 more characters]", "é".repeat(100_000))
    );
    // A file over 8 MiB: its first 100,000 characters, then how many of
    // its bytes were left out.
    let made = server
        .json(
            "run_command",
            json!({"cmd": "head -c 9437184 /dev/zero | tr '\\0' a > /home/user/big.txt"}),
        )
        .await;
    assert_eq!(made["exit_code"], 0, "{made}");
    let read = server
        .json("read_file", json!({"path": "/home/user/big.txt"}))
        .await;
    assert_eq!(read["size"], 9_437_184);
    assert_eq!(read["truncated"], true);
    assert_eq!(
        read["content"].as_str().unwrap(),
        format!("{}\n[9337184 more bytes]", "a".repeat(100_000))
    );

    // A directory of more than 1,000 entries lists 1,000.
    let made = server
        .json(
            "run_command",
            json!({"cmd": "mkdir -p /home/user/many && cd /home/user/many && seq 1 1001 | xargs touch"}),
        )
        .await;
    assert_eq!(made["exit_code"], 0, "{made}");
    let listed = server
        .json("list_files", json!({"path": "/home/user/many"}))
        .await;
    assert_eq!(listed["entries"].as_array().unwrap().len(), 1_000);
    assert_eq!(listed["truncated"], true);
    server.close().await;
}

/// What the log holds: the tool, sizes, duration, sandbox id, exit code
/// and error kind; never code, commands, file contents or outputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_holds_sizes_and_kinds_never_contents() {
    let server = Server::local(&[("RAYITO_MCP_LOG_LEVEL", "DEBUG")]).await;
    server
        .json("run_code", json!({"code": "print('CODE-MARKER-1')"}))
        .await;
    let ran = server
        .json(
            "run_command",
            json!({"cmd": "echo COMMAND-MARKER-2; exit 4"}),
        )
        .await;
    assert_eq!(ran["exit_code"], 4);
    server
        .json(
            "write_file",
            json!({"path": "/home/user/f.txt", "content": "CONTENT-MARKER-3"}),
        )
        .await;
    server
        .json("read_file", json!({"path": "/home/user/f.txt"}))
        .await;
    server
        .error("read_file", json!({"path": "/home/user/PATH-MARKER-4"}))
        .await;
    let log = server.close().await;
    for marker in ["MARKER-1", "MARKER-2", "MARKER-3", "MARKER-4"] {
        assert!(!log.contains(marker), "{marker} in the log:\n{log}");
    }
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("tool call")).collect();
    assert_eq!(lines.len(), 5, "{log}");
    assert!(lines[1].contains("tool=\"run_command\""), "{}", lines[1]);
    assert!(lines[1].contains("exit_code=4"), "{}", lines[1]);
    assert!(lines[1].contains("sandbox_id="), "{}", lines[1]);
    assert!(lines[1].contains("duration_ms="), "{}", lines[1]);
    assert!(lines[2].contains("bytes_in=16"), "{}", lines[2]);
    assert!(
        lines[4].contains("error_kind=\"file_not_found\""),
        "{}",
        lines[4]
    );
}

/// The first JSON block of docs/mcp.md that configures `mcpServers`: the
/// snippet a user pastes into an MCP client.
fn documented_snippet() -> Value {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/mcp.md"))
        .expect("docs/mcp.md");
    doc.split("```json")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .filter_map(|block| serde_json::from_str::<Value>(block).ok())
        .find(|v| v.get("mcpServers").is_some())
        .expect("a JSON block with mcpServers in docs/mcp.md")
}

/// The local-backend snippet of docs/mcp.md, started as an MCP client
/// starts it: its command found on PATH, its args and env, then a
/// conversation over stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_snippet_starts_a_working_server() {
    let snippet = documented_snippet();
    let entry = &snippet["mcpServers"]["rayito"];
    let command = entry["command"].as_str().expect("a command");
    assert_eq!(command, "rayito-mcp");
    let tmp = tempfile::tempdir().unwrap();
    // The user installed the binary on PATH (`cargo install`): here, the
    // directory of the one cargo built.
    let dir = std::path::Path::new(support::BINARY).parent().unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Resolved as the client would resolve it: by name, on PATH, with
    // none of this process's AWS or rayito settings.
    let mut cmd = tokio::process::Command::new(command);
    for (name, _) in std::env::vars() {
        if name.starts_with("AWS_") || name.starts_with("RAYITO_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("PATH", &path).env("TMPDIR", tmp.path());
    for arg in entry["args"].as_array().into_iter().flatten() {
        cmd.arg(arg.as_str().unwrap());
    }
    for (name, value) in entry["env"].as_object().into_iter().flatten() {
        cmd.env(name, value.as_str().unwrap());
    }
    let server = Server::spawn(cmd, tmp).await;
    let ran = server
        .json("run_command", json!({"cmd": "echo hello from the sandbox"}))
        .await;
    assert_eq!(ran["stdout"], "hello from the sandbox\n");
    let run = server.json("run_code", json!({"code": "6 * 7"})).await;
    assert_eq!(run["text"], "42");
    server.close().await;
}

/// One plain HTTP/1.1 request to `url` (`http://host:port/path?query`);
/// the status and body.
async fn http(method: &str, url: &str, headers: &Value, body: Vec<u8>) -> (u16, Vec<u8>) {
    use http_body_util::{BodyExt as _, Full};
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", authority);
    for (name, value) in headers.as_object().into_iter().flatten() {
        request = request.header(name.as_str(), value.as_str().unwrap());
    }
    let request = request
        .body(Full::new(hyper::body::Bytes::from(body)))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body.to_vec())
}

/// With a staging bucket (the local backend's own), `upload` hands out a
/// link whose bytes land in the sandbox, and `download` one that serves a
/// sandbox file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_and_download_links_move_bytes_through_the_staging_bucket() {
    let server = Server::local(&[("RAYITO_TRANSFER_BUCKET", rayito::LOCAL_BUCKET)]).await;

    let ticket = server
        .json("upload", json!({"path": "/home/user/in/data.txt"}))
        .await;
    assert_eq!(ticket["path"], "/home/user/in/data.txt");
    assert_eq!(ticket["method"], "PUT");
    assert!(ticket["expires_at"].as_str().unwrap().ends_with('Z'));
    let (status, _) = http(
        "PUT",
        ticket["url"].as_str().unwrap(),
        &ticket["headers"],
        b"uploaded bytes".to_vec(),
    )
    .await;
    assert_eq!(status, 200);
    // The agent polls for the object, then moves it into place.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let result = server
            .call("read_file", json!({"path": "/home/user/in/data.txt"}))
            .await;
        if result.is_error != Some(true) {
            assert_eq!(json_of(&result)["content"], "uploaded bytes");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{result:?}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }

    server
        .json(
            "write_file",
            json!({"path": "/home/user/out.txt", "content": "for the user"}),
        )
        .await;
    let link = server
        .json("download", json!({"path": "/home/user/out.txt"}))
        .await;
    assert_eq!(link["size"], 12);
    assert_eq!(link["sha256"].as_str().unwrap().len(), 64);
    let (status, body) = http("GET", link["url"].as_str().unwrap(), &json!({}), Vec::new()).await;
    assert_eq!(status, 200);
    assert_eq!(body, b"for the user");

    let log = server.close().await;
    assert!(!log.contains("X-Amz-Signature"), "{log}");
}
