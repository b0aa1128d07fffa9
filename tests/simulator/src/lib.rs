//! A deterministic fake of three AI vendors: OpenAI (chat completions),
//! Anthropic (Messages) and Gemini (generateContent), answering from one
//! protocol-neutral plan; plus OpenAI-style embeddings, images, speech,
//! transcription, rerank and moderation, Gemini embeddings, and a video
//! task API.
//!
//! Used in-process by the gateway's end-to-end tests (through [`start`]) and
//! as a process by the demo and SDK tests (the `upstream-sim` binary).
//!
//! Vendor routes (the answer rules, shared by the three chat protocols, are
//! documented in `src/chat/mod.rs`, each protocol's wire details beside it):
//! - OpenAI: `GET /v1/models`, `POST /v1/chat/completions`
//!   (`src/chat/openai/`).
//! - Anthropic: `POST /v1/messages` (`src/chat/anthropic.rs`); needs an
//!   `anthropic-version` header and `max_tokens`.
//! - Gemini: `POST /v1beta/models/{model}:generateContent` and
//!   `POST /v1beta/models/{model}:streamGenerateContent` (SSE with
//!   `?alt=sse`, else one JSON array) (`src/chat/gemini.rs`); snake_case
//!   and camelCase keys alike.
//! - The video task API `POST /v1/video/tasks`, `GET /v1/video/tasks/{id}`,
//!   `GET /v1/video/tasks/{id}/content` (documented in `src/video/mod.rs`;
//!   its pace is [`SimOptions::video`]).
//!
//! The other endpoints, each one non-streamed call (the shared rules —
//! tokens, directives, faults, records — are in `src/families/mod.rs`,
//! each endpoint's own in its module):
//! - `POST /v1/embeddings` (`src/families/embeddings.rs`): unit vectors
//!   ([`embedding_vector`]) seeded by FNV-1a of each input, 1536 long unless
//!   `dimensions`, float or base64; usage = the inputs' words (or ids).
//! - `POST /v1beta/models/{model}:embedContent` and `:batchEmbedContents`
//!   (`src/families/gemini_embed.rs`): the same vectors, 3072 long unless
//!   `outputDimensionality`; no usage.
//! - `POST /v1/images/generations` (`src/families/images.rs`): real PNGs
//!   of the requested size / 16, a gradient coloured from FNV-1a of the
//!   prompt; as `b64_json` or as links `GET /v1/images/files/{id}.png`
//!   (no key needed, no state kept).
//! - `POST /v1/audio/speech` (`src/families/audio/`): real silent mp3, opus
//!   (Ogg), aac (ADTS), flac, wav or pcm lasting max(0.5 s, 60 ms per
//!   character) / speed.
//! - `POST /v1/audio/transcriptions` (`src/families/audio/transcribe.rs`):
//!   multipart, read as a stream (up to 128 MiB, never kept in memory nor in
//!   the record, which holds a summary of the form instead); "Simulated
//!   transcription of S seconds of audio." in json, text, srt, vtt or
//!   verbose_json, S exact for WAV, else size / 16 000 bytes per second.
//! - `POST /v1/rerank` (`src/families/rerank.rs`): Jina / Cohere shape;
//!   score ([`rerank_score`]) = 0.99 × query-word overlap + a hash
//!   tie-breaker below 0.01.
//! - `POST /v1/moderations` (`src/families/moderation.rs`): every OpenAI
//!   category; flagged by `[[sim:flag]]` / `[[sim:flag=CATEGORY]]` or the
//!   word `violence` (score 0.9).
//!
//! Auth: when [`SimOptions::api_key`] is set, each vendor's routes need the
//! key in that vendor's scheme — `x-api-key: <key>` on `/v1/messages` (a
//! bearer token is refused there), `x-goog-api-key: <key>` or `?key=<key>`
//! under `/v1beta/`, `Authorization: Bearer <key>` on every other `/v1/...`
//! route — else 401 (Gemini: 400 `INVALID_ARGUMENT`, as Gemini answers a
//! bad key). Errors come in the vendor's own envelope: OpenAI
//! `{"error":{message,type,param,code}}`, Anthropic
//! `{"type":"error","error":{type,message}}`, Gemini
//! `{"error":{code,message,status}}` (see `src/errors.rs` for the status
//! words); every 429 carries `retry-after: 7`, every 503
//! `retry-after-ms: 2500`.
//!
//! Control routes (no auth, not recorded):
//! - `GET /_sim/requests`: JSON array of `{method, path, headers: {name:
//!   value}, body, usage}` (`body_base64` instead of `body` when not UTF-8;
//!   a transcription upload's body is a JSON summary of its form);
//!   `usage` is what the answer reported, in the vendor's shape (OpenAI
//!   `usage`, Anthropic's final `usage`, Gemini `usageMetadata`; the
//!   `usage` of embeddings, rerank and json transcriptions), or null
//!   (errors, faults, OpenAI streams without `include_usage`, answers still
//!   in flight, endpoints that report none).
//!   The newest 10,000 are kept ([`SimOptions::keep_requests`],
//!   `--keep-requests N`; 0 keeps none, as the benchmark's mock does).
//! - `DELETE /_sim/requests`: forget them.
//! - `GET /_sim/mail`, `DELETE /_sim/mail`: what the SMTP sink received
//!   (`src/mail.rs`; started by [`SimServer::start_smtp`] or `--smtp-listen`).
//! - `POST /_sim/faults`: queue a fault, `{"fault": "status", "status": 429,
//!   "count": 1}`; `fault` is one of `status` (`status` may also be
//!   `"429-quota"`), `quota`, `hang`, `latency` (with `ms`), `malformed`,
//!   `cut`, `truncate`, `error_event` (a 200 stream that reports an error
//!   instead of the answer: OpenAI a role chunk then `{"error": ...}`,
//!   Anthropic `message_start` then `overloaded_error`), `error_midway`
//!   (below); `count` defaults to 1. `DELETE /_sim/faults` empties the
//!   queue.
//!
//! Directives, anywhere in the last user message, removed from the text
//! before the reply is computed; several may be combined, also as
//! comma-separated items of one directive (`[[sim:crlf,fragment]]`). They
//! work in all three protocols, each answering in its own error envelope
//! and stream format:
//! - `[[sim:status=NNN]]`: that status with the vendor's error body;
//!   `[[sim:status=429-quota]]` (and the `quota` fault): out of money —
//!   OpenAI 429 with code `insufficient_quota`, Anthropic 400
//!   `invalid_request_error` "Your credit balance is too low to access the
//!   Anthropic API.", Gemini 429 `RESOURCE_EXHAUSTED` about the quota.
//! - `[[sim:hang]]`: never answer (until shutdown).
//! - `[[sim:latency_ms=N]]`: wait N ms, then answer (combines with others).
//! - `[[sim:malformed]]`: 200 with a truncated JSON body, or for streams a
//!   `{not json` event (OpenAI then `[DONE]`, Anthropic as `message_start`
//!   then `message_stop`, Gemini alone).
//! - `[[sim:cut]]`: abort the connection mid-body (non-streamed: after half
//!   the JSON; streamed: after the first event and three more).
//! - `[[sim:truncate]]`: a stream that ends cleanly after the first event and
//!   three more, without the protocol's finish marker; non-streamed answers
//!   are normal.
//! - `[[sim:error_midway]]`: a stream that reports an error after its text:
//!   all of its deltas, then the protocol's error event (OpenAI `{"error":
//!   ...}`, Anthropic `overloaded_error`, Gemini a chunk with `error`) in
//!   place of its finish marker and usage, and the body's end; no usage is
//!   recorded. Non-streamed answers are normal; chat only.
//! - `[[sim:parallel]]`: one tool call per declared tool.
//! - `[[sim:refuse]]`: a content refusal (OpenAI `content_filter`,
//!   Anthropic `refusal`, Gemini `SAFETY`).
//! - `[[sim:finish=RAW]]`: the usual answer with finish reason RAW verbatim.
//! - `[[sim:crlf]]`, `[[sim:fragment]]`, `[[sim:comments]]`: stream with
//!   CRLF line ends / every event split into 3 body chunks / `: keep-alive`
//!   comments between events (not for Gemini, which never sends comments).
//! - `[[sim:whole]]`: a stream sent as one body with its length, in one
//!   write, as a vendor whose events all come with the stream's end (not
//!   with `cut`, which needs the chunks).
//! - `[[sim:chunk_delay_ms=N]]`: pause N ms between streamed body chunks.
//! - `[[sim:delta_delay_ms=N]]`: a paced stream that starts at once: the
//!   opening events (OpenAI the role chunk; Anthropic `message_start`,
//!   `ping`, `content_block_start`) and the first delta without a pause,
//!   then N ms before each further event up to the finish marker, which
//!   follows the last delta without one. Time to first token is then the
//!   server's own; `make bench`'s streamed test asks
//!   `[[sim:words=64,delta_delay_ms=20]]` (OpenAI: a role chunk, 64 deltas
//!   20 ms apart, the finish chunk and `[DONE]`). Other pieces keep
//!   `chunk_delay_ms` when both are given.
//! - `[[sim:words=N]]`: a reply of N words (at most 1,000,000) instead of
//!   16 to 31, for long streams.
//! - `[[sim:silent]]`: an OpenAI-style server that never reports usage: no
//!   `usage` in the answer, and no usage chunk (nor `usage` members) in the
//!   stream, whatever `stream_options.include_usage` says. The other
//!   dialects ignore it.
//!
//! The other endpoints (embeddings, images, audio, rerank, moderation)
//! read the fault directives `status`, `hang`, `latency_ms`, `malformed`
//! and `cut` from their text inputs (see `src/families/mod.rs`);
//! moderation adds `flag`. The video API has its own directives.
//!
//! A queued fault is consumed by the next valid request to a chat endpoint
//! (of any protocol) or one of the other non-video endpoints, and replaces
//! any fault or latency directive of that request (framing directives
//! stay).

mod auth;
mod chat;
mod control;
mod errors;
mod families;
mod faults;
pub mod mail;
mod models;
mod record;
mod sse;
mod tokens;
mod video;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::extract::{DefaultBodyLimit, OriginalUri, Path, RawQuery, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::serve::ListenerExt as _;
use axum::{middleware, Router};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use chat::anthropic::signature as anthropic_signature;
pub use chat::gemini::signature as gemini_signature;
pub use families::embeddings::vector as embedding_vector;
pub use families::rerank::score as rerank_score;
pub use faults::Fault;
pub use record::Recorded;
pub use video::VideoSpeed;

/// How the simulator behaves.
#[derive(Clone, Debug, Default)]
pub struct SimOptions {
    /// When set, vendor requests must carry this key in their vendor's
    /// scheme (`Authorization: Bearer`, `x-api-key`, `x-goog-api-key` or
    /// `?key=`).
    pub api_key: Option<String>,
    /// How video tasks progress; by default three polls to success.
    pub video: VideoSpeed,
    /// How many of the newest requests `GET /_sim/requests` keeps; `None`
    /// keeps 10,000, 0 keeps none. The benchmark's mock keeps none: with ten
    /// thousand kept (a score of allocations each, the oldest freed and a
    /// new one made for every call), the simulator gave its first token
    /// about 300 µs later after a million calls than when fresh.
    pub keep_requests: Option<usize>,
}

/// Shared by every handler of one server.
pub(crate) struct SimState {
    api_key: Option<String>,
    /// `http://IP:PORT` of this server, for links when a request has no
    /// `Host`.
    root: String,
    recorder: record::Recorder,
    faults: faults::FaultQueue,
    shutdown: CancellationToken,
    chat_ids: AtomicU64,
    video: video::VideoState,
    mailbox: mail::Mailbox,
}

impl SimState {
    fn next_chat_id(&self) -> u64 {
        self.chat_ids.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Sleeps unless the server shuts down first; false in that case.
    async fn wait(&self, d: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(d) => true,
            _ = self.shutdown.cancelled() => false,
        }
    }
}

/// A running simulator. Dropping it stops the server too, but only
/// [`SimServer::shutdown`] waits for that to finish.
pub struct SimServer {
    addr: SocketAddr,
    state: Arc<SimState>,
    task: Option<JoinHandle<()>>,
}

/// Binds `addr` (port 0 picks a free port) and serves in the background.
pub async fn start(addr: SocketAddr, opts: SimOptions) -> anyhow::Result<SimServer> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the simulator to {addr}"))?;
    let addr = listener.local_addr()?;
    let state = Arc::new(SimState {
        api_key: opts.api_key,
        root: root_url(addr),
        recorder: record::Recorder::new(opts.keep_requests.unwrap_or(record::MAX_RECORDED)),
        faults: faults::FaultQueue::default(),
        shutdown: CancellationToken::new(),
        chat_ids: AtomicU64::new(0),
        video: video::VideoState::new(opts.video),
        mailbox: mail::Mailbox::default(),
    });
    let app = router(state.clone());
    // Without NODELAY, Nagle would merge the small SSE writes that the
    // gateway's framing tests need to arrive separately.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("set_nodelay failed: {e}");
        }
    });
    let stop = state.shutdown.clone();
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::error!("simulator server failed: {e}");
        }
    });
    Ok(SimServer {
        addr,
        state,
        task: Some(task),
    })
}

fn router(state: Arc<SimState>) -> Router {
    let vendor = Router::new()
        .route("/v1/models", get(models::list))
        .route("/v1/chat/completions", post(chat::openai::completions))
        .route("/v1/messages", post(chat::anthropic::messages))
        .route("/v1beta/models/{model_action}", post(gemini_models))
        .route("/v1/embeddings", post(families::embeddings::create))
        .route("/v1/images/generations", post(families::images::generate))
        .route("/v1/images/files/{file}", get(families::images::file))
        .route("/v1/audio/speech", post(families::audio::speech))
        .route(
            "/v1/audio/transcriptions",
            post(families::audio::transcribe::transcribe)
                .layer(DefaultBodyLimit::max(record::MAX_UPLOAD)),
        )
        .route("/v1/rerank", post(families::rerank::rerank))
        .route("/v1/moderations", post(families::moderation::moderate))
        .route("/v1/video/tasks", post(video::submit))
        .route("/v1/video/tasks/{id}", get(video::poll))
        .route("/v1/video/tasks/{id}/content", get(video::content))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_key,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            record::record,
        ));
    control::routes()
        .merge(vendor)
        .layer(DefaultBodyLimit::max(record::MAX_BODY))
        .with_state(state)
}

/// `POST /v1beta/models/{model}:{action}`: the embedding actions, else
/// the chat ones (which answer 404 to anything else).
async fn gemini_models(
    State(state): State<Arc<SimState>>,
    Path(model_action): Path<String>,
    query: RawQuery,
    body: bytes::Bytes,
) -> axum::response::Response {
    match model_action.rsplit_once(':') {
        Some((model, "embedContent")) => {
            families::gemini_embed::embed(state, model, &body, false).await
        }
        Some((model, "batchEmbedContents")) => {
            families::gemini_embed::embed(state, model, &body, true).await
        }
        _ => chat::gemini::generate(State(state), Path(model_action), query, body).await,
    }
}

/// `http://IP:PORT` for `addr`, a wildcard address shown as loopback.
fn root_url(mut addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("http://{addr}")
}

async fn not_found(OriginalUri(uri): OriginalUri) -> axum::response::Response {
    errors::ApiError::not_found(uri.path())
        .in_dialect(errors::Dialect::for_path(uri.path()))
        .into_response()
}

impl SimServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://IP:PORT`, the root the Gemini API lives under.
    pub fn root_url(&self) -> String {
        self.base_url().trim_end_matches("/v1").to_owned()
    }

    /// `http://IP:PORT/v1`, with a wildcard bind address shown as loopback.
    pub fn base_url(&self) -> String {
        format!("{}/v1", root_url(self.addr))
    }

    /// Every request received (rejected ones too), oldest first; only the
    /// newest 10 000 are kept.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.recorder.snapshot()
    }

    pub fn clear_requests(&self) {
        self.state.recorder.clear();
    }

    /// The next `count` chat requests (or embeddings, images, audio, rerank
    /// or moderation requests) get `fault` (after earlier queued ones).
    pub fn push_fault(&self, fault: Fault, count: usize) {
        self.state.faults.push(fault, count);
    }

    /// Starts the SMTP sink (`mail`) on `addr` (port 0: a free port); what
    /// it receives shows at `GET /_sim/mail` and in [`SimServer::mail`].
    /// Its threads live until the process ends.
    pub fn start_smtp(&self, addr: SocketAddr) -> anyhow::Result<SocketAddr> {
        mail::serve(addr, self.state.mailbox.clone())
    }

    /// Mail the SMTP sink received, oldest first.
    pub fn mail(&self) -> Vec<mail::Mail> {
        self.state.mailbox.snapshot()
    }

    /// Video tasks created since the server started.
    pub fn video_task_count(&self) -> usize {
        self.state.video.task_count()
    }

    /// Video content downloads answered with the file (200 or 206).
    pub fn video_content_fetches(&self) -> usize {
        self.state.video.content_fetches()
    }

    /// Drops every queued fault.
    pub fn clear_faults(&self) {
        self.state.faults.clear();
    }

    /// Stops accepting, ends hanging and delayed answers, and waits (bounded)
    /// for open connections to close.
    pub async fn shutdown(mut self) {
        self.state.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(3), task)
                .await
                .is_err()
            {
                tracing::warn!("simulator connections did not close in time; aborting");
                abort.abort();
            }
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
    }
}
