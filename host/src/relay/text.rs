//! One call of a text protocol or an endpoint family, from the moment the client's request is understood to the
//! moment its money is settled: hold an estimate ([`Charge`]), try the
//! model's channels in order — the adapter translates the client's request
//! into the vendor's protocol, the model's policies edit that vendor request,
//! the host sends it — and answer, plain or streamed, in the client's
//! protocol, settling the real usage.

use super::charge::Charge;
use super::form::ClientForm;
use super::health::Outcome;
use super::relayed;
use super::splice::Splice;
use super::stream::{self, StartFailed};
use super::upstream::{ClientPayload, SendError};
use super::vendor::{self, VendorBody};
use crate::auth::Caller;
use crate::billing::usage::{Meter, Usage};
use crate::config::ChannelConfig;
use crate::error::{ApiError, UpstreamRetry};
use crate::plugins::bindings::types::PluginError;
use crate::plugins::bindings::types::{Header, Protocol, RequestCtx, Setting};
use crate::plugins::registry::{AdapterPlugin, PolicyPlugin, Registry};
use crate::plugins::sandbox::GuestFailure;
use crate::plugins::session::{
    guest_headers, run_policies, AdapterError, AdapterSession, AnswerMode, MappedError,
    OutboundBody,
};
use crate::protocol::{ClientProtocol, FORWARDED_CLIENT_HEADERS};
use crate::state::SharedState;
use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;
use wasmtime::component::ResourceAny;

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
    /// The stream's client asked for OpenAI's usage chunk.
    pub wants_usage: bool,
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
    /// Where the members the host's edit of a passthrough replaces are in
    /// `body` (`protocol::Places`, `relay::alike`).
    pub places: Option<crate::protocol::Places>,
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
    mut req: TextRequest,
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
    // Channels there are, but none whose adapter speaks this protocol: the
    // request's mistake (nothing is held for it). A channel whose adapter is
    // not loaded is an outage instead, answered below.
    let speaks = |c: &Arc<ChannelConfig>| {
        registry
            .adapters
            .get(&c.adapter)
            .map(|a| a.client_protocols.contains(&req.protocol.protocol))
    };
    if channels.iter().all(|c| speaks(c) == Some(false)) {
        return Err(ApiError::ModelNotSupported {
            model: model.name.clone(),
            endpoint: req.protocol.name,
        });
    }
    let mut charge = Charge::open(
        &state,
        &caller,
        model.clone(),
        req.stream,
        req.prompt_tokens_estimate,
        req.max_output_tokens,
        &req.meters,
    )
    .await?;
    if req.protocol.is_chat() {
        charge.count_prompt_of(req.protocol.protocol, req.body.clone(), req.lease.take());
    }
    try_channels(&state, &registry, &channels, &policies, &req, charge).await
}

/// How one channel's attempt ended, when it did not answer. Nothing has
/// reached the client yet either way.
///
/// The rules (README, *Channels: failover and health*): a connect error, a
/// timeout, a vendor's 408, 429 or 5xx, a refused key, any vendor error the
/// adapter calls retryable (a model missing on this channel), an adapter
/// that traps, runs out of time or memory or gives output the host refuses,
/// an adapter that does not support the request, and a `2xx` answer that
/// cannot be translated all move the call to the next channel; a request
/// the adapter or the vendor refuses as invalid ends it, and so do the
/// gateway's own adapter instances all being busy.
struct Failed {
    error: ApiError,
    /// Another channel may succeed.
    next: bool,
    /// What the attempt says of the channel's health (`relay::health`);
    /// none when it never reached the vendor through the request's own fault.
    health: Option<Outcome>,
}

impl Failed {
    /// A retryable failure of the channel.
    fn retry(error: ApiError) -> Failed {
        Failed {
            error,
            next: true,
            health: Some(Outcome::Failed),
        }
    }

    /// The request's fault: the call is over, the channel is not to blame.
    fn stop(error: ApiError) -> Failed {
        Failed {
            error,
            next: false,
            health: None,
        }
    }

    /// An adapter failure before anything was sent to the vendor.
    fn adapter(e: AdapterError) -> Failed {
        let retry = match &e {
            // This adapter or instance is at fault, not the request.
            AdapterError::Guest(_) => true,
            // Another channel's adapter may support it.
            AdapterError::Plugin(PluginError::Unsupported(_)) => true,
            AdapterError::Plugin(PluginError::UpstreamFormat(_)) => true,
            AdapterError::Plugin(PluginError::UpstreamFailed(u)) => u.retryable,
            AdapterError::Plugin(PluginError::InvalidRequest(_)) => false,
        };
        if retry {
            Failed::retry(e.into())
        } else {
            Failed::stop(e.into())
        }
    }

    /// A vendor `2xx` answer the adapter could not translate: logged with
    /// the channel and counted in its health; the client is not billed for
    /// it (it never got it), and the next channel is tried. A vendor error
    /// carried inside a `2xx` follows its own `retryable`.
    fn untranslatable(channel: &ChannelConfig, e: AdapterError) -> Failed {
        if matches!(e, AdapterError::Plugin(PluginError::UpstreamFailed(_))) {
            return Failed::adapter(e);
        }
        tracing::error!(
            channel = %channel.name,
            adapter = %channel.adapter,
            "the vendor's 2xx answer could not be translated: {e}; not billed, trying the next channel"
        );
        Failed {
            error: e.into(),
            next: true,
            health: Some(Outcome::Untranslatable),
        }
    }

    /// A vendor's error answer: its status and the adapter's reading decide.
    fn vendor(status: StatusCode, mapped_retry: bool, error: ApiError) -> Failed {
        let key_refused = matches!(&error, ApiError::Upstream { code, .. } if code == AUTH_FAILED);
        let retry = mapped_retry || vendor_status_retryable(status);
        let health = if key_refused {
            Outcome::KeyRefused(status.as_u16())
        } else if retry && status != StatusCode::NOT_FOUND {
            Outcome::Failed
        } else {
            // The vendor answered: the request was at fault, or the model
            // is missing on this channel, which says nothing of its health
            // for the others it serves.
            Outcome::Answered
        };
        Failed {
            error,
            next: key_refused || retry,
            health: Some(health),
        }
    }
}

/// The adapters' code for a vendor that refused the channel's credential.
const AUTH_FAILED: &str = "upstream_auth_failed";

/// Whether a vendor's error status lets the call try the next channel,
/// whatever the adapter says: timeouts, rate limits and server errors are
/// the channel's.
fn vendor_status_retryable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 429) || status.is_server_error()
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
        upstream: VendorBody,
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
    // Only channels that can serve this protocol are planned (a probe let
    // through must be tried).
    let usable: Vec<Arc<ChannelConfig>> = channels
        .iter()
        .filter(|channel| match registry.adapters.get(&channel.adapter) {
            Some(plugin) => plugin.client_protocols.contains(&req.protocol.protocol),
            None => {
                tracing::error!(
                    "channel `{}` uses adapter `{}`, which is not loaded",
                    channel.name,
                    channel.adapter
                );
                false
            }
        })
        .cloned()
        .collect();
    for channel in &state.health.plan(&usable) {
        let Some(plugin) = registry.adapters.get(&channel.adapter) else {
            continue;
        };
        charge.at_channel(&channel.name);
        let started = Instant::now();
        let span = crate::telemetry::span!(
            "attempt",
            gateway.channel = %channel.name,
            gateway.adapter = %channel.adapter
        );
        // Boxed: an attempt's future would otherwise make the whole call's
        // future that much larger, and be copied into its span. It is made
        // small (`attempt`) because making the box copies it once. The
        // attempt borrows the context, which lives in this block alone, so
        // that it takes no room in the call's future across the
        // settlement's awaits below.
        let result = {
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
            Box::pin(attempt(state, channel, plugin, policies, req, &ctx))
                .instrument(span)
                .await
        };
        if let Err(failed) = &result {
            state
                .metrics
                .upstream_error(&channel.name, failed.error.code());
        }
        let health = match &result {
            Ok(_) => Some(Outcome::Answered),
            Err(failed) => failed.health,
        };
        if let Some(outcome) = health {
            state.health.record(channel, outcome, started.elapsed());
        }
        match result {
            Ok(Answer::Plain {
                status,
                content_type,
                body,
                usage,
            }) => {
                let usage = usage
                    .filter(|u| !u.is_empty())
                    .or_else(|| req.measured.clone());
                let body = match usage {
                    Some(usage) => {
                        charge.settle(Some(&usage), status.as_u16(), None).await;
                        body
                    }
                    // Boxed: the count of a silent vendor's answer is the
                    // largest of these awaits (3 KB), on a rare path;
                    // inline it would size every call's future.
                    None if req.protocol.is_chat() => {
                        Box::pin(settle_silent(charge, req.protocol.protocol, status, body)).await
                    }
                    None => {
                        charge.settle(None, status.as_u16(), None).await;
                        body
                    }
                };
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
                let mut out = Response::new(Body::from_stream(vendor::bytes_stream(upstream)));
                *out.status_mut() = status;
                if let Some(ct) = content_type {
                    out.headers_mut().insert(header::CONTENT_TYPE, ct);
                }
                plugin.mark(&mut out);
                return Ok(out);
            }
            Ok(Answer::Stream(opened)) => {
                let mut out = stream::respond(*opened, charge, req.protocol, req.wants_usage);
                plugin.mark(&mut out);
                return Ok(out);
            }
            Err(Failed { error, next, .. }) => {
                last_error = error;
                if !next {
                    break;
                }
            }
        }
    }
    charge
        .release(last_error.status().as_u16(), last_error.to_string())
        .await;
    Err(last_error)
}

/// Settles a plain chat answer whose vendor reported no usage: the gateway
/// counts the prompt and the answer's text (`billing::tokens`). An OpenAI
/// chat or completions answer without a `usage` object gets the counted one,
/// as the protocol always carries it. Returns the body to send.
async fn settle_silent(
    charge: Charge,
    protocol: Protocol,
    status: StatusCode,
    body: Vec<u8>,
) -> Vec<u8> {
    let mut answer: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
    let output = answer.as_ref().map_or(0, |a| {
        charge.count_tokens(&relayed::answer_text(protocol, a))
    });
    let billed = charge
        .settle_counted(
            None,
            output,
            status.as_u16(),
            "the vendor reported no usage; counted by the gateway".into(),
        )
        .await;
    let shows_usage = matches!(protocol, Protocol::OpenaiChat | Protocol::OpenaiCompletions);
    match answer.as_mut().and_then(|a| a.as_object_mut()) {
        Some(a) if shows_usage && a.get("usage").is_none_or(reports_nothing) => {
            a.insert("usage".into(), relayed::openai_usage(&billed));
            serde_json::to_vec(a).unwrap_or(body)
        }
        _ => body,
    }
}

/// Whether an OpenAI `usage` member says nothing: absent, not an object, or
/// no tokens at all.
fn reports_nothing(usage: &serde_json::Value) -> bool {
    let tokens = |k: &str| usage[k].as_u64().unwrap_or(0);
    !usage.is_object() || tokens("prompt_tokens") + tokens("completion_tokens") == 0
}

/// A stream's instance and translator made while the vendor worked, when
/// the vendor's answer is not a stream to relay (the call failed, or was
/// refused): the translator is dropped and the instance handed back for
/// another use, unless making them failed or the guest failed at the drop.
async fn close_opened(
    opening: Option<Result<(AdapterSession, ResourceAny), Failed>>,
) -> Option<AdapterSession> {
    let (session, translator) = opening?.ok()?;
    Box::pin(session.close_stream(translator)).await
}

/// One channel: translate, apply the policies, send, and read or open the
/// answer.
///
/// Its future is copied once, into the box `try_channels` makes, whole: an
/// async function's future is as large as its largest await, and laid out
/// inline the guest calls, the stream's opening and the vendor's refusal made
/// it 14 KB. Those awaits are boxed where they are, each only on the path
/// that takes it: a call that needs none of them (a passthrough's answer the
/// host splices) copies and allocates no more than what is left, most of it
/// the sending's own future (`an_attempts_future_stays_small`).
async fn attempt(
    state: &SharedState,
    channel: &ChannelConfig,
    plugin: &Arc<AdapterPlugin>,
    policies: &[Arc<PolicyPlugin>],
    req: &TextRequest,
    ctx: &RequestCtx,
) -> Result<Answer, Failed> {
    let limits = &state.config.limits;
    let sandbox = &state.plugins.sandbox;
    let stop = Failed::stop;
    // An instance for each side of the vendor call: the adapter keeps what
    // the answer needs in `state`. A plain answer's instance is taken when
    // the answer is in, so none is held while the vendor thinks; a stream's
    // translator is made while the vendor works on the request (below).
    let session = || async {
        AdapterSession::start(sandbox, plugin, &ctx.request_id)
            .await
            .map_err(|e| match e {
                // The gateway's own instances are all busy: no channel is
                // to blame, and another would find the same (a 503 with a
                // hint).
                GuestFailure::Capacity(_) => Failed {
                    error: e.into(),
                    next: false,
                    health: None,
                },
                e => Failed::retry(e.into()),
            })
    };
    // A call alike to one the adapter gave its word for gets the request
    // the host's own edit makes, without a guest call (`relay::alike`).
    // (Made in the match itself: a local of its own would keep its slot
    // in the future across every later await.)
    let mut outbound = match req
        .form
        .is_none()
        .then(|| super::alike::request(plugin, ctx, &req.body, req.places.as_ref()))
        .flatten()
    {
        Some(outbound) => outbound,
        None => {
            Box::pin(async {
                let mut asking = session().await?;
                let outbound = asking
                    .translate_request(ctx, &req.body)
                    .await
                    .map_err(Failed::adapter)?;
                asking.recycle();
                if req.form.is_none() {
                    super::alike::learn(plugin, ctx, &req.body, &outbound);
                }
                Ok::<_, Failed>(outbound)
            })
            .await?
        }
    };
    // Policies edit chat requests in the vendor's chat dialect.
    if !policies.is_empty() && req.protocol.is_chat() {
        if let OutboundBody::Bytes(bytes) = &outbound.body {
            let mut value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
                stop(ApiError::Adapter(format!(
                    "its vendor request is not JSON, so the model's policies cannot apply: {e}"
                )))
            })?;
            Box::pin(run_policies(
                sandbox,
                policies,
                ctx,
                plugin.vendor_protocol,
                &mut value,
            ))
            .await
            .map_err(stop)?;
            outbound.body = OutboundBody::Bytes(
                serde_json::to_vec(&value).map_err(|e| stop(ApiError::internal(e)))?,
            );
        }
    }
    let adapter_state = std::mem::take(&mut outbound.state);
    let mut splice = None;
    let relay = match std::mem::replace(&mut outbound.answer, AnswerMode::Translate) {
        AnswerMode::Relay(usage) if !req.stream => Some(usage),
        AnswerMode::Relay(_) => {
            return Err(Failed::retry(ApiError::Adapter(
                "it asked to relay a streamed answer".into(),
            )))
        }
        AnswerMode::Splice { model, .. } => {
            splice = Splice::asked(req.protocol.protocol, plugin.vendor_protocol, &model);
            None
        }
        AnswerMode::Translate => None,
    };
    let payload = match &req.form {
        Some(form) => ClientPayload::Form(form),
        None => ClientPayload::Bytes(&req.body),
    };
    // A request the adapter built wrongly is the adapter's fault.
    let prepared = state
        .vendors
        .prepare(channel, plugin.auth, outbound, payload)
        .map_err(Failed::retry)?;
    let head_timeout = if req.stream {
        limits.stream_idle_timeout
    } else {
        limits.upstream_timeout
    };
    let sending = async {
        let sent = Instant::now();
        let resp = prepared.send(head_timeout).await;
        (resp, sent.elapsed())
    };
    // A stream's translator is made while the vendor works on the request,
    // not after its answer's head arrives: the instance and the guest's
    // constructor are off the way to the first token. The request goes
    // out first: `send`'s first poll writes it on a driven connection
    // (`driven`), and the yield lets the pooled client's connection task
    // write it (`send` has handed it over by then). The instance is held
    // from here to the stream's end, as it would be from the answer's head
    // on.
    let ((resp, waited), opening) = if req.stream {
        let opening = async {
            tokio::task::yield_now().await;
            let mut session = session().await?;
            let translator = session
                .open_stream(ctx, &adapter_state)
                .await
                .map_err(|e| Failed::retry(e.into()))?;
            Ok::<_, Failed>((session, translator))
        };
        let (sent, opened) = Box::pin(async { tokio::join!(sending, opening) }).await;
        (sent, Some(opened))
    } else {
        (sending.await, None)
    };
    state.metrics.upstream(&channel.name, waited);
    // The vendor's headers become the guest's only for a call that reads
    // them (an error, a translated plain answer): a stream or a spliced
    // answer makes no copy of them. (Taken apart here: the whole response
    // kept as a local of its own would keep its slot in the future across
    // every later await.)
    let (head, upstream) = match resp {
        Ok(r) => r.into_parts(),
        Err(e) => {
            if let Some(session) = close_opened(opening).await {
                session.recycle();
            }
            tracing::warn!(channel = %channel.name, "upstream send failed: {e}");
            return Err(Failed::retry(match e {
                SendError::Timeout(d) => ApiError::UpstreamTimeout(d.as_secs()),
                SendError::Transport(t) => ApiError::UpstreamUnreachable(t),
            }));
        }
    };
    let status = head.status;
    if !status.is_success() {
        let refused = Box::pin(async {
            // Bounded like a success's body: a vendor that stalls after its
            // status line must not hold the call's money and slot for ever.
            let body = tokio::time::timeout(
                limits.upstream_timeout,
                vendor::read_capped(upstream, limits.max_body_bytes),
            )
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
            // The stream's instance, if it was made, reads the error.
            let mut session = match close_opened(opening).await {
                Some(session) => session,
                None => session().await?,
            };
            let mapped = match session
                .translate_error(ctx, status.as_u16(), &guest_headers(&head.headers), &body)
                .await
            {
                Ok(mapped) => {
                    session.recycle();
                    mapped
                }
                // The adapter could not read the vendor's error: the vendor's
                // status decides.
                Err(g) => {
                    tracing::warn!(channel = %channel.name, "the adapter failed on the vendor's error: {g}");
                    MappedError {
                        status: if status.is_client_error() || status.is_server_error() {
                            status
                        } else {
                            StatusCode::BAD_GATEWAY
                        },
                        code: "upstream_error".into(),
                        message: format!("the upstream answered {status}"),
                        retryable: false,
                        retry_after_secs: None,
                    }
                }
            };
            tracing::warn!(channel = %channel.name, status = status.as_u16(), code = %mapped.code, "upstream refused");
            let e = ApiError::Upstream {
                status: mapped.status.as_u16(),
                code: mapped.code,
                message: mapped.message,
                retry_after: UpstreamRetry::from_vendor(&head.headers, mapped.retry_after_secs),
            };
            Err(Failed::vendor(status, mapped.retryable, e))
        });
        return refused.await;
    }
    if let Some(usage) = relay {
        return Ok(Answer::Relay {
            status,
            content_type: head.headers.get(header::CONTENT_TYPE).cloned(),
            upstream,
            usage,
        });
    }
    if let Some(opened) = opening {
        let (session, translator) = opened?;
        let started = Box::pin(stream::start(
            session,
            translator,
            upstream,
            req.protocol.protocol,
            splice,
            limits.stream_idle_timeout,
        ));
        return match started.await {
            Ok(opened) => Ok(Answer::Stream(Box::new(opened))),
            Err(StartFailed::Vendor(e)) => {
                tracing::warn!(channel = %channel.name, "the vendor's stream failed before its first event: {e}");
                Err(Failed::retry(e))
            }
            Err(StartFailed::Untranslatable(e)) => Err(Failed::untranslatable(channel, e)),
            // The adapter calls an error in a stream final (it cannot be
            // undone mid-answer); before anything went out it can.
            Err(StartFailed::Refused(e)) => {
                tracing::warn!(channel = %channel.name, "the vendor's stream opened with an error: {e}");
                Err(Failed::retry(e.into()))
            }
        };
    }
    let read = tokio::time::timeout(
        limits.upstream_timeout,
        vendor::read_capped(upstream, limits.max_body_bytes),
    );
    let answer_body = match read.await {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            return Err(Failed::retry(ApiError::UpstreamUnreachable(format!(
                "reading the answer failed: {e}"
            ))))
        }
        Err(_) => {
            return Err(Failed::retry(ApiError::UpstreamTimeout(
                limits.upstream_timeout.as_secs(),
            )))
        }
    };
    // An ordinary answer of a call that splices is finished here, with
    // no guest call (`Splice::finish`).
    if let Some(done) = splice.as_ref().and_then(|s| s.finish(&answer_body)) {
        return Ok(Answer::Plain {
            status: StatusCode::OK,
            content_type: HeaderValue::from_static("application/json"),
            body: done.body,
            usage: done.usage,
        });
    }
    Box::pin(async {
        let mut session = session().await?;
        let answer = session
            .translate_response(
                ctx,
                &adapter_state,
                status.as_u16(),
                &guest_headers(&head.headers),
                &answer_body,
            )
            .await
            .map_err(|e| Failed::untranslatable(channel, e))?;
        session.recycle();
        Ok(Answer::Plain {
            status: answer.status,
            content_type: answer.content_type,
            body: answer.body,
            usage: answer.usage,
        })
    })
    .await
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `attempt`'s signature, with its future as `F`.
    type Attempt<'a, F> = fn(
        &'a SharedState,
        &'a ChannelConfig,
        &'a Arc<AdapterPlugin>,
        &'a [Arc<PolicyPlugin>],
        &'a TextRequest,
        &'a RequestCtx,
    ) -> F;

    /// The size of the future an async function of `attempt`'s arguments
    /// returns, without calling it.
    fn future_size<F: std::future::Future>(_: Attempt<'_, F>) -> usize {
        std::mem::size_of::<F>()
    }

    /// Every call allocates its attempt's future and copies it into the box
    /// (`attempt`): an await laid out inline again would grow it unnoticed
    /// (4,064 bytes in a release build, 2,912 of them the sending's await;
    /// before the other awaits were boxed, 14,080 in a release build and
    /// 7,032 in a test build).
    #[test]
    fn an_attempts_future_stays_small() {
        let size = future_size(attempt);
        assert!(
            size <= 4608,
            "an attempt's future is {size} bytes: box the await that grew it"
        );
    }

    /// The size of the future `serve` returns, without calling it.
    fn serve_size<F: std::future::Future>(_: fn(SharedState, Caller, TextRequest) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// Every call's `serve` future is copied whole into its box
    /// (`api::text`), its unused states and all: the settlement of a silent
    /// vendor's answer and the attempt's context kept out of it took it
    /// from 5,384 to 4,104 bytes (release builds).
    #[test]
    fn a_calls_future_stays_small() {
        let size = serve_size(serve);
        assert!(
            size <= 4608,
            "a call's future is {size} bytes: box the await that grew it"
        );
    }
}
