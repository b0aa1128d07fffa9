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
    let mut out = Map::new();
    out.insert("model".into(), json!(request.model));
    let mut messages = Vec::new();
    for m in &request.messages {
        encode_message(m, &mut messages);
    }
    out.insert("messages".into(), Value::Array(messages));
    let sampling = &request.sampling;
    for (key, value) in [
        ("temperature", sampling.temperature),
        ("top_p", sampling.top_p),
        ("presence_penalty", sampling.presence_penalty),
        ("frequency_penalty", sampling.frequency_penalty),
    ] {
        if let Some(value) = value {
            out.insert(key.into(), json!(value));
        }
    }
    if let Some(seed) = sampling.seed {
        out.insert("seed".into(), json!(seed));
    }
    if !sampling.stop.is_empty() {
        out.insert("stop".into(), json!(sampling.stop));
    }
    if let Some(max_tokens) = request.max_tokens {
        out.insert("max_tokens".into(), json!(max_tokens));
    }
    if !request.tools.is_empty() {
        out.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(encode_tool).collect()),
        );
    }
    if let Some(choice) = &request.tool_choice {
        out.insert("tool_choice".into(), encode_tool_choice(choice));
    }
    if let Some(parallel) = request.parallel_tool_calls {
        out.insert("parallel_tool_calls".into(), json!(parallel));
    }
    if let Some(format) = &request.response_format {
        out.insert("response_format".into(), encode_response_format(format));
    }
    if let Some(r) = &request.reasoning {
        if r.enabled == Some(false) {
            out.insert("reasoning_effort".into(), json!("none"));
        } else if let Some(effort) = r.effort_level() {
            out.insert("reasoning_effort".into(), json!(effort));
        } else if r.enabled == Some(true) {
            out.insert("reasoning_effort".into(), json!("medium"));
        }
    }
    if request.stream {
        out.insert("stream".into(), json!(true));
        // Always: the gateway bills from it.
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(user) = &request.user {
        out.insert("user".into(), json!(user));
    }
    Value::Object(out)
}

fn text_or_parts(blocks: &[&Block]) -> Value {
    if let [Block::Text(t)] = blocks {
        return json!(t);
    }
    Value::Array(
        blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(json!({"type": "text", "text": t})),
                Block::Image(i) => {
                    Some(json!({"type": "image_url", "image_url": {"url": i.to_url()}}))
                }
                _ => None,
            })
            .collect(),
    )
}

/// One canonical message as one or more OpenAI messages: tool results become
/// `tool` messages (first, as the protocol wants them right after the call).
fn encode_message(message: &Message, out: &mut Vec<Value>) {
    for b in &message.content {
        if let Block::ToolResult(r) = b {
            let text = if r.is_error && !r.text().is_empty() {
                // OpenAI has no error flag; say it in the content.
                format!("error: {}", r.text())
            } else {
                r.text()
            };
            out.push(json!({"role": "tool", "tool_call_id": r.call_id, "content": text}));
        }
    }
    let rest: Vec<&Block> = message
        .content
        .iter()
        .filter(|b| matches!(b, Block::Text(_) | Block::Image(_)))
        .collect();
    let calls: Vec<Value> = message
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolCall(c) => Some(encode_tool_call(c)),
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
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        m.insert(
            "content".into(),
            if text.is_empty() && !calls.is_empty() {
                Value::Null
            } else {
                json!(text)
            },
        );
        if !calls.is_empty() {
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        out.push(Value::Object(m));
        return;
    }
    if message.role == Role::System {
        let text = crate::canonical::joined_text(&message.content);
        out.push(json!({"role": "system", "content": text}));
        return;
    }
    if !rest.is_empty() {
        out.push(json!({"role": role, "content": text_or_parts(&rest)}));
    }
}

pub(super) fn encode_tool_call(call: &ToolCall) -> Value {
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    })
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
}
