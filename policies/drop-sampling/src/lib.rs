//! The `drop-sampling` policy: for a model whose upstream rejects
//! `temperature` and `top_p`, the gateway drops them instead of letting the
//! call fail with 400 (spec §4.3), whatever protocol the client spoke: the
//! policy edits the vendor request, in the vendor's spelling.

use gateway_guest_sdk::bindings::types::{Protocol, RequestCtx};
use gateway_guest_sdk::gemini::pointer;
use gateway_guest_sdk::policy::{Edit, Policy, PolicyInfo};
use gateway_guest_sdk::TranslateError;
use serde_json::Value;

struct DropSampling;

/// Removes each parameter present, `null` included: an upstream that rejects
/// the member may reject it even when empty. Gemini keeps them in
/// `generationConfig`, in camelCase or snake_case as the body was written.
fn edits(vendor: Protocol, body: &Value) -> Vec<Edit> {
    let found: Vec<String> = match vendor {
        Protocol::Gemini => [
            ["generationConfig", "temperature"],
            ["generationConfig", "topP"],
        ]
        .iter()
        .filter_map(|path| pointer(body, path))
        .collect(),
        _ => ["/temperature", "/top_p"]
            .iter()
            .filter(|p| body.pointer(p).is_some())
            .map(|p| (*p).to_owned())
            .collect(),
    };
    found.into_iter().map(Edit::Remove).collect()
}

impl Policy for DropSampling {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "drop-sampling",
            version: env!("CARGO_PKG_VERSION"),
            summary: "drops temperature and top_p for upstreams that reject them",
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

gateway_guest_sdk::export_policy!(DropSampling);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn removed(vendor: Protocol, body: Value) -> Vec<Edit> {
        edits(vendor, &body)
    }

    #[test]
    fn removes_present_sampling_parameters_in_each_dialect() {
        let r = |p: &str| Edit::Remove(p.to_owned());
        for vendor in [Protocol::OpenaiChat, Protocol::AnthropicMessages] {
            assert_eq!(
                removed(
                    vendor,
                    json!({"temperature": 0.2, "top_p": null, "max_tokens": 5})
                ),
                [r("/temperature"), r("/top_p")]
            );
        }
        assert_eq!(
            removed(
                Protocol::Gemini,
                json!({"generationConfig": {"temperature": 1, "topP": 0.5, "topK": 3}})
            ),
            [
                r("/generationConfig/temperature"),
                r("/generationConfig/topP")
            ]
        );
    }

    #[test]
    fn leaves_other_requests_alone() {
        assert!(removed(Protocol::OpenaiChat, json!({"model": "m", "messages": []})).is_empty());
        // Only the dialect's own places count.
        assert!(removed(
            Protocol::OpenaiChat,
            json!({"metadata": {"temperature": 1}})
        )
        .is_empty());
        assert!(removed(Protocol::Gemini, json!({"temperature": 1})).is_empty());
    }
}
