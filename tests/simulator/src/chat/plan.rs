//! Deciding the answer to a chat request: pure, so the rules documented in
//! the module `chat` can be unit-tested without HTTP.

use serde_json::json;

use super::request::{canonical_json, ChatRequest};
use crate::tokens::{count_words, fnv1a, reply_words, reply_words_of, REASONING};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    /// The hex part of the id; each dialect adds its prefix (`call_`, `toolu_`).
    pub hex: String,
    pub name: String,
    pub arguments: String,
}

impl ToolCall {
    /// The OpenAI-style id.
    pub fn id(&self) -> String {
        format!("call_{}", self.hex)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Content words; the content is these joined by single spaces.
    Text(Vec<String>),
    Tools(Vec<ToolCall>),
    /// A content refusal: no content at all.
    Refused,
}

/// Why the answer ended, before any dialect names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finish {
    Stop,
    Length,
    Tools,
    /// A stop sequence (this one) cut the content.
    StopSequence(String),
    Refused,
    /// `[[sim:finish=RAW]]`: this word, verbatim, in every dialect.
    Raw(String),
}

impl Finish {
    pub fn openai(&self) -> &str {
        match self {
            Finish::Stop | Finish::StopSequence(_) => "stop",
            Finish::Length => "length",
            Finish::Tools => "tool_calls",
            Finish::Refused => "content_filter",
            Finish::Raw(r) => r,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
    pub reasoning: u64,
    /// Prompt tokens written to the cache (Anthropic only).
    pub cache_write: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Reasoning words (empty for non-reasoning models or thinking off).
    pub reasoning: Vec<String>,
    pub answer: Answer,
    pub finish: Finish,
    pub usage: Usage,
}

/// The `i`-th call of an answer (0-based). Call 0: id hex from
/// fnv1a(last user), arguments `{"query":<last user>}`; call i ≥ 1: id hex
/// from fnv1a(last user + "#" + i), arguments `{"index":i,"query":<last
/// user>}` (canonical: compact, keys sorted).
fn call(req: &ChatRequest, name: &str, i: usize) -> ToolCall {
    let (seed, arguments) = if i == 0 {
        (req.last_user.clone(), json!({ "query": req.last_user }))
    } else {
        (
            format!("{}#{i}", req.last_user),
            json!({ "query": req.last_user, "index": i }),
        )
    };
    ToolCall {
        hex: format!("{:08x}", fnv1a(&seed) as u32),
        name: name.to_owned(),
        arguments: canonical_json(&arguments),
    }
}

pub fn plan(req: &ChatRequest) -> Plan {
    let reasoning: Vec<String> = if req.thinks() {
        REASONING.iter().map(|w| (*w).to_owned()).collect()
    } else {
        Vec::new()
    };
    let reasoning_tokens = reasoning.len() as u64;
    let d = &req.directives;

    let (answer, mut finish, answer_tokens) = if d.refuse {
        (Answer::Refused, Finish::Refused, 0)
    } else if let (None, Some(name)) = (&req.last_tool_result, &req.tool_name) {
        let names: Vec<&String> = if d.parallel {
            req.tools.iter().collect()
        } else {
            vec![name]
        };
        let calls: Vec<ToolCall> = names
            .iter()
            .enumerate()
            .map(|(i, n)| call(req, n, i))
            .collect();
        let tokens = calls.iter().map(|c| count_words(&c.arguments)).sum();
        (Answer::Tools(calls), Finish::Tools, tokens)
    } else {
        // The reply answers the last tool result when the conversation ends with one.
        let subject = req.last_tool_result.as_deref().unwrap_or(&req.last_user);
        let mut words = match d.words {
            Some(n) => reply_words_of(subject, n),
            None => reply_words(subject),
        };
        let mut finish = Finish::Stop;
        if let Some(at) = words.iter().position(|w| req.stop.iter().any(|s| s == w)) {
            finish = Finish::StopSequence(words[at].clone());
            words.truncate(at);
        }
        // Reasoning is never cut, but it eats into the budget first.
        if let Some(max) = req.max_tokens {
            let allowed = max.saturating_sub(reasoning_tokens);
            if words.len() as u64 > allowed {
                words.truncate(allowed as usize);
                finish = Finish::Length;
            }
        }
        let tokens = words.len() as u64;
        (Answer::Text(words), finish, tokens)
    };
    if let Some(raw) = &d.finish {
        finish = Finish::Raw(raw.clone());
    }

    Plan {
        reasoning,
        answer,
        finish,
        usage: Usage {
            prompt: req.prompt_tokens,
            completion: reasoning_tokens + answer_tokens,
            cached: req.cached_tokens,
            reasoning: reasoning_tokens,
            cache_write: req.cache_write_tokens,
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
    fn the_words_directive_sets_the_reply_length() {
        let p = plan_for(json!({"model": "sim-chat", "messages": [
            {"role": "user", "content": format!("{MSG} [[sim:words=5000]]")}]}));
        let Answer::Text(words) = &p.answer else {
            panic!("expected text")
        };
        assert_eq!(words.len(), 5000);
        assert_eq!(p.usage.completion, 5000);
        // Out of range: the usual length.
        let p = plan_for(json!({"model": "sim-chat", "messages": [
            {"role": "user", "content": format!("{MSG} [[sim:words=0]]")}]}));
        assert_eq!(p.usage.completion, reply_len(MSG) as u64);
    }

    #[test]
    fn plain_reply_stops_naturally() {
        let p = plan_for(json!({"model": "sim-chat", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": MSG}]}));
        let len = reply_len(MSG) as u64;
        assert_eq!(p.finish, Finish::Stop);
        assert!(p.reasoning.is_empty());
        assert_eq!(
            p.usage,
            Usage {
                prompt: 3 + 7,
                completion: len,
                cached: 3,
                reasoning: 0,
                cache_write: 0,
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
        assert_eq!(p.finish, Finish::Length);
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
        assert_eq!(p.finish, Finish::Length);
        assert_eq!(p.usage.completion, 12);
        assert_eq!(p.usage.reasoning, 8);

        // Smaller than the reasoning itself: reasoning is kept, content empty.
        let p = plan_for(body(json!(3)));
        assert_eq!(p.answer, Answer::Text(vec![]));
        assert_eq!((p.finish, p.usage.completion), (Finish::Length, 8));

        let p = plan_for(body(json!(null)));
        assert_eq!(p.finish, Finish::Stop);
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
        assert_eq!(p.finish, Finish::Tools);
        let Answer::Tools(calls) = p.answer else {
            panic!("expected a tool call")
        };
        let call = &calls[0];
        assert_eq!(call.name, "web_search");
        assert_eq!(call.arguments, r#"{"query":"find \"rust\" docs"}"#);
        assert_eq!(
            call.id(),
            format!("call_{:08x}", fnv1a("find \"rust\" docs") as u32)
        );
        assert_eq!(p.usage.completion, 3);
    }

    fn tools_body(text: &str) -> Value {
        json!({"messages": [{"role": "user", "content": text}],
               "tools": [{"type": "function", "function": {"name": "a"}},
                         {"type": "function", "function": {"name": "b"}}]})
    }

    #[test]
    fn parallel_calls_every_tool_with_indexed_arguments() {
        let p = plan_for(tools_body("x y [[sim:parallel]]"));
        let Answer::Tools(calls) = p.answer else {
            panic!()
        };
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].arguments, r#"{"query":"x y"}"#);
        assert_eq!(calls[1].arguments, r#"{"index":1,"query":"x y"}"#);
        assert_eq!(calls[1].hex, format!("{:08x}", fnv1a("x y#1") as u32));
        assert_ne!(calls[0].hex, calls[1].hex);
    }

    #[test]
    fn a_conversation_ending_in_a_tool_result_gets_a_reply_to_it() {
        let mut body = tools_body("x");
        body["messages"].as_array_mut().unwrap().extend([
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "a", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "c", "content": "noon exactly"}),
        ]);
        let p = plan_for(body);
        assert_eq!(p.finish, Finish::Stop);
        let Answer::Text(words) = p.answer else {
            panic!()
        };
        assert!(words
            .join(" ")
            .starts_with("Simulated reply to: noon exactly."));
    }

    #[test]
    fn stop_sequences_refusals_and_raw_reasons() {
        let p =
            plan_for(json!({"stop": ["reply"], "messages": [{"role": "user", "content": MSG}]}));
        assert_eq!(p.finish, Finish::StopSequence("reply".into()));
        assert_eq!(p.answer, Answer::Text(vec!["Simulated".into()]));
        let p = plan_for(json!({"messages": [{"role": "user", "content": "x [[sim:refuse]]"}]}));
        assert_eq!((p.answer, p.finish), (Answer::Refused, Finish::Refused));
        let p =
            plan_for(json!({"messages": [{"role": "user", "content": "x [[sim:finish=eos_x]]"}]}));
        assert_eq!(p.finish, Finish::Raw("eos_x".into()));
    }

    #[test]
    fn thinking_on_request_for_any_model() {
        let p = plan_for(json!({"model": "sim-chat", "reasoning_effort": "low",
            "messages": [{"role": "user", "content": MSG}]}));
        assert_eq!(p.reasoning.len(), 8);
    }

    #[test]
    fn call_zero_keeps_the_single_call_id_and_a_forced_tool_stays_alone() {
        let mut body = tools_body("x y [[sim:parallel]]");
        let single = plan_for(tools_body("x y"));
        let p = plan_for(body.clone());
        let (Answer::Tools(one), Answer::Tools(many)) = (single.answer, p.answer) else {
            panic!("expected tool calls")
        };
        assert_eq!(one[0], many[0]);
        assert_eq!(one[0].hex, format!("{:08x}", fnv1a("x y") as u32));
        body["tool_choice"] = json!({"type": "function", "function": {"name": "b"}});
        let Answer::Tools(forced) = plan_for(body).answer else {
            panic!("expected a tool call")
        };
        assert_eq!(forced.len(), 1);
        assert_eq!(
            (forced[0].name.as_str(), forced[0].arguments.as_str()),
            ("b", r#"{"query":"x y"}"#)
        );
        // Two calls: 2 + 2 argument words.
        assert_eq!(p.usage.completion, 4);
    }

    #[test]
    fn a_tool_result_reply_is_shaped_like_any_reply() {
        let mut body = tools_body("x");
        body["max_tokens"] = json!(4);
        body["stop"] = json!("zzz");
        if let Some(m) = body["messages"].as_array_mut() {
            m.push(json!({"role": "tool", "tool_call_id": "c", "content": "noon exactly"}));
        }
        let p = plan_for(body);
        assert_eq!(p.finish, Finish::Length);
        assert_eq!(
            p.answer,
            Answer::Text(
                ["Simulated", "reply", "to:", "noon"]
                    .map(String::from)
                    .to_vec()
            )
        );
    }

    #[test]
    fn stop_sequences_come_before_the_budget() {
        let ask = |stop: Value, max: Value| {
            plan_for(json!({"stop": stop, "max_tokens": max,
                "messages": [{"role": "user", "content": "a b c d e"}]}))
        };
        // "c" is word 6 of the reply: the stop cuts at 5, within a budget of 9.
        let p = ask(json!(["nope", "c"]), json!(9));
        assert_eq!(p.finish, Finish::StopSequence("c".into()));
        assert_eq!(p.usage.completion, 5);
        // A budget below the stop still says length.
        let p = ask(json!("c"), json!(2));
        assert_eq!((p.finish, p.usage.completion), (Finish::Length, 2));
        // Only whole words match.
        let p = ask(json!("Simul"), json!(null));
        assert_eq!(p.finish, Finish::Stop);
    }

    #[test]
    fn refusals_win_over_tools_and_keep_the_reasoning() {
        let mut body = tools_body("x [[sim:refuse]]");
        body["model"] = json!("sim-reasoner");
        let p = plan_for(body);
        assert_eq!((p.answer, p.finish), (Answer::Refused, Finish::Refused));
        assert_eq!(p.reasoning.len(), 8);
        assert_eq!((p.usage.completion, p.usage.reasoning), (8, 8));
        let p = plan_for(tools_body("x [[sim:finish=pause_turn]]"));
        assert!(matches!(p.answer, Answer::Tools(_)));
        assert_eq!(p.finish, Finish::Raw("pause_turn".into()));
        assert_eq!(p.finish.openai(), "pause_turn");
    }
}
