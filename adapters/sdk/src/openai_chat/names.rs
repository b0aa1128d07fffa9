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

pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// Reads a finish reason. Vendors invent their own (`eos`, `max_tokens`,
/// `insufficient_system_resource`); anything not recognised means generation
/// simply ended, which is what a client can act on.
pub fn finish_reason_from(name: &str) -> FinishReason {
    match name {
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" | "sensitive" => FinishReason::ContentFilter,
        _ => FinishReason::Stop,
    }
}

pub fn finish_reason_name(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
    }
}
