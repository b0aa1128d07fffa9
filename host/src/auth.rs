//! Who is calling: the API key, the token it belongs to, and the token's
//! controls (status, expiry, IP whitelist; the model whitelist is checked by
//! handlers once they know the model).
//!
//! Keys are looked up by their SHA-256, so the stored secret is never
//! compared byte by byte and never kept in clear.

use crate::error::ApiError;
use crate::protocol::{KeyPlace, Surface, DEFAULT_SURFACE};
use crate::state::SharedState;
use crate::store::records::{Token, TokenStatus};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use ipnet::IpNet;
use std::net::IpAddr;
use std::time::Instant;

/// Set on every request by the request-id middleware.
#[derive(Debug, Clone)]
pub struct ReqInfo {
    pub id: String,
    pub ip: IpAddr,
    pub started: Instant,
}

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token: std::sync::Arc<Token>,
    pub info: ReqInfo,
}

/// The presented key, looked for in the places the route's client protocol
/// uses (see `protocol`), in that order.
pub fn presented_key<'a>(
    headers: &'a HeaderMap,
    query: Option<&'a str>,
    places: &[KeyPlace],
) -> Option<&'a str> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|k| !k.is_empty())
    };
    places.iter().find_map(|place| match place {
        KeyPlace::Bearer => {
            let v = header("authorization")?;
            (v.len() > 7 && v[..7].eq_ignore_ascii_case("bearer ")).then(|| v[7..].trim())
        }
        KeyPlace::XApiKey => header("x-api-key"),
        KeyPlace::XGoogApiKey => header("x-goog-api-key"),
        KeyPlace::QueryKey => query?
            .split('&')
            .find_map(|kv| kv.strip_prefix("key="))
            .filter(|k| !k.is_empty()),
    })
}

fn ip_allowed(list: &[String], ip: IpAddr) -> bool {
    list.iter().any(|entry| {
        entry
            .parse::<IpNet>()
            .map(|n| n.contains(&ip))
            .or_else(|_| entry.parse::<IpAddr>().map(|a| a == ip))
            .unwrap_or(false)
    })
}

/// Checks a token's own controls against the request.
pub fn check_token(token: &Token, ip: IpAddr, now_secs: i64) -> Result<(), ApiError> {
    if token.status != TokenStatus::Active {
        return Err(ApiError::InvalidToken);
    }
    if token.expires_at.is_some_and(|t| t <= now_secs) {
        return Err(ApiError::InvalidToken);
    }
    if let Some(ips) = &token.ips {
        if !ip_allowed(ips, ip) {
            return Err(ApiError::TokenIpDenied(ip.to_string()));
        }
    }
    Ok(())
}

impl Caller {
    pub fn check_model(&self, model: &str) -> Result<(), ApiError> {
        match &self.token.models {
            Some(list) if !list.iter().any(|m| m == model) => {
                Err(ApiError::TokenModelDenied(model.to_string()))
            }
            _ => Ok(()),
        }
    }
}

impl FromRequestParts<SharedState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self, ApiError> {
        // No await below: the span's guard never crosses one.
        let _span = crate::telemetry::span!("auth").entered();
        let info = parts
            .extensions
            .get::<ReqInfo>()
            .cloned()
            .ok_or_else(|| ApiError::internal("request info missing"))?;
        let places = parts
            .extensions
            .get::<Surface>()
            .unwrap_or(&DEFAULT_SURFACE)
            .keys;
        // A key in the URL ends up in proxies' and servers' logs: only the
        // Gemini API's own `/v1beta` paths take one (its SDKs' convention).
        let query = parts
            .uri
            .path()
            .starts_with("/v1beta/")
            .then(|| parts.uri.query())
            .flatten();
        let key = presented_key(&parts.headers, query, places).ok_or(ApiError::InvalidToken)?;
        let token = state
            .ledger
            .token_by_key(key)
            .ok_or(ApiError::InvalidToken)?;
        check_token(&token, info.ip, state.clock.now_secs())?;
        Ok(Caller { token, info })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> Token {
        Token {
            id: "tok_1".into(),
            account_id: "acct_1".into(),
            name: "t".into(),
            key_hash: String::new(),
            key_hint: String::new(),
            models: None,
            ips: Some(vec!["10.0.0.0/8".into(), "192.0.2.7".into()]),
            quota_limit: None,
            used: 0,
            reserved: 0,
            expires_at: Some(100),
            status: TokenStatus::Active,
            created_at: 0,
        }
    }

    #[test]
    fn keys_only_from_the_places_a_protocol_uses() {
        use crate::protocol::{ANTHROPIC_MESSAGES, GEMINI, OPENAI_CHAT};
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer sk-abc".parse().unwrap());
        assert_eq!(presented_key(&h, None, OPENAI_CHAT.keys), Some("sk-abc"));
        let mut h = HeaderMap::new();
        h.insert("x-api-key", "sk-x".parse().unwrap());
        assert_eq!(
            presented_key(&h, None, ANTHROPIC_MESSAGES.keys),
            Some("sk-x")
        );
        assert_eq!(presented_key(&h, None, OPENAI_CHAT.keys), None);
        let none = HeaderMap::new();
        assert_eq!(
            presented_key(&none, Some("alt=sse&key=sk-q"), GEMINI.keys),
            Some("sk-q")
        );
        assert_eq!(
            presented_key(&none, Some("key=sk-q"), OPENAI_CHAT.keys),
            None
        );
        assert_eq!(presented_key(&none, None, GEMINI.keys), None);
    }

    #[test]
    fn token_controls() {
        let t = token();
        let inside: IpAddr = "10.9.9.9".parse().unwrap();
        assert!(check_token(&t, inside, 99).is_ok());
        assert!(check_token(&t, "192.0.2.7".parse().unwrap(), 99).is_ok());
        assert!(matches!(
            check_token(&t, inside, 100),
            Err(ApiError::InvalidToken)
        ));
        assert!(matches!(
            check_token(&t, "8.8.8.8".parse().unwrap(), 1),
            Err(ApiError::TokenIpDenied(_))
        ));
        let mut d = token();
        d.status = TokenStatus::Disabled;
        assert!(matches!(
            check_token(&d, inside, 1),
            Err(ApiError::InvalidToken)
        ));
    }
}
