//! One request's use of a guest: a fresh store and instance, the typed calls,
//! and a check of everything the guest returns before the host acts on it
//! (a method, path and headers it can send; a status and content type it can
//! answer with; events it can frame). A guest answer that fails a check is a
//! [`GuestFailure::Invalid`], reported like a trap.

use super::bindings::adapter::VendorAdapter;
use super::bindings::policy::exports::gateway::plugin::policy::PatchOp;
use super::bindings::types::{
    AnswerMode as WitAnswerMode, Header, MeterKind as WitMeterKind, PluginError, Protocol,
    RequestBody, RequestCtx, SseEvent, UpstreamRequest, Usage as WitUsage,
};
use super::patch::Edit;
use super::registry::{AdapterPlugin, PolicyPlugin};
use super::sandbox::{guarded, GuestFailure, GuestState, Sandbox};
use crate::billing::usage::{Meter, MeterKind, Usage};
use crate::error::ApiError;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use std::sync::Arc;
use wasmtime::component::ResourceAny;
use wasmtime::Store;

/// Headers a guest may not set: the host alone presents credentials, and
/// framing headers are the HTTP client's business.
const FORBIDDEN_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "cookie",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
];

/// What can go wrong when asking an adapter.
#[derive(Debug)]
pub enum AdapterError {
    /// The guest misbehaved.
    Guest(GuestFailure),
    /// The guest declined, with a reason.
    Plugin(PluginError),
}

impl std::fmt::Display for AdapterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdapterError::Guest(g) => write!(f, "{g}"),
            AdapterError::Plugin(PluginError::InvalidRequest(m)) => {
                write!(f, "invalid request: {m}")
            }
            AdapterError::Plugin(PluginError::Unsupported(m)) => write!(f, "unsupported: {m}"),
            AdapterError::Plugin(PluginError::UpstreamFormat(m)) => {
                write!(f, "unreadable upstream answer: {m}")
            }
            AdapterError::Plugin(PluginError::UpstreamFailed(e)) => {
                write!(f, "the upstream reported a failure: {}", e.message)
            }
        }
    }
}

impl From<GuestFailure> for AdapterError {
    fn from(e: GuestFailure) -> Self {
        AdapterError::Guest(e)
    }
}

impl From<AdapterError> for ApiError {
    fn from(e: AdapterError) -> Self {
        match e {
            AdapterError::Guest(g) => g.into(),
            AdapterError::Plugin(PluginError::InvalidRequest(m)) => ApiError::InvalidRequest(m),
            AdapterError::Plugin(PluginError::Unsupported(m)) => {
                ApiError::InvalidRequest(format!("unsupported: {m}"))
            }
            AdapterError::Plugin(PluginError::UpstreamFormat(m)) => {
                ApiError::Adapter(format!("the upstream's answer could not be read: {m}"))
            }
            AdapterError::Plugin(PluginError::UpstreamFailed(e)) => ApiError::Upstream {
                // Only an error status is accepted from a guest.
                status: if (400..600).contains(&e.status) {
                    e.status
                } else {
                    502
                },
                code: if e.code.is_empty() {
                    "upstream_error".into()
                } else {
                    e.code
                },
                message: e.message,
                retry_after: e.retry_after_secs.map(crate::error::UpstreamRetry::secs),
            },
        }
    }
}

impl From<GuestFailure> for ApiError {
    fn from(g: GuestFailure) -> Self {
        // Operators get the plugin's name in the log; clients get what happened.
        tracing::warn!(request_id = %crate::error::current_request_id(), "guest failure: {g}");
        match g {
            GuestFailure::Capacity(n) => ApiError::Upstream {
                status: 503,
                code: "adapter_capacity".into(),
                message: format!("all {n} adapter instances are busy; retry shortly"),
                retry_after: Some(crate::error::UpstreamRetry::secs(1)),
            },
            GuestFailure::Deadline { budget_ms, .. } => {
                ApiError::Adapter(format!("it exceeded its CPU deadline of {budget_ms} ms"))
            }
            GuestFailure::Memory { limit_mib, .. } => {
                ApiError::Adapter(format!("it exceeded its memory limit of {limit_mib} MiB"))
            }
            GuestFailure::Trap { .. } => ApiError::Adapter("it crashed (trap)".into()),
            GuestFailure::Invalid { detail, .. } => {
                ApiError::Adapter(format!("it returned an invalid answer ({detail})"))
            }
            GuestFailure::Unloadable { detail, .. } => {
                ApiError::Adapter(format!("its code could not be loaded ({detail})"))
            }
        }
    }
}

/// The body of a request the host sends upstream.
#[derive(Debug, PartialEq, Eq)]
pub enum OutboundBody {
    Bytes(Vec<u8>),
    /// The client's body as received, sent without passing through the guest.
    ClientBody,
    /// The client's multipart form, its text fields set as listed (name,
    /// value), its file parts streamed by the host.
    ClientForm(Vec<(String, String)>),
}

/// What the host does with a successful vendor answer.
#[derive(Debug, PartialEq, Eq)]
pub enum AnswerMode {
    /// Hand it to the adapter.
    Translate,
    /// Relay the vendor's bytes to the client as they come; bill this.
    Relay(Usage),
    /// Hand it to the adapter, except a stream's ordinary events, which
    /// the host relays itself with the model the client sees set in them
    /// (`relay::splice`). With `alike_requests`, the adapter's word that
    /// calls alike to this one get the request the host's own edit makes
    /// (`plugins::alike`).
    Splice { model: String, alike_requests: bool },
}

/// A request the host can send, checked.
#[derive(Debug)]
pub struct OutboundRequest {
    pub method: Method,
    /// Starts with `/`.
    pub path: String,
    pub headers: HeaderMap,
    pub body: OutboundBody,
    pub answer: AnswerMode,
    pub state: String,
}

/// How a translated stream ends, checked.
#[derive(Debug)]
pub struct StreamClose {
    /// The client events of the stream's last vendor events (`finish`'s
    /// `rest`), up to the one that failed, if one did.
    pub rest_events: Vec<SseEvent>,
    /// Why one of the last events could not be translated: the stream ends
    /// with this failure after `rest_events`, as after a failed `push`.
    pub rest_failed: Option<PluginError>,
    /// The closing events (none after a failure).
    pub events: Vec<SseEvent>,
    pub usage: Option<Usage>,
    /// The vendor sent its protocol's finish marker.
    pub complete: bool,
}

/// A guest's usage report in the host's terms, its parts clamped to their totals.
pub fn host_usage(u: WitUsage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_tokens,
        cache_write_tokens: u.cache_write_tokens,
        reasoning_tokens: u.reasoning_tokens,
        meters: u
            .meters
            .into_iter()
            .map(|m| Meter {
                kind: match m.kind {
                    WitMeterKind::Images => MeterKind::Images,
                    WitMeterKind::Characters => MeterKind::Characters,
                    WitMeterKind::AudioMs => MeterKind::AudioMs,
                    WitMeterKind::SearchUnits => MeterKind::SearchUnits,
                    WitMeterKind::Requests => MeterKind::Requests,
                },
                quantity: m.quantity,
                detail: m.detail,
            })
            .collect(),
        counted_by_gateway: false,
    }
    .consistent()
}

/// Vendor headers as the guest receives them (names lower case; values
/// that are not text are skipped).
pub fn guest_headers(map: &HeaderMap) -> Vec<Header> {
    map.iter()
        .filter_map(|(name, value)| {
            Some(Header {
                name: name.as_str().to_string(),
                value: value.to_str().ok()?.to_string(),
            })
        })
        .collect()
}

/// An answer the host can send to the client, checked.
#[derive(Debug)]
pub struct ClientAnswer {
    pub status: StatusCode,
    pub content_type: HeaderValue,
    pub body: Vec<u8>,
    pub usage: Option<Usage>,
}

/// A vendor error in gateway terms, checked.
#[derive(Debug, Clone)]
pub struct MappedError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    pub retryable: bool,
    /// The vendor's `Retry-After`, passed on to the client.
    pub retry_after_secs: Option<u32>,
}

fn invalid(store: &Store<GuestState>, detail: impl Into<String>) -> GuestFailure {
    GuestFailure::Invalid {
        plugin: store.data().plugin.to_string(),
        detail: detail.into(),
    }
}

/// Checks a guest-built upstream request (shared by text and video adapters).
pub fn check_request(plugin: &str, r: UpstreamRequest) -> Result<OutboundRequest, GuestFailure> {
    let UpstreamRequest {
        method,
        path,
        headers,
        body,
        answer,
        state,
    } = r;
    let (method, path) = (method.as_str(), path.as_str());
    let bad = |d: String| GuestFailure::Invalid {
        plugin: plugin.to_string(),
        detail: d,
    };
    let method = match method {
        "GET" => Method::GET,
        "POST" => Method::POST,
        "PUT" => Method::PUT,
        "PATCH" => Method::PATCH,
        "DELETE" => Method::DELETE,
        other => {
            return Err(bad(format!(
                "method `{}` is not allowed",
                other.escape_debug()
            )))
        }
    };
    let path_ok = path.starts_with('/')
        && !path.starts_with("//")
        && path.len() <= 8192
        && path.bytes().all(|b| b.is_ascii_graphic());
    if !path_ok {
        return Err(bad(format!(
            "path `{}` is not a relative URL path",
            path.escape_debug()
        )));
    }
    let mut map = HeaderMap::new();
    for h in headers {
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| {
            bad(format!(
                "header name `{}` is invalid",
                h.name.escape_debug()
            ))
        })?;
        if FORBIDDEN_HEADERS.contains(&name.as_str()) {
            return Err(bad(format!("header `{name}` may only be set by the host")));
        }
        let value = HeaderValue::from_str(&h.value)
            .map_err(|_| bad(format!("value of header `{name}` is invalid")))?;
        map.append(name, value);
    }
    Ok(OutboundRequest {
        method,
        path: path.to_string(),
        headers: map,
        body: match body {
            RequestBody::Bytes(b) => OutboundBody::Bytes(b),
            RequestBody::ClientBody => OutboundBody::ClientBody,
            RequestBody::ClientForm(fields) => {
                let mut out = Vec::with_capacity(fields.len());
                for f in fields {
                    let name_ok = !f.key.is_empty()
                        && f.key.len() <= 256
                        && f.key.bytes().all(|b| b.is_ascii_graphic() && b != b'"');
                    if !name_ok || f.value.contains(['\r', '\n']) {
                        return Err(bad(format!(
                            "form field `{}` is not a plain field name and one-line value",
                            f.key.escape_debug()
                        )));
                    }
                    out.push((f.key, f.value));
                }
                OutboundBody::ClientForm(out)
            }
        },
        answer: match answer {
            WitAnswerMode::Translate => AnswerMode::Translate,
            WitAnswerMode::Relay(u) => AnswerMode::Relay(host_usage(u)),
            WitAnswerMode::Splice(s) => AnswerMode::Splice {
                model: s.model,
                alike_requests: s.alike_requests,
            },
        },
        state,
    })
}

/// Checks events a guest wants sent to the client: an event name must be one
/// line; data may span lines (the host writes one `data:` line per line).
fn check_events(store: &Store<GuestState>, events: &[SseEvent]) -> Result<(), GuestFailure> {
    for ev in events {
        if let Some(name) = &ev.event {
            if name.is_empty() || name.contains(['\r', '\n']) {
                return Err(invalid(store, "an event name is empty or spans lines"));
            }
        }
    }
    Ok(())
}

/// One request's use of an adapter instance: a warm one when the adapter
/// has one idle, else a new one. [`AdapterSession::recycle`] gives it back
/// after calls that all succeeded; a session merely dropped (a failure, a
/// client gone) drops its instance.
pub struct AdapterSession {
    sandbox: Arc<Sandbox>,
    plugin: Arc<AdapterPlugin>,
    store: Store<GuestState>,
    inst: VendorAdapter,
}

impl AdapterSession {
    pub async fn start(
        sandbox: &Arc<Sandbox>,
        plugin: &Arc<AdapterPlugin>,
        request_id: &str,
    ) -> Result<AdapterSession, GuestFailure> {
        let (store, inst) = match plugin.warm.take(request_id) {
            Some(warm) => warm,
            None => {
                let pre = plugin.pre.get(sandbox, &plugin.info.name).await?;
                let mut store = sandbox.new_store(plugin.info.name.clone(), request_id);
                let inst = guarded!(sandbox, store, pre.instantiate_async(&mut store))?;
                (store, inst)
            }
        };
        Ok(AdapterSession {
            sandbox: sandbox.clone(),
            plugin: plugin.clone(),
            store,
            inst,
        })
    }

    /// Gives the instance back for another call. Only for a session whose
    /// calls all succeeded; a stream's translator is gone by then (the
    /// guest's [`AdapterSession::finish`] takes it).
    pub fn recycle(self) {
        self.plugin.warm.give(self.store, self.inst);
    }

    pub async fn translate_request(
        &mut self,
        ctx: &RequestCtx,
        body: &[u8],
    ) -> Result<OutboundRequest, AdapterError> {
        let api = self.inst.gateway_plugin_adapter();
        let r = guarded!(
            self.sandbox,
            self.store,
            api.call_translate_request(&mut self.store, ctx, body)
        )?;
        let r = r.map_err(AdapterError::Plugin)?;
        Ok(check_request(&self.store.data().plugin, r)?)
    }

    pub async fn translate_response(
        &mut self,
        ctx: &RequestCtx,
        state: &str,
        status: u16,
        headers: &[Header],
        body: &[u8],
    ) -> Result<ClientAnswer, AdapterError> {
        let api = self.inst.gateway_plugin_adapter();
        let r = guarded!(
            self.sandbox,
            self.store,
            api.call_translate_response(&mut self.store, ctx, state, status, headers, body)
        )?;
        let t = r.map_err(AdapterError::Plugin)?;
        let status = StatusCode::from_u16(t.status)
            .ok()
            .filter(|s| s.as_u16() >= 200 && s.as_u16() < 600)
            .ok_or_else(|| invalid(&self.store, format!("status {} is not usable", t.status)))?;
        let content_type = HeaderValue::from_str(&t.content_type)
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| invalid(&self.store, "content type is not a header value"))?;
        Ok(ClientAnswer {
            status,
            content_type,
            body: t.body,
            usage: t.usage.map(host_usage),
        })
    }

    pub async fn translate_error(
        &mut self,
        ctx: &RequestCtx,
        status: u16,
        headers: &[Header],
        body: &[u8],
    ) -> Result<MappedError, GuestFailure> {
        let api = self.inst.gateway_plugin_adapter();
        let e = guarded!(
            self.sandbox,
            self.store,
            api.call_translate_error(&mut self.store, ctx, status, headers, body)
        )?;
        let status = StatusCode::from_u16(e.status)
            .ok()
            .filter(|s| s.is_client_error() || s.is_server_error())
            .ok_or_else(|| {
                invalid(
                    &self.store,
                    format!("error status {} is not 4xx/5xx", e.status),
                )
            })?;
        let code_ok = !e.code.is_empty()
            && e.code.len() <= 64
            && e.code
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit());
        if !code_ok {
            return Err(invalid(&self.store, "error code is not a snake_case word"));
        }
        let mut message = e.message;
        if message.len() > 1000 {
            let mut cut = 1000;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        Ok(MappedError {
            status,
            code: e.code,
            message,
            retryable: e.retryable,
            // A day is the most any client should be told to wait.
            retry_after_secs: e.retry_after_secs.map(|s| s.min(86_400)),
        })
    }

    /// Starts a stream translator living in this session's store.
    pub async fn open_stream(
        &mut self,
        ctx: &RequestCtx,
        state: &str,
    ) -> Result<ResourceAny, GuestFailure> {
        let api = self.inst.gateway_plugin_adapter().stream_translator();
        guarded!(
            self.sandbox,
            self.store,
            api.call_constructor(&mut self.store, ctx, state)
        )
    }

    pub async fn push(
        &mut self,
        translator: ResourceAny,
        ev: &SseEvent,
    ) -> Result<Vec<SseEvent>, AdapterError> {
        let api = self.inst.gateway_plugin_adapter().stream_translator();
        let r = guarded!(
            self.sandbox,
            self.store,
            api.call_push(&mut self.store, translator, ev)
        )?;
        let events = r.map_err(AdapterError::Plugin)?;
        check_events(&self.store, &events)?;
        Ok(events)
    }

    /// Drops a translator that got no events (its vendor call failed before
    /// an answer): the guest frees it, and the session is returned for
    /// another call, unless the guest failed at it (then the instance goes).
    pub async fn close_stream(mut self, translator: ResourceAny) -> Option<AdapterSession> {
        let dropped = guarded!(
            self.sandbox,
            self.store,
            translator.resource_drop_async(&mut self.store)
        );
        dropped.ok().map(|()| self)
    }

    /// Ends the stream after `rest`, its last vendor events, read together
    /// with its end and not pushed: their client events, the closing events
    /// and the usage, in one guest call. The guest takes the translator,
    /// which must not be used again (a session whose `finish` failed is not
    /// recycled, so its instance goes with the translator).
    pub async fn finish(
        &mut self,
        translator: ResourceAny,
        rest: &[SseEvent],
    ) -> Result<StreamClose, AdapterError> {
        let api = self.inst.gateway_plugin_adapter().stream_translator();
        let r = guarded!(
            self.sandbox,
            self.store,
            api.call_finish(&mut self.store, translator, rest)
        )?;
        let end = r.map_err(AdapterError::Plugin)?;
        check_events(&self.store, &end.rest_events)?;
        check_events(&self.store, &end.events)?;
        Ok(StreamClose {
            rest_events: end.rest_events,
            rest_failed: end.rest_failed,
            events: end.events,
            usage: end.usage.map(host_usage),
            complete: end.complete,
        })
    }
}

/// One use of a video adapter: each call gets a fresh instance (they are rare
/// and independent: submit, poll, content).
pub struct VideoSession {
    sandbox: Arc<Sandbox>,
    store: Store<GuestState>,
    inst: super::bindings::video::VideoVendor,
}

pub use super::bindings::video::exports::gateway::plugin::video_adapter::{
    TaskState, TaskStatus as UpstreamTaskStatus, VideoRequest,
};

impl VideoSession {
    pub async fn start(
        sandbox: &Arc<Sandbox>,
        plugin: &super::registry::VideoPlugin,
        request_id: &str,
    ) -> Result<VideoSession, GuestFailure> {
        let pre = plugin.pre.get(sandbox, &plugin.info.name).await?;
        let mut store = sandbox.new_store(plugin.info.name.clone(), request_id);
        let inst = guarded!(sandbox, store, pre.instantiate_async(&mut store))?;
        Ok(VideoSession {
            sandbox: sandbox.clone(),
            store,
            inst,
        })
    }

    fn checked(
        &self,
        r: super::bindings::types::UpstreamRequest,
    ) -> Result<OutboundRequest, GuestFailure> {
        check_request(&self.store.data().plugin, r)
    }

    pub async fn build_submit(
        &mut self,
        req: &VideoRequest,
    ) -> Result<OutboundRequest, AdapterError> {
        let api = self.inst.gateway_plugin_video_adapter();
        let r = guarded!(
            self.sandbox,
            self.store,
            api.call_build_submit(&mut self.store, req)
        )?;
        Ok(self.checked(r.map_err(AdapterError::Plugin)?)?)
    }

    pub async fn parse_submit(&mut self, status: u16, body: &[u8]) -> Result<String, AdapterError> {
        let api = self.inst.gateway_plugin_video_adapter();
        let r = guarded!(
            self.sandbox,
            self.store,
            api.call_parse_submit(&mut self.store, status, body)
        )?;
        let id = r.map_err(AdapterError::Plugin)?;
        if id.is_empty() || id.len() > 256 || id.chars().any(char::is_control) {
            return Err(invalid(
                &self.store,
                "the upstream task id is empty, too long or not printable",
            )
            .into());
        }
        Ok(id)
    }

    pub async fn build_poll(&mut self, upstream_id: &str) -> Result<OutboundRequest, AdapterError> {
        let api = self.inst.gateway_plugin_video_adapter();
        let r = guarded!(
            self.sandbox,
            self.store,
            api.call_build_poll(&mut self.store, upstream_id)
        )?;
        Ok(self.checked(r.map_err(AdapterError::Plugin)?)?)
    }

    pub async fn parse_poll(
        &mut self,
        status: u16,
        body: &[u8],
    ) -> Result<UpstreamTaskStatus, AdapterError> {
        let api = self.inst.gateway_plugin_video_adapter();
        let r = guarded!(
            self.sandbox,
            self.store,
            api.call_parse_poll(&mut self.store, status, body)
        )?;
        let mut s = r.map_err(AdapterError::Plugin)?;
        s.progress = s.progress.min(100);
        Ok(s)
    }

    pub async fn build_content(
        &mut self,
        upstream_id: &str,
    ) -> Result<OutboundRequest, AdapterError> {
        let api = self.inst.gateway_plugin_video_adapter();
        let r = guarded!(
            self.sandbox,
            self.store,
            api.call_build_content(&mut self.store, upstream_id)
        )?;
        Ok(self.checked(r.map_err(AdapterError::Plugin)?)?)
    }
}

/// Runs the named policies, in order, over a vendor request body written in
/// `vendor` (the channel adapter's dialect). Each policy gets its own
/// instance; its edits are audited and applied before the next runs.
pub async fn run_policies(
    sandbox: &Arc<Sandbox>,
    policies: &[Arc<PolicyPlugin>],
    ctx: &RequestCtx,
    vendor: Protocol,
    body: &mut serde_json::Value,
) -> Result<(), ApiError> {
    for p in policies {
        let (mut store, inst) = match p.warm.take(&ctx.request_id) {
            Some(warm) => warm,
            None => {
                let pre = p.pre.get(sandbox, &p.info.name).await?;
                let mut store = sandbox.new_store(p.info.name.clone(), &ctx.request_id);
                let inst = guarded!(sandbox, store, pre.instantiate_async(&mut store))?;
                (store, inst)
            }
        };
        let bytes = serde_json::to_vec(body).map_err(ApiError::internal)?;
        let api = inst.gateway_plugin_policy();
        let ops = guarded!(
            sandbox,
            store,
            api.call_rewrite_request(&mut store, ctx, vendor, &bytes)
        )?;
        // The call succeeded (a refusal is an answer): the instance can
        // serve the next one.
        p.warm.give(store, inst);
        let ops = ops.map_err(AdapterError::Plugin)?;
        for op in ops {
            let edit = match op {
                PatchOp::Remove(p) => Edit::Remove(p),
                PatchOp::Set(s) => Edit::Set {
                    pointer: s.pointer,
                    value: s.value,
                },
                PatchOp::SetIfAbsent(s) => Edit::SetIfAbsent {
                    pointer: s.pointer,
                    value: s.value,
                },
            };
            super::patch::apply(body, &edit).map_err(|detail| {
                ApiError::from(GuestFailure::Invalid {
                    plugin: p.info.name.to_string(),
                    detail,
                })
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: &str, v: &str) -> Header {
        Header {
            name: n.into(),
            value: v.into(),
        }
    }

    fn req(method: &str, path: &str, headers: Vec<Header>, body: RequestBody) -> UpstreamRequest {
        UpstreamRequest {
            method: method.into(),
            path: path.into(),
            headers,
            body,
            answer: WitAnswerMode::Translate,
            state: String::new(),
        }
    }

    #[test]
    fn guest_requests_are_checked() {
        let ok = check_request(
            "p",
            req(
                "POST",
                "/chat/completions?x=1",
                vec![h("content-type", "application/json")],
                RequestBody::Bytes(vec![]),
            ),
        );
        assert!(ok.is_ok());
        let form = |k: &str, v: &str| {
            RequestBody::ClientForm(vec![super::super::bindings::types::Setting {
                key: k.into(),
                value: v.into(),
            }])
        };
        assert!(check_request("p", req("POST", "/x", vec![], form("model", "m"))).is_ok());
        assert!(check_request("p", req("POST", "/x", vec![], form("a\"b", "m"))).is_err());
        assert!(check_request("p", req("POST", "/x", vec![], form("model", "m\r\nx"))).is_err());
        for (m, p, hs) in [
            ("NOT A METHOD", "/x", vec![]),
            ("POST", "no-slash", vec![]),
            ("POST", "/a\r\nb", vec![]),
            ("POST", "//evil.example/x", vec![]),
            ("POST", "/x", vec![h("bad header\n", "v")]),
            ("POST", "/x", vec![h("Authorization", "Bearer stolen")]),
            ("POST", "/x", vec![h("x-ok", "line\nbreak")]),
        ] {
            assert!(
                check_request("p", req(m, p, hs, RequestBody::ClientBody)).is_err(),
                "{m} {p}"
            );
        }
    }
}
