//! The WebAssembly plugin runtime: vendor adapters, video adapters and model
//! policies, each a sandboxed component behind the WIT contract in `wit/`.
//!
//! - [`sandbox`]: engine, linker, per-call CPU and memory bounds.
//! - [`registry`]: loading the folders, the compilation cache, hot reload.
//! - [`session`]: one request's instance of an adapter and the typed calls,
//!   with every guest answer checked before the host uses it.
//! - [`patch`]: applying a policy's JSON edits.

pub mod alike;
pub mod bindings;
pub mod patch;
pub mod registry;
pub mod sandbox;
pub mod session;

use arc_swap::ArcSwap;
use registry::Registry;
use sandbox::Sandbox;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use sandbox::GuestFailure;

/// The loaded plugins; cheap to share.
pub struct Plugins {
    pub sandbox: Arc<Sandbox>,
    registry: ArcSwap<Registry>,
    /// Held while the folders are reloaded: the watcher and the admin calls
    /// never load at once, nor install an older scan over a newer one.
    reloading: tokio::sync::Mutex<()>,
    cache_dir: PathBuf,
    dirs: Vec<PathBuf>,
}

impl Plugins {
    /// Builds the sandbox (guests read `clock`) and loads every component
    /// in `dirs`.
    pub async fn load(
        limits: &crate::config::PluginConfig,
        clock: crate::clock::SharedClock,
        cache_dir: &Path,
        dirs: Vec<PathBuf>,
    ) -> anyhow::Result<Arc<Plugins>> {
        let sandbox = Arc::new(Sandbox::new(limits, clock)?);
        let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        let registry = registry::load_all(&sandbox, cache_dir, &refs, None).await;
        Ok(Arc::new(Plugins {
            sandbox,
            registry: ArcSwap::from_pointee(registry),
            reloading: tokio::sync::Mutex::new(()),
            cache_dir: cache_dir.to_path_buf(),
            dirs,
        }))
    }

    /// The current set of components. Hold the `Arc` for the whole request so
    /// a reload in the middle does not change what it talks to.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.load_full()
    }

    /// Reloads the folders if any `.wasm` file was added, removed or changed.
    /// Returns whether a reload happened. Compilation happens off the
    /// serving path; the new set replaces the old in one swap, and a file
    /// that is refused keeps its earlier version (see [`registry`]).
    pub async fn reload_if_changed(&self) -> bool {
        let _one_at_a_time = self.reloading.lock().await;
        let refs: Vec<&Path> = self.dirs.iter().map(PathBuf::as_path).collect();
        let current = self.registry.load_full();
        if registry::scan(&refs) == current.scan {
            return false;
        }
        tracing::info!("plugin folders changed; reloading");
        let fresh = registry::load_all(&self.sandbox, &self.cache_dir, &refs, Some(&current)).await;
        if let Some(m) = self.sandbox.metrics() {
            m.plugin_reload(!fresh.refused.is_empty());
        }
        self.registry.store(Arc::new(fresh));
        true
    }

    /// Watches the folders in the background (hot reload).
    pub fn spawn_watcher(self: &Arc<Self>, every: std::time::Duration) {
        if every.is_zero() {
            return;
        }
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(plugins) = weak.upgrade() else { break };
                plugins.reload_if_changed().await;
            }
        });
    }
}
