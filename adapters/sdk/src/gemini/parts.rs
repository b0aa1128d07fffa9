//! Gemini `parts` ⇄ canonical blocks, shared by requests and answers.

use serde_json::{json, Map, Value};

use super::{key, key_str};
use crate::canonical::{Block, ImageSource, ToolCall, ToolResult};
use crate::json::arguments_object;
use crate::TranslateError;

/// Ids for function calls that came without one, and the matching of
/// function responses to calls (by id, else the earliest unanswered call of
/// the same name).
#[derive(Debug)]
pub struct CallIds {
    prefix: String,
    next: usize,
    pending: Vec<(String, String)>,
}

impl CallIds {
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            next: 0,
            pending: Vec::new(),
        }
    }

    fn call(&mut self, name: &str, given: Option<&str>) -> String {
        let id = match given {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => format!("{}{}", self.prefix, self.next),
        };
        self.next += 1;
        self.pending.push((name.to_owned(), id.clone()));
        id
    }

    fn response(&mut self, name: &str, given: Option<&str>) -> String {
        if let Some(id) = given.filter(|id| !id.is_empty()) {
            self.pending.retain(|(_, p)| p != id);
            return id.to_owned();
        }
        match self.pending.iter().position(|(n, _)| n == name) {
            Some(at) => self.pending.remove(at).1,
            None => {
                let id = format!("{}{}", self.prefix, self.next);
                self.next += 1;
                id
            }
        }
    }
}

/// What a function response says, as tool-result text: `{"result": s}` and
/// `{"error": s}` (the shapes [`encode_parts`] writes) give back `s`; any
/// other object its JSON.
fn response_text(response: &Value) -> (String, bool) {
    if let Some(o) = response.as_object() {
        if o.len() == 1 {
            if let Some(Value::String(s)) = o.get("result") {
                return (s.clone(), false);
            }
            if let Some(err) = o.get("error") {
                return (
                    err.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| err.to_string()),
                    true,
                );
            }
        }
    }
    (response.to_string(), false)
}

/// Appends a block, merging what Gemini splits over several parts (a
/// streamed answer kept part by part): adjacent text, and a thought's text
/// and signature.
fn push(blocks: &mut Vec<Block>, block: Block) {
    match (blocks.last_mut(), block) {
        (Some(Block::Text(prev)), Block::Text(t)) => prev.push_str(&t),
        (
            Some(Block::Thinking {
                text: prev,
                signature: None,
            }),
            Block::Thinking { text, signature },
        ) => {
            prev.push_str(&text);
            if let Some(Block::Thinking { signature: s, .. }) = blocks.last_mut() {
                *s = signature;
            }
        }
        (_, block) => blocks.push(block),
    }
}

/// Reads a content's parts into blocks (see the module docs of `gemini` for
/// where signatures go).
pub fn parse_parts(parts: &[Value], ids: &mut CallIds) -> Result<Vec<Block>, TranslateError> {
    let mut blocks = Vec::new();
    for part in parts {
        let signature = key_str(part, "thoughtSignature").map(str::to_owned);
        let text = key_str(part, "text");
        if key(part, "thought").and_then(Value::as_bool) == Some(true) {
            push(
                &mut blocks,
                Block::Thinking {
                    text: text.unwrap_or_default().to_owned(),
                    signature,
                },
            );
            continue;
        }
        if let Some(sig) = signature {
            // It signs the thought before this part.
            push(
                &mut blocks,
                Block::Thinking {
                    text: String::new(),
                    signature: Some(sig),
                },
            );
        }
        if let Some(call) = key(part, "functionCall") {
            let name = key_str(call, "name").unwrap_or_default();
            let id = ids.call(name, key_str(call, "id"));
            blocks.push(Block::ToolCall(ToolCall {
                id,
                name: name.to_owned(),
                arguments: key(call, "args")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".to_owned()),
            }));
        } else if let Some(resp) = key(part, "functionResponse") {
            let name = key_str(resp, "name").unwrap_or_default();
            let call_id = ids.response(name, key_str(resp, "id"));
            let (text, is_error) = response_text(key(resp, "response").unwrap_or(&Value::Null));
            blocks.push(Block::ToolResult(ToolResult {
                call_id,
                name: Some(name.to_owned()),
                content: vec![Block::Text(text)],
                is_error,
            }));
        } else if let Some(inline) = key(part, "inlineData") {
            blocks.push(Block::Image(ImageSource::Base64 {
                media_type: key_str(inline, "mimeType")
                    .unwrap_or("image/png")
                    .to_owned(),
                data: key_str(inline, "data").unwrap_or_default().to_owned(),
            }));
        } else if let Some(file) = key(part, "fileData") {
            blocks.push(Block::Image(ImageSource::Url(
                key_str(file, "fileUri").unwrap_or_default().to_owned(),
            )));
        } else if let Some(t) = text {
            if !t.is_empty() {
                push(&mut blocks, Block::Text(t.to_owned()));
            }
        } else if key(part, "executableCode").is_some()
            || key(part, "codeExecutionResult").is_some()
        {
            return Err(TranslateError::unsupported(
                "code execution parts are only served by a Gemini vendor",
            ));
        }
    }
    Ok(blocks)
}

fn mime_of(url: &str) -> &'static str {
    let lower = url.to_ascii_lowercase();
    if lower.ends_with(".png") {
        "image/png"
    } else if lower.ends_with(".gif") {
        "image/gif"
    } else if lower.ends_with(".webp") {
        "image/webp"
    } else {
        "image/jpeg"
    }
}

/// Writes blocks as parts. `name_of` names a tool result's function when
/// the result does not (OpenAI and Anthropic results carry only the call id).
pub fn encode_parts(blocks: &[Block], name_of: &dyn Fn(&str) -> Option<String>) -> Vec<Value> {
    let mut parts: Vec<Value> = Vec::new();
    // A signature waits for the first non-thought part after its thought,
    // which is where Gemini puts it.
    let mut pending_signature: Option<String> = None;
    for b in blocks {
        let mut part = match b {
            Block::Thinking { text, signature } => {
                if let Some(sig) = signature {
                    pending_signature = Some(sig.clone());
                }
                if text.is_empty() {
                    continue;
                }
                parts.push(json!({"text": text, "thought": true}));
                continue;
            }
            Block::RedactedThinking(_) => continue,
            Block::Text(t) => json!({"text": t}),
            Block::Image(ImageSource::Base64 { media_type, data }) => {
                json!({"inlineData": {"mimeType": media_type, "data": data}})
            }
            Block::Image(ImageSource::Url(url)) => {
                json!({"fileData": {"mimeType": mime_of(url), "fileUri": url}})
            }
            Block::ToolCall(c) => {
                let mut call = Map::new();
                call.insert("name".into(), json!(c.name));
                call.insert("args".into(), arguments_object(&c.arguments));
                json!({"functionCall": call})
            }
            Block::ToolResult(r) => {
                let name = r
                    .name
                    .clone()
                    .or_else(|| name_of(&r.call_id))
                    .unwrap_or_else(|| "tool".to_owned());
                let text = r.text();
                let response = if r.is_error {
                    json!({"error": text})
                } else {
                    match serde_json::from_str::<Value>(&text) {
                        Ok(v @ Value::Object(_)) => v,
                        _ => json!({"result": text}),
                    }
                };
                json!({"functionResponse": {"name": name, "response": response}})
            }
        };
        if let Some(sig) = pending_signature.take() {
            part["thoughtSignature"] = json!(sig);
        }
        parts.push(part);
    }
    if let Some(sig) = pending_signature {
        match parts.last_mut() {
            Some(last) if last["thought"] == json!(true) => last["thoughtSignature"] = json!(sig),
            _ => parts.push(json!({"text": "", "thought": true, "thoughtSignature": sig})),
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_follow_their_thought_both_ways() {
        let parts = vec![
            json!({"text": "Let me ", "thought": true}),
            json!({"text": "think", "thought": true}),
            json!({"functionCall": {"name": "f", "args": {"q": 1}}, "thoughtSignature": "U0lH"}),
            json!({"functionCall": {"name": "f", "args": {"q": 2}}}),
        ];
        let blocks = parse_parts(&parts, &mut CallIds::new("call_r_")).unwrap();
        assert_eq!(
            blocks,
            vec![
                Block::Thinking {
                    text: "Let me think".into(),
                    signature: Some("U0lH".into())
                },
                Block::ToolCall(ToolCall {
                    id: "call_r_0".into(),
                    name: "f".into(),
                    arguments: "{\"q\":1}".into()
                }),
                Block::ToolCall(ToolCall {
                    id: "call_r_1".into(),
                    name: "f".into(),
                    arguments: "{\"q\":2}".into()
                }),
            ]
        );
        let back = encode_parts(&blocks, &|_| None);
        assert_eq!(
            back,
            vec![
                json!({"text": "Let me think", "thought": true}),
                json!({"functionCall": {"name": "f", "args": {"q": 1}}, "thoughtSignature": "U0lH"}),
                json!({"functionCall": {"name": "f", "args": {"q": 2}}}),
            ]
        );
    }

    #[test]
    fn responses_answer_calls_by_name_in_order() {
        let mut ids = CallIds::new("c");
        let calls = parse_parts(
            &[
                json!({"functionCall": {"name": "f", "args": {}}}),
                json!({"functionCall": {"name": "f", "args": {}}}),
            ],
            &mut ids,
        )
        .unwrap();
        let results = parse_parts(
            &[
                json!({"functionResponse": {"name": "f", "response": {"result": "one"}}}),
                json!({"functionResponse": {"name": "f", "response": {"error": "bad"}}}),
            ],
            &mut ids,
        )
        .unwrap();
        let ids_of: Vec<String> = calls
            .iter()
            .map(|b| match b {
                Block::ToolCall(c) => c.id.clone(),
                _ => panic!(),
            })
            .collect();
        let Block::ToolResult(r1) = &results[1] else {
            panic!()
        };
        let Block::ToolResult(r0) = &results[0] else {
            panic!()
        };
        assert_eq!(
            (r0.call_id.as_str(), r0.text(), r0.is_error),
            (ids_of[0].as_str(), "one".into(), false)
        );
        assert_eq!(
            (r1.call_id.as_str(), r1.text(), r1.is_error),
            (ids_of[1].as_str(), "bad".into(), true)
        );
        // And back: names looked up, shapes kept.
        let back = encode_parts(&results, &|_| None);
        assert_eq!(
            back[0],
            json!({"functionResponse": {"name": "f", "response": {"result": "one"}}})
        );
        assert_eq!(
            back[1],
            json!({"functionResponse": {"name": "f", "response": {"error": "bad"}}})
        );
    }

    #[test]
    fn snake_case_parts() {
        let blocks = parse_parts(
            &[json!({"function_call": {"name": "g", "args": {}}, "thought_signature": "QQ=="})],
            &mut CallIds::new("x"),
        )
        .unwrap();
        assert_eq!(blocks.len(), 2);
        assert!(matches!(&blocks[0], Block::Thinking { signature: Some(s), .. } if s == "QQ=="));
    }
}
