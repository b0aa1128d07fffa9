//! One text call from the moment the client's request is understood to the
//! moment its money is settled: hold an estimate, run the model's policies,
//! try the model's channels in order through their adapters, answer (plain
//! or streamed), settle the real usage.

use super::stream;
use super::upstream::{self, SendError};
use crate::auth::Caller;
use crate::billing::hold::Hold;
use crate::billing::text as pricing;
use crate::config::{ChannelConfig, ModelConfig};
use crate::error::ApiError;
use crate::plugins::bindings::types::{Protocol, RequestCtx, Usage};
use crate::plugins::session::{run_policies, AdapterSession};
use crate::state::SharedState;
use crate::store::records::{ReservationKind, UsageRecord};
use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use std::sync::Arc;

/// A client's text request, understood enough to route and bill it.
pub struct TextRequest {
    pub protocol: Protocol,
    pub model: String,
    pub stream: bool,
    /// Completion tokens the client allows (`max_tokens`), if it said.
    pub max_output_tokens: Option<u64>,
    pub prompt_tokens_estimate: u64,
    /// The client's body, as received.
    pub body: Bytes,
}

/// Everything the settlement needs to write the usage row.
pub(crate) struct CallRecord {
    pub state: SharedState,
    pub caller: Caller,
    pub model: Arc<ModelConfig>,
    pub channel: Option<String>,
    pub stream: bool,
}

impl CallRecord {
    pub fn usage_row(
        &self,
        usage: Option<&Usage>,
        status: u16,
        error: Option<String>,
    ) -> UsageRecord {
        let u = usage.cloned().unwrap_or(Usage {
            input_tokens: 0,
            output_tokens: 0,
            cached_tokens: 0,
            reasoning_tokens: 0,
        });
        UsageRecord {
            seq: 0,
            at: self.state.clock.now_secs(),
            request_id: self.caller.info.id.clone(),
            account_id: self.caller.token.account_id.clone(),
            token_id: Some(self.caller.token.id.clone()),
            model: self.model.name.clone(),
            channel: self.channel.clone(),
            input_tokens: u.input_tokens,
            cached_tokens: u.cached_tokens,
            output_tokens: u.output_tokens,
            reasoning_tokens: u.reasoning_tokens,
            cost: 0,
            latency_ms: self.caller.info.started.elapsed().as_millis() as u64,
            status,
            stream: self.stream,
            error,
        }
    }

    /// Settles the hold at the price of `usage` (nothing when the vendor
    /// reported none) and writes the usage row.
    pub async fn settle(
        &self,
        hold: Hold,
        usage: Option<&Usage>,
        status: u16,
        error: Option<String>,
    ) {
        let cost = usage.map(|u| pricing::cost(&self.model, u)).unwrap_or(0);
        let row = self.usage_row(usage, status, error);
        let now = self.state.clock.now_secs();
        if let Err(e) = hold.settle(cost, Some(row), now).await {
            tracing::error!(request_id = %self.caller.info.id, "settling failed: {e}");
        }
    }
}

/// Holds the estimate for a call, or says why not.
async fn reserve(
    state: &SharedState,
    caller: &Caller,
    model: &ModelConfig,
    req: &TextRequest,
) -> Result<Hold, ApiError> {
    let max_out = req
        .max_output_tokens
        .or(model.default_max_tokens)
        .unwrap_or(state.config.default_max_tokens);
    let amount = pricing::estimate(model, req.prompt_tokens_estimate, max_out);
    let now = state.clock.now_secs();
    let cur = &state.config.currency;
    let outcome = state
        .ledger
        .reserve(
            &caller.token.account_id,
            Some(&caller.token.id),
            amount,
            ReservationKind::Text,
            &caller.info.id,
            now,
            false,
        )
        .await
        .map_err(ApiError::internal)?;
    match outcome {
        Ok(res) => Ok(Hold::new(state.ledger.clone(), res.id, amount, now)),
        Err(refusal) => Err(crate::billing::refusal_error(refusal, amount, cur)),
    }
}

/// Runs a text call end to end.
pub async fn serve(
    state: SharedState,
    caller: Caller,
    req: TextRequest,
) -> Result<Response, ApiError> {
    let model = state
        .catalog
        .models
        .get(&req.model)
        .cloned()
        .ok_or_else(|| ApiError::ModelNotFound(req.model.clone()))?;
    caller.check_model(&model.name)?;
    let group = state
        .ledger
        .account(&caller.token.account_id)
        .ok_or(ApiError::InvalidToken)?
        .group;
    let permit = state
        .groups
        .acquire(&group)
        .map_err(|limit| ApiError::GroupConcurrency { group, limit })?;
    let channels: Vec<Arc<ChannelConfig>> = state.catalog.channels(&model.name).to_vec();
    if channels.is_empty() {
        return Err(ApiError::NoChannel(model.name.clone()));
    }
    let registry = state.plugins.registry();
    let base_ctx = RequestCtx {
        client_protocol: req.protocol,
        model: req.model.clone(),
        upstream_model: String::new(),
        stream: req.stream,
        request_id: caller.info.id.clone(),
    };

    let body: Bytes = if model.policies.is_empty() {
        req.body.clone()
    } else {
        let mut value: serde_json::Value = serde_json::from_slice(&req.body)
            .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
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
        run_policies(&state.plugins.sandbox, &policies, &base_ctx, &mut value).await?;
        Bytes::from(serde_json::to_vec(&value).map_err(ApiError::internal)?)
    };

    let hold = reserve(&state, &caller, &model, &req).await?;
    let mut record = CallRecord {
        state: state.clone(),
        caller,
        model: model.clone(),
        channel: None,
        stream: req.stream,
    };
    let mut held = Some((hold, permit));
    let result = try_channels(&channels, &req, &body, &base_ctx, &mut record, &mut held).await;
    let failed = result
        .as_ref()
        .err()
        .map(|e| (e.status().as_u16(), e.to_string()));
    if let (Some((status, why)), Some((hold, _))) = (failed, held.take()) {
        let row = record.usage_row(None, status, Some(why));
        let _ = hold.release(Some(row), state.clock.now_secs()).await;
    }
    result
}

/// Tries the channels in order until one answers. Takes the hold (and the
/// concurrency permit) out of `held` only when it hands them to a successful
/// answer; on error they are still there for the caller to release.
async fn try_channels(
    channels: &[Arc<ChannelConfig>],
    req: &TextRequest,
    body: &Bytes,
    base_ctx: &RequestCtx,
    record: &mut CallRecord,
    held: &mut Option<(Hold, Option<tokio::sync::OwnedSemaphorePermit>)>,
) -> Result<Response, ApiError> {
    let state = record.state.clone();
    let registry = state.plugins.registry();
    let sandbox = state.plugins.sandbox.clone();
    let limits = &state.config.limits;
    let mut last_error = ApiError::NoChannel(record.model.name.clone());
    for (i, channel) in channels.iter().enumerate() {
        let more_channels = i + 1 < channels.len();
        let Some(plugin) = registry.adapters.get(&channel.adapter) else {
            tracing::error!(
                "channel `{}` uses adapter `{}`, which is not loaded",
                channel.name,
                channel.adapter
            );
            continue;
        };
        if !plugin.client_protocols.contains(&req.protocol) {
            continue;
        }
        record.channel = Some(channel.name.clone());
        let ctx = RequestCtx {
            upstream_model: channel.upstream_model(&record.model.name).to_string(),
            ..base_ctx.clone()
        };
        let mut session = AdapterSession::start(&sandbox, plugin, &ctx.request_id).await?;
        let outbound = session.translate_request(&ctx, body).await?;
        let adapter_state = outbound.state.clone();
        let builder = upstream::build(&state.http, channel, plugin.auth, outbound);
        let head_timeout = if req.stream {
            limits.stream_idle_timeout
        } else {
            limits.upstream_timeout
        };
        let resp = match upstream::send(builder, head_timeout).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(channel = %channel.name, "upstream send failed: {e}");
                last_error = match e {
                    SendError::Timeout(d) => ApiError::UpstreamTimeout(d.as_secs()),
                    SendError::Transport(t) => ApiError::UpstreamUnreachable(t),
                };
                continue;
            }
        };
        let status = resp.status();
        if !status.is_success() {
            let body = read_capped(resp, limits.max_body_bytes)
                .await
                .unwrap_or_default();
            let mapped = session
                .translate_error(&ctx, status.as_u16(), &body)
                .await?;
            tracing::warn!(channel = %channel.name, status = status.as_u16(), code = %mapped.code, "upstream refused");
            last_error = ApiError::Upstream {
                status: mapped.status.as_u16(),
                code: mapped.code,
                message: mapped.message,
            };
            if mapped.retryable && more_channels {
                continue;
            }
            break;
        }
        if req.stream {
            let translator = session.open_stream(&ctx, &adapter_state).await?;
            let (hold, permit) = held
                .take()
                .ok_or_else(|| ApiError::internal("the call's hold was already used"))?;
            let record = CallRecord {
                state: state.clone(),
                caller: record.caller.clone(),
                model: record.model.clone(),
                channel: record.channel.clone(),
                stream: true,
            };
            return Ok(stream::respond(stream::StreamJob {
                session,
                translator,
                upstream: resp,
                hold,
                record,
                permit,
                idle_timeout: limits.stream_idle_timeout,
            }));
        }
        let read = tokio::time::timeout(
            limits.upstream_timeout,
            read_capped(resp, limits.max_body_bytes),
        );
        let answer_body = match read.await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                last_error =
                    ApiError::UpstreamUnreachable(format!("reading the answer failed: {e}"));
                continue;
            }
            Err(_) => {
                last_error = ApiError::UpstreamTimeout(limits.upstream_timeout.as_secs());
                continue;
            }
        };
        let answer = session
            .translate_response(&ctx, &adapter_state, status.as_u16(), &answer_body)
            .await?;
        let (hold, permit) = held
            .take()
            .ok_or_else(|| ApiError::internal("the call's hold was already used"))?;
        record
            .settle(hold, answer.usage.as_ref(), answer.status.as_u16(), None)
            .await;
        drop(permit);
        let mut out = Response::new(Body::from(answer.body));
        *out.status_mut() = answer.status;
        out.headers_mut()
            .insert(header::CONTENT_TYPE, answer.content_type);
        return Ok(out);
    }
    Err(last_error)
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
