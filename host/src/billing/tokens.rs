//! Counting tokens when the vendor does not say how many a call used.
//!
//! Several OpenAI-compatible servers never report usage in streams, and some
//! not even in plain answers; a stream cut short never gets to its usage
//! report. The gateway then counts the tokens itself, with a real BPE
//! tokenizer, and marks the usage row `counted_by_gateway`. The vendor's own
//! numbers always win when it gives them.
//!
//! Which encoding (`[[models]] tokenizer` in the config, else chosen by the
//! model's name):
//! - a name tiktoken knows (`gpt-4o…`, `gpt-4.1…`, `o1…`: `o200k_base`;
//!   `gpt-4`, `gpt-3.5-turbo`, `text-embedding-3…`: `cl100k_base`; …) gets
//!   that encoding, exact for OpenAI's models;
//! - any other model (Claude, Gemini, Llama, Qwen, …, whose tokenizers are
//!   not published as BPE tables or differ per release) falls back to
//!   `o200k_base`, a modern large-vocabulary BPE: on English prose it lands
//!   within about 10–20% of those families' own counts. A model whose vendor
//!   is known to be silent can name a closer encoding in the config.
//!
//! What is counted:
//! - the prompt ([`prompt_tokens`]): the text of the request's content —
//!   messages, system prompt or instructions, the completions prompt, the
//!   Gemini contents — plus the tool definitions as JSON, plus OpenAI's
//!   documented framing of 3 tokens per message and 3 to prime the reply.
//!   Binary parts (images, audio, files) are not text and are not counted;
//! - the answer: the generated text the client received (content,
//!   reasoning, refusals, tool names and arguments: `relay::relayed`).

use crate::plugins::bindings::types::Protocol;
use serde::Deserialize;
use serde_json::Value;
use tiktoken_rs::CoreBPE;

/// A BPE encoding the gateway can count with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    O200kBase,
    Cl100kBase,
    P50kBase,
    R50kBase,
}

impl Encoding {
    /// The encoding tiktoken uses for `model`, else the documented fallback.
    pub fn for_model(model: &str) -> Encoding {
        use tiktoken_rs::tokenizer::{get_tokenizer, Tokenizer};
        match get_tokenizer(model) {
            Some(Tokenizer::Cl100kBase) => Encoding::Cl100kBase,
            Some(Tokenizer::P50kBase | Tokenizer::P50kEdit) => Encoding::P50kBase,
            Some(Tokenizer::R50kBase | Tokenizer::Gpt2) => Encoding::R50kBase,
            Some(Tokenizer::O200kBase | Tokenizer::O200kHarmony) | None => Encoding::O200kBase,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::P50kBase => "p50k_base",
            Encoding::R50kBase => "r50k_base",
        }
    }

    /// The encoding's tables, built on first use (a few hundred
    /// milliseconds and some 70 MB for `o200k_base`, once per process) and
    /// shared after. Not built at start: a gateway whose vendors all report
    /// usage never needs them.
    fn bpe(self) -> &'static CoreBPE {
        use tiktoken_rs::*;
        match self {
            Encoding::O200kBase => o200k_base_singleton(),
            Encoding::Cl100kBase => cl100k_base_singleton(),
            Encoding::P50kBase => p50k_base_singleton(),
            Encoding::R50kBase => r50k_base_singleton(),
        }
    }

    /// Tokens in `text`, special-token text counted as ordinary text.
    /// Should the tokenizer fail on some input (its regex engine gives up on
    /// pathological text), the text is counted at 4 bytes a token rather
    /// than lose the call's settlement.
    pub fn count(self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        let bpe = self.bpe();
        std::panic::catch_unwind(|| bpe.count_ordinary(text) as u64).unwrap_or_else(|_| {
            tracing::warn!(
                encoding = self.name(),
                bytes = text.len(),
                "the tokenizer failed; counted at 4 bytes a token"
            );
            (text.len() as u64).div_ceil(4)
        })
    }
}

/// OpenAI's framing: each message costs 3 tokens besides its text, and the
/// reply is primed with 3 more.
const TOKENS_PER_MESSAGE: u64 = 3;
const REPLY_PRIMING: u64 = 3;

/// Members whose strings are not prompt text: roles, ids, kinds, binary data
/// and its descriptions, cache and signature markers.
const NOT_TEXT: &[&str] = &[
    "role",
    "type",
    "id",
    "tool_call_id",
    "tool_use_id",
    "call_id",
    "url",
    "image_url",
    "input_audio",
    "file",
    "file_id",
    "file_data",
    "data",
    "source",
    "inlineData",
    "inline_data",
    "fileData",
    "mime_type",
    "mimeType",
    "media_type",
    "detail",
    "cache_control",
    "signature",
    "thoughtSignature",
];

/// The prompt's tokens, counted in `encoding`, for a request body of a chat
/// protocol (0 for anything else, or a body that is not JSON).
pub fn prompt_tokens(encoding: Encoding, protocol: Protocol, body: &[u8]) -> u64 {
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return 0;
    };
    let (text_members, message_lists): (&[&str], &[&str]) = match protocol {
        Protocol::OpenaiChat => (&["messages"], &["messages"]),
        Protocol::OpenaiCompletions => (&["prompt", "suffix"], &[]),
        Protocol::OpenaiResponses => (&["input", "instructions"], &["input"]),
        Protocol::AnthropicMessages => (&["messages", "system"], &["messages"]),
        Protocol::Gemini => (
            &["contents", "systemInstruction", "system_instruction"],
            &["contents"],
        ),
        _ => return 0,
    };
    let mut text = String::new();
    for member in text_members {
        collect_text(&body[*member], &mut text);
    }
    let mut tokens = encoding.count(&text);
    for tools in ["tools", "functions"] {
        if let Some(t) = body.get(tools).filter(|t| !t.is_null()) {
            tokens += encoding.count(&t.to_string());
        }
    }
    let messages: usize = message_lists
        .iter()
        .map(|m| body[*m].as_array().map_or(1, Vec::len))
        .sum();
    if protocol != Protocol::OpenaiCompletions {
        tokens += TOKENS_PER_MESSAGE * messages as u64 + REPLY_PRIMING;
    }
    tokens
}

/// Appends every string of `v` that is prompt text, one per line.
fn collect_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(s);
        }
        Value::Array(items) => items.iter().for_each(|i| collect_text(i, out)),
        Value::Object(members) => {
            for (key, value) in members {
                if !NOT_TEXT.contains(&key.as_str()) {
                    collect_text(value, out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_models_get_their_own_encoding_and_others_the_fallback() {
        assert_eq!(Encoding::for_model("gpt-4o-mini"), Encoding::O200kBase);
        assert_eq!(Encoding::for_model("gpt-4"), Encoding::Cl100kBase);
        assert_eq!(Encoding::for_model("gpt-3.5-turbo"), Encoding::Cl100kBase);
        assert_eq!(Encoding::for_model("claude-sonnet-4"), Encoding::O200kBase);
        assert_eq!(Encoding::for_model("llama-3-70b"), Encoding::O200kBase);
    }

    #[test]
    fn counts_are_the_tokenizers() {
        // Known counts of tiktoken's encodings.
        assert_eq!(Encoding::Cl100kBase.count("hello world"), 2);
        assert_eq!(Encoding::O200kBase.count("hello world"), 2);
        assert_eq!(Encoding::O200kBase.count(""), 0);
        // Special-token text is ordinary text, never an error.
        assert!(Encoding::O200kBase.count("<|endoftext|>") > 1);
    }

    #[test]
    fn a_chat_prompt_counts_its_text_and_the_message_framing() {
        let body = json!({
            "model": "gpt-4o",
            "temperature": 0.5,
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": [
                    {"type": "text", "text": "hello world"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
                ]}
            ]
        });
        let enc = Encoding::O200kBase;
        let text = enc.count("You are terse.\nhello world");
        let n = prompt_tokens(enc, Protocol::OpenaiChat, body.to_string().as_bytes());
        assert_eq!(n, text + 2 * 3 + 3);
        // Tools are counted as their JSON.
        let tools = json!([{"type": "function", "function": {"name": "find", "parameters": {}}}]);
        let mut with_tools = body.clone();
        with_tools["tools"] = tools.clone();
        let m = prompt_tokens(enc, Protocol::OpenaiChat, with_tools.to_string().as_bytes());
        assert_eq!(m, n + enc.count(&tools.to_string()));
    }

    #[test]
    fn each_protocol_finds_its_prompt() {
        let enc = Encoding::O200kBase;
        let hi = enc.count("hello world");
        let count = |p, v: Value| prompt_tokens(enc, p, v.to_string().as_bytes());
        assert_eq!(
            count(
                Protocol::OpenaiCompletions,
                json!({"prompt": "hello world"})
            ),
            hi
        );
        assert_eq!(
            count(
                Protocol::AnthropicMessages,
                json!({"system": "hello world", "messages": [{"role": "user", "content": "hello world"}]})
            ),
            enc.count("hello world\nhello world") + 3 + 3
        );
        assert_eq!(
            count(
                Protocol::Gemini,
                json!({"contents": [{"role": "user", "parts": [{"text": "hello world"}, {"inlineData": {"data": "AAAA", "mimeType": "image/png"}}]}]})
            ),
            hi + 3 + 3
        );
        // A plain string input is one message.
        assert_eq!(
            count(Protocol::OpenaiResponses, json!({"input": "hello world"})),
            hi + 3 + 3
        );
        assert_eq!(prompt_tokens(enc, Protocol::OpenaiChat, b"not json"), 0);
    }
}
