use serde_json::Value;

use super::client_wants_usage;
use crate::canonical::Usage;
use crate::errors::MAX_VENDOR_MESSAGE_CHARS;
use crate::json::{has_non_null, set_model, to_text};
use crate::openai_chat::{ensure_usage_details, parse_usage};
use crate::redact::clean_message;
use crate::TranslateError;

/// How the stream ends: the last data payloads (the final `[DONE]` included)
/// and the usage to bill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamClose {
    pub events: Vec<String>,
    pub usage: Option<Usage>,
    /// Whether the vendor finished the stream (`[DONE]` or a `finish_reason`).
    pub complete: bool,
}

/// Relays an OpenAI chat stream event by event.
///
/// The vendor is always asked for a usage report (a last chunk with
/// `choices: []`). A client that asked for it too gets it as is. A client
/// that did not would choke on a chunk without choices (SDK code commonly
/// reads `choices[0]`), so the chunk that finishes the answer is held back
/// and sent once the usage is known, with the usage inside it. Either way
/// every chunk before the last shows `"usage": null` (spec §2.9).
#[derive(Debug)]
pub struct StreamRelay {
    client_model: String,
    client_wants_usage: bool,
    /// The latest chunk with a `finish_reason`, waiting for the usage.
    held: Option<Value>,
    /// The vendor's usage object, details filled in, as the client sees it.
    usage_json: Option<Value>,
    usage: Option<Usage>,
    /// `[DONE]` or a chunk with a `finish_reason` arrived.
    finished: bool,
}

impl StreamRelay {
    /// `state` is what [`super::prepare_request`] returned.
    pub fn new(client_model: &str, state: &str) -> Self {
        Self {
            client_model: client_model.to_owned(),
            client_wants_usage: client_wants_usage(state),
            held: None,
            usage_json: None,
            usage: None,
            finished: false,
        }
    }

    /// Translates one event's data into zero or more data payloads.
    pub fn push(&mut self, data: &str) -> Result<Vec<String>, TranslateError> {
        let data = data.trim();
        // `[DONE]` is re-emitted by `finish`, after anything still held.
        // Empty events are keep-alives and mean nothing to a client.
        if data == "[DONE]" {
            self.finished = true;
            return Ok(Vec::new());
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let mut chunk: Value = serde_json::from_str(data).map_err(|err| {
            TranslateError::upstream(format!("stream chunk is not valid JSON ({err})"))
        })?;
        let Some(object) = chunk.as_object() else {
            return Err(TranslateError::upstream(
                "stream chunk is not a JSON object",
            ));
        };
        if object.contains_key("error") && !object.contains_key("choices") {
            let mut out = self.release_held(false);
            out.push(to_text(&sanitised_error(chunk)));
            return Ok(out);
        }
        set_model(&mut chunk, &self.client_model);
        let carries_usage = self.record_usage(&mut chunk);
        let choices = chunk.get("choices").and_then(Value::as_array);
        let has_choices = choices.is_some_and(|c| !c.is_empty());
        let finishes =
            choices.is_some_and(|c| c.iter().any(|ch| has_non_null(ch, "finish_reason")));
        self.finished |= finishes;

        if self.client_wants_usage {
            ensure_usage_member(&mut chunk);
            return Ok(vec![to_text(&chunk)]);
        }
        if carries_usage && !has_choices {
            // The usage report: its usage goes into the held chunk and the
            // report itself is dropped. With nothing held the usage waits
            // for `finish`.
            return Ok(self.release_held(true));
        }
        // Whatever is held goes first so the client sees chunks in order.
        let mut out = self.release_held(false);
        ensure_usage_member(&mut chunk);
        if finishes && !carries_usage {
            self.held = Some(chunk);
        } else {
            out.push(to_text(&chunk));
        }
        Ok(out)
    }

    /// Ends the stream: anything still held (with the usage known by now),
    /// then `[DONE]`.
    pub fn finish(&mut self) -> StreamClose {
        let mut events = self.release_held(true);
        events.push("[DONE]".to_owned());
        StreamClose {
            events,
            usage: self.usage,
            complete: self.finished,
        }
    }

    /// Records the chunk's usage, if it has one, and reports whether it did.
    fn record_usage(&mut self, chunk: &mut Value) -> bool {
        let Some(usage) = chunk.get_mut("usage").filter(|u| u.is_object()) else {
            return false;
        };
        ensure_usage_details(usage);
        self.usage = parse_usage(usage);
        self.usage_json = Some(usage.clone());
        true
    }

    /// Takes the held chunk out, with the known usage when `with_usage`.
    fn release_held(&mut self, with_usage: bool) -> Vec<String> {
        let Some(mut held) = self.held.take() else {
            return Vec::new();
        };
        if with_usage {
            if let (Some(object), Some(usage)) = (held.as_object_mut(), &self.usage_json) {
                object.insert("usage".to_owned(), usage.clone());
            }
        }
        vec![to_text(&held)]
    }
}

fn ensure_usage_member(chunk: &mut Value) {
    if let Some(object) = chunk.as_object_mut() {
        object.entry("usage").or_insert(Value::Null);
    }
}

/// Vendors may report a failure inside the stream; the client gets it, minus
/// anything credential-like in the message.
fn sanitised_error(mut chunk: Value) -> Value {
    let message = match chunk.get_mut("error") {
        Some(Value::Object(error)) => error.get_mut("message"),
        Some(error @ Value::String(_)) => Some(error),
        _ => None,
    };
    if let Some(Value::String(text)) = message {
        *text = clean_message(text, MAX_VENDOR_MESSAGE_CHARS);
    }
    chunk
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map};

    /// The usage member of an emitted payload.
    fn usage_of(payload: &str) -> Value {
        serde_json::from_str::<Map<String, Value>>(payload)
            .ok()
            .and_then(|mut object| object.remove("usage"))
            .unwrap_or(Value::String("<absent>".into()))
    }

    fn content(text: &str) -> String {
        json!({"id": "c", "object": "chat.completion.chunk", "model": "up",
               "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        .to_string()
    }

    fn finishing() -> String {
        json!({"id": "c", "object": "chat.completion.chunk", "model": "up",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": null})
        .to_string()
    }

    fn usage_report() -> String {
        json!({"id": "c", "object": "chat.completion.chunk", "model": "up", "choices": [],
               "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10,
                         "prompt_tokens_details": {"cached_tokens": 2}}})
        .to_string()
    }

    fn expected_usage() -> Usage {
        Usage {
            input_tokens: 7,
            output_tokens: 3,
            cache_read_tokens: 2,
            cache_write_tokens: 0,
            reasoning_tokens: 0,
        }
    }

    fn run(relay: &mut StreamRelay, events: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for event in events {
            out.extend(relay.push(event).unwrap());
        }
        out
    }

    #[test]
    fn client_that_asked_gets_the_usage_chunk() {
        let mut relay = StreamRelay::new("client", "usage");
        let out = run(
            &mut relay,
            &[content("Hi"), finishing(), usage_report(), "[DONE]".into()],
        );
        assert_eq!(out.len(), 3);
        assert_eq!(usage_of(&out[0]), Value::Null);
        assert_eq!(usage_of(&out[1]), Value::Null);
        let last: Value = serde_json::from_str(&out[2]).unwrap();
        assert_eq!(last["choices"], json!([]));
        assert_eq!(last["model"], "client");
        assert_eq!(
            last["usage"]["completion_tokens_details"]["reasoning_tokens"],
            0
        );
        let close = relay.finish();
        assert_eq!(close.events, vec!["[DONE]".to_owned()]);
        assert_eq!(close.usage, Some(expected_usage()));
    }

    #[test]
    fn client_that_did_not_ask_gets_usage_in_the_finishing_chunk() {
        let mut relay = StreamRelay::new("client", "");
        let out = run(&mut relay, &[content("Hi"), finishing()]);
        assert_eq!(out.len(), 1, "the finishing chunk is held");
        let out = run(&mut relay, &[usage_report(), "[DONE]".into()]);
        assert_eq!(out.len(), 1);
        let last: Value = serde_json::from_str(&out[0]).unwrap();
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
        assert_eq!(last["model"], "client");
        assert_eq!(last["usage"]["prompt_tokens"], 7);
        assert_eq!(last["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
        let close = relay.finish();
        assert_eq!(close.events, vec!["[DONE]".to_owned()]);
        assert_eq!(close.usage, Some(expected_usage()));
    }

    #[test]
    fn held_chunk_is_released_by_finish_when_no_usage_came() {
        let mut relay = StreamRelay::new("client", "");
        let out = run(&mut relay, &[content("Hi"), finishing()]);
        assert_eq!(out.len(), 1);
        let close = relay.finish();
        assert_eq!(close.events.len(), 2);
        assert_eq!(usage_of(&close.events[0]), Value::Null);
        assert_eq!(close.events[1], "[DONE]");
        assert_eq!(close.usage, None);
    }

    #[test]
    fn usage_inside_a_choice_chunk_passes_through() {
        let chunk = json!({"model": "up", "choices": [{"index": 0, "delta": {},
                           "finish_reason": "length"}],
                           "usage": {"prompt_tokens": 7, "completion_tokens": 3,
                                     "prompt_tokens_details": {"cached_tokens": 2}}})
        .to_string();
        for state in ["", "usage"] {
            let mut relay = StreamRelay::new("client", state);
            let out = run(&mut relay, &[content("a"), chunk.clone()]);
            assert_eq!(out.len(), 2, "state {state:?}");
            assert_eq!(usage_of(&out[1])["prompt_tokens"], 7);
            let close = relay.finish();
            assert_eq!(close.events, vec!["[DONE]".to_owned()]);
            assert_eq!(close.usage, Some(expected_usage()));
        }
    }

    #[test]
    fn later_chunks_release_the_held_one_in_order() {
        // Two choices (n = 2) finishing one after the other.
        let second = json!({"model": "up", "choices": [{"index": 1, "delta": {},
                            "finish_reason": "stop"}]})
        .to_string();
        let mut relay = StreamRelay::new("client", "");
        let out = run(&mut relay, &[finishing(), second, usage_report()]);
        assert_eq!(out.len(), 2);
        assert_eq!(usage_of(&out[0]), Value::Null);
        assert_eq!(usage_of(&out[1])["prompt_tokens"], 7);
    }

    #[test]
    fn usage_before_the_finishing_chunk_waits_for_it() {
        let mut relay = StreamRelay::new("client", "");
        let out = run(&mut relay, &[usage_report(), finishing()]);
        assert!(out.is_empty());
        let close = relay.finish();
        assert_eq!(usage_of(&close.events[0])["prompt_tokens"], 7);
    }

    #[test]
    fn keep_alives_and_done_emit_nothing() {
        let mut relay = StreamRelay::new("client", "");
        assert!(relay.push("").unwrap().is_empty());
        assert!(relay.push(" [DONE] ").unwrap().is_empty());
    }

    #[test]
    fn garbage_is_an_upstream_error() {
        let mut relay = StreamRelay::new("client", "");
        assert!(matches!(
            relay.push("{not json"),
            Err(TranslateError::UpstreamFormat(_))
        ));
        assert!(matches!(
            relay.push("[1,2]"),
            Err(TranslateError::UpstreamFormat(_))
        ));
    }

    #[test]
    fn in_stream_errors_pass_through_redacted() {
        let mut relay = StreamRelay::new("client", "");
        let error = json!({"error": {"message": "key sk-abcdef123456 revoked", "type": "x"}});
        let out = run(&mut relay, &[finishing(), error.to_string()]);
        assert_eq!(out.len(), 2);
        let sent: Value = serde_json::from_str(&out[1]).unwrap();
        assert_eq!(sent["error"]["message"], "key [redacted] revoked");
        assert!(sent.get("model").is_none());
    }
}
