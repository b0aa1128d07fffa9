//! Time for everything that has rules about time (quotes, task expiry, download
//! windows, webhook retries, rate-limit windows, token expiry).
//!
//! Production uses [`SystemClock`]; tests use [`ManualClock`] and move it, so no
//! test ever waits for a real 30 minutes, 6 hours or 24 hours.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time, in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;

    fn now_secs(&self) -> i64 {
        self.now_ms().div_euclid(1000)
    }
}

pub type SharedClock = Arc<dyn Clock>;

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        Self {
            now_ms: AtomicI64::new(start_ms),
        }
    }

    /// Starts at the current real time, so ids and logs look plausible.
    pub fn starting_now() -> Self {
        Self::new(SystemClock.now_ms())
    }

    pub fn advance_ms(&self, ms: i64) {
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn advance_secs(&self, secs: i64) {
        self.advance_ms(secs * 1000);
    }

    pub fn set_ms(&self, ms: i64) {
        self.now_ms.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(1_000);
        assert_eq!(c.now_secs(), 1);
        c.advance_secs(6 * 3600);
        assert_eq!(c.now_secs(), 1 + 6 * 3600);
        c.set_ms(-1);
        assert_eq!(c.now_secs(), -1);
    }
}
