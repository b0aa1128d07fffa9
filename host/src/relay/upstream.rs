//! Sending a checked guest-built request to a channel's vendor, with the
//! channel's credential injected by the host.

use super::form::ClientForm;
use crate::config::ChannelConfig;
use crate::error::ApiError;
use crate::plugins::bindings::types::AuthScheme;
use crate::plugins::session::{OutboundBody, OutboundRequest};
use axum::http::uri::PathAndQuery;
use axum::http::{header, HeaderName, HeaderValue, Uri};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Transport(String),
}

/// The full URL for a guest-chosen path (checked by `plugins::session`: it
/// starts with one `/`) under the channel's base URL: the URL that
/// `base_url` followed by `path` spells.
///
/// Built from the base parsed at start-up, so a call parses only its own
/// path and query, not the scheme and host again (whose IDNA processing
/// was most of a whole parse). A base with its own query or fragment, or a
/// path with a fragment, is parsed whole as before.
pub fn url(channel: &ChannelConfig, path: &str) -> Result<reqwest::Url, ApiError> {
    let base = &channel.base;
    if base.query().is_some() || base.fragment().is_some() || path.contains('#') {
        let whole = format!("{}{}", channel.base_url, path);
        return reqwest::Url::parse(&whole).map_err(invalid_url);
    }
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let mut url = base.clone();
    url.set_path(&under_base(base, path));
    url.set_query(query);
    Ok(url)
}

/// `path` after the base's own path (without its trailing `/`).
fn under_base(base: &reqwest::Url, path: &str) -> String {
    let mut full = String::with_capacity(base.path().len() + path.len());
    full.push_str(base.path().trim_end_matches('/'));
    full.push_str(path);
    full
}

/// An upstream URL that does not parse: the adapter chose its path.
fn invalid_url(e: impl std::fmt::Display) -> ApiError {
    ApiError::Adapter(format!("the upstream URL is not valid: {e}"))
}

/// [`url`] as the direct client's `http::Uri`.
///
/// A path of plain characters only (letters, digits and `-._~/!$&()*+,;=:@?`),
/// with no dot segment, is one that [`url`] would leave as it is: such a
/// path is put after the base's path and the channel's scheme and authority
/// (split at start-up) without a parse of the whole URL. Any other path
/// goes through [`url`] and one parse of its text, as before.
pub fn uri(channel: &ChannelConfig, path: &str) -> Result<Uri, ApiError> {
    if let Some(uri) = plain_uri(channel, path) {
        return Ok(uri);
    }
    let url = url(channel, path)?;
    Uri::try_from(url.as_str()).map_err(invalid_url)
}

/// [`uri`] without a parse, for a plain path (see there); `None` for any
/// other path, or a channel without an origin (a base with a query or a
/// fragment has none).
fn plain_uri(channel: &ChannelConfig, path: &str) -> Option<Uri> {
    let (scheme, authority) = channel.origin.as_ref()?;
    if !path.bytes().all(plain_byte) || path.contains("/.") {
        return None;
    }
    let full = under_base(&channel.base, path);
    let mut parts = axum::http::uri::Parts::default();
    parts.scheme = Some(scheme.clone());
    parts.authority = Some(authority.clone());
    parts.path_and_query = Some(PathAndQuery::from_maybe_shared(bytes::Bytes::from(full)).ok()?);
    Uri::from_parts(parts).ok()
}

/// A byte of a path [`url`] takes as it is (see [`uri`]).
fn plain_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~/!$&()*+,;=:@?".contains(&b)
}

/// What the client sent, for an adapter that asks for it as it is: the
/// body's bytes, or the multipart form the host read.
pub enum ClientPayload<'a> {
    Bytes(&'a bytes::Bytes),
    Form(&'a ClientForm),
}

impl ClientPayload<'static> {
    /// A call with no client body of its own (the video task API).
    pub fn none() -> Self {
        static EMPTY: bytes::Bytes = bytes::Bytes::new();
        ClientPayload::Bytes(&EMPTY)
    }
}

/// Builds the request with the credential in the place the adapter named.
/// Fails when the adapter asked for a form the client did not send, or for
/// the raw body of a form (which the host has read into parts).
pub fn build(
    http: &reqwest::Client,
    channel: &ChannelConfig,
    auth: AuthScheme,
    mut req: OutboundRequest,
    client: ClientPayload<'_>,
) -> Result<reqwest::RequestBuilder, ApiError> {
    if matches!(req.body, OutboundBody::ClientForm(_)) {
        // The form's own type carries its boundary.
        req.headers.remove(reqwest::header::CONTENT_TYPE);
    }
    let mut b = http
        .request(req.method, url(channel, &req.path)?)
        .headers(req.headers);
    if let Some((name, value)) = credential(channel, auth)? {
        b = b.header(name, value);
    }
    Ok(match (req.body, client) {
        (OutboundBody::Bytes(bytes), _) if bytes.is_empty() => b,
        (OutboundBody::Bytes(bytes), _) => b.body(bytes),
        (OutboundBody::ClientBody, ClientPayload::Bytes(body)) => b.body(body.clone()),
        (OutboundBody::ClientForm(set), ClientPayload::Form(form)) => {
            b.multipart(form.upstream(&set))
        }
        (OutboundBody::ClientBody, ClientPayload::Form(_)) => {
            return Err(ApiError::Adapter(
                "it asked for the client's raw body, but the request is a form (use client-form)"
                    .into(),
            ))
        }
        (OutboundBody::ClientForm(_), ClientPayload::Bytes(_)) => {
            return Err(ApiError::Adapter(
                "it asked to send the client's form, but the client sent no form".into(),
            ))
        }
    })
}

/// The header that carries the channel's key where the adapter asked for
/// it (marked sensitive, so it stays out of debug output); `None` for a
/// channel without a key or an adapter that wants none. Both clients
/// (`build`, `relay::vendor`) send it so.
pub fn credential(
    channel: &ChannelConfig,
    auth: AuthScheme,
) -> Result<Option<(HeaderName, HeaderValue)>, ApiError> {
    let Some(key) = &channel.key else {
        return Ok(None);
    };
    let (name, value) = match auth {
        AuthScheme::Bearer => (header::AUTHORIZATION, format!("Bearer {key}")),
        AuthScheme::XApiKey => (HeaderName::from_static("x-api-key"), key.clone()),
        AuthScheme::XGoogApiKey => (HeaderName::from_static("x-goog-api-key"), key.clone()),
        AuthScheme::None => return Ok(None),
    };
    // The config check refuses such keys (`config::sendable`).
    let mut value = HeaderValue::try_from(value)
        .map_err(|_| ApiError::internal("the channel's key is not a valid header value"))?;
    value.set_sensitive(true);
    Ok(Some((name, value)))
}

/// What clients are told of a failed connection.
pub const CONNECT_FAILED: &str = "the upstream refused or dropped the connection";
/// ... of another failure sending the request.
pub const REQUEST_FAILED: &str = "the upstream request failed";
/// ... of a failure reading the answer.
pub const READ_FAILED: &str = "reading the upstream's answer failed";

/// `what`, then `first` and each error it was caused by, `: `-separated.
pub fn with_sources(what: &str, first: Option<&(dyn std::error::Error + 'static)>) -> String {
    let mut text = String::from(what);
    let mut src = first;
    while let Some(s) = src {
        text.push_str(": ");
        text.push_str(&s.to_string());
        src = s.source();
    }
    text
}

/// Sends and waits for the response head, at most `timeout`.
/// With tracing on, the wait is the `upstream` span, whose context goes to
/// the vendor in `traceparent` (`telemetry`).
pub async fn send(
    b: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<reqwest::Response, SendError> {
    let span = crate::telemetry::span!("upstream", otel.kind = "client");
    let b = span.in_scope(|| crate::telemetry::inject(b));
    let sent = tracing::Instrument::instrument(tokio::time::timeout(timeout, b.send()), span);
    match sent.await {
        Err(_) => Err(SendError::Timeout(timeout)),
        Ok(Err(e)) if e.is_timeout() => Err(SendError::Timeout(timeout)),
        Ok(Err(e)) => Err(SendError::Transport(describe(&e))),
        Ok(Ok(r)) => Ok(r),
    }
}

/// A reqwest error for clients: what went wrong, not where (the upstream's
/// URL names internal hosts); the full error goes to the log.
pub fn describe(e: &reqwest::Error) -> String {
    tracing::debug!("upstream transport error: {e:?}");
    if e.is_timeout() {
        return "the upstream did not answer in time".into();
    }
    if e.is_connect() {
        return CONNECT_FAILED.into();
    }
    let what = if e.is_body() || e.is_decode() {
        READ_FAILED
    } else {
        REQUEST_FAILED
    };
    // Not `e` itself: reqwest's own message names the URL.
    with_sources(what, std::error::Error::source(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Channel base URLs of every shape the two functions tell apart.
    const BASES: [&str; 10] = [
        "http://127.0.0.1:9",
        "http://127.0.0.1:9/",
        "http://127.0.0.1:9/v1",
        "https://api.example.com/v1/",
        "https://xn--bcher-kva.example/v1beta",
        "https://B\u{fc}cher.example/openai/v1",
        "http://[::1]:8080/a/b",
        "https://h.example/v1?api-version=2024-10-21",
        "https://h.example/base%20dir",
        "https://h.example:8443/base%20dir",
    ];

    #[test]
    fn the_url_is_the_one_base_url_and_path_spell() {
        let paths = [
            "/chat/completions",
            "/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            "/a%2Fb/c?x=1&y=%20z",
            "/with space?q=a b",
            "/v1/../x",
            "/frag#ment",
            "/",
            "/q?",
        ];
        for base in BASES {
            let channel = ChannelConfig::for_test("c", base);
            for path in paths {
                let expected =
                    reqwest::Url::parse(&format!("{}{}", channel.base_url, path)).unwrap();
                assert_eq!(url(&channel, path).unwrap(), expected, "{base} + {path}");
            }
        }
    }

    #[test]
    fn the_uri_is_the_urls_with_or_without_a_parse() {
        // Plain: taken without a parse (but under a base with a query),
        // and the same URI as the parse's.
        let plain = [
            "/chat/completions",
            "/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            "/v1/messages?beta=true&x=(1)",
            "/a//b/~c-d_e.f",
            "/",
            "/q?",
            "/q?a=b?c@d:e;f,g+h*i!j$k",
        ];
        // Not plain: the parse's URI, as before.
        let other = [
            "/a%2Fb/c?x=1&y=%20z",
            "/with space?q=a b",
            "/v1/../x",
            "/./x",
            "/.well-known/x",
            "/frag#ment",
            "/back\\slash",
            "/\u{e9}t\u{e9}",
            "/q?it's",
        ];
        for base in BASES {
            let channel = ChannelConfig::for_test("c", base);
            let parsed = |path: &str| Uri::try_from(url(&channel, path).unwrap().as_str()).unwrap();
            let with_query = channel.base.query().is_some();
            assert_eq!(channel.origin.is_none(), with_query, "{base}");
            for path in plain {
                let fast = plain_uri(&channel, path);
                let expected = (!with_query).then(|| parsed(path));
                assert_eq!(fast, expected, "{base} + {path}");
                assert_eq!(
                    uri(&channel, path).unwrap(),
                    parsed(path),
                    "{base} + {path}"
                );
            }
            for path in other {
                assert!(plain_uri(&channel, path).is_none(), "{base} + {path}");
                assert_eq!(
                    uri(&channel, path).unwrap(),
                    parsed(path),
                    "{base} + {path}"
                );
            }
        }
    }
}
