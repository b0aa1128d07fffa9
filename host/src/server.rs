//! Assembling the gateway from its config and running its two listeners.

use crate::api;
use crate::billing::ledger::Ledger;
use crate::clock::{ManualClock, SharedClock, SystemClock};
use crate::config::Config;
use crate::limits::{GroupSlots, RateLimiter};
use crate::plugins::Plugins;
use crate::state::{AppState, Catalog, SharedState};
use crate::store::Store;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A started gateway.
pub struct Running {
    pub public_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    /// The web console's listener, when `[console]` is configured.
    pub console_addr: Option<SocketAddr>,
    pub state: SharedState,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops accepting, lets requests in flight finish, and returns.
    pub async fn shutdown(self) {
        self.stop.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }

    /// Waits until the listeners stop (after `shutdown` from elsewhere, or a
    /// fatal error).
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }
}

/// Builds every part from the config and starts serving. With
/// `[testing] manual_clock = true` the clock starts now and only moves
/// through the admin API; `clock` overrides both (in-process tests).
pub async fn start(config: Config, clock: Option<Arc<ManualClock>>) -> anyhow::Result<Running> {
    let manual = clock.or_else(|| {
        config
            .manual_clock
            .then(|| Arc::new(ManualClock::starting_now()))
    });
    let shared_clock: SharedClock = match &manual {
        Some(m) => m.clone(),
        None => Arc::new(SystemClock),
    };

    let store = Store::open(&config.data_dir.join("gateway.redb")).map_err(|e| {
        anyhow::anyhow!(
            "cannot open the store in {}: {e}",
            config.data_dir.display()
        )
    })?;
    let now = crate::clock::Clock::now_secs(&*shared_clock);
    let ledger = Arc::new(
        Ledger::open(store.clone(), &config.data_dir, config.wal_sync, now)
            .map_err(|e| anyhow::anyhow!("cannot open the ledger: {e}"))?,
    );

    let mut dirs = vec![config.adapters_dir.clone()];
    dirs.extend(config.policies_dir.clone());
    let plugins = Plugins::load(
        &config.plugins,
        shared_clock.clone(),
        &config.data_dir.join("plugin-cache"),
        dirs,
    )
    .await?;
    {
        let reg = plugins.registry();
        for ch in &config.channels {
            if !reg.adapters.contains_key(&ch.adapter) && !reg.video.contains_key(&ch.adapter) {
                tracing::warn!(
                    "channel `{}` uses adapter `{}`, which is not loaded; it serves nothing until it is",
                    ch.name,
                    ch.adapter
                );
            }
        }
    }
    let metrics = crate::metrics::Metrics::new();
    plugins.sandbox.observe(metrics.clone());
    plugins.spawn_watcher(config.plugins.reload_interval);

    let http = reqwest::Client::builder()
        .connect_timeout(config.limits.connect_timeout)
        .pool_idle_timeout(std::time::Duration::from_secs(90))
        .tcp_nodelay(true)
        .build()?;
    let vendors = crate::relay::vendor::VendorClient::new(config.limits.connect_timeout)?;

    let first_seen = store
        .first_seen(crate::state::model_names(&config), now)
        .await
        .map_err(|e| anyhow::anyhow!("cannot record the models' first service: {e}"))?;
    let state: SharedState = Arc::new(AppState {
        catalog: arc_swap::ArcSwap::from_pointee(Catalog::new(&config, &first_seen)),
        reloading: tokio::sync::Mutex::new(()),
        rate: RateLimiter::new(
            config.limits.rate_limit_requests,
            config.limits.rate_limit_window,
            shared_clock.clone(),
        ),
        groups: GroupSlots::new(&config.limits.group_concurrency),
        health: crate::relay::health::Health::new(config.health.clone(), shared_clock.clone()),
        bodies: crate::api::body::BodyBudget::new(config.limits.max_buffered_body_bytes),
        video: crate::video::VideoRuntime::default(),
        webhooks: crate::webhooks::WebhookRuntime::new(config.webhooks.max_concurrent),
        metrics,
        config: Arc::new(config),
        clock: shared_clock,
        manual_clock: manual,
        store,
        ledger,
        plugins,
        http,
        vendors,
    });

    let fixed = crate::video::poller::reconcile(&state).await?;
    if fixed > 0 {
        tracing::warn!("settled {fixed} video hold(s) left behind by an earlier run");
    }
    crate::video::poller::spawn(&state, state.config.video.poller_tick);
    crate::webhooks::spawn(&state, state.config.webhooks.dispatch_tick);
    crate::retention::spawn(&state);

    let public = tokio::net::TcpListener::bind(state.config.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", state.config.listen))?;
    let admin = tokio::net::TcpListener::bind(state.config.admin.listen)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on {} (admin): {e}",
                state.config.admin.listen
            )
        })?;
    let console = match &state.config.console {
        Some(cfg) => {
            let listener = tokio::net::TcpListener::bind(cfg.listen)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {} (console): {e}", cfg.listen))?;
            let bound = listener.local_addr()?;
            let console = Arc::new(crate::console::Console::new(
                state.clone(),
                cfg.clone(),
                bound,
            )?);
            Some((listener, console))
        }
        None => None,
    };
    let public_addr = public.local_addr()?;
    let admin_addr = admin.local_addr()?;
    let console_addr = match &console {
        Some((l, _)) => Some(l.local_addr()?),
        None => None,
    };

    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    let edge = crate::edge::EdgeLimits::from_config(&state.config.limits);
    for (listener, router) in [
        (public, api::public_router(state.clone())),
        (admin, api::admin_router(state.clone())),
    ] {
        let (stop, edge) = (stop.clone(), edge.clone());
        tasks.push(tokio::spawn(crate::edge::serve(
            listener, router, edge, stop,
        )));
    }
    if let Some((listener, console)) = console {
        crate::console::spawn_sweeper(&console, stop.clone());
        tasks.push(tokio::spawn(crate::edge::serve(
            listener,
            crate::console::router(console),
            edge.clone(),
            stop.clone(),
        )));
    }
    {
        // Forget idle addresses now and then so the rate limiter stays small.
        let (state, stop) = (state.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => state.rate.sweep(),
                }
            }
        }));
    }
    {
        // Histogram samples are folded into buckets now and then, scraped or not.
        let (metrics, stop) = (state.metrics.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => metrics.upkeep(),
                }
            }
        }));
    }
    tracing::info!("gateway listening on http://{public_addr} (admin on http://{admin_addr})");
    if let Some(addr) = console_addr {
        tracing::info!("web console on http://{addr}");
    }
    Ok(Running {
        public_addr,
        admin_addr,
        console_addr,
        state,
        stop,
        tasks,
    })
}
