//! Turning one call's client request, vendor answer and vendor stream into
//! what the other side expects.
//!
//! Same protocol on both sides: a passthrough that renames the model and
//! reads the usage (members this gateway does not know reach the vendor and
//! the client intact). Otherwise: client codec → canonical form → vendor
//! codec, and back. Each protocol's codec is one module that reads and
//! writes both ways, so the module that reads a client protocol is the one
//! that writes that vendor protocol.

use serde_json::Value;

use crate::bindings::types::{Protocol, RequestCtx, SseEvent};
use crate::canonical::{now_secs, Meta, Request, Response, StreamEvent, Usage};
use crate::json::{parse_request_object, parse_upstream_object, to_bytes};
use crate::TranslateError;
use crate::{
    anthropic, gemini, openai_chat, openai_completions, openai_passthrough, openai_responses,
};

/// The vendor request body and the state handed back later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub body: Vec<u8>,
    pub state: String,
}

/// The client's answer body and the usage to bill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub body: Vec<u8>,
    pub usage: Option<Usage>,
}

/// How a translated stream ends.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEnd {
    pub events: Vec<SseEvent>,
    pub usage: Option<Usage>,
    /// The vendor sent its protocol's finish marker.
    pub complete: bool,
}

/// `state` when the client asked for a usage report at the end of its stream.
const WANTS_USAGE: &str = "usage";

fn not_chat(p: Protocol) -> TranslateError {
    TranslateError::unsupported(format!("{p:?} is not a chat protocol"))
}

fn parse_client(p: Protocol, body: &Value) -> Result<Request, TranslateError> {
    match p {
        Protocol::OpenaiChat => openai_chat::parse_request(body),
        Protocol::OpenaiCompletions => openai_completions::parse_request(body),
        Protocol::OpenaiResponses => openai_responses::parse_request(body),
        Protocol::AnthropicMessages => anthropic::parse_request(body),
        Protocol::Gemini => gemini::parse_request(body),
        other => Err(not_chat(other)),
    }
}

fn encode_vendor(p: Protocol, req: &Request, ctx: &RequestCtx) -> Result<Value, TranslateError> {
    Ok(match p {
        Protocol::OpenaiChat => openai_chat::encode_request(req),
        Protocol::OpenaiCompletions => openai_completions::encode_request(req),
        Protocol::OpenaiResponses => openai_responses::encode_request(req),
        Protocol::AnthropicMessages => anthropic::encode_request(req, default_max_tokens(ctx)),
        Protocol::Gemini => gemini::encode_request(req),
        other => return Err(not_chat(other)),
    })
}

/// The channel's `default_max_tokens` option, for vendors that need one.
fn default_max_tokens(ctx: &RequestCtx) -> Option<u64> {
    crate::vendor::option(ctx, "default_max_tokens").and_then(|v| v.parse().ok())
}

fn parse_vendor(p: Protocol, body: &Value, ctx: &RequestCtx) -> Result<Response, TranslateError> {
    match p {
        Protocol::OpenaiChat => openai_chat::parse_response(body),
        Protocol::OpenaiCompletions => openai_completions::parse_response(body),
        Protocol::OpenaiResponses => openai_responses::parse_response(body),
        Protocol::AnthropicMessages => anthropic::parse_response(body),
        Protocol::Gemini => gemini::parse_response(body, &ctx.request_id),
        other => Err(not_chat(other)),
    }
}

fn encode_client(p: Protocol, r: &Response, meta: &Meta) -> Result<Value, TranslateError> {
    Ok(match p {
        Protocol::OpenaiChat => openai_chat::encode_response(r, meta),
        Protocol::OpenaiCompletions => openai_completions::encode_response(r, meta),
        Protocol::OpenaiResponses => openai_responses::encode_response(r, meta),
        Protocol::AnthropicMessages => anthropic::encode_response(r, meta),
        Protocol::Gemini => gemini::encode_response(r, meta),
        other => return Err(not_chat(other)),
    })
}

/// A 2xx answer that is a vendor's error in disguise (some vendors do that).
fn error_in_answer(p: Protocol, v: &Value) -> Option<TranslateError> {
    let disguised = match p {
        Protocol::AnthropicMessages => v.get("type").and_then(Value::as_str) == Some("error"),
        Protocol::OpenaiChat | Protocol::OpenaiCompletions => {
            v.get("error").is_some_and(|e| !e.is_null()) && v.get("choices").is_none()
        }
        _ => {
            v.get("error").is_some_and(|e| !e.is_null())
                && v.get("output").is_none()
                && v.get("candidates").is_none()
        }
    };
    disguised.then(|| TranslateError::Vendor(crate::errors::in_answer_failure_from(v)))
}

/// What the encoder needs to know about the call.
pub fn meta(ctx: &RequestCtx, state: &str) -> Meta {
    Meta {
        request_id: ctx.request_id.clone(),
        model: ctx.model.clone(),
        created: now_secs(),
        wants_usage: state == WANTS_USAGE,
    }
}

/// Builds the vendor request body from the client's.
pub fn request(
    vendor: Protocol,
    ctx: &RequestCtx,
    body: &[u8],
) -> Result<Prepared, TranslateError> {
    let client = ctx.client_protocol;
    if client == vendor {
        return match vendor {
            Protocol::OpenaiChat | Protocol::OpenaiCompletions => {
                let p = openai_passthrough::prepare_request(body, &ctx.upstream_model, ctx.stream)?;
                Ok(Prepared {
                    body: p.body,
                    state: p.state,
                })
            }
            Protocol::AnthropicMessages => Ok(Prepared {
                body: anthropic::prepare_request(body, &ctx.upstream_model, ctx.stream)?,
                state: String::new(),
            }),
            Protocol::OpenaiResponses => Ok(Prepared {
                body: openai_responses::passthrough::prepare_request(
                    body,
                    &ctx.upstream_model,
                    ctx.stream,
                )?,
                state: String::new(),
            }),
            // The model and streaming are in the URL; the body goes as it is.
            Protocol::Gemini => Ok(Prepared {
                body: body.to_vec(),
                state: String::new(),
            }),
            other => Err(not_chat(other)),
        };
    }
    // An Anthropic or OpenAI chat client's plain conversation is read typed
    // when it can be (see `anthropic::read_request`,
    // `openai_chat::read_request`): the same request, without its tree.
    let typed = match client {
        Protocol::AnthropicMessages => anthropic::read_request(body),
        Protocol::OpenaiChat => openai_chat::read_request(body),
        _ => None,
    };
    let mut req = match typed {
        Some(req) => req,
        None => parse_client(client, &parse_request_object(body)?)?,
    };
    req.model = ctx.upstream_model.clone();
    req.stream = ctx.stream;
    // An OpenAI chat or Anthropic request is written straight from the
    // canonical form (`write_request`: the same text, without the tree).
    let body = match vendor {
        Protocol::OpenaiChat => openai_chat::write_request(&req),
        Protocol::AnthropicMessages => anthropic::write_request(&req, default_max_tokens(ctx)),
        _ => to_bytes(&encode_vendor(vendor, &req, ctx)?),
    };
    Ok(Prepared {
        body,
        state: if req.stream_usage {
            WANTS_USAGE.to_owned()
        } else {
            String::new()
        },
    })
}

/// Builds the client's answer from a vendor's 2xx answer.
pub fn response(
    vendor: Protocol,
    ctx: &RequestCtx,
    state: &str,
    body: &[u8],
) -> Result<Finished, TranslateError> {
    let client = ctx.client_protocol;
    if client == vendor {
        let (body, usage) = match vendor {
            Protocol::OpenaiChat | Protocol::OpenaiCompletions => {
                let f = openai_passthrough::finish_response(body, &ctx.model)?;
                (f.body, f.usage)
            }
            Protocol::AnthropicMessages => anthropic::finish_response(body, &ctx.model)?,
            Protocol::OpenaiResponses => {
                openai_responses::passthrough::finish_response(body, &ctx.model)?
            }
            Protocol::Gemini => gemini::finish_response(body, &ctx.model)?,
            other => return Err(not_chat(other)),
        };
        return Ok(Finished { body, usage });
    }
    // An OpenAI chat or Anthropic answer is read typed when it can be (see
    // `openai_chat::read_response`, `anthropic::read_response`): the same
    // answer, without its tree.
    let typed = match vendor {
        Protocol::OpenaiChat => openai_chat::read_response(body),
        Protocol::AnthropicMessages => anthropic::read_response(body),
        _ => None,
    };
    let resp = match typed {
        Some(resp) => resp,
        None => {
            let value = parse_upstream_object(body)?;
            if let Some(e) = error_in_answer(vendor, &value) {
                return Err(e);
            }
            parse_vendor(vendor, &value, ctx)?
        }
    };
    let meta = meta(ctx, state);
    // An Anthropic or OpenAI chat client's answer is written straight from
    // the canonical form (`write_response`: the same text, without the tree).
    let body = match client {
        Protocol::AnthropicMessages => anthropic::write_response(&resp, &meta),
        Protocol::OpenaiChat => openai_chat::write_response(&resp, &meta),
        _ => to_bytes(&encode_client(client, &resp, &meta)?),
    };
    Ok(Finished {
        body,
        usage: resp.usage,
    })
}

enum Parser {
    Chat(openai_chat::StreamParser),
    Completions(openai_completions::StreamParser),
    Responses(openai_responses::StreamParser),
    Anthropic(anthropic::StreamParser),
    Gemini(gemini::StreamParser),
}

impl Parser {
    fn new(p: Protocol, ctx: &RequestCtx) -> Option<Self> {
        Some(match p {
            Protocol::OpenaiChat => Parser::Chat(Default::default()),
            Protocol::OpenaiCompletions => Parser::Completions(Default::default()),
            Protocol::OpenaiResponses => Parser::Responses(Default::default()),
            Protocol::AnthropicMessages => Parser::Anthropic(Default::default()),
            Protocol::Gemini => Parser::Gemini(gemini::StreamParser::new(&ctx.request_id)),
            _ => return None,
        })
    }

    fn push(&mut self, ev: &SseEvent) -> Result<Vec<StreamEvent>, TranslateError> {
        match self {
            Parser::Chat(p) => p.push(ev),
            Parser::Completions(p) => p.push(ev),
            Parser::Responses(p) => p.push(ev),
            Parser::Anthropic(p) => p.push(ev),
            Parser::Gemini(p) => p.push(ev),
        }
    }

    fn complete(&self) -> bool {
        match self {
            Parser::Chat(p) => p.complete(),
            Parser::Completions(p) => p.complete(),
            Parser::Responses(p) => p.complete(),
            Parser::Anthropic(p) => p.complete(),
            Parser::Gemini(p) => p.complete(),
        }
    }
}

enum Encoder {
    Chat(openai_chat::StreamEncoder),
    Completions(openai_completions::StreamEncoder),
    Responses(openai_responses::StreamEncoder),
    Anthropic(anthropic::StreamEncoder),
    Gemini(gemini::StreamEncoder),
}

impl Encoder {
    fn new(p: Protocol, meta: Meta) -> Option<Self> {
        Some(match p {
            Protocol::OpenaiChat => Encoder::Chat(openai_chat::StreamEncoder::new(meta)),
            Protocol::OpenaiCompletions => {
                Encoder::Completions(openai_completions::StreamEncoder::new(meta))
            }
            Protocol::OpenaiResponses => {
                Encoder::Responses(openai_responses::StreamEncoder::new(meta))
            }
            Protocol::AnthropicMessages => Encoder::Anthropic(anthropic::StreamEncoder::new(meta)),
            Protocol::Gemini => Encoder::Gemini(gemini::StreamEncoder::new(meta)),
            _ => return None,
        })
    }

    fn push(&mut self, ev: &StreamEvent) -> Vec<SseEvent> {
        match self {
            Encoder::Chat(e) => e.push(ev),
            Encoder::Completions(e) => e.push(ev),
            Encoder::Responses(e) => e.push(ev),
            Encoder::Anthropic(e) => e.push(ev),
            Encoder::Gemini(e) => e.push(ev),
        }
    }

    fn finish(&mut self) -> Vec<SseEvent> {
        match self {
            Encoder::Chat(e) => e.finish(),
            Encoder::Completions(e) => e.finish(),
            Encoder::Responses(e) => e.finish(),
            Encoder::Anthropic(e) => e.finish(),
            Encoder::Gemini(e) => e.finish(),
        }
    }
}

struct Translation {
    parser: Parser,
    encoder: Encoder,
    usage: Option<Usage>,
}

enum Inner {
    OpenAi(openai_passthrough::StreamRelay),
    Anthropic(anthropic::StreamRelay),
    Gemini(gemini::StreamRelay),
    Responses(openai_responses::passthrough::StreamRelay),
    // Boxed: several times larger than the other variants.
    Translate(Box<Translation>),
    /// Not a pair this SDK translates; every push fails.
    None,
}

/// Whether the host may relay this call's ordinary stream events, or
/// finish its ordinary non-streamed answer, itself (`answer-mode.splice`):
/// an OpenAI chat or completions call to a vendor of the same protocol,
/// whose relay ([`openai_passthrough::StreamRelay`]) writes an ordinary
/// chunk exactly as the host's rule does (the model set, `"usage":null`
/// added) and keeps no state from one, and whose
/// [`openai_passthrough::finish_response`] only sets the model of an
/// answer whose usage has its details, and reads that usage. `gateway
/// adapter test` compares the two on every fixture.
pub fn host_splices(vendor: Protocol, ctx: &RequestCtx) -> bool {
    ctx.client_protocol == vendor
        && matches!(vendor, Protocol::OpenaiChat | Protocol::OpenaiCompletions)
}

/// One streamed answer's translation.
pub struct Stream {
    inner: Inner,
}

fn data_events(payloads: Vec<String>) -> Vec<SseEvent> {
    payloads
        .into_iter()
        .map(|data| SseEvent { event: None, data })
        .collect()
}

impl Stream {
    pub fn new(vendor: Protocol, ctx: &RequestCtx, state: &str) -> Self {
        let client = ctx.client_protocol;
        let inner = if client == vendor {
            match vendor {
                Protocol::OpenaiChat | Protocol::OpenaiCompletions => {
                    Inner::OpenAi(openai_passthrough::StreamRelay::new(&ctx.model, state))
                }
                Protocol::AnthropicMessages => {
                    Inner::Anthropic(anthropic::StreamRelay::new(&ctx.model))
                }
                Protocol::Gemini => {
                    Inner::Gemini(gemini::StreamRelay::new(&ctx.model, &ctx.request_id))
                }
                Protocol::OpenaiResponses => {
                    Inner::Responses(openai_responses::passthrough::StreamRelay::new(&ctx.model))
                }
                _ => Inner::None,
            }
        } else {
            match (
                Parser::new(vendor, ctx),
                Encoder::new(client, meta(ctx, state)),
            ) {
                (Some(parser), Some(encoder)) => Inner::Translate(Box::new(Translation {
                    parser,
                    encoder,
                    usage: None,
                })),
                _ => Inner::None,
            }
        };
        Self { inner }
    }

    pub fn push(&mut self, ev: &SseEvent) -> Result<Vec<SseEvent>, TranslateError> {
        match &mut self.inner {
            Inner::OpenAi(r) => Ok(data_events(r.push(&ev.data)?)),
            Inner::Anthropic(r) => r.push(ev),
            Inner::Gemini(r) => r.push(ev),
            Inner::Responses(r) => r.push(ev),
            Inner::Translate(t) => {
                let mut out = Vec::new();
                for e in t.parser.push(ev)? {
                    if let StreamEvent::Usage(u) = &e {
                        t.usage = Some(*u);
                    }
                    out.extend(t.encoder.push(&e));
                }
                Ok(out)
            }
            Inner::None => Err(TranslateError::unsupported("no translator for this stream")),
        }
    }

    /// The closing events (only when the vendor finished its stream: a cut
    /// answer must not look complete) and the usage.
    pub fn finish(&mut self) -> StreamEnd {
        let (events, usage, complete) = match &mut self.inner {
            Inner::OpenAi(r) => {
                let close = r.finish();
                (data_events(close.events), close.usage, close.complete)
            }
            Inner::Anthropic(r) => (Vec::new(), r.usage(), r.complete()),
            Inner::Gemini(r) => (Vec::new(), r.usage(), r.complete()),
            Inner::Responses(r) => (Vec::new(), r.usage(), r.complete()),
            Inner::Translate(t) => {
                let complete = t.parser.complete();
                let events = if complete {
                    t.encoder.finish()
                } else {
                    Vec::new()
                };
                (events, t.usage, complete)
            }
            Inner::None => (Vec::new(), None, false),
        };
        StreamEnd {
            events,
            usage,
            complete,
        }
    }
}
