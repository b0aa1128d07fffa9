use crate::canonical::{FinishReason, Role};

/// Reads a role; `developer` is OpenAI's newer name for `system`, and
/// `function` its older name for `tool`.
pub fn role_from(name: &str) -> Option<Role> {
    match name {
        "system" | "developer" => Some(Role::System),
        "user" => Some(Role::User),
        "assistant" => Some(Role::Assistant),
        "tool" | "function" => Some(Role::Tool),
        _ => None,
    }
}

/// Reads a finish reason. Compatible vendors use a few spellings of their
/// own for the known reasons (`max_tokens`, `eos`, `sensitive`); anything
/// else (DeepSeek's `insufficient_system_resource`, which means the answer
/// was cut) is kept as `Other`, never read as a normal stop.
pub fn finish_reason_from(name: &str) -> FinishReason {
    match name {
        "stop" | "eos" | "end_turn" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" | "sensitive" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The OpenAI spelling; a reason OpenAI has no word for keeps its own.
pub fn finish_reason_name(reason: &FinishReason) -> String {
    match reason {
        FinishReason::Stop | FinishReason::StopSequence(_) => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter | FinishReason::Refusal => "content_filter",
        FinishReason::Other(raw) => raw,
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_reasons_are_kept() {
        let r = finish_reason_from("insufficient_system_resource");
        assert_eq!(
            r,
            FinishReason::Other("insufficient_system_resource".into())
        );
        assert_eq!(finish_reason_name(&r), "insufficient_system_resource");
        assert_eq!(finish_reason_from("max_tokens"), FinishReason::Length);
        assert_eq!(
            finish_reason_name(&FinishReason::StopSequence(Some("x".into()))),
            "stop"
        );
        assert_eq!(finish_reason_name(&FinishReason::Refusal), "content_filter");
    }
}
