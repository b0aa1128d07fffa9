//! A `chat.completion` answer read straight into the canonical form, for
//! translated calls (a client of another protocol, an OpenAI vendor).
//!
//! Why: [`parse_response`](super::parse_response) reads a tree
//! (`serde_json::Value`): every member of the answer, read or not, gets a
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

use serde::Deserialize;

use super::names::finish_reason_from;
use crate::canonical::{Block, Response, ToolCall, Usage};
use crate::typed::{self, Count, Str, Text};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai_chat::parse_response;
    use serde_json::{json, Value};

    /// The typed reading against the tree reading, on one body.
    fn same(body: &Value) -> Option<Response> {
        let bytes = serde_json::to_vec(body).unwrap();
        let typed = read_response(&bytes);
        if let Some(typed) = &typed {
            assert_eq!(Ok(typed), parse_response(body).as_ref(), "{body}");
        }
        typed
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
}
