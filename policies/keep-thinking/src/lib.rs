//! The `keep-thinking` policy: for a model whose thinking phase cannot be
//! switched off (spec §4.3), the switches that would ask for that are removed
//! from the vendor request, in the vendor's spelling, so the upstream is
//! neither asked for the impossible nor rejects the call.

use gateway_guest_sdk::bindings::types::{Protocol, RequestCtx};
use gateway_guest_sdk::gemini::pointer;
use gateway_guest_sdk::policy::{Edit, Policy, PolicyInfo};
use gateway_guest_sdk::TranslateError;
use serde_json::Value;

struct KeepThinking;

fn remove(p: &str) -> Edit {
    Edit::Remove(p.to_owned())
}

fn is(body: &Value, pointer: &str, value: Value) -> bool {
    body.pointer(pointer) == Some(&value)
}

/// Each spelling of "no thinking" in the vendor's dialect; switches asking
/// for thinking, and other values, are left alone.
fn edits(vendor: Protocol, body: &Value) -> Vec<Edit> {
    let mut out = Vec::new();
    match vendor {
        Protocol::Gemini => {
            // As the body spells it (the google-genai SDK writes snake_case inside).
            let budget = pointer(
                body,
                &["generationConfig", "thinkingConfig", "thinkingBudget"],
            );
            if let Some(p) = budget.filter(|p| is(body, p, Value::from(0))) {
                out.push(Edit::Remove(p));
            }
        }
        Protocol::AnthropicMessages => {
            if is(body, "/thinking/type", "disabled".into()) {
                out.push(remove("/thinking"));
            }
        }
        Protocol::OpenaiResponses => {
            if is(body, "/reasoning/effort", "none".into()) {
                out.push(remove("/reasoning/effort"));
            }
        }
        _ => {
            if is(body, "/enable_thinking", Value::Bool(false)) {
                out.push(remove("/enable_thinking"));
            }
            if is(body, "/thinking/type", "disabled".into()) {
                out.push(remove("/thinking"));
            }
            if is(body, "/reasoning_effort", "none".into()) {
                out.push(remove("/reasoning_effort"));
            }
        }
    }
    out
}

impl Policy for KeepThinking {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "keep-thinking",
            version: env!("CARGO_PKG_VERSION"),
            summary: "removes requests to switch thinking off, for models that always think",
        }
    }

    fn rewrite(
        _ctx: &RequestCtx,
        vendor: Protocol,
        body: &Value,
    ) -> Result<Vec<Edit>, TranslateError> {
        Ok(edits(vendor, body))
    }
}

gateway_guest_sdk::export_policy!(KeepThinking);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removes_every_way_of_switching_thinking_off() {
        assert_eq!(
            edits(
                Protocol::OpenaiChat,
                &json!({"enable_thinking": false, "thinking": {"type": "disabled"},
                        "reasoning_effort": "none"})
            ),
            [
                remove("/enable_thinking"),
                remove("/thinking"),
                remove("/reasoning_effort")
            ]
        );
        assert_eq!(
            edits(
                Protocol::AnthropicMessages,
                &json!({"thinking": {"type": "disabled"}})
            ),
            [remove("/thinking")]
        );
        assert_eq!(
            edits(
                Protocol::Gemini,
                &json!({"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}})
            ),
            [remove("/generationConfig/thinkingConfig/thinkingBudget")]
        );
        assert_eq!(
            edits(
                Protocol::Gemini,
                &json!({"generationConfig": {"thinking_config": {"thinking_budget": 0}}})
            ),
            [remove("/generationConfig/thinking_config/thinking_budget")]
        );
    }

    #[test]
    fn keeps_switches_that_ask_for_thinking() {
        assert!(edits(
            Protocol::OpenaiChat,
            &json!({"enable_thinking": true, "thinking": {"type": "enabled", "budget_tokens": 1024},
                    "reasoning_effort": "high"})
        )
        .is_empty());
        assert!(edits(
            Protocol::AnthropicMessages,
            &json!({"thinking": {"type": "enabled", "budget_tokens": 2048}})
        )
        .is_empty());
        assert!(edits(
            Protocol::Gemini,
            &json!({"generationConfig": {"thinkingConfig": {"thinkingBudget": 512}}})
        )
        .is_empty());
        assert!(edits(Protocol::OpenaiChat, &json!({"enable_thinking": "false"})).is_empty());
    }
}
