use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{DEFAULT_MAX_TOKENS, MIN_THINKING_BUDGET};
use crate::canonical::{
    Block, ImageSource, Message, Reasoning, Request, ResponseFormat, Role, Sampling, Tool,
    ToolCall, ToolChoice, ToolResult,
};
use crate::json::{arguments_object, as_count, str_member, Fields};
use crate::TranslateError;

type Result<T> = std::result::Result<T, TranslateError>;

/// Reads a Messages request body.
pub fn parse_request(body: &Value) -> Result<Request> {
    let fields = Fields::of(body)?;
    let mut messages = Vec::new();
    match fields.present("system") {
        None => {}
        Some(Value::String(s)) => messages.push(Message::text(Role::System, s.clone())),
        Some(Value::Array(blocks)) => {
            let content = blocks
                .iter()
                .map(|b| parse_block(b, Role::System))
                .collect::<Result<Vec<_>>>()?;
            messages.push(Message::new(Role::System, content));
        }
        Some(other) => return Err(Fields::wrong("system", "a string or an array", other)),
    }
    for (at, m) in fields.array("messages")?.iter().enumerate() {
        let mf = Fields::of(m)
            .map_err(|_| TranslateError::invalid(format!("`messages[{at}]` must be an object")))?;
        let role = match mf.string("role")?.as_deref() {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            other => {
                return Err(TranslateError::invalid(format!(
                    "`messages[{at}].role` must be user or assistant, not {other:?}"
                )))
            }
        };
        let content = match mf.present("content") {
            Some(Value::String(s)) => vec![Block::Text(s.clone())],
            Some(Value::Array(blocks)) => blocks
                .iter()
                .map(|b| parse_block(b, role))
                .collect::<Result<Vec<_>>>()?,
            _ => {
                return Err(TranslateError::invalid(format!(
                    "`messages[{at}].content` must be a string or an array"
                )))
            }
        };
        messages.push(Message::new(role, content));
    }
    let mut tool_choice = None;
    let mut parallel_tool_calls = None;
    if let Some(choice) = fields.present("tool_choice") {
        tool_choice = Some(match str_member(choice, "type") {
            Some("auto") => ToolChoice::Auto,
            Some("any") => ToolChoice::Required,
            Some("none") => ToolChoice::None,
            Some("tool") => ToolChoice::Function(
                str_member(choice, "name")
                    .ok_or_else(|| {
                        TranslateError::invalid("`tool_choice` of type tool needs `name`")
                    })?
                    .to_owned(),
            ),
            other => {
                return Err(TranslateError::invalid(format!(
                    "`tool_choice.type` {other:?} is unknown"
                )))
            }
        });
        if choice
            .get("disable_parallel_tool_use")
            .and_then(Value::as_bool)
            == Some(true)
        {
            parallel_tool_calls = Some(false);
        }
    }
    let reasoning = match fields.present("thinking") {
        None => None,
        Some(t) => Some(match str_member(t, "type") {
            Some("disabled") => Reasoning {
                enabled: Some(false),
                ..Reasoning::default()
            },
            Some("enabled") | Some("adaptive") => Reasoning {
                enabled: Some(true),
                budget_tokens: t.get("budget_tokens").and_then(as_count),
                ..Reasoning::default()
            },
            other => {
                return Err(TranslateError::invalid(format!(
                    "`thinking.type` {other:?} is unknown"
                )))
            }
        }),
    };
    let response_format = fields.present("output_format").and_then(|f| {
        (str_member(f, "type") == Some("json_schema")).then(|| ResponseFormat::JsonSchema {
            name: "output".to_owned(),
            schema: f.get("schema").cloned(),
            strict: Some(true),
        })
    });
    Ok(Request {
        model: fields.string("model")?.unwrap_or_default(),
        messages,
        sampling: Sampling {
            temperature: fields.number("temperature")?,
            top_p: fields.number("top_p")?,
            top_k: fields.count("top_k")?,
            presence_penalty: None,
            frequency_penalty: None,
            seed: None,
            stop: fields.strings("stop_sequences")?,
        },
        max_tokens: fields.count("max_tokens")?,
        tools: fields
            .array("tools")?
            .iter()
            .map(parse_tool)
            .collect::<Result<_>>()?,
        tool_choice,
        parallel_tool_calls,
        response_format,
        reasoning,
        stream: fields.boolean("stream")?.unwrap_or(false),
        // The Messages protocol always reports usage.
        stream_usage: true,
        user: fields
            .present("metadata")
            .and_then(|m| str_member(m, "user_id"))
            .map(str::to_owned),
    })
}

fn parse_tool(tool: &Value) -> Result<Tool> {
    if let Some(kind) = str_member(tool, "type").filter(|k| *k != "custom") {
        return Err(TranslateError::unsupported(format!(
            "server tools (`{kind}`) are only served by an Anthropic vendor"
        )));
    }
    Ok(Tool {
        name: str_member(tool, "name")
            .ok_or_else(|| TranslateError::invalid("a tool needs a `name`"))?
            .to_owned(),
        description: str_member(tool, "description").map(str::to_owned),
        parameters: tool.get("input_schema").filter(|s| !s.is_null()).cloned(),
        strict: tool.get("strict").and_then(Value::as_bool),
    })
}

fn parse_image(block: &Value) -> Result<ImageSource> {
    let source = block.get("source").unwrap_or(&Value::Null);
    match str_member(source, "type") {
        Some("base64") => Ok(ImageSource::Base64 {
            media_type: str_member(source, "media_type")
                .unwrap_or("image/png")
                .to_owned(),
            data: str_member(source, "data").unwrap_or_default().to_owned(),
        }),
        Some("url") => Ok(ImageSource::Url(
            str_member(source, "url").unwrap_or_default().to_owned(),
        )),
        other => Err(TranslateError::unsupported(format!(
            "image sources of type {other:?} are not supported"
        ))),
    }
}

fn parse_block(block: &Value, role: Role) -> Result<Block> {
    let kind = str_member(block, "type").unwrap_or("");
    Ok(match kind {
        "text" => Block::Text(str_member(block, "text").unwrap_or_default().to_owned()),
        "image" => Block::Image(parse_image(block)?),
        "thinking" if role == Role::Assistant => Block::Thinking {
            text: str_member(block, "thinking").unwrap_or_default().to_owned(),
            signature: str_member(block, "signature")
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        },
        "redacted_thinking" if role == Role::Assistant => {
            Block::RedactedThinking(str_member(block, "data").unwrap_or_default().to_owned())
        }
        "tool_use" if role == Role::Assistant => Block::ToolCall(ToolCall {
            id: str_member(block, "id").unwrap_or_default().to_owned(),
            name: str_member(block, "name").unwrap_or_default().to_owned(),
            arguments: block
                .get("input")
                .map(Value::to_string)
                .unwrap_or_else(|| "{}".to_owned()),
        }),
        "tool_result" if role == Role::User => Block::ToolResult(ToolResult {
            call_id: str_member(block, "tool_use_id")
                .unwrap_or_default()
                .to_owned(),
            name: None,
            content: match block.get("content") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::String(s)) => vec![Block::Text(s.clone())],
                Some(Value::Array(parts)) => parts
                    .iter()
                    .map(|p| parse_block(p, Role::User))
                    .collect::<Result<_>>()?,
                Some(other) => {
                    return Err(Fields::wrong(
                        "tool_result.content",
                        "a string or an array",
                        other,
                    ))
                }
            },
            is_error: block.get("is_error").and_then(Value::as_bool) == Some(true),
        }),
        other => {
            return Err(TranslateError::unsupported(format!(
                "content blocks of type `{other}` are not supported in {} turns here",
                match role {
                    Role::Assistant => "assistant",
                    Role::System => "system",
                    _ => "user",
                }
            )))
        }
    })
}

/// Writes a Messages request body for an Anthropic vendor.
///
/// - System turns become the top-level `system`.
/// - Tool results become `tool_result` blocks at the start of the user turn
///   that follows the call; consecutive turns of one role are merged, as the
///   protocol alternates user and assistant.
/// - Thinking without a signature is dropped (the vendor would refuse it).
/// - `max_tokens` is required: `default_max_tokens` when the client gave none.
/// - Thinking: off → `{"type":"disabled"}`; on → `{"type":"enabled"}` with
///   the client's budget or one for its effort (at least 1024, and below
///   `max_tokens`, which is raised when it is not above the budget).
pub fn encode_request(request: &Request, default_max_tokens: Option<u64>) -> Value {
    serde_json::to_value(request_out(request, default_max_tokens)).unwrap_or_default()
}

/// [`encode_request`]'s body as JSON text, written without building the
/// tree first (the same text `json::to_bytes` makes of the tree): what a
/// translated request sends.
pub fn write_request(request: &Request, default_max_tokens: Option<u64>) -> Vec<u8> {
    // Serialising these types cannot fail (every key is a string).
    serde_json::to_vec(&request_out(request, default_max_tokens)).unwrap_or_default()
}

/// A Messages request body, members by name (as a `Value` keeps them); a
/// member that is `None` (or empty) is not written.
#[derive(Serialize)]
struct RequestOut<'a> {
    max_tokens: u64,
    messages: Vec<TurnOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<MetadataOut<'a>>,
    model: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<ThinkingOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
}

#[derive(Serialize)]
struct MetadataOut<'a> {
    user_id: &'a str,
}

#[derive(Serialize)]
struct TurnOut<'a> {
    content: Vec<BlockOut<'a>>,
    role: &'static str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ThinkingOut {
    Disabled {
        #[serde(rename = "type")]
        kind: &'static str,
    },
    Enabled {
        budget_tokens: u64,
        #[serde(rename = "type")]
        kind: &'static str,
    },
}

/// One content block of a turn or of an answer, members by name.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum BlockOut<'a> {
    Text {
        text: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    Image {
        source: SourceOut<'a>,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    Thinking {
        signature: &'a str,
        thinking: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    Redacted {
        data: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    ToolUse {
        id: &'a str,
        input: Value,
        name: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    ToolResult {
        content: Vec<BlockOut<'a>>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        tool_use_id: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum SourceOut<'a> {
    Base64 {
        data: &'a str,
        media_type: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    Url {
        #[serde(rename = "type")]
        kind: &'static str,
        url: &'a str,
    },
}

fn request_out(request: &Request, default_max_tokens: Option<u64>) -> RequestOut<'_> {
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let mut messages: Vec<TurnOut<'_>> = Vec::new();
    for m in request.messages.iter().filter(|m| m.role != Role::System) {
        let role = if m.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        let blocks: Vec<BlockOut<'_>> = m.content.iter().filter_map(block_out).collect();
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some(turn) if turn.role == role => turn.content.extend(blocks),
            _ => messages.push(TurnOut {
                content: blocks,
                role,
            }),
        }
    }
    for turn in &mut messages {
        // Tool results first in their turn, as the protocol requires.
        turn.content
            .sort_by_key(|b| !matches!(b, BlockOut::ToolResult { .. }));
    }
    let mut max_tokens = request
        .max_tokens
        .or(default_max_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let mut thinking = None;
    if let Some(r) = &request.reasoning {
        if r.enabled == Some(false) {
            thinking = Some(ThinkingOut::Disabled { kind: "disabled" });
        } else if r.wanted() {
            let budget = r.budget_or(2048).max(MIN_THINKING_BUDGET);
            if max_tokens <= budget {
                max_tokens += budget;
            }
            thinking = Some(ThinkingOut::Enabled {
                budget_tokens: budget,
                kind: "enabled",
            });
        }
    }
    let s = &request.sampling;
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| {
            let mut tool = Map::new();
            tool.insert("name".into(), json!(t.name));
            if let Some(d) = &t.description {
                tool.insert("description".into(), json!(d));
            }
            tool.insert(
                "input_schema".into(),
                t.parameters
                    .clone()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            );
            Value::Object(tool)
        })
        .collect();
    let mut choice = match &request.tool_choice {
        None => None,
        Some(ToolChoice::Auto) => Some(json!({"type": "auto"})),
        Some(ToolChoice::None) => Some(json!({"type": "none"})),
        Some(ToolChoice::Required) => Some(json!({"type": "any"})),
        Some(ToolChoice::Function(name)) => Some(json!({"type": "tool", "name": name})),
    };
    if request.parallel_tool_calls == Some(false) && !request.tools.is_empty() {
        let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
        if c["type"] != "none" {
            c["disable_parallel_tool_use"] = json!(true);
        }
    }
    RequestOut {
        max_tokens,
        messages,
        metadata: request
            .user
            .as_deref()
            .map(|user_id| MetadataOut { user_id }),
        model: &request.model,
        stop_sequences: &s.stop,
        stream: request.stream.then_some(true),
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        temperature: s.temperature,
        thinking,
        tool_choice: choice,
        tools,
        top_k: s.top_k,
        top_p: s.top_p,
    }
}

fn image_out(i: &ImageSource) -> BlockOut<'_> {
    BlockOut::Image {
        source: match i {
            ImageSource::Base64 { media_type, data } => SourceOut::Base64 {
                data,
                media_type,
                kind: "base64",
            },
            ImageSource::Url(url) => SourceOut::Url { kind: "url", url },
        },
        kind: "image",
    }
}

fn block_out(b: &Block) -> Option<BlockOut<'_>> {
    Some(match b {
        Block::Text(t) if t.is_empty() => return None,
        Block::Text(text) => BlockOut::Text { text, kind: "text" },
        Block::Image(i) => image_out(i),
        Block::Thinking {
            text,
            signature: Some(sig),
        } => BlockOut::Thinking {
            signature: sig,
            thinking: text,
            kind: "thinking",
        },
        Block::Thinking {
            signature: None, ..
        } => return None,
        Block::RedactedThinking(data) => BlockOut::Redacted {
            data,
            kind: "redacted_thinking",
        },
        Block::ToolCall(c) => BlockOut::ToolUse {
            id: &c.id,
            input: arguments_object(&c.arguments),
            name: &c.name,
            kind: "tool_use",
        },
        Block::ToolResult(r) => BlockOut::ToolResult {
            content: r
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::Text(text) => Some(BlockOut::Text { text, kind: "text" }),
                    Block::Image(i) => Some(image_out(i)),
                    _ => None,
                })
                .collect(),
            is_error: r.is_error,
            tool_use_id: &r.call_id,
            kind: "tool_result",
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_system_blocks_tools_and_thinking() {
        let r = parse_request(&json!({
            "model": "claude", "max_tokens": 100, "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
            "thinking": {"type": "enabled", "budget_tokens": 2000},
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "t", "signature": "c2ln"},
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r", "is_error": true}]}
            ]}))
        .unwrap();
        assert_eq!(r.messages[0], Message::text(Role::System, "S"));
        assert_eq!(r.max_tokens, Some(100));
        assert_eq!(r.tool_choice, Some(ToolChoice::Required));
        assert_eq!(r.parallel_tool_calls, Some(false));
        assert_eq!(r.reasoning.as_ref().unwrap().budget_tokens, Some(2000));
        assert_eq!(
            r.messages[2].content[0],
            Block::Thinking {
                text: "t".into(),
                signature: Some("c2ln".into())
            }
        );
        let Block::ToolResult(res) = &r.messages[3].content[0] else {
            panic!()
        };
        assert!(res.is_error);
        assert_eq!(res.text(), "r");
    }

    #[test]
    fn writes_alternating_turns_with_results_first() {
        let req = Request {
            reasoning: Some(Reasoning {
                effort: Some("low".into()),
                ..Reasoning::default()
            }),
            max_tokens: Some(100),
            ..Request::new(
                "claude",
                vec![
                    Message::text(Role::System, "S"),
                    Message::text(Role::User, "hi"),
                    Message::new(
                        Role::Assistant,
                        vec![
                            Block::Thinking {
                                text: "unsigned".into(),
                                signature: None,
                            },
                            Block::ToolCall(ToolCall {
                                id: "a".into(),
                                name: "f".into(),
                                arguments: "{\"x\":1}".into(),
                            }),
                            Block::ToolCall(ToolCall {
                                id: "b".into(),
                                name: "g".into(),
                                arguments: "".into(),
                            }),
                        ],
                    ),
                    Message::new(
                        Role::Tool,
                        vec![Block::ToolResult(ToolResult {
                            call_id: "a".into(),
                            content: vec![Block::Text("1".into())],
                            ..ToolResult::default()
                        })],
                    ),
                    Message::new(
                        Role::Tool,
                        vec![Block::ToolResult(ToolResult {
                            call_id: "b".into(),
                            content: vec![Block::Text("2".into())],
                            ..ToolResult::default()
                        })],
                    ),
                ],
            )
        };
        let out = encode_request(&req, None);
        assert_eq!(out["system"], "S");
        // Budget for "low" is 2048, above the client's 100: max_tokens is raised.
        assert_eq!(
            out["thinking"],
            json!({"type": "enabled", "budget_tokens": 2048})
        );
        assert_eq!(out["max_tokens"], 2148);
        let m = out["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[1]["content"].as_array().unwrap().len(),
            2,
            "unsigned thinking dropped"
        );
        assert_eq!(m[1]["content"][0]["input"], json!({"x": 1}));
        assert_eq!(m[1]["content"][1]["input"], json!({}));
        assert_eq!(m[2]["role"], "user");
        assert_eq!(m[2]["content"][1]["tool_use_id"], "b");
    }

    #[test]
    fn server_tools_and_odd_blocks_are_unsupported() {
        assert!(matches!(
            parse_request(
                &json!({"messages": [], "tools": [{"type": "web_search_20250305", "name": "web_search"}]})
            ),
            Err(TranslateError::Unsupported(_))
        ));
        assert!(matches!(
            parse_request(
                &json!({"messages": [{"role": "user", "content": [{"type": "document"}]}]})
            ),
            Err(TranslateError::Unsupported(_))
        ));
    }

    #[test]
    fn every_member_written_and_the_text_is_the_trees() {
        let result = |id: &str, text: &str, is_error: bool| {
            Block::ToolResult(ToolResult {
                call_id: id.into(),
                name: None,
                content: vec![
                    Block::Text(text.into()),
                    Block::Image(ImageSource::Url("https://i/x.png".into())),
                ],
                is_error,
            })
        };
        let full = Request {
            messages: vec![
                Message::text(Role::System, "be brief"),
                Message::text(Role::System, "and kind"),
                Message::new(
                    Role::User,
                    vec![
                        Block::Text("look \"here\"\n".into()),
                        Block::Text(String::new()),
                        Block::Image(ImageSource::Base64 {
                            media_type: "image/png".into(),
                            data: "AA".into(),
                        }),
                    ],
                ),
                Message::new(
                    Role::Assistant,
                    vec![
                        Block::Thinking {
                            text: "signed".into(),
                            signature: Some("sig".into()),
                        },
                        Block::Thinking {
                            text: "unsigned".into(),
                            signature: None,
                        },
                        Block::RedactedThinking("opaque".into()),
                        Block::ToolCall(ToolCall {
                            id: "toolu_1".into(),
                            name: "f".into(),
                            arguments: "{\"b\":1,\"a\":2}".into(),
                        }),
                    ],
                ),
                Message::new(Role::Tool, vec![result("toolu_1", "42", false)]),
                Message::new(
                    Role::User,
                    vec![Block::Text("and?".into()), result("toolu_2", "boom", true)],
                ),
            ],
            sampling: Sampling {
                temperature: Some(0.5),
                top_p: Some(0.9),
                top_k: Some(3),
                stop: vec!["END".into()],
                ..Sampling::default()
            },
            max_tokens: Some(100),
            tools: vec![Tool {
                name: "f".into(),
                description: Some("find".into()),
                parameters: None,
                strict: None,
            }],
            tool_choice: Some(ToolChoice::Required),
            parallel_tool_calls: Some(false),
            reasoning: Some(Reasoning {
                enabled: Some(true),
                budget_tokens: Some(2000),
                ..Reasoning::default()
            }),
            stream: true,
            user: Some("u-1".into()),
            ..Request::new("claude", vec![])
        };
        let tree = encode_request(&full, None);
        let image = json!({"type": "image", "source": {"type": "url", "url": "https://i/x.png"}});
        assert_eq!(
            tree,
            json!({
                "model": "claude",
                "system": "be brief\n\nand kind",
                "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "look \"here\"\n"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "signed", "signature": "sig"},
                        {"type": "redacted_thinking", "data": "opaque"},
                        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 2, "b": 1}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1",
                         "content": [{"type": "text", "text": "42"}, image]},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                         "content": [{"type": "text", "text": "boom"}, image]},
                        {"type": "text", "text": "and?"}]}
                ],
                "max_tokens": 2100,
                "thinking": {"type": "enabled", "budget_tokens": 2000},
                "temperature": 0.5, "top_p": 0.9, "top_k": 3, "stop_sequences": ["END"],
                "tools": [{"name": "f", "description": "find",
                           "input_schema": {"type": "object", "properties": {}}}],
                "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
                "metadata": {"user_id": "u-1"},
                "stream": true
            })
        );
        let off = Request {
            reasoning: Some(Reasoning {
                enabled: Some(false),
                ..Reasoning::default()
            }),
            ..Request::new("claude", vec![Message::text(Role::User, "hi")])
        };
        assert_eq!(
            encode_request(&off, Some(64)),
            json!({"model": "claude", "max_tokens": 64, "thinking": {"type": "disabled"},
                   "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})
        );
        for (req, default) in [(&full, None), (&off, Some(64)), (&off, None)] {
            assert_eq!(
                write_request(req, default),
                crate::json::to_bytes(&encode_request(req, default))
            );
        }
    }
}
