//! A scripted OpenAI-compatible model server on host loopback.
//!
//! It is the trusted upstream of `stockade demo` and of the end-to-end tests: it answers
//! `POST /v1/chat/completions` (and `/chat/completions`) with replies from a fixed script, and
//! it **refuses every request that does not carry `Authorization: Bearer <key>`** with the key
//! it was started with. A worker inside the sandbox never holds that key, so a successful
//! request proves the gateway injected it on the host side.
//!
//! What it does not do: it is not a language model, it does not follow the conversation, and
//! it does not listen anywhere but `127.0.0.1`. Streaming requests (`"stream": true`) receive
//! server-sent events framed as the OpenAI API frames them, delivered in one response body.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde_json::{Value, json};
use stockade_policy::{Origin, Scheme};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Largest request body the server reads (bytes); larger requests get `413`.
pub const MAX_REQUEST_BODY: usize = 8 * 1024 * 1024;

/// One tool call in a scripted reply (OpenAI function-calling shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScriptedToolCall {
    /// The function name, for example `bash`.
    pub name: String,
    /// The arguments as a JSON text, for example `{"command":"ls"}`.
    pub arguments: String,
}

/// One scripted assistant reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScriptedReply {
    /// The assistant message text, if any.
    pub content: Option<String>,
    /// Tool calls the assistant makes, in order.
    pub tool_calls: Vec<ScriptedToolCall>,
}

impl ScriptedReply {
    /// A plain text reply.
    pub fn text(content: impl Into<String>) -> Self {
        ScriptedReply {
            content: Some(content.into()),
            tool_calls: Vec::new(),
        }
    }

    /// A reply with a short text and one `bash` tool call running `command`.
    pub fn bash(thought: impl Into<String>, command: &str) -> Self {
        ScriptedReply {
            content: Some(thought.into()),
            tool_calls: vec![ScriptedToolCall {
                name: "bash".to_owned(),
                arguments: json!({ "command": command }).to_string(),
            }],
        }
    }
}

/// How the server is started.
#[derive(Debug, Clone)]
pub struct ModelServerConfig {
    /// The key every request must present as `Authorization: Bearer <key>`.
    pub api_key: String,
    /// The model name reported in replies.
    pub model: String,
    /// Replies in order: the n-th authorized completion request gets `replies[n]`; requests
    /// past the end get the last reply again (or an empty text reply if the script is empty).
    pub replies: Vec<ScriptedReply>,
}

/// What the server saw of one request (the key itself is never recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Request path (without query).
    pub path: String,
    /// Whether the request carried the expected bearer key.
    pub authorized: bool,
    /// Whether the client asked for a streamed (SSE) reply.
    pub stream: bool,
    /// The request body, if it was valid JSON.
    pub body: Option<Value>,
    /// The HTTP status the server answered with.
    pub status: u16,
}

#[derive(Debug)]
struct Shared {
    config: ModelServerConfig,
    log: Mutex<Vec<RecordedRequest>>,
    served: Mutex<usize>,
}

/// A running scripted model server. Dropping it stops accepting connections.
#[derive(Debug)]
pub struct ScriptedModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl ScriptedModelServer {
    /// Binds `127.0.0.1:0` and starts serving on the current tokio runtime.
    pub async fn start(config: ModelServerConfig) -> std::io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config,
            log: Mutex::new(Vec::new()),
            served: Mutex::new(0),
        });
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&shared), stop_rx));
        Ok(ScriptedModelServer {
            addr,
            shared,
            stop,
            task: Some(task),
        })
    }

    /// The socket address the server listens on (always on host loopback).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's exact origin, `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> Result<Origin, stockade_policy::OriginError> {
        Origin::new(Scheme::Http, "127.0.0.1", self.addr.port())
    }

    /// Every request seen so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many completion requests were answered with a scripted reply.
    pub fn completions_served(&self) -> usize {
        *self
            .shared
            .served
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the server and waits for the accept loop to end.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ScriptedModelServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => {
                let Ok((stream, _peer)) = accepted else { continue };
                let shared = Arc::clone(&shared);
                let mut conn_stop = stop.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(Arc::clone(&shared), req));
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = conn_stop.changed() => {}
                    }
                });
            }
        }
    }
}

fn respond(
    status: StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

fn error_json(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = json!({ "error": { "message": message, "type": "stockade_scripted_model", "code": status.as_u16() } });
    respond(status, "application/json", body.to_string())
}

async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let expected = format!("Bearer {}", shared.config.api_key);
    let authorized = !shared.config.api_key.is_empty()
        && req
            .headers()
            .get_all(hyper::header::AUTHORIZATION)
            .iter()
            .filter(|v| v.as_bytes() == expected.as_bytes())
            .count()
            == 1
        && req
            .headers()
            .get_all(hyper::header::AUTHORIZATION)
            .iter()
            .count()
            == 1;
    let body_bytes = match Limited::new(req.into_body(), MAX_REQUEST_BODY)
        .collect()
        .await
    {
        Ok(collected) => Some(collected.to_bytes()),
        Err(_) => None,
    };
    let body: Option<Value> = body_bytes
        .as_ref()
        .and_then(|b| serde_json::from_slice(b).ok());
    let stream = body
        .as_ref()
        .and_then(|b| b.get("stream"))
        .and_then(Value::as_bool)
        .unwrap_or(false);

    let response = if body_bytes.is_none() {
        error_json(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body too large or unreadable",
        )
    } else if !authorized {
        error_json(StatusCode::UNAUTHORIZED, "missing or wrong api key")
    } else {
        match (&method, path.trim_end_matches('/')) {
            (&Method::GET, "/v1/models" | "/models") => {
                let body = json!({ "object": "list", "data": [{ "id": shared.config.model, "object": "model", "owned_by": "stockade" }] });
                respond(StatusCode::OK, "application/json", body.to_string())
            }
            (&Method::POST, "/v1/chat/completions" | "/chat/completions") => match &body {
                Some(_) => {
                    let reply = next_reply(&shared);
                    if stream {
                        respond(
                            StatusCode::OK,
                            "text/event-stream",
                            sse_body(&shared.config.model, &reply),
                        )
                    } else {
                        respond(
                            StatusCode::OK,
                            "application/json",
                            completion_body(&shared.config.model, &reply).to_string(),
                        )
                    }
                }
                None => error_json(StatusCode::BAD_REQUEST, "request body is not json"),
            },
            _ => error_json(
                StatusCode::NOT_FOUND,
                "no such endpoint on the scripted model server",
            ),
        }
    };
    let record = RecordedRequest {
        method: method.to_string(),
        path,
        authorized,
        stream,
        body,
        status: response.status().as_u16(),
    };
    shared
        .log
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(record);
    Ok(response)
}

fn next_reply(shared: &Shared) -> ScriptedReply {
    let mut served = shared.served.lock().unwrap_or_else(PoisonError::into_inner);
    let replies = &shared.config.replies;
    let reply = replies
        .get(*served)
        .or_else(|| replies.last())
        .cloned()
        .unwrap_or_else(|| ScriptedReply::text(""));
    *served += 1;
    reply
}

fn tool_calls_json(reply: &ScriptedReply) -> Vec<Value> {
    reply
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            json!({
                "index": i,
                "id": format!("call_stockade_{i}"),
                "type": "function",
                "function": { "name": call.name, "arguments": call.arguments },
            })
        })
        .collect()
}

fn finish_reason(reply: &ScriptedReply) -> &'static str {
    if reply.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

/// The non-streamed chat completion body for `reply`.
pub fn completion_body(model: &str, reply: &ScriptedReply) -> Value {
    let mut message = json!({ "role": "assistant", "content": reply.content });
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls_json(reply));
    }
    json!({
        "id": "chatcmpl-stockade",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{ "index": 0, "message": message, "finish_reason": finish_reason(reply) }],
        "usage": { "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 },
    })
}

/// The server-sent-events body for `reply` (role chunk, content chunk, tool-call chunk, finish
/// chunk, `[DONE]`).
pub fn sse_body(model: &str, reply: &ScriptedReply) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": "chatcmpl-stockade",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        })
    };
    let mut events = vec![chunk(json!({ "role": "assistant", "content": "" }), None)];
    if let Some(content) = &reply.content {
        events.push(chunk(json!({ "content": content }), None));
    }
    if !reply.tool_calls.is_empty() {
        events.push(chunk(json!({ "tool_calls": tool_calls_json(reply) }), None));
    }
    events.push(chunk(json!({}), Some(finish_reason(reply))));
    let mut out = String::new();
    for event in events {
        out.push_str("data: ");
        out.push_str(&event.to_string());
        out.push_str("\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    async fn raw(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    fn post(auth: Option<&str>, body: &str) -> String {
        let auth = auth
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    async fn server() -> ScriptedModelServer {
        ScriptedModelServer::start(ModelServerConfig {
            api_key: "sk-test-123".into(),
            model: "scripted".into(),
            replies: vec![
                ScriptedReply::text("first"),
                ScriptedReply::bash("run it", "echo hi"),
            ],
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn refuses_missing_and_wrong_keys_and_serves_the_script_in_order() {
        let s = server().await;
        assert!(s.addr().ip().is_loopback());
        let body = r#"{"model":"m","messages":[]}"#;
        assert!(
            raw(s.addr(), &post(None, body))
                .await
                .starts_with("HTTP/1.1 401")
        );
        assert!(
            raw(s.addr(), &post(Some("Bearer sk-wrong"), body))
                .await
                .starts_with("HTTP/1.1 401")
        );
        assert!(
            raw(s.addr(), &post(Some("sk-test-123"), body))
                .await
                .starts_with("HTTP/1.1 401")
        );
        let first = raw(s.addr(), &post(Some("Bearer sk-test-123"), body)).await;
        assert!(first.starts_with("HTTP/1.1 200"), "{first}");
        assert!(first.contains("\"first\""));
        let second = raw(s.addr(), &post(Some("Bearer sk-test-123"), body)).await;
        assert!(
            second.contains("tool_calls") && second.contains("echo hi"),
            "{second}"
        );
        // Past the end of the script the last reply repeats.
        let third = raw(s.addr(), &post(Some("Bearer sk-test-123"), body)).await;
        assert!(third.contains("echo hi"));
        let log = s.requests();
        assert_eq!(log.len(), 6);
        assert_eq!(log.iter().filter(|r| r.authorized).count(), 3);
        assert_eq!(s.completions_served(), 3);
        // The key is never recorded.
        assert!(!format!("{log:?}").contains("sk-test-123"));
        s.shutdown().await;
    }

    #[tokio::test]
    async fn streams_server_sent_events_when_asked() {
        let s = server().await;
        let out = raw(
            s.addr(),
            &post(
                Some("Bearer sk-test-123"),
                r#"{"stream":true,"messages":[]}"#,
            ),
        )
        .await;
        assert!(out.contains("text/event-stream"), "{out}");
        assert!(out.contains("chat.completion.chunk"));
        assert!(out.trim_end().ends_with("data: [DONE]"));
        assert!(s.requests()[0].stream);
    }

    #[tokio::test]
    async fn two_authorization_headers_are_refused() {
        let s = server().await;
        let body = "{}";
        let req = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer sk-test-123\r\nAuthorization: Bearer other\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        assert!(raw(s.addr(), &req).await.starts_with("HTTP/1.1 401"));
    }

    #[test]
    fn completion_body_has_the_openai_shape() {
        let v = completion_body("m", &ScriptedReply::bash("t", "ls"));
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            v["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
            "bash"
        );
        let args: Value = serde_json::from_str(
            v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(args["command"], "ls");
    }
}
