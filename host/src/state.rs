//! What every handler shares: config, clock, store, plugins, the upstream
//! HTTP client, the model catalog and the limiters.
//!
//! The catalog is the one part of the config that changes while serving
//! (see [`crate::reload`]); a request reads it once, through
//! [`AppState::catalog`], and keeps that snapshot to its end.

use crate::billing::ledger::Ledger;
use crate::clock::{ManualClock, SharedClock};
use crate::config::{ChannelConfig, Config, ModelConfig, VideoModelConfig};
use crate::limits::{GroupSlots, RateLimiter};
use crate::plugins::Plugins;
use crate::store::Store;
use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::sync::Arc;

/// Models and the channels that serve them, resolved from one reading of
/// the config file. Immutable: a reload builds a new one. Keep state that
/// must outlive a reload (per-channel health, counters) elsewhere, keyed by
/// name.
pub struct Catalog {
    pub models: foldhash::HashMap<String, Arc<ModelConfig>>,
    pub video_models: foldhash::HashMap<String, Arc<VideoModelConfig>>,
    /// Model name → channels serving it, in the order they are tried:
    /// highest `priority` first, then config order.
    channels: foldhash::HashMap<String, Vec<Arc<ChannelConfig>>>,
    /// The models of `GET /v1/models`, in config order.
    pub listed: Vec<Listed>,
}

/// One entry of the model list.
pub struct Listed {
    pub id: String,
    pub owned_by: String,
    /// Unix seconds: the config's `created`, else when the gateway first
    /// served the model.
    pub created: i64,
}

impl Catalog {
    /// The catalog of `config`; `first_seen` gives each model's first
    /// service time (see `Store::first_seen`).
    pub fn new(config: &Config, first_seen: &HashMap<String, i64>) -> Catalog {
        let mut channels: foldhash::HashMap<String, Vec<Arc<ChannelConfig>>> =
            foldhash::HashMap::default();
        let mut ordered: Vec<Arc<ChannelConfig>> =
            config.channels.iter().cloned().map(Arc::new).collect();
        // Stable sort keeps config order among equal priorities.
        ordered.sort_by_key(|c| std::cmp::Reverse(c.priority));
        for ch in ordered {
            for m in &ch.models {
                channels.entry(m.clone()).or_default().push(ch.clone());
            }
        }
        let listed = config
            .models
            .iter()
            .map(|m| (&m.name, &m.owned_by, m.created))
            .chain(
                config
                    .video_models
                    .iter()
                    .map(|m| (&m.name, &m.owned_by, m.created)),
            )
            .map(|(id, owned_by, created)| Listed {
                id: id.clone(),
                owned_by: owned_by.clone(),
                created: created.or_else(|| first_seen.get(id).copied()).unwrap_or(0),
            })
            .collect();
        Catalog {
            models: config
                .models
                .iter()
                .map(|m| (m.name.clone(), Arc::new(m.clone())))
                .collect(),
            video_models: config
                .video_models
                .iter()
                .map(|m| (m.name.clone(), Arc::new(m.clone())))
                .collect(),
            channels,
            listed,
        }
    }

    /// A channel by name.
    pub fn channel(&self, name: &str) -> Option<&Arc<ChannelConfig>> {
        self.channels.values().flatten().find(|c| c.name == name)
    }

    /// Every channel, once, in the order calls try them (priority, then
    /// config order).
    pub fn all_channels(&self) -> Vec<Arc<ChannelConfig>> {
        let mut all: Vec<Arc<ChannelConfig>> = Vec::new();
        for ch in self.channels.values().flatten() {
            if !all.iter().any(|c| c.name == ch.name) {
                all.push(ch.clone());
            }
        }
        all.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.name.cmp(&b.name)));
        all
    }

    pub fn channels(&self, model: &str) -> &[Arc<ChannelConfig>] {
        self.channels.get(model).map(Vec::as_slice).unwrap_or(&[])
    }
}

pub struct AppState {
    /// The config read at start-up. Its `channels`, `models` and
    /// `video_models` are what the gateway started with; what serves now is
    /// [`AppState::catalog`].
    pub config: Arc<Config>,
    pub clock: SharedClock,
    /// Set when the config asks for a manual clock (tests); the admin API
    /// can then move time.
    pub manual_clock: Option<Arc<ManualClock>>,
    pub store: Store,
    pub ledger: Arc<Ledger>,
    pub plugins: Arc<Plugins>,
    /// The video API's vendor calls (downloads follow redirects).
    pub http: reqwest::Client,
    /// Text calls' vendor client (`relay::vendor`).
    pub vendors: crate::relay::vendor::VendorClient,
    /// Swapped whole by a reload; read it through [`AppState::catalog`].
    pub(crate) catalog: ArcSwap<Catalog>,
    /// Held while a reload runs, so two never interleave.
    pub(crate) reloading: tokio::sync::Mutex<()>,
    pub rate: RateLimiter,
    pub groups: GroupSlots,
    /// Each channel's health: the order calls try them (`relay::health`).
    pub health: crate::relay::health::Health,
    /// Request bytes held in memory, by all requests (see `api::body`).
    pub bodies: crate::api::body::BodyBudget,
    pub video: crate::video::VideoRuntime,
    pub webhooks: crate::webhooks::WebhookRuntime,
    /// This gateway's Prometheus series (`GET /metrics`).
    pub metrics: crate::metrics::Metrics,
}

impl AppState {
    /// The catalog now. A request takes it once and uses that snapshot to
    /// its end, so a reload never changes a call's model, prices or
    /// channels half-way.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.load_full()
    }
}

pub type SharedState = Arc<AppState>;

/// Runs `pass` whenever `wake` (a `Notify` in the state) fires or `tick`
/// passes, until the state is dropped: the loop of the video poller and the
/// webhook dispatcher.
pub fn spawn_worker<F, Fut>(
    state: &SharedState,
    tick: std::time::Duration,
    wake: fn(&AppState) -> &tokio::sync::Notify,
    pass: F,
) where
    F: Fn(SharedState) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let weak = Arc::downgrade(state);
    tokio::spawn(async move {
        loop {
            let Some(state) = weak.upgrade() else { break };
            tokio::select! {
                _ = wake(&state).notified() => {}
                _ = tokio::time::sleep(tick) => {}
            }
            pass(state).await;
        }
    });
}

/// Every model name a config lists (text and video), for `Store::first_seen`.
pub fn model_names(config: &Config) -> Vec<String> {
    config
        .models
        .iter()
        .map(|m| m.name.clone())
        .chain(config.video_models.iter().map(|m| m.name.clone()))
        .collect()
}
