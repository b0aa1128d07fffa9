//! The harness: a real gateway on a free loopback port (in this process, with
//! a manual clock) in front of a real upstream simulator, and helpers to talk
//! to both over HTTP as a client would.
//!
//! Guest components come from `build/` (made by `make build`); each test
//! copies the ones it needs into its own temporary plugin folders.

#![allow(dead_code)]

pub mod protocols;

use gateway::clock::ManualClock;
use gateway::config::ConfigSource;
use gateway::server::{self, Running};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use upstream_sim::{SimOptions, SimServer};

pub const SIM_KEY: &str = "sk-sim-upstream-key";
pub const ADMIN_KEY: &str = "admin-key-for-tests-0123456789";

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A built guest component; panics with the fix when it is missing.
pub fn component(kind: &str, name: &str) -> PathBuf {
    let p = repo_root()
        .join("build")
        .join(kind)
        .join(format!("{name}.wasm"));
    assert!(
        p.is_file(),
        "{} is missing: run `make build` first",
        p.display()
    );
    p
}

/// What a test wants in its gateway.
pub struct Setup {
    /// Top-level keys (before any section), e.g. `trusted_proxies`.
    pub top: String,
    /// Extra TOML appended to the generated config (sections, models, channels).
    pub extra: String,
    /// Extra keys for the `[limits]` section.
    pub limits: String,
    /// Extra keys for the `[plugins]` section.
    pub plugins: String,
    /// Extra keys for the `[video]` section.
    pub video: String,
    /// Extra keys for the `[webhooks]` section.
    pub webhooks: String,
    /// Components copied into the adapters folder (from build/adapters or
    /// build/test-guests): (kind folder, name).
    pub adapters: Vec<(&'static str, &'static str)>,
    /// Whether the default channel and models (served by the simulator) are present.
    pub default_models: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            top: String::new(),
            extra: String::new(),
            limits: String::new(),
            plugins: String::new(),
            video: String::new(),
            webhooks: String::new(),
            adapters: vec![
                ("adapters", "openai"),
                ("adapters", "anthropic"),
                ("adapters", "gemini"),
                ("adapters", "rerank"),
                ("adapters", "genvideo"),
            ],
            default_models: true,
        }
    }
}

pub struct Env {
    pub sim: SimServer,
    pub gw: Running,
    pub clock: Arc<ManualClock>,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
    pub config_text: String,
}

fn default_models(sim_url: &str) -> String {
    let sim_root = sim_url.trim_end_matches("/v1");
    format!(
        r#"
[[channels]]
name = "sim-anthropic"
adapter = "anthropic"
base_url = "{sim_url}"
key = "env:E2E_SIM_KEY"
models = ["claude-sonnet-4-5", "claude-thinker", "claude-reasoner"]
model_map = {{ "claude-sonnet-4-5" = "sim-claude", "claude-thinker" = "sim-claude-reasoner", "claude-reasoner" = "sim-claude-reasoner" }}

[[channels]]
name = "sim-gemini"
adapter = "gemini"
base_url = "{sim_root}"
key = "env:E2E_SIM_KEY"
models = ["gemini-2.5-flash", "gemini-thinker", "gemini-reasoner"]
model_map = {{ "gemini-2.5-flash" = "sim-gemini", "gemini-thinker" = "sim-gemini-reasoner", "gemini-reasoner" = "sim-gemini-reasoner" }}

[[models]]
name = "claude-sonnet-4-5"
owned_by = "anthropic"
input_price = "3"
output_price = "15"
cached_input_price = "0.3"
cache_write_price = "3.75"

[[models]]
name = "claude-thinker"
input_price = "3"
output_price = "15"
policies = ["keep-thinking", "drop-sampling"]

[[models]]
name = "claude-reasoner"
input_price = "3"
output_price = "15"

[[models]]
name = "gemini-2.5-flash"
owned_by = "google"
input_price = "0.3"
output_price = "2.5"
cached_input_price = "0.075"

[[models]]
name = "gemini-thinker"
input_price = "0.3"
output_price = "2.5"
policies = ["keep-thinking", "drop-sampling"]

[[models]]
name = "gemini-reasoner"
input_price = "0.3"
output_price = "2.5"

[[channels]]
name = "sim"
adapter = "openai"
base_url = "{sim_url}"
key = "env:E2E_SIM_KEY"
models = ["gpt-4o-mini", "deepseek-reasoner", "qwen-plus", "thinker"]
model_map = {{ "gpt-4o-mini" = "sim-chat", "deepseek-reasoner" = "sim-reasoner", "qwen-plus" = "sim-chat", "thinker" = "sim-reasoner" }}

[[models]]
name = "gpt-4o-mini"
owned_by = "openai"
input_price = "1"
output_price = "4"
cached_input_price = "0.25"

[[models]]
name = "deepseek-reasoner"
input_price = "2"
output_price = "8"

[[models]]
name = "qwen-plus"
input_price = "1"
output_price = "2"
policies = ["drop-sampling"]

[[models]]
name = "thinker"
input_price = "1"
output_price = "2"
policies = ["keep-thinking", "drop-sampling"]

[[channels]]
name = "sim-families"
adapter = "openai"
base_url = "{sim_url}"
key = "env:E2E_SIM_KEY"
models = ["text-embedding-3-small", "gpt-image-1", "tts-1", "whisper-1", "omni-moderation-latest"]
model_map = {{ "text-embedding-3-small" = "sim-embed", "gpt-image-1" = "sim-image", "tts-1" = "sim-tts", "whisper-1" = "sim-whisper", "omni-moderation-latest" = "sim-moderation" }}

[[channels]]
name = "sim-gemini-embed"
adapter = "gemini"
base_url = "{sim_root}"
key = "env:E2E_SIM_KEY"
models = ["gemini-embedding-001"]
model_map = {{ "gemini-embedding-001" = "sim-gemini-embed" }}

[[channels]]
name = "sim-rerank"
adapter = "rerank"
base_url = "{sim_url}"
key = "env:E2E_SIM_KEY"
models = ["rerank-v1"]
model_map = {{ "rerank-v1" = "sim-rerank" }}

[[models]]
name = "text-embedding-3-small"
input_price = "0.14"
output_price = "0"

[[models]]
name = "gemini-embedding-001"
input_price = "0.1"
output_price = "0"

[[models]]
name = "gpt-image-1"
input_price = "0"
output_price = "0"
image_price = "0.3"
image_prices = {{ "1024x1024/hd" = "0.6" }}

[[models]]
name = "tts-1"
input_price = "0"
output_price = "0"
character_price = "105"

[[models]]
name = "whisper-1"
input_price = "0"
output_price = "0"
audio_minute_price = "0.042"

[[models]]
name = "omni-moderation-latest"
input_price = "0"
output_price = "0"
request_price = "0.01"

[[models]]
name = "rerank-v1"
input_price = "0.1"
output_price = "0"
search_unit_price = "0.014"

[[channels]]
name = "sim-video"
adapter = "genvideo"
base_url = "{sim_url}"
key = "env:E2E_SIM_KEY"
models = ["Gen-2.0-fast", "Gen-2.0", "Gen-2.0-test", "Gen-2.5-test"]
{VIDEO_MODELS}"#
    )
    .replace("{VIDEO_MODELS}", VIDEO_MODELS)
}

/// The spec's capability and price tables (§4.4b).
pub const VIDEO_MODELS: &str = r#"
[[video_models]]
name = "Gen-2.0-fast"
price_per_second = "1.40"
durations = [4, 12]
resolutions = ["1280x720", "720x1280"]

[[video_models]]
name = "Gen-2.0"
price_per_second = "1.23"
durations = [4, 12]
resolutions = ["1280x720", "720x1280"]

[[video_models]]
name = "Gen-2.0-test"
price_per_second = "1.23"
durations = [4, 12]
resolutions = ["1280x720", "720x1280"]
status = "preview"

[[video_models]]
name = "Gen-2.5-test"
price_per_second = "1.87"
durations = [2, 30]
resolutions = ["1280x720", "720x1280", "1792x1024", "1024x1792"]
status = "preview"

[[video_models]]
name = "video-fast"
alias_of = "Gen-2.0-fast"
price_per_second = "1.40"

[[video_models]]
name = "video-quality"
alias_of = "Gen-2.0"
price_per_second = "1.23"

[[video_models]]
name = "video-pro"
alias_of = "Gen-2.5-test"
price_per_second = "1.87"
"#;

/// The test's own `key = value` lines, plus each default whose key it did not set.
fn with_defaults(own: &str, defaults: &[&str]) -> String {
    let mut out = own.to_string();
    for d in defaults {
        let key = d.split('=').next().unwrap_or("").trim();
        if !own.lines().any(|l| l.trim_start().starts_with(key)) {
            out.push('\n');
            out.push_str(d);
        }
    }
    out
}

impl Env {
    pub async fn start() -> Env {
        Env::with(Setup::default()).await
    }

    pub async fn with(setup: Setup) -> Env {
        let sim = start_sim().await;
        let dir = tempfile::tempdir().unwrap();
        let adapters = dir.path().join("adapters");
        let policies = dir.path().join("policies");
        std::fs::create_dir_all(&adapters).unwrap();
        std::fs::create_dir_all(&policies).unwrap();
        for (kind, name) in &setup.adapters {
            std::fs::copy(component(kind, name), adapters.join(format!("{name}.wasm"))).unwrap();
        }
        for name in ["drop-sampling", "keep-thinking"] {
            std::fs::copy(
                component("policies", name),
                policies.join(format!("{name}.wasm")),
            )
            .unwrap();
        }
        let models = if setup.default_models {
            default_models(&sim.base_url())
        } else {
            String::new()
        };
        let text = format!(
            r#"
{top}
listen = "127.0.0.1:0"
data_dir = "data"
adapters_dir = "adapters"
policies_dir = "policies"

[admin]
listen = "127.0.0.1:0"
key = "{ADMIN_KEY}"

[limits]
{limits}

[plugins]
{plugins}

[video]
{video}

[webhooks]
{webhooks}

{models}
{extra}
"#,
            top = setup.top,
            limits = with_defaults(
                &setup.limits,
                &["upstream_timeout_secs = 5", "stream_idle_timeout_secs = 5"]
            ),
            plugins = with_defaults(
                &setup.plugins,
                &[
                    "max_instances = 24",
                    "call_timeout_ms = 200",
                    "max_memory_mib = 32",
                    "reload_interval_secs = 0"
                ],
            ),
            // The tests drive the poller and the dispatcher themselves.
            video = with_defaults(
                &setup.video,
                &[
                    "poll_interval_secs = 5",
                    "poller_tick_ms = 3600000",
                    "content_timeout_secs = 2"
                ],
            ),
            webhooks = with_defaults(
                &setup.webhooks,
                &["allow_private_targets = true", "dispatch_tick_ms = 3600000"],
            ),
            extra = setup.extra.replace("{SIM_URL}", &sim.base_url()),
        );
        // Read from a file, as `gateway serve` does, so a reload can read it
        // again.
        let path = dir.path().join("gateway.toml");
        std::fs::write(&path, &text).unwrap();
        let config =
            ConfigSource::with_env(&path, |v| (v == "E2E_SIM_KEY").then(|| SIM_KEY.to_string()))
                .load()
                .unwrap_or_else(|e| panic!("test config invalid: {e}\n{text}"));
        let clock = Arc::new(ManualClock::starting_now());
        let gw = server::start(config, Some(clock.clone()))
            .await
            .expect("gateway starts");
        Env {
            sim,
            gw,
            clock,
            dir,
            http: reqwest::Client::new(),
            config_text: text,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.gw.public_addr)
    }

    /// Writes `text` as the gateway's config file (replacing it whole, as an
    /// editor does) and asks the admin API to reload it.
    pub async fn reload_with(&self, text: &str) -> (u16, Value) {
        let path = self.dir.path().join("gateway.toml");
        let tmp = self.dir.path().join("gateway.toml.new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        self.admin(reqwest::Method::POST, "/admin/v1/reload", None)
            .await
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.gw.admin_addr)
    }

    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, self.admin_url(path))
            .bearer_auth(ADMIN_KEY);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("admin API answers");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// A new account with `cny` of trial credit; returns its id.
    pub async fn account(&self, cny: &str) -> String {
        let (s, v) = self
            .admin(
                reqwest::Method::POST,
                "/admin/v1/accounts",
                Some(json!({"name": "test", "trial_credit_cny": cny})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        v["id"].as_str().unwrap().to_string()
    }

    /// A token for the account; `extra` adds fields (models, ips, quota_cny, expires_at).
    pub async fn token_with(&self, account: &str, extra: Value) -> (String, String) {
        let mut body = json!({"account": account, "name": "t"});
        if let Value::Object(m) = extra {
            for (k, v) in m {
                body[k] = v;
            }
        }
        let (s, v) = self
            .admin(reqwest::Method::POST, "/admin/v1/tokens", Some(body))
            .await;
        assert_eq!(s, 200, "{v}");
        (
            v["id"].as_str().unwrap().to_string(),
            v["key"].as_str().unwrap().to_string(),
        )
    }

    /// An account with 5 CNY and a plain token; returns the key.
    pub async fn key(&self) -> String {
        let a = self.account("5").await;
        self.token_with(&a, json!({})).await.1
    }

    pub async fn post(&self, key: &str, path: &str, body: Value) -> reqwest::Response {
        self.http
            .post(self.url(path))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .expect("gateway answers")
    }

    pub async fn get(&self, key: &str, path: &str) -> reqwest::Response {
        self.http
            .get(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .expect("gateway answers")
    }

    pub async fn get_json(&self, key: &str, path: &str) -> Value {
        self.get(key, path)
            .await
            .json()
            .await
            .expect("a JSON answer")
    }

    pub async fn chat(&self, key: &str, body: Value) -> reqwest::Response {
        self.post(key, "/v1/chat/completions", body).await
    }

    pub async fn balance(&self, account: &str) -> (i64, i64) {
        let (s, v) = self
            .admin(
                reqwest::Method::GET,
                &format!("/admin/v1/accounts/{account}"),
                None,
            )
            .await;
        assert_eq!(s, 200, "{v}");
        (
            v["balance"].as_i64().unwrap(),
            v["ledger_sum"].as_i64().unwrap(),
        )
    }

    /// Runs one poller pass (the clock decides which tasks are due).
    pub async fn poll(&self) -> usize {
        gateway::video::poller::run_due(&self.gw.state).await
    }

    /// Moves the clock by the poll interval and runs passes until the task
    /// is final (bounded); returns the task JSON.
    pub async fn run_to_end(&self, key: &str, task_id: &str) -> Value {
        for _ in 0..50 {
            self.clock.advance_secs(5);
            self.poll().await;
            let v = self.task(key, task_id).await;
            if ["completed", "failed", "rejected", "expired"]
                .contains(&v["status"].as_str().unwrap_or(""))
            {
                return v;
            }
        }
        panic!("task {task_id} did not finish");
    }

    pub async fn task(&self, key: &str, task_id: &str) -> Value {
        let resp = self
            .http
            .get(self.url(&format!("/v1/videos/{task_id}")))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        resp.json().await.unwrap()
    }

    /// Delivers due webhook events now, waiting for the outcomes — also of
    /// deliveries the background dispatcher started (it wakes when a task
    /// ends).
    pub async fn dispatch(&self) -> usize {
        self.webhooks_idle().await;
        let n = gateway::webhooks::dispatch_due(&self.gw.state, true).await;
        self.webhooks_idle().await;
        n
    }

    async fn webhooks_idle(&self) {
        for _ in 0..1000 {
            if self.gw.state.webhooks.in_flight() == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("webhook deliveries still running after 10 s");
    }

    pub async fn stop(self) {
        self.gw.shutdown().await;
        self.sim.shutdown().await;
    }
}

/// The upstream simulator on a free loopback port, with the test vendor key.
pub async fn start_sim() -> SimServer {
    upstream_sim::start(
        "127.0.0.1:0".parse().unwrap(),
        SimOptions {
            api_key: Some(SIM_KEY.into()),
            ..SimOptions::default()
        },
    )
    .await
    .expect("simulator starts")
}

/// How many entries of one kind (`reserve`, `refund`, ...) an account's ledger has.
pub async fn ledger_entries(env: &Env, account: &str, kind: &str) -> usize {
    let (_, a) = env
        .admin(
            reqwest::Method::GET,
            &format!("/admin/v1/accounts/{account}"),
            None,
        )
        .await;
    a["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .count()
}

/// What a gpt-4o-mini call with this usage costs in the test config:
/// 1 / 4 / 0.25 CNY per 1M tokens (input / output / cached input)
/// = 500_000 / 2_000_000 / 125_000 quota, each part rounded up.
pub fn expected_cost(usage: &Value) -> i64 {
    let per_million = |tokens: i64, price: i64| (tokens * price + 999_999) / 1_000_000;
    let prompt = usage["prompt_tokens"].as_i64().unwrap();
    let cached = usage["prompt_tokens_details"]["cached_tokens"]
        .as_i64()
        .unwrap();
    let output = usage["completion_tokens"].as_i64().unwrap();
    per_million(prompt - cached, 500_000)
        + per_million(cached, 125_000)
        + per_million(output, 2_000_000)
}

/// A chat body with one user message.
pub fn user(model: &str, text: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": text}]})
}

/// Asserts the standard error envelope and returns `(code, message)`.
pub async fn envelope(resp: reqwest::Response, status: u16) -> (String, String) {
    assert_eq!(resp.status().as_u16(), status, "unexpected status");
    let rid = resp
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .expect("every response has X-Request-Id");
    let v: Value = resp.json().await.expect("error body is JSON");
    let err = &v["error"];
    let msg = err["message"].as_str().expect("message").to_string();
    assert!(
        msg.ends_with(&format!("(request id: {rid})")),
        "message ends with the request id: {msg}"
    );
    assert!(err["type"].is_string(), "type present: {v}");
    (err["code"].as_str().expect("code").to_string(), msg)
}

/// Reads a whole SSE answer into its `data:` payloads.
pub async fn sse_data(resp: reqwest::Response) -> Vec<String> {
    sse_payloads(&resp.text().await.expect("stream body"))
}

/// The data payloads of a server-sent event stream's text, in order.
pub fn sse_payloads(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|ev| {
            let data: Vec<&str> = ev
                .lines()
                .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}

/// The gateway as a separate process (for crash tests): started from a config
/// file, killed with SIGKILL, restarted on the same data folder.
pub struct GatewayProcess {
    pub child: std::process::Child,
    pub public: String,
    pub admin: String,
    /// Every line the process has logged so far.
    pub log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl GatewayProcess {
    /// Starts `gateway serve` and waits (bounded) for its ready line.
    pub fn start(config: &Path) -> GatewayProcess {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gateway"))
            .args(["serve", "--config"])
            .arg(config)
            .env("E2E_SIM_KEY", SIM_KEY)
            .env("RUST_LOG", "info")
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("gateway binary starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, rx) = std::sync::mpsc::channel();
        // E2E_GATEWAY_LOG=1 shows the process's log while debugging a test.
        let echo = std::env::var_os("E2E_GATEWAY_LOG").is_some();
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if echo {
                    eprintln!("gateway: {line}");
                }
                if let Ok(mut kept) = kept.lock() {
                    kept.push(line.clone());
                }
                if let Some(rest) = line.split("gateway listening on http://").nth(1) {
                    let public = rest.split_whitespace().next().unwrap_or("").to_string();
                    let admin = rest
                        .split("admin on http://")
                        .nth(1)
                        .map(|s| s.trim_end_matches(')').to_string())
                        .unwrap_or_default();
                    let _ = tx.send((public, admin));
                }
            }
        });
        let (public, admin) = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("gateway became ready within 30 s");
        GatewayProcess {
            child,
            public,
            admin,
            log,
        }
    }

    /// Waits (bounded, 30 s) until a logged line contains `text`.
    pub async fn wait_for_log(&self, text: &str) -> String {
        for _ in 0..3000 {
            let found = self
                .log
                .lock()
                .ok()
                .and_then(|l| l.iter().find(|line| line.contains(text)).cloned());
            if let Some(line) = found {
                return line;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the gateway never logged `{text}`");
    }

    /// Sends the process a signal (`HUP`, `TERM`, ...) with kill(1).
    pub fn signal(&self, name: &str) {
        let ok = std::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill -{name} failed");
    }

    /// Open file descriptors and resident memory (KiB) of the process.
    pub fn descriptors_and_rss_kib(&self) -> (usize, u64) {
        let fds = std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|d| d.count())
            .unwrap_or(0);
        (fds, self.status_kib("VmRSS:"))
    }

    /// The process's peak resident memory so far (KiB).
    pub fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    /// One `/proc/PID/status` line's value in KiB (0 if absent).
    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// A new account with `cny` of trial credit and a key for it, made
    /// through the process's admin API: (account id, key).
    pub async fn account_and_key(&self, http: &reqwest::Client, cny: &str) -> (String, String) {
        let account = admin_at(
            http,
            &self.admin,
            reqwest::Method::POST,
            "/admin/v1/accounts",
            Some(json!({"name": "process", "trial_credit_cny": cny})),
        )
        .await["id"]
            .as_str()
            .expect("account id")
            .to_string();
        let key = admin_at(
            http,
            &self.admin,
            reqwest::Method::POST,
            "/admin/v1/tokens",
            Some(json!({"account": account})),
        )
        .await["key"]
            .as_str()
            .expect("token key")
            .to_string();
        (account, key)
    }

    /// Waits (bounded by `limit`) for the process to exit by itself; its
    /// exit status, or `None` if it is still running.
    pub async fn exit_within(
        &mut self,
        limit: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        let started = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if started.elapsed() >= limit {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// What the process's books show through its admin API: the open
    /// holds, `account` (with its `balance` and `ledger_sum`) and up to
    /// 10,000 usage rows.
    pub async fn books(&self, http: &reqwest::Client, account: &str) -> ProcessBooks {
        let get = reqwest::Method::GET;
        let holds = admin_at(http, &self.admin, get.clone(), "/admin/v1/holds", None).await;
        let path = format!("/admin/v1/accounts/{account}");
        let account = admin_at(http, &self.admin, get.clone(), &path, None).await;
        let usage = admin_at(http, &self.admin, get, "/admin/v1/usage?limit=10000", None).await;
        ProcessBooks {
            holds: holds["data"].clone(),
            account,
            usage: usage["data"].as_array().cloned().unwrap_or_default(),
        }
    }

    pub fn kill(mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

/// A gateway process's books as [`GatewayProcess::books`] read them.
pub struct ProcessBooks {
    /// The open holds (`data` of `GET /admin/v1/holds`).
    pub holds: Value,
    pub account: Value,
    pub usage: Vec<Value>,
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One billed chat call to a gateway process at `base`, every third one
/// streamed; `Some((request id, usage))` when the client got a complete,
/// successful answer.
pub async fn billed_call(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    i: usize,
) -> Option<(String, Value)> {
    let stream = i.is_multiple_of(3);
    let body = json!({"model": "gpt-4o-mini", "max_tokens": 200, "stream": stream,
        "messages": [{"role": "user", "content": format!("billed call {i}")}]});
    let resp = http
        .post(format!("http://{base}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .ok()?;
    if resp.status() != 200 {
        return None;
    }
    let rid = resp
        .headers()
        .get("x-request-id")?
        .to_str()
        .ok()?
        .to_string();
    let text = resp.text().await.ok()?;
    if !stream {
        let v: Value = serde_json::from_str(&text).ok()?;
        return Some((rid, v["usage"].clone()));
    }
    Some((rid, finished_stream_usage(&text)?))
}

/// The usage of an OpenAI chat stream's text, from its last chunk; `None`
/// unless the stream reached `[DONE]` (only then did the client see it
/// complete).
pub fn finished_stream_usage(text: &str) -> Option<Value> {
    let data = sse_payloads(text);
    if !data.iter().any(|d| d == "[DONE]") {
        return None;
    }
    let last = data.iter().rfind(|d| *d != "[DONE]")?;
    let v: Value = serde_json::from_str(last).ok()?;
    Some(v["usage"].clone())
}

/// One admin API call to a gateway process listening at `base`.
pub async fn admin_at(
    http: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let mut req = http
        .request(method, format!("http://{base}{path}"))
        .bearer_auth(ADMIN_KEY);
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send()
        .await
        .expect("admin answers")
        .json()
        .await
        .expect("admin JSON")
}

/// A config file for a gateway process in front of `sim_url`, in `dir`.
pub fn process_config(dir: &Path, sim_url: &str, extra: &str) -> PathBuf {
    process_config_with_limits(dir, sim_url, "", extra)
}

/// The same, with extra `[limits]` keys.
pub fn process_config_with_limits(dir: &Path, sim_url: &str, limits: &str, extra: &str) -> PathBuf {
    process_config_full(dir, sim_url, "", limits, extra)
}

/// The same, with extra top-level keys (`top`, before any table) too.
pub fn process_config_full(
    dir: &Path,
    sim_url: &str,
    top: &str,
    limits: &str,
    extra: &str,
) -> PathBuf {
    let adapters = dir.join("adapters");
    let policies = dir.join("policies");
    std::fs::create_dir_all(&adapters).unwrap();
    std::fs::create_dir_all(&policies).unwrap();
    for name in ["openai", "anthropic", "gemini", "genvideo"] {
        std::fs::copy(
            component("adapters", name),
            adapters.join(format!("{name}.wasm")),
        )
        .unwrap();
    }
    for name in ["drop-sampling", "keep-thinking"] {
        std::fs::copy(
            component("policies", name),
            policies.join(format!("{name}.wasm")),
        )
        .unwrap();
    }
    let text = format!(
        r#"
listen = "127.0.0.1:0"
data_dir = "data"
adapters_dir = "adapters"
policies_dir = "policies"
{top}
[admin]
listen = "127.0.0.1:0"
key = "{ADMIN_KEY}"
[limits]
rate_limit_requests = 1000000
{limits}
[plugins]
max_instances = 64
[video]
poll_interval_secs = 5
poller_tick_ms = 3600000
[webhooks]
allow_private_targets = true
dispatch_tick_ms = 3600000
[testing]
manual_clock = true
{models}
{extra}
"#,
        models = default_models(sim_url)
    );
    let path = dir.join("gateway.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A channel of a test config (`[[channels]]`), written out by [`Channel::toml`].
pub struct Channel {
    pub name: &'static str,
    pub adapter: &'static str,
    /// `{SIM_URL}` for the environment's simulator.
    pub url: String,
    pub key: &'static str,
    pub models: &'static [&'static str],
    /// Client model → upstream model, when they differ.
    pub upstream: Option<&'static str>,
    pub priority: i32,
    pub weight: u32,
}

impl Channel {
    /// An OpenAI channel on the environment's simulator serving `m`.
    pub fn sim(name: &'static str) -> Channel {
        Channel {
            name,
            adapter: "openai",
            url: "{SIM_URL}".into(),
            key: "env:E2E_SIM_KEY",
            models: &["m"],
            upstream: None,
            priority: 0,
            weight: 1,
        }
    }

    pub fn toml(&self) -> String {
        let quoted = |items: &[&str]| {
            items
                .iter()
                .map(|m| format!("{m:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut t = format!(
            "[[channels]]\nname = {:?}\nadapter = {:?}\nbase_url = {:?}\nkey = {:?}\n\
             models = [{}]\npriority = {}\nweight = {}\n",
            self.name,
            self.adapter,
            self.url,
            self.key,
            quoted(self.models),
            self.priority,
            self.weight
        );
        if let Some(up) = self.upstream {
            let map: Vec<String> = self
                .models
                .iter()
                .map(|m| format!("{m:?} = {up:?}"))
                .collect();
            t.push_str(&format!("model_map = {{ {} }}\n", map.join(", ")));
        }
        t + "\n"
    }
}
