//! The gateway's one TOML config file: parsed, validated and resolved here, so
//! the rest of the host only sees checked values (quota units, resolved
//! secrets, absolute paths). Every validation error names the field it is
//! about, and `gateway serve` exits non-zero with it.
//!
//! `gateway.example.toml` at the repository root documents every key.

use crate::billing::meters::MeterPrices;
use crate::billing::money::{Currency, Quota};
use axum::http::uri::{Authority, Scheme};
use ipnet::IpNet;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config field `{field}`: {message}")]
    Invalid { field: String, message: String },
}

/// A vendor key the gateway can send in a request header: no newline or
/// other control character (checked here, not when the first call fails).
fn sendable(field: &str, key: String) -> Result<String, ConfigError> {
    if axum::http::HeaderValue::from_str(&key).is_err() {
        return Err(invalid(
            field,
            "cannot be sent in an HTTP header (it has a newline or another control character)",
        ));
    }
    Ok(key)
}

pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

// ---------------------------------------------------------------------------
// The file as written.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    listen: String,
    data_dir: PathBuf,
    adapters_dir: PathBuf,
    #[serde(default)]
    policies_dir: Option<PathBuf>,
    #[serde(default)]
    trusted_proxies: Vec<String>,
    /// Threads of the async runtime that serves every request; absent: one
    /// per core.
    #[serde(default)]
    worker_threads: Option<u64>,
    admin: RawAdmin,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    plugins: RawPlugins,
    #[serde(default)]
    billing: RawBilling,
    #[serde(default)]
    video: RawVideo,
    #[serde(default)]
    webhooks: RawWebhooks,
    #[serde(default)]
    retention: RawRetention,
    #[serde(default)]
    health: RawHealth,
    #[serde(default)]
    testing: RawTesting,
    /// The web console (`console`); none without the section.
    #[serde(default)]
    console: Option<crate::console::config::RawConsole>,
    #[serde(default)]
    tracing: RawTracing,
    #[serde(default)]
    metrics: RawMetrics,
    #[serde(default)]
    channels: Vec<RawChannel>,
    #[serde(default)]
    models: Vec<RawModel>,
    #[serde(default)]
    video_models: Vec<RawVideoModel>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdmin {
    listen: String,
    key: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawLimits {
    max_body_bytes: u64,
    stream_idle_timeout_secs: u64,
    upstream_timeout_secs: u64,
    connect_timeout_secs: u64,
    rate_limit_requests: u32,
    rate_limit_window_secs: u64,
    ipv6_prefix_len: u8,
    group_concurrency: BTreeMap<String, u32>,
    header_read_timeout_secs: u64,
    keepalive_idle_timeout_secs: u64,
    body_idle_timeout_secs: u64,
    write_timeout_secs: u64,
    max_header_bytes: u64,
    max_connections: u64,
    max_connections_per_ip: u64,
    max_buffered_body_bytes: u64,
}

impl Default for RawLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: 128 * 1024 * 1024,
            stream_idle_timeout_secs: 300,
            upstream_timeout_secs: 600,
            connect_timeout_secs: 10,
            rate_limit_requests: 360,
            rate_limit_window_secs: 180,
            ipv6_prefix_len: 64,
            group_concurrency: BTreeMap::new(),
            header_read_timeout_secs: 10,
            keepalive_idle_timeout_secs: 60,
            body_idle_timeout_secs: 30,
            write_timeout_secs: 60,
            max_header_bytes: 64 * 1024,
            max_connections: 8192,
            max_connections_per_ip: 256,
            max_buffered_body_bytes: 1024 * 1024 * 1024,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawPlugins {
    call_timeout_ms: u64,
    max_memory_mib: u64,
    epoch_tick_ms: u64,
    max_instances: u32,
    warm_instances: u32,
    reload_interval_secs: u64,
}

impl Default for RawPlugins {
    fn default() -> Self {
        Self {
            call_timeout_ms: 200,
            max_memory_mib: 64,
            epoch_tick_ms: 10,
            max_instances: 1000,
            warm_instances: 4,
            reload_interval_secs: 2,
        }
    }
}

/// A CNY amount written either as a TOML string (`"1.40"`, exact) or a number.
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
enum Cny {
    Text(String),
    Int(i64),
    Float(f64),
}

impl Cny {
    fn to_quota(&self, currency: &Currency, field: &str) -> Result<Quota, ConfigError> {
        let text = match self {
            Cny::Text(s) => s.clone(),
            Cny::Int(i) => i.to_string(),
            // `{}` prints the shortest text that reads back as the same f64,
            // which is what the user typed for any sane price.
            Cny::Float(f) => format!("{f}"),
        };
        currency
            .parse_cny(&text)
            .map_err(|e| invalid(field, e.to_string()))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawBilling {
    quota_per_cny: i64,
    trial_credit_cny: Cny,
    /// Completion tokens reserved for a chat call that names no `max_tokens`.
    default_max_tokens: u64,
    /// When a money change counts as stored: `batched` (written to the OS,
    /// fsync every 10 ms) or `always` (fsync before acknowledging).
    wal_sync: crate::store::wal::WalSync,
}

impl Default for RawBilling {
    fn default() -> Self {
        Self {
            quota_per_cny: 500_000,
            trial_credit_cny: Cny::Int(5),
            default_max_tokens: 4096,
            wal_sync: crate::store::wal::WalSync::Batched,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawVideo {
    poll_interval_secs: u64,
    poll_max_backoff_secs: u64,
    poll_after_ms: u64,
    task_expiry_secs: i64,
    download_window_secs: i64,
    max_downloads: u32,
    quote_validity_secs: i64,
    idempotency_window_secs: i64,
    max_unfinished_per_account: u32,
    daily_budget_cny: Cny,
    content_timeout_secs: u64,
    /// How often the poller looks for due tasks (real time).
    poller_tick_ms: u64,
    /// Turns off every model whose name ends in `-test`.
    disable_test_models: bool,
}

impl Default for RawVideo {
    fn default() -> Self {
        Self {
            poll_interval_secs: 5,
            poll_max_backoff_secs: 60,
            poll_after_ms: 15_000,
            task_expiry_secs: 6 * 3600,
            download_window_secs: 24 * 3600,
            max_downloads: 100,
            quote_validity_secs: 30 * 60,
            idempotency_window_secs: 24 * 3600,
            max_unfinished_per_account: 20,
            daily_budget_cny: Cny::Int(500),
            content_timeout_secs: 30,
            poller_tick_ms: 1000,
            disable_test_models: false,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawWebhooks {
    allow_private_targets: bool,
    timeout_secs: u64,
    max_concurrent: usize,
    retry_schedule_secs: Vec<i64>,
    /// How often the dispatcher looks for due deliveries (real time).
    dispatch_tick_ms: u64,
}

impl Default for RawWebhooks {
    fn default() -> Self {
        Self {
            allow_private_targets: false,
            timeout_secs: 10,
            max_concurrent: 16,
            retry_schedule_secs: vec![30, 120, 600, 3600, 6 * 3600, 24 * 3600],
            dispatch_tick_ms: 1000,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawRetention {
    quotes_after_expiry_secs: u64,
    delivered_events_secs: u64,
    dead_events_secs: u64,
    sweep_every_secs: u64,
    sweep_batch: usize,
}

impl Default for RawRetention {
    fn default() -> Self {
        Self {
            quotes_after_expiry_secs: 24 * 3600,
            delivered_events_secs: 7 * 24 * 3600,
            dead_events_secs: 30 * 24 * 3600,
            sweep_every_secs: 300,
            sweep_batch: 500,
        }
    }
}

/// Channel health (`relay::health`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawHealth {
    /// Consecutive retryable failures that send a channel to rest.
    failures_to_rest: u32,
    /// How long a channel rests before one call probes it.
    rest_secs: u64,
    /// Attempts per channel kept for the error rate and latency shown.
    window: usize,
}

impl Default for RawHealth {
    fn default() -> Self {
        Self {
            failures_to_rest: 3,
            rest_secs: 30,
            window: 100,
        }
    }
}

/// OpenTelemetry traces (`telemetry`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawTracing {
    /// The OTLP/HTTP collector (`http://host:4318`); absent = no traces.
    otlp_endpoint: Option<String>,
    service_name: String,
}

impl Default for RawTracing {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            service_name: "gateway".into(),
        }
    }
}

/// `GET /metrics` on the admin listener (`metrics`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawMetrics {
    /// Scrapes present the admin key as a bearer token.
    require_admin_key: bool,
}

impl Default for RawMetrics {
    fn default() -> Self {
        Self {
            require_admin_key: true,
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawTesting {
    /// Start the clock at this Unix time and let the admin API move it.
    manual_clock: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChannel {
    name: String,
    adapter: String,
    base_url: String,
    #[serde(default)]
    key: Option<String>,
    models: Vec<String>,
    #[serde(default)]
    model_map: BTreeMap<String, String>,
    /// Adapter options handed to the channel's adapter (an API version, a
    /// region); what they mean is the adapter's business.
    #[serde(default)]
    options: BTreeMap<String, String>,
    #[serde(default)]
    priority: i32,
    /// Share of the calls among channels of the same priority.
    #[serde(default = "one")]
    weight: u32,
    #[serde(default = "yes")]
    enabled: bool,
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    name: String,
    #[serde(default = "default_owner")]
    owned_by: String,
    /// CNY per 1M prompt tokens.
    input_price: Cny,
    /// CNY per 1M completion tokens (reasoning tokens included).
    output_price: Cny,
    /// CNY per 1M cached prompt tokens; defaults to the input price.
    #[serde(default)]
    cached_input_price: Option<Cny>,
    /// CNY per 1M prompt tokens written to the vendor's cache; defaults to
    /// the input price.
    #[serde(default)]
    cache_write_price: Option<Cny>,
    #[serde(default)]
    default_max_tokens: Option<u64>,
    /// CNY per generated image, any size and quality.
    #[serde(default)]
    image_price: Option<Cny>,
    /// CNY per generated image by `SIZE/QUALITY` (`"1024x1024/hd"`) or
    /// `SIZE`; overrides `image_price`.
    #[serde(default)]
    image_prices: BTreeMap<String, Cny>,
    /// CNY per 1M characters of speech input.
    #[serde(default)]
    character_price: Option<Cny>,
    /// CNY per minute of transcribed audio.
    #[serde(default)]
    audio_minute_price: Option<Cny>,
    /// CNY per rerank search unit.
    #[serde(default)]
    search_unit_price: Option<Cny>,
    /// CNY per request.
    #[serde(default)]
    request_price: Option<Cny>,
    #[serde(default)]
    policies: Vec<String>,
    /// The BPE encoding the gateway counts this model's tokens with when
    /// its vendor reports no usage (`billing::tokens`); by default the one
    /// tiktoken uses for the model's name, else `o200k_base`.
    #[serde(default)]
    tokenizer: Option<crate::billing::tokens::Encoding>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default = "default_group")]
    group: String,
    /// Unix seconds for `GET /v1/models`; by default, when the gateway
    /// first served the model.
    #[serde(default)]
    created: Option<i64>,
}

fn default_owner() -> String {
    "gateway".into()
}

fn default_group() -> String {
    "default".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVideoModel {
    name: String,
    /// For an alias: the concrete model it points to. Aliases take their
    /// durations and resolutions from their target unless given.
    #[serde(default)]
    alias_of: Option<String>,
    price_per_second: Cny,
    #[serde(default)]
    durations: Option<[u32; 2]>,
    #[serde(default)]
    resolutions: Option<Vec<String>>,
    #[serde(default = "default_status")]
    status: String,
    #[serde(default = "default_owner")]
    owned_by: String,
    #[serde(default = "yes")]
    enabled: bool,
    /// As for text models.
    #[serde(default)]
    created: Option<i64>,
}

fn default_status() -> String {
    "stable".into()
}

// ---------------------------------------------------------------------------
// The checked config the host runs on.

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub adapters_dir: PathBuf,
    pub policies_dir: Option<PathBuf>,
    pub trusted_proxies: Vec<IpNet>,
    /// Threads of the async runtime (`main` builds it); `None`: one per
    /// core; 1: tokio's current-thread scheduler. See
    /// `gateway.example.toml` for when fewer serve better.
    pub worker_threads: Option<usize>,
    pub admin: AdminConfig,
    pub limits: LimitsConfig,
    pub plugins: PluginConfig,
    pub currency: Currency,
    pub trial_credit: Quota,
    pub default_max_tokens: u64,
    pub wal_sync: crate::store::wal::WalSync,
    pub video: VideoConfig,
    pub webhooks: WebhookConfig,
    pub retention: RetentionConfig,
    pub health: HealthConfig,
    pub manual_clock: bool,
    pub tracing: TracingConfig,
    pub metrics: MetricsConfig,
    /// The web console's listener and settings; `None`: no console.
    pub console: Option<crate::console::config::ConsoleConfig>,
    /// The reloadable part (see [`crate::reload`]): the catalog is built
    /// from these; what serves is the catalog, not these fields.
    pub channels: Vec<ChannelConfig>,
    pub models: Vec<ModelConfig>,
    pub video_models: Vec<VideoModelConfig>,
    /// The file this config was read from, for reloads; `None` for config
    /// text handed over directly.
    pub source: Option<ConfigSource>,
}

/// Where a config was read from, so a reload reads the same file the same
/// way (tests inject what resolves `env:` secrets instead of the process
/// environment).
#[derive(Clone)]
pub struct ConfigSource {
    pub path: PathBuf,
    env: Arc<EnvLookup>,
}

/// Resolves the variable of an `env:VAR` secret.
type EnvLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

impl std::fmt::Debug for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigSource")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ConfigSource {
    /// `path`, with `env:` secrets from the process environment.
    pub fn file(path: &Path) -> ConfigSource {
        ConfigSource::with_env(path, |name| std::env::var(name).ok())
    }

    /// `path`, with `env:` secrets resolved by `env`.
    pub fn with_env(
        path: &Path,
        env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> ConfigSource {
        ConfigSource {
            path: path.to_path_buf(),
            env: Arc::new(env),
        }
    }

    /// Reads, parses and checks the file. Relative paths inside it are taken
    /// relative to the file's own folder.
    pub fn load(&self) -> Result<Config, ConfigError> {
        let path = &self.path;
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let mut config = Config::from_toml(&text, &base, &*self.env).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse {
                path: path.display().to_string(),
                message,
            },
            other => other,
        })?;
        config.source = Some(self.clone());
        Ok(config)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AdminConfig {
    pub listen: SocketAddr,
    pub key: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LimitsConfig {
    pub max_body_bytes: usize,
    pub stream_idle_timeout: Duration,
    pub upstream_timeout: Duration,
    pub connect_timeout: Duration,
    pub rate_limit_requests: u32,
    pub rate_limit_window: Duration,
    /// IPv6 clients are counted per network of this prefix length (the rate
    /// limit and the per-address connection cap); 128 counts each address.
    pub ipv6_prefix_len: u8,
    /// Group name → most text calls in flight at once; absent or 0 means no cap.
    pub group_concurrency: HashMap<String, u32>,
    /// A request's head must arrive whole within this of its first byte (or
    /// of the connection being opened).
    pub header_read_timeout: Duration,
    /// A kept-alive connection with no request for this long is closed.
    pub keepalive_idle_timeout: Duration,
    /// A request body with no bytes for this long ends the request (408).
    pub body_idle_timeout: Duration,
    /// A client that accepts no bytes of an answer for this long is dropped.
    pub write_timeout: Duration,
    /// Largest request head (request line and headers), at least 8192;
    /// beyond it, 431.
    pub max_header_bytes: usize,
    /// Open client connections, in all (also kept below the process's file
    /// descriptor limit) and per client address; 0 = no per-address cap.
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    /// Request bytes all the requests being read or served may hold at
    /// once; a body waits for room (within its idle timeout) beyond it.
    pub max_buffered_body_bytes: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PluginConfig {
    pub call_timeout: Duration,
    pub max_memory_bytes: usize,
    pub epoch_tick: Duration,
    pub max_instances: u32,
    /// Idle instances kept per component between calls (0: a fresh
    /// instance for every call).
    pub warm_instances: u32,
    /// 0 turns hot reload off.
    pub reload_interval: Duration,
    /// Where a component missing from the plugin cache is compiled. Not a
    /// config file setting: the `gateway` binary chooses it.
    pub compiler: PluginCompiler,
}

/// Where components are compiled (`plugins::sandbox`).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum PluginCompiler {
    /// On a throwaway engine in this process: the library's default (the
    /// end-to-end tests run gateways inside the test binary, which has no
    /// compile command) and the adapter kit's.
    #[default]
    InProcess,
    /// In a child process: this program, run as `<path> compile-component`
    /// (what `gateway serve` uses).
    Child(PathBuf),
}

#[derive(Debug, Clone, PartialEq)]
pub struct VideoConfig {
    pub poll_interval: Duration,
    pub poll_max_backoff: Duration,
    pub poll_after_ms: u64,
    pub task_expiry_secs: i64,
    pub download_window_secs: i64,
    pub max_downloads: u32,
    pub quote_validity_secs: i64,
    pub idempotency_window_secs: i64,
    pub max_unfinished_per_account: u32,
    pub daily_budget: Quota,
    pub content_timeout: Duration,
    pub poller_tick: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookConfig {
    pub allow_private_targets: bool,
    pub timeout: Duration,
    pub max_concurrent: usize,
    pub retry_schedule_secs: Vec<i64>,
    pub dispatch_tick: Duration,
}

/// How long records that only matter for a while are kept (idempotency
/// records: `video.idempotency_window_secs`), and how the sweeper removes
/// them.
#[derive(Debug, Clone, PartialEq)]
pub struct RetentionConfig {
    pub quotes_after_expiry_secs: i64,
    pub delivered_events_secs: i64,
    pub dead_events_secs: i64,
    /// How often old records are looked for (real time).
    pub sweep_every: Duration,
    /// Most records of each kind removed per transaction.
    pub sweep_batch: usize,
}

/// `[tracing]`: OTLP export of OpenTelemetry spans (see `telemetry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracingConfig {
    /// The collector's OTLP/HTTP base URL; `None`: tracing is off.
    pub otlp_endpoint: Option<String>,
    pub service_name: String,
}

/// `[metrics]`: the Prometheus endpoint (see `metrics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `GET /metrics` needs `Authorization: Bearer <admin key>`.
    pub require_admin_key: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthConfig {
    pub failures_to_rest: u32,
    pub rest_secs: i64,
    pub window: usize,
}

#[derive(Debug, Clone)]
pub struct ChannelConfig {
    pub name: String,
    pub adapter: String,
    /// Without a trailing slash; adapters append paths that start with `/`.
    pub base_url: String,
    /// `base_url` parsed, once, for `relay::upstream::url`.
    pub base: reqwest::Url,
    /// `base`'s scheme and authority as an `http::Uri` holds them, split
    /// once for `relay::upstream::uri`; none for a base without them, or
    /// with a query or a fragment (whose URIs always take the whole parse).
    pub origin: Option<(Scheme, Authority)>,
    /// The resolved secret; never logged, never shown to guests.
    pub key: Option<String>,
    pub models: Vec<String>,
    pub model_map: HashMap<String, String>,
    /// Adapter options, in key order.
    pub options: Vec<(String, String)>,
    pub priority: i32,
    /// Share of the calls among the channels of its priority (at least 1).
    pub weight: u32,
}

impl ChannelConfig {
    /// A channel named `name` of the `openai` adapter at `base_url`, with
    /// no key, models, map or options, priority 0 and weight 1: for tests
    /// to change what they need with `..ChannelConfig::for_test(..)`.
    #[cfg(test)]
    pub fn for_test(name: &str, base_url: &str) -> ChannelConfig {
        let base = reqwest::Url::parse(base_url).unwrap();
        ChannelConfig {
            name: name.into(),
            adapter: "openai".into(),
            base_url: base_url.trim_end_matches('/').into(),
            origin: origin_of(&base),
            base,
            key: None,
            models: vec![],
            model_map: HashMap::new(),
            options: vec![],
            priority: 0,
            weight: 1,
        }
    }

    pub fn upstream_model<'a>(&'a self, model: &'a str) -> &'a str {
        self.model_map
            .get(model)
            .map(String::as_str)
            .unwrap_or(model)
    }
}

/// The scheme and authority of a channel's base URL (see
/// [`ChannelConfig::origin`]).
fn origin_of(base: &reqwest::Url) -> Option<(Scheme, Authority)> {
    if base.query().is_some() || base.fragment().is_some() {
        return None;
    }
    let parts = axum::http::Uri::try_from(base.as_str()).ok()?.into_parts();
    Some((parts.scheme?, parts.authority?))
}

#[derive(Debug, Clone)]
pub struct ModelConfig {
    pub name: String,
    pub owned_by: String,
    /// Quota units per 1M tokens.
    pub input_price: Quota,
    pub output_price: Quota,
    pub cached_input_price: Quota,
    pub cache_write_price: Quota,
    /// Prices of the non-token meters (images, characters, audio, ...).
    pub meter_prices: MeterPrices,
    pub default_max_tokens: Option<u64>,
    pub policies: Vec<String>,
    pub group: String,
    /// Unix seconds, when the config says; else the catalog uses the time
    /// the gateway first served the model.
    pub created: Option<i64>,
    /// What the gateway counts tokens with when the vendor does not.
    pub tokenizer: crate::billing::tokens::Encoding,
}

#[derive(Debug, Clone)]
pub struct VideoModelConfig {
    pub name: String,
    pub alias_of: Option<String>,
    /// Quota units per second.
    pub price_per_second: Quota,
    pub min_seconds: u32,
    pub max_seconds: u32,
    pub resolutions: Vec<String>,
    pub status: String,
    pub owned_by: String,
    pub created: Option<i64>,
}

impl VideoModelConfig {
    /// The concrete model the upstream knows.
    pub fn concrete(&self) -> &str {
        self.alias_of.as_deref().unwrap_or(&self.name)
    }
}

impl Config {
    /// Reads, parses and checks the file (see [`ConfigSource::load`]).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        ConfigSource::file(path).load()
    }

    /// The settings outside the reloadable part (channels, models, video
    /// models) that differ between `self` and `new`: a reload cannot apply
    /// them; they need a restart.
    pub fn restart_needed(&self, new: &Config) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut differ = |name: &'static str, changed: bool| {
            if changed {
                out.push(name);
            }
        };
        differ("listen", self.listen != new.listen);
        differ("data_dir", self.data_dir != new.data_dir);
        differ("adapters_dir", self.adapters_dir != new.adapters_dir);
        differ("policies_dir", self.policies_dir != new.policies_dir);
        differ(
            "trusted_proxies",
            self.trusted_proxies != new.trusted_proxies,
        );
        differ("worker_threads", self.worker_threads != new.worker_threads);
        differ("[admin]", self.admin != new.admin);
        differ("[limits]", self.limits != new.limits);
        differ("[plugins]", self.plugins != new.plugins);
        differ(
            "[billing]",
            self.currency != new.currency
                || self.trial_credit != new.trial_credit
                || self.default_max_tokens != new.default_max_tokens
                || self.wal_sync != new.wal_sync,
        );
        differ("[video]", self.video != new.video);
        differ("[webhooks]", self.webhooks != new.webhooks);
        differ("[retention]", self.retention != new.retention);
        differ("[health]", self.health != new.health);
        differ("[testing]", self.manual_clock != new.manual_clock);
        differ("[tracing]", self.tracing != new.tracing);
        differ("[metrics]", self.metrics != new.metrics);
        differ("[console]", self.console != new.console);
        out
    }

    /// Parses config text; `env` resolves `env:VAR` secrets (injected for tests).
    pub fn from_toml(
        text: &str,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: "<config>".into(),
            message: e.to_string(),
        })?;
        resolve(raw, base, env)
    }
}

fn parse_addr(field: &str, text: &str) -> Result<SocketAddr, ConfigError> {
    text.parse()
        .map_err(|_| invalid(field, format!("`{text}` is not an IP:port address")))
}

pub(crate) fn secret(
    field: &str,
    value: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    match value.strip_prefix("env:") {
        Some(var) => match env(var) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(invalid(
                field,
                format!("environment variable `{var}` is not set"),
            )),
        },
        None => Ok(value.to_string()),
    }
}

fn within(field: &str, v: u64, min: u64, max: u64) -> Result<u64, ConfigError> {
    if (min..=max).contains(&v) {
        Ok(v)
    } else {
        Err(invalid(field, format!("must be between {min} and {max}")))
    }
}

fn positive(field: &str, v: u64) -> Result<u64, ConfigError> {
    if v == 0 {
        Err(invalid(field, "must be greater than 0"))
    } else {
        Ok(v)
    }
}

/// A positive number of seconds.
fn positive_secs(field: &str, v: u64) -> Result<Duration, ConfigError> {
    positive(field, v).map(Duration::from_secs)
}

/// A positive number of milliseconds.
fn positive_millis(field: &str, v: u64) -> Result<Duration, ConfigError> {
    positive(field, v).map(Duration::from_millis)
}

fn resolve(
    raw: RawConfig,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let abs = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        }
    };
    let listen = parse_addr("listen", &raw.listen)?;
    let admin_listen = parse_addr("admin.listen", &raw.admin.listen)?;
    if !admin_listen.ip().is_loopback() {
        return Err(invalid(
            "admin.listen",
            "the admin API must listen on a loopback address (127.0.0.1 or ::1)",
        ));
    }
    let admin_key = secret("admin.key", &raw.admin.key, env)?;
    if admin_key.len() < 16 {
        return Err(invalid("admin.key", "must be at least 16 characters"));
    }

    let trusted_proxies = raw
        .trusted_proxies
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.parse::<IpNet>()
                .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    invalid(
                        format!("trusted_proxies[{i}]"),
                        format!("`{s}` is not an IP or CIDR"),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;

    let l = raw.limits;
    let limits = LimitsConfig {
        max_body_bytes: usize::try_from(positive("limits.max_body_bytes", l.max_body_bytes)?)
            .map_err(|_| invalid("limits.max_body_bytes", "too large"))?,
        stream_idle_timeout: positive_secs(
            "limits.stream_idle_timeout_secs",
            l.stream_idle_timeout_secs,
        )?,
        upstream_timeout: positive_secs("limits.upstream_timeout_secs", l.upstream_timeout_secs)?,
        connect_timeout: positive_secs("limits.connect_timeout_secs", l.connect_timeout_secs)?,
        rate_limit_requests: positive("limits.rate_limit_requests", l.rate_limit_requests.into())?
            as u32,
        rate_limit_window: positive_secs(
            "limits.rate_limit_window_secs",
            l.rate_limit_window_secs,
        )?,
        ipv6_prefix_len: if l.ipv6_prefix_len <= 128 {
            l.ipv6_prefix_len
        } else {
            return Err(invalid("limits.ipv6_prefix_len", "must be 0 to 128"));
        },
        group_concurrency: l.group_concurrency.into_iter().collect(),
        header_read_timeout: positive_secs(
            "limits.header_read_timeout_secs",
            l.header_read_timeout_secs,
        )?,
        keepalive_idle_timeout: positive_secs(
            "limits.keepalive_idle_timeout_secs",
            l.keepalive_idle_timeout_secs,
        )?,
        body_idle_timeout: positive_secs(
            "limits.body_idle_timeout_secs",
            l.body_idle_timeout_secs,
        )?,
        write_timeout: positive_secs("limits.write_timeout_secs", l.write_timeout_secs)?,
        // hyper reads heads into a buffer of at least 8 KiB.
        max_header_bytes: usize::try_from(l.max_header_bytes.max(8192)).unwrap_or(usize::MAX),
        max_connections: usize::try_from(positive("limits.max_connections", l.max_connections)?)
            .unwrap_or(usize::MAX),
        max_connections_per_ip: usize::try_from(l.max_connections_per_ip).unwrap_or(usize::MAX),
        max_buffered_body_bytes: usize::try_from(l.max_buffered_body_bytes).unwrap_or(usize::MAX),
    };
    if limits.max_buffered_body_bytes < limits.max_body_bytes {
        return Err(invalid(
            "limits.max_buffered_body_bytes",
            "must be at least limits.max_body_bytes",
        ));
    }

    let p = raw.plugins;
    let plugins = PluginConfig {
        call_timeout: positive_millis("plugins.call_timeout_ms", p.call_timeout_ms)?,
        max_memory_bytes: (positive("plugins.max_memory_mib", p.max_memory_mib)? as usize)
            .saturating_mul(1024 * 1024),
        epoch_tick: positive_millis("plugins.epoch_tick_ms", p.epoch_tick_ms)?,
        max_instances: positive("plugins.max_instances", p.max_instances.into())? as u32,
        warm_instances: p.warm_instances,
        reload_interval: Duration::from_secs(p.reload_interval_secs),
        compiler: PluginCompiler::InProcess,
    };
    if plugins.call_timeout < plugins.epoch_tick {
        return Err(invalid(
            "plugins.call_timeout_ms",
            "must be at least plugins.epoch_tick_ms",
        ));
    }

    if raw.billing.quota_per_cny <= 0 {
        return Err(invalid("billing.quota_per_cny", "must be greater than 0"));
    }
    let currency = Currency::new(raw.billing.quota_per_cny);
    let trial_credit = raw
        .billing
        .trial_credit_cny
        .to_quota(&currency, "billing.trial_credit_cny")?;

    let v = raw.video;
    let video = VideoConfig {
        poll_interval: positive_secs("video.poll_interval_secs", v.poll_interval_secs)?,
        poll_max_backoff: positive_secs("video.poll_max_backoff_secs", v.poll_max_backoff_secs)?,
        poll_after_ms: v.poll_after_ms,
        task_expiry_secs: v.task_expiry_secs,
        download_window_secs: v.download_window_secs,
        max_downloads: v.max_downloads,
        quote_validity_secs: v.quote_validity_secs,
        idempotency_window_secs: v.idempotency_window_secs,
        max_unfinished_per_account: v.max_unfinished_per_account,
        daily_budget: v
            .daily_budget_cny
            .to_quota(&currency, "video.daily_budget_cny")?,
        content_timeout: positive_secs("video.content_timeout_secs", v.content_timeout_secs)?,
        poller_tick: positive_millis("video.poller_tick_ms", v.poller_tick_ms)?,
    };

    let w = raw.webhooks;
    if w.retry_schedule_secs.iter().any(|s| *s <= 0) {
        return Err(invalid(
            "webhooks.retry_schedule_secs",
            "every delay must be greater than 0",
        ));
    }
    let webhooks = WebhookConfig {
        allow_private_targets: w.allow_private_targets,
        timeout: positive_secs("webhooks.timeout_secs", w.timeout_secs)?,
        max_concurrent: positive("webhooks.max_concurrent", w.max_concurrent as u64)? as usize,
        retry_schedule_secs: w.retry_schedule_secs,
        dispatch_tick: positive_millis("webhooks.dispatch_tick_ms", w.dispatch_tick_ms)?,
    };

    let r = raw.retention;
    let secs = |field: &str, v: u64| i64::try_from(v).map_err(|_| invalid(field, "is too large"));
    let retention = RetentionConfig {
        quotes_after_expiry_secs: secs(
            "retention.quotes_after_expiry_secs",
            r.quotes_after_expiry_secs,
        )?,
        delivered_events_secs: secs("retention.delivered_events_secs", r.delivered_events_secs)?,
        dead_events_secs: secs("retention.dead_events_secs", r.dead_events_secs)?,
        sweep_every: positive_secs("retention.sweep_every_secs", r.sweep_every_secs)?,
        sweep_batch: positive("retention.sweep_batch", r.sweep_batch as u64)? as usize,
    };

    let mut models = Vec::new();
    let mut model_names = HashSet::new();
    for (i, m) in raw.models.into_iter().enumerate() {
        let f = |k: &str| format!("models[{i}].{k}");
        if m.name.trim().is_empty() {
            return Err(invalid(f("name"), "must not be empty"));
        }
        if !model_names.insert(m.name.clone()) {
            return Err(invalid(
                f("name"),
                format!("model `{}` is listed twice", m.name),
            ));
        }
        if !m.enabled {
            continue;
        }
        let input_price = m.input_price.to_quota(&currency, &f("input_price"))?;
        let price = |c: &Option<Cny>, key: &str| -> Result<Quota, ConfigError> {
            c.as_ref().map_or(Ok(0), |c| c.to_quota(&currency, &f(key)))
        };
        let mut images = BTreeMap::new();
        for (detail, c) in &m.image_prices {
            images.insert(
                detail.clone(),
                c.to_quota(&currency, &f(&format!("image_prices.{detail}")))?,
            );
        }
        let meter_prices = MeterPrices {
            image: price(&m.image_price, "image_price")?,
            images,
            per_million_characters: price(&m.character_price, "character_price")?,
            audio_minute: price(&m.audio_minute_price, "audio_minute_price")?,
            search_unit: price(&m.search_unit_price, "search_unit_price")?,
            request: price(&m.request_price, "request_price")?,
        };
        models.push(ModelConfig {
            meter_prices,
            owned_by: m.owned_by,
            output_price: m.output_price.to_quota(&currency, &f("output_price"))?,
            cached_input_price: match &m.cached_input_price {
                Some(c) => c.to_quota(&currency, &f("cached_input_price"))?,
                None => input_price,
            },
            cache_write_price: match &m.cache_write_price {
                Some(c) => c.to_quota(&currency, &f("cache_write_price"))?,
                None => input_price,
            },
            input_price,
            default_max_tokens: m.default_max_tokens,
            policies: m.policies,
            group: m.group,
            created: m.created,
            tokenizer: m
                .tokenizer
                .unwrap_or_else(|| crate::billing::tokens::Encoding::for_model(&m.name)),
            name: m.name,
        });
    }

    let video_models = resolve_video_models(
        raw.video_models,
        &currency,
        v.disable_test_models,
        &mut model_names,
    )?;

    let mut channels = Vec::new();
    let mut channel_names = HashSet::new();
    for (i, c) in raw.channels.into_iter().enumerate() {
        let f = |k: &str| format!("channels[{i}].{k}");
        if !channel_names.insert(c.name.clone()) {
            return Err(invalid(
                f("name"),
                format!("channel `{}` is listed twice", c.name),
            ));
        }
        let url = reqwest::Url::parse(&c.base_url)
            .map_err(|e| invalid(f("base_url"), format!("`{}` is not a URL: {e}", c.base_url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(f("base_url"), "must be an http:// or https:// URL"));
        }
        if c.models.is_empty() {
            return Err(invalid(f("models"), "must list at least one model"));
        }
        for m in &c.models {
            if !model_names.contains(m) {
                return Err(invalid(
                    f("models"),
                    format!("model `{m}` is not defined under [[models]] or [[video_models]]"),
                ));
            }
        }
        for k in c.model_map.keys() {
            if !c.models.contains(k) {
                return Err(invalid(
                    f("model_map"),
                    format!("`{k}` is mapped but not listed in this channel's models"),
                ));
            }
        }
        if !c.enabled {
            continue;
        }
        channels.push(ChannelConfig {
            key: c
                .key
                .as_deref()
                .map(|k| sendable(&f("key"), secret(&f("key"), k, env)?))
                .transpose()?,
            base_url: c.base_url.trim_end_matches('/').to_string(),
            origin: origin_of(&url),
            base: url,
            name: c.name,
            adapter: c.adapter,
            models: c.models,
            model_map: c.model_map.into_iter().collect(),
            options: c.options.into_iter().collect(),
            priority: c.priority,
            weight: positive(&f("weight"), u64::from(c.weight))? as u32,
        });
    }

    Ok(Config {
        listen,
        data_dir: abs(&raw.data_dir),
        adapters_dir: abs(&raw.adapters_dir),
        policies_dir: raw.policies_dir.as_deref().map(abs),
        trusted_proxies,
        worker_threads: raw
            .worker_threads
            .map(|n| within("worker_threads", n, 1, 1024).map(|n| n as usize))
            .transpose()?,
        admin: AdminConfig {
            listen: admin_listen,
            key: admin_key,
        },
        limits,
        plugins,
        currency,
        trial_credit,
        default_max_tokens: positive("billing.default_max_tokens", raw.billing.default_max_tokens)?,
        wal_sync: raw.billing.wal_sync,
        video,
        webhooks,
        retention,
        health: HealthConfig {
            failures_to_rest: positive(
                "health.failures_to_rest",
                u64::from(raw.health.failures_to_rest),
            )? as u32,
            rest_secs: within("health.rest_secs", raw.health.rest_secs, 1, 86_400)? as i64,
            window: within("health.window", raw.health.window as u64, 1, 10_000)? as usize,
        },
        manual_clock: raw.testing.manual_clock,
        tracing: TracingConfig {
            otlp_endpoint: match raw.tracing.otlp_endpoint {
                Some(e) if !(e.starts_with("http://") || e.starts_with("https://")) => {
                    return Err(ConfigError::Invalid {
                        field: "tracing.otlp_endpoint".into(),
                        message: format!("`{e}` is not an http:// or https:// URL"),
                    })
                }
                e => e,
            },
            service_name: raw.tracing.service_name,
        },
        metrics: MetricsConfig {
            require_admin_key: raw.metrics.require_admin_key,
        },
        console: raw.console.map(|c| c.resolve(env)).transpose()?,
        channels,
        models,
        video_models,
        source: None,
    })
}

fn resolve_video_models(
    raw: Vec<RawVideoModel>,
    currency: &Currency,
    disable_test_models: bool,
    names: &mut HashSet<String>,
) -> Result<Vec<VideoModelConfig>, ConfigError> {
    let by_name: HashMap<String, usize> = raw
        .iter()
        .enumerate()
        .map(|(i, m)| (m.name.clone(), i))
        .collect();
    let mut out = Vec::new();
    for (i, m) in raw.iter().enumerate() {
        let f = |k: &str| format!("video_models[{i}].{k}");
        if !names.insert(m.name.clone()) {
            return Err(invalid(
                f("name"),
                format!("model `{}` is listed twice", m.name),
            ));
        }
        if !matches!(m.status.as_str(), "stable" | "preview") {
            return Err(invalid(f("status"), "must be `stable` or `preview`"));
        }
        let target = match &m.alias_of {
            Some(t) => {
                let ti = *by_name
                    .get(t)
                    .ok_or_else(|| invalid(f("alias_of"), format!("`{t}` is not a video model")))?;
                if raw[ti].alias_of.is_some() {
                    return Err(invalid(
                        f("alias_of"),
                        "an alias must point at a concrete model",
                    ));
                }
                Some(&raw[ti])
            }
            None => None,
        };
        let durations = m
            .durations
            .or(target.and_then(|t| t.durations))
            .ok_or_else(|| invalid(f("durations"), "a concrete model needs [min, max] seconds"))?;
        if durations[0] == 0 || durations[0] > durations[1] {
            return Err(invalid(
                f("durations"),
                "must be [min, max] with 0 < min <= max",
            ));
        }
        let resolutions = m
            .resolutions
            .clone()
            .or_else(|| target.and_then(|t| t.resolutions.clone()))
            .ok_or_else(|| invalid(f("resolutions"), "a concrete model needs its resolutions"))?;
        for r in &resolutions {
            if crate::video::size::parse_size(r).is_none() {
                return Err(invalid(
                    f("resolutions"),
                    format!("`{r}` is not WIDTHxHEIGHT"),
                ));
            }
        }
        let is_test = |n: &str| n.ends_with("-test");
        let off = !m.enabled
            || !target.map(|t| t.enabled).unwrap_or(true)
            || (disable_test_models
                && (is_test(&m.name) || target.map(|t| is_test(&t.name)).unwrap_or(false)));
        if off {
            continue;
        }
        out.push(VideoModelConfig {
            name: m.name.clone(),
            alias_of: m.alias_of.clone(),
            price_per_second: m
                .price_per_second
                .to_quota(currency, &f("price_per_second"))?,
            min_seconds: durations[0],
            max_seconds: durations[1],
            resolutions,
            status: m.status.clone(),
            owned_by: m.owned_by.clone(),
            created: m.created,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
listen = "127.0.0.1:0"
data_dir = "data"
adapters_dir = "adapters"
[admin]
listen = "127.0.0.1:0"
key = "env:ADMIN_KEY"
[[models]]
name = "m1"
input_price = "1.10"
output_price = 4.4
[[channels]]
name = "c1"
adapter = "openai"
base_url = "http://127.0.0.1:9/v1/"
key = "env:VENDOR_KEY"
models = ["m1"]
model_map = { m1 = "upstream-m1" }
"#;

    fn env(name: &str) -> Option<String> {
        match name {
            "ADMIN_KEY" => Some("admin-key-0123456789".into()),
            "VENDOR_KEY" => Some("sk-vendor".into()),
            _ => None,
        }
    }

    fn err_of(text: &str) -> String {
        Config::from_toml(text, Path::new("/cfg"), &env)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn minimal_config_resolves() {
        let c = Config::from_toml(MINIMAL, Path::new("/cfg"), &env).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/cfg/data"));
        assert_eq!(c.models[0].input_price, 550_000);
        assert_eq!(c.models[0].output_price, 2_200_000);
        assert_eq!(c.models[0].cached_input_price, 550_000);
        assert_eq!(c.models[0].cache_write_price, 550_000);
        assert_eq!(c.channels[0].base_url, "http://127.0.0.1:9/v1");
        assert_eq!(c.channels[0].key.as_deref(), Some("sk-vendor"));
        assert_eq!(c.channels[0].upstream_model("m1"), "upstream-m1");
        assert_eq!(c.trial_credit, 2_500_000);
        assert_eq!(c.limits.rate_limit_requests, 360);
        assert_eq!(c.worker_threads, None, "one runtime thread per core");
    }

    #[test]
    fn worker_threads_are_a_count_from_1_to_1024() {
        let with =
            |n: &str| MINIMAL.replacen("data_dir", &format!("worker_threads = {n}\ndata_dir"), 1);
        let c = Config::from_toml(&with("1"), Path::new("/cfg"), &env).unwrap();
        assert_eq!(c.worker_threads, Some(1));
        assert!(err_of(&with("0")).contains("worker_threads"));
        assert!(err_of(&with("1025")).contains("worker_threads"));
    }

    #[test]
    fn errors_name_the_field() {
        assert!(err_of(&MINIMAL.replace("http://127.0.0.1:9/v1/", "nope"))
            .contains("channels[0].base_url"));
        assert!(
            err_of(&MINIMAL.replace("env:VENDOR_KEY", "env:MISSING")).contains("channels[0].key")
        );
        assert!(err_of(&MINIMAL.replace("env:VENDOR_KEY", "sk-a\\nb")).contains("channels[0].key"));
        assert!(
            err_of(&MINIMAL.replace("output_price = 4.4", "output_price = \"x\""))
                .contains("models[0].output_price")
        );
        assert!(
            err_of(&MINIMAL.replace("models = [\"m1\"]", "models = [\"m2\"]"))
                .contains("channels[0].models")
        );
        let admin = MINIMAL.replace(
            "listen = \"127.0.0.1:0\"\nkey",
            "listen = \"0.0.0.0:1\"\nkey",
        );
        assert!(err_of(&admin).contains("admin.listen"));
        assert!(err_of(&format!("{MINIMAL}\nbogus = 1")).contains("bogus"));
    }

    #[test]
    fn the_documented_configs_parse() {
        let env = |name: &str| Some(format!("value-of-{name}-0123456789"));
        for (name, text) in [
            (
                "gateway.example.toml",
                include_str!("../../gateway.example.toml"),
            ),
            (
                "tests/demo/gateway.toml",
                include_str!("../../tests/demo/gateway.toml"),
            ),
        ] {
            if let Err(e) = Config::from_toml(text, Path::new("/cfg"), &env) {
                panic!("{name}: {e}");
            }
        }
    }
}
