//! `POST /v1/chat/completions`: a deterministic OpenAI-compatible answer.
//!
//! The gateway's tests compute expected values from these rules, so changing
//! any of them is a breaking change:
//!
//! - **Tokens.** One whitespace-separated word is one token.
//!   `prompt_tokens` = Σ over all messages of (words(content) + 1). Content
//!   may be a string, an array of parts (only `{"type":"text","text":..}`
//!   parts count) or null (0 words). Directives (below) are part of the text
//!   as sent and so are counted in `prompt_tokens`.
//! - **Cache.** `prompt_tokens_details.cached_tokens` = the tokens of the
//!   `system` messages (words + 1 each), 0 without one.
//! - **Reply.** With `h` = 64-bit FNV-1a of the last user message (directives
//!   removed), the reply is `Simulated reply to: <its first 8 words>.` padded
//!   with filler words chosen from `h` to exactly `16 + h % 16` words. Content
//!   is the words joined by single spaces; one word = one completion token.
//! - **Reasoning.** Models whose name contains `reason` (any case) first
//!   produce the 8 words `Let me think about this step by step.` as
//!   `reasoning_content`, unless the request has `enable_thinking: false`,
//!   `thinking: {"type":"disabled"}` or `reasoning_effort: "none"`.
//!   Reasoning words count in `completion_tokens` and in
//!   `completion_tokens_details.reasoning_tokens`.
//! - **Budget.** `max_completion_tokens`, else `max_tokens`: reasoning is
//!   never cut but is subtracted first; content keeps at most
//!   `max - reasoning` words (possibly 0, giving `content: ""`); when words
//!   were dropped, `finish_reason` is `length`, else `stop`.
//! - **Tools.** A non-empty `tools` array with `tool_choice` other than
//!   `"none"` yields one call to the first tool (or to the function named by
//!   an object `tool_choice`): id `call_<low 32 bits of h, 8 hex digits>`,
//!   arguments `{"query":"<last user message>"}` (serde_json compact form),
//!   `content: null`, `finish_reason: "tool_calls"`; its completion tokens
//!   are the words of the arguments string (plus reasoning, if any). Tool
//!   calls are not cut by `max_tokens`.
//! - **Ids.** `chatcmpl-sim-<n>`, `n` counting chat answers from 1 per server.
//! - **Streaming.** Role chunk `{"role":"assistant","content":""}`, then one
//!   chunk per reasoning word, one per content word (each word but the last
//!   with a trailing space), or for a tool call a header delta and the
//!   arguments in 3 fragments; then an empty delta with `finish_reason`. With
//!   `stream_options.include_usage`, every chunk has `"usage": null` and a
//!   final chunk with `"choices": []` carries the usage. Then `[DONE]`.
//!
//! Faults and stream-shape directives are described in [`crate::faults`] and
//! the crate docs.

pub mod anthropic;
pub mod gemini;
mod plan;
mod render;
mod request;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use serde_json::Value;

use crate::errors::{ApiError, Dialect};
use crate::faults::{Fault, Framing};
use crate::record::ReportedUsage;
use crate::sse::Out;
use crate::{sse, SimState};
use render::Meta;
pub use request::ChatRequest;

pub async fn completions(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    match ChatRequest::parse(&body) {
        Ok(req) => respond(&state, req, Dialect::OpenAi).await,
        Err(e) => e.into_response(),
    }
}

/// What one dialect makes of a plan.
pub(crate) enum Rendered {
    Plain(Value),
    /// Events in order, the protocol's finish marker(s) last.
    Stream(Vec<Out>),
}

/// How many events a cut or truncated stream keeps: the first and three more.
const CUT_AFTER: usize = 4;

/// Faults, then the plan, rendered in `dialect`; the reported usage goes on
/// the response for the record.
pub(crate) async fn respond(state: &SimState, req: ChatRequest, dialect: Dialect) -> Response {
    // A queued fault replaces whatever the prompt's directives asked for.
    let (latency, fault) = match state.faults.pop() {
        Some(Fault::Latency(d)) => (Some(d), None),
        Some(fault) => (None, Some(fault)),
        None => (req.directives.latency, req.directives.fault.clone()),
    };
    if let Some(delay) = latency {
        if !state.wait(delay).await {
            return ApiError::shutting_down()
                .in_dialect(dialect)
                .into_response();
        }
    }
    let mut framing = req.directives.framing;
    if dialect == Dialect::Gemini {
        // Gemini never sends comments (its SDK refuses them).
        framing.comments = false;
    }
    let (mut cut, mut truncate) = (false, false);
    match fault {
        None | Some(Fault::Latency(_)) => {}
        Some(Fault::Status(status)) => {
            return ApiError::for_status(status)
                .in_dialect(dialect)
                .into_response()
        }
        Some(Fault::InsufficientQuota) => return quota_error(dialect).into_response(),
        Some(Fault::Hang) => {
            state.shutdown.cancelled().await;
            return ApiError::shutting_down()
                .in_dialect(dialect)
                .into_response();
        }
        Some(Fault::Malformed) => return malformed(state, req.stream, framing),
        Some(Fault::Cut) => cut = true,
        Some(Fault::Truncate) => truncate = true,
    }

    let plan = plan::plan(&req);
    let n = state.next_chat_id();
    let (rendered, usage) = match dialect {
        Dialect::OpenAi => {
            let meta = Meta {
                id: format!("chatcmpl-sim-{n}"),
                created: unix_now(),
                model: req.model.clone(),
            };
            let usage = render::usage(&plan.usage);
            let rendered = if req.stream {
                let mut events: Vec<Out> = render::chunks(&meta, &plan, req.include_usage)
                    .iter()
                    .map(|c| Out::data(c.to_string()))
                    .collect();
                events.push(Out::data("[DONE]"));
                Rendered::Stream(events)
            } else {
                Rendered::Plain(render::completion(&meta, &plan))
            };
            (rendered, usage)
        }
        Dialect::Anthropic => anthropic::render(&req, &plan, n),
        Dialect::Gemini => gemini::render(&req, &plan, n),
    };
    let mut resp = match rendered {
        Rendered::Stream(mut events) => {
            if cut || truncate {
                events.truncate(CUT_AFTER);
            }
            let pieces = sse::frame_events(&events, framing);
            event_stream(sse::paced(
                pieces,
                req.directives.chunk_delay,
                cut,
                state.shutdown.clone(),
            ))
        }
        Rendered::Plain(body) if cut => {
            let json = Bytes::from(body.to_string());
            let half = json.slice(..json.len() / 2);
            json_response(sse::paced(vec![half], None, true, state.shutdown.clone()))
        }
        Rendered::Plain(body) => Json(body).into_response(),
    };
    resp.extensions_mut().insert(ReportedUsage(usage));
    resp
}

/// "The account is out of money", as each vendor says it.
fn quota_error(dialect: Dialect) -> ApiError {
    match dialect {
        Dialect::OpenAi => ApiError::insufficient_quota(StatusCode::TOO_MANY_REQUESTS),
        Dialect::Anthropic => ApiError::invalid_request(
            "Your credit balance is too low to access the Anthropic API.",
            None,
        )
        .in_dialect(dialect),
        Dialect::Gemini => {
            let mut e = ApiError::for_status(429).in_dialect(dialect);
            e.message =
                "You exceeded your current quota, please check your plan and billing details."
                    .into();
            e
        }
    }
}

fn malformed(state: &SimState, stream: bool, framing: Framing) -> Response {
    if stream {
        let payloads = ["{not json".to_owned(), "[DONE]".to_owned()];
        event_stream(sse::paced(
            sse::frame(&payloads, framing),
            None,
            false,
            state.shutdown.clone(),
        ))
    } else {
        json_response(Body::from(r#"{"id":"chatcmpl-broken","choices":["#))
    }
}

fn event_stream(body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

fn json_response(body: Body) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}
