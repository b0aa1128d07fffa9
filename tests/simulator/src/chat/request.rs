//! The protocol-neutral facts a simulated answer depends on
//! ([`ChatRequest`]), and the conversation arithmetic every protocol shares.
//!
//! Each protocol's module reads its own body into a list of [`Turn`]s plus
//! the few options the plan needs (model, budget, thinking switches, tools,
//! stop sequences); [`ChatRequest::from_turns`] then applies the shared
//! rules, so one token, cache or "last message" rule cannot drift between
//! protocols. Unknown fields are ignored, as a vendor would.

use serde_json::Value;

use crate::faults::{extract_directives, Directives};
use crate::tokens::count_words;

/// Who speaks in a turn, as far as the rules care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// OpenAI `system` messages, Anthropic `system`, Gemini
    /// `systemInstruction`.
    System,
    /// The end user (OpenAI `user`, Anthropic `user`, Gemini `user`).
    User,
    /// The model, and any other role the rules do not single out.
    Assistant,
    /// An OpenAI `tool` message (the other protocols put tool results in
    /// user turns).
    Tool,
}

/// One turn of the conversation, reduced to what the rules read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    pub role: Role,
    /// Its text blocks / parts joined by single spaces (thinking and
    /// tool-call arguments are not text).
    pub text: String,
    /// The text of each tool result the turn carries, in order.
    pub tool_results: Vec<String>,
}

impl Turn {
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            text: text.into(),
            tool_results: Vec::new(),
        }
    }

    /// Words of its text plus its tool results' text.
    pub fn words(&self) -> u64 {
        count_words(&self.text)
            + self
                .tool_results
                .iter()
                .map(|t| count_words(t))
                .sum::<u64>()
    }

    /// Its prompt tokens: words + 1 (the +1 stands in for the per-message
    /// framing tokens real tokenizers add).
    pub fn tokens(&self) -> u64 {
        self.words() + 1
    }

    /// A user turn that only carries tool results is the tools speaking,
    /// not the user.
    fn is_users_message(&self) -> bool {
        self.role == Role::User && (self.tool_results.is_empty() || !self.text.trim().is_empty())
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    /// As sent (in the body, or in the Gemini URL).
    pub model: String,
    pub stream: bool,
    /// A stream reports the usage: OpenAI only with
    /// `stream_options.include_usage`, the other protocols always.
    pub include_usage: bool,
    /// The output budget, when the request sets one.
    pub max_tokens: Option<u64>,
    /// Thinking is explicitly switched off (in the protocol's spelling).
    pub thinking_disabled: bool,
    /// The request asks for thinking explicitly (in its protocol's spelling).
    pub thinking_enabled: bool,
    /// Name of the function to call, when the request asks for tool use.
    pub tool_name: Option<String>,
    /// The tools that may be called, in declaration order (for
    /// `[[sim:parallel]]`): only the forced one when the choice forces one,
    /// none when it forbids them.
    pub tools: Vec<String>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Σ over turns of [`Turn::tokens`].
    pub prompt_tokens: u64,
    /// The system turns' tokens.
    pub cached_tokens: u64,
    /// Prompt tokens written to the cache (reported by Anthropic only).
    pub cache_write_tokens: u64,
    /// Text of the last user message with the directives removed.
    pub last_user: String,
    /// The text of the last tool result, when the conversation ends with one.
    pub last_tool_result: Option<String>,
    pub directives: Directives,
}

impl ChatRequest {
    /// The facts that follow from the conversation alone; the protocol's
    /// reader sets the rest.
    pub fn from_turns(model: impl Into<String>, turns: &[Turn]) -> Self {
        let prompt_tokens = turns.iter().map(Turn::tokens).sum();
        let cached_tokens = turns
            .iter()
            .filter(|t| t.role == Role::System)
            .map(Turn::tokens)
            .sum();
        let last_user_raw = turns
            .iter()
            .rev()
            .find(|t| t.is_users_message())
            .map(|t| t.text.as_str())
            .unwrap_or("");
        let (last_user, directives) = extract_directives(last_user_raw);
        let last_tool_result = turns.last().and_then(|t| t.tool_results.last().cloned());
        Self {
            model: model.into(),
            prompt_tokens,
            cached_tokens,
            last_user,
            last_tool_result,
            directives,
            ..Self::default()
        }
    }

    pub fn is_reasoning_model(&self) -> bool {
        self.model.to_ascii_lowercase().contains("reason")
    }

    /// Reasoning models and explicit requests think, unless thinking is
    /// explicitly switched off.
    pub fn thinks(&self) -> bool {
        (self.is_reasoning_model() || self.thinking_enabled) && !self.thinking_disabled
    }
}

/// The words of the first user turn (Anthropic's cache write).
pub fn first_user_words(turns: &[Turn]) -> u64 {
    turns
        .iter()
        .find(|t| t.role == Role::User)
        .map_or(0, Turn::words)
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

/// Strings, in order, of a JSON array; empty for anything else.
pub(crate) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Compact JSON with every object's keys in sorted order, whatever
/// serde_json's features: a text the gateway's tests can rebuild exactly.
pub(crate) fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn turn(role: Role, text: &str, results: &[&str]) -> Turn {
        Turn {
            role,
            text: text.into(),
            tool_results: results.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn tokens_cache_and_the_last_messages() {
        let turns = [
            turn(Role::System, "be brief", &[]),
            turn(Role::User, "one two three [[sim:parallel]]", &[]),
            turn(Role::Assistant, "", &[]),
            turn(Role::User, "", &["r s", "t"]),
        ];
        let r = ChatRequest::from_turns("m", &turns);
        // (2+1) + (4+1) + (0+1) + (3+1): directives count as sent.
        assert_eq!(r.prompt_tokens, 3 + 5 + 1 + 4);
        assert_eq!(r.cached_tokens, 3);
        // A tool-results-only user turn is not the user's message.
        assert_eq!(r.last_user, "one two three");
        assert!(r.directives.parallel);
        assert_eq!(r.last_tool_result.as_deref(), Some("t"));
        assert_eq!(first_user_words(&turns), 4);
    }

    #[test]
    fn a_tool_result_only_counts_when_it_ends_the_conversation() {
        let turns = [
            turn(Role::Tool, "", &["done"]),
            turn(Role::User, "thanks", &[]),
        ];
        let r = ChatRequest::from_turns("m", &turns);
        assert_eq!(r.last_tool_result, None);
        assert_eq!(r.last_user, "thanks");
        assert_eq!(first_user_words(&[]), 0);
    }

    #[test]
    fn thinking_switches_combine() {
        let mut r = ChatRequest::from_turns("Sim-REASONER", &[]);
        assert!(r.thinks());
        r.thinking_disabled = true;
        assert!(!r.thinks());
        let mut r = ChatRequest::from_turns("sim-chat", &[]);
        assert!(!r.thinks());
        r.thinking_enabled = true;
        assert!(r.thinks());
        r.thinking_disabled = true;
        assert!(!r.thinks(), "off wins over on");
    }

    #[test]
    fn tool_choice_rule() {
        let names = || vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            choose_tools(names(), false, None),
            (Some("a".into()), names())
        );
        assert_eq!(choose_tools(names(), true, None), (None, vec![]));
        assert_eq!(choose_tools(vec![], false, None), (None, vec![]));
        assert_eq!(
            choose_tools(names(), false, Some("b")),
            (Some("b".into()), vec!["b".into()])
        );
    }

    #[test]
    fn canonical_json_sorts_keys_and_has_no_spaces() {
        let v = json!({"z": [1, {"b": "x y", "a": null}], "a": true});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":true,"z":[1,{"a":null,"b":"x y"}]}"#
        );
        assert_eq!(canonical_json(&json!("q\"")), r#""q\"""#);
    }
}
