//! The generated text of one client stream event, read without building a
//! JSON tree: the counting side of [`Relayed`](super::relayed::Relayed) on
//! every relayed frame.
//!
//! Parsing each event into a `serde_json::Value` (a map per object, a
//! `String` per string) and dropping it again was about 4% of a streamed
//! frame's CPU, for the two or three strings counting needs. Here each
//! protocol's event is read into small structs that name only the members
//! holding generated text, and borrow those strings from the event when they
//! have no escapes.
//!
//! The result must be exactly what the tree gives (`relayed::event_text`),
//! whatever the vendor sent, so the member types are lenient: [`Text`] takes
//! any JSON value and keeps only a string, [`List`] keeps only an array's
//! items, [`Obj`] only an object's members; anything else is skipped, as
//! indexing a `Value` skips it. What a derived struct would still refuse — a
//! member written twice — makes [`read`] return `None`, and the caller falls
//! back to the tree. A test compares the two over generated events. One
//! difference is kept on purpose: a member the read skips is only scanned,
//! so an invalid `\u` escape inside it does not lose the event's text, as
//! it does in the tree.

use crate::plugins::bindings::types::Protocol;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// Appends the generated text of one event of `protocol` to `out`; returns
/// whether the event is a JSON object. `None` when the typed read does not
/// apply (not JSON, a member written twice): nothing was appended, and the
/// caller reads the event as a tree instead.
pub(crate) fn read(protocol: Protocol, data: &str, out: &mut String) -> Option<bool> {
    fn parse<'a, T: Deserialize<'a>>(data: &'a str) -> Option<Obj<T>> {
        serde_json::from_str::<Obj<T>>(data).ok()
    }
    Some(match protocol {
        Protocol::OpenaiChat => {
            let chunk = parse::<ChatChunk>(data)?;
            for choice in chunk.items(|c| &c.choices) {
                choice.delta.push_to(out);
            }
            chunk.0.is_some()
        }
        Protocol::OpenaiCompletions => {
            let chunk = parse::<CompletionChunk>(data)?;
            for choice in chunk.items(|c| &c.choices) {
                choice.text.push_to(out);
            }
            chunk.0.is_some()
        }
        Protocol::OpenaiResponses => {
            let ev = parse::<ResponsesEvent>(data)?;
            if let Some(ev) = &ev.0 {
                let kind = ev.kind.0.as_deref().unwrap_or("");
                if kind.ends_with(".delta") {
                    ev.delta.push_to(out);
                } else if kind == "response.output_item.added" {
                    if let Some(item) = &ev.item.0 {
                        item.name.push_to(out);
                    }
                }
            }
            ev.0.is_some()
        }
        Protocol::AnthropicMessages => {
            let ev = parse::<AnthropicEvent>(data)?;
            if let Some(ev) = &ev.0 {
                match ev.kind.0.as_deref() {
                    Some("content_block_delta") => {
                        if let Some(d) = &ev.delta.0 {
                            for text in [&d.text, &d.thinking, &d.partial_json] {
                                text.push_to(out);
                            }
                        }
                    }
                    Some("content_block_start") => {
                        if let Some(b) = &ev.content_block.0 {
                            for text in [&b.text, &b.thinking, &b.name] {
                                text.push_to(out);
                            }
                        }
                    }
                    _ => {}
                }
            }
            ev.0.is_some()
        }
        Protocol::Gemini => {
            let chunk = parse::<GeminiChunk>(data)?;
            for candidate in chunk.items(|c| &c.candidates) {
                let Some(content) = &candidate.content.0 else {
                    continue;
                };
                for part in content.parts.objects() {
                    part.text.push_to(out);
                    if let Some(call) = &part.function_call.0 {
                        call.name.push_to(out);
                        // Written as the tree writes it (compact, keys in
                        // order), so the count is the same.
                        if let Some(args) = &call.args {
                            out.push_str(&args.to_string());
                        }
                    }
                }
            }
            chunk.0.is_some()
        }
        // The other families do not stream text.
        _ => parse::<IgnoredAny>(data)?.0.is_some(),
    })
}

/// Any JSON value; a string's text is kept (borrowed from the event when it
/// has no escapes), anything else skipped.
#[derive(Default)]
struct Text<'a>(Option<Cow<'a, str>>);

impl Text<'_> {
    fn push_to(&self, out: &mut String) {
        if let Some(s) = &self.0 {
            out.push_str(s);
        }
    }
}

/// Any JSON value; an array's items are kept, anything else skipped.
struct List<T>(Vec<T>);

impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new())
    }
}

impl<T> List<Obj<T>> {
    /// The items that are objects.
    fn objects(&self) -> impl Iterator<Item = &T> {
        self.0.iter().filter_map(|o| o.0.as_ref())
    }
}

/// Any JSON value; an object's members are read as `T`, anything else
/// skipped.
pub(super) struct Obj<T>(pub(super) Option<T>);

impl<T> Default for Obj<T> {
    fn default() -> Self {
        Obj(None)
    }
}

impl<T> Obj<T> {
    /// The objects in one of this object's lists.
    fn items<'s, U: 's>(
        &'s self,
        list: impl Fn(&'s T) -> &'s List<Obj<U>>,
    ) -> impl Iterator<Item = &'s U> {
        self.0.iter().flat_map(move |t| list(t).objects())
    }
}

/// Skips whatever is left of a sequence or a map.
fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// The scalar visits every lenient type skips.
macro_rules! skip_scalars {
    ($value:ty) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<$value, E> {
            Ok(Default::default())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<$value, E> {
            Ok(Default::default())
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<$value, E> {
            Ok(Default::default())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<$value, E> {
            Ok(Default::default())
        }
        fn visit_unit<E: de::Error>(self) -> Result<$value, E> {
            Ok(Default::default())
        }
        fn visit_none<E: de::Error>(self) -> Result<$value, E> {
            Ok(Default::default())
        }
    };
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            skip_scalars!(Text<'a>);
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'a>, E> {
                Ok(Text(Some(Cow::Owned(s.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Text<'a>, E> {
                Ok(Text(Some(Cow::Owned(s))))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Text<'a>, A::Error> {
                drain_seq(seq).map(|_| Text(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Text<'a>, A::Error> {
                drain_map(map).map(|_| Text(None))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            skip_scalars!(List<T>);
            fn visit_str<E: de::Error>(self, _: &str) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<List<T>, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(List(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<List<T>, A::Error> {
                drain_map(map).map(|_| List::default())
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            skip_scalars!(Obj<T>);
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Obj<T>, E> {
                Ok(Obj::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Obj<T>, A::Error> {
                drain_seq(seq).map(|_| Obj::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| Obj(Some(t)))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

#[derive(Deserialize)]
struct ChatChunk<'a> {
    #[serde(default, borrow)]
    choices: List<Obj<ChatChoice<'a>>>,
}

#[derive(Deserialize)]
struct ChatChoice<'a> {
    #[serde(default, borrow)]
    delta: Obj<ChatDelta<'a>>,
}

impl Obj<ChatDelta<'_>> {
    fn push_to(&self, out: &mut String) {
        let Some(d) = &self.0 else { return };
        for text in [&d.content, &d.reasoning_content, &d.refusal] {
            text.push_to(out);
        }
        for call in d.tool_calls.objects() {
            if let Some(f) = &call.function.0 {
                f.name.push_to(out);
                f.arguments.push_to(out);
            }
        }
    }
}

/// A choice of an OpenAI chat or completions chunk as the host's splice
/// reads it (`relay::splice`): whether it finishes, and its text, read by
/// the same types as [`read`] so the splice counts what `read` would count
/// in the chunk it sends. Strict where the splice must be sure (a member
/// written twice fails it), lenient where `read` is.
#[derive(Deserialize)]
pub(super) struct SplicedChoice<'a> {
    /// `null` reads as `None`, as a missing one does.
    #[serde(default)]
    finish_reason: Option<IgnoredAny>,
    #[serde(default, borrow)]
    delta: Obj<ChatDelta<'a>>,
    #[serde(default, borrow)]
    text: Text<'a>,
}

impl SplicedChoice<'_> {
    pub(super) fn finishes(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Appends the choice's generated text for a `protocol` client, as
    /// [`read`] does (chat: the delta's; completions: `text`).
    pub(super) fn push_text(&self, protocol: Protocol, out: &mut String) {
        match protocol {
            Protocol::OpenaiCompletions => self.text.push_to(out),
            _ => self.delta.push_to(out),
        }
    }
}

#[derive(Deserialize)]
struct ChatDelta<'a> {
    #[serde(default, borrow)]
    content: Text<'a>,
    #[serde(default, borrow)]
    reasoning_content: Text<'a>,
    #[serde(default, borrow)]
    refusal: Text<'a>,
    #[serde(default, borrow)]
    tool_calls: List<Obj<ToolCall<'a>>>,
}

#[derive(Deserialize)]
struct ToolCall<'a> {
    #[serde(default, borrow)]
    function: Obj<Function<'a>>,
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(default, borrow)]
    name: Text<'a>,
    #[serde(default, borrow)]
    arguments: Text<'a>,
}

#[derive(Deserialize)]
struct CompletionChunk<'a> {
    #[serde(default, borrow)]
    choices: List<Obj<CompletionChoice<'a>>>,
}

#[derive(Deserialize)]
struct CompletionChoice<'a> {
    #[serde(default, borrow)]
    text: Text<'a>,
}

#[derive(Deserialize)]
struct ResponsesEvent<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Text<'a>,
    #[serde(default, borrow)]
    delta: Text<'a>,
    #[serde(default, borrow)]
    item: Obj<Named<'a>>,
}

#[derive(Deserialize)]
struct Named<'a> {
    #[serde(default, borrow)]
    name: Text<'a>,
}

#[derive(Deserialize)]
struct AnthropicEvent<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Text<'a>,
    #[serde(default, borrow)]
    delta: Obj<AnthropicDelta<'a>>,
    #[serde(default, borrow)]
    content_block: Obj<AnthropicBlock<'a>>,
}

#[derive(Deserialize)]
struct AnthropicDelta<'a> {
    #[serde(default, borrow)]
    text: Text<'a>,
    #[serde(default, borrow)]
    thinking: Text<'a>,
    #[serde(default, borrow)]
    partial_json: Text<'a>,
}

#[derive(Deserialize)]
struct AnthropicBlock<'a> {
    #[serde(default, borrow)]
    text: Text<'a>,
    #[serde(default, borrow)]
    thinking: Text<'a>,
    #[serde(default, borrow)]
    name: Text<'a>,
}

#[derive(Deserialize)]
struct GeminiChunk<'a> {
    #[serde(default, borrow)]
    candidates: List<Obj<GeminiCandidate<'a>>>,
}

#[derive(Deserialize)]
struct GeminiCandidate<'a> {
    #[serde(default, borrow)]
    content: Obj<GeminiContent<'a>>,
}

#[derive(Deserialize)]
struct GeminiContent<'a> {
    #[serde(default, borrow)]
    parts: List<Obj<GeminiPart<'a>>>,
}

#[derive(Deserialize)]
struct GeminiPart<'a> {
    #[serde(default, borrow)]
    text: Text<'a>,
    #[serde(default, borrow, rename = "functionCall")]
    function_call: Obj<GeminiCall<'a>>,
}

#[derive(Deserialize)]
struct GeminiCall<'a> {
    #[serde(default, borrow)]
    name: Text<'a>,
    /// Any value (JSON `null` is `None`).
    #[serde(default)]
    args: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::relayed::event_text;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    const PROTOCOLS: [Protocol; 6] = [
        Protocol::OpenaiChat,
        Protocol::OpenaiCompletions,
        Protocol::OpenaiResponses,
        Protocol::AnthropicMessages,
        Protocol::Gemini,
        Protocol::Embeddings,
    ];

    /// The member names the readers look for, and one they do not.
    const KEYS: [&str; 21] = [
        "choices",
        "delta",
        "content",
        "reasoning_content",
        "refusal",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "text",
        "type",
        "item",
        "content_block",
        "thinking",
        "partial_json",
        "candidates",
        "parts",
        "functionCall",
        "args",
        "index",
        "other",
    ];

    /// Strings, the event types the readers look for among them, with
    /// characters the writer escapes.
    const STRINGS: [&str; 10] = [
        "",
        "Hello",
        "say \"hi\"\n",
        "caf\u{e9} \u{1f600}",
        "back\\slash",
        "response.output_text.delta",
        "response.output_item.added",
        "content_block_delta",
        "content_block_start",
        "x.delta",
    ];

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1.0e6f64..1.0e6).prop_map(Value::from),
            prop::sample::select(&STRINGS[..]).prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((prop::sample::select(&KEYS[..]), inner), 0..6).prop_map(
                    |members| Value::Object(
                        members
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), v))
                            .collect()
                    )
                ),
            ]
        })
    }

    fn by_tree(protocol: Protocol, data: &str) -> Option<(String, bool)> {
        let value: Value = serde_json::from_str(data).ok()?;
        let mut out = String::new();
        event_text(protocol, &value, &mut out);
        Some((out, value.is_object()))
    }

    fn typed(protocol: Protocol, data: &str) -> Option<(String, bool)> {
        let mut out = String::new();
        let object = read(protocol, data, &mut out)?;
        Some((out, object))
    }

    /// One event of each protocol with every member the readers look for.
    fn full_events() -> Vec<Value> {
        vec![
            json!({"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "a",
                "reasoning_content": "b", "refusal": "c",
                "tool_calls": [{"index": 0, "function": {"name": "d", "arguments": "{\"q\":1}"}}]}}]}),
            json!({"choices": [{"text": "once", "index": 0}]}),
            json!({"type": "response.output_text.delta", "delta": "a", "item": {"name": "n"}}),
            json!({"type": "response.output_item.added", "item": {"name": "f", "type": "function_call"}}),
            json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "a",
                "thinking": "b", "partial_json": "c"}, "content_block": {"text": "x"}}),
            json!({"type": "content_block_start", "content_block": {"type": "text", "text": "a",
                "thinking": "b", "name": "c"}}),
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "a"},
                {"functionCall": {"name": "f", "args": {"b": [1, {"c": null}], "a": "x"}}}]}}]}),
        ]
    }

    /// `v` changed by `decisions`: at each node, replaced by one of `pool`,
    /// dropped (as a member), or kept with its children changed the same
    /// way; `None` when dropped.
    fn mutate(
        v: &Value,
        decisions: &mut impl Iterator<Item = u8>,
        pool: &[Value],
    ) -> Option<Value> {
        let d = decisions.next().unwrap_or(9);
        match d {
            0 => {
                return Some(pool[usize::from(decisions.next().unwrap_or(0)) % pool.len()].clone())
            }
            1 => return None,
            _ => {}
        }
        Some(match v {
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .filter_map(|i| mutate(i, decisions, pool))
                    .collect(),
            ),
            Value::Object(members) => Value::Object(
                members
                    .iter()
                    .filter_map(|(k, m)| Some((k.clone(), mutate(m, decisions, pool)?)))
                    .collect(),
            ),
            other => other.clone(),
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn the_typed_read_finds_what_the_tree_finds(
            event in 0..7usize,
            decisions in prop::collection::vec(0u8..16, 0..48),
            pool in prop::collection::vec(value(), 1..6),
            random in value(),
        ) {
            let changed = mutate(&full_events()[event], &mut decisions.into_iter(), &pool);
            for v in [changed.unwrap_or(Value::Null), random] {
                let data = v.to_string();
                for protocol in PROTOCOLS {
                    let typed = typed(protocol, &data);
                    // Generated objects have each key once: the typed read applies.
                    prop_assert!(typed.is_some(), "{:?}: {}", protocol, data);
                    prop_assert_eq!(typed, by_tree(protocol, &data), "{:?}: {}", protocol, data);
                }
            }
        }

        /// The same, on the event as a vendor might space it.
        #[test]
        fn spacing_changes_nothing(event in 0..7usize) {
            let data = serde_json::to_string_pretty(&full_events()[event]).unwrap();
            for protocol in PROTOCOLS {
                prop_assert_eq!(typed(protocol, &data), by_tree(protocol, &data));
            }
        }
    }

    #[test]
    fn the_generated_events_mostly_carry_text() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = (
            0..7usize,
            prop::collection::vec(0u8..16, 0..48),
            prop::collection::vec(value(), 1..6),
        );
        let mut with_text = 0;
        for _ in 0..500 {
            let (event, decisions, pool) = strategy.new_tree(&mut runner).unwrap().current();
            let v = mutate(&full_events()[event], &mut decisions.into_iter(), &pool)
                .unwrap_or(Value::Null);
            let data = v.to_string();
            if PROTOCOLS
                .iter()
                .any(|p| by_tree(*p, &data).is_some_and(|(t, _)| !t.is_empty()))
            {
                with_text += 1;
            }
        }
        // The equivalence test above is only as good as its events: most
        // must carry some text, and some must not.
        assert!((250..500).contains(&with_text), "{with_text} of 500");
    }

    #[test]
    fn each_protocols_text_is_found() {
        let cases = [
            (
                Protocol::OpenaiChat,
                json!({"choices": [
                    {"delta": {"content": "a", "reasoning_content": "b", "refusal": "c",
                     "tool_calls": [{"function": {"name": "d", "arguments": "e"}}, 7]}},
                    {"delta": {"content": null}}, "x"]}),
                "abcde",
            ),
            (
                Protocol::OpenaiCompletions,
                json!({"choices": [{"text": "a"}, {"text": 1}]}),
                "a",
            ),
            (
                Protocol::OpenaiResponses,
                json!({"type": "response.output_text.delta", "delta": "a\"b"}),
                "a\"b",
            ),
            (
                Protocol::OpenaiResponses,
                json!({"type": "response.output_item.added", "item": {"name": "f"}}),
                "f",
            ),
            (
                Protocol::AnthropicMessages,
                json!({"type": "content_block_delta", "delta": {"text": "a", "thinking": "b", "partial_json": "c"}}),
                "abc",
            ),
            (
                Protocol::AnthropicMessages,
                json!({"type": "content_block_start", "content_block": {"text": "a", "thinking": "b", "name": "c"}}),
                "abc",
            ),
            (
                Protocol::Gemini,
                json!({"candidates": [{"content": {"parts": [
                    {"text": "a"}, {"functionCall": {"name": "f", "args": {"b": 1, "a": [true]}}}]}}]}),
                "af{\"a\":[true],\"b\":1}",
            ),
        ];
        for (protocol, event, text) in cases {
            let data = event.to_string();
            assert_eq!(
                typed(protocol, &data),
                Some((text.to_string(), true)),
                "{data}"
            );
            assert_eq!(
                by_tree(protocol, &data),
                Some((text.to_string(), true)),
                "{data}"
            );
        }
        assert_eq!(typed(Protocol::OpenaiChat, "[DONE]"), None);
        assert_eq!(
            typed(Protocol::OpenaiChat, "[1]"),
            Some((String::new(), false))
        );
    }

    #[test]
    fn a_member_written_twice_is_left_to_the_tree() {
        let data = r#"{"choices": [{"delta": {"content": "first", "content": "last"}}]}"#;
        assert_eq!(typed(Protocol::OpenaiChat, data), None);
        assert_eq!(
            by_tree(Protocol::OpenaiChat, data),
            Some(("last".to_string(), true))
        );
    }
}
