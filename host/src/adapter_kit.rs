//! `gateway adapter test PATH.wasm FIXTURES_DIR`: runs a vendor adapter
//! component (text or video), with no network, against recorded fixtures,
//! in the same sandbox and with the same checks as a running gateway.
//!
//! A fixture is one JSON file (`*.json`) describing one call; a text
//! adapter's:
//!
//! ```text
//! {
//!   "client_protocol": "anthropic-messages",    // openai-chat, openai-completions,
//!                                               // openai-responses, anthropic-messages, gemini
//!   "model": "claude-sonnet-4-5",                // the client's model name
//!   "upstream_model": "claude-sonnet-4-5-20250929", // the channel's (default: model)
//!   "stream": false,
//!   "request_id": "req_fixture",                 // default
//!   "client_headers": {"anthropic-version": "2023-06-01"},
//!   "channel_options": {"api_version": "v1beta"},
//!   "client_request": { ... },                   // the client's body
//!   "vendor_request": {"method": "POST", "path": "/messages",
//!                      "headers": {"anthropic-version": "2023-06-01"}, "body": { ... }},
//!   // then the vendor's answer: a non-streamed one ...
//!   "vendor_response": {"status": 200, "headers": {}, "body": { ... }},
//!   "client_response": {"status": 200, "body": { ... }},
//!   // ... or a stream (server-sent events as the vendor sent them) ...
//!   "vendor_stream": "event: message_start\ndata: {...}\n\n...",
//!   "client_stream": [{"event": "message_start", "data": { ... }}, ...],
//!   "stream_complete": true,
//!   // ... or an error (a non-2xx `vendor_response`):
//!   "error": {"status": 429, "code": "upstream_rate_limited", "retryable": true,
//!             "retry_after_secs": 7},
//!   "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 0,
//!             "cache_write_tokens": 0, "reasoning_tokens": 0}
//! }
//! ```
//!
//! `vendor_request.answer` is there when the adapter asks for more than a
//! translation: `"relay"` (the host relays the answer), or
//! `{"splice": "<model>"}` (the host relays a stream's ordinary events,
//! and finishes an ordinary non-streamed answer, itself: `relay::splice`).
//! Every streamed fixture is run twice through the translator: each event
//! pushed, then all of them given to `finish` as its `rest` (as the relay
//! gives it a stream's last events when they come with its end); and once
//! more spliced, for an adapter that asks for the splice. It fails if the
//! client's events differ by a byte, or the error or the end; a
//! non-streamed one fails if the answer the host would finish differs
//! from the translator's as JSON or in its usage.
//!
//! A video adapter's fixture describes one of its three calls instead, with
//! the host's validated submission or the vendor's task id as input:
//!
//! ```text
//! {
//!   "call": "submit",                            // submit, poll or content
//!   "request_id": "req_fixture",                 // default; also the submission's
//!   "video_request": {"upstream_model": "gen-2", "prompt": "a fox", "seconds": 4,
//!                     "size": "1280x720", "ratio": "16:9"},      // submit
//!   "upstream_task_id": "vt_1",                  // poll and content
//!   "vendor_request": {"method": "POST", "path": "/video/tasks",
//!                      "headers": {"idempotency-key": "req_fixture"}, "body": { ... }},
//!   // then, for submit and poll, the vendor's answer (any status) ...
//!   "vendor_response": {"status": 200, "body": {"task_id": "vt_1", "status": "pending"}},
//!   // ... and what the adapter read from it: a submission's task id ...
//!   "task_id": "vt_1",
//!   // ... a poll's status (state: queued, in_progress, completed, failed,
//!   // rejected) ...
//!   "task_status": {"state": "completed", "progress": 100, "actual_seconds": 4,
//!                   "error_message": null},
//!   // ... or why it could not (also `request_error`, when the adapter
//!   // refuses to build the request):
//!   "response_error": "unreadable upstream answer: upstream answered 404: ..."
//! }
//! ```
//!
//! A content call has no `vendor_response`: the host relays the download
//! itself, so only the request is the adapter's.
//!
//! Every expectation is compared exactly, except that the string `"<any>"`
//! matches any value and `vendor_request.headers` lists only the headers to
//! check. The adapter's clock reads [`KIT_CLOCK_SECS`], so timestamps it
//! makes itself repeat. A mismatch prints the JSON path, what was
//! expected and what came; any failure makes the command exit non-zero.
//! `--update` writes what came into the expectations instead (review the
//! diff before committing it).

use crate::billing::usage::Usage;
use crate::config::PluginConfig;
use crate::plugins::bindings::types::{Header, Protocol, RequestCtx, Setting, SseEvent};
use crate::plugins::registry::{load_file, AdapterPlugin, Loaded, VideoPlugin};
use crate::plugins::sandbox::Sandbox;
use crate::plugins::session::{
    AdapterError, AdapterSession, AnswerMode, OutboundBody, OutboundRequest, StreamClose,
    TaskState, UpstreamTaskStatus, VideoRequest, VideoSession,
};
use crate::relay::alike::{self, Word};
use crate::relay::splice::Splice;
use axum::http::StatusCode;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// The wildcard expectation.
const ANY: &str = "<any>";

/// What the adapter's clock reads under the kit (2023-11-14T22:13:20Z), so
/// timestamps an adapter makes itself are the same in every run.
pub const KIT_CLOCK_SECS: i64 = 1_700_000_000;

/// A client protocol by its table name (`openai-chat`, `embeddings`, ...).
fn protocol_named(name: &str) -> Option<Protocol> {
    crate::protocol::ALL
        .iter()
        .find(|p| p.name == name)
        .map(|p| p.protocol)
}

/// Differences between `expected` and `got`, one line each, with paths.
pub fn diff(path: &str, expected: &Value, got: &Value, out: &mut Vec<String>) {
    if expected == &Value::String(ANY.into()) {
        return;
    }
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            for (k, ev) in e {
                match g.get(k) {
                    Some(gv) => diff(&format!("{path}.{k}"), ev, gv, out),
                    None => out.push(format!("{path}.{k}: expected {ev}, but it is missing")),
                }
            }
            for k in g.keys().filter(|k| !e.contains_key(*k)) {
                out.push(format!("{path}.{k}: not expected, got {}", g[k]));
            }
        }
        (Value::Array(e), Value::Array(g)) => {
            for (i, (ev, gv)) in e.iter().zip(g).enumerate() {
                diff(&format!("{path}[{i}]"), ev, gv, out);
            }
            if e.len() != g.len() {
                out.push(format!(
                    "{path}: expected {} elements, got {}",
                    e.len(),
                    g.len()
                ));
            }
        }
        (e, g) if e == g => {}
        (e, g) => out.push(format!("{path}: expected {e}, got {g}")),
    }
}

fn usage_json(u: &Option<Usage>) -> Value {
    let Some(u) = u else { return Value::Null };
    let mut v = json!({
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_tokens": u.cache_read_tokens,
        "cache_write_tokens": u.cache_write_tokens,
        "reasoning_tokens": u.reasoning_tokens,
    });
    // Listed only when there are any, so chat fixtures stay short.
    if !u.meters.is_empty() {
        let meters: Vec<Value> = u
            .meters
            .iter()
            .map(|m| json!({"kind": format!("{:?}", m.kind), "quantity": m.quantity, "detail": m.detail}))
            .collect();
        v["meters"] = json!(meters);
    }
    v
}

/// A body as JSON when it is JSON, else as text.
fn body_json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

fn pairs(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| v.to_string()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What one fixture produced, in the fixture's own terms.
struct Outcome {
    got: Map<String, Value>,
}

/// The fixture's `request_id`, or the default.
fn request_id(case: &Value) -> &str {
    case.get("request_id")
        .and_then(Value::as_str)
        .unwrap_or("req_fixture")
}

/// The request the adapter built, as a fixture writes it: of its headers,
/// only those the fixture's `vendor_request.headers` lists.
fn vendor_request_json(out: &OutboundRequest, case: &Value) -> Value {
    let mut headers = Map::new();
    let wanted = pairs(case.get("vendor_request").and_then(|r| r.get("headers")));
    for (name, _) in &wanted {
        let values: Vec<&str> = out
            .headers
            .get_all(name.as_str())
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if !values.is_empty() {
            headers.insert(name.clone(), json!(values.join(",")));
        }
    }
    let mut vendor_request = json!({
        "method": out.method.as_str(),
        "path": out.path,
        "headers": headers,
        "body": match &out.body {
            OutboundBody::Bytes(b) => body_json(b),
            OutboundBody::ClientBody => json!("<the client's body>"),
            OutboundBody::ClientForm(fields) => json!({
                "<the client's form, with>": fields.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<String, Value>>()
            }),
        },
    });
    match &out.answer {
        AnswerMode::Relay(_) => vendor_request["answer"] = json!("relay"),
        AnswerMode::Splice { model, .. } => vendor_request["answer"] = json!({ "splice": model }),
        AnswerMode::Translate => {}
    }
    vendor_request
}

/// A recorded vendor answer: its status (default 200), headers, and body
/// (a string as it is, any other JSON as its text).
fn vendor_answer(resp: &Value) -> (u16, Vec<Header>, Vec<u8>) {
    let status = resp.get("status").and_then(Value::as_u64).unwrap_or(200) as u16;
    let headers = pairs(resp.get("headers"))
        .into_iter()
        .map(|(name, value)| Header {
            name: name.to_ascii_lowercase(),
            value,
        })
        .collect();
    let body = match resp.get("body") {
        Some(Value::String(s)) => s.clone().into_bytes(),
        Some(v) => v.to_string().into_bytes(),
        None => Vec::new(),
    };
    (status, headers, body)
}

async fn run_case(
    sandbox: &Arc<Sandbox>,
    plugin: &Arc<AdapterPlugin>,
    case: &Value,
) -> Result<Outcome, String> {
    let field = |k: &str| case.get(k);
    let protocol_name = field("client_protocol")
        .and_then(Value::as_str)
        .ok_or("`client_protocol` is missing")?;
    let protocol = protocol_named(protocol_name)
        .ok_or_else(|| format!("unknown client protocol `{protocol_name}`"))?;
    let model = field("model")
        .and_then(Value::as_str)
        .ok_or("`model` is missing")?;
    let ctx = RequestCtx {
        client_protocol: protocol,
        model: model.to_string(),
        upstream_model: field("upstream_model")
            .and_then(Value::as_str)
            .unwrap_or(model)
            .to_string(),
        stream: field("stream").and_then(Value::as_bool).unwrap_or(false),
        request_id: request_id(case).to_string(),
        // Filtered as a running gateway filters them.
        client_headers: pairs(field("client_headers"))
            .into_iter()
            .map(|(name, value)| Header {
                name: name.to_ascii_lowercase(),
                value,
            })
            .filter(|h| crate::protocol::FORWARDED_CLIENT_HEADERS.contains(&h.name.as_str()))
            .collect(),
        channel_options: pairs(field("channel_options"))
            .into_iter()
            .map(|(key, value)| Setting { key, value })
            .collect(),
    };
    let client_body = field("client_request")
        .ok_or("`client_request` is missing")?
        .to_string();
    let mut got = Map::new();
    let mut session = AdapterSession::start(sandbox, plugin, &ctx.request_id)
        .await
        .map_err(|e| e.to_string())?;
    let out = match session
        .translate_request(&ctx, client_body.as_bytes())
        .await
    {
        Ok(out) => out,
        Err(e) => {
            got.insert("request_error".into(), json!(e.to_string()));
            return Ok(Outcome { got });
        }
    };
    got.insert("vendor_request".into(), vendor_request_json(&out, case));
    // A word that calls alike get the host's edit must hold for this one.
    if matches!(
        out.answer,
        AnswerMode::Splice {
            alike_requests: true,
            ..
        }
    ) {
        if let Word::Broken(why) =
            alike::check(plugin.vendor_protocol, &ctx, client_body.as_bytes(), &out)
        {
            return Err(format!(
                "the adapter says calls alike to this one get the request the host's edit \
                 makes, but {why}"
            ));
        }
    }
    // A relayed answer never reaches the adapter: its usage is known now.
    if let AnswerMode::Relay(u) = &out.answer {
        got.insert("usage".into(), usage_json(&Some(u.clone())));
    }
    let splice = match &out.answer {
        AnswerMode::Splice { model, .. } => {
            Splice::asked(ctx.client_protocol, plugin.vendor_protocol, model)
        }
        _ => None,
    };
    let state = out.state;
    if let Some(resp) = field("vendor_response") {
        let (status, vendor_headers, body) = vendor_answer(resp);
        if (200..300).contains(&status) {
            // The answer the host would finish itself (on the adapter's
            // word) must be the translator's.
            let finished = splice.as_ref().and_then(|s| s.finish(&body));
            match session
                .translate_response(&ctx, &state, status, &vendor_headers, &body)
                .await
            {
                Ok(a) => {
                    let client = body_json(&a.body);
                    if let Some(done) = finished {
                        let spliced = body_json(&done.body);
                        if a.status != StatusCode::OK || spliced != client || done.usage != a.usage
                        {
                            return Err(format!(
                                "the adapter asks the host to splice, but the answer the host \
                                 finishes ({spliced}, usage {}) differs from its translator's \
                                 ({client}, status {}, usage {})",
                                usage_json(&done.usage),
                                a.status.as_u16(),
                                usage_json(&a.usage)
                            ));
                        }
                    }
                    got.insert(
                        "client_response".into(),
                        json!({"status": a.status.as_u16(), "body": client}),
                    );
                    got.insert("usage".into(), usage_json(&a.usage));
                }
                Err(e) => {
                    if finished.is_some() {
                        return Err(format!(
                            "the adapter asks the host to splice, but refuses an answer the \
                             host finishes itself: {e}"
                        ));
                    }
                    got.insert("response_error".into(), json!(e.to_string()));
                }
            }
        } else {
            let e = session
                .translate_error(&ctx, status, &vendor_headers, &body)
                .await
                .map_err(|e| e.to_string())?;
            got.insert(
                "error".into(),
                json!({"status": e.status.as_u16(), "code": e.code, "message": e.message,
                       "retryable": e.retryable, "retry_after_secs": e.retry_after_secs}),
            );
        }
    } else if let Some(stream) = field("vendor_stream").and_then(Value::as_str) {
        let run = translate_stream(&mut session, &ctx, &state, stream, None, Feed::Pushed).await?;
        // The translator must answer the same whether the events come
        // pushed or with the stream's end (`finish`'s `rest`).
        let at_end =
            translate_stream(&mut session, &ctx, &state, stream, None, Feed::AtEnd).await?;
        if let Some(why) = run.differs_from(&at_end) {
            return Err(format!(
                "the adapter's translator answers differently when the stream's events \
                 come with its end (`finish`'s `rest`) than when they are pushed: {why}"
            ));
        }
        // An adapter that asks the host to splice must answer the same
        // either way: the stream again, its ordinary events the host's.
        if let Some(splice) = splice {
            let spliced = translate_stream(
                &mut session,
                &ctx,
                &state,
                stream,
                Some(splice),
                Feed::Pushed,
            )
            .await?;
            if let Some(why) = run.differs_from(&spliced) {
                return Err(format!(
                    "the adapter asks the host to splice its stream, but the spliced \
                     stream differs from its translator's: {why}"
                ));
            }
        }
        let StreamRun { client, error, end } = run;
        if let Some(e) = error {
            got.insert("stream_error".into(), json!(e));
        }
        got.insert(
            "client_stream".into(),
            Value::Array(
                client
                    .into_iter()
                    .map(|e| {
                        let mut o = Map::new();
                        if let Some(name) = e.event {
                            o.insert("event".into(), json!(name));
                        }
                        o.insert(
                            "data".into(),
                            serde_json::from_str(&e.data).unwrap_or(Value::String(e.data)),
                        );
                        Value::Object(o)
                    })
                    .collect(),
            ),
        );
        got.insert("stream_complete".into(), json!(end.complete));
        got.insert("usage".into(), usage_json(&end.usage));
    }
    Ok(Outcome { got })
}

/// What a fixture's vendor stream came to.
struct StreamRun {
    /// The client's events, the closing ones included when complete.
    client: Vec<SseEvent>,
    /// The translator's failure, which ended the stream.
    error: Option<String>,
    end: StreamClose,
}

impl StreamRun {
    /// How `other` differs from this run, if it does: each event's name
    /// and data compared as text, then the end.
    fn differs_from(&self, other: &StreamRun) -> Option<String> {
        fn events(r: &StreamRun) -> Vec<(Option<&str>, &str)> {
            r.client
                .iter()
                .map(|e| (e.event.as_deref(), e.data.as_str()))
                .collect()
        }
        let (mine, theirs) = (events(self), events(other));
        if let Some(i) = (0..mine.len().max(theirs.len())).find(|&i| mine.get(i) != theirs.get(i)) {
            return Some(format!(
                "client event {i}: {:?} against {:?}",
                theirs.get(i),
                mine.get(i)
            ));
        }
        if self.error != other.error {
            return Some(format!("error {:?} against {:?}", other.error, self.error));
        }
        if self.end.complete != other.end.complete || self.end.usage != other.end.usage {
            return Some(format!(
                "end (complete, usage) {:?} against {:?}",
                (other.end.complete, &other.end.usage),
                (self.end.complete, &self.end.usage)
            ));
        }
        None
    }
}

/// How a fixture's vendor events reach the translator.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Feed {
    /// Each pushed, then `finish` with no events: the relay's way when
    /// events come one at a time.
    Pushed,
    /// All (after the splice's, if any) given to `finish` as its `rest`:
    /// the relay's way when a stream's last events come with its end.
    AtEnd,
}

/// Runs `stream` (server-sent events as the vendor sent them) through a new
/// translator, with the host's splice in front of it when given, as the
/// relay does.
async fn translate_stream(
    session: &mut AdapterSession,
    ctx: &RequestCtx,
    state: &str,
    stream: &str,
    mut splice: Option<Splice>,
    feed: Feed,
) -> Result<StreamRun, String> {
    use futures_util::StreamExt;
    let translator = session
        .open_stream(ctx, state)
        .await
        .map_err(|e| e.to_string())?;
    let bytes = futures_util::stream::iter(vec![Ok::<_, std::io::Error>(bytes::Bytes::from(
        stream.to_string(),
    ))]);
    let mut events = Box::pin(crate::sse::events(bytes, crate::sse::DEFAULT_MAX_PENDING));
    let mut client = Vec::new();
    let mut error = None;
    let mut rest = Vec::new();
    while let Some(ev) = events.next().await {
        let ev = ev.map_err(|e| format!("the fixture's stream is not SSE: {e}"))?;
        let sse = SseEvent {
            event: ev.event,
            data: ev.data,
        };
        if let Some(spliced) = splice
            .as_mut()
            .and_then(|s| s.relay(&sse, &mut String::new()))
        {
            client.push(spliced);
            continue;
        }
        if feed == Feed::AtEnd {
            rest.push(sse);
            continue;
        }
        match session.push(translator, &sse).await {
            Ok(out) => client.extend(out),
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    let end = session
        .finish(translator, &rest)
        .await
        .map_err(|e| e.to_string())?;
    client.extend(end.rest_events.iter().cloned());
    if let Some(e) = &end.rest_failed {
        error = Some(AdapterError::Plugin(e.clone()).to_string());
    }
    // A failed stream ends with its failure, as the relay ends it.
    if end.complete && error.is_none() {
        client.extend(end.events.iter().cloned());
    }
    Ok(StreamRun { client, error, end })
}

/// A poll's reading in the fixture's terms.
fn task_status_json(s: &UpstreamTaskStatus) -> Value {
    let state = match s.state {
        TaskState::Queued => "queued",
        TaskState::InProgress => "in_progress",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Rejected => "rejected",
    };
    json!({
        "state": state,
        "progress": s.progress,
        "actual_seconds": s.actual_seconds,
        "error_message": s.error_message,
    })
}

/// The host's validated submission, from the fixture's `video_request`.
fn video_request(case: &Value) -> Result<VideoRequest, String> {
    let req = case
        .get("video_request")
        .ok_or("a submit fixture needs `video_request`")?;
    let text = |k: &str| {
        req.get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("`video_request.{k}` is missing or not a string"))
    };
    let seconds = req
        .get("seconds")
        .and_then(Value::as_u64)
        .and_then(|s| u32::try_from(s).ok())
        .ok_or("`video_request.seconds` is missing or not a whole number")?;
    Ok(VideoRequest {
        upstream_model: text("upstream_model")?,
        prompt: text("prompt")?,
        seconds,
        size: text("size")?,
        ratio: text("ratio")?,
        request_id: request_id(case).to_string(),
    })
}

/// One call of a video adapter: the request it builds and, for a submission
/// or a poll, what it reads from the vendor's answer, with the host's checks
/// of both (one instance, as the host uses one per call).
async fn run_video_case(
    sandbox: &Arc<Sandbox>,
    plugin: &VideoPlugin,
    case: &Value,
) -> Result<Outcome, String> {
    let call = case
        .get("call")
        .and_then(Value::as_str)
        .ok_or("`call` is missing (a video adapter's fixture is a submit, poll or content call)")?;
    let task_id = || {
        case.get("upstream_task_id")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("a {call} fixture needs `upstream_task_id`"))
    };
    let mut session = VideoSession::start(sandbox, plugin, request_id(case))
        .await
        .map_err(|e| e.to_string())?;
    let built = match call {
        "submit" => session.build_submit(&video_request(case)?).await,
        "poll" => session.build_poll(task_id()?).await,
        "content" => session.build_content(task_id()?).await,
        other => return Err(format!("unknown call `{other}` (submit, poll or content)")),
    };
    let mut got = Map::new();
    let out = match built {
        Ok(out) => out,
        Err(e) => {
            got.insert("request_error".into(), json!(e.to_string()));
            return Ok(Outcome { got });
        }
    };
    got.insert("vendor_request".into(), vendor_request_json(&out, case));
    let Some(resp) = case.get("vendor_response") else {
        return Ok(Outcome { got });
    };
    let (status, _, body) = vendor_answer(resp);
    let read = match call {
        "submit" => session
            .parse_submit(status, &body)
            .await
            .map(|id| ("task_id", json!(id))),
        "poll" => session
            .parse_poll(status, &body)
            .await
            .map(|s| ("task_status", task_status_json(&s))),
        _ => {
            return Err(
                "a content call's answer is relayed by the host, not read by the adapter: \
                 leave out `vendor_response`"
                    .into(),
            )
        }
    };
    match read {
        Ok((key, value)) => got.insert(key.into(), value),
        Err(e) => got.insert("response_error".into(), json!(e.to_string())),
    };
    Ok(Outcome { got })
}

/// The keys of a fixture that are expectations.
const EXPECTED: &[&str] = &[
    "vendor_request",
    "client_response",
    "client_stream",
    "stream_complete",
    "usage",
    "error",
    "task_id",
    "task_status",
    "request_error",
    "response_error",
    "stream_error",
];

/// The component under test.
enum Subject {
    Text(Arc<AdapterPlugin>),
    Video(Arc<VideoPlugin>),
}

/// Runs every fixture in `dir` against the component at `wasm`; prints one
/// line per fixture and the differences; `Ok(true)` when all passed.
pub async fn run(wasm: &Path, dir: &Path, update: bool) -> anyhow::Result<bool> {
    // The production defaults (`[plugins]`), so an adapter that passes here
    // fits the same CPU and memory bounds in a gateway.
    let sandbox = Arc::new(Sandbox::new(
        &PluginConfig {
            call_timeout: std::time::Duration::from_millis(200),
            max_memory_bytes: 64 * 1024 * 1024,
            epoch_tick: std::time::Duration::from_millis(10),
            max_instances: 16,
            // Each fixture gets a fresh instance, as a new adapter would.
            warm_instances: 0,
            reload_interval: std::time::Duration::ZERO,
            compiler: crate::config::PluginCompiler::InProcess,
        },
        Arc::new(crate::clock::ManualClock::new(KIT_CLOCK_SECS * 1000)),
    )?);
    let subject = match load_file(&sandbox, wasm)
        .await
        .map_err(|why| anyhow::anyhow!("{}: {why}", wasm.display()))?
    {
        Loaded::Adapter(p) => Subject::Text(Arc::new(p)),
        Loaded::Video(p) => Subject::Video(Arc::new(p)),
        Loaded::Policy(_) => anyhow::bail!("{}: is a policy, not an adapter", wasm.display()),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|x| x.to_str()) == Some("json"))
        .collect();
    files.sort();
    if files.is_empty() {
        anyhow::bail!("no *.json fixtures in {}", dir.display());
    }
    let (mut passed, mut failed) = (0, 0);
    for file in &files {
        let name = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(file)?;
        let mut case: Value = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: not JSON: {e}", file.display()))?;
        let outcome = match &subject {
            Subject::Text(plugin) => run_case(&sandbox, plugin, &case).await,
            Subject::Video(plugin) => run_video_case(&sandbox, plugin, &case).await,
        };
        let outcome = match outcome {
            Ok(o) => o,
            Err(why) => {
                failed += 1;
                println!("FAIL {name}: {why}");
                continue;
            }
        };
        if update {
            if let Some(obj) = case.as_object_mut() {
                for k in EXPECTED {
                    obj.remove(*k);
                }
                for (k, v) in &outcome.got {
                    obj.insert(k.clone(), v.clone());
                }
            }
            std::fs::write(file, format!("{}\n", serde_json::to_string_pretty(&case)?))?;
            println!("updated {name}");
            passed += 1;
            continue;
        }
        let mut lines = Vec::new();
        for k in EXPECTED {
            match (case.get(*k), outcome.got.get(*k)) {
                (None, None) => {}
                (Some(e), Some(g)) => diff(k, e, g, &mut lines),
                (Some(e), None) => lines.push(format!("{k}: expected {e}, but nothing came")),
                (None, Some(g)) => lines.push(format!("{k}: not expected, got {g}")),
            }
        }
        if lines.is_empty() {
            passed += 1;
            println!("ok   {name}");
        } else {
            failed += 1;
            println!("FAIL {name}");
            for l in lines {
                println!("     {l}");
            }
        }
    }
    println!(
        "{}: {passed} passed, {failed} failed ({})",
        wasm.display(),
        dir.display()
    );
    Ok(failed == 0)
}

/// The command's entry point.
pub fn main(wasm: &Path, dir: &Path, update: bool) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(wasm, dir, update)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_of(data: &[&str], complete: bool) -> StreamRun {
        StreamRun {
            client: data
                .iter()
                .map(|d| SseEvent {
                    event: None,
                    data: (*d).into(),
                })
                .collect(),
            error: None,
            end: StreamClose {
                rest_events: Vec::new(),
                rest_failed: None,
                events: Vec::new(),
                usage: None,
                complete,
            },
        }
    }

    #[test]
    fn a_spliced_stream_must_match_its_translation_byte_for_byte() {
        let translated = run_of(&[r#"{"a":1,"usage":null}"#, "[DONE]"], true);
        assert!(translated
            .differs_from(&run_of(&[r#"{"a":1,"usage":null}"#, "[DONE]"], true))
            .is_none());
        // The same JSON written differently is a difference.
        let why = translated
            .differs_from(&run_of(&[r#"{"a": 1,"usage":null}"#, "[DONE]"], true))
            .unwrap();
        assert!(why.starts_with("client event 0"), "{why}");
        let why = translated
            .differs_from(&run_of(&[r#"{"a":1,"usage":null}"#], true))
            .unwrap();
        assert!(why.starts_with("client event 1"), "{why}");
        let why = translated
            .differs_from(&run_of(&[r#"{"a":1,"usage":null}"#, "[DONE]"], false))
            .unwrap();
        assert!(why.starts_with("end"), "{why}");
    }

    #[test]
    fn diffs_name_the_path_and_honour_the_wildcard() {
        let mut out = Vec::new();
        diff(
            "body",
            &json!({"a": [1, {"b": "x"}], "t": ANY, "gone": 1}),
            &json!({"a": [1, {"b": "y"}], "t": 12345, "extra": true}),
            &mut out,
        );
        assert_eq!(
            out,
            [
                r#"body.a[1].b: expected "x", got "y""#,
                "body.gone: expected 1, but it is missing",
                "body.extra: not expected, got true",
            ]
        );
    }
}
