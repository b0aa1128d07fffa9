//! Token pricing for text calls.
//!
//! - Prompt tokens neither read from nor written to the vendor's cache: the
//!   input price.
//! - Prompt tokens read from the cache: the cached-input price.
//! - Prompt tokens written to the cache: the cache-write price (by default
//!   the input price).
//! - Completion tokens, reasoning included: the output price.
//!
//! Vendors count these differently (OpenAI's cached tokens are part of
//! `prompt_tokens`, Anthropic's cache reads and writes come on top of
//! `input_tokens`); the adapters convert to [`Usage`]'s definitions, so this
//! one formula is right for all of them.
//!
//! - Non-token meters (images, characters, audio, search units, requests):
//!   the model's meter prices ([`super::meters`]).
//!
//! Prices are quota units per 1M tokens; each part is rounded up to a whole
//! unit, so a call is never billed below its cost.

use super::money::{per_million, Quota};
use super::usage::{Meter, Usage};
use crate::config::ModelConfig;

/// What a call with this usage costs.
pub fn cost(model: &ModelConfig, usage: &Usage) -> Quota {
    let u = usage.clone().consistent();
    per_million(u.uncached_input_tokens(), model.input_price)
        .saturating_add(per_million(u.cache_read_tokens, model.cached_input_price))
        .saturating_add(per_million(u.cache_write_tokens, model.cache_write_price))
        .saturating_add(per_million(u.output_tokens, model.output_price))
        .saturating_add(model.meter_prices.cost(&u.meters))
}

/// What to hold before the call: the prompt estimate at the input price (or
/// the cache-write price, when dearer),
/// the most the answer may use at the output price, and the meters the
/// request will consume (`n` images, the input's characters, ...).
pub fn estimate(
    model: &ModelConfig,
    prompt_tokens: u64,
    max_output_tokens: u64,
    meters: &[Meter],
) -> Quota {
    // The prompt may all be written to the vendor's cache, which can cost
    // more than plain input (Anthropic: 1.25×): hold the dearer price.
    let prompt_price = model.input_price.max(model.cache_write_price);
    per_million(prompt_tokens, prompt_price)
        .saturating_add(per_million(max_output_tokens, model.output_price))
        .saturating_add(model.meter_prices.cost(meters))
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
            created: None,
            tokenizer: crate::billing::tokens::Encoding::O200kBase,
            name: "m".into(),
            owned_by: "x".into(),
            input_price: 1_000_000,
            output_price: 4_000_000,
            cached_input_price: 250_000,
            cache_write_price: 1_250_000,
            meter_prices: Default::default(),
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
            cache_read_tokens: 400,
            reasoning_tokens: 300,
            ..Usage::default()
        };
        // 600 uncached × 1 + 400 cached × 0.25 + 500 output (reasoning included) × 4
        assert_eq!(cost(&model(), &u), 600 + 100 + 2_000);
    }

    #[test]
    fn cache_writes_are_priced_apart_from_reads_and_uncached_input() {
        let u = Usage {
            input_tokens: 1_000,
            output_tokens: 10,
            cache_read_tokens: 400,
            cache_write_tokens: 200,
            ..Usage::default()
        };
        // 400 uncached × 1 + 400 read × 0.25 + 200 written × 1.25 + 10 × 4
        assert_eq!(cost(&model(), &u), 400 + 100 + 250 + 40);
    }

    #[test]
    fn cached_never_exceeds_input() {
        let u = Usage {
            input_tokens: 10,
            cache_read_tokens: 50,
            ..Usage::default()
        };
        assert_eq!(cost(&model(), &u), 3); // 10 × 0.25 rounded up
    }

    #[test]
    fn estimate_covers_prompt_and_max_tokens() {
        // 100 prompt tokens at the cache-write price 1.25, 50 output at 4.
        assert_eq!(estimate(&model(), 100, 50, &[]), 125 + 200);
        assert_eq!(estimate_prompt_tokens(30, 2), 18);
    }
}
