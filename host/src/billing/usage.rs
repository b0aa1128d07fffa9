//! What a call consumed, in the host's own terms. Guests report usage in the
//! WIT record; `plugins::session` converts it here once, so billing, the
//! usage log and the stream relay never depend on generated types.

use serde::{Deserialize, Serialize};

/// Tokens and other quantities one call consumed. The parts are included in
/// their totals: `cache_read_tokens` and `cache_write_tokens` are parts of
/// `input_tokens`, `reasoning_tokens` a part of `output_tokens`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// All prompt tokens: uncached ones, cache reads and cache writes.
    pub input_tokens: u64,
    /// All generated tokens, reasoning included.
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub reasoning_tokens: u64,
    /// Non-token quantities (images, audio, search units, ...).
    pub meters: Vec<Meter>,
    /// The gateway measured some of this itself because the vendor's answer
    /// said nothing (a transcription's audio length, tokens counted with the
    /// model's tokenizer: `billing::tokens`); recorded on the usage row.
    pub counted_by_gateway: bool,
}

/// What a non-token meter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeterKind {
    Images,
    Characters,
    AudioMs,
    SearchUnits,
    Requests,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meter {
    pub kind: MeterKind,
    pub quantity: u64,
    /// The priced variant (an image's `1024x1024/hd`), when there are several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Usage {
    /// Clamps the parts to their totals, so a vendor that reports more
    /// cached than prompt tokens can never make a part negative.
    pub fn consistent(mut self) -> Self {
        self.cache_read_tokens = self.cache_read_tokens.min(self.input_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .min(self.input_tokens - self.cache_read_tokens);
        self.reasoning_tokens = self.reasoning_tokens.min(self.output_tokens);
        self
    }

    /// Whether this reports nothing: no tokens and no meters (a vendor
    /// whose usage object is all zeros has not counted).
    pub fn is_empty(&self) -> bool {
        self.input_tokens == 0 && self.output_tokens == 0 && self.meters.is_empty()
    }

    /// Prompt tokens neither read from nor written to the cache.
    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_sub(self.cache_read_tokens)
            .saturating_sub(self.cache_write_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_never_exceed_their_totals() {
        let u = Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_tokens: 7,
            cache_write_tokens: 9,
            reasoning_tokens: 8,
            ..Usage::default()
        }
        .consistent();
        assert_eq!(
            (
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.reasoning_tokens
            ),
            (7, 3, 5)
        );
        assert_eq!(u.uncached_input_tokens(), 0);
    }
}
