//! Turning a [`Plan`] into OpenAI wire objects: one `chat.completion`, or the
//! sequence of `chat.completion.chunk` payloads of a stream.

use serde_json::{json, Value};

use crate::chat::deltas::{spaced, thirds};
use crate::chat::plan::{Answer, Plan, Usage};

/// What stays the same across every chunk of one answer.
#[derive(Clone, Debug)]
pub struct Meta {
    pub id: String,
    pub created: u64,
    pub model: String,
}

/// What a request's answer says in one protocol: the OpenAI usage object.
pub fn usage(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt,
        "completion_tokens": u.completion,
        "total_tokens": u.prompt + u.completion,
        "prompt_tokens_details": { "cached_tokens": u.cached },
        "completion_tokens_details": { "reasoning_tokens": u.reasoning },
    })
}

pub fn completion(meta: &Meta, plan: &Plan) -> Value {
    let mut message = json!({ "role": "assistant" });
    match &plan.answer {
        Answer::Text(words) => message["content"] = json!(words.join(" ")),
        Answer::Refused => message["content"] = json!(""),
        Answer::Tools(calls) => {
            message["content"] = Value::Null;
            message["tool_calls"] = calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id(),
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments },
                    })
                })
                .collect();
        }
    }
    if !plan.reasoning.is_empty() {
        message["reasoning_content"] = json!(plan.reasoning.join(" "));
    }
    json!({
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "system_fingerprint": "fp_sim",
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": plan.finish.openai(),
        }],
        "usage": usage(&plan.usage),
    })
}

/// The JSON payloads of a stream, in order, without the final `[DONE]`.
pub fn chunks(meta: &Meta, plan: &Plan, include_usage: bool) -> Vec<Value> {
    let chunk = |choices: Value| {
        let mut c = json!({
            "id": meta.id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "system_fingerprint": "fp_sim",
            "choices": choices,
        });
        if include_usage {
            c["usage"] = Value::Null;
        }
        c
    };
    let delta = |delta: Value, finish: Option<&str>| {
        chunk(json!([{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }]))
    };

    let mut out = vec![delta(json!({ "role": "assistant", "content": "" }), None)];
    for piece in spaced(&plan.reasoning) {
        out.push(delta(json!({ "reasoning_content": piece }), None));
    }
    match &plan.answer {
        Answer::Text(words) => {
            for piece in spaced(words) {
                out.push(delta(json!({ "content": piece }), None));
            }
        }
        Answer::Refused => {}
        Answer::Tools(calls) => {
            for (i, call) in calls.iter().enumerate() {
                out.push(delta(
                    json!({ "tool_calls": [{
                        "index": i,
                        "id": call.id(),
                        "type": "function",
                        "function": { "name": call.name, "arguments": "" },
                    }]}),
                    None,
                ));
                for fragment in thirds(&call.arguments) {
                    out.push(delta(
                        json!({ "tool_calls": [{ "index": i, "function": { "arguments": fragment } }] }),
                        None,
                    ));
                }
            }
        }
    }
    out.push(delta(json!({}), Some(plan.finish.openai())));
    if include_usage {
        let mut last = chunk(json!([]));
        last["usage"] = usage(&plan.usage);
        out.push(last);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::plan::{Finish, ToolCall};

    fn meta() -> Meta {
        Meta {
            id: "chatcmpl-sim-1".into(),
            created: 7,
            model: "m".into(),
        }
    }

    fn text_plan(reasoning: &[&str], words: &[&str]) -> Plan {
        Plan {
            reasoning: reasoning.iter().map(|s| s.to_string()).collect(),
            answer: Answer::Text(words.iter().map(|s| s.to_string()).collect()),
            finish: Finish::Stop,
            usage: Usage {
                prompt: 1,
                completion: 2,
                cached: 0,
                reasoning: 0,
                cache_write: 0,
            },
        }
    }

    #[test]
    fn stream_concatenates_back_to_content() {
        let plan = text_plan(&["a", "b"], &["x", "y", "z"]);
        let chunks = chunks(&meta(), &plan, false);
        assert_eq!(chunks.len(), 1 + 2 + 3 + 1);
        let text: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(text, "x y z");
        let reasoning: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["reasoning_content"].as_str())
            .collect();
        assert_eq!(reasoning, "a b");
        assert!(chunks.iter().all(|c| c.get("usage").is_none()));
        assert_eq!(chunks[6]["choices"][0]["finish_reason"], "stop");
        assert!(chunks[..6]
            .iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null()));
    }

    #[test]
    fn include_usage_adds_null_usage_and_a_final_usage_chunk() {
        let chunks = chunks(&meta(), &text_plan(&[], &["x"]), true);
        let (last, rest) = chunks.split_last().expect("chunks");
        assert!(rest
            .iter()
            .all(|c| c["usage"].is_null() && c.get("usage").is_some()));
        assert_eq!(last["choices"], json!([]));
        assert_eq!(last["usage"]["total_tokens"], 3);
    }

    #[test]
    fn tool_call_stream_reassembles_arguments() {
        let call = ToolCall {
            hex: "1".into(),
            name: "f".into(),
            arguments: r#"{"query":"é"}"#.into(),
        };
        let plan = Plan {
            answer: Answer::Tools(vec![call]),
            finish: Finish::Tools,
            ..text_plan(&[], &[])
        };
        let chunks = chunks(&meta(), &plan, false);
        let args: String = chunks
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
            })
            .collect();
        assert_eq!(args, r#"{"query":"é"}"#);
        assert_eq!(
            chunks[1]["choices"][0]["delta"]["tool_calls"][0]["id"],
            "call_1"
        );
        assert_eq!(chunks.len(), 1 + 1 + 3 + 1);
    }

    #[test]
    fn completion_shape() {
        let v = completion(&meta(), &text_plan(&["hm"], &[]));
        assert_eq!(v["choices"][0]["message"]["content"], "");
        assert_eq!(v["choices"][0]["message"]["reasoning_content"], "hm");
        assert_eq!(
            v["usage"]["completion_tokens_details"]["reasoning_tokens"],
            0
        );
    }
}
