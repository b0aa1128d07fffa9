//! The well-behaved side: an OpenAI passthrough built from the SDK, like the
//! `openai` adapter, so tests can show the component still serves calls after
//! one of them misbehaved.

use std::cell::RefCell;

use gateway_guest_sdk::errors::map_openai_error;
use gateway_guest_sdk::openai_passthrough::{finish_response, prepare_request, StreamRelay};

use crate::behaviour::Behaviour;
use crate::convert::{data_events, plugin_error, upstream_error, usage};
use crate::exports::gateway::plugin::adapter::{
    GuestStreamTranslator, PluginError, RequestCtx, SseEvent, StreamEnd, Translated, UpstreamError,
    UpstreamRequest,
};
use crate::gateway::plugin::types::{Header, Protocol};
use crate::sabotage;

pub fn translate_request(ctx: &RequestCtx, body: &[u8]) -> Result<UpstreamRequest, PluginError> {
    if ctx.client_protocol != Protocol::OpenaiChat {
        return Err(PluginError::Unsupported(
            "only OpenAI chat requests are translated".to_owned(),
        ));
    }
    let prepared = prepare_request(body, &ctx.upstream_model, ctx.stream).map_err(plugin_error)?;
    Ok(UpstreamRequest {
        method: "POST".to_owned(),
        path: "/chat/completions".to_owned(),
        headers: vec![Header {
            name: "content-type".to_owned(),
            value: "application/json".to_owned(),
        }],
        body: prepared.body,
        state: prepared.state,
    })
}

pub fn translate_response(ctx: &RequestCtx, body: &[u8]) -> Result<Translated, PluginError> {
    let finished = finish_response(body, &ctx.model).map_err(plugin_error)?;
    Ok(Translated {
        status: 200,
        content_type: "application/json".to_owned(),
        body: finished.body,
        usage: finished.usage.map(usage),
    })
}

pub fn translate_error(status: u16, body: &[u8]) -> UpstreamError {
    upstream_error(map_openai_error(status, body))
}

/// The stream translator; under `loop-stream` its `push` never returns.
pub struct Translator {
    relay: RefCell<StreamRelay>,
    spin_on_push: bool,
}

impl GuestStreamTranslator for Translator {
    fn new(ctx: RequestCtx, state: String) -> Self {
        Self {
            relay: RefCell::new(StreamRelay::new(&ctx.model, &state)),
            spin_on_push: Behaviour::of(&ctx) == Behaviour::LoopStream,
        }
    }

    fn push(&self, ev: SseEvent) -> Result<Vec<SseEvent>, PluginError> {
        if self.spin_on_push {
            sabotage::spin_forever();
        }
        let payloads = self
            .relay
            .borrow_mut()
            .push(&ev.data)
            .map_err(plugin_error)?;
        Ok(data_events(payloads))
    }

    fn finish(&self) -> Result<StreamEnd, PluginError> {
        let close = self.relay.borrow_mut().finish();
        Ok(StreamEnd {
            events: data_events(close.events),
            usage: close.usage.map(usage),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn ctx(upstream_model: &str) -> RequestCtx {
        RequestCtx {
            client_protocol: Protocol::OpenaiChat,
            model: "client".to_owned(),
            upstream_model: upstream_model.to_owned(),
            stream: true,
            request_id: "r".to_owned(),
        }
    }

    #[test]
    fn behaves_like_the_openai_adapter() {
        let body = json!({"model": "client", "messages": [], "stream": true});
        let sent = translate_request(&ctx("sim-chat"), body.to_string().as_bytes()).unwrap();
        let sent_body: Value = serde_json::from_slice(&sent.body).unwrap();
        assert_eq!(sent_body["model"], "sim-chat");
        assert_eq!(sent_body["stream_options"]["include_usage"], true);

        let translator = Translator::new(ctx("sim-chat"), sent.state);
        let chunk = json!({"model": "sim-chat", "choices": [{"index": 0,
                           "delta": {"content": "x"}, "finish_reason": null}]});
        let out = translator
            .push(SseEvent {
                event: None,
                data: chunk.to_string(),
            })
            .unwrap();
        assert_eq!(out.len(), 1);
        let end = translator.finish().unwrap();
        assert_eq!(end.events.last().map(|e| e.data.as_str()), Some("[DONE]"));
    }

    #[test]
    fn garbage_response_model_still_gets_a_normal_request() {
        let sent = translate_request(&ctx("garbage-response"), br#"{"messages":[]}"#).unwrap();
        assert_eq!(sent.method, "POST");
    }
}
