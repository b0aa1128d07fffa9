//! HTTP routes. One file per endpoint family; this file holds the public and
//! admin routers and the middleware every request passes through:
//!
//! 0. a doubled version prefix (`/v1/v1/...`) is undone before routing, so
//!    SDKs that add `/v1` themselves work with the `/v1` base URL too;
//! 1. a request id (header `X-Request-Id` on every response, and the suffix of
//!    every error message), the client address, and the path's surface
//!    (`protocol::surface`: the client protocol, its key places and error
//!    envelope);
//! 2. the per-address rate limit, and the request's metrics (`metrics`:
//!    route template, model, status, client protocol, time) and span
//!    (`telemetry`) (public API only);
//! 3. turning any error the framework produces by itself (unknown route,
//!    wrong method, body too large, unreadable body) into the standard
//!    envelope, so clients only ever see one error shape.

pub mod admin;
pub mod body;
pub mod dashboard;
pub mod models;
pub mod openapi;
pub mod text;
pub mod videos;

use crate::auth::ReqInfo;
use crate::error::{ApiError, Enveloped, ENVELOPE, REQUEST_ID};
use crate::ids::new_request_id;
use crate::limits::{client_ip, counted_as, RetryAfter};
use crate::state::SharedState;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, MatchedPath, Request, State};
use axum::handler::Handler;
use axum::http::{HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use metrics::SharedString;
use std::net::SocketAddr;
use std::time::Instant;
use tracing::Instrument;

/// The public API under `/v1` and `/v1beta`: every client protocol's routes
/// (from the protocol table), then the rest.
pub fn public_router(state: SharedState) -> Router {
    let body_limit = state.config.limits.max_body_bytes;
    public_routes()
        .router
        .fallback(unknown_route)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            public_context,
        ))
        .with_state(state)
}

/// Every route the public router serves, as `(method, axum path pattern)`;
/// the OpenAPI document's test compares its operations with this list.
pub fn public_route_list() -> Vec<(Method, &'static str)> {
    public_routes().list
}

/// The public routes, and the list of them, built together so neither can
/// miss one.
fn public_routes() -> Routes {
    let mut routes = Routes::default();
    let mut registered = std::collections::HashSet::new();
    for p in crate::protocol::ALL {
        for route in p.routes {
            // Gemini's chat and embeddings rows share their routes.
            if registered.insert(*route) {
                routes = routes.post(route, text::call);
            }
        }
    }
    routes
        .get("/v1beta/models", models::gemini_list)
        .get(crate::protocol::GEMINI.routes[0], models::gemini_get)
        .get("/v1/models", models::list)
        // Same pattern as Gemini's `/v1/models/{model}:{action}` (POST).
        .get(crate::protocol::GEMINI.routes[1], models::retrieve)
        .get(
            "/v1/dashboard/billing/subscription",
            dashboard::subscription,
        )
        .get("/v1/dashboard/billing/usage", dashboard::usage)
        .get("/v1/capabilities", videos::capabilities)
        .post("/v1/videos/quote", videos::quote)
        .post("/v1/videos", videos::create)
        .get("/v1/videos/{id}", videos::retrieve)
        .get("/v1/videos/{id}/content", videos::download)
        .post("/v1/videos/{id}/cancel", videos::cancel)
        // The one route that needs no token.
        .get(openapi::PATH, openapi::serve)
}

/// A router that records the routes it is given.
#[derive(Default)]
struct Routes {
    router: Router<SharedState>,
    list: Vec<(Method, &'static str)>,
}

impl Routes {
    fn get<H: Handler<T, SharedState>, T: 'static>(mut self, path: &'static str, h: H) -> Self {
        self.list.push((Method::GET, path));
        self.router = self.router.route(path, get(h));
        self
    }

    fn post<H: Handler<T, SharedState>, T: 'static>(mut self, path: &'static str, h: H) -> Self {
        self.list.push((Method::POST, path));
        self.router = self.router.route(path, post(h));
        self
    }
}

/// The admin API (loopback only; see `admin`).
pub fn admin_router(state: SharedState) -> Router {
    admin::router(state.clone())
        .fallback(unknown_route)
        .layer(middleware::from_fn_with_state(state.clone(), admin_context))
        .with_state(state)
}

/// A request body, whole, read under the limits of `body` (size, idle
/// timeout, memory budget); its bytes count against the budget until the
/// lease is dropped.
pub(crate) async fn read_body(
    state: &SharedState,
    req: Request,
) -> Result<(Bytes, body::BodyLease), ApiError> {
    body::read_whole(state, req).await
}

async fn unknown_route(method: Method, uri: Uri) -> ApiError {
    ApiError::NotFound(format!("no such endpoint: {method} {}", uri.path()))
}

async fn public_context(
    State(state): State<SharedState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let surface = crate::protocol::surface(req.uri().path());
    let observed = Observed::of(&req, surface);
    let span = observed.span(&req);
    let ip = client_ip(peer.ip(), req.headers(), &state.config.trusted_proxies);
    let limit = state.config.limits.rate_limit_requests;
    let window_secs = state.config.limits.rate_limit_window.as_secs();
    let counted = counted_as(ip, state.config.limits.ipv6_prefix_len);
    let refused = state
        .rate
        .check(counted)
        .err()
        .map(|RetryAfter(secs)| ApiError::RateLimited {
            ip: counted.to_string(),
            limit,
            window_secs,
            retry_after_secs: secs,
        });
    let body_limit = state.config.limits.max_body_bytes;
    let resp = with_context(ip, surface, refused, body_limit, req, next)
        .instrument(span.clone())
        .await;
    observed.record(&state, &span, &resp, started);
    resp
}

/// What the metrics and the request's span say of a public API request:
/// its route template (never the raw path) and client protocol.
struct Observed {
    route: SharedString,
    protocol: &'static str,
}

impl Observed {
    fn of(req: &Request, surface: crate::protocol::Surface) -> Observed {
        Observed {
            route: req
                .extensions()
                .get::<MatchedPath>()
                .map_or(SharedString::const_str("unmatched"), |m| {
                    SharedString::from(m.as_str().to_string())
                }),
            protocol: surface.protocol.map_or("none", |p| p.name),
        }
    }

    /// The request's span (none when tracing is off), a child of the
    /// client's `traceparent` if it sent one.
    fn span(&self, req: &Request) -> tracing::Span {
        let span = crate::telemetry::span!(
            "request",
            otel.name = format!("{} {}", req.method(), self.route.as_ref()),
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            http.request.method = %req.method(),
            http.route = self.route.as_ref(),
            http.response.status_code = tracing::field::Empty,
            gateway.client_protocol = self.protocol,
            gateway.model = tracing::field::Empty,
            gateway.request_id = tracing::field::Empty,
        );
        crate::telemetry::adopt_client_parent(&span, req.headers());
        span
    }

    /// Counts the request once its answer's head is ready.
    fn record(self, state: &SharedState, span: &tracing::Span, resp: &Response, started: Instant) {
        let status = resp.status().as_u16();
        let model = resp
            .extensions()
            .get::<crate::metrics::ModelLabel>()
            .map_or(SharedString::const_str(crate::metrics::NO_MODEL), |m| {
                m.0.clone()
            });
        if let Some(crate::error::Refusal(code)) = resp.extensions().get() {
            state.metrics.refusal(code);
        }
        if !span.is_none() {
            span.record("http.response.status_code", status);
            span.record("gateway.model", model.as_ref());
            if let Some(id) = resp
                .headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
            {
                span.record("gateway.request_id", id);
            }
            if status >= 500 {
                span.record("otel.status_code", "ERROR");
            }
        }
        state
            .metrics
            .request(self.route, model, status, self.protocol, started.elapsed());
    }
}

/// Undoes a doubled version prefix before routing (see `protocol::normalise_path`).
pub fn normalise_prefix<B>(mut req: axum::http::Request<B>) -> axum::http::Request<B> {
    if let Some(path) = crate::protocol::normalise_path(req.uri().path()) {
        let mut parts = req.uri().clone().into_parts();
        let pq = match req.uri().query() {
            Some(q) => format!("{path}?{q}"),
            None => path,
        };
        if let Ok(pq) = pq.parse() {
            parts.path_and_query = Some(pq);
            if let Ok(uri) = Uri::from_parts(parts) {
                *req.uri_mut() = uri;
            }
        }
    }
    req
}

async fn admin_context(
    State(state): State<SharedState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
    next: Next,
) -> Response {
    let surface = crate::protocol::surface(req.uri().path());
    with_context(
        peer.ip(),
        surface,
        None,
        state.config.limits.max_body_bytes,
        req,
        next,
    )
    .await
}

async fn with_context(
    ip: std::net::IpAddr,
    surface: crate::protocol::Surface,
    refused: Option<ApiError>,
    body_limit: usize,
    mut req: Request,
    next: Next,
) -> Response {
    let id = new_request_id();
    req.extensions_mut().insert(ReqInfo {
        id: id.clone(),
        ip,
        started: Instant::now(),
    });
    req.extensions_mut().insert(surface);
    let mut resp = REQUEST_ID
        .scope(
            id.clone(),
            ENVELOPE.scope(surface.envelope, async move {
                if let Some(e) = refused {
                    return e.into_response();
                }
                if body::declared_too_large(req.headers(), body_limit) {
                    return ApiError::BodyTooLarge(body_limit).into_response();
                }
                let resp = next.run(req).await;
                if !is_stray_error(&resp) {
                    return resp;
                }
                // Boxed: reading the error's text is a future of its own
                // that only the rare stray error needs; inline it would
                // size every request's future (which the middleware's box
                // copies whole).
                Box::pin(envelope_stray_error(resp, body_limit)).await
            }),
        )
        .await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

/// Whether a response is an error the framework made (plain text), not one
/// of ours in the envelope.
fn is_stray_error(resp: &Response) -> bool {
    resp.status().as_u16() >= 400 && resp.extensions().get::<Enveloped>().is_none()
}

/// Wraps an error response the framework made (plain text, [`is_stray_error`])
/// in the envelope.
async fn envelope_stray_error(resp: Response, body_limit: usize) -> Response {
    let status = resp.status();
    let text = axum::body::to_bytes(resp.into_body(), 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let err = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::BodyTooLarge(body_limit),
        StatusCode::METHOD_NOT_ALLOWED => {
            ApiError::MethodNotAllowed("method not allowed for this endpoint".into())
        }
        StatusCode::NOT_FOUND => ApiError::NotFound("not found".into()),
        s if s.is_client_error() => ApiError::InvalidRequest(if text.is_empty() {
            "the request could not be read".into()
        } else {
            text
        }),
        _ => ApiError::Internal(text),
    };
    err.into_response()
}
