//! Deterministic text arithmetic: token counting, hashing and the generated
//! words. Everything here is a pure function of its input so the gateway's
//! tests can predict every number the simulator reports.

/// One whitespace-separated word is one token; real tokenizers differ, but a
/// rule a test can compute by hand matters more here than realism.
pub fn count_words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// 64-bit FNV-1a: tiny, stable across platforms and Rust versions (unlike
/// `DefaultHasher`), so replies never change between toolchains.
pub fn fnv1a(text: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    text.bytes().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

/// The fixed reasoning text of reasoning models: exactly eight words.
pub const REASONING: [&str; 8] = ["Let", "me", "think", "about", "this", "step", "by", "step."];

const FILLER: [&str; 32] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "gateway", "stream", "token",
    "model", "vendor", "answer",
];

/// How many words the reply to `last_user` has: between 16 and 31.
pub fn reply_len(last_user: &str) -> usize {
    16 + (fnv1a(last_user) % 16) as usize
}

/// The full (untruncated) reply: a fixed prefix echoing the first eight words
/// of the last user message, padded with hash-picked filler words.
pub fn reply_words(last_user: &str) -> Vec<String> {
    reply_words_of(last_user, reply_len(last_user))
}

/// [`reply_words`] with `total` words (the echoed prefix may make it more
/// when `total` is under 12).
pub fn reply_words_of(last_user: &str, total: usize) -> Vec<String> {
    let mut words: Vec<String> = ["Simulated", "reply", "to:"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    words.extend(last_user.split_whitespace().take(8).map(str::to_owned));
    if let Some(last) = words.last_mut() {
        last.push('.');
    }
    let mut seed = fnv1a(last_user);
    while words.len() < total {
        // A 64-bit LCG step (Knuth's MMIX constants) spreads the single hash
        // over as many filler picks as needed.
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        words.push(FILLER[((seed >> 33) % FILLER.len() as u64) as usize].to_owned());
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_whitespace_separated_words() {
        assert_eq!(count_words(""), 0);
        assert_eq!(count_words("   "), 0);
        assert_eq!(count_words("hello"), 1);
        assert_eq!(count_words(" hello \n world\tagain "), 3);
    }

    #[test]
    fn fnv1a_matches_reference_vectors() {
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn reply_has_prefix_and_hash_driven_length() {
        let msg = "one two three four five six seven eight nine ten";
        let words = reply_words(msg);
        assert_eq!(words.len(), reply_len(msg));
        assert!((16..32).contains(&words.len()));
        assert_eq!(
            words[..11].join(" "),
            "Simulated reply to: one two three four five six seven eight."
        );
        assert_eq!(words, reply_words(msg), "must be deterministic");
    }

    #[test]
    fn reply_to_empty_message_is_still_well_formed() {
        let words = reply_words("");
        assert_eq!(words[..3].join(" "), "Simulated reply to:.");
        assert_eq!(words.len(), reply_len(""));
    }

    #[test]
    fn reasoning_is_eight_words() {
        assert_eq!(count_words(&REASONING.join(" ")), 8);
    }
}
