//! A vendor adapter that misbehaves on purpose, so the host's tests can prove
//! the sandbox: a guest that loops, exhausts its memory, traps or returns
//! garbage must fail only its own call, and the same component must serve
//! the next call normally.
//!
//! The channel's upstream model name picks the misbehaviour (see
//! [`behaviour::Behaviour`]); any other name gets what the SDK's driver does
//! for an OpenAI chat vendor. Unlike a real adapter it implements the WIT
//! interface by hand, because it must be able to break every call.

mod behaviour;
mod sabotage;

use behaviour::Behaviour;
use gateway_guest_sdk::bindings::adapter::exports::gateway::plugin::adapter::{
    Guest, GuestStreamTranslator, StreamEnd, StreamTranslator,
};
use gateway_guest_sdk::bindings::types::{
    AnswerMode, AuthScheme, Descriptor, Header, PluginError, Protocol, RequestCtx, SseEvent,
    Translated, UpstreamError, UpstreamRequest,
};
use gateway_guest_sdk::driver::{Driver, StreamDriver};
use gateway_guest_sdk::{TranslateError, Vendor, VendorInfo};

/// The well-behaved side: an OpenAI chat vendor, like the `openai` adapter.
struct Plain;

impl Vendor for Plain {
    fn info() -> VendorInfo {
        VendorInfo::new(
            "misbehave",
            env!("CARGO_PKG_VERSION"),
            Protocol::OpenaiChat,
            AuthScheme::Bearer,
        )
    }

    fn path(_ctx: &RequestCtx) -> Result<String, TranslateError> {
        Ok("/chat/completions".to_owned())
    }
}

struct Misbehave;

impl Guest for Misbehave {
    type StreamTranslator = Translator;

    fn describe() -> Descriptor {
        Driver::<Plain>::describe()
    }

    fn translate_request(ctx: RequestCtx, body: Vec<u8>) -> Result<UpstreamRequest, PluginError> {
        match Behaviour::of(&ctx) {
            Behaviour::Loop => sabotage::spin_forever(),
            Behaviour::Oom => sabotage::exhaust_memory(),
            Behaviour::Trap => sabotage::trap(),
            Behaviour::Garbage => Ok(sabotage::garbage_request()),
            // Its answer must reach `translate-response`: no splice.
            Behaviour::GarbageResponse => {
                Driver::<Plain>::translate_request(ctx, body).map(|mut request| {
                    request.answer = AnswerMode::Translate;
                    request
                })
            }
            Behaviour::AlikeLies => {
                Driver::<Plain>::translate_request(ctx, body).map(sabotage::not_the_hosts_edit)
            }
            // `splice-lies`: asks for the host's splice, and answers otherwise.
            Behaviour::SpliceLies | Behaviour::LoopStream | Behaviour::Normal => {
                Driver::<Plain>::translate_request(ctx, body)
            }
        }
    }

    fn translate_response(
        ctx: RequestCtx,
        state: String,
        status: u16,
        headers: Vec<Header>,
        body: Vec<u8>,
    ) -> Result<Translated, PluginError> {
        match Behaviour::of(&ctx) {
            Behaviour::GarbageResponse => Ok(sabotage::garbage_response()),
            Behaviour::SpliceLies => Driver::<Plain>::translate_response(
                ctx, state, status, headers, body,
            )
            .map(|mut answer| {
                answer.body = sabotage::lie_in(answer.body);
                answer
            }),
            _ => Driver::<Plain>::translate_response(ctx, state, status, headers, body),
        }
    }

    fn translate_error(
        ctx: RequestCtx,
        status: u16,
        headers: Vec<Header>,
        body: Vec<u8>,
    ) -> UpstreamError {
        Driver::<Plain>::translate_error(ctx, status, headers, body)
    }
}

/// The driver's stream translator; under `loop-stream` its `push` never
/// returns from the third event on (the role chunk and the first words are
/// translated, so the stream has begun for the client).
pub struct Translator {
    inner: StreamDriver<Plain>,
    spin_on_push: bool,
    pushed: std::cell::Cell<u32>,
}

impl GuestStreamTranslator for Translator {
    fn new(ctx: RequestCtx, state: String) -> Self {
        Self {
            spin_on_push: Behaviour::of(&ctx) == Behaviour::LoopStream,
            pushed: std::cell::Cell::new(0),
            inner: StreamDriver::new(ctx, state),
        }
    }

    fn push(&self, ev: SseEvent) -> Result<Vec<SseEvent>, PluginError> {
        self.pushed.set(self.pushed.get() + 1);
        if self.spin_on_push && self.pushed.get() > 2 {
            sabotage::spin_forever();
        }
        self.inner.push(ev)
    }

    fn finish(this: StreamTranslator, rest: Vec<SseEvent>) -> Result<StreamEnd, PluginError> {
        let t = this.into_inner::<Self>();
        // The stream's last events count as pushes.
        let pushed = t.pushed.get() + u32::try_from(rest.len()).unwrap_or(u32::MAX);
        if t.spin_on_push && pushed > 2 {
            sabotage::spin_forever();
        }
        t.inner.end(rest)
    }
}

gateway_guest_sdk::bindings::adapter::export_vendor_adapter!(
    Misbehave with_types_in gateway_guest_sdk::bindings::adapter
);
