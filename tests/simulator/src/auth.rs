//! Each vendor's key check, so tests can prove the gateway injected the
//! channel's key in the scheme that vendor uses (and did not pass the
//! client's through): `Authorization: Bearer <key>` on the OpenAI routes
//! (every other `/v1/...`), `x-api-key: <key>` on `/v1/messages` (a bearer
//! token is not accepted there), `x-goog-api-key: <key>` or `?key=<key>`
//! under `/v1beta`. Failures answer in the vendor's own envelope: OpenAI and
//! Anthropic 401 (`invalid_api_key` / `authentication_error`), Gemini 400
//! `INVALID_ARGUMENT` "API key not valid. Please pass a valid API key.", as
//! Gemini itself does.
//!
//! The generated images under `/v1/images/files/` need no key: a vendor's
//! image URL is a link the gateway hands to its own client, which has no
//! vendor key.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::errors::{ApiError, Dialect};
use crate::SimState;

pub async fn require_key(State(state): State<Arc<SimState>>, req: Request, next: Next) -> Response {
    let Some(key) = state.api_key.as_deref() else {
        return next.run(req).await;
    };
    let path = req.uri().path();
    if !guarded(path) {
        return next.run(req).await;
    }
    let dialect = Dialect::for_path(path);
    if presented(&req, dialect).as_deref() != Some(key) {
        return rejection(dialect).into_response();
    }
    next.run(req).await
}

/// The vendor routes: `/v1/...` and `/v1beta/...`, except the image links.
fn guarded(path: &str) -> bool {
    if path.starts_with(crate::families::images::FILES_PREFIX) {
        return false;
    }
    ["/v1", "/v1beta"]
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
}

/// What a vendor answers to a missing or wrong key.
fn rejection(dialect: Dialect) -> ApiError {
    let mut e = ApiError::invalid_api_key().in_dialect(dialect);
    if dialect == Dialect::Gemini {
        e.status = StatusCode::BAD_REQUEST;
        e.message = "API key not valid. Please pass a valid API key.".into();
    }
    e
}

/// The key the request presents in its vendor's scheme.
fn presented(req: &Request, dialect: Dialect) -> Option<String> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    match dialect {
        Dialect::Anthropic => header("x-api-key"),
        Dialect::Gemini => header("x-goog-api-key").or_else(|| {
            req.uri()
                .query()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("key=")))
                .map(str::to_owned)
        }),
        Dialect::OpenAi => header(AUTHORIZATION.as_str())
            .and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn request(uri: &str, headers: &[(&str, &str)]) -> Request {
        let mut b = Request::builder().uri(uri);
        for (n, v) in headers {
            b = b.header(*n, *v);
        }
        b.body(Body::empty()).unwrap_or_default()
    }

    fn key_of(uri: &str, headers: &[(&str, &str)]) -> Option<String> {
        let req = request(uri, headers);
        presented(&req, Dialect::for_path(req.uri().path()))
    }

    #[test]
    fn each_vendor_reads_its_own_scheme() {
        let bearer = ("authorization", "Bearer k");
        let x_api_key = ("x-api-key", "k");
        let goog = ("x-goog-api-key", "k");
        assert_eq!(
            key_of("/v1/chat/completions", &[bearer]).as_deref(),
            Some("k")
        );
        assert_eq!(key_of("/v1/chat/completions", &[x_api_key, goog]), None);
        assert_eq!(key_of("/v1/chat/completions?key=k", &[]), None);
        assert_eq!(key_of("/v1/messages", &[x_api_key]).as_deref(), Some("k"));
        assert_eq!(
            key_of("/v1/messages", &[bearer]),
            None,
            "no bearer on /v1/messages"
        );
        assert_eq!(
            key_of("/v1beta/models/m:generateContent", &[goog]).as_deref(),
            Some("k")
        );
        assert_eq!(
            key_of("/v1beta/models/m:streamGenerateContent?alt=sse&key=k", &[]).as_deref(),
            Some("k")
        );
        assert_eq!(key_of("/v1beta/models/m:generateContent", &[bearer]), None);
    }

    #[test]
    fn only_vendor_routes_are_guarded() {
        assert!(guarded("/v1") && guarded("/v1/models") && guarded("/v1beta/models/x"));
        assert!(!guarded("/_sim/requests") && !guarded("/v1x") && !guarded("/"));
        assert!(!guarded("/v1/images/files/img-0-1x1.png"));
        assert!(guarded("/v1/images/generations"));
    }

    #[test]
    fn rejections_in_each_envelope() {
        let a = rejection(Dialect::Anthropic);
        assert_eq!(a.status, StatusCode::UNAUTHORIZED);
        assert_eq!(a.body()["error"]["type"], "authentication_error");
        let g = rejection(Dialect::Gemini);
        assert_eq!(g.body()["error"]["status"], "INVALID_ARGUMENT");
        assert_eq!(rejection(Dialect::OpenAi), ApiError::invalid_api_key());
    }
}
