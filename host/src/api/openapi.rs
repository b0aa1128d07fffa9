//! The machine-readable description of the public API (spec §9): an OpenAPI
//! 3.1 document, `info.version` 1.1.0, served at `GET /v1/openapi.json`
//! without a token.
//!
//! It is generated, not written: every schema comes from a Rust type through
//! `utoipa`'s `ToSchema` — the answers the handlers serialize (`Model`,
//! `VideoTaskView`, `QuoteView`, `Subscription`, ...), the error envelopes
//! `error.rs` builds every error from, and, for the protocol bodies the host
//! relays without typing them, the types in `schemas`. The operations are
//! built here from the code's own tables: the text routes from the client
//! protocol table (`protocol::ALL`, one operation per route and Gemini
//! action), each operation's security schemes and error envelope from the
//! path's surface (`protocol::surface`), the way the router and the key
//! lookup read them. A test compares the operations with the router's own
//! route list (`api::public_route_list`), so a route added without its
//! description fails.
//!
//! The admin API is not public and is not described here.

mod schemas;

pub use schemas::*;

use crate::api::dashboard::{Subscription, UsageRange, UsageTotal};
use crate::api::models::{GeminiModel, GeminiModelList, Model, ModelList};
use crate::api::videos::CapabilityList;
use crate::error::{
    AnthropicErrorEnvelope, Envelope, GeminiErrorEnvelope, OpenAiErrorEnvelope,
    VideoValidationEnvelope,
};
use crate::plugins::bindings::types::Protocol;
use crate::protocol::{self, ClientProtocol, KeyPlace};
use crate::video::render::{QuoteView, VideoTaskView};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::OnceLock;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, Parameter, ParameterBuilder, ParameterIn,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{KnownFormat, SchemaFormat};
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, ObjectBuilder, OneOfBuilder, OpenApi,
    OpenApiBuilder, Paths, Ref, RefOr, Required, ResponseBuilder, Schema, Tag, Type,
};
use utoipa::{IntoParams, ToSchema};

/// The interface's version (spec §9).
pub const VERSION: &str = "1.1.0";

/// The document's own path.
pub const PATH: &str = "/v1/openapi.json";

/// `GET /v1/openapi.json`: the document, built once.
pub async fn serve() -> Response {
    static JSON: OnceLock<String> = OnceLock::new();
    let body = JSON.get_or_init(|| {
        serde_json::to_string(&document()).unwrap_or_else(|e| {
            tracing::error!("cannot serialize the OpenAPI document: {e}");
            String::from("{}")
        })
    });
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.clone(),
    )
        .into_response()
}

/// The whole document.
pub fn document() -> OpenApi {
    let mut b = Builder::default();
    text_operations(&mut b);
    other_operations(&mut b);

    let mut components = ComponentsBuilder::new().schemas_from_iter(b.schemas);
    for place in [
        KeyPlace::Bearer,
        KeyPlace::XApiKey,
        KeyPlace::XGoogApiKey,
        KeyPlace::QueryKey,
    ] {
        components = components.security_scheme(scheme_name(place), security_scheme(place));
    }
    let tags = [
        (
            "chat",
            "The five text protocols (every model, whatever vendor serves it)",
        ),
        (
            "families",
            "Embeddings, images, audio, rerank and moderation",
        ),
        ("models", "Model lists"),
        (
            "videos",
            "The asynchronous video API: capabilities, quotes, tasks, downloads",
        ),
        ("billing", "The legacy OpenAI dashboard shapes"),
        ("meta", "This document"),
    ]
    .into_iter()
    .map(|(name, description)| {
        let mut t = Tag::new(name);
        t.description = Some(description.into());
        t
    });
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("AI API gateway")
                .version(VERSION)
                .description(Some(
                    "One base URL and one token scheme for many AI vendors. Every error comes in \
                     the client protocol's own envelope, its message ending with the request id \
                     (also in `X-Request-Id`). Amounts are in CNY; quota units are integers \
                     (1 CNY = 500,000 by default).",
                ))
                .build(),
        )
        .paths(b.paths)
        .components(Some(components.build()))
        .tags(Some(tags))
        .build()
}

/// The documented operations as `(method, path)`, paths as in the document.
pub fn operations(doc: &OpenApi) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (path, item) in &doc.paths.paths {
        for (method, op) in [
            ("GET", &item.get),
            ("POST", &item.post),
            ("PUT", &item.put),
            ("DELETE", &item.delete),
            ("PATCH", &item.patch),
        ] {
            if op.is_some() {
                out.push((method, path.clone()));
            }
        }
    }
    out
}

fn scheme_name(place: KeyPlace) -> &'static str {
    match place {
        KeyPlace::Bearer => "bearer",
        KeyPlace::XApiKey => "x-api-key",
        KeyPlace::XGoogApiKey => "x-goog-api-key",
        KeyPlace::QueryKey => "key-query",
    }
}

fn security_scheme(place: KeyPlace) -> SecurityScheme {
    match place {
        KeyPlace::Bearer => SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some("`Authorization: Bearer sk-...`"))
                .build(),
        ),
        KeyPlace::XApiKey => SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
            "x-api-key",
            "The Anthropic SDKs' header",
        ))),
        KeyPlace::XGoogApiKey => SecurityScheme::ApiKey(ApiKey::Header(
            ApiKeyValue::with_description("x-goog-api-key", "The Google SDKs' header"),
        )),
        KeyPlace::QueryKey => SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
            "key",
            "`?key=`, read under `/v1beta` only",
        ))),
    }
}

/// Schemas by name, and the paths, as they are added.
#[derive(Default)]
struct Builder {
    schemas: BTreeMap<String, RefOr<Schema>>,
    paths: Paths,
}

impl Builder {
    /// A reference to `T`'s schema, registering it and the schemas it uses.
    fn schema<T: ToSchema>(&mut self) -> RefOr<Schema> {
        let name = T::name().to_string();
        if !self.schemas.contains_key(&name) {
            self.schemas.insert(name.clone(), T::schema());
            let mut used = Vec::new();
            T::schemas(&mut used);
            for (n, s) in used {
                self.schemas.entry(n).or_insert(s);
            }
        }
        RefOr::Ref(Ref::from_schema_name(name))
    }

    fn add(&mut self, op: Op) {
        let concrete = op.path.replace("{model}", "m").replace("{id}", "task_x");
        let surface = protocol::surface(&concrete);
        let mut builder = OperationBuilder::new()
            .operation_id(Some(operation_id(&op.method, &op.path)))
            .tag(op.tag)
            .summary(Some(op.summary))
            .description(op.description);
        if op.authenticated {
            for place in surface.keys {
                builder = builder.security(SecurityRequirement::new(
                    scheme_name(*place),
                    Vec::<String>::new(),
                ));
            }
        }
        for p in op.params {
            builder = builder.parameter(p);
        }
        if let Some(body) = op.body {
            let mut rb = RequestBodyBuilder::new().required(Some(Required::True));
            for (ct, schema) in body {
                rb = rb.content(ct, ContentBuilder::new().schema(Some(schema)).build());
            }
            builder = builder.request_body(Some(rb.build()));
        }
        for (status, description, contents) in op.ok {
            let mut r = ResponseBuilder::new().description(description);
            for (ct, schema) in contents {
                r = r.content(ct, ContentBuilder::new().schema(Some(schema)).build());
            }
            builder = builder.response(status.to_string(), r.build());
        }
        let envelope = self.envelope(surface.envelope);
        let mut statuses: Vec<u16> = COMMON_ERRORS.to_vec();
        if op.authenticated {
            statuses.extend(AUTH_ERRORS);
        }
        statuses.extend(op.errors);
        statuses.sort_unstable();
        statuses.dedup();
        for status in statuses {
            let schema = if status == 400 && op.video_validation {
                self.video_400()
            } else {
                envelope.clone()
            };
            let r = ResponseBuilder::new()
                .description(error_description(status))
                .content(
                    "application/json",
                    ContentBuilder::new().schema(Some(schema)).build(),
                )
                .build();
            builder = builder.response(status.to_string(), r);
        }
        self.paths
            .add_path_operation(&op.path, vec![op.method], builder.build());
    }

    fn envelope(&mut self, envelope: Envelope) -> RefOr<Schema> {
        match envelope {
            Envelope::OpenAi => self.schema::<OpenAiErrorEnvelope>(),
            Envelope::Anthropic => self.schema::<AnthropicErrorEnvelope>(),
            Envelope::Gemini => self.schema::<GeminiErrorEnvelope>(),
        }
    }

    /// A video route's 400: envelope 2 for gateway validation, envelope 1
    /// for the rest.
    fn video_400(&mut self) -> RefOr<Schema> {
        let a = self.schema::<OpenAiErrorEnvelope>();
        let b = self.schema::<VideoValidationEnvelope>();
        OneOfBuilder::new().item(a).item(b).into()
    }
}

/// What any route may answer: an unreadable request, a body over the
/// limit, a slow client, the rate limit, the edge's connection caps, and
/// our own failure.
const COMMON_ERRORS: [u16; 7] = [400, 404, 408, 413, 429, 500, 503];
/// What a route that needs a token may answer besides.
const AUTH_ERRORS: [u16; 2] = [401, 403];
/// A call that holds money and reaches a vendor.
const CALL_ERRORS: [u16; 4] = [402, 502, 503, 504];

fn error_description(status: u16) -> &'static str {
    match status {
        400 => "Invalid request (`invalid_request`; video validation: envelope 2)",
        401 => "Missing, wrong, disabled, deleted or expired token (`invalid_api_key`)",
        402 => "The balance cannot cover the hold (`insufficient_user_quota`)",
        403 => "Token controls: `token_model_denied`, `token_ip_denied`, `token_quota_exhausted`, `quote_token_mismatch`",
        404 => "Unknown model (`model_not_found`), task or quote",
        408 => "The request was not received in time (`request_timeout`)",
        409 => "`idempotency_key_reuse`, `quote_already_used`, `quote_model_mismatch`, `quote_duration_mismatch`, `quote_price_changed`",
        410 => "`artifact_gone`, `quote_expired`",
        413 => "The body is over the limit (`request_too_large`)",
        416 => "The requested range is outside the file",
        429 => "`rate_limit_exceeded` (with `Retry-After`), `group_concurrency_limit`, a vendor's 429, `user_concurrency_limit`, `daily_budget_exceeded`",
        500 => "The gateway failed (`internal_error`)",
        501 => "`upstream_cancel_unsupported`",
        502 => "The vendor or the adapter failed (`adapter_error`, `upstream_unreachable`, `artifact_upstream_*`)",
        503 => "No channel can serve the model (`no_available_channel`), or the gateway is busy",
        504 => "The vendor did not answer in time (`upstream_timeout`)",
        _ => "Error",
    }
}

fn operation_id(method: &HttpMethod, path: &str) -> String {
    let m = match method {
        HttpMethod::Get => "get",
        HttpMethod::Post => "post",
        _ => "op",
    };
    let mut id = String::from(m);
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            id.push(c);
        } else if !id.ends_with('_') {
            id.push('_');
        }
    }
    id.trim_end_matches('_').to_string()
}

/// Media types and their schemas (a request body, or an answer).
type Contents = Vec<(&'static str, RefOr<Schema>)>;

/// One operation to describe.
struct Op {
    method: HttpMethod,
    path: String,
    tag: &'static str,
    summary: &'static str,
    description: Option<String>,
    authenticated: bool,
    params: Vec<Parameter>,
    body: Option<Contents>,
    ok: Vec<(u16, &'static str, Contents)>,
    errors: Vec<u16>,
    /// Its 400 may be envelope 2.
    video_validation: bool,
}

impl Op {
    fn new(
        method: HttpMethod,
        path: impl Into<String>,
        tag: &'static str,
        summary: &'static str,
    ) -> Op {
        Op {
            method,
            path: path.into(),
            tag,
            summary,
            description: None,
            authenticated: true,
            params: Vec::new(),
            body: None,
            ok: Vec::new(),
            errors: Vec::new(),
            video_validation: false,
        }
    }

    fn json_body(mut self, schema: RefOr<Schema>) -> Op {
        self.body = Some(vec![("application/json", schema)]);
        self
    }

    fn ok(mut self, status: u16, description: &'static str, contents: Contents) -> Op {
        self.ok.push((status, description, contents));
        self
    }

    fn ok_json(self, schema: RefOr<Schema>) -> Op {
        self.ok(200, "OK", vec![("application/json", schema)])
    }

    fn errors(mut self, errors: &[u16]) -> Op {
        self.errors.extend_from_slice(errors);
        self
    }

    fn param(mut self, p: Parameter) -> Op {
        self.params.push(p);
        self
    }

    fn describe(mut self, text: impl Into<String>) -> Op {
        self.description = Some(text.into());
        self
    }
}

fn string_schema() -> RefOr<Schema> {
    ObjectBuilder::new().schema_type(Type::String).into()
}

fn binary_schema() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)))
        .into()
}

/// One event of a server-sent events stream, as SSE parsers read it; the
/// `data` of each is named by `event`'s schema (see components).
fn sse(event: &str) -> RefOr<Schema> {
    let string = |description: &str| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(description))
    };
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(format!(
            "A server-sent event; its data is a `{event}` (JSON), or a protocol's end marker"
        )))
        .property(
            "event",
            string("The event's name, in protocols that name events"),
        )
        .property("data", string(&format!("A `{event}` as JSON")))
        .property("id", string("Event id"))
        .property("retry", ObjectBuilder::new().schema_type(Type::Integer))
        .into()
}

fn path_param(name: &str, description: &str, example: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(description))
        .schema(Some(string_schema()))
        .example(Some(json!(example)))
        .build()
}

fn header_param(name: &str, description: &str, max_length: Option<usize>) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(description))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(max_length),
        ))
        .build()
}

/// The text protocols and endpoint families, from the protocol table: one
/// operation per route, and per action on a Gemini `{model}:{action}` route.
fn text_operations(b: &mut Builder) {
    for p in protocol::ALL {
        for route in p.routes {
            if route.contains("{model_action}") {
                for action in p.actions() {
                    let path = route.replace("{model_action}", &format!("{{model}}:{action}"));
                    if let Some(op) = text_op(b, p, path, Some(action)) {
                        b.add(op);
                    }
                }
            } else {
                if let Some(op) = text_op(b, p, route.to_string(), None) {
                    b.add(op);
                }
            }
        }
    }
}

/// A streamable text protocol's operation: JSON, or with `"stream": true`
/// server-sent events.
fn streamable(
    p: &ClientProtocol,
    path: String,
    summary: &'static str,
    (req, res): (RefOr<Schema>, RefOr<Schema>),
    answer: &'static str,
    event: &str,
) -> Op {
    Op::new(HttpMethod::Post, path, "chat", summary)
        .json_body(req)
        .errors(&CALL_ERRORS)
        .describe(format!(
            "With `\"stream\": true` the answer is `text/event-stream` in the protocol's own \
             shape; a stream that fails after it began ends with the protocol's error event. \
             Client protocol `{}`.",
            p.name
        ))
        .ok(
            200,
            answer,
            vec![("application/json", res), ("text/event-stream", sse(event))],
        )
}

/// The operation of one client protocol's route (none for a protocol no
/// client speaks: the video task API is the adapters' side only; the test
/// of the document fails if such a row ever gets a route).
fn text_op(b: &mut Builder, p: &ClientProtocol, path: String, action: Option<&str>) -> Option<Op> {
    let op = match p.protocol {
        Protocol::VideoTasks => return None,
        Protocol::OpenaiChat => {
            b.schema::<ChatCompletionChunk>();
            let schemas = (
                b.schema::<ChatCompletionRequest>(),
                b.schema::<ChatCompletion>(),
            );
            streamable(
                p,
                path,
                "Chat completion (OpenAI)",
                schemas,
                "The completion, or its stream (ending `data: [DONE]`)",
                "ChatCompletionChunk",
            )
        }
        Protocol::OpenaiCompletions => {
            let schemas = (b.schema::<CompletionRequest>(), b.schema::<Completion>());
            streamable(
                p,
                path,
                "Legacy text completion (OpenAI)",
                schemas,
                "The completion, or its stream (ending `data: [DONE]`)",
                "Completion",
            )
        }
        Protocol::OpenaiResponses => {
            let schemas = (b.schema::<ResponsesRequest>(), b.schema::<ResponseObject>());
            streamable(
                p,
                path,
                "Responses (OpenAI)",
                schemas,
                "The response, or its events (`response.created` ... `response.completed`)",
                "response.* event",
            )
        }
        Protocol::AnthropicMessages => {
            let schemas = (
                b.schema::<MessagesRequest>(),
                b.schema::<MessagesResponse>(),
            );
            streamable(
                p,
                path,
                "Messages (Anthropic)",
                schemas,
                "The message, or its stream (`event:` lines; errors as `event: error`)",
                "Anthropic stream event",
            )
            .param(header_param(
                "anthropic-version",
                "Any version is accepted",
                None,
            ))
        }
        Protocol::Gemini => {
            let stream = action == Some("streamGenerateContent");
            let req = b.schema::<GenerateContentRequest>();
            let res = b.schema::<GenerateContentResponse>();
            let mut op = Op::new(
                HttpMethod::Post,
                path,
                "chat",
                if stream {
                    "Stream generated content (Gemini)"
                } else {
                    "Generate content (Gemini)"
                },
            )
            .json_body(req)
            .errors(&CALL_ERRORS)
            .param(path_param("model", "The model", "gemini-2.5-flash"));
            if stream {
                op = op
                    .param(
                        ParameterBuilder::new()
                            .name("alt")
                            .parameter_in(ParameterIn::Query)
                            .required(Required::True)
                            .description(Some("Streams are served as server-sent events only"))
                            .schema(Some(
                                ObjectBuilder::new()
                                    .schema_type(Type::String)
                                    .enum_values(Some(["sse"])),
                            ))
                            .build(),
                    )
                    .ok(
                        200,
                        "`data:` events, each a GenerateContentResponse (no `[DONE]`)",
                        vec![("text/event-stream", sse("GenerateContentResponse"))],
                    );
            } else {
                op = op.ok_json(res);
            }
            op
        }
        Protocol::GeminiEmbeddings => {
            let batch = action == Some("batchEmbedContents");
            let (req, res) = if batch {
                (
                    b.schema::<BatchEmbedContentsRequest>(),
                    b.schema::<BatchEmbedContentsResponse>(),
                )
            } else {
                (
                    b.schema::<EmbedContentRequest>(),
                    b.schema::<EmbedContentResponse>(),
                )
            };
            Op::new(
                HttpMethod::Post,
                path,
                "families",
                if batch {
                    "Embed a batch (Gemini)"
                } else {
                    "Embed content (Gemini)"
                },
            )
            .json_body(req)
            .ok_json(res)
            .errors(&CALL_ERRORS)
            .param(path_param("model", "The model", "gemini-embedding-001"))
        }
        Protocol::Embeddings => family(
            b,
            path,
            "Embeddings",
            b_schema::<EmbeddingsRequest>,
            b_schema::<EmbeddingsResponse>,
        ),
        Protocol::Images => family(
            b,
            path,
            "Image generation",
            b_schema::<ImageRequest>,
            b_schema::<ImagesResponse>,
        ),
        Protocol::Rerank => family(
            b,
            path,
            "Rerank",
            b_schema::<RerankRequest>,
            b_schema::<RerankResponse>,
        ),
        Protocol::Moderation => family(
            b,
            path,
            "Moderation",
            b_schema::<ModerationRequest>,
            b_schema::<ModerationResponse>,
        ),
        Protocol::Speech => {
            let req = b.schema::<SpeechRequest>();
            Op::new(HttpMethod::Post, path, "families", "Speech synthesis")
                .json_body(req)
                .errors(&CALL_ERRORS)
                .ok(
                    200,
                    "The audio, in the `response_format`'s content type, relayed as it comes",
                    vec![
                        ("audio/*", binary_schema()),
                        ("application/octet-stream", binary_schema()),
                    ],
                )
        }
        Protocol::Transcription => {
            let req = b.schema::<TranscriptionRequest>();
            let res = b.schema::<Transcription>();
            let mut op = Op::new(HttpMethod::Post, path, "families", "Speech transcription")
                .errors(&CALL_ERRORS)
                .ok(
                    200,
                    "`json` / `verbose_json` as JSON; `text`, `srt`, `vtt` as text",
                    vec![("application/json", res), ("text/plain", string_schema())],
                );
            op.body = Some(vec![("multipart/form-data", req)]);
            op
        }
    };
    Some(op)
}

fn b_schema<T: ToSchema>(b: &mut Builder) -> RefOr<Schema> {
    b.schema::<T>()
}

/// An OpenAI-style family: JSON in, JSON out.
fn family(
    b: &mut Builder,
    path: String,
    summary: &'static str,
    req: fn(&mut Builder) -> RefOr<Schema>,
    res: fn(&mut Builder) -> RefOr<Schema>,
) -> Op {
    let (req, res) = (req(b), res(b));
    Op::new(HttpMethod::Post, path, "families", summary)
        .json_body(req)
        .ok_json(res)
        .errors(&CALL_ERRORS)
}

/// Models, videos, dashboards and this document.
fn other_operations(b: &mut Builder) {
    let s = b.schema::<ModelList>();
    b.add(
        Op::new(
            HttpMethod::Get,
            "/v1/models",
            "models",
            "List the enabled models",
        )
        .ok_json(s),
    );
    let s = b.schema::<Model>();
    b.add(
        Op::new(
            HttpMethod::Get,
            "/v1/models/{model}",
            "models",
            "Retrieve a model",
        )
        .param(path_param("model", "The model", "gpt-4o-mini"))
        .ok_json(s),
    );
    let s = b.schema::<GeminiModelList>();
    b.add(
        Op::new(
            HttpMethod::Get,
            "/v1beta/models",
            "models",
            "List the text models (Gemini)",
        )
        .ok_json(s),
    );
    let s = b.schema::<GeminiModel>();
    b.add(
        Op::new(
            HttpMethod::Get,
            "/v1beta/models/{model}",
            "models",
            "Retrieve a text model (Gemini)",
        )
        .param(path_param(
            "model",
            "The model, with or without `models/`",
            "gemini-2.5-flash",
        ))
        .ok_json(s),
    );

    let s = b.schema::<CapabilityList>();
    b.add(
        Op::new(
            HttpMethod::Get,
            "/v1/capabilities",
            "videos",
            "Each video model's durations and resolutions",
        )
        .ok_json(s),
    );
    let (req, res) = (b.schema::<VideoQuoteRequest>(), b.schema::<QuoteView>());
    let mut op = Op::new(
        HttpMethod::Post,
        "/v1/videos/quote",
        "videos",
        "Quote a video's price (valid 30 minutes, one use)",
    )
    .json_body(req.clone())
    .ok_json(res);
    op.body = Some(vec![
        ("application/json", req),
        ("multipart/form-data", b.schema::<VideoQuoteRequest>()),
    ]);
    op.video_validation = true;
    b.add(op);

    let (req, res) = (
        b.schema::<VideoCreateRequest>(),
        b.schema::<VideoTaskView>(),
    );
    let mut op = Op::new(
        HttpMethod::Post,
        "/v1/videos",
        "videos",
        "Submit a video task",
    )
    .describe(
        "The full price is held and the task comes back `queued` at once. The same \
             Idempotency-Key with the same body within 24 hours replays the first answer \
             (`Idempotency-Replayed: true`); with another body it is 409.",
    )
    .ok_json(res)
    .errors(&[402, 409, 410])
    .param(header_param(
        "Idempotency-Key",
        "The caller's business key",
        Some(200),
    ))
    .param(header_param(
        "X-Webhook-Url",
        "Alternative to the body's `webhook_url`",
        None,
    ))
    .param(header_param(
        "X-Webhook-Secret",
        "The secret for a URL given by header",
        None,
    ));
    op.body = Some(vec![
        ("application/json", req.clone()),
        ("multipart/form-data", req),
    ]);
    op.video_validation = true;
    b.add(op);

    let s = b.schema::<VideoTaskView>();
    b.add(
        Op::new(
            HttpMethod::Get,
            "/v1/videos/{id}",
            "videos",
            "A task's status and billing (free)",
        )
        .param(path_param("id", "The task id", "task_x"))
        .ok_json(s),
    );
    b.add(
        Op::new(
            HttpMethod::Get,
            "/v1/videos/{id}/content",
            "videos",
            "Download the MP4",
        )
        .describe("For 24 hours after completion, at most 100 times; `Range` works.")
        .param(path_param("id", "The task id", "task_x"))
        .param(header_param("Range", "A byte range (`bytes=0-1023`)", None))
        .ok(200, "The video", vec![("video/mp4", binary_schema())])
        .ok(
            206,
            "Part of the video",
            vec![("video/mp4", binary_schema())],
        )
        .errors(&[410, 416, 502, 504]),
    );
    b.add(
        Op::new(
            HttpMethod::Post,
            "/v1/videos/{id}/cancel",
            "videos",
            "Cancel a task: not offered by the upstream",
        )
        .param(path_param("id", "The task id", "task_x"))
        .errors(&[501]),
    );

    let s = b.schema::<Subscription>();
    b.add(
        Op::new(
            HttpMethod::Get,
            "/v1/dashboard/billing/subscription",
            "billing",
            "Spending limits (CNY)",
        )
        .ok_json(s),
    );
    let s = b.schema::<UsageTotal>();
    let mut op = Op::new(
        HttpMethod::Get,
        "/v1/dashboard/billing/usage",
        "billing",
        "Spending in hundredths of a CNY",
    )
    .ok_json(s);
    op.params
        .extend(UsageRange::into_params(|| Some(ParameterIn::Query)));
    b.add(op);

    let mut op = Op::new(
        HttpMethod::Get,
        PATH,
        "meta",
        "This document (no token needed)",
    )
    .ok(
        200,
        "The OpenAPI 3.1 document",
        vec![(
            "application/json",
            ObjectBuilder::new().schema_type(Type::Object).into(),
        )],
    );
    op.authenticated = false;
    b.add(op);
}
