//! The text protocols' routes (spec §4.3, §4.4 and the `/v1beta` protocol):
//! one handler for all of them. The route's client protocol (see
//! `protocol`) reads the request's head; the relay and the adapter do the
//! rest.

use crate::auth::Caller;
use crate::error::ApiError;
use crate::protocol::Surface;
use crate::relay::text::{forwarded_headers, serve, TextRequest};
use crate::state::SharedState;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::Extension;
use bytes::Bytes;

pub async fn call(
    State(state): State<SharedState>,
    Extension(surface): Extension<Surface>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    // A text route whose path is not a call (`POST /v1/models/gpt-4o`, which
    // shares its pattern with Gemini's `/v1/models/{model}:{action}`).
    let protocol = surface
        .protocol
        .ok_or_else(|| ApiError::NotFound(format!("no such endpoint: POST {}", uri.path())))?;
    let head = protocol.head(&body, uri.path())?;
    if protocol.protocol == crate::plugins::bindings::types::Protocol::Gemini
        && head.stream
        && !uri
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "alt=sse"))
    {
        return Err(ApiError::InvalidRequest(
            "streamGenerateContent is served as server-sent events only: add `?alt=sse`".into(),
        ));
    }
    let req = TextRequest {
        protocol,
        model: head.model,
        stream: head.stream,
        max_output_tokens: head.max_output_tokens,
        prompt_tokens_estimate: head.prompt_tokens_estimate,
        body,
        client_headers: forwarded_headers(&headers),
    };
    // Its own task: a client that hangs up must not cancel the call after
    // the upstream answered (the vendor charges for it; so must we).
    let id = caller.info.id.clone();
    tokio::spawn(crate::error::REQUEST_ID.scope(id, serve(state, caller, req)))
        .await
        .map_err(ApiError::internal)?
}
