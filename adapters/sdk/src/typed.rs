//! Reading JSON straight into the types a codec needs, beside the tree
//! (`serde_json::Value`) every codec can read: for the hot shapes, where
//! building and dropping the tree was most of a translated call's guest
//! time. Each typed reader gives what the tree reading of the same body
//! gives, or `None`, and its caller then reads the tree; so a body the typed
//! reader does not take the same way (a member of another type, a member
//! written twice, not one object) costs a second reading but is never read
//! differently. What the typed readers cannot see: members they skip are
//! checked for JSON syntax only (serde_json does not decode a skipped string's
//! escapes or range-check a skipped number), so a body whose unread members
//! hold a lone UTF-16 surrogate escape (`"\ud800"`) or a number beyond
//! `f64` is read here where the tree reading would refuse it as not valid
//! JSON. Nothing of those members is used.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};

use crate::canonical::Block;

/// `body` read as `T` when it is one JSON object in UTF-8 (a struct also
/// reads from a JSON array, its fields in order; the tree readings refuse
/// anything but an object).
pub fn object<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Option<T> {
    let text = std::str::from_utf8(body).ok()?;
    if !text.trim_start().starts_with('{') {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// A string member: borrowed from the body unless it holds an escape.
pub type Text<'a> = Option<Str<'a>>;

/// A string borrowed from the body where it can be. serde's own `Cow<str>`
/// always copies inside an `Option`; this one keeps what serde_json lends.
pub struct Str<'a>(pub Cow<'a, str>);

impl<'a> Str<'a> {
    pub fn into_owned(self) -> String {
        self.0.into_owned()
    }
}

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(StrVisitor)
    }
}

struct StrVisitor;

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Str<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Str<'de>, E> {
        Ok(Str(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Str<'de>, E> {
        Ok(Str(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Str<'de>, E> {
        Ok(Str(Cow::Owned(s)))
    }
}

/// A counter read as [`as_count`](crate::json::as_count) reads one: a
/// whole number, or a float with no fraction, in range; any other number,
/// a string or a boolean is no count (`Count(None)`), an array or an object
/// is refused (the reading gives up).
#[derive(Clone, Copy)]
pub struct Count(pub Option<u64>);

impl Count {
    /// A count where the tree reading is strict (`Fields::count`): absent
    /// is `Some(None)`, a count is `Some(Some(n))`, and what the tree
    /// reading refuses (a string, a fraction) is `None`, its error.
    pub fn strict(c: Option<Count>) -> Option<Option<u64>> {
        match c {
            None => Some(None),
            Some(Count(n)) => n.map(Some),
        }
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CountVisitor)
    }
}

struct CountVisitor;

impl<'de> Visitor<'de> for CountVisitor {
    type Value = Count;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a token count")
    }

    fn visit_u64<E>(self, n: u64) -> Result<Count, E> {
        Ok(Count(Some(n)))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Count, E> {
        // serde_json gives i64 only to negative numbers.
        Ok(Count(u64::try_from(n).ok()))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Count, E> {
        Ok(Count(crate::json::whole_count(f)))
    }

    fn visit_str<E>(self, _: &str) -> Result<Count, E> {
        Ok(Count(None))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Count, E> {
        Ok(Count(None))
    }

    fn visit_unit<E>(self) -> Result<Count, E> {
        Ok(Count(None))
    }
}

/// One element of a content list that [`Texts`] reads: its text, or
/// `None` when it is not a text part (which fails the reading).
pub trait TextPart<'a> {
    fn into_text(self) -> Option<Str<'a>>;
}

/// Content written as one string or as a list of text parts `P` (each
/// protocol spells a part its own way): the texts, borrowed where they can
/// be. Anything else fails the reading.
pub struct Texts<'a, P>(pub Vec<Str<'a>>, PhantomData<P>);

impl<P> Texts<'_, P> {
    /// One text block per text, in order.
    pub fn blocks(self) -> Vec<Block> {
        self.0
            .into_iter()
            .map(|t| Block::Text(t.into_owned()))
            .collect()
    }
}

impl<'de: 'a, 'a, P: Deserialize<'de> + TextPart<'a>> Deserialize<'de> for Texts<'a, P> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextsVisitor(PhantomData))
    }
}

struct TextsVisitor<'a, P>(PhantomData<fn() -> Texts<'a, P>>);

impl<'de: 'a, 'a, P: Deserialize<'de> + TextPart<'a>> Visitor<'de> for TextsVisitor<'a, P> {
    type Value = Texts<'a, P>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or text parts")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Texts<'a, P>, E> {
        Ok(Texts(vec![Str(Cow::Borrowed(s))], PhantomData))
    }

    fn visit_str<E>(self, s: &str) -> Result<Texts<'a, P>, E> {
        Ok(Texts(vec![Str(Cow::Owned(s.to_owned()))], PhantomData))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Texts<'a, P>, A::Error> {
        let mut texts = Vec::new();
        while let Some(part) = seq.next_element::<P>()? {
            texts.push(
                part.into_text()
                    .ok_or_else(|| de::Error::custom("not a text part"))?,
            );
        }
        Ok(Texts(texts, PhantomData))
    }
}

/// For tests: `typed` on `body`'s text, checked against `tree` on the body
/// itself wherever `typed` reads it (the two must then agree).
#[cfg(test)]
pub fn against_tree<T: PartialEq + fmt::Debug>(
    body: &serde_json::Value,
    typed: fn(&[u8]) -> Option<T>,
    tree: fn(&serde_json::Value) -> Result<T, crate::TranslateError>,
) -> Option<T> {
    let bytes = serde_json::to_vec(body).unwrap();
    let read = typed(&bytes);
    if let Some(read) = &read {
        assert_eq!(Ok(read), tree(body).as_ref(), "{body}");
    }
    read
}
