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

use crate::errors::ApiError;
use crate::faults::{Fault, Framing};
use crate::{sse, SimState};
use render::Meta;
use request::ChatRequest;

pub async fn completions(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    let req = match ChatRequest::parse(&body) {
        Ok(req) => req,
        Err(e) => return e.into_response(),
    };
    // A queued fault replaces whatever the prompt's directives asked for.
    let (latency, fault) = match state.faults.pop() {
        Some(Fault::Latency(d)) => (Some(d), None),
        Some(fault) => (None, Some(fault)),
        None => (req.directives.latency, req.directives.fault.clone()),
    };
    if let Some(delay) = latency {
        if !state.wait(delay).await {
            return ApiError::shutting_down().into_response();
        }
    }
    let framing = req.directives.framing;
    let mut cut = false;
    match fault {
        None | Some(Fault::Latency(_)) => {}
        Some(Fault::Status(status)) => return ApiError::for_status(status).into_response(),
        Some(Fault::InsufficientQuota) => {
            return ApiError::insufficient_quota(StatusCode::TOO_MANY_REQUESTS).into_response()
        }
        Some(Fault::Hang) => {
            state.shutdown.cancelled().await;
            return ApiError::shutting_down().into_response();
        }
        Some(Fault::Malformed) => return malformed(&state, req.stream, framing),
        Some(Fault::Cut) => cut = true,
    }

    let plan = plan::plan(&req);
    let meta = Meta {
        id: format!("chatcmpl-sim-{}", state.next_chat_id()),
        created: unix_now(),
        model: req.model.clone(),
    };
    if req.stream {
        let mut payloads: Vec<String> = render::chunks(&meta, &plan, req.include_usage)
            .iter()
            .map(|c| c.to_string())
            .collect();
        if cut {
            // Role chunk plus three more, then the connection drops.
            payloads.truncate(4);
        } else {
            payloads.push("[DONE]".to_owned());
        }
        let pieces = sse::frame(&payloads, framing);
        event_stream(sse::paced(
            pieces,
            req.directives.chunk_delay,
            cut,
            state.shutdown.clone(),
        ))
    } else if cut {
        let json = Bytes::from(render::completion(&meta, &plan).to_string());
        let half = json.slice(..json.len() / 2);
        json_response(sse::paced(vec![half], None, true, state.shutdown.clone()))
    } else {
        Json(render::completion(&meta, &plan)).into_response()
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
