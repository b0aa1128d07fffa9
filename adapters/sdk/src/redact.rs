//! Makes vendor-written text safe to hand to a client or a log.
//!
//! Vendors echo credentials back in auth errors ("Incorrect API key provided:
//! sk-abc***xyz"), sometimes in full, and error bodies can be whole HTML pages.
//! Anything a guest copies from a vendor into a message goes through
//! [`clean_message`] first.

/// How many bytes of vendor text are looked at at all; a message longer than
/// this is truncated anyway, and the bound keeps the work per error small.
const MAX_SCANNED_BYTES: usize = 4096;

/// What a removed credential is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Collapses whitespace and control characters, removes credentials and cuts
/// the result to at most `max_chars` characters (plus an ellipsis).
pub fn clean_message(text: &str, max_chars: usize) -> String {
    let scanned = truncate_bytes(text, MAX_SCANNED_BYTES);
    let single_line = collapse_whitespace(scanned);
    let safe = redact_credentials(&single_line);
    truncate_chars(&safe, max_chars)
}

/// Replaces API keys (`sk-...`, Google's `AIza...`) and bearer tokens.
pub fn redact_credentials(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        if starts_word(bytes, at) {
            if let Some((end, replacement)) = credential_at(bytes, at) {
                // Every pattern starts and ends on ASCII, so both cuts fall on
                // character boundaries.
                out.push_str(&text[copied..at]);
                out.push_str(replacement);
                copied = end;
                at = end;
                continue;
            }
        }
        at += 1;
    }
    out.push_str(&text[copied..]);
    out
}

/// Cuts `text` to at most `max_chars` characters, marking the cut with `…`.
pub fn truncate_chars(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", text[..cut].trim_end()),
        None => text.to_owned(),
    }
}

fn truncate_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split(|c: char| c.is_whitespace() || c.is_control()) {
        if word.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

fn starts_word(bytes: &[u8], at: usize) -> bool {
    at == 0 || !is_word_byte(bytes[at - 1])
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Bytes that occur in API keys, including the `*` vendors mask them with.
fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'*')
}

/// Bytes that occur in bearer tokens (RFC 6750 `b64token`, plus JWT dots).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'*' | b'.' | b'~' | b'+' | b'/' | b'=')
}

fn run_end(bytes: &[u8], from: usize, accept: fn(u8) -> bool) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| !accept(b))
        .map_or(bytes.len(), |len| from + len)
}

/// The end of a credential starting at `at`, and what replaces it.
fn credential_at(bytes: &[u8], at: usize) -> Option<(usize, &'static str)> {
    let rest = &bytes[at..];
    if rest.starts_with(b"sk-") {
        let end = run_end(bytes, at + 3, is_key_byte);
        return (end - (at + 3) >= 4).then_some((end, REDACTED));
    }
    if rest.starts_with(b"AIza") {
        let end = run_end(bytes, at + 4, is_key_byte);
        return (end - (at + 4) >= 16).then_some((end, REDACTED));
    }
    if rest.len() > 6 && rest[..6].eq_ignore_ascii_case(b"bearer") && rest[6] == b' ' {
        let token_start = run_end(bytes, at + 6, |b| b == b' ');
        let end = run_end(bytes, token_start, is_token_byte);
        return (end - token_start >= 4).then_some((end, "Bearer [redacted]"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_and_full_keys_are_removed() {
        let text = "Incorrect API key provided: sk-abc1***************wxyz. See docs.";
        assert_eq!(
            redact_credentials(text),
            "Incorrect API key provided: [redacted]. See docs."
        );
        assert_eq!(
            redact_credentials("key=sk-proj-AbCdEf123456_x end"),
            "key=[redacted] end"
        );
        assert_eq!(
            redact_credentials("google AIzaSyA1234567890abcdefghij ok"),
            "google [redacted] ok"
        );
    }

    #[test]
    fn bearer_tokens_are_removed_in_any_case() {
        assert_eq!(
            redact_credentials("sent authorization: bearer eyJhbGc.eyJzdWIi.sig== please"),
            "sent authorization: Bearer [redacted] please"
        );
        assert_eq!(redact_credentials("Bearer  abcdefgh"), "Bearer [redacted]");
    }

    #[test]
    fn ordinary_words_survive() {
        for text in [
            "tasks-123456 failed",
            "the risk-free bearer of news",
            "sk- alone",
            "desk-top",
        ] {
            assert_eq!(redact_credentials(text), text);
        }
    }

    #[test]
    fn multibyte_text_around_keys_survives() {
        assert_eq!(
            redact_credentials("密钥 sk-12345678 无效"),
            "密钥 [redacted] 无效"
        );
    }

    #[test]
    fn clean_message_collapses_and_truncates() {
        let text = "line one\r\n\tline two\u{0}  sk-abcdefgh";
        assert_eq!(clean_message(text, 300), "line one line two [redacted]");
        assert_eq!(clean_message("ééééé", 3), "ééé…");
        let long = "x".repeat(10_000);
        assert_eq!(clean_message(&long, 300).chars().count(), 301);
    }
}
