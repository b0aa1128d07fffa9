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
    /// An OpenAI chat or completions body's: where the members the host's
    /// edit replaces are (`None` for other protocols, and where the edit
    /// cannot read the body).
    pub places: Option<Places>,
}

/// Where, in an OpenAI chat or completions body, the members the host's
/// edit of a passthrough call replaces are (`relay::alike`): byte ranges of
/// their values as written. Read with the head, so the edit writes the
/// client's bytes with those values replaced instead of reading the body a
/// second time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    pub model: Option<std::ops::Range<usize>>,
    pub stream: Option<std::ops::Range<usize>>,
    pub stream_options: Option<std::ops::Range<usize>>,
    /// The object's closing brace, before which a member it lacks is added.
    pub close: usize,
    /// The object has members (one added goes after a comma).
    pub any_member: bool,
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
    serde_json::from_slice(body).map_err(|e| not_valid(what, e))
}

/// A body that could not be read as a `what` request.
fn not_valid(what: &str, e: serde_json::Error) -> ApiError {
    invalid(format!("the body is not a valid {what} request: {e}"))
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

fn chat_head(body: &[u8], _path: &str) -> Result<Head, ApiError> {
    let mut top = OpenAiTop::read(body, OpenAiKind::Chat)?;
    let model = top.model()?;
    let messages = top
        .messages
        .take()
        .flatten()
        .ok_or_else(|| invalid("`messages` is required"))?;
    if messages.is_empty() {
        return Err(invalid("`messages` must not be empty"));
    }
    check_messages(&messages, &CHAT_RULES)?;
    let bytes = messages.iter().map(|m| m.get().len()).sum();
    Ok(Head {
        model,
        stream: top.stream(),
        max_output_tokens: top
            .max_completion_tokens
            .flatten()
            .or(top.max_tokens.flatten()),
        prompt_tokens_estimate: estimate_prompt_tokens(bytes, messages.len()),
        meters: Vec::new(),
        wants_usage: top.wants_usage(),
        places: top.places(body),
    })
}

/// The legacy completions protocol's default for `max_tokens`.
pub const COMPLETIONS_DEFAULT_MAX_TOKENS: u64 = 16;

fn completions_head(body: &[u8], _path: &str) -> Result<Head, ApiError> {
    let mut top = OpenAiTop::read(body, OpenAiKind::Completions)?;
    let model = top.model()?;
    if top.prompt.is_none_or(|p| p.get() == "null") {
        return Err(invalid("`prompt` is required"));
    }
    let (bytes, items) = prompt_size(top.prompt);
    Ok(Head {
        model,
        stream: top.stream(),
        max_output_tokens: Some(
            top.max_tokens
                .flatten()
                .unwrap_or(COMPLETIONS_DEFAULT_MAX_TOKENS),
        ),
        prompt_tokens_estimate: estimate_prompt_tokens(bytes, items),
        meters: Vec::new(),
        wants_usage: top.wants_usage(),
        places: top.places(body),
    })
}

/// Which of the two OpenAI protocols whose passthrough the host edits a
/// body is read for: they differ in the prompt's member and in
/// `max_completion_tokens`, which only chat has.
#[derive(Clone, Copy)]
enum OpenAiKind {
    Chat,
    Completions,
}

impl OpenAiKind {
    fn what(self) -> &'static str {
        match self {
            OpenAiKind::Chat => "chat",
            OpenAiKind::Completions => "completions",
        }
    }
}

/// The top level of an OpenAI chat or completions body, read in one pass:
/// the members the head needs, and where the members the host's edit
/// replaces are ([`Places`]), so that the edit of a passthrough call does
/// not read the body again. The members are checked as a derived struct
/// checks them: a known member written twice is refused (even when the
/// first was `null`), so is one of the wrong type; the others are skipped.
struct OpenAiTop<'a> {
    /// Each known member: `None` when absent, else its value as read (an
    /// `Option` inside for `null`) and, for those the edit replaces, as
    /// written.
    model: Option<(Option<String>, &'a RawValue)>,
    stream: Option<(Option<bool>, &'a RawValue)>,
    stream_options: Option<&'a RawValue>,
    max_tokens: Option<Option<u64>>,
    /// Chat's only.
    max_completion_tokens: Option<Option<u64>>,
    /// Chat's `messages`, each message as written.
    messages: Option<Option<Vec<&'a RawValue>>>,
    /// Completions' `prompt`.
    prompt: Option<&'a RawValue>,
    /// Every key was written without an escape (the edit reads only such
    /// bodies; `relay::alike`).
    plain_keys: bool,
    any_member: bool,
}

impl<'a> OpenAiTop<'a> {
    fn read(body: &'a [u8], kind: OpenAiKind) -> Result<Self, ApiError> {
        let mut de = serde_json::Deserializer::from_slice(body);
        serde::Deserializer::deserialize_map(&mut de, kind)
            .and_then(|top| de.end().map(|()| top))
            .map_err(|e| not_valid(kind.what(), e))
    }

    /// Where, in `body` (the one it was read from), the members the edit
    /// replaces are; `None` when a key was written with an escape.
    fn places(&self, body: &[u8]) -> Option<Places> {
        if !self.plain_keys {
            return None;
        }
        let at = |raw: &RawValue| {
            let start = (raw.get().as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
            start..start + raw.get().len()
        };
        Some(Places {
            model: self.model.as_ref().map(|(_, raw)| at(raw)),
            stream: self.stream.map(|(_, raw)| at(raw)),
            stream_options: self.stream_options.map(at),
            close: body.iter().rposition(|&b| b == b'}')?,
            any_member: self.any_member,
        })
    }

    fn model(&mut self) -> Result<String, ApiError> {
        required_model(self.model.as_mut().and_then(|(m, _)| m.take()))
    }

    fn stream(&self) -> bool {
        self.stream.and_then(|(s, _)| s).unwrap_or(false)
    }

    /// `stream_options.include_usage`, read leniently: the adapter checks
    /// the member's shape, the host only needs to know whether it is `true`.
    fn wants_usage(&self) -> bool {
        self.stream_options
            .and_then(|o| serde_json::from_str::<Value>(o.get()).ok())
            .is_some_and(|o| o["include_usage"] == Value::Bool(true))
    }
}

/// The places the chat head keeps of `body`, read without the head's other
/// checks (a body without messages has them too), for the edit's tests.
#[cfg(test)]
pub(crate) fn chat_places(body: &[u8]) -> Option<Places> {
    OpenAiTop::read(body, OpenAiKind::Chat).ok()?.places(body)
}

/// A top-level key: borrowed from the body when written without an escape.
enum Key<'a> {
    Plain(&'a str),
    Escaped(String),
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> serde::de::Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a member's name")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Plain(s))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key::Escaped(s.to_owned()))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

impl<'de> serde::de::Visitor<'de> for OpenAiKind {
    type Value = OpenAiTop<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a {} request object", self.what())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<OpenAiTop<'de>, A::Error> {
        use serde::de::{Error, IgnoredAny, MapAccess};
        /// A known member's value, into its slot; a second is refused.
        fn once<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
            map: &mut A,
            slot: &mut Option<T>,
            name: &'static str,
        ) -> Result<(), A::Error> {
            if slot.is_some() {
                return Err(A::Error::duplicate_field(name));
            }
            *slot = Some(map.next_value()?);
            Ok(())
        }
        /// The same for a member the edit replaces: read as `T` and kept
        /// as written.
        fn once_kept<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
            map: &mut A,
            slot: &mut Option<(Option<T>, &'de RawValue)>,
            name: &'static str,
        ) -> Result<(), A::Error> {
            if slot.is_some() {
                return Err(A::Error::duplicate_field(name));
            }
            let raw: &'de RawValue = map.next_value()?;
            let value = serde_json::from_str(raw.get()).map_err(|e| {
                // The value's own error without its place in the value (the
                // reader adds the member's place in the body).
                let place = format!(" at line {} column {}", e.line(), e.column());
                let text = e.to_string();
                A::Error::custom(text.strip_suffix(&place).unwrap_or(&text))
            })?;
            *slot = Some((value, raw));
            Ok(())
        }
        let mut top = OpenAiTop {
            model: None,
            stream: None,
            stream_options: None,
            max_tokens: None,
            max_completion_tokens: None,
            messages: None,
            prompt: None,
            plain_keys: true,
            any_member: false,
        };
        let chat = matches!(self, OpenAiKind::Chat);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            top.any_member = true;
            let name = match &key {
                Key::Plain(k) => k,
                Key::Escaped(k) => {
                    top.plain_keys = false;
                    k.as_str()
                }
            };
            match name {
                "model" => once_kept(&mut map, &mut top.model, "model")?,
                "stream" => once_kept(&mut map, &mut top.stream, "stream")?,
                "stream_options" => once(&mut map, &mut top.stream_options, "stream_options")?,
                "max_tokens" => once(&mut map, &mut top.max_tokens, "max_tokens")?,
                "max_completion_tokens" if chat => once(
                    &mut map,
                    &mut top.max_completion_tokens,
                    "max_completion_tokens",
                )?,
                "messages" if chat => once(&mut map, &mut top.messages, "messages")?,
                "prompt" if !chat => once(&mut map, &mut top.prompt, "prompt")?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(top)
    }
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
        places: None,
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
        places: None,
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
        places: None,
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
        places: None,
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

    /// The OpenAI heads' one-pass reader refuses what the derived structs
    /// it replaced refused, and keeps where the edit's members are.
    #[test]
    fn openai_heads_check_members_and_keep_the_edits_places() {
        let msgs = r#""messages":[{"role":"user","content":"hi"}]"#;
        let refused = |body: &str| match chat_head(body.as_bytes(), "") {
            Err(ApiError::InvalidRequest(m)) => m,
            other => panic!("{body}: {other:?}"),
        };
        for (body, says) in [
            (
                format!(r#"{{"model":"m","model":"n",{msgs}}}"#),
                "duplicate field `model`",
            ),
            (
                format!(r#"{{"max_tokens":null,"max_tokens":3,"model":"m",{msgs}}}"#),
                "duplicate field `max_tokens`",
            ),
            (
                format!(r#"{{"stream":null,"model":"m","stream":true,{msgs}}}"#),
                "duplicate field `stream`",
            ),
            (
                format!(r#"{{"model":"m",{msgs},{msgs}}}"#),
                "duplicate field `messages`",
            ),
            (
                format!(r#"{{"model":5,{msgs}}}"#),
                "invalid type: integer `5`, expected a string at line 1 column 10",
            ),
            (
                format!(r#"{{"model":"m","stream":"yes",{msgs}}}"#),
                r#"invalid type: string "yes", expected a boolean at line 1 column 27"#,
            ),
            (
                format!(r#"{{"model":"m","max_tokens":-1,{msgs}}}"#),
                "invalid value: integer `-1`, expected u64",
            ),
            ("[]".into(), "expected a chat request object"),
            (
                format!(r#"{{"model":"m",{msgs}}} x"#),
                "trailing characters",
            ),
        ] {
            let msg = refused(&body);
            assert!(msg.contains(says), "{body}: {msg}");
            assert!(
                msg.starts_with("the body is not a valid chat request: "),
                "{msg}"
            );
        }
        // Members it does not know are skipped unread, twice or not.
        let h = chat_head(
            format!(r#"{{"x":1,"x":[2],"prompt":3,"prompt":4,"model":"m",{msgs}}}"#).as_bytes(),
            "",
        )
        .unwrap();
        assert_eq!(h.model, "m");
        let h = completions_head(
            br#"{"messages":1,"messages":2,"max_completion_tokens":1,"max_completion_tokens":2,"model":"m","prompt":"p"}"#,
            "",
        )
        .unwrap();
        assert_eq!(h.max_output_tokens, Some(COMPLETIONS_DEFAULT_MAX_TOKENS));
        // The places are the values as written, whatever the spacing.
        let body = format!(
            r#" {{ "stream" : false , "model":"m" , "x":{{"model":1}}, {msgs} , "stream_options" :{{"include_usage": true}} }}  "#
        );
        let h = chat_head(body.as_bytes(), "").unwrap();
        assert!(h.wants_usage && !h.stream);
        let p = h.places.unwrap();
        let at = |r: Option<std::ops::Range<usize>>| &body[r.unwrap()];
        assert_eq!(at(p.model.clone()), r#""m""#);
        assert_eq!(at(p.stream.clone()), "false");
        assert_eq!(at(p.stream_options.clone()), r#"{"include_usage": true}"#);
        assert_eq!(&body[p.close..], "}  ");
        assert!(p.any_member);
        let p = completions_head(br#"{"prompt":"p","model":"m"}"#, "")
            .unwrap()
            .places
            .unwrap();
        assert_eq!((p.stream, p.stream_options, p.close), (None, None, 25));
        // A key written with an escape is read, and the edit is left to
        // the adapter.
        let h = chat_head(format!(r#"{{"mod\u0065l":"m",{msgs}}}"#).as_bytes(), "").unwrap();
        assert_eq!((h.model.as_str(), h.places), ("m", None));
        let h = chat_head(
            format!(r#"{{"\u0078":1,"model":"m",{msgs}}}"#).as_bytes(),
            "",
        )
        .unwrap();
        assert_eq!(h.places, None);
        // Other protocols keep none.
        let h = responses_head(br#"{"model":"m","input":"hi"}"#, "").unwrap();
        assert_eq!(h.places, None);
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
