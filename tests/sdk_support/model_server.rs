//! A scripted OpenAI-compatible model for the agent tests: never a real
//! model. An HTTPS server on 127.0.0.1 (a certificate for a host name of
//! the test's choice, signed by a CA made at start) that the emulator's
//! agents trust and dial through [`ModelServer::trust_on`], so a sandbox
//! reaches it only through a secret gateway, as a real provider.
//!
//! It serves `POST <any>/chat/completions` and `POST <any>/responses`, with
//! or without `"stream": true` (server-sent events, usage in the last
//! chunk). Each request takes the next [`Reply`] of the script (the last
//! one repeats when the script runs out) and is recorded with its headers
//! and JSON body.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use rayito_emulator::TestUpstream;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// The assistant's text, with its usage (input, output tokens).
    Text(String, (u64, u64)),
    /// One tool call (`id`, function name, arguments as JSON), with usage.
    Tool(String, String, Value, (u64, u64)),
    /// An HTTP error status with an OpenAI-style error body.
    Error(u16),
}

/// One request the model received.
#[derive(Clone)]
pub struct ModelRequest {
    /// The path as received.
    pub path: String,
    /// The headers (lower-case names), values included: compared, never printed.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Null` if not JSON).
    pub body: Value,
}

impl ModelRequest {
    /// The values of header `name`.
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

impl std::fmt::Debug for ModelRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRequest")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    last: Option<Reply>,
    seen: Vec<ModelRequest>,
}

type Shared = Arc<Mutex<State>>;

/// The scripted model; stopped when dropped. Its HTTPS (the CA, the
/// certificate, the serving loop) is the emulator's [`TestUpstream`]'s.
pub struct ModelServer {
    upstream: TestUpstream,
    state: Shared,
}

impl std::fmt::Debug for ModelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelServer")
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

impl ModelServer {
    /// Serves `https://<host>` with `script`.
    pub async fn start(host: &str, script: Vec<Reply>) -> ModelServer {
        let state = Shared::new(Mutex::new(State {
            script: script.into(),
            ..State::default()
        }));
        let answering = state.clone();
        let upstream =
            TestUpstream::start_with(host, move |parts, body| answer(parts, &body, &answering))
                .await
                .expect("the model server starts");
        ModelServer { upstream, state }
    }

    /// `https://<host>`: the gateway's upstream.
    pub fn url(&self) -> String {
        self.upstream.url()
    }

    /// Where it listens (what a local backend dials for its host).
    pub fn addr(&self) -> std::net::SocketAddr {
        self.upstream.addr()
    }

    /// The PEM of the CA that signed its certificate.
    pub fn ca_pem(&self) -> &str {
        self.upstream.ca_pem()
    }

    /// Makes the emulator's agents trust this server and dial its host here.
    pub fn trust_on(&self, upstreams: &rayito_agent::gateway::LocalUpstreams) {
        self.upstream.trust_on(upstreams);
    }

    /// Replaces the script.
    pub fn script(&self, replies: Vec<Reply>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.script = replies.into();
        state.last = None;
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .seen
            .clone()
    }
}

fn answer(parts: &http::request::Parts, bytes: &Bytes, state: &Shared) -> http::Response<Bytes> {
    let body: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let path = parts.uri.path().to_owned();
    let headers = parts
        .headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let reply = {
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        state.seen.push(ModelRequest {
            path: path.clone(),
            headers,
            body: body.clone(),
        });
        let next = state.script.pop_front().or_else(|| state.last.clone());
        state.last.clone_from(&next);
        next.unwrap_or(Reply::Text(String::new(), (0, 0)))
    };
    let stream = body.get("stream") == Some(&Value::Bool(true));
    let responses = path.ends_with("/responses");
    let (status, content_type, text) = match (&reply, responses, stream) {
        (Reply::Error(status), _, _) => (
            *status,
            "application/json",
            json!({"error": {"message": "scripted failure", "type": "server_error"}}).to_string(),
        ),
        (_, false, false) => (200, "application/json", chat_json(&reply).to_string()),
        (_, false, true) => (200, "text/event-stream", chat_sse(&reply)),
        (_, true, false) => (200, "application/json", responses_json(&reply).to_string()),
        (_, true, true) => (200, "text/event-stream", responses_sse(&reply)),
    };
    http::Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Bytes::from(text))
        .unwrap_or_default()
}

fn usage(reply: &Reply) -> (u64, u64) {
    match reply {
        Reply::Text(_, u) | Reply::Tool(_, _, _, u) => *u,
        Reply::Error(_) => (0, 0),
    }
}

fn chat_usage(reply: &Reply) -> Value {
    let (input, output) = usage(reply);
    json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output})
}

fn chat_json(reply: &Reply) -> Value {
    let (message, finish) = match reply {
        Reply::Tool(id, name, args, _) => (
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": id, "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]}),
            "tool_calls",
        ),
        Reply::Text(text, _) => (json!({"role": "assistant", "content": text}), "stop"),
        Reply::Error(_) => (json!({}), "stop"),
    };
    json!({
        "id": "chatcmpl-scripted", "object": "chat.completion", "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": chat_usage(reply),
    })
}

fn sse(events: &[Value]) -> String {
    let mut out = String::new();
    for event in events {
        out.push_str("data: ");
        out.push_str(&event.to_string());
        out.push_str("\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    out
}

fn chat_sse(reply: &Reply) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": "scripted",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = Vec::new();
    match reply {
        Reply::Text(text, _) => {
            // Two pieces, so that a client sees a real stream.
            let mid = text
                .char_indices()
                .nth(text.chars().count() / 2)
                .map_or(0, |(i, _)| i);
            events.push(chunk(
                json!({"role": "assistant", "content": &text[..mid]}),
                Value::Null,
            ));
            events.push(chunk(json!({"content": &text[mid..]}), Value::Null));
            events.push(chunk(json!({}), json!("stop")));
        }
        Reply::Tool(id, name, args, _) => {
            events.push(chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": id, "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}}]}),
                Value::Null,
            ));
            events.push(chunk(json!({}), json!("tool_calls")));
        }
        Reply::Error(_) => {}
    }
    events.push(
        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                       "choices": [], "usage": chat_usage(reply)}),
    );
    sse(&events)
}

fn responses_json(reply: &Reply) -> Value {
    let (input, output) = usage(reply);
    let item = match reply {
        Reply::Tool(id, name, args, _) => json!({"type": "function_call", "call_id": id,
            "name": name, "arguments": args.to_string()}),
        Reply::Text(text, _) => json!({"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": text}]}),
        Reply::Error(_) => json!({}),
    };
    json!({"id": "resp-scripted", "object": "response", "status": "completed", "output": [item],
           "usage": {"input_tokens": input, "output_tokens": output, "total_tokens": input + output}})
}

fn responses_sse(reply: &Reply) -> String {
    let mut events = Vec::new();
    if let Reply::Text(text, _) = reply {
        events.push(json!({"type": "response.output_text.delta", "delta": text}));
    }
    events.push(json!({"type": "response.completed", "response": responses_json(reply)}));
    sse(&events)
}
