//! One call of a text protocol or an endpoint family, from the moment the client's request is understood to the
//! moment its money is settled: hold an estimate ([`Charge`]), try the
//! model's channels in order — the adapter translates the client's request
//! into the vendor's protocol, the model's policies edit that vendor request,
//! the host sends it — and answer, plain or streamed, in the client's
//! protocol, settling the real usage.

use super::charge::Charge;
use super::form::ClientForm;
use super::stream;
use super::upstream::{self, ClientPayload, SendError};
use crate::auth::Caller;
use crate::billing::usage::{Meter, Usage};
use crate::config::ChannelConfig;
use crate::error::ApiError;
use crate::plugins::bindings::types::{Header, RequestCtx, Setting};
use crate::plugins::registry::{AdapterPlugin, PolicyPlugin, Registry};
use crate::plugins::session::{
    guest_headers, run_policies, AdapterSession, AnswerMode, OutboundBody,
};
use crate::protocol::{ClientProtocol, FORWARDED_CLIENT_HEADERS};
use crate::state::SharedState;
use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use std::sync::Arc;

/// A client's text request, understood enough to route and bill it.
pub struct TextRequest {
    pub protocol: &'static ClientProtocol,
    pub model: String,
    pub stream: bool,
    /// Output tokens the client allows, if it said.
    pub max_output_tokens: Option<u64>,
    pub prompt_tokens_estimate: u64,
    /// The non-token meters the call will consume, for the hold.
    pub meters: Vec<Meter>,
    /// The client's body, as received (for a form: its text fields as JSON).
    pub body: Bytes,
    /// The JSON body's bytes in the request-body budget, held until the
    /// call ends (a form holds its own).
    pub lease: Option<crate::api::body::BodyLease>,
    /// The client's multipart form, when it sent one.
    pub form: Option<ClientForm>,
    /// What the host measured of the request itself (a transcription's
    /// audio duration): billed when the vendor's answer reports no usage.
    pub measured: Option<Usage>,
    /// The client headers adapters may see.
    pub client_headers: Vec<Header>,
}

/// The client headers an adapter may see, from the request's headers.
pub fn forwarded_headers(headers: &HeaderMap) -> Vec<Header> {
    FORWARDED_CLIENT_HEADERS
        .iter()
        .filter_map(|name| {
            let value = headers.get(*name)?.to_str().ok()?;
            Some(Header {
                name: (*name).to_string(),
                value: value.to_string(),
            })
        })
        .collect()
}

/// Runs a text call end to end.
pub async fn serve(
    state: SharedState,
    caller: Caller,
    req: TextRequest,
) -> Result<Response, ApiError> {
    let catalog = state.catalog();
    let model = catalog
        .models
        .get(&req.model)
        .cloned()
        .ok_or_else(|| ApiError::ModelNotFound(req.model.clone()))?;
    caller.check_model(&model.name)?;
    let channels: Vec<Arc<ChannelConfig>> = catalog.channels(&model.name).to_vec();
    if channels.is_empty() {
        return Err(ApiError::NoChannel(model.name.clone()));
    }
    let registry = state.plugins.registry();
    let mut policies = Vec::with_capacity(model.policies.len());
    for name in &model.policies {
        match registry.policies.get(name) {
            Some(p) => policies.push(p.clone()),
            None => {
                tracing::error!(
                    "model `{}` names policy `{name}`, which is not loaded",
                    model.name
                );
                return Err(ApiError::NoChannel(model.name.clone()));
            }
        }
    }
    let charge = Charge::open(
        &state,
        &caller,
        model.clone(),
        req.stream,
        req.prompt_tokens_estimate,
        req.max_output_tokens,
        &req.meters,
    )
    .await?;
    try_channels(&state, &registry, &channels, &policies, &req, charge).await
}

/// How one channel's attempt ended, when it did not answer.
enum Failed {
    /// Another channel may succeed.
    Retry(ApiError),
    /// The call is over.
    Stop(ApiError),
}

/// What one channel's attempt produced.
enum Answer {
    Plain {
        status: StatusCode,
        content_type: HeaderValue,
        body: Vec<u8>,
        usage: Option<Usage>,
    },
    Stream(Box<stream::Opened>),
    /// The vendor's bytes go to the client as they come (audio, images).
    Relay {
        status: StatusCode,
        content_type: Option<HeaderValue>,
        upstream: reqwest::Response,
        usage: Usage,
    },
}

/// Tries the channels in order until one answers; the charge goes with the
/// answer, or is released with the last error. `registry` is the one the
/// policies came from: a call uses one set of components from start to end.
async fn try_channels(
    state: &SharedState,
    registry: &Registry,
    channels: &[Arc<ChannelConfig>],
    policies: &[Arc<PolicyPlugin>],
    req: &TextRequest,
    mut charge: Charge,
) -> Result<Response, ApiError> {
    let mut last_error = ApiError::NoChannel(req.model.clone());
    for channel in channels {
        let Some(plugin) = registry.adapters.get(&channel.adapter) else {
            tracing::error!(
                "channel `{}` uses adapter `{}`, which is not loaded",
                channel.name,
                channel.adapter
            );
            continue;
        };
        if !plugin.client_protocols.contains(&req.protocol.protocol) {
            continue;
        }
        charge.at_channel(&channel.name);
        let ctx = RequestCtx {
            client_protocol: req.protocol.protocol,
            model: req.model.clone(),
            upstream_model: channel.upstream_model(&req.model).to_string(),
            stream: req.stream,
            request_id: charge.request_id().to_string(),
            client_headers: req.client_headers.clone(),
            channel_options: channel
                .options
                .iter()
                .map(|(key, value)| Setting {
                    key: key.clone(),
                    value: value.clone(),
                })
                .collect(),
        };
        match attempt(state, channel, plugin, policies, req, ctx).await {
            Ok(Answer::Plain {
                status,
                content_type,
                body,
                usage,
            }) => {
                let usage = usage.or_else(|| req.measured.clone());
                charge.settle(usage.as_ref(), status.as_u16(), None).await;
                let mut out = Response::new(Body::from(body));
                *out.status_mut() = status;
                out.headers_mut().insert(header::CONTENT_TYPE, content_type);
                plugin.mark(&mut out);
                return Ok(out);
            }
            Ok(Answer::Relay {
                status,
                content_type,
                upstream,
                usage,
            }) => {
                // The vendor has done the work once its answer begins: billed
                // now, whatever happens to the bytes on their way.
                charge.settle(Some(&usage), status.as_u16(), None).await;
                let mut out = Response::new(Body::from_stream(upstream.bytes_stream()));
                *out.status_mut() = status;
                if let Some(ct) = content_type {
                    out.headers_mut().insert(header::CONTENT_TYPE, ct);
                }
                plugin.mark(&mut out);
                return Ok(out);
            }
            Ok(Answer::Stream(opened)) => {
                let mut out = stream::respond(
                    *opened,
                    charge,
                    req.protocol,
                    state.config.limits.stream_idle_timeout,
                );
                plugin.mark(&mut out);
                return Ok(out);
            }
            Err(Failed::Retry(e)) => last_error = e,
            Err(Failed::Stop(e)) => {
                last_error = e;
                break;
            }
        }
    }
    charge
        .release(last_error.status().as_u16(), last_error.to_string())
        .await;
    Err(last_error)
}

/// One channel: translate, apply the policies, send, and read or open the
/// answer.
async fn attempt(
    state: &SharedState,
    channel: &ChannelConfig,
    plugin: &AdapterPlugin,
    policies: &[Arc<PolicyPlugin>],
    req: &TextRequest,
    ctx: RequestCtx,
) -> Result<Answer, Failed> {
    let limits = &state.config.limits;
    let sandbox = &state.plugins.sandbox;
    let stop = |e: ApiError| Failed::Stop(e);
    let mut session = AdapterSession::start(sandbox, plugin, &ctx.request_id)
        .await
        .map_err(|e| stop(e.into()))?;
    let mut outbound = session
        .translate_request(&ctx, &req.body)
        .await
        .map_err(|e| stop(e.into()))?;
    // Policies edit chat requests in the vendor's chat dialect.
    if !policies.is_empty() && req.protocol.is_chat() {
        if let OutboundBody::Bytes(bytes) = &outbound.body {
            let mut value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
                stop(ApiError::Adapter(format!(
                    "its vendor request is not JSON, so the model's policies cannot apply: {e}"
                )))
            })?;
            run_policies(sandbox, policies, &ctx, plugin.vendor_protocol, &mut value)
                .await
                .map_err(stop)?;
            outbound.body = OutboundBody::Bytes(
                serde_json::to_vec(&value).map_err(|e| stop(ApiError::internal(e)))?,
            );
        }
    }
    let adapter_state = std::mem::take(&mut outbound.state);
    let relay = match std::mem::replace(&mut outbound.answer, AnswerMode::Translate) {
        AnswerMode::Relay(usage) if !req.stream => Some(usage),
        AnswerMode::Relay(_) => {
            return Err(stop(ApiError::Adapter(
                "it asked to relay a streamed answer".into(),
            )))
        }
        AnswerMode::Translate => None,
    };
    let payload = match &req.form {
        Some(form) => ClientPayload::Form(form),
        None => ClientPayload::Bytes(&req.body),
    };
    let builder =
        upstream::build(&state.http, channel, plugin.auth, outbound, payload).map_err(stop)?;
    let head_timeout = if req.stream {
        limits.stream_idle_timeout
    } else {
        limits.upstream_timeout
    };
    let resp = match upstream::send(builder, head_timeout).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(channel = %channel.name, "upstream send failed: {e}");
            return Err(Failed::Retry(match e {
                SendError::Timeout(d) => ApiError::UpstreamTimeout(d.as_secs()),
                SendError::Transport(t) => ApiError::UpstreamUnreachable(t),
            }));
        }
    };
    let status = resp.status();
    let vendor_headers = guest_headers(resp.headers());
    if !status.is_success() {
        // Bounded like a success's body: a vendor that stalls after its
        // status line must not hold the call's money and slot for ever.
        let body = tokio::time::timeout(
            limits.upstream_timeout,
            read_capped(resp, limits.max_body_bytes),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
        let mapped = session
            .translate_error(&ctx, status.as_u16(), &vendor_headers, &body)
            .await
            .map_err(|e| stop(e.into()))?;
        tracing::warn!(channel = %channel.name, status = status.as_u16(), code = %mapped.code, "upstream refused");
        let e = ApiError::Upstream {
            status: mapped.status.as_u16(),
            code: mapped.code,
            message: mapped.message,
            retry_after_secs: mapped.retry_after_secs,
        };
        return Err(if mapped.retryable {
            Failed::Retry(e)
        } else {
            Failed::Stop(e)
        });
    }
    if let Some(usage) = relay {
        return Ok(Answer::Relay {
            status,
            content_type: resp.headers().get(header::CONTENT_TYPE).cloned(),
            upstream: resp,
            usage,
        });
    }
    if req.stream {
        let translator = session
            .open_stream(&ctx, &adapter_state)
            .await
            .map_err(|e| stop(e.into()))?;
        return Ok(Answer::Stream(Box::new(stream::Opened {
            session,
            translator,
            upstream: resp,
        })));
    }
    let read = tokio::time::timeout(
        limits.upstream_timeout,
        read_capped(resp, limits.max_body_bytes),
    );
    let answer_body = match read.await {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            return Err(Failed::Retry(ApiError::UpstreamUnreachable(format!(
                "reading the answer failed: {e}"
            ))))
        }
        Err(_) => {
            return Err(Failed::Retry(ApiError::UpstreamTimeout(
                limits.upstream_timeout.as_secs(),
            )))
        }
    };
    let answer = session
        .translate_response(
            &ctx,
            &adapter_state,
            status.as_u16(),
            &vendor_headers,
            &answer_body,
        )
        .await
        .map_err(|e| stop(e.into()))?;
    Ok(Answer::Plain {
        status: answer.status,
        content_type: answer.content_type,
        body: answer.body,
        usage: answer.usage,
    })
}

/// Reads a whole upstream body, refusing more than `cap` bytes.
pub async fn read_capped(resp: reqwest::Response, cap: usize) -> Result<Bytes, String> {
    use futures_util::StreamExt;
    let mut out = Vec::new();
    let mut s = resp.bytes_stream();
    while let Some(chunk) = s.next().await {
        let chunk = chunk.map_err(|e| upstream::describe(&e))?;
        if out.len() + chunk.len() > cap {
            return Err(format!("the answer exceeds {cap} bytes"));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(out))
}

/// Headers of a streamed answer.
pub fn sse_headers(resp: &mut Response) {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    *resp.status_mut() = StatusCode::OK;
}
