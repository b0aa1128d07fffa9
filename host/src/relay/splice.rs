//! A stream's ordinary events relayed by the host itself, on the adapter's
//! word (`answer-mode.splice` in `wit/plugin.wit`).
//!
//! Why: when the vendor streams in the client's own protocol, the adapter's
//! translator only copies most events, setting the model name the client
//! sees. A call into the guest for each of them was about a quarter of a
//! relayed frame's CPU (wasmtime's side of the call, the copies in and out,
//! serde_json in WebAssembly); the same edit here is one native pass of
//! serde_json over the chunk and one copy of its text.
//!
//! The rule, as the contract states it (OpenAI chat and completions, the
//! only protocols with one): an ordinary event has no `event:` name and
//! its data is one JSON object on one line, nothing around it, holding
//! `model` and a non-empty `choices` array of objects, none with a
//! non-null `finish_reason`, `usage` missing or `null` and no `error`, none
//! of these written twice. It goes on as written, with `model`'s value
//! replaced and `"usage":null` added before the closing brace when `usage`
//! is missing. Anything else — a finishing chunk, the usage report, an
//! error, `[DONE]`, a keep-alive, a chunk the rule cannot read — goes to the
//! translator, and so does every event after it: the translator may hold a
//! finishing chunk back until the usage comes, and a chunk spliced past it
//! would reach the client first. `gateway adapter test` compares the two
//! paths on every streamed fixture of an adapter that asks for a splice.
//!
//! The same pass reads the chunk's generated text for the relay's count
//! (`relay::relayed`), with the types the count reads any event with
//! (`typed_text`), so a spliced chunk is parsed once, not twice.

use super::typed_text::{Obj, SplicedChoice};
use crate::plugins::bindings::types::{Protocol, SseEvent};
use serde::de::{Deserializer, IgnoredAny};
use serde::Deserialize;
use serde_json::value::RawValue;

/// One stream's splice: what the host writes into an ordinary event, and
/// whether it still splices.
#[derive(Debug)]
pub(crate) struct Splice {
    /// The client's protocol: which text the count reads.
    protocol: Protocol,
    /// The client's model name as JSON text.
    model: String,
    on: bool,
}

impl Splice {
    /// The splice an adapter asked for, for a stream whose client speaks
    /// `protocol`; `None` where the host has no rule for it (the stream is
    /// translated whole, as the contract says).
    pub(crate) fn new(protocol: Protocol, model: &str) -> Option<Self> {
        if !matches!(protocol, Protocol::OpenaiChat | Protocol::OpenaiCompletions) {
            return None;
        }
        Some(Self {
            protocol,
            model: serde_json::to_string(model).ok()?,
            on: true,
        })
    }

    /// The client's event for `ev` when it is ordinary, its generated
    /// text (what `relayed` would read in the event sent) appended to
    /// `text`; `None` when the translator has to see it, and for every event
    /// after that (`text` untouched).
    pub(crate) fn relay(&mut self, ev: &SseEvent, text: &mut String) -> Option<SseEvent> {
        if !self.on {
            return None;
        }
        let spliced = if ev.event.is_none() {
            splice_chunk(&ev.data, &self.model, self.protocol, text)
        } else {
            None
        };
        self.on = spliced.is_some();
        spliced.map(|data| SseEvent { event: None, data })
    }
}

/// What the rule reads of a chunk; a chunk it cannot read this way (a
/// required member missing, one written twice, a choice that is not an
/// object) is not ordinary.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow)]
    model: &'a RawValue,
    #[serde(borrow)]
    choices: Vec<Obj<SplicedChoice<'a>>>,
    #[serde(default, borrow, deserialize_with = "present")]
    usage: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    error: Option<IgnoredAny>,
}

/// A member that is there, whatever its value (`null` too).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// `data` spliced, when it is an ordinary chunk; its text appended to
/// `text` then.
fn splice_chunk(data: &str, model: &str, protocol: Protocol, text: &mut String) -> Option<String> {
    let bytes = data.as_bytes();
    // One object on one line, nothing around it (serde would also read a
    // struct from an array, and a chunk the translator trims or makes one
    // line is its to write).
    if bytes.first() != Some(&b'{')
        || bytes.last() != Some(&b'}')
        || bytes.iter().any(|&b| b == b'\n' || b == b'\r')
    {
        return None;
    }
    let chunk: Chunk<'_> = serde_json::from_str(data).ok()?;
    let usage_missing = match chunk.usage {
        None => true,
        Some(usage) if usage.get() == "null" => false,
        Some(_) => return None,
    };
    // Each choice an object (serde would read one from an array too),
    // none finishing.
    let ordinary = |c: &Obj<SplicedChoice<'_>>| c.0.as_ref().is_some_and(|c| !c.finishes());
    if chunk.error.is_some() || chunk.choices.is_empty() || !chunk.choices.iter().all(ordinary) {
        return None;
    }
    let (start, end) = span(data, chunk.model)?;
    let close = data.len() - 1;
    let mut out = String::with_capacity(data.len() + model.len() + 13);
    out.push_str(data.get(..start)?);
    out.push_str(model);
    if usage_missing {
        out.push_str(data.get(end..close)?);
        out.push_str(",\"usage\":null}");
    } else {
        out.push_str(data.get(end..)?);
    }
    for choice in chunk.choices.iter().filter_map(|c| c.0.as_ref()) {
        choice.push_text(protocol, text);
    }
    Some(out)
}

/// Where `value`, read from `text` by borrowing, lies in it.
fn span(text: &str, value: &RawValue) -> Option<(usize, usize)> {
    let value = value.get();
    let start = (value.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    let end = start.checked_add(value.len())?;
    text.get(start..end)?;
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(text: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: text.into(),
        }
    }

    impl Splice {
        fn relay_alone(&mut self, ev: &SseEvent) -> Option<SseEvent> {
            self.relay(ev, &mut String::new())
        }
    }

    fn splice() -> Splice {
        Splice::new(Protocol::OpenaiChat, "gpt-4o-mini").unwrap()
    }

    #[test]
    fn an_ordinary_chunk_gets_the_model_and_a_null_usage() {
        let mut s = splice();
        let out = s.relay_alone(&data(
            r#"{"id":"c1","model":"vendor-x","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}"#,
        ));
        assert_eq!(
            out.unwrap().data,
            r#"{"id":"c1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}"#
        );
        // A `usage: null` already there stays as written; spacing too.
        let out = s.relay_alone(&data(
            r#"{"model": "vendor-x", "usage": null, "choices": [{"delta": {}}] }"#,
        ));
        assert_eq!(
            out.unwrap().data,
            r#"{"model": "gpt-4o-mini", "usage": null, "choices": [{"delta": {}}] }"#
        );
        // Spaces before the closing brace stay before the added member.
        let out = s.relay_alone(&data(r#"{"model":"m","choices":[{}] }"#));
        assert_eq!(
            out.unwrap().data,
            r#"{"model":"gpt-4o-mini","choices":[{}] ,"usage":null}"#
        );
    }

    #[test]
    fn the_model_name_is_written_as_json() {
        let mut s = Splice::new(Protocol::OpenaiCompletions, "a\"b").unwrap();
        let out = s.relay_alone(&data(r#"{"model":"m","choices":[{"text":"x"}]}"#));
        assert_eq!(
            out.unwrap().data,
            r#"{"model":"a\"b","choices":[{"text":"x"}],"usage":null}"#
        );
    }

    #[test]
    fn other_events_go_to_the_translator() {
        let not_ordinary = [
            "[DONE]",
            "",
            " {\"model\":\"m\",\"choices\":[{}]}",
            "{\"model\":\"m\",\n\"choices\":[{}]}",
            r#"["m",[{}]]"#,
            r#"{"choices":[{}]}"#,
            r#"{"model":"m"}"#,
            r#"{"model":"m","choices":[]}"#,
            r#"{"model":"m","choices":{}}"#,
            r#"{"model":"m","choices":[1]}"#,
            r#"{"model":"m","choices":[{"finish_reason":"stop"}]}"#,
            r#"{"model":"m","choices":[{},{"finish_reason":"length"}]}"#,
            r#"{"model":"m","choices":[{"finish_reason":"stop","finish_reason":null}]}"#,
            r#"{"model":"m","choices":[{}],"usage":{"prompt_tokens":1}}"#,
            r#"{"model":"m","choices":[{}],"usage":5}"#,
            r#"{"model":"m","choices":[{}],"error":null}"#,
            r#"{"model":"m","choices":[{}],"error":{"message":"x"}}"#,
            r#"{"model":"m","model":"n","choices":[{}]}"#,
            r#"{"model":"m","choices":[{}],"x":}"#,
        ];
        for text in not_ordinary {
            assert!(splice().relay_alone(&data(text)).is_none(), "{text:?}");
        }
        let named = SseEvent {
            event: Some("message".into()),
            data: r#"{"model":"m","choices":[{}]}"#.into(),
        };
        assert!(splice().relay_alone(&named).is_none());
    }

    #[test]
    fn after_the_first_event_the_translator_sees_it_sees_the_rest() {
        let mut s = splice();
        let ordinary = data(r#"{"model":"m","choices":[{}]}"#);
        assert!(s.relay_alone(&ordinary).is_some());
        assert!(s
            .relay_alone(&data(
                r#"{"model":"m","choices":[{"finish_reason":"stop"}]}"#
            ))
            .is_none());
        assert!(s.relay_alone(&ordinary).is_none());
    }

    #[test]
    fn only_openai_chunk_protocols_have_a_rule() {
        assert!(Splice::new(Protocol::AnthropicMessages, "m").is_none());
        assert!(Splice::new(Protocol::Gemini, "m").is_none());
        assert!(Splice::new(Protocol::OpenaiResponses, "m").is_none());
    }

    #[test]
    fn the_text_read_in_the_splice_is_what_the_count_reads_in_the_chunk_sent() {
        let chat = [
            r#"{"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"model":"m","choices":[{"delta":{"content":"h\u00e9\"llo"}},{"delta":{"reasoning_content":"why","refusal":"no"}}]}"#,
            r#"{"model":"m","choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{\"a\":"}},{"function":null},7]}}]}"#,
            r#"{"model":"m","choices":[{"delta":{"content":5,"refusal":null}},{"delta":null},{"text":"not chat"}]}"#,
            r#"{"model":"m","choices":[{"delta":"x","finish_reason":null}],"usage":null}"#,
        ];
        let completions = [
            r#"{"model":"m","choices":[{"text":"Once","index":0}]}"#,
            r#"{"model":"m","choices":[{"text":" up\non"},{"text":null},{"delta":{"content":"not completions"}}]}"#,
        ];
        for (protocol, chunks) in [
            (Protocol::OpenaiChat, &chat[..]),
            (Protocol::OpenaiCompletions, &completions[..]),
        ] {
            for chunk in chunks {
                let mut s = Splice::new(protocol, "gpt").unwrap();
                let mut text = String::new();
                let sent = s.relay(&data(chunk), &mut text).expect(chunk);
                let mut counted = String::new();
                super::super::typed_text::read(protocol, &sent.data, &mut counted);
                assert_eq!(text, counted, "{chunk}");
            }
        }
        // A chunk left to the translator adds no text.
        let mut text = String::new();
        let finishing =
            data(r#"{"model":"m","choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}"#);
        assert!(splice().relay(&finishing, &mut text).is_none());
        assert!(text.is_empty());
    }
}
