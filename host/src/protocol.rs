//! The client protocols the gateway serves, one table row each: the routes
//! that speak it, how the host reads a request's head (model, stream, output
//! cap, prompt size for the hold), where its key is, and its error envelope.
//! The router, the key lookup, error rendering and stream error events all
//! read these rows, so a protocol's facts live in one place.
//!
//! Paths that belong to no text protocol (models, videos, dashboards) use
//! [`DEFAULT_SURFACE`]: the OpenAI envelope and an OpenAI or Anthropic key.
//! The Gemini listing routes under `/v1beta` share the Gemini row's surface.

use crate::billing::text::estimate_prompt_tokens;
use crate::billing::usage::{Meter, MeterKind};
use crate::error::{ApiError, Envelope};
use crate::plugins::bindings::types::Protocol;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Where a client may present its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPlace {
    /// `Authorization: Bearer <key>`
    Bearer,
    /// `x-api-key: <key>`
    XApiKey,
    /// `x-goog-api-key: <key>`
    XGoogApiKey,
    /// `?key=<key>` in the query string (the Gemini protocol only).
    QueryKey,
}

/// What the host reads of a text request before handing it to an adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub model: String,
    pub stream: bool,
    /// The most output tokens the client allows, if it said (or its
    /// protocol's default).
    pub max_output_tokens: Option<u64>,
    /// A generous estimate of the prompt's tokens, for the hold.
    pub prompt_tokens_estimate: u64,
    /// The non-token meters the call will consume (`n` images, the speech
    /// input's characters, ...), for the hold.
    pub meters: Vec<Meter>,
    /// An OpenAI chat or completions stream asked for
    /// `stream_options.include_usage` (its usage chunk).
    pub wants_usage: bool,
}

/// `stream_options.include_usage`, read leniently: the adapter checks the
/// member's shape, the host only needs to know whether it is `true`.
fn wants_usage(options: Option<Value>) -> bool {
    options.is_some_and(|o| o["include_usage"] == Value::Bool(true))
}

/// One client protocol.
pub struct ClientProtocol {
    pub protocol: Protocol,
    /// For log lines and docs.
    pub name: &'static str,
    /// `POST` routes (axum path patterns) that speak it.
    pub routes: &'static [&'static str],
    /// For a `{model_action}` route, the actions (`model:action`) it
    /// serves; Gemini's chat and embeddings rows share their routes.
    actions: &'static [&'static str],
    pub keys: &'static [KeyPlace],
    pub envelope: Envelope,
    /// How the body arrives: JSON, or a multipart form (transcription),
    /// whose text fields the head is read from.
    pub body: BodyKind,
    read_head: fn(&[u8], &str) -> Result<Head, ApiError>,
}

/// How a client protocol's request body arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    Json,
    /// `multipart/form-data`; the head and the adapter see a JSON object of
    /// the text fields, the file parts stay with the host.
    Multipart,
}

impl ClientProtocol {
    /// Whether this is one of the five chat protocols (the ones policies
    /// and streams apply to).
    pub fn is_chat(&self) -> bool {
        matches!(
            self.protocol,
            Protocol::OpenaiChat
                | Protocol::OpenaiCompletions
                | Protocol::OpenaiResponses
                | Protocol::AnthropicMessages
                | Protocol::Gemini
        )
    }

    /// Reads the head of a request body that arrived on `path`.
    pub fn head(&self, body: &[u8], path: &str) -> Result<Head, ApiError> {
        (self.read_head)(body, path)
    }
}

impl ClientProtocol {
    /// The actions of a `{model_action}` route (empty for other routes).
    pub fn actions(&self) -> &'static [&'static str] {
        self.actions
    }

    /// Whether a path's `model:action`, if this row names actions, is one of
    /// them.
    fn serves_action(&self, path: &str) -> bool {
        self.actions.is_empty()
            || path
                .rsplit_once(':')
                .is_some_and(|(_, action)| self.actions.contains(&action))
    }
}

impl std::fmt::Debug for ClientProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

const OPENAI_KEYS: &[KeyPlace] = &[KeyPlace::Bearer];

pub static OPENAI_CHAT: ClientProtocol = ClientProtocol {
    protocol: Protocol::OpenaiChat,
    name: "openai-chat",
    routes: &["/v1/chat/completions"],
    actions: &[],
    body: BodyKind::Json,
    keys: OPENAI_KEYS,
    envelope: Envelope::OpenAi,
    read_head: chat_head,
};

pub static OPENAI_COMPLETIONS: ClientProtocol = ClientProtocol {
    protocol: Protocol::OpenaiCompletions,
    name: "openai-completions",
    routes: &["/v1/completions"],
    actions: &[],
    body: BodyKind::Json,
    keys: OPENAI_KEYS,
    envelope: Envelope::OpenAi,
    read_head: completions_head,
};

pub static OPENAI_RESPONSES: ClientProtocol = ClientProtocol {
    protocol: Protocol::OpenaiResponses,
    name: "openai-responses",
    routes: &["/v1/responses"],
    actions: &[],
    body: BodyKind::Json,
    keys: OPENAI_KEYS,
    envelope: Envelope::OpenAi,
    read_head: responses_head,
};

pub static ANTHROPIC_MESSAGES: ClientProtocol = ClientProtocol {
    protocol: Protocol::AnthropicMessages,
    name: "anthropic-messages",
    routes: &["/v1/messages"],
    actions: &[],
    body: BodyKind::Json,
    keys: &[KeyPlace::XApiKey, KeyPlace::Bearer],
    envelope: Envelope::Anthropic,
    read_head: messages_head,
};

pub static GEMINI: ClientProtocol = ClientProtocol {
    protocol: Protocol::Gemini,
    name: "gemini",
    // `v1beta` is what the Gemini API serves these under; the google-genai
    // SDK's newer releases default to `v1`, which is served the same.
    routes: GEMINI_ROUTES,
    actions: &["generateContent", "streamGenerateContent"],
    body: BodyKind::Json,
    keys: GEMINI_KEYS,
    envelope: Envelope::Gemini,
    read_head: gemini_head,
};

const GEMINI_ROUTES: &[&str] = &["/v1beta/models/{model_action}", "/v1/models/{model_action}"];
const GEMINI_KEYS: &[KeyPlace] = &[KeyPlace::XGoogApiKey, KeyPlace::QueryKey, KeyPlace::Bearer];

/// An OpenAI-style endpoint family: one route, a JSON body, OpenAI's key
/// and envelope.
const fn family(
    protocol: Protocol,
    name: &'static str,
    routes: &'static [&'static str],
    body: BodyKind,
    read_head: fn(&[u8], &str) -> Result<Head, ApiError>,
) -> ClientProtocol {
    ClientProtocol {
        protocol,
        name,
        routes,
        actions: &[],
        body,
        keys: OPENAI_KEYS,
        envelope: Envelope::OpenAi,
        read_head,
    }
}

pub static EMBEDDINGS: ClientProtocol = family(
    Protocol::Embeddings,
    "embeddings",
    &["/v1/embeddings"],
    BodyKind::Json,
    embeddings_head,
);

pub static GEMINI_EMBEDDINGS: ClientProtocol = ClientProtocol {
    protocol: Protocol::GeminiEmbeddings,
    name: "gemini-embeddings",
    routes: GEMINI_ROUTES,
    actions: &["embedContent", "batchEmbedContents"],
    body: BodyKind::Json,
    keys: GEMINI_KEYS,
    envelope: Envelope::Gemini,
    read_head: gemini_embeddings_head,
};

pub static IMAGES: ClientProtocol = family(
    Protocol::Images,
    "images",
    &["/v1/images/generations"],
    BodyKind::Json,
    images_head,
);

pub static SPEECH: ClientProtocol = family(
    Protocol::Speech,
    "speech",
    &["/v1/audio/speech"],
    BodyKind::Json,
    speech_head,
);

pub static TRANSCRIPTION: ClientProtocol = family(
    Protocol::Transcription,
    "transcription",
    &["/v1/audio/transcriptions"],
    BodyKind::Multipart,
    transcription_head,
);

pub static RERANK: ClientProtocol = family(
    Protocol::Rerank,
    "rerank",
    &["/v1/rerank"],
    BodyKind::Json,
    rerank_head,
);

pub static MODERATION: ClientProtocol = family(
    Protocol::Moderation,
    "moderation",
    &["/v1/moderations"],
    BodyKind::Json,
    moderation_head,
);

/// Every client protocol, in the order the README lists them.
pub static ALL: [&ClientProtocol; 12] = [
    &OPENAI_CHAT,
    &OPENAI_COMPLETIONS,
    &OPENAI_RESPONSES,
    &ANTHROPIC_MESSAGES,
    &GEMINI,
    &EMBEDDINGS,
    &GEMINI_EMBEDDINGS,
    &IMAGES,
    &SPEECH,
    &TRANSCRIPTION,
    &RERANK,
    &MODERATION,
];

/// What applies to a request path: its error envelope and key places, and
/// the text protocol it speaks, if any.
#[derive(Debug, Clone, Copy)]
pub struct Surface {
    pub envelope: Envelope,
    pub keys: &'static [KeyPlace],
    pub protocol: Option<&'static ClientProtocol>,
}

/// Models, videos and dashboards: OpenAI's envelope; the Anthropic SDK's
/// `models.list()` sends `x-api-key`, so that works too.
pub const DEFAULT_SURFACE: Surface = Surface {
    envelope: Envelope::OpenAi,
    keys: &[KeyPlace::Bearer, KeyPlace::XApiKey],
    protocol: None,
};

fn surface_of(p: &'static ClientProtocol) -> Surface {
    Surface {
        envelope: p.envelope,
        keys: p.keys,
        protocol: Some(p),
    }
}

/// The surface of a (normalised) request path.
pub fn surface(path: &str) -> Surface {
    for p in ALL {
        if p.routes.iter().any(|r| route_matches(r, path)) && p.serves_action(path) {
            return surface_of(p);
        }
    }
    if path == "/v1beta" || path.starts_with("/v1beta/") {
        return Surface {
            protocol: None,
            ..surface_of(&GEMINI)
        };
    }
    if path.starts_with("/v1/messages/") {
        return Surface {
            protocol: None,
            ..surface_of(&ANTHROPIC_MESSAGES)
        };
    }
    DEFAULT_SURFACE
}

/// Whether an axum route pattern (`/a/{param}/b`) matches a path. A
/// `{model_action}` parameter matches only a Gemini action, `{model}:{verb}`:
/// `/v1/models/gpt-4o` is OpenAI's model retrieval, not a Gemini call.
fn route_matches(pattern: &str, path: &str) -> bool {
    let mut pat = pattern.split('/');
    let mut got = path.split('/');
    loop {
        match (pat.next(), got.next()) {
            (None, None) => return true,
            (Some("{model_action}"), Some(g)) if g.contains(':') => {}
            (Some(p), Some(g)) if p.starts_with('{') && p != "{model_action}" && !g.is_empty() => {}
            (Some(p), Some(g)) if p == g => {}
            _ => return false,
        }
    }
}

/// Rewrites a doubled version prefix (`/v1/v1/...`, `/v1/v1beta/...`), which
/// a client configured with the `/v1` base URL produces when its SDK adds
/// the prefix itself (the Anthropic and Google SDKs do), so both base URLs
/// land on the same route.
pub fn normalise_path(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/v1/")?;
    (rest == "v1" || rest.starts_with("v1/") || rest == "v1beta" || rest.starts_with("v1beta/"))
        .then(|| format!("/{rest}"))
}

// ---------------------------------------------------------------------------
// Heads.

fn invalid(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidRequest(msg.into())
}

fn required_model(model: Option<String>) -> Result<String, ApiError> {
    model
        .filter(|m| !m.is_empty())
        .ok_or_else(|| invalid("`model` is required"))
}

/// Bytes and item count of a JSON value that holds the prompt (an array's
/// elements, or one item for anything else).
fn prompt_size(v: Option<&RawValue>) -> (usize, usize) {
    let Some(v) = v else { return (0, 0) };
    match serde_json::from_str::<Vec<&RawValue>>(v.get()) {
        Ok(items) => (items.iter().map(|i| i.get().len()).sum(), items.len()),
        Err(_) => (v.get().len(), 1),
    }
}

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8], what: &str) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| invalid(format!("the body is not a valid {what} request: {e}")))
}

/// One message of a chat-family request, as far as the gateway checks it
/// before holding money: an object with a known role and content of a
/// shape its protocol allows. The rest is the translation's business.
#[derive(Deserialize)]
struct MessageShape<'a> {
    #[serde(default, borrow)]
    role: Option<&'a str>,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    parts: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "type")]
    kind: Option<&'a str>,
}

/// How a protocol's messages are checked.
struct MessageRules {
    /// The list's name in the protocol (`messages`, `contents`, `input`).
    list: &'static str,
    roles: &'static [&'static str],
    /// A message without a role is allowed (Gemini's single-turn contents,
    /// the Responses API's typed items).
    role_optional: bool,
    /// Where the content is: `content` (string or list of typed blocks) or
    /// Gemini's `parts` (a list of objects).
    gemini_parts: bool,
}

const CHAT_RULES: MessageRules = MessageRules {
    list: "messages",
    roles: &[
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "function",
    ],
    role_optional: false,
    gemini_parts: false,
};
const MESSAGES_RULES: MessageRules = MessageRules {
    list: "messages",
    roles: &["user", "assistant"],
    role_optional: false,
    gemini_parts: false,
};
const GEMINI_RULES: MessageRules = MessageRules {
    list: "contents",
    roles: &["user", "model", "function"],
    role_optional: true,
    gemini_parts: true,
};
const RESPONSES_RULES: MessageRules = MessageRules {
    list: "input",
    roles: &["user", "assistant", "system", "developer"],
    role_optional: true,
    gemini_parts: false,
};

fn check_messages(items: &[&RawValue], rules: &MessageRules) -> Result<(), ApiError> {
    let list = rules.list;
    for (i, item) in items.iter().enumerate() {
        let m: MessageShape = serde_json::from_str(item.get())
            .map_err(|_| invalid(format!("`{list}[{i}]` must be an object")))?;
        match m.role {
            Some(role) if !rules.roles.contains(&role) => {
                return Err(invalid(format!(
                    "`{list}[{i}].role` is `{role}`; expected one of: {}",
                    rules.roles.join(", ")
                )))
            }
            None if !rules.role_optional => {
                return Err(invalid(format!("`{list}[{i}].role` is required")))
            }
            // A typed Responses item (`function_call_output`, ...) has no role.
            None if !rules.gemini_parts && m.kind.is_none() => {
                return Err(invalid(format!("`{list}[{i}]` needs a `role` or a `type`")))
            }
            _ => {}
        }
        if rules.gemini_parts {
            let ok = m
                .parts
                .is_some_and(|p| serde_json::from_str::<Vec<Map<String, Value>>>(p.get()).is_ok());
            if !ok {
                return Err(invalid(format!(
                    "`{list}[{i}].parts` must be a list of objects"
                )));
            }
            continue;
        }
        if let Some(content) = m.content {
            // Already valid JSON: a string is one that starts with a quote.
            let text = content.get().starts_with('"');
            let blocks = || {
                serde_json::from_str::<Vec<MessageShape>>(content.get())
                    .is_ok_and(|b| b.iter().all(|b| b.kind.is_some()))
            };
            if !(text || content.get() == "null" || blocks()) {
                return Err(invalid(format!(
                    "`{list}[{i}].content` must be a string or a list of typed content blocks"
                )));
            }
        }
    }
    Ok(())
}

#[derive(Deserialize)]
struct ChatHead<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_completion_tokens: Option<u64>,
    #[serde(default, borrow)]
    messages: Option<Vec<&'a RawValue>>,
    #[serde(default)]
    stream_options: Option<Value>,
}

fn chat_head(body: &[u8], _path: &str) -> Result<Head, ApiError> {
    let head: ChatHead = parse(body, "chat")?;
    let model = required_model(head.model)?;
    let messages = head
        .messages
        .ok_or_else(|| invalid("`messages` is required"))?;
    if messages.is_empty() {
        return Err(invalid("`messages` must not be empty"));
    }
    check_messages(&messages, &CHAT_RULES)?;
    let bytes = messages.iter().map(|m| m.get().len()).sum();
    Ok(Head {
        model,
        stream: head.stream.unwrap_or(false),
        max_output_tokens: head.max_completion_tokens.or(head.max_tokens),
        prompt_tokens_estimate: estimate_prompt_tokens(bytes, messages.len()),
        meters: Vec::new(),
        wants_usage: wants_usage(head.stream_options),
    })
}

/// The legacy completions protocol's default for `max_tokens`.
pub const COMPLETIONS_DEFAULT_MAX_TOKENS: u64 = 16;

#[derive(Deserialize)]
struct CompletionsHead<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default, borrow)]
    prompt: Option<&'a RawValue>,
    #[serde(default)]
    stream_options: Option<Value>,
}

fn completions_head(body: &[u8], _path: &str) -> Result<Head, ApiError> {
    let head: CompletionsHead = parse(body, "completions")?;
    let model = required_model(head.model)?;
    if head.prompt.is_none_or(|p| p.get() == "null") {
        return Err(invalid("`prompt` is required"));
    }
    let (bytes, items) = prompt_size(head.prompt);
    Ok(Head {
        model,
        stream: head.stream.unwrap_or(false),
        max_output_tokens: Some(head.max_tokens.unwrap_or(COMPLETIONS_DEFAULT_MAX_TOKENS)),
        prompt_tokens_estimate: estimate_prompt_tokens(bytes, items),
        meters: Vec::new(),
        wants_usage: wants_usage(head.stream_options),
    })
}

#[derive(Deserialize)]
struct ResponsesHead<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    max_output_tokens: Option<u64>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
    #[serde(default, borrow)]
    instructions: Option<&'a RawValue>,
}

fn responses_head(body: &[u8], _path: &str) -> Result<Head, ApiError> {
    let head: ResponsesHead = parse(body, "responses")?;
    let model = required_model(head.model)?;
    if head.input.is_none_or(|p| p.get() == "null") {
        return Err(invalid("`input` is required"));
    }
    if let Some(Ok(items)) = head
        .input
        .filter(|i| i.get().starts_with('['))
        .map(|i| serde_json::from_str::<Vec<&RawValue>>(i.get()))
    {
        check_messages(&items, &RESPONSES_RULES)?;
    }
    let (bytes, items) = prompt_size(head.input);
    let (sys, _) = prompt_size(head.instructions);
    Ok(Head {
        model,
        stream: head.stream.unwrap_or(false),
        max_output_tokens: head.max_output_tokens,
        prompt_tokens_estimate: estimate_prompt_tokens(bytes + sys, items + 1),
        meters: Vec::new(),
        wants_usage: false,
    })
}

#[derive(Deserialize)]
struct MessagesHead<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default, borrow)]
    messages: Option<Vec<&'a RawValue>>,
    #[serde(default, borrow)]
    system: Option<&'a RawValue>,
}

fn messages_head(body: &[u8], _path: &str) -> Result<Head, ApiError> {
    let head: MessagesHead = parse(body, "messages")?;
    let model = required_model(head.model)?;
    // The Messages protocol has no default output cap; its clients always send one.
    let max_tokens = head
        .max_tokens
        .ok_or_else(|| invalid("`max_tokens` is required"))?;
    let messages = head
        .messages
        .ok_or_else(|| invalid("`messages` is required"))?;
    if messages.is_empty() {
        return Err(invalid("`messages` must not be empty"));
    }
    check_messages(&messages, &MESSAGES_RULES)?;
    let bytes: usize = messages.iter().map(|m| m.get().len()).sum();
    let (sys, _) = prompt_size(head.system);
    Ok(Head {
        model,
        stream: head.stream.unwrap_or(false),
        max_output_tokens: Some(max_tokens),
        prompt_tokens_estimate: estimate_prompt_tokens(bytes + sys, messages.len() + 1),
        meters: Vec::new(),
        wants_usage: false,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiGenerationConfig {
    #[serde(default)]
    max_output_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiHead<'a> {
    #[serde(default, borrow)]
    contents: Option<Vec<&'a RawValue>>,
    #[serde(default, borrow)]
    system_instruction: Option<&'a RawValue>,
    #[serde(default)]
    generation_config: Option<GeminiGenerationConfig>,
}

/// The model and whether it streams, from `/v1beta/models/{model}:{action}`.
pub fn gemini_target(path: &str) -> Result<(String, bool), ApiError> {
    let last = path.rsplit('/').next().unwrap_or("");
    let (model, action) = last.split_once(':').ok_or_else(|| {
        ApiError::NotFound(format!(
            "no such endpoint: POST {path} (expected models/MODEL:generateContent)"
        ))
    })?;
    let stream = match action {
        "generateContent" => false,
        "streamGenerateContent" => true,
        other => {
            return Err(ApiError::NotFound(format!(
                "no such method `{other}` (generateContent and streamGenerateContent are served)"
            )))
        }
    };
    if model.is_empty() {
        return Err(invalid("the model name in the path is empty"));
    }
    Ok((model.to_string(), stream))
}

fn gemini_head(body: &[u8], path: &str) -> Result<Head, ApiError> {
    let (model, stream) = gemini_target(path)?;
    let head: GeminiHead = parse(body, "generateContent")?;
    let contents = head
        .contents
        .ok_or_else(|| invalid("`contents` is required"))?;
    if contents.is_empty() {
        return Err(invalid("`contents` must not be empty"));
    }
    check_messages(&contents, &GEMINI_RULES)?;
    let bytes: usize = contents.iter().map(|m| m.get().len()).sum();
    let (sys, _) = prompt_size(head.system_instruction);
    Ok(Head {
        model,
        stream,
        max_output_tokens: head.generation_config.and_then(|g| g.max_output_tokens),
        prompt_tokens_estimate: estimate_prompt_tokens(bytes + sys, contents.len() + 1),
        meters: Vec::new(),
        wants_usage: false,
    })
}

// Endpoint families: no output tokens to hold; what they consume is read
// from the request (inputs, documents, `n` images, characters).

/// A family head: never streamed, no output tokens.
fn family_head(model: String, prompt_tokens_estimate: u64, meters: Vec<Meter>) -> Head {
    Head {
        model,
        stream: false,
        max_output_tokens: Some(0),
        prompt_tokens_estimate,
        meters,
        wants_usage: false,
    }
}

fn meter(kind: MeterKind, quantity: u64, detail: Option<String>) -> Meter {
    Meter {
        kind,
        quantity,
        detail,
    }
}

/// Refuses `"stream": true` on a family that has no streamed answer.
fn not_streamed(stream: Option<bool>) -> Result<(), ApiError> {
    match stream {
        Some(true) => Err(invalid("this endpoint does not stream; drop `stream`")),
        _ => Ok(()),
    }
}

#[derive(Deserialize)]
struct InputHead<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
    #[serde(default)]
    stream: Option<bool>,
}

impl InputHead<'_> {
    fn input_size(&self) -> Result<(usize, usize), ApiError> {
        match self.input {
            None => Err(invalid("`input` is required")),
            Some(i) if matches!(i.get(), "null" | "\"\"" | "[]") => {
                Err(invalid("`input` must not be empty"))
            }
            some => Ok(prompt_size(some)),
        }
    }
}

fn embeddings_head(body: &[u8], _path: &str) -> Result<Head, ApiError> {
    let head: InputHead = parse(body, "embeddings")?;
    not_streamed(head.stream)?;
    let (bytes, items) = head.input_size()?;
    Ok(family_head(
        required_model(head.model)?,
        estimate_prompt_tokens(bytes, items),
        Vec::new(),
    ))
}

/// The model that moderates when the client names none, as OpenAI does.
pub const DEFAULT_MODERATION_MODEL: &str = "omni-moderation-latest";

fn moderation_head(body: &[u8], _path: &str) -> Result<Head, ApiError> {
    let head: InputHead = parse(body, "moderations")?;
    let (bytes, items) = head.input_size()?;
    let model = head
        .model
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| DEFAULT_MODERATION_MODEL.to_string());
    Ok(family_head(
        model,
        estimate_prompt_tokens(bytes, items),
        vec![meter(MeterKind::Requests, 1, None)],
    ))
}

#[derive(Deserialize)]
struct ImagesHead {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    n: Option<u64>,
    #[serde(default)]
    size: Option<String>,
    #[serde(default)]
    quality: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
}

fn images_head(body: &[u8], _path: &str) -> Result<Head, ApiError> {
    let head: ImagesHead = parse(body, "images")?;
    not_streamed(head.stream)?;
    let prompt = head
        .prompt
        .filter(|p| !p.is_empty())
        .ok_or_else(|| invalid("`prompt` is required"))?;
    let n = head.n.unwrap_or(1);
    if !(1..=10).contains(&n) {
        return Err(invalid("`n` must be 1 to 10"));
    }
    // The same detail the adapters meter: `SIZE/QUALITY`.
    let detail = format!(
        "{}/{}",
        head.size.as_deref().unwrap_or("1024x1024"),
        head.quality.as_deref().unwrap_or("standard")
    );
    Ok(family_head(
        required_model(head.model)?,
        estimate_prompt_tokens(prompt.len(), 1),
        vec![meter(MeterKind::Images, n, Some(detail))],
    ))
}

#[derive(Deserialize)]
struct SpeechHead {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    input: Option<String>,
}

fn speech_head(body: &[u8], _path: &str) -> Result<Head, ApiError> {
    let head: SpeechHead = parse(body, "speech")?;
    let input = head
        .input
        .filter(|i| !i.is_empty())
        .ok_or_else(|| invalid("`input` is required and must be a non-empty string"))?;
    Ok(family_head(
        required_model(head.model)?,
        0,
        vec![meter(
            MeterKind::Characters,
            input.chars().count() as u64,
            None,
        )],
    ))
}

#[derive(Deserialize)]
struct TranscriptionHead {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<String>,
}

/// Reads the JSON of a transcription form's text fields; the audio's
/// duration, for the hold, is measured from the file by the caller.
fn transcription_head(fields: &[u8], _path: &str) -> Result<Head, ApiError> {
    let head: TranscriptionHead = parse(fields, "transcription")?;
    if head.stream.as_deref() == Some("true") {
        return Err(invalid(
            "streamed transcriptions are not served; drop `stream`",
        ));
    }
    Ok(family_head(required_model(head.model)?, 0, Vec::new()))
}

#[derive(Deserialize)]
struct RerankHead<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(default, borrow)]
    query: Option<&'a RawValue>,
    #[serde(default, borrow)]
    documents: Option<Vec<&'a RawValue>>,
}

/// Documents one rerank search unit covers (as Cohere counts).
pub const DOCUMENTS_PER_SEARCH_UNIT: u64 = 100;

fn rerank_head(body: &[u8], _path: &str) -> Result<Head, ApiError> {
    let head: RerankHead = parse(body, "rerank")?;
    let query = head.query.ok_or_else(|| invalid("`query` is required"))?;
    let documents = head
        .documents
        .filter(|d| !d.is_empty())
        .ok_or_else(|| invalid("`documents` must be a non-empty list"))?;
    let bytes: usize = query.get().len() + documents.iter().map(|d| d.get().len()).sum::<usize>();
    let units = (documents.len() as u64).div_ceil(DOCUMENTS_PER_SEARCH_UNIT);
    Ok(family_head(
        required_model(head.model)?,
        estimate_prompt_tokens(bytes, documents.len() + 1),
        vec![meter(MeterKind::SearchUnits, units, None)],
    ))
}

fn gemini_embeddings_head(body: &[u8], path: &str) -> Result<Head, ApiError> {
    let last = path.rsplit('/').next().unwrap_or("");
    let model = last.split_once(':').map(|(m, _)| m).unwrap_or("");
    if model.is_empty() {
        return Err(invalid("the model name in the path is empty"));
    }
    let v: serde_json::Value = parse(body, "embedContent")?;
    if v.get("content").is_none() && v.get("requests").is_none() {
        return Err(invalid(
            "`content` (or, for a batch, `requests`) is required",
        ));
    }
    Ok(family_head(
        model.to_string(),
        estimate_prompt_tokens(body.len(), 1),
        Vec::new(),
    ))
}

/// The client headers an adapter may see (spec: a translation may need the
/// protocol version or beta flags the client asked for; never a credential).
pub const FORWARDED_CLIENT_HEADERS: &[&str] = &[
    "content-type",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_roles_and_malformed_messages_are_refused_before_the_call() {
        type HeadFn = fn(&[u8], &str) -> Result<Head, ApiError>;
        let refused = |head: HeadFn, body: &str, path: &str| match head(body.as_bytes(), path) {
            Err(ApiError::InvalidRequest(msg)) => msg,
            other => panic!("{body}: {:?}", other.map(|h| h.model)),
        };
        let gem = "/v1beta/models/m:generateContent";
        let cases: &[(HeadFn, &str, &str, &str)] = &[
            (
                chat_head,
                r#"{"model":"m","messages":[{"role":"hacker","content":"x"}]}"#,
                "",
                "role` is `hacker`",
            ),
            (
                chat_head,
                r#"{"model":"m","messages":[{"content":"x"}]}"#,
                "",
                "role` is required",
            ),
            (
                chat_head,
                r#"{"model":"m","messages":["hi"]}"#,
                "",
                "must be an object",
            ),
            (
                chat_head,
                r#"{"model":"m","messages":[{"role":"user","content":7}]}"#,
                "",
                "content` must be",
            ),
            (
                chat_head,
                r#"{"model":"m","messages":[{"role":"user","content":[{"text":"x"}]}]}"#,
                "",
                "content` must be",
            ),
            (
                messages_head,
                r#"{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]}"#,
                "",
                "role` is `system`",
            ),
            (
                messages_head,
                r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":{"a":1}}]}"#,
                "",
                "content` must be",
            ),
            (
                gemini_head,
                r#"{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}"#,
                gem,
                "role` is `assistant`",
            ),
            (
                gemini_head,
                r#"{"contents":[{"role":"user","parts":"x"}]}"#,
                gem,
                "parts` must be",
            ),
            (
                gemini_head,
                r#"{"contents":[{"role":"user"}]}"#,
                gem,
                "parts` must be",
            ),
            (
                responses_head,
                r#"{"model":"m","input":[{"role":"robot","content":"x"}]}"#,
                "",
                "role` is `robot`",
            ),
            (
                responses_head,
                r#"{"model":"m","input":[{"content":"x"}]}"#,
                "",
                "needs a `role` or a `type`",
            ),
        ];
        for (head, body, path, expect) in cases {
            let msg = refused(*head, body, path);
            assert!(msg.contains(expect), "{body}: {msg}");
        }
        // What real clients send passes.
        for (head, body, path) in [
            (
                chat_head as fn(&[u8], &str) -> Result<Head, ApiError>,
                r#"{"model":"m","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","tool_call_id":"c","content":"42"}]}"#,
                "",
            ),
            (
                messages_head,
                r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"hi \"q\""}]}]}"#,
                "",
            ),
            (
                gemini_head,
                r#"{"contents":[{"parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"yo"}]}]}"#,
                gem,
            ),
            (
                responses_head,
                r#"{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"c","output":"1"}]}"#,
                "",
            ),
            (responses_head, r#"{"model":"m","input":"just text"}"#, ""),
        ] {
            assert!(head(body.as_bytes(), path).is_ok(), "{body}");
        }
    }

    #[test]
    fn paths_find_their_protocol() {
        let p = |path: &str| surface(path).protocol.map(|p| p.name);
        assert_eq!(p("/v1/chat/completions"), Some("openai-chat"));
        assert_eq!(p("/v1/completions"), Some("openai-completions"));
        assert_eq!(p("/v1/responses"), Some("openai-responses"));
        assert_eq!(p("/v1/messages"), Some("anthropic-messages"));
        assert_eq!(
            p("/v1beta/models/gemini-2.5-flash:generateContent"),
            Some("gemini")
        );
        assert_eq!(
            p("/v1/models/gemini-2.5-flash:streamGenerateContent"),
            Some("gemini")
        );
        assert_eq!(p("/v1/models"), None);
        // OpenAI's model retrieval shares the `/v1/models/` prefix.
        assert_eq!(p("/v1/models/gpt-4o"), None);
        assert_eq!(surface("/v1/models/gpt-4o").envelope, Envelope::OpenAi);
        assert_eq!(
            surface("/v1beta/models/gemini-2.5-flash").envelope,
            Envelope::Gemini
        );
        assert_eq!(surface("/v1beta/models").envelope, Envelope::Gemini);
        assert_eq!(surface("/v1/videos").envelope, Envelope::OpenAi);
        assert_eq!(
            surface("/v1/messages/count_tokens").envelope,
            Envelope::Anthropic
        );
    }

    #[test]
    fn doubled_prefixes_are_undone() {
        assert_eq!(
            normalise_path("/v1/v1/messages").as_deref(),
            Some("/v1/messages")
        );
        assert_eq!(
            normalise_path("/v1/v1beta/models/x:generateContent").as_deref(),
            Some("/v1beta/models/x:generateContent")
        );
        assert_eq!(normalise_path("/v1/messages"), None);
        assert_eq!(normalise_path("/v1/v1x"), None);
    }

    #[test]
    fn heads() {
        let h = chat_head(
            br#"{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#,
            "",
        )
        .unwrap();
        assert_eq!(
            (h.model.as_str(), h.stream, h.max_output_tokens),
            ("m", true, Some(5))
        );
        let h = completions_head(br#"{"model":"m","prompt":"Say hi"}"#, "").unwrap();
        assert_eq!(h.max_output_tokens, Some(COMPLETIONS_DEFAULT_MAX_TOKENS));
        assert!(completions_head(br#"{"model":"m"}"#, "").is_err());
        let h = responses_head(br#"{"model":"m","input":"hi","max_output_tokens":9}"#, "").unwrap();
        assert_eq!(h.max_output_tokens, Some(9));
        assert!(messages_head(
            br#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#,
            ""
        )
        .is_err());
        let h = gemini_head(
            br#"{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"maxOutputTokens":7}}"#,
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        )
        .unwrap();
        assert_eq!(
            (h.model.as_str(), h.stream, h.max_output_tokens),
            ("gemini-2.5-flash", true, Some(7))
        );
        assert!(matches!(
            gemini_target("/v1beta/models/x:countTokens"),
            Err(ApiError::NotFound(_))
        ));
    }
}
