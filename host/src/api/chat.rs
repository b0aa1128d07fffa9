//! `POST /v1/chat/completions` (spec §2.8, §2.9, §4.3).

use crate::auth::Caller;
use crate::billing::text::estimate_prompt_tokens;
use crate::error::ApiError;
use crate::plugins::bindings::types::Protocol;
use crate::relay::text::{serve, TextRequest};
use crate::state::SharedState;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The parts of a chat request the host needs; the adapter reads the rest.
#[derive(Deserialize)]
struct ChatHead<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_completion_tokens: Option<u64>,
    #[serde(default, borrow)]
    messages: Option<Vec<&'a RawValue>>,
}

pub async fn completions(
    State(state): State<SharedState>,
    caller: Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    let head: ChatHead = serde_json::from_slice(&body).map_err(|e| {
        ApiError::InvalidRequest(format!("the body is not a valid chat request: {e}"))
    })?;
    let model = head
        .model
        .filter(|m| !m.is_empty())
        .ok_or_else(|| ApiError::InvalidRequest("`model` is required".into()))?;
    let messages = head
        .messages
        .ok_or_else(|| ApiError::InvalidRequest("`messages` is required".into()))?;
    if messages.is_empty() {
        return Err(ApiError::InvalidRequest(
            "`messages` must not be empty".into(),
        ));
    }
    let message_bytes = messages.iter().map(|m| m.get().len()).sum();
    let req = TextRequest {
        protocol: Protocol::OpenaiChat,
        model,
        stream: head.stream.unwrap_or(false),
        max_output_tokens: head.max_completion_tokens.or(head.max_tokens),
        prompt_tokens_estimate: estimate_prompt_tokens(message_bytes, messages.len()),
        body: body.clone(),
    };
    // Its own task: a client that hangs up must not cancel the call after
    // the upstream answered (the vendor charges for it; so must we).
    let id = caller.info.id.clone();
    tokio::spawn(crate::error::REQUEST_ID.scope(id, serve(state, caller, req)))
        .await
        .map_err(ApiError::internal)?
}
