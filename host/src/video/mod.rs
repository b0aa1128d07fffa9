//! The asynchronous video API (spec §2.1–§2.5, §3, §4.2, §4.4b–§4.6): quotes,
//! idempotent submission with caps and a full-price hold, the task state
//! machine driven by a background poller, downloads.

pub mod content;
pub mod params;
pub mod poller;
pub mod render;
pub mod size;
pub mod submit;

use tokio::sync::{Mutex, Notify};

/// Video state shared by handlers and the poller.
#[derive(Default)]
pub struct VideoRuntime {
    /// Serialises submissions: idempotency claims, quote use, the caps and
    /// the hold must be decided one submission at a time to be race-free.
    /// Submissions do no upstream I/O while holding it.
    pub submit_lock: Mutex<()>,
    /// One poller pass at a time.
    pub pass_lock: Mutex<()>,
    /// Wakes the poller (a task was just submitted).
    pub wake: Notify,
}
