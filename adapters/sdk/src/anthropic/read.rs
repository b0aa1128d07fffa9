//! Anthropic bodies read typed into the canonical form, for translated
//! calls. A Messages request (an Anthropic client, a vendor of another
//! protocol), when it is a plain conversation: a model, turns of text (a string, or `text` blocks),
//! a system prompt of the same, the sampling members, `max_tokens`,
//! `stream` and `metadata.user_id`.
//!
//! Why: [`parse_request`](super::parse_request) reads a tree first (see
//! [`crate::typed`]), and building and dropping it was most of the
//! request's translation in the guest.
//!
//! [`read_request`] gives what `parse_request` gives, or `None` (the caller
//! then reads the tree): for tools, a tool choice, thinking, an output
//! format or stop sequences (any of them present and not `null`); for a
//! block that is not text, a role other than `user` or `assistant`; for a
//! member of another type than the usual one, which the tree reading
//! refuses with its own error or reads leniently (a `metadata` that is not
//! an object); and for whatever [`crate::typed::object`] leaves to the tree.
//!
//! [`read_response`] does the same for a `message` answer (an OpenAI client,
//! an Anthropic vendor), and gives `None` for an error in disguise (`type`
//! `error`), an answer without a `content` array, a block that is not an
//! object or has a member of another type than the usual one, a `usage`
//! that is not an object, and what `typed::object` leaves to the tree.

use serde::de::{Deserializer, IgnoredAny};
use serde::Deserialize;
use serde_json::Value;

use super::finish_reason_from;
use crate::canonical::{Block, Message, Request, Response, Role, Sampling, ToolCall, Usage};
use crate::typed::{self, Count, Str, Text, TextPart, Texts};

/// The request as [`parse_request`](super::parse_request) reads it, when
/// it is a plain conversation (the module doc).
pub fn read_request(body: &[u8]) -> Option<Request> {
    let r: MessagesIn<'_> = typed::object(body)?;
    let declined = r.tools.is_some()
        || r.tool_choice.is_some()
        || r.thinking.is_some()
        || r.output_format.is_some()
        || r.stop_sequences.is_some();
    if declined {
        return None;
    }
    let mut messages = Vec::with_capacity(r.messages.as_ref().map_or(0, Vec::len) + 1);
    if let Some(system) = r.system {
        messages.push(Message::new(Role::System, system.blocks()));
    }
    for m in r.messages.unwrap_or_default() {
        let role = match &*m.role? {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            _ => return None,
        };
        messages.push(Message::new(role, m.content.blocks()));
    }
    Some(Request {
        model: r.model.map(Str::into_owned).unwrap_or_default(),
        messages,
        sampling: Sampling {
            temperature: r.temperature,
            top_p: r.top_p,
            top_k: Count::strict(r.top_k)?,
            presence_penalty: None,
            frequency_penalty: None,
            seed: None,
            stop: Vec::new(),
        },
        max_tokens: Count::strict(r.max_tokens)?,
        tools: Vec::new(),
        tool_choice: None,
        parallel_tool_calls: None,
        response_format: None,
        reasoning: None,
        stream: r.stream.unwrap_or(false),
        // The Messages protocol always reports usage.
        stream_usage: true,
        user: r.metadata.and_then(|m| m.user_id).map(Str::into_owned),
    })
}

#[derive(Deserialize)]
struct MessagesIn<'a> {
    #[serde(default, borrow)]
    model: Text<'a>,
    #[serde(default, borrow)]
    messages: Option<Vec<TurnIn<'a>>>,
    #[serde(default, borrow)]
    system: Option<ContentIn<'a>>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(default)]
    top_k: Option<Count>,
    #[serde(default)]
    max_tokens: Option<Count>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default, borrow)]
    metadata: Option<MetadataIn<'a>>,
    // Members this reading leaves to the tree when present.
    #[serde(default)]
    tools: Option<IgnoredAny>,
    #[serde(default)]
    tool_choice: Option<IgnoredAny>,
    #[serde(default)]
    thinking: Option<IgnoredAny>,
    #[serde(default)]
    output_format: Option<IgnoredAny>,
    #[serde(default)]
    stop_sequences: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct TurnIn<'a> {
    #[serde(default, borrow)]
    role: Text<'a>,
    #[serde(borrow)]
    content: ContentIn<'a>,
}

#[derive(Deserialize)]
struct MetadataIn<'a> {
    #[serde(default, borrow)]
    user_id: Text<'a>,
}

/// A turn's content (or the system prompt): a string, or `text` blocks.
/// Any other block, or a block without a string `type`, fails the reading.
type ContentIn<'a> = Texts<'a, TextBlockIn<'a>>;

#[derive(Deserialize)]
struct TextBlockIn<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
    #[serde(default, borrow)]
    text: Text<'a>,
}

impl<'a> TextPart<'a> for TextBlockIn<'a> {
    fn into_text(self) -> Option<Str<'a>> {
        // A text block without a string `text` is empty text.
        (&*self.kind == "text").then(|| self.text.unwrap_or(Str("".into())))
    }
}

/// The answer as [`parse_response`](super::parse_response) reads it (the
/// module doc says when it gives `None`).
pub fn read_response(body: &[u8]) -> Option<Response> {
    let m: AnswerIn<'_> = typed::object(body)?;
    if m.kind.as_deref() == Some("error") {
        return None;
    }
    let mut content = Vec::with_capacity(m.content.len());
    for b in m.content {
        let text = |t: Text<'_>| t.map(Str::into_owned).unwrap_or_default();
        match b.kind.as_deref() {
            Some("text") => content.push(Block::Text(text(b.text))),
            Some("thinking") => content.push(Block::Thinking {
                text: text(b.thinking),
                signature: b.signature.filter(|s| !s.is_empty()).map(Str::into_owned),
            }),
            Some("redacted_thinking") => content.push(Block::RedactedThinking(text(b.data))),
            Some("tool_use") => content.push(Block::ToolCall(ToolCall {
                id: text(b.id),
                name: text(b.name),
                arguments: match b.input {
                    Member::Present(input) => input.to_string(),
                    Member::Absent => "{}".to_owned(),
                },
            })),
            // Server tool blocks and citations mean nothing to other protocols.
            _ => {}
        }
    }
    let stop_sequence = m.stop_sequence.as_deref();
    Some(Response {
        id: m.id.map(Str::into_owned),
        model: m.model.map(Str::into_owned),
        created: None,
        finish: m
            .stop_reason
            .as_deref()
            .map(|r| finish_reason_from(r, stop_sequence)),
        content,
        usage: m.usage.map(AnthropicUsageIn::canonical),
    })
}

#[derive(Deserialize)]
struct AnswerIn<'a> {
    #[serde(borrow)]
    content: Vec<AnswerBlockIn<'a>>,
    #[serde(default, rename = "type", borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    id: Text<'a>,
    #[serde(default, borrow)]
    model: Text<'a>,
    #[serde(default, borrow)]
    stop_reason: Text<'a>,
    #[serde(default, borrow)]
    stop_sequence: Text<'a>,
    #[serde(default)]
    usage: Option<AnthropicUsageIn>,
}

#[derive(Deserialize)]
struct AnswerBlockIn<'a> {
    #[serde(default, rename = "type", borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    text: Text<'a>,
    #[serde(default, borrow)]
    thinking: Text<'a>,
    #[serde(default, borrow)]
    signature: Text<'a>,
    #[serde(default, borrow)]
    data: Text<'a>,
    #[serde(default, borrow)]
    id: Text<'a>,
    #[serde(default, borrow)]
    name: Text<'a>,
    #[serde(default)]
    input: Member,
}

/// A member that may be missing, where `null` is a value (an `Option`
/// would read `null` as missing).
#[derive(Default)]
enum Member {
    #[default]
    Absent,
    Present(Value),
}

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Member::Present)
    }
}

#[derive(Deserialize)]
struct AnthropicUsageIn {
    #[serde(default)]
    input_tokens: Option<Count>,
    #[serde(default)]
    output_tokens: Option<Count>,
    #[serde(default)]
    cache_read_input_tokens: Option<Count>,
    #[serde(default)]
    cache_creation_input_tokens: Option<Count>,
}

impl AnthropicUsageIn {
    /// What [`parse_usage`](super::parse_usage) makes of the same object.
    fn canonical(self) -> Usage {
        let count = |c: Option<Count>| c.and_then(|c| c.0).unwrap_or(0);
        let read = count(self.cache_read_input_tokens);
        let write = count(self.cache_creation_input_tokens);
        Usage {
            input_tokens: count(self.input_tokens) + read + write,
            output_tokens: count(self.output_tokens),
            cache_read_tokens: read,
            cache_write_tokens: write,
            reasoning_tokens: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::parse_request;
    use serde_json::{json, Value};

    /// The typed reading against the tree reading, on one body.
    fn same(body: &Value) -> Option<Request> {
        crate::typed::against_tree(body, read_request, parse_request)
    }

    #[test]
    fn reads_plain_conversations_as_the_tree_does() {
        let bodies = [
            json!({"model": "claude", "max_tokens": 256,
                   "messages": [{"role": "user", "content": "hello \"you\"\n"}]}),
            json!({"model": "claude", "max_tokens": 16.0, "stream": true, "temperature": 1,
                   "top_p": 0.5, "top_k": 3, "metadata": {"user_id": "u-1"},
                   "system": "be brief", "service_tier": "auto",
                   "messages": [{"role": "user", "content": [
                                    {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
                                    {"type": "text"}]},
                                {"role": "assistant", "content": "b"},
                                {"role": "user", "content": []}]}),
            json!({"system": [{"type": "text", "text": "s1"}, {"type": "text", "text": "s2"}],
                   "messages": [], "tools": null, "thinking": null, "stop_sequences": null,
                   "metadata": {"user_id": null}}),
            json!({"model": null, "messages": null, "max_tokens": null, "stream": null,
                   "metadata": null, "system": []}),
            json!({}),
        ];
        for body in &bodies {
            assert!(same(body).is_some(), "not read typed: {body}");
        }
    }

    #[test]
    fn leaves_to_the_tree_what_it_would_not_read_the_same() {
        let turn = json!({"role": "user", "content": "x"});
        let bodies = [
            json!([turn]),
            json!({"messages": [turn], "tools": []}),
            json!({"messages": [turn], "tool_choice": {"type": "auto"}}),
            json!({"messages": [turn], "thinking": {"type": "enabled", "budget_tokens": 2048}}),
            json!({"messages": [turn], "output_format": {"type": "json_schema"}}),
            json!({"messages": [turn], "stop_sequences": ["END"]}),
            json!({"messages": [{"role": "system", "content": "x"}]}),
            json!({"messages": [{"content": "x"}]}),
            json!({"messages": [{"role": "user"}]}),
            json!({"messages": [{"role": "user", "content": null}]}),
            json!({"messages": [{"role": "user", "content": 5}]}),
            json!({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}),
            json!({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}),
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}),
            json!({"messages": [{"role": "user", "content": ["bare"]}]}),
            json!({"messages": {"role": "user"}}),
            json!({"messages": [turn], "max_tokens": "256"}),
            json!({"messages": [turn], "max_tokens": 1.5}),
            json!({"messages": [turn], "max_tokens": -1}),
            json!({"messages": [turn], "top_k": true}),
            json!({"messages": [turn], "temperature": "hot"}),
            json!({"messages": [turn], "stream": "yes"}),
            json!({"messages": [turn], "model": 4}),
            json!({"messages": [turn], "system": {"text": "x"}}),
            json!({"messages": [turn], "metadata": "u-1"}),
            json!({"messages": [turn], "metadata": {"user_id": 7}}),
        ];
        for body in &bodies {
            assert_eq!(same(body), None, "read typed: {body}");
        }
        let twice = br#"{"model": "a", "messages": [], "model": "b"}"#;
        assert_eq!(read_request(twice), None);
    }

    /// The typed reading against the tree reading, on one body.
    fn same_answer(body: &Value) -> Option<Response> {
        crate::typed::against_tree(body, read_response, crate::anthropic::parse_response)
    }

    #[test]
    fn reads_answers_as_the_tree_does() {
        let bodies = [
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                   "content": [{"type": "text", "text": "hi \"there\"\n", "citations": null}],
                   "stop_reason": "end_turn", "stop_sequence": null,
                   "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 10,
                             "cache_creation_input_tokens": 2, "service_tier": "standard"}}),
            json!({"content": [
                       {"type": "thinking", "thinking": "t", "signature": "s"},
                       {"type": "thinking", "thinking": "u", "signature": ""},
                       {"type": "redacted_thinking", "data": "opaque"},
                       {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"b": 1, "a": [2]}},
                       {"type": "tool_use", "id": "toolu_2", "name": "g"},
                       {"type": "tool_use", "id": "toolu_3", "name": "h", "input": null},
                       {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {"q": "x"}},
                       {"type": "web_search_tool_result", "tool_use_id": "srv", "content": []},
                       {"type": "text"}],
                   "stop_reason": "stop_sequence", "stop_sequence": "END", "usage": null}),
            json!({"content": [], "stop_reason": "pause_turn", "usage": {"output_tokens": 2.0, "input_tokens": "x"}}),
            json!({"content": [{"text": "no type"}], "type": null}),
        ];
        for body in &bodies {
            assert!(same_answer(body).is_some(), "not read typed: {body}");
        }
    }

    #[test]
    fn leaves_to_the_tree_answers_it_would_not_read_the_same() {
        let bodies = [
            json!([{"content": []}]),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
            json!({"type": "error", "content": []}),
            json!({"content": "text"}),
            json!({"id": "msg"}),
            json!({"content": ["bare"]}),
            json!({"content": [{"type": 5}]}),
            json!({"content": [{"type": "text", "text": ["parts"]}]}),
            json!({"content": [{"type": "tool_use", "name": {"n": 1}}]}),
            json!({"content": [], "usage": 5}),
            json!({"content": [], "usage": {"input_tokens": [1]}}),
            json!({"content": [], "stop_reason": 1}),
            json!({"content": [], "model": false}),
        ];
        for body in &bodies {
            assert_eq!(same_answer(body), None, "read typed: {body}");
        }
    }
}
