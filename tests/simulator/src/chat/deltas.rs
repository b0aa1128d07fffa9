//! How every protocol cuts an answer into stream deltas, so the three
//! streams of one plan carry the same pieces: one word per delta (all but
//! the last with a trailing space), tool-call arguments in three fragments.

/// Words with a trailing space on all but the last, so concatenating the
/// deltas gives back the space-joined text.
pub fn spaced(words: &[String]) -> impl Iterator<Item = String> + '_ {
    let last = words.len().saturating_sub(1);
    words
        .iter()
        .enumerate()
        .map(move |(i, w)| if i < last { format!("{w} ") } else { w.clone() })
}

/// Splits on char boundaries into up to three non-empty pieces.
pub fn thirds(s: &str) -> Vec<&str> {
    let chars: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
    let n = chars.len();
    let cut = |k: usize| chars.get(n * k / 3).copied().unwrap_or(s.len());
    let (a, b) = (cut(1), cut(2));
    [&s[..a], &s[a..b], &s[b..]]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaced_words_concatenate_back() {
        let words: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let pieces: Vec<String> = spaced(&words).collect();
        assert_eq!(pieces, ["a ", "b ", "c"]);
        assert_eq!(spaced(&[]).count(), 0);
    }

    #[test]
    fn thirds_split_on_char_boundaries() {
        assert_eq!(thirds(r#"{"q":"é"}"#).concat(), r#"{"q":"é"}"#);
        assert_eq!(thirds("abcdef"), ["ab", "cd", "ef"]);
        assert_eq!(thirds("ab"), ["a", "b"]);
        assert!(thirds("").is_empty());
    }
}
