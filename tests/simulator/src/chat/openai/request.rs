//! Reading an OpenAI chat-completions body into the protocol-neutral facts
//! ([`ChatRequest`]). Unknown fields are ignored, as a vendor would.

use serde_json::Value;

use crate::chat::request::{choose_tools, ChatRequest, Role, Turn};
use crate::errors::ApiError;

impl ChatRequest {
    /// Reads an OpenAI chat-completions body.
    pub fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::invalid_request(
                format!("We could not parse the JSON body of your request: {e}."),
                None,
            )
        })?;
        let Some(obj) = value.as_object() else {
            return Err(ApiError::invalid_request(
                "The request body must be a JSON object.",
                None,
            ));
        };
        let Some(messages) = obj.get("messages").and_then(Value::as_array) else {
            return Err(ApiError::invalid_request(
                "'messages' is a required property and must be an array.",
                Some("messages"),
            ));
        };
        let turns: Vec<Turn> = messages.iter().map(turn).collect();
        // Lenient on purpose: the simulator exists to echo what the gateway
        // sent, not to re-validate it.
        let model = obj
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("sim-chat");
        let mut req = ChatRequest::from_turns(model, &turns);

        req.stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
        req.include_usage = obj
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        req.max_tokens = obj
            .get("max_completion_tokens")
            .and_then(Value::as_u64)
            .or_else(|| obj.get("max_tokens").and_then(Value::as_u64));
        let enable_thinking = obj.get("enable_thinking").and_then(Value::as_bool);
        let thinking_type = obj
            .get("thinking")
            .and_then(|t| t.get("type"))
            .and_then(Value::as_str);
        let effort = obj.get("reasoning_effort").and_then(Value::as_str);
        req.thinking_disabled = enable_thinking == Some(false)
            || thinking_type == Some("disabled")
            || effort == Some("none");
        req.thinking_enabled = enable_thinking == Some(true)
            || thinking_type == Some("enabled")
            || matches!(effort, Some("minimal" | "low" | "medium" | "high"));
        (req.tool_name, req.tools) = tool_names(obj.get("tools"), obj.get("tool_choice"));
        req.stop = match obj.get("stop") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        Ok(req)
    }
}

/// A message as a turn: `system`, `user` and `tool` (its content is the
/// tool result) matter; every other role is the assistant's.
fn turn(message: &Value) -> Turn {
    let text = message_text(message.get("content").unwrap_or(&Value::Null));
    match message.get("role").and_then(Value::as_str).unwrap_or("") {
        "system" => Turn::new(Role::System, text),
        "user" => Turn::new(Role::User, text),
        "tool" => Turn {
            role: Role::Tool,
            text: String::new(),
            tool_results: vec![text],
        },
        _ => Turn::new(Role::Assistant, text),
    }
}

/// Content may be a string, an array of parts (only `text` parts count) or
/// null (assistant tool-call turns).
fn message_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// The tool to call and every tool that may be called: `tools[].function.name`;
/// `tool_choice` `"none"`, or an object naming the function (forced).
fn tool_names(tools: Option<&Value>, choice: Option<&Value>) -> (Option<String>, Vec<String>) {
    let names: Vec<String> = tools
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|t| {
                    t.get("function")
                        .and_then(|f| f.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("tool")
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default();
    let forced = choice
        .and_then(|c| c.get("function"))
        .and_then(|f| f.get("name"))
        .and_then(Value::as_str);
    choose_tools(
        names,
        choice.and_then(Value::as_str) == Some("none"),
        forced,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> ChatRequest {
        match ChatRequest::parse(v.to_string().as_bytes()) {
            Ok(r) => r,
            Err(e) => panic!("unexpected error {e:?}"),
        }
    }

    #[test]
    fn prompt_and_cached_tokens() {
        let r = parse(json!({"model": "m", "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": [{"type": "text", "text": "hi there"},
                                         {"type": "image_url", "image_url": {"url": "x y z"}},
                                         {"type": "text", "text": "friend"}]},
            {"role": "assistant", "content": null},
            {"role": "user", "content": "last one"}
        ]}));
        assert_eq!(r.prompt_tokens, 4 + 4 + 1 + 3);
        assert_eq!(r.cached_tokens, 4);
        assert_eq!(r.last_user, "last one");
    }

    #[test]
    fn directives_are_stripped_but_still_count_as_prompt() {
        let r = parse(json!({"messages": [{"role": "user", "content": "hi [[sim:hang]]"}]}));
        assert_eq!(r.last_user, "hi");
        assert_eq!(r.prompt_tokens, 3);
        assert_eq!(r.model, "sim-chat");
    }

    #[test]
    fn rejects_bad_bodies() {
        assert!(ChatRequest::parse(b"{nope").is_err());
        assert!(ChatRequest::parse(b"[]").is_err());
        let e = ChatRequest::parse(br#"{"model":"m"}"#).err();
        assert_eq!(e.and_then(|e| e.param), Some("messages"));
    }

    #[test]
    fn thinking_switches() {
        let base = json!({"model": "sim-reasoner", "messages": []});
        assert!(!parse(base.clone()).thinking_disabled);
        for (k, v) in [
            ("enable_thinking", json!(false)),
            ("thinking", json!({"type": "disabled"})),
            ("reasoning_effort", json!("none")),
        ] {
            let mut body = base.clone();
            body[k] = v;
            assert!(parse(body).thinking_disabled, "{k}");
        }
    }

    #[test]
    fn tool_selection() {
        let tools = json!([{"type": "function", "function": {"name": "search"}},
                           {"type": "function", "function": {"name": "other"}}]);
        let mk = |choice: Value| {
            parse(json!({"messages": [], "tools": tools, "tool_choice": choice})).tool_name
        };
        assert_eq!(mk(json!("auto")), Some("search".into()));
        assert_eq!(mk(json!(null)), Some("search".into()));
        assert_eq!(mk(json!("none")), None);
        assert_eq!(
            mk(json!({"type": "function", "function": {"name": "other"}})),
            Some("other".into())
        );
        assert_eq!(parse(json!({"messages": [], "tools": []})).tool_name, None);
    }

    #[test]
    fn max_completion_tokens_wins() {
        let r = parse(json!({"messages": [], "max_tokens": 5, "max_completion_tokens": 7}));
        assert_eq!(r.max_tokens, Some(7));
    }

    #[test]
    fn thinking_on_request_and_off_wins() {
        let base = json!({"model": "sim-chat", "messages": []});
        assert!(!parse(base.clone()).thinks());
        for (k, v) in [
            ("enable_thinking", json!(true)),
            ("thinking", json!({"type": "enabled"})),
            ("reasoning_effort", json!("minimal")),
            ("reasoning_effort", json!("low")),
            ("reasoning_effort", json!("medium")),
            ("reasoning_effort", json!("high")),
        ] {
            let mut body = base.clone();
            body[k] = v;
            assert!(parse(body.clone()).thinks(), "{k}");
            body["enable_thinking"] = json!(false);
            assert!(!parse(body).thinks(), "{k} but switched off");
        }
        let mut odd = base;
        odd["reasoning_effort"] = json!("extreme");
        assert!(!parse(odd).thinks());
    }

    #[test]
    fn stop_strings_and_tool_results() {
        let r = parse(json!({"stop": "END", "messages": []}));
        assert_eq!(r.stop, ["END"]);
        let r = parse(json!({"stop": ["a", 1, "b"], "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": null, "tool_calls": []},
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "r s"}]}]}));
        assert_eq!(r.stop, ["a", "b"]);
        assert_eq!(r.last_tool_result.as_deref(), Some("r s"));
        assert_eq!(r.last_user, "q");
        // q (1+1), assistant (0+1), tool (2+1)
        assert_eq!(r.prompt_tokens, 2 + 1 + 3);
        assert_eq!(r.cache_write_tokens, 0);
        assert!(!r.include_usage);
    }
}
