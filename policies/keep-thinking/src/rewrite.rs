use gateway_guest_sdk::json::{parse_request_object, str_member};
use serde_json::Value;

use crate::exports::gateway::plugin::policy::{PatchOp, PluginError};

/// Removes each of the three spellings of "no thinking" (spec §4.3); a switch
/// asking for thinking, or any other value, is left for the upstream.
pub fn rewrite(body: &[u8]) -> Result<Vec<PatchOp>, PluginError> {
    let request = parse_request_object(body)
        .map_err(|err| PluginError::InvalidRequest(err.message().to_owned()))?;
    let mut ops = Vec::new();
    if request.get("enable_thinking") == Some(&Value::Bool(false)) {
        ops.push(PatchOp::Remove("/enable_thinking".to_owned()));
    }
    if request
        .get("thinking")
        .is_some_and(|thinking| str_member(thinking, "type") == Some("disabled"))
    {
        ops.push(PatchOp::Remove("/thinking".to_owned()));
    }
    if str_member(&request, "reasoning_effort") == Some("none") {
        ops.push(PatchOp::Remove("/reasoning_effort".to_owned()));
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn removed(body: &str) -> Vec<String> {
        rewrite(body.as_bytes())
            .unwrap()
            .into_iter()
            .map(|op| match op {
                PatchOp::Remove(pointer) => pointer,
                other => panic!("only removals expected, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn removes_every_way_of_switching_thinking_off() {
        assert_eq!(
            removed(
                r#"{"enable_thinking":false,"thinking":{"type":"disabled"},"reasoning_effort":"none"}"#
            ),
            ["/enable_thinking", "/thinking", "/reasoning_effort"]
        );
    }

    #[test]
    fn keeps_switches_that_ask_for_thinking() {
        assert!(removed(
            r#"{"enable_thinking":true,"thinking":{"type":"enabled","budget_tokens":1024},"reasoning_effort":"high"}"#
        )
        .is_empty());
        assert!(removed(r#"{"model":"m","messages":[]}"#).is_empty());
        assert!(removed(r#"{"enable_thinking":"false","thinking":"disabled"}"#).is_empty());
    }

    #[test]
    fn non_objects_are_invalid_requests() {
        for body in [&b"[]"[..], b"{", b"null"] {
            assert!(matches!(rewrite(body), Err(PluginError::InvalidRequest(_))));
        }
    }
}
