//! A JSON object's top-level members read without building anything: each
//! key, and its value as the very slice of the text it was read from, so
//! that a relay can copy the text as it came and replace only the values it
//! edits.
//!
//! Why: a relayed stream chunk changes in two members (`model`, `usage`)
//! and is otherwise passed on as written. Reading it into a map with a
//! `String` per key and writing the map out again (every key escaped anew,
//! every value copied through the serializer) was most of a relayed frame's
//! guest time; here a chunk costs one pass of serde_json over its text to
//! check it and find its members (and one more over `choices` for the
//! finish reasons), a `Vec` of borrowed pairs, and one copy of the text
//! with the edits in it.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// An object's members in the order the text has them (a key written twice
/// is listed twice), borrowed from `text`.
pub(super) struct Members<'a> {
    text: &'a str,
    list: Vec<(Key<'a>, &'a RawValue)>,
}

impl<'a> Members<'a> {
    /// `text`'s members; `None` when it is not one JSON object.
    pub fn parse(text: &'a str) -> Option<Self> {
        let list = serde_json::from_str::<List<'a>>(text).ok()?.0;
        Some(Self { text, list })
    }

    /// The value under `key`: the last one when the key is written more
    /// than once, as a parsed object keeps it.
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.list
            .iter()
            .rev()
            .find(|(k, _)| k.0 == key)
            .map(|(_, value)| *value)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The object's text with every value under a key of `set` replaced by
    /// the given JSON text, the keys of `set` and of `defaults` it lacks
    /// added at its end, and everything else as written.
    pub fn splice(&self, set: &[(&str, &str)], defaults: &[(&str, &str)]) -> String {
        let extra: usize = set
            .iter()
            .chain(defaults)
            .map(|(k, v)| k.len() + v.len() + 4)
            .sum();
        let mut out = String::with_capacity(self.text.len() + extra);
        let mut copied = 0;
        for (key, value) in &self.list {
            let Some(&(_, new)) = set.iter().find(|(k, _)| key.0 == *k) else {
                continue;
            };
            let Some((before, end)) = span(self.text, value)
                .and_then(|(start, end)| Some((self.text.get(copied..start)?, end)))
            else {
                return self.rebuilt(set, defaults);
            };
            out.push_str(before);
            out.push_str(new);
            copied = end;
        }
        // The closing brace: the text is one object, whitespace trimmed or not.
        let Some(close) = self.text.rfind('}').filter(|&at| at >= copied) else {
            return self.rebuilt(set, defaults);
        };
        out.push_str(&self.text[copied..close]);
        let mut first = self.list.is_empty();
        for (key, value) in missing(self, set, defaults) {
            push_member(&mut out, &mut first, key, value);
        }
        out.push_str(&self.text[close..]);
        out
    }

    /// The same edits written member by member: for a value that is not a
    /// slice of the text (which serde_json's borrowing never gives).
    fn rebuilt(&self, set: &[(&str, &str)], defaults: &[(&str, &str)]) -> String {
        let mut out = String::from("{");
        let mut first = true;
        for (key, value) in &self.list {
            let value = set
                .iter()
                .find(|(k, _)| key.0 == *k)
                .map_or(value.get(), |(_, v)| v);
            push_member(&mut out, &mut first, &key.0, value);
        }
        for (key, value) in missing(self, set, defaults) {
            push_member(&mut out, &mut first, key, value);
        }
        out.push('}');
        out
    }
}

/// The members of `set` then `defaults` that `members` lacks, each key
/// once (a key in both is added with its `set` value).
fn missing<'s>(
    members: &'s Members<'_>,
    set: &'s [(&'s str, &'s str)],
    defaults: &'s [(&'s str, &'s str)],
) -> impl Iterator<Item = &'s (&'s str, &'s str)> {
    let all = move || set.iter().chain(defaults);
    all().enumerate().filter_map(move |(i, member)| {
        let again = all().take(i).any(|(k, _)| *k == member.0);
        (!again && !members.contains(member.0)).then_some(member)
    })
}

fn push_member(out: &mut String, first: &mut bool, key: &str, value: &str) {
    if !*first {
        out.push(',');
    }
    *first = false;
    out.push_str(&serde_json::to_string(key).unwrap_or_else(|_| "\"\"".to_owned()));
    out.push(':');
    out.push_str(value);
}

/// Where `value` lies in `text`, as byte offsets.
fn span(text: &str, value: &RawValue) -> Option<(usize, usize)> {
    let value = value.get();
    let start = (value.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    let end = start.checked_add(value.len())?;
    text.get(start..end)?;
    Some((start, end))
}

/// A key, borrowed from the text unless it was written with an escape.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// The members of one object, in order.
struct List<'a>(Vec<(Key<'a>, &'a RawValue)>);

impl<'de> Deserialize<'de> for List<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor;
        impl<'de> Visitor<'de> for ListVisitor {
            type Value = List<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                // A chat chunk has about eight members.
                let mut list = Vec::with_capacity(map.size_hint().unwrap_or(10));
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    list.push((key, value));
                }
                Ok(List(list))
            }
        }
        deserializer.deserialize_map(ListVisitor)
    }
}

/// Whether a chunk's `choices` is a non-empty array, and whether one of its
/// choices has a `finish_reason` that is not `null` (the last one written,
/// for a key written twice). Anything but an array is neither.
pub(super) fn choices(choices: &RawValue) -> (bool, bool) {
    serde_json::from_str::<Choices>(choices.get()).map_or((false, false), |c| (c.any, c.finishes))
}

struct Choices {
    any: bool,
    finishes: bool,
}

impl<'de> Deserialize<'de> for Choices {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ChoicesVisitor;
        impl<'de> Visitor<'de> for ChoicesVisitor {
            type Value = Choices;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Choices {
                    any: false,
                    finishes: false,
                };
                while let Some(Finishes(finishes)) = seq.next_element()? {
                    out.any = true;
                    out.finishes |= finishes;
                }
                Ok(out)
            }
        }
        deserializer.deserialize_seq(ChoicesVisitor)
    }
}

/// Whether one choice has a non-null `finish_reason`; a choice that is
/// not an object does not finish. Read in the same pass as the array.
struct Finishes(bool);

impl<'de> Deserialize<'de> for Finishes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FinishesVisitor;
        impl<'de> Visitor<'de> for FinishesVisitor {
            type Value = Finishes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut finishes = false;
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    if key.0 == "finish_reason" {
                        let reason: &'de RawValue = map.next_value()?;
                        finishes = reason.get() != "null";
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Finishes(finishes))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Finishes(false))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Finishes(false))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Finishes(false))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Finishes(false))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Finishes(false))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Finishes(false))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Finishes(false))
            }
        }
        deserializer.deserialize_any(FinishesVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};

    /// The edits applied to the parsed object: what the splice must equal.
    fn edited(text: &str, set: &[(&str, &str)], defaults: &[(&str, &str)]) -> Value {
        let mut object: Map<String, Value> = serde_json::from_str(text).unwrap();
        for (key, value) in set {
            object.insert((*key).to_owned(), serde_json::from_str(value).unwrap());
        }
        for (key, value) in defaults {
            if !object.contains_key(*key) {
                object.insert((*key).to_owned(), serde_json::from_str(value).unwrap());
            }
        }
        Value::Object(object)
    }

    const OBJECTS: [&str; 8] = [
        r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"caf\u00e9 \"q\""},"finish_reason":null}]}"#,
        r#"{"id":"c","model":"up","usage":{"prompt_tokens":1},"choices":[]}"#,
        r#"{}"#,
        "  { \"a\" : [1, 2.50, -1e-4] ,\n \"model\" : \"m\" }  ",
        r#"{"\u006dodel":"escaped key","b":{"model":"nested, untouched"}}"#,
        r#"{"model":"first","x":1,"model":"second"}"#,
        r#"{"usage":null,"choices":"not an array"}"#,
        r#"{"s":"a } in a string","t":"\"}"}"#,
    ];

    #[test]
    fn the_splice_is_the_parsed_object_with_the_edits() {
        type Edits = &'static [(&'static str, &'static str)];
        let edits: [(Edits, Edits); 4] = [
            (&[("model", r#""client""#)], &[("usage", "null")]),
            (&[("model", r#""client""#), ("usage", r#"{"n":1}"#)], &[]),
            (&[], &[("usage", "null"), ("usage", "1")]),
            (&[("model", "1"), ("model", "2")], &[("model", "3")]),
        ];
        for text in OBJECTS {
            let members = Members::parse(text).unwrap();
            for (set, defaults) in edits {
                let spliced = members.splice(set, defaults);
                let read: Value = serde_json::from_str(&spliced)
                    .unwrap_or_else(|e| panic!("{text} -> {spliced}: {e}"));
                // A key given twice is set from its first mention.
                let first_set: Vec<_> = set
                    .iter()
                    .enumerate()
                    .filter(|(i, (k, _))| !set[..*i].iter().any(|(j, _)| j == k))
                    .map(|(_, edit)| *edit)
                    .collect();
                let first_defaults: Vec<_> = defaults
                    .iter()
                    .enumerate()
                    .filter(|(i, (k, _))| !defaults[..*i].iter().any(|(j, _)| j == k))
                    .map(|(_, edit)| *edit)
                    .collect();
                assert_eq!(
                    read,
                    edited(text, &first_set, &first_defaults),
                    "{text} -> {spliced}"
                );
                // The fallback writes the same object.
                let rebuilt: Value = serde_json::from_str(&members.rebuilt(set, defaults)).unwrap();
                assert_eq!(read, rebuilt, "{text}");
            }
        }
    }

    #[test]
    fn the_rest_of_the_text_is_copied_as_written() {
        let text = "  { \"a\" : [1, 2.50, -1e-4] ,\n \"model\" : \"m\" }  ";
        let spliced = Members::parse(text)
            .unwrap()
            .splice(&[("model", r#""client""#)], &[("usage", "null")]);
        assert_eq!(
            spliced,
            "  { \"a\" : [1, 2.50, -1e-4] ,\n \"model\" : \"client\" ,\"usage\":null}  "
        );
        let text = r#"{"id":"c","model":"up","choices":[]}"#;
        let spliced = Members::parse(text)
            .unwrap()
            .splice(&[("model", r#""client""#)], &[("usage", "null")]);
        assert_eq!(
            spliced,
            r#"{"id":"c","model":"client","choices":[],"usage":null}"#
        );
        assert_eq!(
            Members::parse("{}")
                .unwrap()
                .splice(&[], &[("usage", "null")]),
            r#"{"usage":null}"#
        );
    }

    #[test]
    fn a_key_read_twice_is_its_last_value() {
        let members = Members::parse(r#"{"model":"first","x":1,"model":"second"}"#).unwrap();
        assert_eq!(members.get("model").map(RawValue::get), Some(r#""second""#));
        assert!(members.contains("x") && !members.contains("y"));
        let escaped = Members::parse(r#"{"\u006dodel":"m"}"#).unwrap();
        assert_eq!(escaped.get("model").map(RawValue::get), Some(r#""m""#));
    }

    #[test]
    fn what_is_not_one_object_is_none() {
        for text in [
            "[1]",
            "1",
            "\"s\"",
            "null",
            "",
            "{",
            r#"{"a":1"#,
            r#"{"a":1}{}"#,
            r#"{"a":}"#,
            "{} x",
        ] {
            assert!(Members::parse(text).is_none(), "{text}");
        }
    }

    #[test]
    fn choices_say_whether_any_and_whether_one_finishes() {
        let read = |text: &str| choices(&serde_json::from_str::<Box<RawValue>>(text).unwrap());
        assert_eq!(read("[]"), (false, false));
        assert_eq!(read(r#"[{"index":0,"finish_reason":null}]"#), (true, false));
        assert_eq!(
            read(r#"[{"index":0},{"finish_reason":"stop","x":[1,{"y":2}]}]"#),
            (true, true)
        );
        assert_eq!(
            read(r#"[{"finish_reason":"stop","finish_reason":null}]"#),
            (true, false)
        );
        assert_eq!(
            read(r#"[1,-2,0.5,true,"x",null,[{"finish_reason":"stop"}]]"#),
            (true, false)
        );
        assert_eq!(read(r#"{"finish_reason":"stop"}"#), (false, false));
        assert_eq!(read(r#""stop""#), (false, false));
    }
}
