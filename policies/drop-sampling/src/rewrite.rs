use gateway_guest_sdk::json::parse_request_object;

use crate::exports::gateway::plugin::policy::{PatchOp, PluginError};

/// The sampling parameters the upstream refuses.
const DROPPED: [&str; 2] = ["temperature", "top_p"];

/// Removes each dropped parameter the client sent, `null` included: an
/// upstream that rejects the member may reject it even when empty.
pub fn rewrite(body: &[u8]) -> Result<Vec<PatchOp>, PluginError> {
    let request = parse_request_object(body)
        .map_err(|err| PluginError::InvalidRequest(err.message().to_owned()))?;
    Ok(DROPPED
        .iter()
        .filter(|member| request.get(**member).is_some())
        .map(|member| PatchOp::Remove(format!("/{member}")))
        .collect())
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
    fn removes_present_sampling_parameters() {
        assert_eq!(
            removed(r#"{"model":"m","temperature":0.2,"top_p":0.9,"max_tokens":5}"#),
            ["/temperature", "/top_p"]
        );
        assert_eq!(removed(r#"{"top_p":null}"#), ["/top_p"]);
    }

    #[test]
    fn leaves_other_requests_alone() {
        assert!(removed(r#"{"model":"m","messages":[]}"#).is_empty());
        // Only top-level members are sampling parameters.
        assert!(removed(r#"{"metadata":{"temperature":1}}"#).is_empty());
    }

    #[test]
    fn non_objects_are_invalid_requests() {
        for body in [&b"[]"[..], b"nope", b"1"] {
            assert!(matches!(rewrite(body), Err(PluginError::InvalidRequest(_))));
        }
    }
}
