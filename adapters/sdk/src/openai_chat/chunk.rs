use serde_json::{json, Map, Value};

use super::names::{finish_reason_from, finish_reason_name, role_from, role_name};
use super::response::reasoning_text;
use super::usage::{encode_usage, parse_usage};
use crate::canonical::{ChoiceDelta, ChunkMeta, StreamEvent, ToolCallDelta, Usage};
use crate::json::{as_count, str_member};
use crate::TranslateError;

/// Reads one `chat.completion.chunk` into canonical events: one delta per
/// choice, then the usage if the chunk carries one.
pub fn parse_chunk(chunk: &Value) -> Result<Vec<StreamEvent>, TranslateError> {
    if !chunk.is_object() {
        return Err(TranslateError::upstream(
            "stream chunk is not a JSON object",
        ));
    }
    let mut events = Vec::new();
    match chunk.get("choices") {
        Some(Value::Array(choices)) => {
            for (at, choice) in choices.iter().enumerate() {
                events.push(StreamEvent::Delta(parse_choice_delta(at, choice)));
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => {
            return Err(TranslateError::upstream(
                "stream chunk `choices` is not an array",
            ))
        }
    }
    if let Some(usage) = chunk.get("usage").and_then(parse_usage) {
        events.push(StreamEvent::Usage(usage));
    }
    Ok(events)
}

/// Writes a `chat.completion.chunk` for one choice delta (spec §2.9). `usage`
/// is `null` unless given, as clients expect on every chunk but the last.
pub fn encode_chunk(meta: &ChunkMeta, delta: &ChoiceDelta, usage: Option<&Usage>) -> Value {
    let mut body = Map::new();
    if let Some(role) = delta.role {
        body.insert("role".into(), json!(role_name(role)));
    }
    if let Some(content) = &delta.content {
        body.insert("content".into(), json!(content));
    }
    if let Some(reasoning) = &delta.reasoning {
        body.insert("reasoning_content".into(), json!(reasoning));
    }
    if !delta.tool_calls.is_empty() {
        body.insert(
            "tool_calls".into(),
            Value::Array(
                delta
                    .tool_calls
                    .iter()
                    .map(encode_tool_call_delta)
                    .collect(),
            ),
        );
    }
    let choice = json!({
        "index": delta.index,
        "delta": body,
        "finish_reason": delta.finish_reason.map(finish_reason_name),
        "logprobs": null,
    });
    chunk_envelope(meta, vec![choice], usage)
}

/// Writes the usage-only chunk (`choices: []`) that ends a stream whose
/// client asked for `stream_options.include_usage`.
pub fn encode_usage_chunk(meta: &ChunkMeta, usage: &Usage) -> Value {
    chunk_envelope(meta, Vec::new(), Some(usage))
}

fn chunk_envelope(meta: &ChunkMeta, choices: Vec<Value>, usage: Option<&Usage>) -> Value {
    json!({
        "id": meta.id,
        "object": "chat.completion.chunk",
        "created": meta.created,
        "model": meta.model,
        "choices": choices,
        "usage": usage.map(encode_usage),
    })
}

fn parse_choice_delta(at: usize, choice: &Value) -> ChoiceDelta {
    let delta = choice.get("delta").unwrap_or(&Value::Null);
    let tool_calls = match delta.get("tool_calls") {
        Some(Value::Array(calls)) => calls
            .iter()
            .enumerate()
            .map(|(position, call)| parse_tool_call_delta(position, call))
            .collect(),
        _ => Vec::new(),
    };
    ChoiceDelta {
        index: index_or(choice, at),
        role: str_member(delta, "role").and_then(role_from),
        content: str_member(delta, "content").map(str::to_owned),
        reasoning: reasoning_text(delta).map(str::to_owned),
        tool_calls,
        finish_reason: str_member(choice, "finish_reason").map(finish_reason_from),
    }
}

fn parse_tool_call_delta(position: usize, call: &Value) -> ToolCallDelta {
    let function = call.get("function").unwrap_or(&Value::Null);
    ToolCallDelta {
        index: index_or(call, position),
        id: str_member(call, "id").map(str::to_owned),
        name: str_member(function, "name").map(str::to_owned),
        arguments: str_member(function, "arguments").map(str::to_owned),
    }
}

/// Some vendors leave out `index`; position in the list is the best guess.
fn index_or(value: &Value, position: usize) -> u32 {
    value
        .get("index")
        .and_then(as_count)
        .and_then(|i| u32::try_from(i).ok())
        .unwrap_or(u32::try_from(position).unwrap_or(u32::MAX))
}

fn encode_tool_call_delta(call: &ToolCallDelta) -> Value {
    let mut out = Map::new();
    out.insert("index".into(), json!(call.index));
    if let Some(id) = &call.id {
        out.insert("id".into(), json!(id));
        out.insert("type".into(), json!("function"));
    }
    let mut function = Map::new();
    if let Some(name) = &call.name {
        function.insert("name".into(), json!(name));
    }
    if let Some(arguments) = &call.arguments {
        function.insert("arguments".into(), json!(arguments));
    }
    out.insert("function".into(), Value::Object(function));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{FinishReason, Role};

    fn meta() -> ChunkMeta {
        ChunkMeta {
            id: "chatcmpl-9".into(),
            created: 42,
            model: "client-model".into(),
        }
    }

    #[test]
    fn reads_deltas_and_usage() {
        let chunk = json!({
            "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi",
                                              "reasoning_content": "r"},
                         "finish_reason": null}],
            "usage": null
        });
        assert_eq!(
            parse_chunk(&chunk).unwrap(),
            vec![StreamEvent::Delta(ChoiceDelta {
                index: 0,
                role: Some(Role::Assistant),
                content: Some("Hi".into()),
                reasoning: Some("r".into()),
                tool_calls: vec![],
                finish_reason: None,
            })]
        );
        let usage_only =
            json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}});
        assert_eq!(
            parse_chunk(&usage_only).unwrap(),
            vec![StreamEvent::Usage(Usage {
                input_tokens: 3,
                output_tokens: 4,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                reasoning_tokens: 0,
            })]
        );
    }

    #[test]
    fn reads_tool_call_fragments() {
        let chunk = json!({"choices": [{"delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "f", "arguments": ""}},
            {"function": {"arguments": "{\"a\""}}
        ]}, "finish_reason": "tool_calls"}]});
        let events = parse_chunk(&chunk).unwrap();
        let StreamEvent::Delta(delta) = &events[0] else {
            panic!("expected a delta, got {events:?}");
        };
        assert_eq!(delta.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(delta.tool_calls[0].id.as_deref(), Some("call_1"));
        assert_eq!(delta.tool_calls[1].index, 1);
        assert_eq!(delta.tool_calls[1].arguments.as_deref(), Some("{\"a\""));
    }

    #[test]
    fn encoded_chunks_have_the_spec_shape_and_round_trip() {
        let delta = ChoiceDelta {
            index: 0,
            role: None,
            content: Some("Hello".into()),
            reasoning: None,
            tool_calls: vec![ToolCallDelta {
                index: 0,
                id: Some("c".into()),
                name: Some("f".into()),
                arguments: Some("{}".into()),
            }],
            finish_reason: Some(FinishReason::Stop),
        };
        let chunk = encode_chunk(&meta(), &delta, None);
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "client-model");
        assert_eq!(chunk["usage"], Value::Null);
        assert_eq!(chunk["choices"][0]["finish_reason"], "stop");
        assert_eq!(
            parse_chunk(&chunk).unwrap(),
            vec![StreamEvent::Delta(delta)]
        );
    }

    #[test]
    fn usage_chunk_has_no_choices() {
        let usage = Usage {
            input_tokens: 5,
            output_tokens: 6,
            cache_read_tokens: 1,
            cache_write_tokens: 0,
            reasoning_tokens: 2,
        };
        let chunk = encode_usage_chunk(&meta(), &usage);
        assert_eq!(chunk["choices"], json!([]));
        assert_eq!(chunk["usage"]["total_tokens"], 11);
        assert_eq!(
            parse_chunk(&chunk).unwrap(),
            vec![StreamEvent::Usage(usage)]
        );
    }

    #[test]
    fn non_objects_are_upstream_errors() {
        assert!(matches!(
            parse_chunk(&json!([1])),
            Err(TranslateError::UpstreamFormat(_))
        ));
        assert!(matches!(
            parse_chunk(&json!({"choices": 1})),
            Err(TranslateError::UpstreamFormat(_))
        ));
    }
}
