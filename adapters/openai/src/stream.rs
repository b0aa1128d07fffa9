use std::cell::RefCell;

use gateway_guest_sdk::openai_passthrough::StreamRelay;

use crate::convert::{data_events, usage};
use crate::exports::gateway::plugin::adapter::{
    GuestStreamTranslator, PluginError, RequestCtx, SseEvent, StreamEnd,
};
use crate::gateway::plugin::log::{log, Level};

/// One stream's translator. WIT resource methods take `&self`, hence the
/// `RefCell`; a component instance is single-threaded, so it never contends.
pub struct Translator {
    relay: RefCell<StreamRelay>,
}

impl GuestStreamTranslator for Translator {
    fn new(ctx: RequestCtx, state: String) -> Self {
        Self {
            relay: RefCell::new(StreamRelay::new(&ctx.model, &state)),
        }
    }

    fn push(&self, ev: SseEvent) -> Result<Vec<SseEvent>, PluginError> {
        let payloads = self
            .relay
            .borrow_mut()
            .push(&ev.data)
            .map_err(crate::convert::plugin_error)?;
        Ok(data_events(payloads))
    }

    fn finish(&self) -> Result<StreamEnd, PluginError> {
        let close = self.relay.borrow_mut().finish();
        if close.usage.is_none() {
            // The host will have to estimate; worth noticing per vendor.
            log(Level::Warn, "vendor stream ended without a usage report");
        }
        Ok(StreamEnd {
            events: data_events(close.events),
            usage: close.usage.map(usage),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::tests::ctx;
    use serde_json::{json, Value};

    fn event(data: Value) -> SseEvent {
        SseEvent {
            event: None,
            data: data.to_string(),
        }
    }

    fn vendor_stream() -> Vec<SseEvent> {
        vec![
            event(
                json!({"id": "c", "object": "chat.completion.chunk", "model": "gpt-upstream",
                         "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"},
                                      "finish_reason": null}]}),
            ),
            event(
                json!({"id": "c", "object": "chat.completion.chunk", "model": "gpt-upstream",
                         "choices": [{"index": 0, "delta": {"content": "lo"},
                                      "finish_reason": "stop"}], "usage": null}),
            ),
            event(
                json!({"id": "c", "object": "chat.completion.chunk", "model": "gpt-upstream",
                         "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2,
                                                  "total_tokens": 7}}),
            ),
            SseEvent {
                event: None,
                data: "[DONE]".to_owned(),
            },
        ]
    }

    fn run(state: &str) -> (Vec<Value>, StreamEnd) {
        let translator = Translator::new(ctx(true), state.to_owned());
        let mut out = Vec::new();
        for ev in vendor_stream() {
            for sent in translator.push(ev).unwrap() {
                assert_eq!(sent.event, None);
                out.push(serde_json::from_str(&sent.data).unwrap());
            }
        }
        (out, translator.finish().unwrap())
    }

    #[test]
    fn client_without_usage_request_sees_usage_in_the_last_chunk() {
        let (out, end) = run("");
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|c| c["model"] == "gpt-client"));
        assert_eq!(out[0]["usage"], Value::Null);
        assert_eq!(out[1]["choices"][0]["finish_reason"], "stop");
        assert_eq!(out[1]["usage"]["total_tokens"], 7);
        assert_eq!(end.events.len(), 1);
        assert_eq!(end.events[0].data, "[DONE]");
        let usage = end.usage.unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens), (5, 2));
    }

    #[test]
    fn client_with_usage_request_sees_the_usage_chunk() {
        let (out, end) = run("usage");
        assert_eq!(out.len(), 3);
        assert_eq!(out[1]["usage"], Value::Null);
        assert_eq!(out[2]["choices"], json!([]));
        assert_eq!(out[2]["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        assert_eq!(end.events.len(), 1);
        assert!(end.usage.is_some());
    }

    #[test]
    fn garbage_events_are_upstream_format() {
        let translator = Translator::new(ctx(true), String::new());
        let bad = SseEvent {
            event: None,
            data: "{oops".to_owned(),
        };
        assert!(matches!(
            translator.push(bad),
            Err(PluginError::UpstreamFormat(_))
        ));
    }
}
