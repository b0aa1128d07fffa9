//! Turning one call's client request, vendor answer and vendor stream into
//! what the other side expects. Same protocol on both sides: a passthrough
//! that renames the model and reads the usage. Otherwise: client codec →
//! canonical form → vendor codec, and back.

use crate::bindings::types::{Protocol, RequestCtx, SseEvent};
use crate::canonical::Usage;
use crate::openai_passthrough::{finish_response, prepare_request, StreamRelay};
use crate::TranslateError;

/// The vendor request body and the state handed back later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub body: Vec<u8>,
    pub state: String,
}

/// The client's answer body and the usage to bill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub body: Vec<u8>,
    pub usage: Option<Usage>,
}

/// How a translated stream ends.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEnd {
    pub events: Vec<SseEvent>,
    pub usage: Option<Usage>,
    /// The vendor sent its protocol's finish marker.
    pub complete: bool,
}

fn unsupported(ctx: &RequestCtx, vendor: Protocol) -> TranslateError {
    TranslateError::unsupported(format!(
        "this adapter cannot translate {:?} requests to {vendor:?}",
        ctx.client_protocol
    ))
}

/// Builds the vendor request body from the client's.
pub fn request(
    vendor: Protocol,
    ctx: &RequestCtx,
    body: &[u8],
) -> Result<Prepared, TranslateError> {
    match (ctx.client_protocol, vendor) {
        (Protocol::OpenaiChat, Protocol::OpenaiChat) => {
            let p = prepare_request(body, &ctx.upstream_model, ctx.stream)?;
            Ok(Prepared {
                body: p.body,
                state: p.state,
            })
        }
        _ => Err(unsupported(ctx, vendor)),
    }
}

/// Builds the client's answer from a vendor's 2xx answer.
pub fn response(
    vendor: Protocol,
    ctx: &RequestCtx,
    _state: &str,
    body: &[u8],
) -> Result<Finished, TranslateError> {
    match (ctx.client_protocol, vendor) {
        (Protocol::OpenaiChat, Protocol::OpenaiChat) => {
            let f = finish_response(body, &ctx.model)?;
            Ok(Finished {
                body: f.body,
                usage: f.usage,
            })
        }
        _ => Err(unsupported(ctx, vendor)),
    }
}

/// One streamed answer's translation.
pub struct Stream {
    relay: Option<StreamRelay>,
}

fn data_events(payloads: Vec<String>) -> Vec<SseEvent> {
    payloads
        .into_iter()
        .map(|data| SseEvent { event: None, data })
        .collect()
}

impl Stream {
    pub fn new(vendor: Protocol, ctx: &RequestCtx, state: &str) -> Self {
        let relay = (ctx.client_protocol == vendor && vendor == Protocol::OpenaiChat)
            .then(|| StreamRelay::new(&ctx.model, state));
        Self { relay }
    }

    pub fn push(&mut self, ev: &SseEvent) -> Result<Vec<SseEvent>, TranslateError> {
        match &mut self.relay {
            Some(relay) => Ok(data_events(relay.push(&ev.data)?)),
            None => Err(TranslateError::unsupported("no translator for this stream")),
        }
    }

    pub fn finish(&mut self) -> StreamEnd {
        match &mut self.relay {
            Some(relay) => {
                let close = relay.finish();
                StreamEnd {
                    events: data_events(close.events),
                    usage: close.usage,
                    complete: close.complete,
                }
            }
            None => StreamEnd {
                events: Vec::new(),
                usage: None,
                complete: false,
            },
        }
    }
}
