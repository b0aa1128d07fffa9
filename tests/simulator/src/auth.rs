//! Each vendor's key check, so tests can prove the gateway injected the
//! channel's key in the scheme that vendor uses (and did not pass the
//! client's through): `Authorization: Bearer` on the OpenAI routes,
//! `x-api-key` on `/v1/messages`, `x-goog-api-key` (or `?key=`) under
//! `/v1beta`. Failures answer in the vendor's own envelope.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::errors::{ApiError, Dialect};
use crate::SimState;

pub async fn require_key(State(state): State<Arc<SimState>>, req: Request, next: Next) -> Response {
    let Some(key) = state.api_key.as_deref() else {
        return next.run(req).await;
    };
    let Some((presented, dialect)) = presented(&req) else {
        return next.run(req).await;
    };
    if presented.as_deref() != Some(key) {
        let mut e = ApiError::invalid_api_key().in_dialect(dialect);
        if dialect == Dialect::Gemini {
            // What Gemini says for a bad key (with status 400, as it does).
            e.status = axum::http::StatusCode::BAD_REQUEST;
            e.message = "API key not valid. Please pass a valid API key.".into();
        }
        return e.into_response();
    }
    next.run(req).await
}

/// The key the request presents in its route's scheme, and the route's
/// dialect; `None` for routes without a key check.
fn presented(req: &Request) -> Option<(Option<String>, Dialect)> {
    let path = req.uri().path();
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    Some(
        if path == "/v1/messages" || path.starts_with("/v1/messages/") {
            (header("x-api-key"), Dialect::Anthropic)
        } else if path == "/v1beta" || path.starts_with("/v1beta/") {
            let query_key = req
                .uri()
                .query()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("key=")))
                .map(str::to_owned);
            (header("x-goog-api-key").or(query_key), Dialect::Gemini)
        } else if path == "/v1" || path.starts_with("/v1/") {
            (
                header(AUTHORIZATION.as_str())
                    .and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned)),
                Dialect::OpenAi,
            )
        } else {
            return None;
        },
    )
}
