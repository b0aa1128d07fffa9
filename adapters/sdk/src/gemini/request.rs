use serde_json::{json, Map, Value};

use super::parts::{encode_parts, parse_parts, CallIds};
use super::{key, key_str};
use crate::canonical::{
    Block, Message, Reasoning, Request, ResponseFormat, Role, Sampling, Tool, ToolChoice,
};
use crate::json::{as_count, kind_name};
use crate::TranslateError;

type Result<T> = std::result::Result<T, TranslateError>;

fn number(v: &Value, k: &str) -> Result<Option<f64>> {
    match key(v, k) {
        None => Ok(None),
        Some(n) => n.as_f64().map(Some).ok_or_else(|| {
            TranslateError::invalid(format!("`{k}` must be a number, not {}", kind_name(n)))
        }),
    }
}

fn count(v: &Value, k: &str) -> Option<u64> {
    key(v, k).and_then(as_count)
}

/// Reads a generateContent request body. The model and streaming come from
/// the URL (the caller fills them in).
pub fn parse_request(body: &Value) -> Result<Request> {
    if !body.is_object() {
        return Err(TranslateError::invalid(
            "request body must be a JSON object",
        ));
    }
    let mut messages = Vec::new();
    let mut ids = CallIds::new("call_");
    match key(body, "systemInstruction") {
        None => {}
        Some(Value::String(s)) => messages.push(Message::text(Role::System, s.clone())),
        Some(content) => {
            let parts = key(content, "parts")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            messages.push(Message::new(Role::System, parse_parts(parts, &mut ids)?));
        }
    }
    let contents = key(body, "contents")
        .and_then(Value::as_array)
        .ok_or_else(|| TranslateError::invalid("`contents` must be an array"))?;
    for (at, content) in contents.iter().enumerate() {
        let role = match key_str(content, "role") {
            None | Some("user") | Some("function") => Role::User,
            Some("model") => Role::Assistant,
            Some(other) => {
                return Err(TranslateError::invalid(format!(
                    "`contents[{at}].role` must be user or model, not `{other}`"
                )))
            }
        };
        let parts = key(content, "parts")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                TranslateError::invalid(format!("`contents[{at}].parts` must be an array"))
            })?;
        messages.push(Message::new(role, parse_parts(parts, &mut ids)?));
    }
    let mut tools = Vec::new();
    for t in key(body, "tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
    {
        let declarations = key(t, "functionDeclarations").and_then(Value::as_array);
        let Some(declarations) = declarations else {
            return Err(TranslateError::unsupported(
                "only function declarations are served as tools here (not search or code execution)",
            ));
        };
        for d in declarations {
            tools.push(Tool {
                name: key_str(d, "name")
                    .ok_or_else(|| {
                        TranslateError::invalid("a function declaration needs a `name`")
                    })?
                    .to_owned(),
                description: key_str(d, "description").map(str::to_owned),
                parameters: key(d, "parametersJsonSchema")
                    .or_else(|| key(d, "parameters"))
                    .cloned(),
                strict: None,
            });
        }
    }
    let tool_choice = key(body, "toolConfig")
        .and_then(|c| key(c, "functionCallingConfig"))
        .map(|f| {
            let allowed: Vec<&str> = key(f, "allowedFunctionNames")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match key_str(f, "mode") {
                Some("NONE") => ToolChoice::None,
                Some("ANY") | Some("VALIDATED") if allowed.len() == 1 => {
                    ToolChoice::Function(allowed[0].to_owned())
                }
                Some("ANY") => ToolChoice::Required,
                _ => ToolChoice::Auto,
            }
        });
    let config = key(body, "generationConfig")
        .cloned()
        .unwrap_or(Value::Null);
    if count(&config, "candidateCount").is_some_and(|n| n > 1) {
        return Err(TranslateError::unsupported(
            "`candidateCount` > 1 is only served by a Gemini vendor",
        ));
    }
    let reasoning = key(&config, "thinkingConfig").map(|t| {
        let budget = key(t, "thinkingBudget").and_then(Value::as_i64);
        let include = key(t, "includeThoughts").and_then(Value::as_bool);
        Reasoning {
            enabled: match (budget, include) {
                (Some(0), _) => Some(false),
                (Some(_), _) | (_, Some(true)) => Some(true),
                _ => None,
            },
            effort: key_str(t, "thinkingLevel").map(str::to_ascii_lowercase),
            budget_tokens: budget.filter(|b| *b > 0).map(|b| b as u64),
        }
    });
    let response_format = match key_str(&config, "responseMimeType") {
        Some("application/json") => Some(
            match key(&config, "responseJsonSchema").or_else(|| key(&config, "responseSchema")) {
                Some(schema) => ResponseFormat::JsonSchema {
                    name: "response".to_owned(),
                    schema: Some(schema.clone()),
                    strict: None,
                },
                None => ResponseFormat::JsonObject,
            },
        ),
        _ => None,
    };
    Ok(Request {
        model: String::new(),
        messages,
        sampling: Sampling {
            temperature: number(&config, "temperature")?,
            top_p: number(&config, "topP")?,
            top_k: count(&config, "topK"),
            presence_penalty: number(&config, "presencePenalty")?,
            frequency_penalty: number(&config, "frequencyPenalty")?,
            seed: key(&config, "seed").and_then(Value::as_i64),
            stop: key(&config, "stopSequences")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        },
        max_tokens: count(&config, "maxOutputTokens"),
        tools,
        tool_choice,
        parallel_tool_calls: None,
        response_format,
        reasoning,
        stream: false,
        // Gemini always reports usage.
        stream_usage: true,
        user: None,
    })
}

/// Writes a generateContent request body for a Gemini vendor (the model
/// goes in the URL). Consecutive turns of one role are merged, so the
/// results of parallel calls form one content, as Gemini expects.
pub fn encode_request(request: &Request) -> Value {
    let mut out = Map::new();
    let name_of = |id: &str| request.tool_name_of(id).map(str::to_owned);
    let system: Vec<Block> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .flat_map(|m| m.content.iter().cloned())
        .collect();
    if !system.is_empty() {
        out.insert(
            "systemInstruction".into(),
            json!({"parts": encode_parts(&system, &name_of)}),
        );
    }
    let mut contents: Vec<(&str, Vec<Value>)> = Vec::new();
    for m in request.messages.iter().filter(|m| m.role != Role::System) {
        let role = if m.role == Role::Assistant {
            "model"
        } else {
            "user"
        };
        let parts = encode_parts(&m.content, &name_of);
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((r, p)) if *r == role => p.extend(parts),
            _ => contents.push((role, parts)),
        }
    }
    out.insert(
        "contents".into(),
        Value::Array(
            contents
                .into_iter()
                .map(|(role, parts)| json!({"role": role, "parts": parts}))
                .collect(),
        ),
    );
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                let mut d = Map::new();
                d.insert("name".into(), json!(t.name));
                if let Some(desc) = &t.description {
                    d.insert("description".into(), json!(desc));
                }
                if let Some(p) = &t.parameters {
                    d.insert("parametersJsonSchema".into(), p.clone());
                }
                Value::Object(d)
            })
            .collect();
        out.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    if let Some(choice) = &request.tool_choice {
        let config = match choice {
            ToolChoice::Auto => json!({"mode": "AUTO"}),
            ToolChoice::None => json!({"mode": "NONE"}),
            ToolChoice::Required => json!({"mode": "ANY"}),
            ToolChoice::Function(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
        };
        out.insert(
            "toolConfig".into(),
            json!({"functionCallingConfig": config}),
        );
    }
    let mut config = Map::new();
    let s = &request.sampling;
    for (k, v) in [
        ("temperature", s.temperature),
        ("topP", s.top_p),
        ("presencePenalty", s.presence_penalty),
        ("frequencyPenalty", s.frequency_penalty),
    ] {
        if let Some(v) = v {
            config.insert(k.into(), json!(v));
        }
    }
    if let Some(k) = s.top_k {
        config.insert("topK".into(), json!(k));
    }
    if let Some(seed) = s.seed {
        config.insert("seed".into(), json!(seed));
    }
    if !s.stop.is_empty() {
        config.insert("stopSequences".into(), json!(s.stop));
    }
    if let Some(m) = request.max_tokens {
        config.insert("maxOutputTokens".into(), json!(m));
    }
    match &request.response_format {
        Some(ResponseFormat::JsonObject) => {
            config.insert("responseMimeType".into(), json!("application/json"));
        }
        Some(ResponseFormat::JsonSchema { schema, .. }) => {
            config.insert("responseMimeType".into(), json!("application/json"));
            if let Some(schema) = schema {
                config.insert("responseJsonSchema".into(), schema.clone());
            }
        }
        Some(ResponseFormat::Text) | None => {}
    }
    if let Some(r) = &request.reasoning {
        if r.enabled == Some(false) {
            config.insert("thinkingConfig".into(), json!({"thinkingBudget": 0}));
        } else if r.wanted() {
            let mut t = json!({"includeThoughts": true});
            if r.budget_tokens.is_some() || r.effort.is_some() {
                t["thinkingBudget"] = json!(r.budget_or(8192));
            }
            config.insert("thinkingConfig".into(), t);
        }
    }
    if !config.is_empty() {
        out.insert("generationConfig".into(), Value::Object(config));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{ToolCall, ToolResult};

    #[test]
    fn reads_the_sdk_spelling() {
        let r = parse_request(&json!({
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "systemInstruction": {"parts": [{"text": "S"}], "role": "user"},
            "generationConfig": {"maxOutputTokens": 9, "thinkingConfig": {"thinking_budget": 0},
                                 "stopSequences": ["x"]},
            "tools": [{"functionDeclarations": [{"name": "f", "parameters_json_schema": {"type": "object"}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}}
        }))
        .unwrap();
        assert_eq!(r.messages[0], Message::text(Role::System, "S"));
        assert_eq!(r.max_tokens, Some(9));
        assert_eq!(r.reasoning.unwrap().enabled, Some(false));
        assert_eq!(r.tools[0].parameters, Some(json!({"type": "object"})));
        assert_eq!(r.tool_choice, Some(ToolChoice::Function("f".into())));
        assert_eq!(r.sampling.stop, ["x"]);
    }

    #[test]
    fn writes_merged_turns_with_named_results() {
        let req = Request {
            reasoning: Some(Reasoning {
                enabled: Some(true),
                ..Reasoning::default()
            }),
            ..Request::new(
                "g",
                vec![
                    Message::text(Role::System, "S"),
                    Message::text(Role::User, "hi"),
                    Message::new(
                        Role::Assistant,
                        vec![
                            Block::ToolCall(ToolCall {
                                id: "a".into(),
                                name: "f".into(),
                                arguments: "{}".into(),
                            }),
                            Block::ToolCall(ToolCall {
                                id: "b".into(),
                                name: "g".into(),
                                arguments: "{\"z\":1}".into(),
                            }),
                        ],
                    ),
                    Message::new(
                        Role::Tool,
                        vec![Block::ToolResult(ToolResult {
                            call_id: "a".into(),
                            content: vec![Block::Text("{\"ok\":true}".into())],
                            ..ToolResult::default()
                        })],
                    ),
                    Message::new(
                        Role::Tool,
                        vec![Block::ToolResult(ToolResult {
                            call_id: "b".into(),
                            content: vec![Block::Text("plain".into())],
                            ..ToolResult::default()
                        })],
                    ),
                ],
            )
        };
        let out = encode_request(&req);
        assert_eq!(out["systemInstruction"], json!({"parts": [{"text": "S"}]}));
        assert_eq!(
            out["generationConfig"]["thinkingConfig"],
            json!({"includeThoughts": true})
        );
        let c = out["contents"].as_array().unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(
            c[1]["parts"][1]["functionCall"],
            json!({"name": "g", "args": {"z": 1}})
        );
        assert_eq!(
            c[2]["parts"],
            json!([{"functionResponse": {"name": "f", "response": {"ok": true}}},
                   {"functionResponse": {"name": "g", "response": {"result": "plain"}}}])
        );
    }
}
