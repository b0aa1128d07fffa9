//! The WIT glue every text adapter shares: `Driver<V>` implements the
//! `adapter` interface for any [`Vendor`], and [`crate::export_adapter!`]
//! exports it. The translation itself lives in [`crate::translate`], in plain
//! functions that run (and are tested) natively.

use std::cell::RefCell;
use std::marker::PhantomData;

use crate::bindings::adapter::exports::gateway::plugin::adapter::{
    Guest, GuestStreamTranslator, StreamEnd, StreamTranslator,
};
use crate::bindings::types::{
    AnswerMode, Descriptor, Header, PluginError, RequestBody, RequestCtx, SseEvent, StreamSplice,
    Translated, UpstreamError, UpstreamRequest, Usage as WitUsage,
};
use crate::canonical::Usage;
use crate::errors::{retry_after_secs, UpstreamFailure};
use crate::families;
use crate::translate;
use crate::vendor::{header, Vendor};
use crate::TranslateError;

/// The adapter for vendor `V`.
pub struct Driver<V>(PhantomData<V>);

/// One stream's translator for vendor `V`. WIT resource methods take
/// `&self`, hence the `RefCell`; an instance is single-threaded.
pub struct StreamDriver<V> {
    stream: RefCell<translate::Stream>,
    _vendor: PhantomData<V>,
}

pub fn plugin_error(err: TranslateError) -> PluginError {
    match err {
        TranslateError::InvalidRequest(m) => PluginError::InvalidRequest(m),
        TranslateError::Unsupported(m) => PluginError::Unsupported(m),
        TranslateError::UpstreamFormat(m) => PluginError::UpstreamFormat(m),
        TranslateError::Vendor(f) => PluginError::UpstreamFailed(upstream_error(f, None)),
    }
}

pub fn upstream_error(f: UpstreamFailure, retry_after_secs: Option<u32>) -> UpstreamError {
    UpstreamError {
        status: f.status,
        code: f.code.to_owned(),
        message: f.message,
        retryable: f.retryable,
        retry_after_secs,
    }
}

pub fn wit_usage(u: Usage) -> WitUsage {
    WitUsage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_tokens,
        cache_write_tokens: u.cache_write_tokens,
        reasoning_tokens: u.reasoning_tokens,
        meters: Vec::new(),
    }
}

impl<V: Vendor> Guest for Driver<V> {
    type StreamTranslator = StreamDriver<V>;

    fn describe() -> Descriptor {
        let info = V::info();
        Descriptor {
            name: info.name.to_owned(),
            version: info.version.to_owned(),
            vendor_protocol: info.protocol,
            client_protocols: info.client_protocols.to_vec(),
            auth: info.auth,
        }
    }

    fn translate_request(ctx: RequestCtx, body: Vec<u8>) -> Result<UpstreamRequest, PluginError> {
        if families::is_family(ctx.client_protocol) {
            return family_request::<V>(&ctx, &body).map_err(|e| {
                crate::log::debug(&format!("request refused: {e}"));
                plugin_error(e)
            });
        }
        let prepared = translate::request(V::info().protocol, &ctx, &body)
            .and_then(|p| Ok((V::path(&ctx)?, p)));
        let (path, prepared) = prepared.map_err(|e| {
            crate::log::debug(&format!("request refused: {e}"));
            plugin_error(e)
        })?;
        let mut headers = vec![header("content-type", "application/json")];
        headers.extend(V::headers(&ctx));
        // Where the stream relay only copies ordinary events with the
        // client's model set, and the answer's translation only sets it and
        // reads the usage, the host does that itself. The request there is
        // the passthrough's edit of the body (`openai_passthrough`), with a
        // path and headers that `Vendor` makes from the context alone: the
        // same for every call alike, so the host may build those too.
        let answer = if translate::host_splices(V::info().protocol, &ctx) {
            AnswerMode::Splice(StreamSplice {
                model: ctx.model.clone(),
                alike_requests: true,
            })
        } else {
            AnswerMode::Translate
        };
        Ok(UpstreamRequest {
            method: "POST".to_owned(),
            path,
            headers,
            body: RequestBody::Bytes(prepared.body),
            answer,
            state: prepared.state,
        })
    }

    fn translate_response(
        ctx: RequestCtx,
        state: String,
        _status: u16,
        _headers: Vec<Header>,
        body: Vec<u8>,
    ) -> Result<Translated, PluginError> {
        if families::is_family(ctx.client_protocol) {
            let dialect = V::family_dialect(ctx.client_protocol);
            let f = families::response(dialect, &ctx, &state, &body).map_err(|e| {
                crate::log::warn(&format!("unreadable answer: {e}"));
                plugin_error(e)
            })?;
            return Ok(Translated {
                status: 200,
                content_type: f.content_type,
                body: f.body,
                usage: f.usage,
            });
        }
        let finished =
            translate::response(V::info().protocol, &ctx, &state, &body).map_err(|e| {
                crate::log::warn(&format!("unreadable answer: {e}"));
                plugin_error(e)
            })?;
        Ok(Translated {
            // Whatever 2xx the vendor used, the client asked for an answer and got one.
            status: 200,
            content_type: "application/json".to_owned(),
            body: finished.body,
            usage: finished.usage.map(wit_usage),
        })
    }

    fn translate_error(
        _ctx: RequestCtx,
        status: u16,
        headers: Vec<Header>,
        body: Vec<u8>,
    ) -> UpstreamError {
        upstream_error(
            V::map_error(status, &headers, &body),
            retry_after_secs(&headers),
        )
    }
}

/// The upstream request of an endpoint-family call.
fn family_request<V: Vendor>(
    ctx: &RequestCtx,
    body: &[u8],
) -> Result<UpstreamRequest, TranslateError> {
    if ctx.stream {
        return Err(TranslateError::unsupported(format!(
            "{:?} answers are not streamed",
            ctx.client_protocol
        )));
    }
    let dialect = V::family_dialect(ctx.client_protocol);
    let prepared = families::request(dialect, ctx, body)?;
    let path = V::family_path(ctx, dialect, prepared.batch)?;
    let mut headers = Vec::new();
    if matches!(prepared.body, RequestBody::Bytes(_)) {
        headers.push(header("content-type", "application/json"));
    }
    headers.extend(V::headers(ctx));
    Ok(UpstreamRequest {
        method: "POST".to_owned(),
        path,
        headers,
        body: prepared.body,
        answer: prepared.answer,
        state: prepared.state,
    })
}

impl<V: Vendor> GuestStreamTranslator for StreamDriver<V> {
    fn new(ctx: RequestCtx, state: String) -> Self {
        Self {
            stream: RefCell::new(translate::Stream::new(V::info().protocol, &ctx, &state)),
            _vendor: PhantomData,
        }
    }

    fn push(&self, ev: SseEvent) -> Result<Vec<SseEvent>, PluginError> {
        self.stream.borrow_mut().push(&ev).map_err(plugin_error)
    }

    fn finish(this: StreamTranslator, rest: Vec<SseEvent>) -> Result<StreamEnd, PluginError> {
        this.into_inner::<Self>().end(rest)
    }
}

impl<V: Vendor> StreamDriver<V> {
    /// The stream's end after `rest`, its last vendor events (the
    /// translator's `finish`, for a wrapper that owns a driver).
    pub fn end(self, rest: Vec<SseEvent>) -> Result<StreamEnd, PluginError> {
        let mut stream = self.stream.into_inner();
        let mut rest_events = Vec::new();
        let mut rest_failed = None;
        for ev in &rest {
            match stream.push(ev) {
                Ok(out) => rest_events.extend(out),
                Err(e) => {
                    rest_failed = Some(plugin_error(e));
                    break;
                }
            }
        }
        let end = stream.finish();
        if end.usage.is_none() {
            crate::log::warn("vendor stream ended without a usage report");
        }
        if !end.complete && rest_failed.is_none() {
            crate::log::warn("vendor stream ended without its finish marker");
        }
        // After a failure the stream ends with it: no closing events.
        let events = if rest_failed.is_some() {
            Vec::new()
        } else {
            end.events
        };
        Ok(StreamEnd {
            rest_events,
            rest_failed,
            events,
            usage: end.usage.map(wit_usage),
            complete: end.complete,
        })
    }
}

/// Exports `Driver<$vendor>` as this component's `adapter` interface.
#[macro_export]
macro_rules! export_adapter {
    ($vendor:ty) => {
        type __GatewayAdapterDriver = $crate::driver::Driver<$vendor>;
        $crate::bindings::adapter::export_vendor_adapter!(
            __GatewayAdapterDriver with_types_in $crate::bindings::adapter
        );
    };
}
