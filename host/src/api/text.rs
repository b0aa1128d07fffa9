//! The text protocols' and endpoint families' routes (spec §4 and the
//! `/v1beta` protocol): one handler for all of them. The route's client
//! protocol (see `protocol`) says how the body arrives (JSON or a multipart
//! form) and reads the request's head; the relay and the adapter do the
//! rest.

use crate::auth::Caller;
use crate::billing::usage::{Meter, MeterKind, Usage};
use crate::error::ApiError;
use crate::metrics::{model_label, ModelLabel};
use crate::protocol::{BodyKind, Surface};
use crate::relay::form::ClientForm;
use crate::relay::text::{forwarded_headers, serve, TextRequest};
use crate::run_to_end::RunToEnd;
use crate::state::SharedState;
use axum::extract::{Request, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use bytes::Bytes;
use tracing::Instrument;

pub async fn call(
    State(state): State<SharedState>,
    Extension(surface): Extension<Surface>,
    caller: Caller,
    uri: Uri,
    request: Request,
) -> Response {
    // The model the call named, for the request counter (`metrics`).
    let mut model = None;
    let mut resp = answer(state, surface, caller, uri, request, &mut model)
        .await
        .into_response();
    if let Some(m) = model {
        resp.extensions_mut().insert(ModelLabel(m));
    }
    resp
}

async fn answer(
    state: SharedState,
    surface: Surface,
    caller: Caller,
    uri: Uri,
    request: Request,
    model: &mut Option<metrics::SharedString>,
) -> Result<Response, ApiError> {
    // A text route whose path is not a call (`POST /v1/models/gpt-4o`, which
    // shares its pattern with Gemini's `/v1/models/{model}:{action}`).
    let protocol = surface
        .protocol
        .ok_or_else(|| ApiError::NotFound(format!("no such endpoint: POST {}", uri.path())))?;
    // Nothing is read from a caller who could not pay for any call.
    super::body::can_afford_a_call(&state, &caller)?;
    // Read from the request itself (a `HeaderMap` argument would be a copy).
    let client_headers = forwarded_headers(request.headers());
    let (body, lease, form) = match protocol.body {
        BodyKind::Json => {
            // A JSON body goes through the adapter, whose memory is capped:
            // one it could not translate is refused rather than failing
            // inside the guest. It is read first (it is within the body
            // limit), so that the client, still sending, can read the answer.
            let room = guest_body_limit(&state);
            let (body, lease) = super::read_body(&state, request).await?;
            if body.len() > room {
                return Err(ApiError::BodyTooLargeForAdapter(format!(
                    "the body is {} bytes; adapters translate bodies of up to {room} bytes (a quarter of plugins.max_memory_mib)",
                    body.len()
                )));
            }
            (body, Some(lease), None)
        }
        BodyKind::Multipart => {
            // Boxed: reading a form is a 2.8 KB future that only a form's
            // call needs; inline it made every call's handler future that
            // much larger, and axum copies that whole future into the box
            // it makes for each request.
            let form = Box::pin(ClientForm::read(&state, request)).await?;
            (Bytes::from(form.fields_json()), None, Some(form))
        }
    };
    let mut head = protocol.head(&body, uri.path())?;
    *model = Some(model_label(&state.catalog(), &head.model));
    // A form's audio is measured here: the hold, and the bill when the
    // vendor's answer says nothing of its duration.
    let measured = form.as_ref().and_then(ClientForm::audio_ms).map(|ms| {
        let m = Meter {
            kind: MeterKind::AudioMs,
            quantity: ms,
            detail: None,
        };
        head.meters.push(m.clone());
        Usage {
            meters: vec![m],
            counted_by_gateway: true,
            ..Usage::default()
        }
    });
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
        meters: head.meters,
        wants_usage: head.wants_usage,
        places: head.places,
        body,
        lease,
        form,
        measured,
        client_headers,
    };
    // Run to its end: a client that hangs up must not cancel the call after
    // the upstream answered (the vendor charges for it; so must we). A
    // stream runs here while its client stays, and goes on as a task of its
    // own only if the client leaves (`run_to_end`): its start is a lone
    // request between other streams' frames, run cold, and a task's spawn
    // and the handler's wake-up at its end were two more steps on the way
    // to the first token. A plain call gets its task at once: under load the
    // runtime thread then takes many calls through each step in turn, with
    // that step's code warm, where a call run inside its connection's task
    // goes through all of them alone (at 32 connections that cost a fifth
    // more CPU per call; README, *What changed*). The call's future is
    // several kilobytes (every await of the relay laid out inline: 12 KB
    // before its attempts were boxed too); boxed where it is made, it goes
    // into the wrappers as a pointer instead of being copied through each.
    let id = caller.info.id.clone();
    let span = crate::telemetry::current();
    let stream = req.stream;
    let call = crate::error::REQUEST_ID
        .scope(id, Box::pin(serve(state, caller, req)))
        .instrument(span);
    if stream {
        RunToEnd::new(call).await.map_err(ApiError::internal)?
    } else {
        tokio::spawn(call).await.map_err(ApiError::internal)?
    }
}

/// The largest JSON body an adapter is given: a quarter of a guest's memory
/// (the body, its parsed form and the translation must fit together).
fn guest_body_limit(state: &SharedState) -> usize {
    state.config.plugins.max_memory_bytes / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future the handler returns, without calling it.
    fn handler_size<F: std::future::Future>(
        _: fn(State<SharedState>, Extension<Surface>, Caller, Uri, Request) -> F,
    ) -> usize {
        std::mem::size_of::<F>()
    }

    /// axum copies the handler's future whole into the box it makes for
    /// each request, its unused states and all: reading a form, which only
    /// a form's call does, boxed on its own path took it from 4,400 to
    /// 2,704 bytes (release builds).
    #[test]
    fn the_handlers_future_stays_small() {
        let size = handler_size(call);
        assert!(
            size <= 3 * 1024,
            "the text handler's future is {size} bytes: box the await that grew it"
        );
    }
}
