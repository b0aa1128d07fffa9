//! A single HTTP byte range (RFC 9110 §14), for resumable and seeking
//! downloads of the MP4. Anything the server may ignore (other units, several
//! ranges, bad syntax) is ignored: the whole file is sent.

use std::ops::RangeInclusive;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ByteRange {
    /// No usable `Range`: send everything with 200.
    Full,
    /// Send these bytes with 206.
    Partial(RangeInclusive<u64>),
    /// 416 with `Content-Range: bytes */LEN`.
    Unsatisfiable,
}

/// What a `Range` header value asks of a `len`-byte representation.
pub fn resolve(header: Option<&str>, len: u64) -> ByteRange {
    let Some(spec) = header.and_then(|h| strip_unit(h.trim())) else {
        return ByteRange::Full;
    };
    if spec.contains(',') {
        return ByteRange::Full;
    }
    let Some((first, last)) = spec.split_once('-') else {
        return ByteRange::Full;
    };
    let (first, last) = (first.trim(), last.trim());
    match (first.is_empty(), last.is_empty()) {
        // `bytes=-n`: the last n bytes.
        (true, false) => match digits(last) {
            None => ByteRange::Full,
            Some(0) => ByteRange::Unsatisfiable,
            Some(_) if len == 0 => ByteRange::Unsatisfiable,
            Some(n) => ByteRange::Partial(len - n.min(len)..=len - 1),
        },
        // `bytes=a-`: from a to the end.
        (false, true) => match digits(first) {
            Some(a) if a < len => ByteRange::Partial(a..=len - 1),
            Some(_) => ByteRange::Unsatisfiable,
            None => ByteRange::Full,
        },
        // `bytes=a-b`, b clipped to the end.
        (false, false) => match (digits(first), digits(last)) {
            (Some(a), Some(b)) if b < a => ByteRange::Full,
            (Some(a), Some(b)) if a < len => ByteRange::Partial(a..=b.min(len - 1)),
            (Some(_), Some(_)) => ByteRange::Unsatisfiable,
            _ => ByteRange::Full,
        },
        (true, true) => ByteRange::Full,
    }
}

fn strip_unit(value: &str) -> Option<&str> {
    let (unit, spec) = value.split_once('=')?;
    unit.trim().eq_ignore_ascii_case("bytes").then_some(spec)
}

/// Only ASCII digits: `u64::from_str` would also take a leading `+`.
fn digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(h: &str) -> ByteRange {
        resolve(Some(h), 1000)
    }

    #[test]
    fn the_three_single_range_forms() {
        assert_eq!(r("bytes=0-99"), ByteRange::Partial(0..=99));
        assert_eq!(r("bytes=900-"), ByteRange::Partial(900..=999));
        assert_eq!(r("bytes=-100"), ByteRange::Partial(900..=999));
        assert_eq!(r("bytes=-5000"), ByteRange::Partial(0..=999));
        assert_eq!(r("bytes=990-5000"), ByteRange::Partial(990..=999));
        assert_eq!(r("Bytes = 5-5"), ByteRange::Partial(5..=5));
    }

    #[test]
    fn ranges_past_the_end_are_unsatisfiable() {
        assert_eq!(r("bytes=1000-"), ByteRange::Unsatisfiable);
        assert_eq!(r("bytes=1000-2000"), ByteRange::Unsatisfiable);
        assert_eq!(r("bytes=-0"), ByteRange::Unsatisfiable);
        assert_eq!(resolve(Some("bytes=-10"), 0), ByteRange::Unsatisfiable);
    }

    #[test]
    fn what_may_be_ignored_is_ignored() {
        assert_eq!(resolve(None, 1000), ByteRange::Full);
        for h in [
            "items=0-1",
            "bytes=0-1,5-6",
            "bytes=5-1",
            "bytes=abc",
            "bytes=-",
            "bytes=+1-2",
            "bytes",
        ] {
            assert_eq!(r(h), ByteRange::Full, "{h}");
        }
    }
}
