//! OpenAI chat bodies read typed into the canonical form, for translated
//! calls: a `chat.completion` answer (a client of another protocol, an
//! OpenAI vendor) and a chat-completions request that is a plain
//! conversation (an OpenAI client, a vendor of another protocol).
//!
//! Why: [`parse_response`](super::parse_response) and
//! [`parse_request`](super::parse_request) read a tree
//! (`serde_json::Value`): every member of the body, read or not, gets a
//! `String` key and a node of a `BTreeMap`, and all of it is dropped again a
//! moment later. With the answer written from such a tree too, the answer's
//! translation was 17% of a translated plain call's CPU (the README's *What
//! changed*). Here only the members the canonical form takes are read, the
//! strings borrowed from the body where they hold no escape, and every other
//! member is skipped.
//!
//! [`read_response`] gives what `parse_response` gives for the same body,
//! or `None` (the caller then reads the tree): for an answer without a
//! `choices` array (an error in disguise, or garbage); for a member the
//! reading takes that has another type than the usual one (a `content`
//! array, a non-string id, a `tool_calls` object, arguments sent as an
//! object, a `usage` that is not an object, a counter that is an array),
//! which the tree reading takes leniently or refuses with its own error;
//! and for whatever [`crate::typed::object`] leaves to the tree (see
//! [`crate::typed`], also for the one difference left).
//!
//! [`read_request`] does the same for a request whose turns are text (a
//! string, `null`, or `text` parts) from the system, developer, user or
//! assistant roles, with the sampling members, `max_tokens` or
//! `max_completion_tokens`, `stop`, `stream`, `stream_options`,
//! `parallel_tool_calls` and `user`. It gives `None` for tools, functions, a
//! tool choice, a response format, a thinking switch (`enable_thinking`,
//! `thinking`, `reasoning_effort`), `n`, a tool turn, a turn with reasoning,
//! a refusal or tool calls, a part that is not text (any of them present and
//! not `null`), for a member of another type than the usual one, and for
//! what `typed::object` leaves to the tree.

use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

use super::names::{finish_reason_from, role_from};
use crate::canonical::{Block, Message, Request, Response, Role, Sampling, ToolCall, Usage};
use crate::typed::{self, Count, Str, Text, TextPart, Texts};

/// The answer's first choice, its ids and its usage, typed; see the module
/// doc for when it gives `None`.
pub fn read_response(body: &[u8]) -> Option<Response> {
    let answer: Completion<'_> = typed::object(body)?;
    let mut content = Vec::new();
    let mut finish = None;
    if let Some(choice) = answer.choices.into_iter().next() {
        let message = choice.message;
        let reasoning = message
            .reasoning_content
            .or(message.reasoning)
            .filter(|r| !r.is_empty());
        if let Some(r) = reasoning {
            content.push(Block::Thinking {
                text: r.into_owned(),
                signature: None,
            });
        }
        if let Some(text) = message.content.filter(|t| !t.is_empty()) {
            content.push(Block::Text(text.into_owned()));
        }
        if let Some(refusal) = message.refusal.filter(|t| !t.is_empty()) {
            content.push(Block::Text(refusal.into_owned()));
        }
        for call in message.tool_calls.unwrap_or_default() {
            let function = call.function.unwrap_or_default();
            content.push(Block::ToolCall(ToolCall {
                id: call.id.map(Str::into_owned).unwrap_or_default(),
                name: function.name.map(Str::into_owned).unwrap_or_default(),
                arguments: function.arguments.map(Str::into_owned).unwrap_or_default(),
            }));
        }
        finish = choice.finish_reason.as_deref().map(finish_reason_from);
    }
    Some(Response {
        id: answer.id.map(Str::into_owned),
        model: answer.model.map(Str::into_owned),
        created: answer.created.and_then(|c| c.0),
        content,
        finish,
        usage: answer.usage.map(UsageIn::canonical),
    })
}

#[derive(Deserialize)]
struct Completion<'a> {
    #[serde(borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default, borrow)]
    id: Text<'a>,
    #[serde(default, borrow)]
    model: Text<'a>,
    #[serde(default)]
    created: Option<Count>,
    #[serde(default)]
    usage: Option<UsageIn>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow)]
    message: MessageIn<'a>,
    #[serde(default, borrow)]
    finish_reason: Text<'a>,
}

#[derive(Deserialize)]
struct MessageIn<'a> {
    #[serde(default, borrow)]
    reasoning_content: Text<'a>,
    #[serde(default, borrow)]
    reasoning: Text<'a>,
    #[serde(default, borrow)]
    content: Text<'a>,
    #[serde(default, borrow)]
    refusal: Text<'a>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<CallIn<'a>>>,
}

#[derive(Deserialize)]
struct CallIn<'a> {
    #[serde(default, borrow)]
    id: Text<'a>,
    #[serde(default, borrow)]
    function: Option<FunctionIn<'a>>,
}

#[derive(Deserialize, Default)]
struct FunctionIn<'a> {
    #[serde(default, borrow)]
    name: Text<'a>,
    #[serde(default, borrow)]
    arguments: Text<'a>,
}

#[derive(Deserialize)]
struct UsageIn {
    #[serde(default)]
    prompt_tokens: Option<Count>,
    #[serde(default)]
    completion_tokens: Option<Count>,
    #[serde(default)]
    prompt_tokens_details: Option<DetailsIn>,
    #[serde(default)]
    completion_tokens_details: Option<DetailsIn>,
}

#[derive(Deserialize)]
struct DetailsIn {
    #[serde(default)]
    cached_tokens: Option<Count>,
    #[serde(default)]
    cache_write_tokens: Option<Count>,
    #[serde(default)]
    reasoning_tokens: Option<Count>,
}

impl UsageIn {
    /// What [`parse_usage`](super::parse_usage) makes of the same object.
    fn canonical(self) -> Usage {
        let count = |c: Option<Count>| c.and_then(|c| c.0).unwrap_or(0);
        let detail = |d: &Option<DetailsIn>, pick: fn(&DetailsIn) -> Option<Count>| {
            count(d.as_ref().and_then(pick))
        };
        Usage {
            input_tokens: count(self.prompt_tokens),
            output_tokens: count(self.completion_tokens),
            cache_read_tokens: detail(&self.prompt_tokens_details, |d| d.cached_tokens),
            cache_write_tokens: detail(&self.prompt_tokens_details, |d| d.cache_write_tokens),
            reasoning_tokens: detail(&self.completion_tokens_details, |d| d.reasoning_tokens),
        }
        .consistent()
    }
}

/// The request as [`parse_request`](super::parse_request) reads it, when
/// it is a plain conversation (the module doc).
pub fn read_request(body: &[u8]) -> Option<Request> {
    let r: RequestIn<'_> = typed::object(body)?;
    let declined = r.tools.is_some()
        || r.functions.is_some()
        || r.tool_choice.is_some()
        || r.response_format.is_some()
        || r.enable_thinking.is_some()
        || r.thinking.is_some()
        || r.reasoning_effort.is_some()
        || r.n.is_some();
    if declined {
        return None;
    }
    let mut messages = Vec::with_capacity(r.messages.len());
    for turn in r.messages {
        let declined = turn.reasoning_content.is_some()
            || turn.reasoning.is_some()
            || turn.refusal.is_some()
            || turn.tool_calls.is_some();
        let role = role_from(&turn.role).filter(|role| *role != Role::Tool);
        if declined || role.is_none() {
            return None;
        }
        let content = turn.content.map(Texts::blocks).unwrap_or_default();
        messages.push(Message::new(role?, content));
    }
    let max_completion_tokens = Count::strict(r.max_completion_tokens)?;
    Some(Request {
        model: r.model.map(Str::into_owned).unwrap_or_default(),
        messages,
        sampling: Sampling {
            temperature: r.temperature,
            top_p: r.top_p,
            top_k: Count::strict(r.top_k)?,
            presence_penalty: r.presence_penalty,
            frequency_penalty: r.frequency_penalty,
            seed: r.seed,
            stop: r.stop.map(|s| s.0).unwrap_or_default(),
        },
        // `max_completion_tokens` wins when both are sent; `max_tokens` is
        // then not read (nor checked) by the tree reading either.
        max_tokens: match max_completion_tokens {
            Some(n) => Some(n),
            None => Count::strict(r.max_tokens)?,
        },
        tools: Vec::new(),
        tool_choice: None,
        parallel_tool_calls: r.parallel_tool_calls,
        response_format: None,
        reasoning: None,
        stream: r.stream.unwrap_or(false),
        stream_usage: r
            .stream_options
            .and_then(|o| o.include_usage)
            .unwrap_or(false),
        user: r.user.map(Str::into_owned),
    })
}

#[derive(Deserialize)]
struct RequestIn<'a> {
    #[serde(borrow)]
    messages: Vec<TurnIn<'a>>,
    #[serde(default, borrow)]
    model: Text<'a>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(default)]
    top_k: Option<Count>,
    #[serde(default)]
    presence_penalty: Option<f64>,
    #[serde(default)]
    frequency_penalty: Option<f64>,
    #[serde(default)]
    seed: Option<i64>,
    #[serde(default)]
    stop: Option<StopIn>,
    #[serde(default)]
    max_completion_tokens: Option<Count>,
    #[serde(default)]
    max_tokens: Option<Count>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptionsIn>,
    #[serde(default, borrow)]
    user: Text<'a>,
    // Members this reading leaves to the tree when present.
    #[serde(default)]
    tools: Option<IgnoredAny>,
    #[serde(default)]
    functions: Option<IgnoredAny>,
    #[serde(default)]
    tool_choice: Option<IgnoredAny>,
    #[serde(default)]
    response_format: Option<IgnoredAny>,
    #[serde(default)]
    enable_thinking: Option<IgnoredAny>,
    #[serde(default)]
    thinking: Option<IgnoredAny>,
    #[serde(default)]
    reasoning_effort: Option<IgnoredAny>,
    #[serde(default)]
    n: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct TurnIn<'a> {
    #[serde(borrow)]
    role: Str<'a>,
    #[serde(default, borrow)]
    /// A string, or `text` parts; any other part fails the reading.
    content: Option<Texts<'a, TextPartIn<'a>>>,
    // Members this reading leaves to the tree when present.
    #[serde(default)]
    reasoning_content: Option<IgnoredAny>,
    #[serde(default)]
    reasoning: Option<IgnoredAny>,
    #[serde(default)]
    refusal: Option<IgnoredAny>,
    #[serde(default)]
    tool_calls: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct StreamOptionsIn {
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Deserialize)]
struct TextPartIn<'a> {
    #[serde(default, rename = "type", borrow)]
    kind: Text<'a>,
    /// Required: the tree reading refuses a text part without it.
    #[serde(borrow)]
    text: Str<'a>,
}

impl<'a> TextPart<'a> for TextPartIn<'a> {
    fn into_text(self) -> Option<Str<'a>> {
        (self.kind.as_deref() == Some("text")).then_some(self.text)
    }
}

/// `stop`: one string or an array of strings, as the tree reads it.
struct StopIn(Vec<String>);

impl<'de> Deserialize<'de> for StopIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StopVisitor)
    }
}

struct StopVisitor;

impl<'de> Visitor<'de> for StopVisitor {
    type Value = StopIn;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or strings")
    }

    fn visit_str<E>(self, s: &str) -> Result<StopIn, E> {
        Ok(StopIn(vec![s.to_owned()]))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StopIn, A::Error> {
        let mut stops = Vec::new();
        while let Some(s) = seq.next_element::<String>()? {
            stops.push(s);
        }
        Ok(StopIn(stops))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai_chat::parse_response;
    use serde_json::{json, Value};

    /// The typed reading against the tree reading, on one body.
    fn same(body: &Value) -> Option<Response> {
        crate::typed::against_tree(body, read_response, parse_response)
    }

    fn usage(prompt: u64, completion: u64) -> Value {
        json!({"prompt_tokens": prompt, "completion_tokens": completion,
               "total_tokens": prompt + completion,
               "prompt_tokens_details": {"cached_tokens": 0},
               "completion_tokens_details": {"reasoning_tokens": 0}})
    }

    #[test]
    fn reads_what_the_tree_reads() {
        let bodies = [
            json!({"id": "x", "object": "chat.completion", "created": 7, "model": "up",
                   "system_fingerprint": "fp", "service_tier": "default",
                   "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
                                "message": {"role": "assistant", "content": "hi \"there\"\n", "annotations": []}}],
                   "usage": usage(3, 4)}),
            json!({"choices": [{"finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null, "reasoning_content": "why",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"q\":1}"}},
                               {"type": "function", "function": {"name": "g"}},
                               {"id": "e"}]}}],
                   "usage": {"prompt_tokens": 10.0, "completion_tokens": 4,
                             "prompt_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 2},
                             "completion_tokens_details": {"reasoning_tokens": 1}}}),
            // `reasoning` is read only when `reasoning_content` is absent or null.
            json!({"choices": [{"message": {"reasoning": "r", "content": "t", "refusal": "no"}}]}),
            json!({"choices": [{"message": {"reasoning_content": "", "reasoning": "r"}}]}),
            json!({"choices": [{"message": {"tool_calls": null}, "finish_reason": "weird"}], "usage": null}),
            json!({"choices": [], "id": null, "created": -3, "model": "m"}),
            json!({"choices": [{"message": {}}], "created": 1.5,
                   "usage": {"prompt_tokens": "7", "completion_tokens": true, "prompt_tokens_details": null}}),
            json!({"choices": [{"message": {"content": "a"}}, {"message": {"content": "b"}}], "created": 1e3}),
            // Counts that disagree are made consistent the same way.
            json!({"choices": [{"message": {}}],
                   "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                             "prompt_tokens_details": {"cached_tokens": 9},
                             "completion_tokens_details": {"reasoning_tokens": 5}}}),
        ];
        for body in &bodies {
            assert!(same(body).is_some(), "not read typed: {body}");
        }
    }

    #[test]
    fn leaves_to_the_tree_what_it_would_not_read_the_same() {
        let bodies = [
            json!([{"choices": []}]),
            json!({"error": {"message": "boom"}}),
            json!({"choices": {"0": {}}}),
            json!({"choices": [{"message": 3}]}),
            json!({"choices": [{}]}),
            json!({"choices": [{"message": {"content": [{"type": "text", "text": "parts"}]}}]}),
            json!({"choices": [{"message": {"tool_calls": {"id": "c"}}}]}),
            json!({"choices": [{"message": {"tool_calls": [{"function": {"arguments": {"q": 1}}}]}}]}),
            json!({"choices": [{"message": {"tool_calls": ["c"]}}]}),
            json!({"choices": [{"message": {"reasoning_content": 5, "reasoning": "r"}}]}),
            json!({"choices": [{"message": {}}], "id": 42}),
            json!({"choices": [{"message": {}}], "usage": 5}),
            json!({"choices": [{"message": {}}], "usage": {"prompt_tokens_details": 5}}),
            json!({"choices": [{"message": {}}], "usage": {"prompt_tokens": [1]}}),
            json!({"choices": [{"message": {}}], "created": {"at": 1}}),
        ];
        for body in &bodies {
            assert_eq!(same(body), None, "read typed: {body}");
        }
    }

    #[test]
    fn leaves_to_the_tree_what_is_not_one_object_in_utf8_or_has_a_member_twice() {
        for text in [
            &b"{\"choices\": [{\"message\": {\"content\": \"a\"}}], \"model\": \"a\", \"model\": \"b\"}"[..],
            b"{\"choices\": [{\"message\": {\"content\": \"\xff\"}}]}",
            b"{\"choices\": [{\"message\": {}}]} x",
            b"\"text\"",
            b"",
        ] {
            assert_eq!(read_response(text), None, "{}", String::from_utf8_lossy(text));
        }
        // Whitespace around the object, as the tree reading allows.
        let spaced = b" \n{\"choices\": [{\"message\": {\"content\": \"a\"}}]}\n";
        assert_eq!(
            read_response(spaced).map(|r| r.content),
            Some(vec![Block::Text("a".into())])
        );
    }

    /// The typed reading against the tree reading, on one body.
    fn same_request(body: &Value) -> Option<Request> {
        crate::typed::against_tree(body, read_request, crate::openai_chat::parse_request)
    }

    #[test]
    fn reads_plain_requests_as_the_tree_does() {
        let bodies = [
            json!({"model": "claude-sonnet-4-5", "max_tokens": 16,
                   "messages": [{"role": "user", "content": "hello \"you\"\n"}]}),
            json!({"model": "m", "max_completion_tokens": 8.0, "max_tokens": "ignored",
                   "temperature": 1, "top_p": 0.5, "top_k": 3, "presence_penalty": -0.5,
                   "frequency_penalty": 0.25, "seed": -4, "stop": "END", "stream": true,
                   "stream_options": {"include_usage": true}, "parallel_tool_calls": false,
                   "user": "u-1", "store": false, "logprobs": null,
                   "messages": [{"role": "developer", "content": "be brief"},
                                {"role": "system", "content": null},
                                {"role": "user", "name": "ann", "content": [
                                    {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                                {"role": "assistant", "content": "c", "tool_call_id": "ignored"},
                                {"role": "user", "content": []}]}),
            json!({"messages": [], "stop": ["a", "b"], "stream_options": null, "n": null,
                   "tools": null, "tool_choice": null, "reasoning_effort": null}),
            json!({"messages": [{"role": "assistant", "refusal": null, "tool_calls": null,
                                 "reasoning_content": null}],
                   "stream_options": {"include_usage": null}}),
        ];
        for body in &bodies {
            assert!(same_request(body).is_some(), "not read typed: {body}");
        }
    }

    #[test]
    fn leaves_to_the_tree_requests_it_would_not_read_the_same() {
        let turn = json!({"role": "user", "content": "x"});
        let bodies = [
            json!([turn]),
            json!({"model": "m"}),
            json!({"messages": null}),
            json!({"messages": {"0": turn}}),
            json!({"messages": [turn], "tools": []}),
            json!({"messages": [turn], "functions": []}),
            json!({"messages": [turn], "tool_choice": "auto"}),
            json!({"messages": [turn], "response_format": {"type": "text"}}),
            json!({"messages": [turn], "enable_thinking": false}),
            json!({"messages": [turn], "thinking": {"type": "enabled"}}),
            json!({"messages": [turn], "reasoning_effort": "low"}),
            json!({"messages": [turn], "n": 1}),
            json!({"messages": [{"role": "tool", "tool_call_id": "c", "content": "r"}]}),
            json!({"messages": [{"role": "function", "name": "f", "content": "r"}]}),
            json!({"messages": [{"role": "wizard", "content": "x"}]}),
            json!({"messages": [{"content": "x"}]}),
            json!({"messages": [{"role": 1, "content": "x"}]}),
            json!({"messages": [{"role": "assistant", "content": null, "tool_calls": []}]}),
            json!({"messages": [{"role": "assistant", "reasoning_content": "r", "content": "x"}]}),
            json!({"messages": [{"role": "assistant", "reasoning": "r", "content": "x"}]}),
            json!({"messages": [{"role": "assistant", "refusal": "no"}]}),
            json!({"messages": [{"role": "user", "content": 5}]}),
            json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}]}),
            json!({"messages": [{"role": "user", "content": [{"type": "text"}]}]}),
            json!({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}),
            json!({"messages": [{"role": "user", "content": ["bare"]}]}),
            json!({"messages": [turn], "max_tokens": "16"}),
            json!({"messages": [turn], "max_completion_tokens": 1.5, "max_tokens": 4}),
            json!({"messages": [turn], "top_k": -1}),
            json!({"messages": [turn], "seed": 1.0}),
            json!({"messages": [turn], "temperature": "warm"}),
            json!({"messages": [turn], "stop": 5}),
            json!({"messages": [turn], "stop": ["a", 5]}),
            json!({"messages": [turn], "stream": 1}),
            json!({"messages": [turn], "stream_options": "usage"}),
            json!({"messages": [turn], "stream_options": {"include_usage": "yes"}}),
            json!({"messages": [turn], "parallel_tool_calls": "no"}),
            json!({"messages": [turn], "user": 7}),
            json!({"messages": [turn], "model": null, "seed": 99999999999999999999u128 as f64}),
        ];
        for body in &bodies {
            assert_eq!(same_request(body), None, "read typed: {body}");
        }
    }
}
