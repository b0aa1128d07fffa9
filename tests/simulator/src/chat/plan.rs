//! Deciding the answer to a chat request: pure, so the rules documented in
//! the module `chat` can be unit-tested without HTTP.

use serde_json::json;

use super::request::ChatRequest;
use crate::tokens::{count_words, fnv1a, reply_words, REASONING};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Content words; the content is these joined by single spaces.
    Text(Vec<String>),
    Tool(ToolCall),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
    pub reasoning: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Reasoning words (empty for non-reasoning models or thinking off).
    pub reasoning: Vec<String>,
    pub answer: Answer,
    pub finish_reason: &'static str,
    pub usage: Usage,
}

pub fn plan(req: &ChatRequest) -> Plan {
    let reasoning: Vec<String> = if req.is_reasoning_model() && !req.thinking_disabled {
        REASONING.iter().map(|w| (*w).to_owned()).collect()
    } else {
        Vec::new()
    };
    let reasoning_tokens = reasoning.len() as u64;

    let (answer, finish_reason, answer_tokens) = match &req.tool_name {
        Some(name) => {
            let arguments = json!({ "query": req.last_user }).to_string();
            let tokens = count_words(&arguments);
            let call = ToolCall {
                id: format!("call_{:08x}", fnv1a(&req.last_user) as u32),
                name: name.clone(),
                arguments,
            };
            (Answer::Tool(call), "tool_calls", tokens)
        }
        None => {
            let mut words = reply_words(&req.last_user);
            let mut finish = "stop";
            // Reasoning is never cut, but it eats into the budget first.
            if let Some(max) = req.max_tokens {
                let allowed = max.saturating_sub(reasoning_tokens);
                if words.len() as u64 > allowed {
                    words.truncate(allowed as usize);
                    finish = "length";
                }
            }
            let tokens = words.len() as u64;
            (Answer::Text(words), finish, tokens)
        }
    };

    Plan {
        reasoning,
        answer,
        finish_reason,
        usage: Usage {
            prompt: req.prompt_tokens,
            completion: reasoning_tokens + answer_tokens,
            cached: req.cached_tokens,
            reasoning: reasoning_tokens,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::reply_len;
    use serde_json::{json, Value};

    fn plan_for(body: Value) -> Plan {
        match ChatRequest::parse(body.to_string().as_bytes()) {
            Ok(r) => plan(&r),
            Err(e) => panic!("unexpected error {e:?}"),
        }
    }

    const MSG: &str = "What is the capital of France";

    #[test]
    fn plain_reply_stops_naturally() {
        let p = plan_for(json!({"model": "sim-chat", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": MSG}]}));
        let len = reply_len(MSG) as u64;
        assert_eq!(p.finish_reason, "stop");
        assert!(p.reasoning.is_empty());
        assert_eq!(
            p.usage,
            Usage {
                prompt: 3 + 7,
                completion: len,
                cached: 3,
                reasoning: 0
            }
        );
        let Answer::Text(words) = p.answer else {
            panic!("expected text")
        };
        assert!(words
            .join(" ")
            .starts_with("Simulated reply to: What is the capital of France."));
    }

    #[test]
    fn max_tokens_truncates() {
        let p = plan_for(json!({"messages": [{"role": "user", "content": MSG}], "max_tokens": 5}));
        assert_eq!(p.finish_reason, "length");
        assert_eq!(p.usage.completion, 5);
        assert_eq!(
            p.answer,
            Answer::Text(
                ["Simulated", "reply", "to:", "What", "is"]
                    .map(String::from)
                    .to_vec()
            )
        );
    }

    #[test]
    fn reasoning_counts_against_max_tokens() {
        let body = |max: Value| {
            json!({"model": "sim-reasoner", "max_tokens": max,
            "messages": [{"role": "user", "content": MSG}]})
        };
        let p = plan_for(body(json!(12)));
        assert_eq!(p.reasoning.len(), 8);
        assert_eq!(p.finish_reason, "length");
        assert_eq!(p.usage.completion, 12);
        assert_eq!(p.usage.reasoning, 8);

        // Smaller than the reasoning itself: reasoning is kept, content empty.
        let p = plan_for(body(json!(3)));
        assert_eq!(p.answer, Answer::Text(vec![]));
        assert_eq!((p.finish_reason, p.usage.completion), ("length", 8));

        let p = plan_for(body(json!(null)));
        assert_eq!(p.finish_reason, "stop");
        assert_eq!(p.usage.completion, 8 + reply_len(MSG) as u64);
    }

    #[test]
    fn thinking_can_be_switched_off() {
        let p = plan_for(json!({"model": "sim-reasoner", "enable_thinking": false,
            "messages": [{"role": "user", "content": MSG}]}));
        assert!(p.reasoning.is_empty());
        assert_eq!(p.usage.reasoning, 0);
    }

    #[test]
    fn tools_produce_one_call() {
        let p = plan_for(
            json!({"messages": [{"role": "user", "content": "find \"rust\" docs"}],
            "tools": [{"type": "function", "function": {"name": "web_search", "parameters": {}}}]}),
        );
        assert_eq!(p.finish_reason, "tool_calls");
        let Answer::Tool(call) = p.answer else {
            panic!("expected a tool call")
        };
        assert_eq!(call.name, "web_search");
        assert_eq!(call.arguments, r#"{"query":"find \"rust\" docs"}"#);
        assert_eq!(
            call.id,
            format!("call_{:08x}", fnv1a("find \"rust\" docs") as u32)
        );
        assert_eq!(p.usage.completion, 3);
    }
}
