use serde::Serialize;
use serde_json::{json, Map, Value};

use super::names::role_from;
use crate::canonical::{
    Block, ImageSource, Message, Reasoning, Request, ResponseFormat, Role, Sampling, Tool,
    ToolCall, ToolChoice, ToolResult,
};
use crate::json::{as_count, Fields};
use crate::TranslateError;

type Result<T> = std::result::Result<T, TranslateError>;

/// Reads a chat-completions request body.
pub fn parse_request(body: &Value) -> Result<Request> {
    let fields = Fields::of(body)?;
    if fields.count("n")?.is_some_and(|n| n > 1) {
        return Err(TranslateError::unsupported(
            "`n` > 1 is only served when the vendor speaks OpenAI chat",
        ));
    }
    let messages = match fields.present("messages") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(at, item)| parse_message(at, item))
            .collect::<Result<Vec<_>>>()?,
        _ => return Err(TranslateError::invalid("`messages` must be an array")),
    };
    let stream_usage = fields
        .present("stream_options")
        .and_then(|options| options.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(Request {
        model: fields.string("model")?.unwrap_or_default(),
        messages,
        sampling: Sampling {
            temperature: fields.number("temperature")?,
            top_p: fields.number("top_p")?,
            top_k: fields.count("top_k")?,
            presence_penalty: fields.number("presence_penalty")?,
            frequency_penalty: fields.number("frequency_penalty")?,
            seed: fields.integer("seed")?,
            stop: fields.strings("stop")?,
        },
        // `max_completion_tokens` is OpenAI's newer name; it wins when both are sent.
        max_tokens: match fields.count("max_completion_tokens")? {
            Some(n) => Some(n),
            None => fields.count("max_tokens")?,
        },
        tools: parse_tools(&fields)?,
        tool_choice: parse_tool_choice(fields.present("tool_choice"))?,
        parallel_tool_calls: fields.boolean("parallel_tool_calls")?,
        response_format: parse_response_format(fields.present("response_format"))?,
        reasoning: parse_reasoning(&fields)?,
        stream: fields.boolean("stream")?.unwrap_or(false),
        stream_usage,
        user: fields.string("user")?,
    })
}

fn parse_message(at: usize, item: &Value) -> Result<Message> {
    let object = item
        .as_object()
        .ok_or_else(|| TranslateError::invalid(format!("`messages[{at}]` must be an object")))?;
    let fields = Fields(object);
    let role_text = fields
        .string("role")?
        .ok_or_else(|| TranslateError::invalid(format!("`messages[{at}].role` is missing")))?;
    let role = role_from(&role_text).ok_or_else(|| {
        TranslateError::invalid(format!("`messages[{at}].role` `{role_text}` is unknown"))
    })?;
    let content = parse_content(at, fields.present("content"))?;
    if role == Role::Tool {
        // `function` (the old name) identified the call by the function's name.
        let call_id = match fields.string("tool_call_id")? {
            Some(id) => id,
            None => fields.string("name")?.unwrap_or_default(),
        };
        return Ok(Message::new(
            Role::Tool,
            vec![Block::ToolResult(ToolResult {
                call_id,
                name: fields.string("name")?,
                content,
                is_error: false,
            })],
        ));
    }
    let mut blocks = Vec::new();
    // DeepSeek and Qwen say `reasoning_content`, some routers `reasoning`.
    let reasoning = match fields.string("reasoning_content")? {
        Some(r) => Some(r),
        None => fields
            .present("reasoning")
            .and_then(Value::as_str)
            .map(str::to_owned),
    };
    if let Some(text) = reasoning.filter(|r| !r.is_empty()) {
        blocks.push(Block::Thinking {
            text,
            signature: None,
        });
    }
    blocks.extend(content);
    if let Some(refusal) = fields.string("refusal")? {
        blocks.push(Block::Text(refusal));
    }
    for call in fields.array("tool_calls")? {
        blocks.push(Block::ToolCall(parse_tool_call(call)?));
    }
    Ok(Message::new(role, blocks))
}

fn parse_content(at: usize, content: Option<&Value>) -> Result<Vec<Block>> {
    match content {
        None => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![Block::Text(text.clone())]),
        Some(Value::Array(parts)) => parts.iter().map(parse_part).collect(),
        Some(other) => Err(Fields::wrong(
            &format!("messages[{at}].content"),
            "a string or an array",
            other,
        )),
    }
}

fn parse_part(part: &Value) -> Result<Block> {
    let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => part
            .get("text")
            .and_then(Value::as_str)
            .map(|text| Block::Text(text.to_owned()))
            .ok_or_else(|| TranslateError::invalid("a text part needs a string `text`")),
        "image_url" => {
            let image = part.get("image_url");
            // Some clients send the URL directly instead of `{url, detail}`.
            let url = image
                .and_then(|i| i.get("url"))
                .or(image)
                .and_then(Value::as_str)
                .ok_or_else(|| TranslateError::invalid("an image_url part needs a `url`"))?;
            Ok(Block::Image(ImageSource::from_url(url)))
        }
        other => Err(TranslateError::unsupported(format!(
            "content parts of type `{other}` are not supported"
        ))),
    }
}

fn parse_tool_call(call: &Value) -> Result<ToolCall> {
    let function = call.get("function").unwrap_or(&Value::Null);
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| TranslateError::invalid("a tool call needs `function.name`"))?;
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        // Some clients send the arguments as an object; the canonical form is text.
        Some(other) => other.to_string(),
    };
    Ok(ToolCall {
        id: call
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        name: name.to_owned(),
        arguments,
    })
}

fn parse_tools(fields: &Fields<'_>) -> Result<Vec<Tool>> {
    fields
        .array("tools")?
        .iter()
        .map(|tool| {
            let kind = tool
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("function");
            if kind != "function" {
                return Err(TranslateError::unsupported(format!(
                    "tools of type `{kind}` are not supported"
                )));
            }
            let function = tool.get("function").unwrap_or(&Value::Null);
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| TranslateError::invalid("a tool needs `function.name`"))?;
            Ok(Tool {
                name: name.to_owned(),
                description: function
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                parameters: function.get("parameters").filter(|p| !p.is_null()).cloned(),
                strict: function.get("strict").and_then(Value::as_bool),
            })
        })
        .collect()
}

fn parse_tool_choice(choice: Option<&Value>) -> Result<Option<ToolChoice>> {
    match choice {
        None => Ok(None),
        Some(Value::String(mode)) => match mode.as_str() {
            "auto" => Ok(Some(ToolChoice::Auto)),
            "none" => Ok(Some(ToolChoice::None)),
            "required" => Ok(Some(ToolChoice::Required)),
            other => Err(TranslateError::invalid(format!(
                "`tool_choice` `{other}` is unknown"
            ))),
        },
        Some(object) => object
            .get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .map(|name| Some(ToolChoice::Function(name.to_owned())))
            .ok_or_else(|| TranslateError::invalid("`tool_choice` needs `function.name`")),
    }
}

fn parse_response_format(format: Option<&Value>) -> Result<Option<ResponseFormat>> {
    let Some(format) = format else {
        return Ok(None);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(Some(ResponseFormat::Text)),
        Some("json_object") => Ok(Some(ResponseFormat::JsonObject)),
        Some("json_schema") => {
            let schema = format.get("json_schema").unwrap_or(&Value::Null);
            Ok(Some(ResponseFormat::JsonSchema {
                name: schema
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("response")
                    .to_owned(),
                schema: schema.get("schema").filter(|s| !s.is_null()).cloned(),
                strict: schema.get("strict").and_then(Value::as_bool),
            }))
        }
        _ => Err(TranslateError::unsupported(
            "`response_format` must have type text, json_object or json_schema",
        )),
    }
}

/// Collapses `enable_thinking`, `thinking` and `reasoning_effort` (spec §4.3:
/// each can switch thinking off) into one record.
fn parse_reasoning(fields: &Fields<'_>) -> Result<Option<Reasoning>> {
    let mut reasoning = Reasoning::default();
    let mut seen = false;
    if let Some(enabled) = fields.boolean("enable_thinking")? {
        reasoning.enabled = Some(enabled);
        seen = true;
    }
    if let Some(thinking) = fields.present("thinking") {
        match thinking.get("type").and_then(Value::as_str) {
            Some("disabled") => reasoning.enabled = Some(false),
            Some("enabled") => reasoning.enabled = Some(true),
            _ => {}
        }
        reasoning.budget_tokens = thinking.get("budget_tokens").and_then(as_count);
        seen = true;
    }
    if let Some(effort) = fields.string("reasoning_effort")? {
        if effort == "none" {
            reasoning.enabled = Some(false);
        } else {
            reasoning.effort = Some(effort);
        }
        seen = true;
    }
    Ok(seen.then_some(reasoning))
}

/// Writes a chat-completions request body for an OpenAI-compatible vendor.
///
/// Thinking from earlier turns is not sent back: the protocol has no field
/// for it (some vendors refuse `reasoning_content` in input). A request to
/// switch thinking off is written `reasoning_effort: "none"`; an effort or
/// budget as `reasoning_effort`.
pub fn encode_request(request: &Request) -> Value {
    serde_json::to_value(request_out(request)).unwrap_or_default()
}

/// [`encode_request`]'s body as JSON text, written without building the
/// tree first (the same text `json::to_bytes` makes of the tree): what a
/// translated request sends.
pub fn write_request(request: &Request) -> Vec<u8> {
    // Serialising these types cannot fail (every key is a string).
    serde_json::to_vec(&request_out(request)).unwrap_or_default()
}

/// A chat-completions request body. Its members are in the order a `Value`
/// keeps them (by name), so the typed and the tree writing give the same
/// text; a member that is `None` (or empty) is not written.
#[derive(Serialize)]
struct RequestOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    messages: Vec<MessageOut<'a>>,
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptionsOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
}

#[derive(Serialize)]
struct StreamOptionsOut {
    include_usage: bool,
}

/// One message of the request, members by name.
#[derive(Serialize)]
#[serde(untagged)]
enum MessageOut<'a> {
    Tool {
        content: String,
        role: &'static str,
        tool_call_id: &'a str,
    },
    Assistant {
        /// `null` when the turn is only tool calls.
        content: Option<String>,
        role: &'static str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<CallOut<'a>>,
    },
    Other {
        content: ContentOut<'a>,
        role: &'static str,
    },
}

/// A message's content: its one text as a string, else a list of parts.
#[derive(Serialize)]
#[serde(untagged)]
enum ContentOut<'a> {
    Text(&'a str),
    Joined(String),
    Parts(Vec<PartOut<'a>>),
}

#[derive(Serialize)]
#[serde(untagged)]
enum PartOut<'a> {
    Text {
        text: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    Image {
        image_url: UrlOut,
        #[serde(rename = "type")]
        kind: &'static str,
    },
}

#[derive(Serialize)]
struct UrlOut {
    url: String,
}

/// An assistant's tool call, members by name.
#[derive(Serialize)]
pub(super) struct CallOut<'a> {
    function: FunctionOut<'a>,
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct FunctionOut<'a> {
    arguments: &'a str,
    name: &'a str,
}

fn request_out(request: &Request) -> RequestOut<'_> {
    let mut messages = Vec::new();
    for m in &request.messages {
        encode_message(m, &mut messages);
    }
    let sampling = &request.sampling;
    let reasoning_effort = request.reasoning.as_ref().and_then(|r| {
        if r.enabled == Some(false) {
            Some("none".to_owned())
        } else if let Some(effort) = r.effort_level() {
            Some(effort)
        } else if r.enabled == Some(true) {
            Some("medium".to_owned())
        } else {
            None
        }
    });
    RequestOut {
        frequency_penalty: sampling.frequency_penalty,
        max_tokens: request.max_tokens,
        messages,
        model: &request.model,
        parallel_tool_calls: request.parallel_tool_calls,
        presence_penalty: sampling.presence_penalty,
        reasoning_effort,
        response_format: request.response_format.as_ref().map(encode_response_format),
        seed: sampling.seed,
        stop: &sampling.stop,
        stream: request.stream.then_some(true),
        // Always when streaming: the gateway bills from it.
        stream_options: request.stream.then_some(StreamOptionsOut {
            include_usage: true,
        }),
        temperature: sampling.temperature,
        tool_choice: request.tool_choice.as_ref().map(encode_tool_choice),
        tools: request.tools.iter().map(encode_tool).collect(),
        top_p: sampling.top_p,
        user: request.user.as_deref(),
    }
}

fn text_or_parts<'a>(blocks: &[&'a Block]) -> ContentOut<'a> {
    if let [Block::Text(t)] = blocks {
        return ContentOut::Text(t);
    }
    ContentOut::Parts(
        blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text(text) => Some(PartOut::Text { text, kind: "text" }),
                Block::Image(i) => Some(PartOut::Image {
                    image_url: UrlOut { url: i.to_url() },
                    kind: "image_url",
                }),
                _ => None,
            })
            .collect(),
    )
}

/// One canonical message as one or more OpenAI messages: tool results become
/// `tool` messages (first, as the protocol wants them right after the call).
fn encode_message<'a>(message: &'a Message, out: &mut Vec<MessageOut<'a>>) {
    for b in &message.content {
        if let Block::ToolResult(r) = b {
            let text = if r.is_error && !r.text().is_empty() {
                // OpenAI has no error flag; say it in the content.
                format!("error: {}", r.text())
            } else {
                r.text()
            };
            out.push(MessageOut::Tool {
                content: text,
                role: "tool",
                tool_call_id: &r.call_id,
            });
        }
    }
    let rest: Vec<&Block> = message
        .content
        .iter()
        .filter(|b| matches!(b, Block::Text(_) | Block::Image(_)))
        .collect();
    let calls: Vec<CallOut<'_>> = message
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolCall(c) => Some(call_out(c)),
            _ => None,
        })
        .collect();
    let role = match message.role {
        Role::System => "system",
        Role::User | Role::Tool => "user",
        Role::Assistant => "assistant",
    };
    if message.role == Role::Assistant {
        if rest.is_empty() && calls.is_empty() {
            return;
        }
        let text: String = rest
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        out.push(MessageOut::Assistant {
            content: (!text.is_empty() || calls.is_empty()).then_some(text),
            role: "assistant",
            tool_calls: calls,
        });
        return;
    }
    if message.role == Role::System {
        out.push(MessageOut::Other {
            content: ContentOut::Joined(crate::canonical::joined_text(&message.content)),
            role: "system",
        });
        return;
    }
    if !rest.is_empty() {
        out.push(MessageOut::Other {
            content: text_or_parts(&rest),
            role,
        });
    }
}

pub(super) fn call_out(call: &ToolCall) -> CallOut<'_> {
    CallOut {
        function: FunctionOut {
            arguments: &call.arguments,
            name: &call.name,
        },
        id: &call.id,
        kind: "function",
    }
}

fn encode_tool(tool: &Tool) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), json!(tool.name));
    if let Some(description) = &tool.description {
        function.insert("description".into(), json!(description));
    }
    if let Some(parameters) = &tool.parameters {
        function.insert("parameters".into(), parameters.clone());
    }
    if let Some(strict) = tool.strict {
        function.insert("strict".into(), json!(strict));
    }
    json!({"type": "function", "function": function})
}

fn encode_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Function(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

fn encode_response_format(format: &ResponseFormat) -> Value {
    match format {
        ResponseFormat::Text => json!({"type": "text"}),
        ResponseFormat::JsonObject => json!({"type": "json_object"}),
        ResponseFormat::JsonSchema {
            name,
            schema,
            strict,
        } => {
            let mut inner = Map::new();
            inner.insert("name".into(), json!(name));
            if let Some(schema) = schema {
                inner.insert("schema".into(), schema.clone());
            }
            if let Some(strict) = strict {
                inner.insert("strict".into(), json!(strict));
            }
            json!({"type": "json_schema", "json_schema": inner})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Request {
        parse_request(&v).unwrap()
    }

    #[test]
    fn messages_become_ordered_blocks() {
        let r = parse(json!({"model": "m", "messages": [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
            {"role": "assistant", "reasoning_content": "hmm", "content": null,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": {"b": 2}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "two"}]}
        ]}));
        assert_eq!(r.messages[0], Message::text(Role::System, "be brief"));
        assert_eq!(
            r.messages[1].content[1],
            Block::Image(ImageSource::Base64 {
                media_type: "image/png".into(),
                data: "AA".into()
            })
        );
        let a = &r.messages[2].content;
        assert_eq!(
            a[0],
            Block::Thinking {
                text: "hmm".into(),
                signature: None
            }
        );
        assert_eq!(
            a[2],
            Block::ToolCall(ToolCall {
                id: "c2".into(),
                name: "g".into(),
                arguments: r#"{"b":2}"#.into()
            })
        );
        let Block::ToolResult(t) = &r.messages[4].content[0] else {
            panic!("a tool result")
        };
        assert_eq!((t.call_id.as_str(), t.text()), ("c2", "two".to_owned()));
    }

    #[test]
    fn thinking_switches_collapse() {
        for (k, v) in [
            ("enable_thinking", json!(false)),
            ("thinking", json!({"type": "disabled"})),
            ("reasoning_effort", json!("none")),
        ] {
            let mut body = json!({"messages": []});
            body[k] = v;
            assert_eq!(parse(body).reasoning.unwrap().enabled, Some(false), "{k}");
        }
        let encoded = encode_request(&Request {
            reasoning: Some(Reasoning {
                enabled: Some(false),
                ..Reasoning::default()
            }),
            ..Request::new("m", vec![])
        });
        assert_eq!(encoded["reasoning_effort"], "none");
    }

    #[test]
    fn tool_results_in_user_turns_become_tool_messages_first() {
        let req = Request::new(
            "m",
            vec![Message::new(
                Role::User,
                vec![
                    Block::ToolResult(ToolResult {
                        call_id: "c1".into(),
                        name: None,
                        content: vec![Block::Text("42".into())],
                        is_error: false,
                    }),
                    Block::ToolResult(ToolResult {
                        call_id: "c2".into(),
                        name: None,
                        content: vec![Block::Text("boom".into())],
                        is_error: true,
                    }),
                    Block::Text("and now?".into()),
                ],
            )],
        );
        assert_eq!(
            encode_request(&req)["messages"],
            json!([
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
                {"role": "tool", "tool_call_id": "c2", "content": "error: boom"},
                {"role": "user", "content": "and now?"}
            ])
        );
    }

    #[test]
    fn round_trip_keeps_what_the_protocol_can_say() {
        let body = json!({"model": "m", "max_tokens": 9, "temperature": 0.5, "stop": ["x"],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "tool_choice": "required", "parallel_tool_calls": false, "stream": true,
            "messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": null, "tool_calls": [
                             {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "c", "content": "ok"}]});
        let encoded = encode_request(&parse(body.clone()));
        for key in [
            "max_tokens",
            "temperature",
            "stop",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "messages",
        ] {
            assert_eq!(encoded[key], body[key], "{key}");
        }
        assert_eq!(encoded["stream_options"]["include_usage"], true);
    }

    #[test]
    fn refusals() {
        assert!(matches!(
            parse_request(&json!({"messages": [{"role": "wizard", "content": "x"}]})),
            Err(TranslateError::InvalidRequest(_))
        ));
        assert!(matches!(
            parse_request(&json!({"messages": [], "n": 2})),
            Err(TranslateError::Unsupported(_))
        ));
        assert!(matches!(
            parse_request(
                &json!({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]})
            ),
            Err(TranslateError::Unsupported(_))
        ));
    }

    #[test]
    fn every_member_written_and_the_text_is_the_trees() {
        let call = ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{\"q\":\"x\"}".into(),
        };
        let full = Request {
            messages: vec![
                Message::new(
                    Role::System,
                    vec![Block::Text("be ".into()), Block::Text("brief".into())],
                ),
                Message::new(
                    Role::User,
                    vec![
                        Block::Text("look \"here\"\n".into()),
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
                            text: "hmm".into(),
                            signature: None,
                        },
                        Block::ToolCall(call.clone()),
                    ],
                ),
                Message::new(Role::Assistant, vec![Block::Text("done".into())]),
                Message::new(Role::Assistant, vec![]),
                Message::new(
                    Role::User,
                    vec![Block::ToolResult(ToolResult {
                        call_id: "c1".into(),
                        name: None,
                        content: vec![Block::Text("42".into())],
                        is_error: false,
                    })],
                ),
            ],
            sampling: Sampling {
                temperature: Some(0.5),
                top_p: Some(1.0),
                top_k: Some(3),
                presence_penalty: Some(-0.25),
                frequency_penalty: Some(0.125),
                seed: Some(-7),
                stop: vec!["END".into(), "STOP".into()],
            },
            max_tokens: Some(64),
            tools: vec![Tool {
                name: "f".into(),
                description: Some("find".into()),
                parameters: Some(json!({"type": "object", "properties": {}})),
                strict: Some(true),
            }],
            tool_choice: Some(ToolChoice::Function("f".into())),
            parallel_tool_calls: Some(false),
            response_format: Some(ResponseFormat::JsonObject),
            reasoning: Some(Reasoning {
                effort: Some("high".into()),
                ..Reasoning::default()
            }),
            stream: true,
            stream_usage: true,
            user: Some("u-1".into()),
            ..Request::new("up", vec![])
        };
        let tree = encode_request(&full);
        assert_eq!(
            tree,
            json!({
                "model": "up",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": [
                        {"type": "text", "text": "look \"here\"\n"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"q\":\"x\"}"}}]},
                    {"role": "assistant", "content": "done"},
                    {"role": "tool", "tool_call_id": "c1", "content": "42"}
                ],
                "temperature": 0.5, "top_p": 1.0, "presence_penalty": -0.25,
                "frequency_penalty": 0.125, "seed": -7, "stop": ["END", "STOP"],
                "max_tokens": 64,
                "tools": [{"type": "function", "function": {"name": "f", "description": "find",
                           "parameters": {"type": "object", "properties": {}}, "strict": true}}],
                "tool_choice": {"type": "function", "function": {"name": "f"}},
                "parallel_tool_calls": false,
                "response_format": {"type": "json_object"},
                "reasoning_effort": "high",
                "stream": true, "stream_options": {"include_usage": true},
                "user": "u-1"
            })
        );
        let bare = Request::new("m", vec![Message::text(Role::User, "hi")]);
        assert_eq!(
            encode_request(&bare),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        );
        for req in [&full, &bare] {
            assert_eq!(
                write_request(req),
                crate::json::to_bytes(&encode_request(req))
            );
        }
    }
}
