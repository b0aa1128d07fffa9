//! The vendor requests of an adapter's calls that the host may build itself:
//! for each call context an adapter gave its word for
//! (`stream-splice.alike-requests` in `wit/plugin.wit`), the method, path and
//! headers of its request. `relay::alike` decides when to use them and makes
//! the body.
//!
//! Why: where the client speaks the vendor's own OpenAI protocol, the
//! adapter's request is the client's body with the model renamed (and a
//! stream's usage asked for), sent to a path and with headers that depend on
//! the call's context alone. A guest call to learn that again for every
//! call — the instance's check-out, the context and body copied in and the
//! request out, serde_json in WebAssembly, the epoch ticker's wake-up — was
//! 12–19% of a plain call's CPU at 32 connections (release builds, README's
//! *What changed*).
//!
//! What is kept: per adapter, so a reload (a new [`super::registry::AdapterPlugin`])
//! starts empty, one entry per `request-ctx` less its request id, at most
//! [`MAX_CONTEXTS`]. Clients choose part of a context (the few headers an
//! adapter may see), so a full table is emptied and fills again rather than
//! growing. An adapter whose word proved wrong once (its request was not
//! the host's edit) is not taken at its word again until it is reloaded.

use super::bindings::types::RequestCtx;
use axum::http::{HeaderMap, Method};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The most call contexts kept per adapter: a deployment has one per
/// channel, model, stream or not, and set of client headers an adapter may
/// see; a table that fills is emptied.
pub const MAX_CONTEXTS: usize = 256;

/// The request shape of one call context (see the module doc).
#[derive(Debug)]
pub struct Alike {
    context: Context,
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
}

/// A `request-ctx` less its request id, owned.
#[derive(Debug, PartialEq, Eq)]
struct Context {
    protocol: std::mem::Discriminant<super::bindings::types::Protocol>,
    model: String,
    upstream_model: String,
    stream: bool,
    client_headers: Vec<(String, String)>,
    channel_options: Vec<(String, String)>,
}

impl Context {
    fn of(ctx: &RequestCtx) -> Self {
        Self {
            protocol: std::mem::discriminant(&ctx.client_protocol),
            model: ctx.model.clone(),
            upstream_model: ctx.upstream_model.clone(),
            stream: ctx.stream,
            client_headers: ctx
                .client_headers
                .iter()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
            channel_options: ctx
                .channel_options
                .iter()
                .map(|s| (s.key.clone(), s.value.clone()))
                .collect(),
        }
    }

    /// Whether `ctx` is this context (its request id aside), without
    /// copying it.
    fn is(&self, ctx: &RequestCtx) -> bool {
        self.protocol == std::mem::discriminant(&ctx.client_protocol)
            && self.model == ctx.model
            && self.upstream_model == ctx.upstream_model
            && self.stream == ctx.stream
            && borrowed_pairs(&self.client_headers).eq(ctx
                .client_headers
                .iter()
                .map(|h| (h.name.as_str(), h.value.as_str())))
            && borrowed_pairs(&self.channel_options).eq(ctx
                .channel_options
                .iter()
                .map(|s| (s.key.as_str(), s.value.as_str())))
    }
}

/// A context's kept pairs, borrowed, to compare with a call's.
fn borrowed_pairs(list: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    list.iter().map(|(a, b)| (a.as_str(), b.as_str()))
}

/// One adapter's table (see the module doc).
#[derive(Default)]
pub struct AlikeRequests {
    hasher: foldhash::fast::RandomState,
    table: Mutex<foldhash::HashMap<u64, Arc<Alike>>>,
    /// The adapter's word proved wrong: nothing is kept or used.
    distrusted: AtomicBool,
}

impl AlikeRequests {
    fn key(&self, ctx: &RequestCtx) -> u64 {
        let mut h = self.hasher.build_hasher();
        std::mem::discriminant(&ctx.client_protocol).hash(&mut h);
        ctx.model.hash(&mut h);
        ctx.upstream_model.hash(&mut h);
        ctx.stream.hash(&mut h);
        ctx.client_headers.len().hash(&mut h);
        for header in &ctx.client_headers {
            header.name.hash(&mut h);
            header.value.hash(&mut h);
        }
        ctx.channel_options.len().hash(&mut h);
        for setting in &ctx.channel_options {
            setting.key.hash(&mut h);
            setting.value.hash(&mut h);
        }
        h.finish()
    }

    /// The request shape kept for calls alike to `ctx`, if any.
    pub fn find(&self, ctx: &RequestCtx) -> Option<Arc<Alike>> {
        if self.distrusted.load(Ordering::Relaxed) {
            return None;
        }
        let key = self.key(ctx);
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table.get(&key).filter(|a| a.context.is(ctx)).cloned()
    }

    /// Keeps the shape of a request the adapter gave its word for, checked
    /// against the host's edit (`relay::alike`).
    pub fn remember(&self, ctx: &RequestCtx, method: Method, path: String, headers: HeaderMap) {
        if self.distrusted.load(Ordering::Relaxed) {
            return;
        }
        let key = self.key(ctx);
        let alike = Arc::new(Alike {
            context: Context::of(ctx),
            method,
            path,
            headers,
        });
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if table.len() >= MAX_CONTEXTS && !table.contains_key(&key) {
            table.clear();
        }
        table.insert(key, alike);
    }

    /// The adapter's word proved wrong: forget every shape and take its
    /// word no more. True the first time (for the caller's log line).
    pub fn distrust(&self) -> bool {
        let first = !self.distrusted.swap(true, Ordering::Relaxed);
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        first
    }

    /// How many contexts are kept (for tests).
    pub fn len(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::bindings::types::{Header, Protocol, Setting};

    fn ctx(model: &str, request_id: &str) -> RequestCtx {
        RequestCtx {
            client_protocol: Protocol::OpenaiChat,
            model: model.into(),
            upstream_model: "up".into(),
            stream: true,
            request_id: request_id.into(),
            client_headers: vec![Header {
                name: "openai-beta".into(),
                value: "x".into(),
            }],
            channel_options: vec![Setting {
                key: "api_version".into(),
                value: "1".into(),
            }],
        }
    }

    fn remember(t: &AlikeRequests, c: &RequestCtx, path: &str) {
        t.remember(c, Method::POST, path.into(), HeaderMap::new());
    }

    #[test]
    fn a_call_alike_but_for_its_request_id_finds_the_shape() {
        let t = AlikeRequests::default();
        remember(&t, &ctx("m", "req_1"), "/chat/completions");
        let found = t.find(&ctx("m", "req_2")).unwrap();
        assert_eq!(found.path, "/chat/completions");
        assert_eq!(found.method, Method::POST);
    }

    #[test]
    fn any_other_difference_is_another_context() {
        let t = AlikeRequests::default();
        let base = ctx("m", "r");
        remember(&t, &base, "/p");
        let mut others = Vec::new();
        let mut c = ctx("m2", "r");
        others.push(c.clone());
        c = ctx("m", "r");
        c.client_protocol = Protocol::OpenaiCompletions;
        others.push(c.clone());
        c = ctx("m", "r");
        c.upstream_model = "up2".into();
        others.push(c.clone());
        c = ctx("m", "r");
        c.stream = false;
        others.push(c.clone());
        c = ctx("m", "r");
        c.client_headers[0].value = "y".into();
        others.push(c.clone());
        c = ctx("m", "r");
        c.client_headers.clear();
        others.push(c.clone());
        c = ctx("m", "r");
        c.channel_options[0].value = "2".into();
        others.push(c.clone());
        for other in &others {
            assert!(t.find(other).is_none(), "{other:?}");
        }
    }

    #[test]
    fn a_full_table_is_emptied_before_it_grows() {
        let t = AlikeRequests::default();
        for i in 0..MAX_CONTEXTS {
            remember(&t, &ctx(&format!("m{i}"), "r"), "/p");
        }
        assert_eq!(t.len(), MAX_CONTEXTS);
        remember(&t, &ctx("m0", "r"), "/again");
        assert_eq!(t.len(), MAX_CONTEXTS, "a context kept is replaced in place");
        remember(&t, &ctx("one more", "r"), "/p");
        assert_eq!(t.len(), 1);
        assert!(t.find(&ctx("one more", "r")).is_some());
    }

    #[test]
    fn a_distrusted_adapter_keeps_and_finds_nothing() {
        let t = AlikeRequests::default();
        remember(&t, &ctx("m", "r"), "/p");
        assert!(t.distrust());
        assert!(!t.distrust(), "only the first time is news");
        assert!(t.find(&ctx("m", "r")).is_none());
        remember(&t, &ctx("m", "r"), "/p");
        assert!(t.is_empty());
    }
}
