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
//!
//! A non-streamed answer of a call that splices is finished here too
//! ([`Splice::finish`]), on the same word: the passthrough's translator
//! only sets `model` in it and reads `usage` for the bill, and a guest call
//! for that was about a tenth of a plain call's CPU (the instance's
//! check-out, the copies in and out, serde_json in WebAssembly). The rule:
//! the answer is one JSON object in UTF-8 with `model`, no non-null
//! `error`, no key written twice or with an escape, and a `usage` that is
//! not an object (no report) or an object that parses whole as a JSON tree
//! (as the translator reads it) holding `prompt_tokens_details` with a
//! non-null `cached_tokens` and `completion_tokens_details` with a non-null
//! `reasoning_tokens` (the details the translator would otherwise add). It
//! goes on as the vendor wrote it, `model`'s value replaced, and is billed
//! with the counts of its `usage` (`prompt_tokens`, `completion_tokens`,
//! the two details and `prompt_tokens_details.cache_write_tokens`, each a
//! whole number or 0). Any other answer goes to the translator, which also
//! turns an error body into an error. The top level is read the way the
//! translator first reads it (keys borrowed, values as written) and the
//! `usage` as it reads that, so the host never passes on what the
//! translator would refuse or bill differently (an answer in an array, a
//! stray byte that is not UTF-8, a count beside a number out of range).

use super::typed_text::{Obj, SplicedChoice};
use crate::billing::usage::Usage;
use crate::plugins::bindings::types::{Protocol, SseEvent};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
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
    /// The splice an adapter of a `vendor` protocol asked for, for a call
    /// whose client speaks `client`; `None` where the two differ or the
    /// host has no rule for the protocol (the answer is translated whole,
    /// as the contract says).
    pub(crate) fn asked(client: Protocol, vendor: Protocol, model: &str) -> Option<Self> {
        if client != vendor {
            return None;
        }
        Self::new(client, model)
    }

    /// The splice for a call whose client speaks `protocol`; `None` where
    /// the host has no rule for it.
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

/// A non-streamed answer the host finished ([`Splice::finish`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finished {
    pub body: Vec<u8>,
    pub usage: Option<Usage>,
}

impl Splice {
    /// The client's answer for the vendor's non-streamed 2xx `body` when it
    /// is ordinary (the rule in the module's comment); `None` when the
    /// translator has to finish it.
    pub(crate) fn finish(&self, body: &[u8]) -> Option<Finished> {
        let text = std::str::from_utf8(body).ok()?;
        let TopLevel(members) = serde_json::from_str(text).ok()?;
        if written_twice(&members) {
            return None;
        }
        let (mut model, mut usage) = (None, None);
        for &(key, value) in &members {
            match key {
                "model" => model = Some(value),
                "usage" => usage = Some(value),
                "error" if value.get() != "null" => return None,
                _ => {}
            }
        }
        let usage = match usage {
            None => None,
            // Read whole, as the translator reads it; one it cannot read
            // (a number out of range, a lone surrogate) is its to bill.
            Some(raw) => match serde_json::from_str(raw.get()).ok()? {
                serde_json::Value::Object(usage) => Some(billed(&usage)?),
                _ => None,
            },
        };
        let (start, end) = span(body, model?)?;
        let mut out = Vec::with_capacity(body.len() - (end - start) + self.model.len());
        out.extend_from_slice(body.get(..start)?);
        out.extend_from_slice(self.model.as_bytes());
        out.extend_from_slice(body.get(end..)?);
        Some(Finished { body: out, usage })
    }
}

/// An answer's top-level members as the translator first reads them (its
/// `finish_response`): a JSON object, each key borrowed from the text and
/// each value the slice of text it was read from. What cannot be read so —
/// not an object (serde would read a struct from an array), a key written
/// with an escape, text that is not UTF-8 — the translator parses whole,
/// more strictly, so it goes to the translator.
struct TopLevel<'a>(Vec<(&'a str, &'a RawValue)>);

impl<'de> Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel<'de>, A::Error> {
                let mut list = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(key) = map.next_key::<&'de str>()? {
                    list.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(TopLevel(list))
            }
        }
        d.deserialize_map(Members)
    }
}

/// Whether any key is written twice. The keys are sorted, so an answer
/// with very many members (its size is the vendor's) costs n log n here,
/// not a look back over all the others for each.
fn written_twice(members: &[(&str, &RawValue)]) -> bool {
    let mut keys: Vec<&str> = members.iter().map(|&(key, _)| key).collect();
    keys.sort_unstable();
    keys.windows(2).any(|pair| pair[0] == pair[1])
}

/// The usage to bill from an answer's `usage` object. Counts are read as
/// the translator reads them: a whole number, written as an integer or
/// not, counts; anything else, `null` or nothing is 0. `None` when a detail
/// the translator adds is missing (it then finishes the answer).
fn billed(usage: &serde_json::Map<String, serde_json::Value>) -> Option<Usage> {
    let detail = |outer: &str, inner: &str| {
        usage
            .get(outer)?
            .as_object()?
            .get(inner)
            .filter(|count| !count.is_null())
    };
    let cached = detail("prompt_tokens_details", "cached_tokens")?;
    let reasoning = detail("completion_tokens_details", "reasoning_tokens")?;
    Some(
        Usage {
            input_tokens: count(usage.get("prompt_tokens")),
            output_tokens: count(usage.get("completion_tokens")),
            cache_read_tokens: count(Some(cached)),
            cache_write_tokens: count(detail("prompt_tokens_details", "cache_write_tokens")),
            reasoning_tokens: count(Some(reasoning)),
            ..Usage::default()
        }
        .consistent(),
    )
}

/// A non-negative whole number (`12` or `12.0`: some vendors write
/// counters as floats); anything else, or nothing, is 0.
fn count(value: Option<&serde_json::Value>) -> u64 {
    let Some(value) = value else { return 0 };
    if let Some(n) = value.as_u64() {
        return n;
    }
    match value.as_f64() {
        // Exact: the value is whole and in range.
        Some(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => {
            f as u64
        }
        _ => 0,
    }
}

/// Where `value`, read from `body` by borrowing, lies in it.
fn span(body: &[u8], value: &RawValue) -> Option<(usize, usize)> {
    let value = value.get();
    let start = (value.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    let end = start.checked_add(value.len())?;
    body.get(start..end)?;
    Some((start, end))
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
    let (start, end) = span(data.as_bytes(), chunk.model)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    fn an_ordinary_answer_goes_on_as_written_with_the_model_set() {
        let body = br#"{ "id": "c1", "model": "vendor-x", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"content": "caf\u00e9"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3.0, "total_tokens": 12,
                      "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 2},
                      "completion_tokens_details": {"reasoning_tokens": 1}},
            "error": null }"#;
        let done = splice().finish(body).unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert_eq!(
            String::from_utf8(done.body).unwrap(),
            text.replace(r#""model": "vendor-x""#, r#""model": "gpt-4o-mini""#)
        );
        assert_eq!(
            done.usage,
            Some(Usage {
                input_tokens: 9,
                output_tokens: 3,
                cache_read_tokens: 4,
                cache_write_tokens: 2,
                reasoning_tokens: 1,
                ..Usage::default()
            })
        );
        // No report: no usage, the body as it is but for the model.
        for usage in [
            "",
            r#","usage":null"#,
            r#","usage":"n/a""#,
            r#","usage":[9,3]"#,
        ] {
            let body = format!(r#"{{"model":"m","choices":[]{usage}}}"#);
            let done = splice().finish(body.as_bytes()).unwrap();
            assert_eq!(done.usage, None, "{body}");
            assert_eq!(
                done.body,
                body.replace(r#""m""#, r#""gpt-4o-mini""#).into_bytes()
            );
        }
    }

    #[test]
    fn other_answers_go_to_the_translator() {
        let details = r#""prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}"#;
        let not_ordinary = [
            String::new(),
            "[]".into(),
            "nope".into(),
            r#"{"choices":[]}"#.into(),
            r#"{"model":"m","model":"n","choices":[]}"#.into(),
            r#"{"model":"m","choices":[],"choices":[]}"#.into(),
            r#"{"model":"m","error":{"message":"no quota"}}"#.into(),
            r#"{"model":"m","choices":[],"error":"x"}"#.into(),
            r#"{"model":"m","error":null,"error":null}"#.into(),
            r#"{"model":"m","choices":[],"usage":{}}"#.into(),
            r#"{"model":"m","usage":{"prompt_tokens":1,"completion_tokens":1}}"#.into(),
            r#"{"model":"m","usage":{"prompt_tokens_details":{"cached_tokens":null},"completion_tokens_details":{"reasoning_tokens":0}}}"#.into(),
            r#"{"model":"m","usage":{"prompt_tokens_details":[0],"completion_tokens_details":{"reasoning_tokens":0}}}"#.into(),
            r#"{"model":"m","usage":{"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":null}}"#.into(),
            format!(r#"{{"model":"m","usage":{{{details}}},"usage":{{{details}}}}}"#),
            format!(r#"{{"model":"m","usage":{{{details}}}}} x"#),
            // Not an object, though serde reads a struct from an array.
            r#"["m"]"#.into(),
            r#"[{"error":{"code":429,"message":"quota"}}]"#.into(),
            format!(r#"["m",{{"prompt_tokens":1000000,{details}}}]"#),
            // A key the translator cannot borrow; one written twice.
            r#"{"mod\u0065l":"m","choices":[]}"#.into(),
            r#"{"model":"m","id":"a","id":"b"}"#.into(),
            // A usage the translator cannot read whole bills nothing there.
            format!(r#"{{"model":"m","usage":{{"prompt_tokens":5,"x":1e400,{details}}}}}"#),
            format!(r#"{{"model":"m","usage":{{"prompt_tokens":5,"x":"\ud800",{details}}}}}"#),
            format!(
                r#"{{"model":"m","usage":{{"prompt_tokens":5,"x":{}{},{details}}}}}"#,
                "[".repeat(200),
                "]".repeat(200)
            ),
        ];
        for body in not_ordinary {
            assert!(splice().finish(body.as_bytes()).is_none(), "{body}");
        }
        // Not UTF-8, in a member the rule does not read.
        let body = b"{\"model\":\"m\",\"choices\":[{\"message\":{\"content\":\"\xff\"}}]}";
        assert!(splice().finish(body).is_none());
    }

    /// Whether the host finishes `body`; where it does, the answer and the
    /// usage must be the SDK translator's (natively): member by member, each
    /// value's text as written (a tree would refuse some of what both pass
    /// on: 1e400, deep nesting), and the same counts.
    fn agrees(body: &[u8]) -> bool {
        use gateway_guest_sdk::openai_passthrough::finish_response;
        let text = String::from_utf8_lossy(body);
        let Some(done) = splice().finish(body) else {
            return false;
        };
        let sdk = finish_response(body, "gpt-4o-mini").unwrap_or_else(|e| panic!("{text}: {e}"));
        // In key order, each once: the translator writes a map.
        let members = |b: &[u8]| {
            let TopLevel(mut list) =
                serde_json::from_slice(b).unwrap_or_else(|e| panic!("{text}: {e}"));
            list.sort_by_key(|&(k, _)| k);
            list.into_iter()
                .map(|(k, v)| (k.to_owned(), v.get().to_owned()))
                .collect::<Vec<_>>()
        };
        let host = members(&done.body);
        assert!(host.windows(2).all(|w| w[0].0 != w[1].0), "{text}");
        assert_eq!(host, members(&sdk.body), "{text}");
        let sdk_usage = sdk.usage.map(|u| Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
            reasoning_tokens: u.reasoning_tokens,
            ..Usage::default()
        });
        assert_eq!(done.usage, sdk_usage, "{text}");
        true
    }

    /// The answers the host finishes are the SDK translator's, as JSON, with
    /// the same usage, over a product of the shapes a vendor's answer takes.
    #[test]
    fn a_finished_answer_is_the_passthrough_translators() {
        let models = [
            r#""model":"up""#,
            r#""model":null"#,
            r#""model":{"a":1}"#,
            "",
        ];
        let errors = ["", r#""error":null"#, r#""error":{"message":"no"}"#];
        let choices = [r#""choices":[{"index":0,"message":{"content":"hi"}}]"#, ""];
        let counts = [
            "9",
            "9.0",
            "-1",
            "1e2",
            "2.5",
            r#""7""#,
            "null",
            "18446744073709551615",
        ];
        let mut usages = vec![
            String::new(),
            r#""usage":null"#.into(),
            r#""usage":"n/a""#.into(),
            r#""usage":{}"#.into(),
        ];
        for (i, n) in counts.iter().enumerate() {
            let m = counts[(i + 3) % counts.len()];
            usages.push(format!(
                r#""usage":{{"prompt_tokens":{n},"completion_tokens":{m},"total_tokens":1,
                  "prompt_tokens_details":{{"cached_tokens":{m},"cache_write_tokens":{n}}},
                  "completion_tokens_details":{{"reasoning_tokens":{n},"x":[1]}}}}"#
            ));
            usages.push(format!(
                r#""usage":{{"prompt_tokens":{n},"prompt_tokens_details":{{"cached_tokens":{n}}}}}"#
            ));
        }
        let (mut finished, mut total) = (0, 0);
        for model in models {
            for error in errors {
                for choice in choices {
                    for usage in &usages {
                        let members: Vec<&str> = [r#""id":"c""#, usage, choice, model, error]
                            .into_iter()
                            .filter(|m| !m.is_empty())
                            .collect();
                        let body = format!("{{ {} }}", members.join(" , "));
                        total += 1;
                        finished += usize::from(agrees(body.as_bytes()));
                    }
                }
            }
        }
        // The product reaches both sides of the rule.
        assert!(finished > 40 && finished < total, "{finished} of {total}");
        // Shapes at the edges of what either side reads: where the host
        // finishes one, the translator agrees.
        let details = r#""prompt_tokens_details":{"cached_tokens":1},"completion_tokens_details":{"reasoning_tokens":0}"#;
        let odd: Vec<Vec<u8>> = [
            format!(r#"["up",{{"prompt_tokens":9,{details}}}]"#),
            format!(r#"{{"model":"up","usage":{{"prompt_tokens":1,"prompt_tokens":2,{details}}}}}"#),
            format!(r#"{{"model":"up","usage":{{"prompt_tokens":3,"x":1e400,{details}}}}}"#),
            format!(r#"{{"model":"up","usage":{{"prompt_tokens":3,"x":"\ud800",{details}}}}}"#),
            format!(r#"{{"model":"up","choices":[1e400,"\ud800"],"usage":{{"prompt_tokens":3,{details}}}}}"#),
            format!(r#"{{"mod\u0065l":"up","choices":[],"usage":{{"prompt_tokens":3,{details}}}}}"#),
            format!(r#"{{"model":"up","\u0069d":"x","usage":{{"prompt_tokens":3,{details}}}}}"#),
            format!(r#"{{"model":"up","id":"a","id":"b","usage":{{"prompt_tokens":3,{details}}}}}"#),
            format!(r#"  {{"model":"up","choices":[{}{}]}}  "#, "[".repeat(300), "]".repeat(300)),
        ]
        .into_iter()
        .map(String::into_bytes)
        .chain([b"{\"model\":\"up\",\"choices\":[\"\xff\"]}".to_vec()])
        .collect();
        let finished: Vec<bool> = odd.iter().map(|body| agrees(body)).collect();
        assert_eq!(
            finished,
            [false, true, false, false, true, false, false, false, true, false]
        );
    }

    /// A JSON text of any shape, with the values at the edges of what either
    /// side reads: counts as floats, negative, past 2^64, out of range;
    /// strings with escapes and lone surrogates; nesting.
    fn json_text() -> BoxedStrategy<String> {
        let leaf = prop::sample::select(vec![
            "null",
            "true",
            "0",
            "9",
            "9.0",
            "-1",
            "2.5",
            "1e2",
            "1e400",
            "18446744073709551615",
            "18446744073709551616",
            r#""up""#,
            r#""7""#,
            r#""caf\u00e9""#,
            r#""\ud800""#,
            r#""a\nb""#,
            "{}",
            "[]",
        ])
        .prop_map(str::to_string);
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec((prop::sample::select(vec!["a", "b", "x"]), inner), 0..4)
                    .prop_map(|m| {
                        let m: Vec<String> =
                            m.iter().map(|(k, v)| format!(r#""{k}":{v}"#)).collect();
                        format!("{{{}}}", m.join(","))
                    }),
            ]
        })
        .boxed()
    }

    /// A `usage` member's value: mostly an object of OpenAI's counters and
    /// details (present or not, `cache_write_tokens` or not), each count
    /// mostly a whole number (the prompt's large, so that the cached part
    /// is not clamped to it), now and then any JSON.
    fn usage_text() -> impl Strategy<Value = String> {
        let count = prop_oneof![
            3 => (0..1000u32).prop_map(|n| n.to_string()),
            1 => (0..1000u32).prop_map(|n| format!("{n}.0")),
            1 => json_text(),
        ]
        .boxed();
        let member = |keys: Vec<&'static str>, value: BoxedStrategy<String>| {
            prop::collection::vec((prop::sample::select(keys), value), 0..5).prop_map(|m| {
                let m: Vec<String> = m.iter().map(|(k, v)| format!(r#""{k}":{v}"#)).collect();
                format!("{{{}}}", m.join(","))
            })
        };
        let details = |inner: &'static str| {
            prop_oneof![
                2 => count.clone().prop_map(move |n| format!(r#"{{"{inner}":{n}}}"#)),
                2 => (count.clone(), count.clone())
                    .prop_map(move |(n, m)| format!(r#"{{"{inner}":{n},"cache_write_tokens":{m}}}"#)),
                1 => json_text(),
            ]
        };
        let object = (
            prop_oneof![3 => (1000..100_000u32).prop_map(|n| n.to_string()), 1 => count.clone()],
            count.clone(),
            details("cached_tokens"),
            details("reasoning_tokens"),
            member(vec!["prompt_tokens", "total_tokens", "x"], count.clone()),
        )
            .prop_map(|(p, c, pd, cd, extra)| {
                let extra = extra.trim_start_matches('{').trim_end_matches('}').to_string();
                let sep = if extra.is_empty() { "" } else { "," };
                format!(
                    r#"{{"prompt_tokens":{p},"completion_tokens":{c},"prompt_tokens_details":{pd},"completion_tokens_details":{cd}{sep}{extra}}}"#
                )
            });
        prop_oneof![4 => object, 1 => json_text()]
    }

    /// A vendor's answer: top-level members of the names the rule reads (and
    /// some it does not, or written with an escape), each once or more, in
    /// an object or now and then an array, spaced one way or another, a
    /// stray byte that is not UTF-8 now and then.
    fn answer() -> impl Strategy<Value = Vec<u8>> {
        let member = prop_oneof![
            3 => usage_text().prop_map(|v| ("usage", v)),
            1 => json_text().prop_map(|v| ("error", v)),
            2 => Just(("error", "null".to_string())),
            2 => json_text().prop_map(|v| ("choices", v)),
            2 => json_text().prop_map(|v| ("id", v)),
            1 => json_text().prop_map(|v| ("model", v)),
            1 => json_text().prop_map(|v| ("mod\\u0065l", v)),
        ];
        (
            prop::option::weighted(0.9, json_text()),
            prop::collection::vec(member, 0..5),
            prop::sample::select(vec![",", " , ", ",\n  "]),
            0..20u8,
        )
            .prop_map(|(model, others, sep, shape)| {
                let mut members: Vec<(&str, String)> =
                    model.map(|m| ("model", m)).into_iter().collect();
                for (key, value) in others {
                    // Each key once, but in one answer in five.
                    if shape % 5 == 0 || members.iter().all(|(k, _)| *k != key) {
                        members.push((key, value));
                    }
                }
                let list: Vec<String> = members
                    .iter()
                    .map(|(k, v)| format!(r#""{k}":{v}"#))
                    .collect();
                let mut text = match shape {
                    0 => format!(
                        "[{}]",
                        members
                            .iter()
                            .map(|(_, v)| v.as_str())
                            .collect::<Vec<_>>()
                            .join(sep)
                    ),
                    _ => format!(" {{{}}} ", list.join(sep)),
                }
                .into_bytes();
                if shape == 1 {
                    if let Some(at) = text.iter().position(|&b| b == b'"') {
                        text.insert(at + 1, 0xff);
                    }
                }
                text
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever the vendor sends, an answer the host finishes is the
        /// translator's, in its text and its bill.
        #[test]
        fn whatever_the_host_finishes_the_translator_finishes_the_same(body in answer()) {
            agrees(&body);
        }
    }

    #[test]
    fn the_generated_answers_reach_both_sides_of_the_rule() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = answer();
        let finished = (0..1000)
            .filter(|_| {
                let body = strategy.new_tree(&mut runner).map(|t| t.current());
                splice().finish(&body.unwrap_or_default()).is_some()
            })
            .count();
        // The property above is only as good as its answers: many must be
        // finished by the host, and many not.
        assert!((100..900).contains(&finished), "{finished} of 1000");
    }

    #[test]
    fn a_splice_is_for_a_vendor_of_the_clients_protocol() {
        let chat = Protocol::OpenaiChat;
        assert!(Splice::asked(chat, chat, "m").is_some());
        assert!(Splice::asked(chat, Protocol::AnthropicMessages, "m").is_none());
        assert!(Splice::asked(Protocol::OpenaiCompletions, chat, "m").is_none());
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
