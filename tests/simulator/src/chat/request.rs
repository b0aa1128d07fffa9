//! The few facts a simulated answer depends on, whatever protocol asked
//! ([`ChatRequest`]), and reading them from an OpenAI chat-completions body.
//! The Anthropic and Gemini readers live beside their renderers. Unknown
//! fields are ignored, as a vendor would.

use serde_json::Value;

use crate::errors::ApiError;
use crate::faults::{extract_directives, Directives};
use crate::tokens::count_words;

#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub stream: bool,
    pub include_usage: bool,
    pub max_tokens: Option<u64>,
    /// `enable_thinking: false`, `thinking.type: "disabled"` or
    /// `reasoning_effort: "none"` (and the other protocols' spellings).
    pub thinking_disabled: bool,
    /// The request asks for thinking explicitly (in its protocol's spelling).
    pub thinking_enabled: bool,
    /// Name of the function to call, when the request asks for tool use.
    pub tool_name: Option<String>,
    /// Every declared tool's name, in order (for `[[sim:parallel]]`), unless
    /// the tool choice forces one or forbids them.
    pub tools: Vec<String>,
    pub stop: Vec<String>,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    /// Prompt tokens written to the cache (the Anthropic dialect only).
    pub cache_write_tokens: u64,
    /// Text of the last user message with the directives removed.
    pub last_user: String,
    /// The text of the last tool result, when the conversation ends with one.
    pub last_tool_result: Option<String>,
    pub directives: Directives,
}

impl ChatRequest {
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

        let mut prompt_tokens = 0;
        let mut cached_tokens = 0;
        let mut last_user_raw = None;
        let last_tool_result = messages
            .last()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
            .map(|m| message_text(m.get("content").unwrap_or(&Value::Null)));
        for message in messages {
            let role = message.get("role").and_then(Value::as_str).unwrap_or("");
            let text = message_text(message.get("content").unwrap_or(&Value::Null));
            // The +1 stands in for the per-message framing tokens real
            // tokenizers add.
            let tokens = count_words(&text) + 1;
            prompt_tokens += tokens;
            if role == "system" {
                cached_tokens += tokens;
            }
            if role == "user" {
                last_user_raw = Some(text);
            }
        }
        let (last_user, directives) = extract_directives(&last_user_raw.unwrap_or_default());

        let stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let include_usage = obj
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let max_tokens = obj
            .get("max_completion_tokens")
            .and_then(Value::as_u64)
            .or_else(|| obj.get("max_tokens").and_then(Value::as_u64));
        let thinking_disabled = obj.get("enable_thinking").and_then(Value::as_bool) == Some(false)
            || obj
                .get("thinking")
                .and_then(|t| t.get("type"))
                .and_then(Value::as_str)
                == Some("disabled")
            || obj.get("reasoning_effort").and_then(Value::as_str) == Some("none");
        let thinking_enabled = obj.get("enable_thinking").and_then(Value::as_bool) == Some(true)
            || obj
                .get("thinking")
                .and_then(|t| t.get("type"))
                .and_then(Value::as_str)
                == Some("enabled")
            || matches!(
                obj.get("reasoning_effort").and_then(Value::as_str),
                Some("minimal" | "low" | "medium" | "high")
            );
        let (tool_name, tools) = tool_names(obj.get("tools"), obj.get("tool_choice"));
        let stop = match obj.get("stop") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };

        Ok(Self {
            // Lenient on purpose: the simulator exists to echo what the
            // gateway sent, not to re-validate it.
            model: obj
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("sim-chat")
                .to_owned(),
            stream,
            include_usage,
            max_tokens,
            thinking_disabled,
            thinking_enabled,
            tool_name,
            tools,
            stop,
            prompt_tokens,
            cached_tokens,
            cache_write_tokens: 0,
            last_user,
            last_tool_result,
            directives,
        })
    }

    pub fn is_reasoning_model(&self) -> bool {
        self.model.to_ascii_lowercase().contains("reason")
    }
}

/// Content may be a string, an array of parts (only `text` parts count) or
/// null (assistant tool-call turns).
pub(crate) fn message_text(content: &Value) -> String {
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

/// The tool to call and every tool that may be called (OpenAI spelling).
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

/// The shared tool rule: nothing when there are no tools or the choice is
/// "none"; the forced tool alone when one is forced; else the first tool
/// (and all of them for `[[sim:parallel]]`).
pub(crate) fn choose_tools(
    names: Vec<String>,
    none: bool,
    forced: Option<&str>,
) -> (Option<String>, Vec<String>) {
    if names.is_empty() || none {
        return (None, Vec::new());
    }
    match forced {
        Some(f) => (Some(f.to_owned()), vec![f.to_owned()]),
        None => (names.first().cloned(), names),
    }
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
}
