//! Token pricing for text calls.
//!
//! - Prompt tokens not served from the vendor's cache: the input price.
//! - Cached prompt tokens: the cached-input price.
//! - Completion tokens, reasoning included: the output price.
//!
//! Prices are quota units per 1M tokens; each part is rounded up to a whole
//! unit, so a call is never billed below its cost.

use super::money::{per_million, Quota};
use crate::config::ModelConfig;
use crate::plugins::bindings::types::Usage;

/// What a call with this usage costs.
pub fn cost(model: &ModelConfig, usage: &Usage) -> Quota {
    let cached = usage.cached_tokens.min(usage.input_tokens);
    let uncached = usage.input_tokens - cached;
    per_million(uncached, model.input_price)
        .saturating_add(per_million(cached, model.cached_input_price))
        .saturating_add(per_million(usage.output_tokens, model.output_price))
}

/// What to hold before the call: the prompt estimate at the input price plus
/// the most the answer may use at the output price.
pub fn estimate(model: &ModelConfig, prompt_tokens: u64, max_output_tokens: u64) -> Quota {
    per_million(prompt_tokens, model.input_price)
        .saturating_add(per_million(max_output_tokens, model.output_price))
}

/// A deliberately generous prompt-token estimate from the raw JSON of the
/// messages: about one token per 3 bytes (JSON punctuation included) plus a
/// few per message. Over-estimating only holds a little more money for the
/// duration of the call; the settlement uses the vendor's count.
pub fn estimate_prompt_tokens(message_bytes: usize, messages: usize) -> u64 {
    (message_bytes as u64).div_ceil(3) + 4 * messages as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ModelConfig {
        ModelConfig {
            name: "m".into(),
            owned_by: "x".into(),
            input_price: 1_000_000,
            output_price: 4_000_000,
            cached_input_price: 250_000,
            default_max_tokens: None,
            policies: vec![],
            group: "default".into(),
        }
    }

    #[test]
    fn cached_and_reasoning_tokens_are_priced_as_documented() {
        let u = Usage {
            input_tokens: 1_000,
            output_tokens: 500,
            cached_tokens: 400,
            reasoning_tokens: 300,
        };
        // 600 uncached × 1 + 400 cached × 0.25 + 500 output (reasoning included) × 4
        assert_eq!(cost(&model(), &u), 600 + 100 + 2_000);
    }

    #[test]
    fn cached_never_exceeds_input() {
        let u = Usage {
            input_tokens: 10,
            output_tokens: 0,
            cached_tokens: 50,
            reasoning_tokens: 0,
        };
        assert_eq!(cost(&model(), &u), 3); // 10 × 0.25 rounded up
    }

    #[test]
    fn estimate_covers_prompt_and_max_tokens() {
        assert_eq!(estimate(&model(), 100, 50), 100 + 200);
        assert_eq!(estimate_prompt_tokens(30, 2), 18);
    }
}
