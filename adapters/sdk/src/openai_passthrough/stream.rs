use serde_json::value::RawValue;
use serde_json::Value;

use super::members::{choices, Members};
use super::{client_wants_usage, raw, read_usage};
use crate::canonical::Usage;
use crate::errors::in_answer_failure_from;
use crate::json::{parse_stream_chunk, to_bytes};
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
///
/// A chunk is not built into a tree and written out again: it is checked as
/// JSON and copied as the vendor wrote it, members in the vendor's order,
/// with only the values of `model` and `usage` replaced (added at its end
/// when missing); only `usage` and the `finish_reason`s of `choices` are
/// read ([`Members`]: a tree per chunk, then a map of its members written
/// out again, was most of a relayed frame's guest time).
#[derive(Debug)]
pub struct StreamRelay {
    /// The client's model name, as JSON text.
    client_model: Box<RawValue>,
    client_wants_usage: bool,
    /// The latest chunk with a `finish_reason`, as written, waiting for
    /// the usage.
    held: Option<String>,
    /// The vendor's usage object, details filled in, as the client sees it.
    usage_json: Option<Box<RawValue>>,
    usage: Option<Usage>,
    /// `[DONE]` or a chunk with a `finish_reason` arrived.
    finished: bool,
}

impl StreamRelay {
    /// `state` is what [`super::prepare_request`] returned.
    pub fn new(client_model: &str, state: &str) -> Self {
        Self {
            client_model: raw_or_null(&Value::from(client_model)),
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
        // Copied members keep the vendor's spacing; a chunk spread over
        // several lines is made one line first, as clients expect.
        let compact;
        let data = if data.bytes().any(|b| b == b'\n' || b == b'\r') {
            compact = String::from_utf8(to_bytes(&parse_stream_chunk(data)?)).unwrap_or_default();
            compact.as_str()
        } else {
            data
        };
        let Some(chunk) = Members::parse(data) else {
            return Err(match parse_stream_chunk(data) {
                Err(e) => e,
                Ok(_) => TranslateError::upstream("stream chunk is not a JSON object"),
            });
        };
        if chunk.get("error").is_some_and(|e| e.get() != "null") && !chunk.contains("choices") {
            // The vendor failed mid-answer: the stream ends with its
            // failure, as in every other translation. The host sends the
            // client its protocol's error event (the gateway's envelope,
            // with the request id) and records the vendor's message; a
            // chunk held for the usage goes no further.
            let chunk = parse_stream_chunk(data)?;
            return Err(TranslateError::Vendor(in_answer_failure_from(&chunk)));
        }
        let report = chunk
            .get("usage")
            .and_then(|member| Some((member, read_usage(member)?)));
        let carries_usage = report.is_some();
        if let Some((member, read)) = report {
            self.usage = read.billed;
            self.usage_json = Some(read.filled.unwrap_or_else(|| member.to_owned()));
        }
        let (has_choices, finishes) = chunk.get("choices").map_or((false, false), choices);
        self.finished |= finishes;
        // The client's model name; the usage read (with its details filled
        // in) where the chunk carries one, and every chunk shows `usage`,
        // `null` where it has none (spec §2.9).
        let written = || {
            let model = self.client_model.get();
            match (carries_usage, &self.usage_json) {
                (true, Some(usage)) => {
                    chunk.splice(&[("model", model), ("usage", usage.get())], &[])
                }
                _ => chunk.splice(&[("model", model)], &[("usage", "null")]),
            }
        };

        if self.client_wants_usage {
            return Ok(vec![written()]);
        }
        if carries_usage && !has_choices {
            // The usage report: its usage goes into the held chunk and the
            // report itself is dropped. With nothing held the usage waits
            // for `finish`.
            return Ok(release(&mut self.held, self.usage_json.as_deref()));
        }
        // Whatever is held goes first so the client sees chunks in order.
        let text = written();
        let mut out = release(&mut self.held, None);
        if finishes && !carries_usage {
            self.held = Some(text);
        } else {
            out.push(text);
        }
        Ok(out)
    }

    /// Ends the stream: anything still held (with the usage known by now),
    /// then `[DONE]`.
    pub fn finish(&mut self) -> StreamClose {
        let mut events = release(&mut self.held, self.usage_json.as_deref());
        events.push("[DONE]".to_owned());
        StreamClose {
            events,
            usage: self.usage,
            complete: self.finished,
        }
    }
}

/// Takes the held chunk out, with `usage` in it when given.
fn release(held: &mut Option<String>, usage: Option<&RawValue>) -> Vec<String> {
    let Some(text) = held.take() else {
        return Vec::new();
    };
    // The held text is one this relay wrote: it reads back.
    let with_usage =
        usage.and_then(|usage| Some(Members::parse(&text)?.splice(&[("usage", usage.get())], &[])));
    vec![with_usage.unwrap_or(text)]
}

/// A value as JSON text (`null` if it could not be written, which does
/// not happen in practice).
fn raw_or_null(value: &Value) -> Box<RawValue> {
    raw(value).unwrap_or_else(|| RawValue::NULL.to_owned())
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
    fn chunks_are_copied_as_the_vendor_wrote_them_with_model_and_usage_edited() {
        let mut relay = StreamRelay::new("client", "");
        let chunk = r#"{"id":"c","model":"up","x":{"n":1e-4,
            "s":"caf\u00e9"},"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}"#;
        // One line is kept as sent; several lines become one.
        for data in [chunk.replace('\n', " "), chunk.to_owned()] {
            let out = relay.push(&data).unwrap();
            assert_eq!(out.len(), 1);
            assert!(!out[0].contains('\n'), "{}", out[0]);
            let sent: Value = serde_json::from_str(&out[0]).unwrap();
            assert_eq!(sent["model"], "client");
            assert_eq!(sent["usage"], Value::Null);
            assert_eq!(sent["x"]["s"], "café");
        }
        let out = relay.push(&chunk.replace('\n', " ")).unwrap();
        assert!(out[0].contains(r#""n":1e-4"#), "{}", out[0]);
        assert!(out[0].contains(r#""caf\u00e9""#), "{}", out[0]);
    }

    #[test]
    fn only_a_non_null_finish_reason_finishes() {
        let finishes = |choices: &str| {
            let mut relay = StreamRelay::new("client", "");
            let out = relay
                .push(&format!(r#"{{"model":"up","choices":{choices}}}"#))
                .unwrap();
            // A finishing chunk is held for the usage.
            (out.is_empty(), relay.finish().complete)
        };
        assert_eq!(finishes(r#"[{"finish_reason":"stop"}]"#), (true, true));
        assert_eq!(
            finishes(r#"[{"index":0},{"finish_reason":"length"}]"#),
            (true, true)
        );
        assert_eq!(finishes(r#"[{"finish_reason":null}]"#), (false, false));
        assert_eq!(finishes(r#"[{"index":0}]"#), (false, false));
        assert_eq!(finishes(r#"[1, "x", null]"#), (false, false));
        assert_eq!(finishes(r#"{"finish_reason":"stop"}"#), (false, false));
        assert_eq!(
            finishes(r#"[{"finish_reason":null,"finish_reason":"stop"}]"#),
            (true, true)
        );
    }

    #[test]
    fn a_usage_that_is_not_an_object_is_not_a_report() {
        let mut relay = StreamRelay::new("client", "");
        let out = relay
            .push(r#"{"model":"up","choices":[],"usage":"n/a"}"#)
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(usage_of(&out[0]), "n/a");
        assert_eq!(relay.finish().usage, None);
    }

    #[test]
    fn an_in_stream_error_is_the_vendors_failure_redacted() {
        let mut relay = StreamRelay::new("client", "");
        assert!(relay.push(&content("hi")).is_ok());
        let error = json!({"error": {"message": "key sk-abcdef123456 revoked", "type": "x"}});
        let Err(TranslateError::Vendor(failure)) = relay.push(&error.to_string()) else {
            panic!("an error chunk fails the stream");
        };
        assert_eq!((failure.status, failure.code), (502, "upstream_error"));
        assert_eq!(
            failure.message,
            "the upstream reported an error mid-answer: key [redacted] revoked"
        );
        // A rate limit stays one.
        let limited = json!({"error": {"message": "slow down", "type": "rate_limit_exceeded"}});
        let Err(TranslateError::Vendor(failure)) = relay.push(&limited.to_string()) else {
            panic!("an error chunk fails the stream");
        };
        assert_eq!(failure.status, 429);
        // `"error": null` is no error.
        let chunk = json!({"model": "up", "error": null});
        assert!(relay.push(&chunk.to_string()).is_ok());
    }
}
