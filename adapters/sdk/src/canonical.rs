//! The vendor-neutral chat form every codec reads into and writes from, so
//! five protocols need five codecs rather than twenty translations.
//!
//! It keeps what the protocols mean, not how they spell it:
//! - a message is an ordered list of content [`Block`]s — text, images,
//!   thinking with its signature, redacted thinking, tool calls, tool results
//!   with `is_error` — so the order a model produced them in (think, then
//!   call a tool, then say something) survives a round trip;
//! - a [`FinishReason`] keeps what it was: an unknown vendor reason is
//!   `Other(raw)`, never silently "stop";
//! - [`Usage`] has one definition (see its docs); each codec converts its
//!   vendor's counting to it, because vendors disagree on whether cached
//!   tokens are part of the prompt count;
//! - a [`StreamEvent`] is a start, a delta, a finish or a usage report; a
//!   vendor's error mid-stream travels as `Err(TranslateError::Vendor)` to
//!   the host, which renders it (see [`StreamEvent`] for why).
//!
//! It is plain Rust, not WIT: free to grow without breaking the host ABI.

use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Instructions to the model (OpenAI's `developer`, Anthropic's `system`,
    /// Gemini's `systemInstruction`).
    System,
    User,
    Assistant,
    /// Results of tool calls (OpenAI's `tool` messages). Other protocols put
    /// [`Block::ToolResult`]s in user turns; encoders accept both.
    Tool,
}

/// Where an image comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageSource {
    Url(String),
    Base64 { media_type: String, data: String },
}

impl ImageSource {
    /// Reads a URL, turning a `data:` URL into its bytes.
    pub fn from_url(url: &str) -> Self {
        if let Some(rest) = url.strip_prefix("data:") {
            if let Some((meta, data)) = rest.split_once(',') {
                if let Some(media_type) = meta.strip_suffix(";base64") {
                    return ImageSource::Base64 {
                        media_type: media_type.to_owned(),
                        data: data.to_owned(),
                    };
                }
            }
        }
        ImageSource::Url(url.to_owned())
    }

    /// The image as a URL (`data:` for inline bytes).
    pub fn to_url(&self) -> String {
        match self {
            ImageSource::Url(u) => u.clone(),
            ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        }
    }
}

/// A call the assistant asked the client to perform.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as JSON text, exactly as the model produced them.
    pub arguments: String,
}

/// The result of a tool call, fed back by the client.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The tool's name, when the protocol says it (Gemini needs it).
    pub name: Option<String>,
    /// Text and image blocks.
    pub content: Vec<Block>,
    /// The tool failed.
    pub is_error: bool,
}

impl ToolResult {
    /// The result's text blocks joined.
    pub fn text(&self) -> String {
        joined_text(&self.content)
    }
}

/// One piece of a message, in the order it was produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    Text(String),
    Image(ImageSource),
    /// Reasoning the model did, with the vendor's signature over it (which
    /// the vendor may demand back, unchanged, on the next turn).
    Thinking {
        text: String,
        signature: Option<String>,
    },
    /// Reasoning the vendor encrypted; opaque, passed back as is.
    RedactedThinking(String),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
}

/// The text blocks of a list joined (other blocks skipped).
pub fn joined_text(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        if let Block::Text(t) = b {
            out.push_str(t);
        }
    }
    out
}

/// One conversation turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Block>,
}

impl Message {
    pub fn new(role: Role, content: Vec<Block>) -> Self {
        Self { role, content }
    }

    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Self::new(role, vec![Block::Text(text.into())])
    }
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    pub parameters: Option<Value>,
    pub strict: Option<bool>,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    None,
    /// Some tool, the model's pick.
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
    pub top_k: Option<u64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub seed: Option<i64>,
    pub stop: Vec<String>,
}

/// The client's wishes about a reasoning model's thinking phase. Protocols
/// spell these differently (`reasoning_effort`, `enable_thinking`,
/// `thinking.type`, `thinkingConfig`), so they collapse into one record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reasoning {
    /// `Some(false)`: skip thinking; `Some(true)`: think; `None`: the model's default.
    pub enabled: Option<bool>,
    /// Effort as the client named it (`minimal`, `low`, `medium`, `high`).
    pub effort: Option<String>,
    /// A token budget for thinking.
    pub budget_tokens: Option<u64>,
}

impl Reasoning {
    /// A budget for vendors that want one: the client's, else one for the
    /// effort it named, else `default`.
    pub fn budget_or(&self, default: u64) -> u64 {
        if let Some(b) = self.budget_tokens {
            return b;
        }
        match self.effort.as_deref() {
            Some("minimal") => 1024,
            Some("low") => 2048,
            Some("medium") => 8192,
            Some("high") | Some("xhigh") => 24576,
            _ => default,
        }
    }

    /// An effort level for vendors that want one: the client's, else one for
    /// its budget.
    pub fn effort_level(&self) -> Option<String> {
        if let Some(e) = &self.effort {
            return Some(e.clone());
        }
        self.budget_tokens.map(|b| {
            match b {
                0..=2048 => "low",
                2049..=8192 => "medium",
                _ => "high",
            }
            .to_owned()
        })
    }

    /// Thinking was asked for in any spelling.
    pub fn wanted(&self) -> bool {
        self.enabled != Some(false)
            && (self.enabled == Some(true) || self.effort.is_some() || self.budget_tokens.is_some())
    }
}

/// A chat request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub model: String,
    pub messages: Vec<Message>,
    pub sampling: Sampling,
    pub max_tokens: Option<u64>,
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    pub response_format: Option<ResponseFormat>,
    pub reasoning: Option<Reasoning>,
    pub stream: bool,
    /// The client asked for a usage report at the end of the stream.
    pub stream_usage: bool,
    /// The client's end-user id, for the vendor's abuse tracking.
    pub user: Option<String>,
}

impl Request {
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            messages,
            sampling: Sampling::default(),
            max_tokens: None,
            tools: Vec::new(),
            tool_choice: None,
            parallel_tool_calls: None,
            response_format: None,
            reasoning: None,
            stream: false,
            stream_usage: false,
            user: None,
        }
    }

    /// The name of the tool call `call_id`, from the assistant turns (for
    /// protocols whose tool results name the tool rather than the call).
    pub fn tool_name_of(&self, call_id: &str) -> Option<&str> {
        self.messages
            .iter()
            .flat_map(|m| &m.content)
            .find_map(|b| match b {
                Block::ToolCall(c) if c.id == call_id => Some(c.name.as_str()),
                _ => None,
            })
    }
}

/// Why generation stopped. What a vendor said is kept: an unknown reason is
/// `Other` with the vendor's word, never read as `Stop`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    /// The output cap was reached.
    Length,
    ToolCalls,
    /// A stop sequence was produced (which one, when the vendor says).
    StopSequence(Option<String>),
    /// The vendor's content filter cut the answer.
    ContentFilter,
    /// The model declined to answer.
    Refusal,
    Other(String),
}

/// A finished answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Response {
    pub id: Option<String>,
    pub model: Option<String>,
    /// Unix seconds.
    pub created: Option<u64>,
    pub content: Vec<Block>,
    pub finish: Option<FinishReason>,
    pub usage: Option<Usage>,
}

/// One thing a stream said. Tool calls are numbered by `index`, their order
/// in the answer (0, 1, ...); a call starts before its arguments arrive.
///
/// A vendor's error mid-stream is deliberately not an event: every stream
/// parser answers it (Anthropic's `event: error`, an OpenAI or Gemini chunk
/// carrying `error`, a Responses `error` or `response.failed`) with
/// `Err(TranslateError::Vendor)`, which the driver hands the host as WIT's
/// `upstream-failed`. The host must see it as a failure, not as output: before
/// the stream's first event is committed to the client it may move the call
/// to another channel, and after that it writes the client protocol's error
/// event itself, in the envelope of its protocol table, with the request id,
/// billing what was relayed — none of which an encoder knows. The same-
/// protocol passthroughs, which never make canonical events, report vendor
/// errors the same way, so one path carries every stream error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// The answer began (with the vendor's id, when it has one).
    Start {
        id: Option<String>,
    },
    Text(String),
    Thinking(String),
    /// The signature of the thinking just streamed.
    Signature(String),
    RedactedThinking(String),
    ToolCallStart {
        index: u32,
        id: String,
        name: String,
    },
    ToolCallArgs {
        index: u32,
        fragment: String,
    },
    Finish(FinishReason),
    /// Usage so far, complete as the vendor knows it (not an increment).
    Usage(Usage),
}

/// Token usage with the WIT contract's semantics: the parts are included in
/// their totals, not added to them.
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

    /// Prompt tokens neither read from nor written to the cache.
    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_sub(self.cache_read_tokens)
            .saturating_sub(self.cache_write_tokens)
    }
}

/// What an encoder needs to know about the call it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The gateway's request id; ids the client sees derive from it, so the
    /// same call always gets the same ids.
    pub request_id: String,
    /// The model name the client sent.
    pub model: String,
    /// Unix seconds.
    pub created: u64,
    /// The client asked for a usage report at the end of the stream.
    pub wants_usage: bool,
}

impl Meta {
    /// An id for the answer, with the client protocol's prefix.
    pub fn id(&self, prefix: &str) -> String {
        format!("{prefix}{}", self.request_id)
    }
}

/// Seconds since the epoch; in a guest this reads the host's clock through WASI.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_parts_never_exceed_their_totals() {
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_tokens: 7,
            cache_write_tokens: 9,
            reasoning_tokens: 9,
        }
        .consistent();
        assert_eq!(usage.cache_read_tokens, 7);
        assert_eq!(usage.cache_write_tokens, 3);
        assert_eq!(usage.reasoning_tokens, 5);
        assert_eq!(usage.uncached_input_tokens(), 0);
        assert_eq!(usage.total_tokens(), 15);
    }

    #[test]
    fn data_urls_are_inline_images() {
        let i = ImageSource::from_url("data:image/png;base64,AAAA");
        assert_eq!(
            i,
            ImageSource::Base64 {
                media_type: "image/png".into(),
                data: "AAAA".into()
            }
        );
        assert_eq!(i.to_url(), "data:image/png;base64,AAAA");
        assert_eq!(
            ImageSource::from_url("https://x/y.png"),
            ImageSource::Url("https://x/y.png".into())
        );
    }

    #[test]
    fn reasoning_spellings_meet() {
        let r = Reasoning {
            effort: Some("low".into()),
            ..Reasoning::default()
        };
        assert!(r.wanted());
        assert_eq!(r.budget_or(1), 2048);
        let r = Reasoning {
            budget_tokens: Some(10_000),
            ..Reasoning::default()
        };
        assert_eq!(r.effort_level().as_deref(), Some("high"));
        let off = Reasoning {
            enabled: Some(false),
            effort: Some("high".into()),
            ..Reasoning::default()
        };
        assert!(!off.wanted());
    }
}
