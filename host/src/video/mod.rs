//! The asynchronous video API (spec §2.1–§2.5, §3, §4.2, §4.4b–§4.6): quotes,
//! idempotent submission with caps and a full-price hold, the task state
//! machine driven by a background poller, downloads.

pub mod content;
pub mod params;
pub mod poller;
pub mod render;
pub mod size;
pub mod submit;

use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{Mutex, Notify};

/// Video state shared by handlers and the poller.
#[derive(Default)]
pub struct VideoRuntime {
    /// One lock per account: an account's idempotency keys, quotes, caps and
    /// hold must be decided one submission at a time to be race-free; other
    /// accounts do not wait. Submissions do no upstream I/O while holding it.
    submit_locks: std::sync::Mutex<HashMap<String, Arc<Mutex<()>>>>,
    /// One poller pass at a time.
    pub pass_lock: Mutex<()>,
    /// Wakes the poller (a task was just submitted).
    pub wake: Notify,
}

impl VideoRuntime {
    /// The submission lock of an account.
    pub fn account_lock(&self, account: &str) -> Arc<Mutex<()>> {
        let mut map = self.submit_locks.lock().unwrap_or_else(|p| p.into_inner());
        // Forget locks nobody holds, so the map follows the active accounts.
        if map.len() > 10_000 {
            map.retain(|_, l| Arc::strong_count(l) > 1);
        }
        map.entry(account.to_string()).or_default().clone()
    }
}
