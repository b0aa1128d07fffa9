use serde_json::{json, Map, Value};

use super::REDACTED_PREFIX;
use crate::canonical::{
    Block, ImageSource, Message, Reasoning, Request, ResponseFormat, Role, Sampling, Tool,
    ToolCall, ToolChoice, ToolResult,
};
use crate::json::{str_member, Fields};
use crate::TranslateError;

type Result<T> = std::result::Result<T, TranslateError>;

fn parse_part(part: &Value) -> Result<Block> {
    match str_member(part, "type").unwrap_or("") {
        "input_text" | "output_text" | "text" => Ok(Block::Text(
            str_member(part, "text").unwrap_or_default().to_owned(),
        )),
        "refusal" => Ok(Block::Text(
            str_member(part, "refusal").unwrap_or_default().to_owned(),
        )),
        "input_image" => {
            let url = match part.get("image_url") {
                Some(Value::String(u)) => u.as_str(),
                Some(o) => str_member(o, "url").unwrap_or_default(),
                None => {
                    return Err(TranslateError::unsupported(
                        "images by `file_id` are not supported; send `image_url`",
                    ))
                }
            };
            Ok(Block::Image(ImageSource::from_url(url)))
        }
        other => Err(TranslateError::unsupported(format!(
            "input parts of type `{other}` are not supported"
        ))),
    }
}

fn parse_content(content: Option<&Value>) -> Result<Vec<Block>> {
    match content {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![Block::Text(s.clone())]),
        Some(Value::Array(parts)) => parts.iter().map(parse_part).collect(),
        Some(_) => Err(TranslateError::invalid(
            "message `content` must be a string or an array",
        )),
    }
}

/// Adds a block to the assistant turn being built (a new turn unless the
/// last one is the assistant's).
fn assistant_block(messages: &mut Vec<Message>, block: Block) {
    match messages.last_mut() {
        Some(m) if m.role == Role::Assistant => m.content.push(block),
        _ => messages.push(Message::new(Role::Assistant, vec![block])),
    }
}

fn parse_item(item: &Value, messages: &mut Vec<Message>) -> Result<()> {
    let kind = str_member(item, "type").unwrap_or("message");
    match kind {
        "message" => {
            let role = match str_member(item, "role") {
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some("system") | Some("developer") => Role::System,
                other => {
                    return Err(TranslateError::invalid(format!(
                        "input message role {other:?} is unknown"
                    )))
                }
            };
            let content = parse_content(item.get("content"))?;
            if role == Role::Assistant {
                for b in content {
                    assistant_block(messages, b);
                }
            } else {
                messages.push(Message::new(role, content));
            }
        }
        "function_call" => assistant_block(
            messages,
            Block::ToolCall(ToolCall {
                id: str_member(item, "call_id").unwrap_or_default().to_owned(),
                name: str_member(item, "name").unwrap_or_default().to_owned(),
                arguments: str_member(item, "arguments").unwrap_or_default().to_owned(),
            }),
        ),
        "function_call_output" => {
            let content = match item.get("output") {
                Some(Value::String(s)) => vec![Block::Text(s.clone())],
                other => parse_content(other)?,
            };
            messages.push(Message::new(
                Role::Tool,
                vec![Block::ToolResult(ToolResult {
                    call_id: str_member(item, "call_id").unwrap_or_default().to_owned(),
                    name: None,
                    content,
                    is_error: false,
                })],
            ));
        }
        "reasoning" => {
            let encrypted = str_member(item, "encrypted_content");
            if let Some(data) = encrypted.and_then(|e| e.strip_prefix(REDACTED_PREFIX)) {
                assistant_block(messages, Block::RedactedThinking(data.to_owned()));
            } else {
                let text: String = item
                    .get("summary")
                    .and_then(Value::as_array)
                    .map(|s| s.iter().filter_map(|p| str_member(p, "text")).collect())
                    .unwrap_or_default();
                assistant_block(
                    messages,
                    Block::Thinking {
                        text,
                        signature: encrypted.map(str::to_owned),
                    },
                );
            }
        }
        "item_reference" => {
            return Err(TranslateError::unsupported(
                "item references need stored responses, which the gateway does not keep; send the items themselves",
            ))
        }
        other => {
            return Err(TranslateError::unsupported(format!(
                "input items of type `{other}` are not supported"
            )))
        }
    }
    Ok(())
}

/// Reads a Responses request body.
pub fn parse_request(body: &Value) -> Result<Request> {
    let f = Fields::of(body)?;
    for key in ["previous_response_id", "conversation"] {
        if f.present(key).is_some() {
            return Err(TranslateError::unsupported(format!(
                "`{key}` needs stored responses, which the gateway does not keep; send the whole conversation in `input`"
            )));
        }
    }
    let mut messages = Vec::new();
    if let Some(i) = f.string("instructions")? {
        messages.push(Message::text(Role::System, i));
    }
    match f.present("input") {
        Some(Value::String(s)) => messages.push(Message::text(Role::User, s.clone())),
        Some(Value::Array(items)) => {
            for item in items {
                parse_item(item, &mut messages)?;
            }
        }
        _ => {
            return Err(TranslateError::invalid(
                "`input` must be a string or an array",
            ))
        }
    }
    let tools = f
        .array("tools")?
        .iter()
        .map(|t| match str_member(t, "type") {
            Some("function") => Ok(Tool {
                name: str_member(t, "name")
                    .ok_or_else(|| TranslateError::invalid("a function tool needs a `name`"))?
                    .to_owned(),
                description: str_member(t, "description").map(str::to_owned),
                parameters: t.get("parameters").filter(|p| !p.is_null()).cloned(),
                strict: t.get("strict").and_then(Value::as_bool),
            }),
            other => Err(TranslateError::unsupported(format!(
                "built-in tools ({other:?}) are only served by an OpenAI Responses vendor"
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    let tool_choice = match f.present("tool_choice") {
        None => None,
        Some(Value::String(s)) => Some(match s.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(TranslateError::invalid(format!(
                    "`tool_choice` `{other}` is unknown"
                )))
            }
        }),
        Some(o) => Some(ToolChoice::Function(
            str_member(o, "name")
                .ok_or_else(|| TranslateError::invalid("`tool_choice` needs a `name`"))?
                .to_owned(),
        )),
    };
    let reasoning = f.present("reasoning").and_then(|r| {
        str_member(r, "effort").map(|e| Reasoning {
            enabled: (e == "none").then_some(false),
            effort: (e != "none").then(|| e.to_owned()),
            budget_tokens: None,
        })
    });
    let response_format = f
        .present("text")
        .and_then(|t| t.get("format"))
        .and_then(|fmt| match str_member(fmt, "type") {
            Some("json_object") => Some(ResponseFormat::JsonObject),
            Some("json_schema") => Some(ResponseFormat::JsonSchema {
                name: str_member(fmt, "name").unwrap_or("response").to_owned(),
                schema: fmt.get("schema").cloned(),
                strict: fmt.get("strict").and_then(Value::as_bool),
            }),
            Some("text") => Some(ResponseFormat::Text),
            _ => None,
        });
    Ok(Request {
        model: f.string("model")?.unwrap_or_default(),
        messages,
        sampling: Sampling {
            temperature: f.number("temperature")?,
            top_p: f.number("top_p")?,
            ..Sampling::default()
        },
        max_tokens: f.count("max_output_tokens")?,
        tools,
        tool_choice,
        parallel_tool_calls: f.boolean("parallel_tool_calls")?,
        response_format,
        reasoning,
        stream: f.boolean("stream")?.unwrap_or(false),
        // `response.completed` always carries the usage.
        stream_usage: true,
        user: f.string("user")?,
    })
}

fn encode_content(role: &str, blocks: &[Block]) -> Vec<Value> {
    let text_type = if role == "assistant" {
        "output_text"
    } else {
        "input_text"
    };
    blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(json!({"type": text_type, "text": t})),
            Block::Image(i) => Some(json!({"type": "input_image", "image_url": i.to_url()})),
            _ => None,
        })
        .collect()
}

/// Writes a Responses request body for a Responses vendor (stateless:
/// `store: false`, the whole conversation as input items).
pub fn encode_request(req: &Request) -> Value {
    let mut out = Map::new();
    out.insert("model".into(), json!(req.model));
    let mut input = Vec::new();
    for m in &req.messages {
        let role = match m.role {
            Role::System => "developer",
            Role::User | Role::Tool => "user",
            Role::Assistant => "assistant",
        };
        let mut run: Vec<Block> = Vec::new();
        let flush = |run: &mut Vec<Block>, input: &mut Vec<Value>| {
            if !run.is_empty() {
                input.push(
                    json!({"type": "message", "role": role, "content": encode_content(role, run)}),
                );
                run.clear();
            }
        };
        for b in &m.content {
            match b {
                Block::Text(_) | Block::Image(_) => run.push(b.clone()),
                Block::Thinking { text, signature } => {
                    flush(&mut run, &mut input);
                    let mut item = json!({"type": "reasoning", "summary":
                        if text.is_empty() { json!([]) } else { json!([{"type": "summary_text", "text": text}]) }});
                    if let Some(s) = signature {
                        item["encrypted_content"] = json!(s);
                    }
                    input.push(item);
                }
                Block::RedactedThinking(d) => {
                    flush(&mut run, &mut input);
                    input.push(json!({"type": "reasoning", "summary": [],
                        "encrypted_content": format!("{REDACTED_PREFIX}{d}")}));
                }
                Block::ToolCall(c) => {
                    flush(&mut run, &mut input);
                    input.push(
                        json!({"type": "function_call", "call_id": c.id, "name": c.name,
                        "arguments": c.arguments}),
                    );
                }
                Block::ToolResult(r) => {
                    flush(&mut run, &mut input);
                    input.push(json!({"type": "function_call_output", "call_id": r.call_id,
                        "output": r.text()}));
                }
            }
        }
        flush(&mut run, &mut input);
    }
    out.insert("input".into(), Value::Array(input));
    out.insert("store".into(), json!(false));
    if let Some(m) = req.max_tokens {
        out.insert("max_output_tokens".into(), json!(m));
    }
    if let Some(t) = req.sampling.temperature {
        out.insert("temperature".into(), json!(t));
    }
    if let Some(p) = req.sampling.top_p {
        out.insert("top_p".into(), json!(p));
    }
    if !req.tools.is_empty() {
        out.insert(
            "tools".into(),
            Value::Array(
                req.tools
                    .iter()
                    .map(|t| {
                        let mut v = json!({"type": "function", "name": t.name});
                        if let Some(d) = &t.description {
                            v["description"] = json!(d);
                        }
                        if let Some(p) = &t.parameters {
                            v["parameters"] = p.clone();
                        }
                        if let Some(s) = t.strict {
                            v["strict"] = json!(s);
                        }
                        v
                    })
                    .collect(),
            ),
        );
    }
    if let Some(c) = &req.tool_choice {
        out.insert(
            "tool_choice".into(),
            match c {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Function(n) => json!({"type": "function", "name": n}),
            },
        );
    }
    if let Some(p) = req.parallel_tool_calls {
        out.insert("parallel_tool_calls".into(), json!(p));
    }
    if let Some(r) = &req.reasoning {
        if r.enabled == Some(false) {
            out.insert("reasoning".into(), json!({"effort": "none"}));
        } else if let Some(e) = r.effort_level() {
            out.insert("reasoning".into(), json!({"effort": e, "summary": "auto"}));
        }
    }
    match &req.response_format {
        Some(ResponseFormat::JsonObject) => {
            out.insert("text".into(), json!({"format": {"type": "json_object"}}));
        }
        Some(ResponseFormat::JsonSchema {
            name,
            schema,
            strict,
        }) => {
            let mut fmt = json!({"type": "json_schema", "name": name});
            if let Some(s) = schema {
                fmt["schema"] = s.clone();
            }
            if let Some(s) = strict {
                fmt["strict"] = json!(s);
            }
            out.insert("text".into(), json!({"format": fmt}));
        }
        _ => {}
    }
    if req.stream {
        out.insert("stream".into(), json!(true));
    }
    if let Some(u) = &req.user {
        out.insert("user".into(), json!(u));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_items_into_turns() {
        let r = parse_request(&json!({
            "model": "m", "instructions": "be brief", "max_output_tokens": 50,
            "reasoning": {"effort": "low"},
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "t"}], "encrypted_content": "ENC"},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "42"},
            ]}))
        .unwrap();
        assert_eq!(r.messages[0], Message::text(Role::System, "be brief"));
        assert_eq!(r.messages[1], Message::text(Role::User, "hi"));
        assert_eq!(
            r.messages[2].content,
            vec![
                Block::Thinking {
                    text: "t".into(),
                    signature: Some("ENC".into())
                },
                Block::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "f".into(),
                    arguments: "{}".into()
                })
            ]
        );
        assert_eq!(r.messages[3].role, Role::Tool);
        assert_eq!(r.max_tokens, Some(50));
        assert_eq!(r.reasoning.unwrap().effort.as_deref(), Some("low"));
        let back = encode_request(
            &parse_request(&encode_request(&Request::new("m", r.messages.clone()))).unwrap(),
        );
        assert_eq!(back["input"].as_array().unwrap().len(), 5);
    }

    #[test]
    fn stored_state_is_refused_clearly() {
        let e =
            parse_request(&json!({"input": "x", "previous_response_id": "resp_1"})).unwrap_err();
        assert!(
            matches!(e, TranslateError::Unsupported(ref m) if m.contains("whole conversation"))
        );
        assert!(matches!(
            parse_request(&json!({"input": "x", "tools": [{"type": "web_search"}]})),
            Err(TranslateError::Unsupported(_))
        ));
    }
}
