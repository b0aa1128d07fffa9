//! The web console: customers sign up, verify their e-mail, log in and
//! manage their tokens, usage, video tasks and webhook deliveries; operators
//! (who log in with the admin key) see accounts, top up, and see channels
//! and loaded plugins.
//!
//! Design, and why:
//! - Its own listener (`[console] listen`), off without the section. The
//!   public API stays token-only and the admin API stays loopback-only and
//!   key-only; the console is the one surface with cookies, and keeping it on
//!   its own port keeps cookies, CSRF and HTML errors out of the other two.
//! - Server-rendered HTML (`maud`, which escapes every interpolation), plain
//!   forms, one small inline stylesheet and server-drawn SVG charts: no
//!   JavaScript and nothing to build; everything is in the binary.
//! - Users, verification links and sessions live in the store
//!   (`store::users`); link tokens and session ids are random 256-bit values
//!   kept only as SHA-256. Passwords are Argon2id (PHC strings, hashed off
//!   the async threads). A user gets an account (with the configured trial
//!   credit, through the same ledger call the admin API uses) only when the
//!   link from the e-mail is opened; opening it is a GET (the e-mail's link),
//!   single use, expiring after `verify_link_ttl_secs` by the gateway's
//!   clock.
//! - Sessions: cookie `gw_session` (`HttpOnly; SameSite=Strict; Path=/`,
//!   `Secure` unless `secure_cookies = false`), expiring after
//!   `session_ttl_secs`; logout deletes the stored session.
//! - CSRF: every POST goes through [`csrf_guard`], which refuses it unless
//!   its form's `csrf` field equals the session's token (or, before login,
//!   the random `gw_csrf` cookie the form's page set: a double-submit
//!   token), and unless its `Origin`, when sent, is this console's. So no
//!   handler can forget the check.
//! - Login attempts (customers and operators) are counted per e-mail and per
//!   client address in a sliding window on the gateway's clock; past the
//!   limit a page says when to retry (429).
//! - Token pages call the same `api::admin::issue_token` the admin API uses,
//!   webhook re-send the same `webhooks::resend`; usage is read only through
//!   the store's `usage` / `usage_between`.
//! - E-mail goes out through SMTP (`lettre`, `mail.rs`); when sending fails
//!   the page says so and the user stays unverified.

pub mod config;
mod customer;
mod mail;
mod operator;
mod pages;

use crate::error::ConsoleError;
use crate::state::SharedState;
use crate::store::users::{Session, SessionOwner};
use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use config::ConsoleConfig;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use subtle::ConstantTimeEq;

pub use config::SmtpTls;

const SESSION_COOKIE: &str = "gw_session";
const CSRF_COOKIE: &str = "gw_csrf";
/// Largest form the console reads.
const MAX_FORM_BYTES: usize = 64 * 1024;

/// What every console handler shares.
pub struct Console {
    pub app: SharedState,
    pub cfg: ConsoleConfig,
    /// Where people open the console (for e-mail links and the Origin
    /// check): `[console] public_url`, else the bound address.
    pub public_url: String,
    attempts: Attempts,
    mailer: Option<mail::Mailer>,
}

pub type SharedConsole = Arc<Console>;

impl Console {
    /// The console for `app`, listening on `bound`.
    pub fn new(
        app: SharedState,
        cfg: ConsoleConfig,
        bound: std::net::SocketAddr,
    ) -> anyhow::Result<Console> {
        let mailer = cfg.smtp.as_ref().map(mail::Mailer::new).transpose()?;
        let public_url = cfg
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{bound}"));
        Ok(Console {
            app,
            cfg,
            public_url,
            attempts: Attempts::default(),
            mailer,
        })
    }

    fn now(&self) -> i64 {
        self.app.clock.now_secs()
    }

    /// The session the request's cookie names, if it is valid now.
    fn session(&self, headers: &HeaderMap) -> Result<Option<(String, Session)>, ConsoleError> {
        let Some(id) = cookie(headers, SESSION_COOKIE) else {
            return Ok(None);
        };
        let hash = digest(&id);
        let s = self
            .app
            .store
            .session(&hash, self.now())
            .map_err(ConsoleError::internal)?;
        Ok(s.map(|s| (hash, s)))
    }

    /// Starts a session for `owner`; returns its `Set-Cookie` value.
    async fn open_session(&self, owner: SessionOwner) -> Result<String, ConsoleError> {
        let id = random_token();
        let now = self.now();
        let s = Session {
            owner,
            csrf: random_token(),
            created_at: now,
            expires_at: now + self.cfg.session_ttl_secs,
        };
        self.app
            .store
            .put_session(digest(&id), s)
            .await
            .map_err(ConsoleError::internal)?;
        Ok(self.cookie(SESSION_COOKIE, &id, Some(self.cfg.session_ttl_secs)))
    }

    /// A `Set-Cookie` value with the console's flags; `max_age` 0 removes it.
    fn cookie(&self, name: &str, value: &str, max_age: Option<i64>) -> String {
        let mut c = cookie::Cookie::build((name.to_string(), value.to_string()))
            .http_only(true)
            .same_site(cookie::SameSite::Strict)
            .path("/")
            .secure(self.cfg.secure_cookies);
        if let Some(secs) = max_age {
            c = c.max_age(cookie::time::Duration::seconds(secs));
        }
        c.build().to_string()
    }

    /// Counts a login attempt for each key (`email:...`, `ip:...`), or
    /// refuses it when any is over its limit.
    fn count_login(&self, keys: &[(String, u32)]) -> Result<(), ConsoleError> {
        let window_ms = self.cfg.login_window_secs * 1000;
        self.attempts
            .count(keys, window_ms, self.app.clock.now_ms())
            .map_err(|retry_after_secs| ConsoleError::TooManyAttempts { retry_after_secs })
    }
}

/// The console's router (served by `server` on `[console] listen`).
pub fn router(console: SharedConsole) -> Router {
    Router::new()
        .route("/", get(customer::home))
        .route("/signup", get(customer::signup_page).post(customer::signup))
        .route("/verify", get(customer::verify))
        .route("/login", get(customer::login_page).post(customer::login))
        .route("/logout", post(customer::logout))
        .route("/account", get(customer::account))
        .route(
            "/tokens",
            get(customer::tokens).post(customer::create_token),
        )
        .route("/tokens/{id}/disable", post(customer::disable_token))
        .route("/tokens/{id}/delete", post(customer::delete_token))
        .route("/usage", get(customer::usage))
        .route("/videos", get(customer::videos))
        .route("/webhooks", get(customer::webhooks))
        .route("/webhooks/{id}/resend", post(customer::resend_webhook))
        .route(
            "/operator/login",
            get(operator::login_page).post(operator::login),
        )
        .route("/operator", get(operator::accounts))
        .route("/operator/accounts/{id}/topup", post(operator::top_up))
        .route("/operator/channels", get(operator::channels))
        .route("/operator/plugins", get(operator::plugins))
        .route("/style.css", get(pages::stylesheet))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(console.clone(), csrf_guard))
        .layer(middleware::from_fn(security_headers))
        .with_state(console)
}

async fn not_found() -> ConsoleError {
    ConsoleError::NotFound("no such page".into())
}

/// Forgets login attempts outside their window now and then.
pub fn spawn_sweeper(console: &SharedConsole, stop: tokio_util::sync::CancellationToken) {
    let console = console.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {
                    let now_ms = console.app.clock.now_ms();
                    console.attempts.sweep(console.cfg.login_window_secs * 1000, now_ms);
                    if let Err(e) = console.app.store.sweep_console(now_ms / 1000).await {
                        tracing::warn!("console: removing expired sessions failed: {e}");
                    }
                }
            }
        }
    });
}

/// Pages are not cached, framed or sniffed, and every answer carries a
/// request id, as on the other listeners (the edge tells the router's
/// answers from hyper's bare ones by it).
async fn security_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    if let Ok(id) = header::HeaderValue::from_str(&crate::ids::new_request_id()) {
        h.insert("x-request-id", id);
    }
    let set = [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'",
        ),
    ];
    for (name, value) in set {
        h.insert(name, header::HeaderValue::from_static(value));
    }
    resp
}

/// Refuses any POST whose form lacks the right CSRF token or that comes
/// from another origin (see the module comment).
async fn csrf_guard(State(console): State<SharedConsole>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    if !same_origin(&console, &parts.headers) {
        return ConsoleError::Csrf.into_response();
    }
    let bytes = match axum::body::to_bytes(body, MAX_FORM_BYTES).await {
        Ok(b) => b,
        Err(_) => return ConsoleError::BadForm("the form is too large".into()).into_response(),
    };
    let presented = form_urlencoded::parse(&bytes)
        .find(|(k, _)| k == "csrf")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let expected = match console.session(&parts.headers) {
        Ok(Some((_, s))) => Some(s.csrf),
        Ok(None) => cookie(&parts.headers, CSRF_COOKIE),
        Err(e) => return e.into_response(),
    };
    let ok = match expected {
        Some(exp) if !presented.is_empty() => {
            bool::from(presented.as_bytes().ct_eq(exp.as_bytes()))
        }
        _ => false,
    };
    if !ok {
        return ConsoleError::Csrf.into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// True unless the request names an `Origin` other than this console's
/// (its public URL, or the host the request was sent to).
fn same_origin(console: &Console, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    if origin == console.public_url {
        return true;
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    !host.is_empty() && authority == Some(host)
}

/// A cookie's value from the request.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .map(|c| c.value().to_string())
}

/// 256 random bits, hex.
fn random_token() -> String {
    use rand::RngCore as _;
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    hex::encode(b)
}

/// SHA-256, hex: how link tokens and session ids are stored.
fn digest(secret: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(secret.as_bytes()))
}

/// A logged-in customer (the request's session is a customer's).
pub struct Customer {
    pub email: String,
    pub account_id: String,
    pub csrf: String,
}

impl FromRequestParts<SharedConsole> for Customer {
    type Rejection = ConsoleError;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &SharedConsole,
    ) -> Result<Self, ConsoleError> {
        let Some((_, s)) = console.session(&parts.headers)? else {
            return Err(ConsoleError::LoginRequired);
        };
        let SessionOwner::Customer { email } = s.owner else {
            return Err(ConsoleError::LoginRequired);
        };
        let user = console
            .app
            .store
            .user(&email)
            .map_err(ConsoleError::internal)?
            .ok_or(ConsoleError::LoginRequired)?;
        let account_id = user
            .account_id
            .filter(|_| user.verified)
            .ok_or(ConsoleError::LoginRequired)?;
        Ok(Customer {
            email,
            account_id,
            csrf: s.csrf,
        })
    }
}

/// A logged-in operator.
pub struct Operator {
    pub csrf: String,
}

impl FromRequestParts<SharedConsole> for Operator {
    type Rejection = ConsoleError;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &SharedConsole,
    ) -> Result<Self, ConsoleError> {
        match console.session(&parts.headers)? {
            Some((_, s)) if s.owner == SessionOwner::Operator => Ok(Operator { csrf: s.csrf }),
            _ => Err(ConsoleError::OperatorRequired),
        }
    }
}

/// Someone not (necessarily) logged in, on a page with a form: the
/// double-submit CSRF token, and the cookie to set when it is new.
pub struct Visitor {
    pub csrf: String,
    pub set_cookie: Option<String>,
}

impl FromRequestParts<SharedConsole> for Visitor {
    type Rejection = ConsoleError;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &SharedConsole,
    ) -> Result<Self, ConsoleError> {
        Ok(match cookie(&parts.headers, CSRF_COOKIE) {
            Some(csrf) if csrf.len() == 64 => Visitor {
                csrf,
                set_cookie: None,
            },
            _ => {
                let csrf = random_token();
                let set_cookie = Some(console.cookie(CSRF_COOKIE, &csrf, None));
                Visitor { csrf, set_cookie }
            }
        })
    }
}

/// Login attempts per key in a sliding window.
#[derive(Default)]
struct Attempts(Mutex<HashMap<String, VecDeque<i64>>>);

impl Attempts {
    /// Counts one attempt for every key, or none and the seconds until
    /// the first refused key has room again.
    fn count(&self, keys: &[(String, u32)], window_ms: i64, now: i64) -> Result<(), u64> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (key, limit) in keys {
            let log = map.entry(key.clone()).or_default();
            while log.front().is_some_and(|t| now - *t >= window_ms) {
                log.pop_front();
            }
            if log.len() >= *limit as usize {
                let oldest = log.front().copied().unwrap_or(now);
                let wait = (oldest + window_ms - now).max(1) as u64;
                return Err(wait.div_ceil(1000));
            }
        }
        for (key, _) in keys {
            map.entry(key.clone()).or_default().push_back(now);
        }
        Ok(())
    }

    fn sweep(&self, window_ms: i64, now: i64) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, log| log.back().is_some_and(|t| now - *t < window_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_are_limited_per_key_in_a_sliding_window() {
        let a = Attempts::default();
        let keys = |e: &str| vec![(format!("email:{e}"), 2), ("ip:1".to_string(), 3)];
        assert!(a.count(&keys("x"), 1000, 0).is_ok());
        assert!(a.count(&keys("x"), 1000, 100).is_ok());
        assert_eq!(a.count(&keys("x"), 1000, 200), Err(1));
        // Another e-mail from the same address: the address has one left.
        assert!(a.count(&keys("y"), 1000, 300).is_ok());
        assert_eq!(a.count(&keys("z"), 1000, 400), Err(1));
        // The window slides.
        assert!(a.count(&keys("x"), 1000, 1100).is_ok());
        a.sweep(1000, 5000);
        assert!(a.0.lock().unwrap().is_empty());
    }

    #[test]
    fn cookies_are_read_from_any_cookie_header() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, "a=1; gw_session=abc".parse().unwrap());
        assert_eq!(cookie(&h, "gw_session").as_deref(), Some("abc"));
        assert_eq!(cookie(&h, "gw_csrf"), None);
    }
}
