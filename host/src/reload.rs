//! Reloading the catalog — channels, models with their prices and policy
//! lists, video models — from the config file while serving: on `SIGHUP`,
//! `POST /admin/v1/reload` and `gateway admin reload`.
//!
//! The file is read and checked exactly as at start-up, then against the
//! plugins it will be served with: the plugin folders are rescanned first,
//! so a new adapter or policy and the config that names it arrive together,
//! and every adapter and policy the file newly names must be loaded (one the
//! running catalog already named the same way is only warned about, as at
//! start-up). A file that fails is refused with the reason, logged and
//! answered, and the running catalog keeps serving. A good one replaces the
//! catalog in one swap; a request reads the catalog once, so calls in flight
//! finish on the one they started with.
//!
//! Everything else in the file (listen addresses, `[limits]`, `[plugins]`,
//! stores, ...) was built into the running gateway at start-up: when it
//! differs, the reload still applies the catalog, and the log and the answer
//! name what needs a restart. `billing.quota_per_cny` is the exception that
//! refuses the reload: the new prices would be read in another unit than
//! the balances they are charged against.

use crate::config::Config;
use crate::error::ApiError;
use crate::plugins::registry::Registry;
use crate::state::{AppState, Catalog};
use std::sync::Arc;

/// What a reload applied.
#[derive(Debug)]
pub struct Reloaded {
    pub models: usize,
    pub video_models: usize,
    pub channels: usize,
    /// Whether the plugin folders had changed and were reloaded too.
    pub plugins_reloaded: bool,
    /// Settings that differ from the running ones but need a restart.
    pub restart_needed: Vec<&'static str>,
}

/// Reads the config file again and, if it is valid, serves its catalog from
/// the next request on. Logs the outcome either way.
pub async fn reload(state: &AppState) -> Result<Reloaded, ApiError> {
    let _one_at_a_time = state.reloading.lock().await;
    let outcome = apply(state).await;
    match &outcome {
        Ok(r) => {
            tracing::info!(
                "config reloaded: {} models, {} video models, {} channels",
                r.models,
                r.video_models,
                r.channels
            );
            if !r.restart_needed.is_empty() {
                tracing::warn!(
                    "config reload: changes to {} were not applied; they need a restart",
                    r.restart_needed.join(", ")
                );
            }
        }
        Err(e) => tracing::error!("config reload refused: {e}"),
    }
    outcome
}

async fn apply(state: &AppState) -> Result<Reloaded, ApiError> {
    let source = state.config.source.as_ref().ok_or_else(|| {
        ApiError::InvalidRequest(
            "this gateway was started from config text, not a file; there is nothing to reload"
                .into(),
        )
    })?;
    let fresh = source
        .load()
        .map_err(|e| ApiError::ConfigRefused(e.to_string()))?;
    if fresh.currency != state.config.currency {
        return Err(ApiError::ConfigRefused(
            "billing.quota_per_cny differs from the running value; prices would be read in \
             another unit than the balances they are charged against, so it needs a restart"
                .into(),
        ));
    }
    let plugins_reloaded = state.plugins.reload_if_changed().await;
    check_plugins(&fresh, &state.plugins.registry(), &state.catalog())
        .map_err(ApiError::ConfigRefused)?;

    let now = state.clock.now_secs();
    let first_seen = state
        .store
        .first_seen(crate::state::model_names(&fresh), now)
        .await
        .map_err(|e| ApiError::internal(format!("cannot record the models' first service: {e}")))?;
    let catalog = Catalog::new(&fresh, &first_seen);
    let reloaded = Reloaded {
        models: catalog.models.len(),
        video_models: catalog.video_models.len(),
        channels: fresh.channels.len(),
        plugins_reloaded,
        restart_needed: state.config.restart_needed(&fresh),
    };
    let serving = catalog.all_channels();
    state.catalog.store(Arc::new(catalog));
    // A channel whose adapter, URL, key or options changed starts healthy
    // by its fingerprint (`relay::health`); removed ones are forgotten.
    state.health.forget_removed(&serving);
    Ok(reloaded)
}

/// Every plugin the config names is loaded: each channel's adapter (text or
/// video) and each model's policies. A name the running catalog already used
/// the same way is only warned about, as at start-up (its channel or model
/// serves nothing until the plugin arrives); refusing it would block every
/// other change until then.
pub fn check_plugins(
    config: &Config,
    registry: &Registry,
    running: &Catalog,
) -> Result<(), String> {
    for (i, ch) in config.channels.iter().enumerate() {
        if registry.adapters.contains_key(&ch.adapter) || registry.video.contains_key(&ch.adapter) {
            continue;
        }
        let why = format!(
            "channel `{}` (channels[{i}].adapter) uses adapter `{}`, which is not loaded",
            ch.name, ch.adapter
        );
        match running.channel(&ch.name) {
            Some(old) if old.adapter == ch.adapter => {
                tracing::warn!("config reload: {why}; it serves nothing until it is")
            }
            _ => return Err(why),
        }
    }
    for m in &config.models {
        for p in m
            .policies
            .iter()
            .filter(|p| !registry.policies.contains_key(*p))
        {
            let why = format!("model `{}` names policy `{p}`, which is not loaded", m.name);
            match running.models.get(&m.name) {
                Some(old) if old.policies.contains(p) => {
                    tracing::warn!("config reload: {why}; its calls fail until it is")
                }
                _ => return Err(why),
            }
        }
    }
    Ok(())
}

/// Reloads on every `SIGHUP` until the state is dropped.
#[cfg(unix)]
pub fn reload_on_hangup(state: &crate::state::SharedState) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = signal(SignalKind::hangup())?;
    let weak = Arc::downgrade(state);
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let Some(state) = weak.upgrade() else { break };
            tracing::info!("SIGHUP: reloading the config file");
            // The outcome is logged by `reload`.
            let _ = reload(&state).await;
        }
    });
    Ok(())
}
