//! An adapter built against the frozen copy of `gateway:plugin@0.1.0` in
//! `wit/` beside this crate. It exists so the host's tests can show that a
//! component built for an older contract is refused at load with a log line
//! naming both versions, rather than loaded and misread.

wit_bindgen::generate!({
    path: "wit",
    world: "vendor-adapter",
});

use exports::gateway::plugin::adapter::{
    Descriptor, Guest, GuestStreamTranslator, PluginError, RequestCtx, SseEvent, StreamEnd,
    Translated, UpstreamError, UpstreamRequest,
};
use gateway::plugin::types::{AuthScheme, Protocol};

struct Old;

fn refused() -> PluginError {
    PluginError::Unsupported("built for gateway:plugin@0.1.0".to_owned())
}

impl Guest for Old {
    type StreamTranslator = Old;

    fn describe() -> Descriptor {
        Descriptor {
            name: "old-contract".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            vendor_protocol: "openai-v1".to_owned(),
            client_protocols: vec![Protocol::OpenaiChat],
            auth: AuthScheme::Bearer,
        }
    }

    fn translate_request(_: RequestCtx, _: Vec<u8>) -> Result<UpstreamRequest, PluginError> {
        Err(refused())
    }

    fn translate_response(
        _: RequestCtx,
        _: String,
        _: u16,
        _: Vec<u8>,
    ) -> Result<Translated, PluginError> {
        Err(refused())
    }

    fn translate_error(_: RequestCtx, status: u16, _: Vec<u8>) -> UpstreamError {
        UpstreamError {
            status,
            code: "upstream_error".to_owned(),
            message: "built for gateway:plugin@0.1.0".to_owned(),
            retryable: false,
        }
    }
}

impl GuestStreamTranslator for Old {
    fn new(_: RequestCtx, _: String) -> Self {
        Old
    }

    fn push(&self, _: SseEvent) -> Result<Vec<SseEvent>, PluginError> {
        Err(refused())
    }

    fn finish(&self) -> Result<StreamEnd, PluginError> {
        Err(refused())
    }
}

export!(Old);
