//! The `openai` vendor adapter: OpenAI chat-completions clients to any
//! OpenAI-compatible vendor.
//!
//! Client and vendor speak the same protocol, so bodies pass through with
//! only the model renamed and usage made visible (see
//! `gateway_guest_sdk::openai_passthrough`). This file is the WIT glue; the
//! translation lives in plain functions that are tested natively.

mod convert;
mod request;
mod response;
mod stream;

wit_bindgen::generate!({
    path: "../../wit",
    world: "vendor-adapter",
});

use exports::gateway::plugin::adapter::{
    Descriptor, Guest, PluginError, RequestCtx, Translated, UpstreamError, UpstreamRequest,
};
use gateway::plugin::log::{log, Level};
use gateway::plugin::types::{AuthScheme, Protocol};

struct OpenAiAdapter;

impl Guest for OpenAiAdapter {
    type StreamTranslator = stream::Translator;

    fn describe() -> Descriptor {
        Descriptor {
            name: "openai".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            vendor_protocol: "openai-v1".to_owned(),
            client_protocols: vec![Protocol::OpenaiChat],
            auth: AuthScheme::Bearer,
        }
    }

    fn translate_request(ctx: RequestCtx, body: Vec<u8>) -> Result<UpstreamRequest, PluginError> {
        let result = request::translate_request(&ctx, &body);
        if let Err(err) = &result {
            log(
                Level::Debug,
                &format!("request refused: {}", convert::error_text(err)),
            );
        }
        result
    }

    fn translate_response(
        ctx: RequestCtx,
        _state: String,
        _status: u16,
        body: Vec<u8>,
    ) -> Result<Translated, PluginError> {
        let result = response::translate_response(&ctx, &body);
        if let Err(err) = &result {
            log(
                Level::Warn,
                &format!("unreadable answer: {}", convert::error_text(err)),
            );
        }
        result
    }

    fn translate_error(_ctx: RequestCtx, status: u16, body: Vec<u8>) -> UpstreamError {
        response::translate_error(status, &body)
    }
}

export!(OpenAiAdapter);
