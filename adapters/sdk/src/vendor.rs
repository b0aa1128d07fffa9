//! What an adapter author writes: a [`Vendor`] says who the vendor is, where
//! its endpoint lives and what extra headers it wants. Everything else — the
//! WIT glue, passthrough or translation through the canonical form, streams,
//! usage — is the [`crate::driver`]'s job.
//!
//! ```text
//! struct Acme;
//! impl gateway_guest_sdk::Vendor for Acme {
//!     fn info() -> VendorInfo { VendorInfo::new("acme", env!("CARGO_PKG_VERSION"), Protocol::OpenaiChat, AuthScheme::Bearer) }
//!     fn path(_ctx: &RequestCtx) -> Result<String, TranslateError> { Ok("/chat/completions".into()) }
//! }
//! gateway_guest_sdk::export_adapter!(Acme);
//! ```

use crate::bindings::types::{AuthScheme, Header, Protocol, RequestCtx};
use crate::errors::UpstreamFailure;
use crate::TranslateError;

/// The five chat protocols the driver translates between.
pub const CHAT_PROTOCOLS: &[Protocol] = &[
    Protocol::OpenaiChat,
    Protocol::OpenaiCompletions,
    Protocol::OpenaiResponses,
    Protocol::AnthropicMessages,
    Protocol::Gemini,
];

/// What `describe` reports.
#[derive(Debug, Clone)]
pub struct VendorInfo {
    /// Channels refer to the adapter by this name.
    pub name: &'static str,
    pub version: &'static str,
    /// The protocol the vendor speaks.
    pub protocol: Protocol,
    /// How the host presents the channel's key.
    pub auth: AuthScheme,
    /// Client protocols served; by default every chat protocol.
    pub client_protocols: &'static [Protocol],
}

/// Every chat protocol and every OpenAI-style family: what an adapter for
/// an OpenAI-compatible vendor serves.
pub const CHAT_AND_OPENAI_FAMILIES: &[Protocol] = &[
    Protocol::OpenaiChat,
    Protocol::OpenaiCompletions,
    Protocol::OpenaiResponses,
    Protocol::AnthropicMessages,
    Protocol::Gemini,
    Protocol::Embeddings,
    Protocol::GeminiEmbeddings,
    Protocol::Images,
    Protocol::Speech,
    Protocol::Transcription,
    Protocol::Moderation,
];

/// Every chat protocol and both spellings of embeddings.
pub const CHAT_AND_EMBEDDINGS: &[Protocol] = &[
    Protocol::OpenaiChat,
    Protocol::OpenaiCompletions,
    Protocol::OpenaiResponses,
    Protocol::AnthropicMessages,
    Protocol::Gemini,
    Protocol::Embeddings,
    Protocol::GeminiEmbeddings,
];

impl VendorInfo {
    /// Serves these client protocols instead of every chat protocol (see
    /// [`CHAT_AND_OPENAI_FAMILIES`], [`CHAT_AND_EMBEDDINGS`]).
    pub fn serving(mut self, protocols: &'static [Protocol]) -> Self {
        self.client_protocols = protocols;
        self
    }

    pub fn new(
        name: &'static str,
        version: &'static str,
        protocol: Protocol,
        auth: AuthScheme,
    ) -> Self {
        Self {
            name,
            version,
            protocol,
            auth,
            client_protocols: CHAT_PROTOCOLS,
        }
    }
}

/// One vendor's facts. Only `info` and `path` are required.
pub trait Vendor: 'static {
    fn info() -> VendorInfo;

    /// Path and query of the vendor endpoint, appended by the host to the
    /// channel's base URL. `ctx.stream` says whether the call is streamed.
    ///
    /// A function of `ctx` alone, as [`Vendor::headers`] is: where the
    /// client speaks the vendor's own OpenAI protocol the host reuses the
    /// path and headers of one call for every call alike to it
    /// (`stream-splice.alike-requests` in `wit/plugin.wit`).
    fn path(ctx: &RequestCtx) -> Result<String, TranslateError>;

    /// The dialect the vendor speaks for a call of one of the endpoint
    /// families ([`crate::families`]); `client` is the family the client
    /// called. By default the OpenAI-style family, whichever embeddings
    /// spelling the client used.
    fn family_dialect(client: Protocol) -> Protocol {
        match client {
            Protocol::GeminiEmbeddings => Protocol::Embeddings,
            other => other,
        }
    }

    /// Path and query of a family call in `dialect` (`batch`: Gemini's
    /// `batchEmbedContents` rather than `embedContent`). By default the
    /// OpenAI-style paths under a base URL that ends in `/v1`.
    fn family_path(
        _ctx: &RequestCtx,
        dialect: Protocol,
        _batch: bool,
    ) -> Result<String, TranslateError> {
        openai_family_path(dialect)
    }

    /// Headers the vendor wants beside `content-type: application/json`
    /// (for example a protocol version). Never a credential: the host adds it.
    fn headers(_ctx: &RequestCtx) -> Vec<Header> {
        Vec::new()
    }

    /// The vendor's error answer in gateway terms. The default reads the
    /// vendor protocol's own error shape.
    fn map_error(status: u16, headers: &[Header], body: &[u8]) -> UpstreamFailure {
        crate::errors::map_vendor_error(Self::info().protocol, status, headers, body)
    }
}

/// The OpenAI-style path of a family (`/embeddings`, `/images/generations`,
/// `/audio/speech`, `/audio/transcriptions`, `/rerank`, `/moderations`).
pub fn openai_family_path(dialect: Protocol) -> Result<String, TranslateError> {
    Ok(match dialect {
        Protocol::Embeddings => "/embeddings",
        Protocol::Images => "/images/generations",
        Protocol::Speech => "/audio/speech",
        Protocol::Transcription => "/audio/transcriptions",
        Protocol::Rerank => "/rerank",
        Protocol::Moderation => "/moderations",
        other => {
            return Err(TranslateError::unsupported(format!(
                "{other:?} has no OpenAI-style path"
            )))
        }
    }
    .to_owned())
}

/// The value of the channel option `key`, if the config set it.
pub fn option<'a>(ctx: &'a RequestCtx, key: &str) -> Option<&'a str> {
    ctx.channel_options
        .iter()
        .find(|s| s.key == key)
        .map(|s| s.value.as_str())
}

/// The value of the (filtered) client header `name`, if the client sent it.
pub fn client_header<'a>(ctx: &'a RequestCtx, name: &str) -> Option<&'a str> {
    ctx.client_headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// A header record.
pub fn header(name: &str, value: impl Into<String>) -> Header {
    Header {
        name: name.to_owned(),
        value: value.into(),
    }
}
