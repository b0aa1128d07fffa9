//! Vendor-neutral chat types.
//!
//! Each client protocol codec reads into these types and each vendor codec
//! writes from them, so N protocols and M vendors need N + M codecs rather
//! than N × M translations. They carry only what more than one vendor
//! understands; anything vendor-specific stays in that vendor's adapter.

use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Instructions to the model (OpenAI's `developer` role maps here too).
    System,
    User,
    Assistant,
    /// The result of a tool call the assistant asked for.
    Tool,
}

/// A message's content: plain text, or a list of typed parts.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl Content {
    /// The text of the content, with text parts joined and other parts skipped;
    /// for vendors that only accept a string.
    pub fn joined_text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|part| match part {
                    ContentPart::Text(text) => Some(text.as_str()),
                    ContentPart::Image { .. } => None,
                })
                .collect::<Vec<_>>()
                .join(""),
        }
    }
}

/// One part of a multi-part message.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentPart {
    Text(String),
    /// An image by URL; `data:` URLs carry the image inline.
    Image {
        url: String,
        detail: Option<String>,
    },
}

/// A call the assistant asked the client to perform.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as JSON text, exactly as the model produced them (it may
    /// not even be valid JSON, so it is never parsed here).
    pub arguments: String,
}

/// One conversation turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    /// `None` for an assistant turn that only calls tools.
    pub content: Option<Content>,
    pub name: Option<String>,
    /// Reasoning an assistant turn produced earlier, for vendors that want it back.
    pub reasoning: Option<String>,
    /// Tool calls of an assistant turn.
    pub tool_calls: Vec<ToolCall>,
    /// For a `Tool` turn: the call this is the result of.
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A plain text message.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(Content::Text(text.into())),
            name: None,
            reasoning: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// JSON Schema of the arguments; JSON Schema is what every vendor takes.
    pub parameters: Option<Value>,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Function(String),
}

/// The shape the answer must take.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema {
        name: String,
        schema: Option<Value>,
        strict: Option<bool>,
    },
}

/// Sampling parameters; `None` leaves the vendor's default.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub seed: Option<i64>,
    pub stop: Vec<String>,
}

/// The client's wishes about a reasoning model's thinking phase. Protocols
/// spell these differently (`enable_thinking`, `thinking.type`,
/// `reasoning_effort`), so all three collapse into one record.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reasoning {
    /// `Some(false)`: skip thinking; `None`: the model's default.
    pub enabled: Option<bool>,
    /// Effort level as the client named it (`low`, `medium`, `high`, ...).
    pub effort: Option<String>,
    pub budget_tokens: Option<u64>,
}

/// A chat request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub sampling: Sampling,
    pub max_tokens: Option<u64>,
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    pub response_format: Option<ResponseFormat>,
    pub reasoning: Option<Reasoning>,
    pub stream: bool,
    /// The client asked for a usage report at the end of the stream.
    pub stream_usage: bool,
    /// The client's end-user id, passed on for the vendor's abuse tracking.
    pub user: Option<String>,
}

impl ChatRequest {
    /// A request with only a model and messages.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            messages,
            sampling: Sampling::default(),
            max_tokens: None,
            tools: Vec::new(),
            tool_choice: None,
            response_format: None,
            reasoning: None,
            stream: false,
            stream_usage: false,
            user: None,
        }
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    /// `max_tokens` was reached (reasoning tokens count against it).
    Length,
    ToolCalls,
    ContentFilter,
}

/// One answer of a (non-streamed) response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Choice {
    pub index: u32,
    pub content: Option<String>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<FinishReason>,
}

/// A finished chat response.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    pub model: String,
    pub choices: Vec<Choice>,
    pub usage: Option<Usage>,
}

/// A fragment of a streamed tool call. The first fragment of a call carries
/// its id and name; later ones append to its arguments.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolCallDelta {
    /// Position of the call within the choice; fragments of one call share it.
    pub index: u32,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: Option<String>,
}

/// What one streamed event adds to one choice.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChoiceDelta {
    pub index: u32,
    pub role: Option<Role>,
    pub content: Option<String>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ToolCallDelta>,
    pub finish_reason: Option<FinishReason>,
}

/// One thing a stream said.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    Delta(ChoiceDelta),
    Usage(Usage),
}

/// What every chunk of one stream repeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkMeta {
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    pub model: String,
}

/// Token usage with the WIT contract's semantics: the parts are included in
/// the totals, not added to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// All prompt tokens: uncached ones, cache reads and cache writes.
    pub input_tokens: u64,
    /// All generated tokens, reasoning tokens included.
    pub output_tokens: u64,
    /// The part of `input_tokens` read from the vendor's prompt cache.
    pub cache_read_tokens: u64,
    /// The part of `input_tokens` written to the vendor's prompt cache.
    pub cache_write_tokens: u64,
    /// The part of `output_tokens` spent on reasoning.
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Clamps the parts to their totals. A vendor that reports more cached
    /// than prompt tokens would otherwise make the host bill a negative
    /// number of uncached tokens.
    pub fn consistent(self) -> Self {
        let cache_read_tokens = self.cache_read_tokens.min(self.input_tokens);
        Self {
            cache_read_tokens,
            cache_write_tokens: self
                .cache_write_tokens
                .min(self.input_tokens - cache_read_tokens),
            reasoning_tokens: self.reasoning_tokens.min(self.output_tokens),
            ..self
        }
    }

    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_parts_never_exceed_their_totals() {
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_tokens: 12,
            cache_write_tokens: 0,
            reasoning_tokens: 9,
        }
        .consistent();
        assert_eq!(usage.cache_read_tokens, 10);
        assert_eq!(usage.reasoning_tokens, 5);
        assert_eq!(usage.total_tokens(), 15);
    }

    #[test]
    fn joined_text_skips_images() {
        let content = Content::Parts(vec![
            ContentPart::Text("a".into()),
            ContentPart::Image {
                url: "data:image/png;base64,AA".into(),
                detail: None,
            },
            ContentPart::Text("b".into()),
        ]);
        assert_eq!(content.joined_text(), "ab");
    }
}
