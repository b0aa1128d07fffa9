use serde_json::{json, Map, Value};

use super::names::{role_from, role_name};
use crate::canonical::{
    ChatRequest, Content, ContentPart, Message, Reasoning, ResponseFormat, Sampling, Tool,
    ToolCall, ToolChoice,
};
use crate::json::{as_count, kind_name};
use crate::TranslateError;

type Result<T> = std::result::Result<T, TranslateError>;

/// Reads a chat-completions request body.
pub fn parse_request(body: &Value) -> Result<ChatRequest> {
    let object = body
        .as_object()
        .ok_or_else(|| TranslateError::invalid("request body must be a JSON object"))?;
    let fields = Fields(object);
    let messages = match object.get("messages") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(at, item)| parse_message(at, item))
            .collect::<Result<Vec<_>>>()?,
        _ => return Err(TranslateError::invalid("`messages` must be an array")),
    };
    let stream_usage = object
        .get("stream_options")
        .and_then(|options| options.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(ChatRequest {
        model: fields.string("model")?.unwrap_or_default(),
        messages,
        sampling: parse_sampling(&fields)?,
        // `max_completion_tokens` is OpenAI's newer name; it wins when both are sent.
        max_tokens: match fields.count("max_completion_tokens")? {
            Some(n) => Some(n),
            None => fields.count("max_tokens")?,
        },
        tools: parse_tools(object.get("tools"))?,
        tool_choice: parse_tool_choice(object.get("tool_choice"))?,
        response_format: parse_response_format(object.get("response_format"))?,
        reasoning: parse_reasoning(&fields)?,
        stream: fields.boolean("stream")?.unwrap_or(false),
        stream_usage,
        user: fields.string("user")?,
    })
}

/// Writes a chat-completions request body. The canonical form has no place
/// for `budget_tokens`, which OpenAI's chat protocol cannot express either.
pub fn encode_request(request: &ChatRequest) -> Value {
    let mut out = Map::new();
    out.insert("model".into(), json!(request.model));
    out.insert(
        "messages".into(),
        Value::Array(request.messages.iter().map(encode_message).collect()),
    );
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
    if let Some(format) = &request.response_format {
        out.insert("response_format".into(), encode_response_format(format));
    }
    if let Some(effort) = request.reasoning.as_ref().and_then(encode_reasoning_effort) {
        out.insert("reasoning_effort".into(), json!(effort));
    }
    if request.stream {
        out.insert("stream".into(), json!(true));
        if request.stream_usage {
            out.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    if let Some(user) = &request.user {
        out.insert("user".into(), json!(user));
    }
    Value::Object(out)
}

/// Typed access to optional members, with errors naming the member.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn present(&self, key: &str) -> Option<&Value> {
        self.0.get(key).filter(|value| !value.is_null())
    }

    fn wrong(key: &str, wanted: &str, got: &Value) -> TranslateError {
        TranslateError::invalid(format!("`{key}` must be {wanted}, not {}", kind_name(got)))
    }

    fn string(&self, key: &str) -> Result<Option<String>> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(Self::wrong(key, "a string", other)),
        }
    }

    fn number(&self, key: &str) -> Result<Option<f64>> {
        match self.present(key) {
            None => Ok(None),
            Some(value) => value
                .as_f64()
                .map(Some)
                .ok_or_else(|| Self::wrong(key, "a number", value)),
        }
    }

    fn integer(&self, key: &str) -> Result<Option<i64>> {
        match self.present(key) {
            None => Ok(None),
            Some(value) => value
                .as_i64()
                .map(Some)
                .ok_or_else(|| Self::wrong(key, "an integer", value)),
        }
    }

    fn count(&self, key: &str) -> Result<Option<u64>> {
        match self.present(key) {
            None => Ok(None),
            Some(value) => as_count(value)
                .map(Some)
                .ok_or_else(|| Self::wrong(key, "a non-negative integer", value)),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(Self::wrong(key, "a boolean", other)),
        }
    }
}

fn parse_sampling(fields: &Fields<'_>) -> Result<Sampling> {
    let stop = match fields.present("stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| TranslateError::invalid("`stop` must hold strings"))
            })
            .collect::<Result<_>>()?,
        Some(other) => return Err(Fields::wrong("stop", "a string or an array", other)),
    };
    Ok(Sampling {
        temperature: fields.number("temperature")?,
        top_p: fields.number("top_p")?,
        presence_penalty: fields.number("presence_penalty")?,
        frequency_penalty: fields.number("frequency_penalty")?,
        seed: fields.integer("seed")?,
        stop,
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
    let content = match fields.present("content") {
        None => None,
        Some(Value::String(text)) => Some(Content::Text(text.clone())),
        Some(Value::Array(parts)) => Some(Content::Parts(
            parts.iter().map(parse_part).collect::<Result<_>>()?,
        )),
        Some(other) => {
            return Err(Fields::wrong(
                &format!("messages[{at}].content"),
                "a string or an array",
                other,
            ))
        }
    };
    let tool_calls = match fields.present("tool_calls") {
        None => Vec::new(),
        Some(Value::Array(calls)) => calls.iter().map(parse_tool_call).collect::<Result<_>>()?,
        Some(other) => {
            return Err(Fields::wrong(
                &format!("messages[{at}].tool_calls"),
                "an array",
                other,
            ))
        }
    };
    Ok(Message {
        role,
        content,
        name: fields.string("name")?,
        reasoning: fields.string("reasoning_content")?,
        tool_calls,
        tool_call_id: fields.string("tool_call_id")?,
    })
}

fn parse_part(part: &Value) -> Result<ContentPart> {
    let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => part
            .get("text")
            .and_then(Value::as_str)
            .map(|text| ContentPart::Text(text.to_owned()))
            .ok_or_else(|| TranslateError::invalid("a text part needs a string `text`")),
        "image_url" => {
            let image = part.get("image_url");
            // Some clients send the URL directly instead of `{url, detail}`.
            let url = image
                .and_then(|i| i.get("url"))
                .or(image)
                .and_then(Value::as_str)
                .ok_or_else(|| TranslateError::invalid("an image_url part needs a `url`"))?;
            let detail = image
                .and_then(|i| i.get("detail"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            Ok(ContentPart::Image {
                url: url.to_owned(),
                detail,
            })
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

fn parse_tools(tools: Option<&Value>) -> Result<Vec<Tool>> {
    let items = match tools {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(Fields::wrong("tools", "an array", other)),
    };
    items
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
            })
        })
        .collect()
}

fn parse_tool_choice(choice: Option<&Value>) -> Result<Option<ToolChoice>> {
    match choice {
        None | Some(Value::Null) => Ok(None),
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
    let Some(format) = format.filter(|f| !f.is_null()) else {
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

fn encode_message(message: &Message) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), json!(role_name(message.role)));
    let content = match &message.content {
        None => Value::Null,
        Some(Content::Text(text)) => json!(text),
        Some(Content::Parts(parts)) => Value::Array(parts.iter().map(encode_part).collect()),
    };
    out.insert("content".into(), content);
    if let Some(name) = &message.name {
        out.insert("name".into(), json!(name));
    }
    if let Some(reasoning) = &message.reasoning {
        out.insert("reasoning_content".into(), json!(reasoning));
    }
    if !message.tool_calls.is_empty() {
        out.insert(
            "tool_calls".into(),
            Value::Array(message.tool_calls.iter().map(encode_tool_call).collect()),
        );
    }
    if let Some(id) = &message.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    Value::Object(out)
}

fn encode_part(part: &ContentPart) -> Value {
    match part {
        ContentPart::Text(text) => json!({"type": "text", "text": text}),
        ContentPart::Image { url, detail } => {
            let mut image = Map::new();
            image.insert("url".into(), json!(url));
            if let Some(detail) = detail {
                image.insert("detail".into(), json!(detail));
            }
            json!({"type": "image_url", "image_url": image})
        }
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
            let mut spec = Map::new();
            spec.insert("name".into(), json!(name));
            if let Some(schema) = schema {
                spec.insert("schema".into(), schema.clone());
            }
            if let Some(strict) = strict {
                spec.insert("strict".into(), json!(strict));
            }
            json!({"type": "json_schema", "json_schema": spec})
        }
    }
}

/// OpenAI expresses "no thinking" as effort `none`.
fn encode_reasoning_effort(reasoning: &Reasoning) -> Option<&str> {
    match (&reasoning.effort, reasoning.enabled) {
        (_, Some(false)) => Some("none"),
        (Some(effort), _) => Some(effort),
        (None, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::Role;

    fn full_request() -> Value {
        json!({
            "model": "gpt-x",
            "messages": [
                {"role": "developer", "content": "be brief"},
                {"role": "user", "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}}
                ]},
                {"role": "assistant", "content": null, "reasoning_content": "hmm",
                 "tool_calls": [{"id": "call_1", "type": "function",
                                 "function": {"name": "look", "arguments": "{\"q\":1}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a cat"}
            ],
            "temperature": 0.5,
            "top_p": 0.9,
            "seed": 7,
            "stop": "END",
            "max_tokens": 100,
            "tools": [{"type": "function", "function": {
                "name": "look", "description": "looks", "parameters": {"type": "object"}}}],
            "tool_choice": {"type": "function", "function": {"name": "look"}},
            "response_format": {"type": "json_object"},
            "reasoning_effort": "high",
            "stream": true,
            "stream_options": {"include_usage": true},
            "user": "u-1"
        })
    }

    #[test]
    fn reads_every_field() {
        let request = parse_request(&full_request()).unwrap();
        assert_eq!(request.model, "gpt-x");
        assert_eq!(request.messages.len(), 4);
        assert_eq!(request.messages[0], Message::text(Role::System, "be brief"));
        assert_eq!(
            request.messages[1].content,
            Some(Content::Parts(vec![
                ContentPart::Text("what is this?".into()),
                ContentPart::Image {
                    url: "https://x/cat.png".into(),
                    detail: Some("low".into()),
                },
            ]))
        );
        let assistant = &request.messages[2];
        assert_eq!(assistant.content, None);
        assert_eq!(assistant.reasoning.as_deref(), Some("hmm"));
        assert_eq!(
            assistant.tool_calls,
            vec![ToolCall {
                id: "call_1".into(),
                name: "look".into(),
                arguments: "{\"q\":1}".into(),
            }]
        );
        assert_eq!(request.messages[3].role, Role::Tool);
        assert_eq!(request.messages[3].tool_call_id.as_deref(), Some("call_1"));
        assert_eq!(request.sampling.temperature, Some(0.5));
        assert_eq!(request.sampling.top_p, Some(0.9));
        assert_eq!(request.sampling.seed, Some(7));
        assert_eq!(request.sampling.stop, vec!["END".to_owned()]);
        assert_eq!(request.max_tokens, Some(100));
        assert_eq!(request.tools.len(), 1);
        assert_eq!(
            request.tool_choice,
            Some(ToolChoice::Function("look".into()))
        );
        assert_eq!(request.response_format, Some(ResponseFormat::JsonObject));
        assert_eq!(
            request.reasoning,
            Some(Reasoning {
                enabled: None,
                effort: Some("high".into()),
                budget_tokens: None,
            })
        );
        assert!(request.stream && request.stream_usage);
        assert_eq!(request.user.as_deref(), Some("u-1"));
    }

    #[test]
    fn round_trips_through_canonical() {
        let request = parse_request(&full_request()).unwrap();
        let again = parse_request(&encode_request(&request)).unwrap();
        assert_eq!(again, request);
    }

    #[test]
    fn every_thinking_switch_means_disabled() {
        for body in [
            json!({"messages": [], "enable_thinking": false}),
            json!({"messages": [], "thinking": {"type": "disabled"}}),
            json!({"messages": [], "reasoning_effort": "none"}),
        ] {
            let request = parse_request(&body).unwrap();
            assert_eq!(request.reasoning.and_then(|r| r.enabled), Some(false));
        }
        let plain = parse_request(&json!({"messages": []})).unwrap();
        assert_eq!(plain.reasoning, None);
        let encoded = encode_request(&ChatRequest {
            reasoning: Some(Reasoning {
                enabled: Some(false),
                ..Reasoning::default()
            }),
            ..ChatRequest::new("m", vec![])
        });
        assert_eq!(encoded["reasoning_effort"], json!("none"));
    }

    #[test]
    fn newer_max_completion_tokens_wins() {
        let body = json!({"messages": [], "max_tokens": 5, "max_completion_tokens": 9});
        assert_eq!(parse_request(&body).unwrap().max_tokens, Some(9));
    }

    #[test]
    fn malformed_requests_are_invalid() {
        for body in [
            json!([]),
            json!({"model": "m"}),
            json!({"messages": "hi"}),
            json!({"messages": [{"content": "x"}]}),
            json!({"messages": [{"role": "wizard", "content": "x"}]}),
            json!({"messages": [{"role": "user", "content": 3}]}),
            json!({"messages": [], "temperature": "hot"}),
            json!({"messages": [], "max_tokens": -1}),
            json!({"messages": [], "stream": "yes"}),
            json!({"messages": [], "stop": [1]}),
        ] {
            assert!(
                matches!(parse_request(&body), Err(TranslateError::InvalidRequest(_))),
                "{body}"
            );
        }
    }

    #[test]
    fn unknown_features_are_unsupported() {
        let audio = json!({"messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}]});
        assert!(matches!(
            parse_request(&audio),
            Err(TranslateError::Unsupported(_))
        ));
        let search = json!({"messages": [], "tools": [{"type": "web_search"}]});
        assert!(matches!(
            parse_request(&search),
            Err(TranslateError::Unsupported(_))
        ));
    }

    #[test]
    fn encode_leaves_out_what_is_unset() {
        let request = ChatRequest::new("m", vec![Message::text(Role::User, "hi")]);
        assert_eq!(
            encode_request(&request),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        );
    }
}
