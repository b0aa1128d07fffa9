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

impl VendorInfo {
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
    fn path(ctx: &RequestCtx) -> Result<String, TranslateError>;

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
