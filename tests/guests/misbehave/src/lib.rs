//! A vendor adapter that misbehaves on purpose, so the host's tests can prove
//! the sandbox: a guest that loops, exhausts its memory, traps or returns
//! garbage must fail only its own call, and the same component must serve
//! the next call normally.
//!
//! The channel's upstream model name picks the misbehaviour (see
//! [`behaviour::Behaviour`]); any other name gets a plain OpenAI passthrough.

mod behaviour;
mod convert;
mod passthrough;
mod sabotage;

wit_bindgen::generate!({
    path: "../../../wit",
    world: "vendor-adapter",
});

use behaviour::Behaviour;
use exports::gateway::plugin::adapter::{
    Descriptor, Guest, PluginError, RequestCtx, Translated, UpstreamError, UpstreamRequest,
};
use gateway::plugin::types::{AuthScheme, Protocol};

struct Misbehave;

impl Guest for Misbehave {
    type StreamTranslator = passthrough::Translator;

    fn describe() -> Descriptor {
        Descriptor {
            name: "misbehave".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            vendor_protocol: "openai-v1".to_owned(),
            client_protocols: vec![Protocol::OpenaiChat],
            auth: AuthScheme::Bearer,
        }
    }

    fn translate_request(ctx: RequestCtx, body: Vec<u8>) -> Result<UpstreamRequest, PluginError> {
        match Behaviour::of(&ctx) {
            Behaviour::Loop => sabotage::spin_forever(),
            Behaviour::Oom => sabotage::exhaust_memory(),
            Behaviour::Trap => sabotage::trap(),
            Behaviour::Garbage => Ok(sabotage::garbage_request()),
            Behaviour::GarbageResponse | Behaviour::LoopStream | Behaviour::Normal => {
                passthrough::translate_request(&ctx, &body)
            }
        }
    }

    fn translate_response(
        ctx: RequestCtx,
        _state: String,
        _status: u16,
        body: Vec<u8>,
    ) -> Result<Translated, PluginError> {
        match Behaviour::of(&ctx) {
            Behaviour::GarbageResponse => Ok(sabotage::garbage_response()),
            _ => passthrough::translate_response(&ctx, &body),
        }
    }

    fn translate_error(_ctx: RequestCtx, status: u16, body: Vec<u8>) -> UpstreamError {
        passthrough::translate_error(status, &body)
    }
}

export!(Misbehave);
