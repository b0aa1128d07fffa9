use serde::Serialize;
use serde_json::{json, Value};

use crate::canonical::Usage;
use crate::json::{count_member, object_member};

/// Reads an OpenAI `usage` object. Missing `*_details` count as 0; `None`
/// when there is no usage object at all (`null` included).
pub fn parse_usage(value: &Value) -> Option<Usage> {
    if !value.is_object() {
        return None;
    }
    let detail = |outer: &str, inner: &str| {
        value
            .get(outer)
            .and_then(|details| count_member(details, inner))
            .unwrap_or(0)
    };
    let usage = Usage {
        input_tokens: count_member(value, "prompt_tokens").unwrap_or(0),
        output_tokens: count_member(value, "completion_tokens").unwrap_or(0),
        cache_read_tokens: detail("prompt_tokens_details", "cached_tokens"),
        // Not part of OpenAI's own shape; some compatible vendors report it.
        cache_write_tokens: detail("prompt_tokens_details", "cache_write_tokens"),
        reasoning_tokens: detail("completion_tokens_details", "reasoning_tokens"),
    };
    Some(usage.consistent())
}

/// Writes an OpenAI `usage` object. OpenAI has no cache-write counter; when
/// a vendor reported cache writes they appear as
/// `prompt_tokens_details.cache_write_tokens` (inside `prompt_tokens`, like
/// every other part), which OpenAI-compatible clients ignore if unknown.
pub fn encode_usage(usage: &Usage) -> Value {
    serde_json::to_value(UsageOut::of(usage)).unwrap_or_default()
}

/// An OpenAI `usage` object, members by name (as a `Value` keeps them), so
/// the typed and the tree writing give the same text.
#[derive(Serialize)]
pub(super) struct UsageOut {
    completion_tokens: u64,
    completion_tokens_details: CompletionDetailsOut,
    prompt_tokens: u64,
    prompt_tokens_details: PromptDetailsOut,
    total_tokens: u64,
}

#[derive(Serialize)]
struct CompletionDetailsOut {
    reasoning_tokens: u64,
}

#[derive(Serialize)]
struct PromptDetailsOut {
    #[serde(skip_serializing_if = "is_zero")]
    cache_write_tokens: u64,
    cached_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl UsageOut {
    pub(super) fn of(usage: &Usage) -> Self {
        UsageOut {
            completion_tokens: usage.output_tokens,
            completion_tokens_details: CompletionDetailsOut {
                reasoning_tokens: usage.reasoning_tokens,
            },
            prompt_tokens: usage.input_tokens,
            prompt_tokens_details: PromptDetailsOut {
                cache_write_tokens: usage.cache_write_tokens,
                cached_tokens: usage.cache_read_tokens,
            },
            total_tokens: usage.total_tokens(),
        }
    }
}

/// Adds `prompt_tokens_details.cached_tokens` and
/// `completion_tokens_details.reasoning_tokens` (as 0) where a vendor left
/// them out, so clients always find them (spec §2.8). Other members, and a
/// usage that is not an object, are left alone. Returns whether anything
/// was added (a usage that had them all can be passed on as it was written).
pub fn ensure_usage_details(usage: &mut Value) -> bool {
    if !usage.is_object() {
        return false;
    }
    let mut added = false;
    for (outer, inner) in [
        ("prompt_tokens_details", "cached_tokens"),
        ("completion_tokens_details", "reasoning_tokens"),
    ] {
        let present = usage
            .get(outer)
            .and_then(|details| details.get(inner))
            .is_some_and(|count| !count.is_null());
        if present {
            continue;
        }
        added = true;
        if let Some(details) = object_member(usage, outer) {
            let count = details.entry(inner.to_owned()).or_insert(json!(0));
            if count.is_null() {
                *count = json!(0);
            }
        }
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_default_to_zero() {
        let usage = parse_usage(&json!({"prompt_tokens": 12, "completion_tokens": 3}));
        assert_eq!(
            usage,
            Some(Usage {
                input_tokens: 12,
                output_tokens: 3,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                reasoning_tokens: 0,
            })
        );
        assert_eq!(parse_usage(&Value::Null), None);
    }

    #[test]
    fn details_are_read() {
        let value = json!({
            "prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150,
            "prompt_tokens_details": {"cached_tokens": 40, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 30},
        });
        let usage = parse_usage(&value);
        assert_eq!(
            usage,
            Some(Usage {
                input_tokens: 100,
                output_tokens: 50,
                cache_read_tokens: 40,
                cache_write_tokens: 0,
                reasoning_tokens: 30,
            })
        );
        let round = usage.map(|u| encode_usage(&u));
        assert_eq!(
            round,
            Some(json!({
                "prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150,
                "prompt_tokens_details": {"cached_tokens": 40},
                "completion_tokens_details": {"reasoning_tokens": 30},
            }))
        );
    }

    #[test]
    fn ensure_details_fills_gaps_only() {
        let mut usage = json!({
            "prompt_tokens": 5,
            "prompt_tokens_details": {"audio_tokens": 1},
            "completion_tokens_details": null,
        });
        assert!(ensure_usage_details(&mut usage));
        assert_eq!(
            usage,
            json!({
                "prompt_tokens": 5,
                "prompt_tokens_details": {"audio_tokens": 1, "cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0},
            })
        );
        let mut kept = json!({"prompt_tokens_details": {"cached_tokens": 3},
                              "completion_tokens_details": {"reasoning_tokens": 4}});
        let before = kept.clone();
        assert!(!ensure_usage_details(&mut kept));
        assert_eq!(kept, before);
        let mut half = json!({"prompt_tokens_details": {"cached_tokens": 3},
                              "completion_tokens_details": {"reasoning_tokens": null}});
        assert!(ensure_usage_details(&mut half));
        assert_eq!(half["completion_tokens_details"]["reasoning_tokens"], 0);
        let mut null = Value::Null;
        assert!(!ensure_usage_details(&mut null));
        assert_eq!(null, Value::Null);
    }
}
