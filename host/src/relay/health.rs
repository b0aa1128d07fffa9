//! Channel health: in what order a call tries its model's channels, which
//! ones it skips, and what an operator sees of them (`GET
//! /admin/v1/channels`, `gateway admin channels`).
//!
//! - **Order.** Highest `priority` first. Among channels of one priority, a
//!   weighted random order: a channel of `weight` 2 comes first twice as
//!   often as one of weight 1, so traffic splits by weight and every
//!   channel of the priority is still a fallback for the others.
//! - **Rest.** After `[health] failures_to_rest` consecutive retryable
//!   failures (README, *Channels: failover and health*) a channel rests for
//!   `rest_secs`: calls try it only after every other channel, so it gets
//!   no traffic while others answer, yet a call is never refused while it
//!   might. When the rest is
//!   over one call probes it, first among its priority; an answer brings it
//!   back, a failure sends it to rest again. A probe that never reports (a
//!   higher priority answered first) is let through again after another
//!   rest.
//! - **Disabled.** A vendor that answers 401 or 403 refuses the channel's
//!   key: the channel is taken out of service — never tried — until an
//!   operator enables it again (`POST /admin/v1/channels/{name}/enable`) or
//!   a reload changes its config. A 401 disables at once; a 403 (which
//!   vendors also use for one request's permissions) after
//!   `failures_to_rest` in a row.
//! - **What is shown.** Each channel's state, its last `window` attempts'
//!   error rate and latency (mean and 95th percentile of answered
//!   attempts), and totals since start, untranslatable answers among them.
//!
//! Health lives beside the channel config, keyed by channel name, and is
//! not persisted: a restart starts every channel healthy. Time comes from
//! the injected clock, so tests move it instead of waiting.

use crate::clock::SharedClock;
use crate::config::{ChannelConfig, HealthConfig};
use rand::Rng;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How one attempt on a channel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The channel answered (the call may still have been refused by the
    /// vendor as invalid: that is the request's fault, not the channel's).
    Answered,
    /// A retryable failure: connect error, timeout, 429, 5xx, a guest that
    /// failed.
    Failed,
    /// A `2xx` answer the adapter could not translate: a failure, counted
    /// apart too.
    Untranslatable,
    /// The vendor refused the channel's key (the adapter's
    /// `upstream_auth_failed`), with the vendor's status: a 401 disables
    /// the channel at once; a 403 (or Gemini's 400 about the key) only
    /// after `failures_to_rest` in a row, since vendors also use it for one
    /// request's permissions.
    KeyRefused(u16),
}

#[derive(Debug, Clone, Copy)]
struct Attempt {
    ok: bool,
    latency_ms: u64,
}

#[derive(Debug, Default)]
struct ChannelHealth {
    /// What of the channel's config this health belongs to (see
    /// [`fingerprint`]): a call still running on a config a reload
    /// replaced must not mark the new one.
    fingerprint: u64,
    consecutive_failures: u32,
    /// Consecutive refusals of the key (see [`Outcome::KeyRefused`]).
    consecutive_refusals: u32,
    /// Resting until this time (clock seconds).
    resting_until: Option<i64>,
    /// A probe call was let through at this time and has not reported.
    probe_since: Option<i64>,
    disabled: Option<String>,
    recent: VecDeque<Attempt>,
    attempts: u64,
    failures: u64,
    untranslatable: u64,
}

/// Every channel's health.
pub struct Health {
    config: HealthConfig,
    clock: SharedClock,
    channels: Mutex<foldhash::HashMap<String, ChannelHealth>>,
}

/// What a channel's state is, for the admin view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum State {
    Healthy,
    Resting { until: i64 },
    Probing,
    Disabled { reason: String },
}

/// One channel as the admin API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ChannelView {
    pub name: String,
    pub adapter: String,
    pub models: Vec<String>,
    pub priority: i32,
    pub weight: u32,
    #[serde(flatten)]
    pub state: State,
    pub consecutive_failures: u32,
    /// Over the last `window` attempts.
    pub recent_attempts: usize,
    pub recent_error_rate: f64,
    pub latency_ms_mean: Option<u64>,
    pub latency_ms_p95: Option<u64>,
    /// Since start.
    pub attempts: u64,
    pub failures: u64,
    pub untranslatable: u64,
}

/// A hash of what decides whether a channel works: its adapter, base URL,
/// key and options. Compared only within one process (twice per call), so
/// a fast hash with a fixed seed.
fn fingerprint(ch: &ChannelConfig) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().hash_one((
        &ch.adapter,
        &ch.base_url,
        &ch.key,
        &ch.options,
    ))
}

/// The health kept for the channel named `name`; a new one, on config
/// `fp`, when there is none. Looked up by `&str` first: `entry` would take
/// (so allocate) a key on every call. (Never `None`: the map's API has no
/// borrowed-key insert that returns the value.)
fn health_of<'m>(
    map: &'m mut foldhash::HashMap<String, ChannelHealth>,
    name: &str,
    fp: u64,
) -> Option<&'m mut ChannelHealth> {
    if !map.contains_key(name) {
        map.insert(
            name.to_owned(),
            ChannelHealth {
                fingerprint: fp,
                ..ChannelHealth::default()
            },
        );
    }
    map.get_mut(name)
}

impl Health {
    pub fn new(config: HealthConfig, clock: SharedClock) -> Health {
        Health {
            config,
            clock,
            channels: Mutex::new(foldhash::HashMap::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, foldhash::HashMap<String, ChannelHealth>> {
        // A panic while holding the lock leaves counters, never money:
        // carry on with them.
        self.channels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The order a call tries `channels` (sorted by priority, highest
    /// first): see the module's doc. Disabled channels are left out;
    /// resting ones come last, the soonest to wake first.
    pub fn plan(&self, channels: &[Arc<ChannelConfig>]) -> Vec<Arc<ChannelConfig>> {
        let now = self.clock.now_secs();
        let mut rng = rand::rng();
        let mut map = self.lock();
        // (priority, probe, weighted key, channel)
        let mut ready: Vec<(i32, bool, f64, Arc<ChannelConfig>)> =
            Vec::with_capacity(channels.len());
        let mut resting: Vec<(i64, Arc<ChannelConfig>)> = Vec::new();
        for ch in channels {
            let fp = fingerprint(ch);
            let Some(h) = health_of(&mut map, &ch.name, fp) else {
                continue;
            };
            if h.fingerprint != fp {
                // Its config changed (a reload): it starts healthy.
                *h = ChannelHealth {
                    fingerprint: fp,
                    ..ChannelHealth::default()
                };
            }
            if h.disabled.is_some() {
                continue;
            }
            let mut probe = false;
            if let Some(until) = h.resting_until {
                let probe_due = now >= until
                    && h.probe_since
                        .is_none_or(|since| now >= since + self.config.rest_secs);
                if !probe_due {
                    resting.push((until, ch.clone()));
                    continue;
                }
                h.probe_since = Some(now);
                probe = true;
            }
            // Efraimidis–Spirakis: sorting by u^(1/w) is a weighted random
            // order.
            let u: f64 = rng.random_range(f64::EPSILON..=1.0);
            let key = u.powf(1.0 / f64::from(ch.weight.max(1)));
            ready.push((ch.priority, probe, key, ch.clone()));
        }
        // A probe goes first among its priority, so that it happens.
        ready.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.total_cmp(&a.2)));
        resting.sort_by_key(|(until, _)| *until);
        ready
            .into_iter()
            .map(|(_, _, _, ch)| ch)
            .chain(resting.into_iter().map(|(_, ch)| ch))
            .collect()
    }

    /// Records one attempt's outcome on `channel` and how long it took. An
    /// outcome for a config a reload has since replaced is dropped.
    pub fn record(&self, channel: &ChannelConfig, outcome: Outcome, latency: Duration) {
        let now = self.clock.now_secs();
        let fp = fingerprint(channel);
        let mut map = self.lock();
        let Some(h) = health_of(&mut map, &channel.name, fp) else {
            return;
        };
        if h.fingerprint != fp {
            return;
        }
        let ok = outcome == Outcome::Answered;
        h.attempts += 1;
        h.recent.push_back(Attempt {
            ok,
            latency_ms: latency.as_millis() as u64,
        });
        while h.recent.len() > self.config.window {
            h.recent.pop_front();
        }
        h.probe_since = None;
        if ok {
            h.consecutive_failures = 0;
            h.consecutive_refusals = 0;
            h.resting_until = None;
            return;
        }
        h.failures += 1;
        match outcome {
            Outcome::Untranslatable => h.untranslatable += 1,
            Outcome::KeyRefused(status) => {
                h.consecutive_refusals += 1;
                if status == 401 || h.consecutive_refusals >= self.config.failures_to_rest {
                    tracing::error!(
                        channel = %channel.name,
                        status,
                        "the vendor refused the channel's key; the channel is disabled until enabled again"
                    );
                    h.disabled = Some(format!(
                        "the vendor refused the channel's key (status {status})"
                    ));
                }
            }
            _ => {}
        }
        h.consecutive_failures += 1;
        if h.consecutive_failures >= self.config.failures_to_rest {
            if h.resting_until.is_none_or(|u| u <= now) {
                tracing::warn!(
                    channel = %channel.name,
                    failures = h.consecutive_failures,
                    "channel resting for {} s",
                    self.config.rest_secs
                );
            }
            h.resting_until = Some(now.saturating_add(self.config.rest_secs));
        }
    }

    /// Puts a disabled or resting channel back in service; false when the
    /// gateway has no channel of that name.
    pub fn enable(&self, channels: &[Arc<ChannelConfig>], name: &str) -> bool {
        if !channels.iter().any(|c| c.name == name) {
            return false;
        }
        self.lock().remove(name);
        true
    }

    /// Forgets the health of channels a reload removed. (A channel whose
    /// config changed starts healthy by its fingerprint.)
    pub fn forget_removed(&self, now_serving: &[Arc<ChannelConfig>]) {
        self.lock()
            .retain(|name, _| now_serving.iter().any(|c| &c.name == name));
    }

    /// Every channel of `channels` with its health.
    pub fn view(&self, channels: &[Arc<ChannelConfig>]) -> Vec<ChannelView> {
        let now = self.clock.now_secs();
        let map = self.lock();
        let empty = ChannelHealth::default();
        channels
            .iter()
            .map(|ch| {
                let h = map
                    .get(&ch.name)
                    .filter(|h| h.fingerprint == fingerprint(ch))
                    .unwrap_or(&empty);
                let state = match (&h.disabled, h.resting_until, h.probe_since) {
                    (Some(reason), _, _) => State::Disabled {
                        reason: reason.clone(),
                    },
                    (None, Some(_), Some(_)) => State::Probing,
                    (None, Some(until), None) if until > now => State::Resting { until },
                    (None, Some(_), None) => State::Probing,
                    (None, None, _) => State::Healthy,
                };
                let failed = h.recent.iter().filter(|a| !a.ok).count();
                let mut answered: Vec<u64> = h
                    .recent
                    .iter()
                    .filter(|a| a.ok)
                    .map(|a| a.latency_ms)
                    .collect();
                answered.sort_unstable();
                let mean = (!answered.is_empty())
                    .then(|| answered.iter().sum::<u64>() / answered.len() as u64);
                let p95 = (!answered.is_empty())
                    .then(|| answered[(answered.len() * 95).div_ceil(100) - 1]);
                ChannelView {
                    name: ch.name.clone(),
                    adapter: ch.adapter.clone(),
                    models: ch.models.clone(),
                    priority: ch.priority,
                    weight: ch.weight,
                    state,
                    consecutive_failures: h.consecutive_failures,
                    recent_attempts: h.recent.len(),
                    recent_error_rate: if h.recent.is_empty() {
                        0.0
                    } else {
                        failed as f64 / h.recent.len() as f64
                    },
                    latency_ms_mean: mean,
                    latency_ms_p95: p95,
                    attempts: h.attempts,
                    failures: h.failures,
                    untranslatable: h.untranslatable,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::collections::HashMap;

    fn channel(name: &str, priority: i32, weight: u32) -> Arc<ChannelConfig> {
        Arc::new(ChannelConfig {
            models: vec!["m".into()],
            priority,
            weight,
            ..ChannelConfig::for_test(name, "http://127.0.0.1:9")
        })
    }

    fn health() -> (Health, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_000_000_000_000));
        let config = HealthConfig {
            failures_to_rest: 3,
            rest_secs: 30,
            window: 10,
        };
        (Health::new(config, clock.clone()), clock)
    }

    fn names(plan: &[Arc<ChannelConfig>]) -> Vec<&str> {
        plan.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn priorities_come_first_and_weights_split_the_first_place() {
        let (h, _) = health();
        let channels = [channel("hi", 5, 1), channel("a", 0, 1), channel("b", 0, 3)];
        let mut firsts = HashMap::new();
        for _ in 0..4000 {
            let plan = h.plan(&channels);
            assert_eq!(plan[0].name, "hi");
            assert_eq!(plan.len(), 3);
            *firsts.entry(plan[1].name.clone()).or_insert(0) += 1;
        }
        // b (weight 3) comes before a (weight 1) about 3 times in 4.
        let b = firsts["b"] as f64 / 4000.0;
        assert!((0.70..0.80).contains(&b), "{b}");
    }

    #[test]
    fn failures_send_a_channel_to_rest_and_a_probe_brings_it_back() {
        let (h, clock) = health();
        let channels = [channel("a", 0, 1), channel("b", 0, 1)];
        let ms = Duration::from_millis(5);
        for _ in 0..2 {
            h.record(&channels[0], Outcome::Failed, ms);
        }
        assert_eq!(h.plan(&channels).len(), 2);
        h.record(&channels[0], Outcome::Failed, ms);
        // Resting: last, however the weights fall.
        for _ in 0..50 {
            assert_eq!(names(&h.plan(&channels)), ["b", "a"]);
        }
        assert!(matches!(h.view(&channels)[0].state, State::Resting { .. }));
        clock.advance_ms(30_000);
        // The rest is over: one call probes it in its place; the others
        // still see it resting until the probe reports.
        let probes = (0..50).filter(|_| h.plan(&channels)[0].name == "a").count();
        assert!(probes <= 1, "{probes}");
        assert_eq!(h.view(&channels)[0].state, State::Probing);
        h.record(&channels[0], Outcome::Answered, ms);
        assert_eq!(h.view(&channels)[0].state, State::Healthy);
        assert_eq!(h.view(&channels)[0].consecutive_failures, 0);
        // A failed probe rests it again at once.
        for _ in 0..3 {
            h.record(&channels[0], Outcome::Failed, ms);
        }
        clock.advance_ms(30_000);
        let _ = h.plan(&channels);
        h.record(&channels[0], Outcome::Failed, ms);
        assert!(matches!(h.view(&channels)[0].state, State::Resting { .. }));
    }

    #[test]
    fn a_refused_key_disables_the_channel_until_enabled() {
        let (h, _) = health();
        let channels = [channel("a", 0, 1), channel("b", 0, 1)];
        h.record(&channels[0], Outcome::KeyRefused(401), Duration::ZERO);
        for _ in 0..20 {
            assert_eq!(names(&h.plan(&channels)), ["b"]);
        }
        assert!(matches!(h.view(&channels)[0].state, State::Disabled { .. }));
        assert!(h.enable(&channels, "a"));
        assert!(!h.enable(&channels, "nope"));
        assert_eq!(h.plan(&channels).len(), 2);
        // A 403 may be one request's permissions: only three in a row
        // disable (the first ones count as failures).
        h.record(&channels[0], Outcome::KeyRefused(403), Duration::ZERO);
        h.record(&channels[0], Outcome::KeyRefused(403), Duration::ZERO);
        assert!(!matches!(
            h.view(&channels)[0].state,
            State::Disabled { .. }
        ));
        h.record(&channels[0], Outcome::KeyRefused(403), Duration::ZERO);
        assert!(matches!(h.view(&channels)[0].state, State::Disabled { .. }));
    }

    #[test]
    fn a_changed_config_starts_healthy_and_late_outcomes_of_the_old_one_are_dropped() {
        let (h, _) = health();
        let old = [channel("a", 0, 1)];
        h.record(&old[0], Outcome::KeyRefused(401), Duration::ZERO);
        assert!(h.plan(&old).is_empty());
        let mut fixed = (*old[0]).clone();
        fixed.key = Some("a new key".into());
        let new = [Arc::new(fixed)];
        assert_eq!(h.view(&new)[0].state, State::Healthy);
        assert_eq!(names(&h.plan(&new)), ["a"]);
        // A call that started on the old config reports late: ignored.
        h.record(&old[0], Outcome::KeyRefused(401), Duration::ZERO);
        assert_eq!(names(&h.plan(&new)), ["a"]);
        h.forget_removed(&[]);
        assert_eq!(h.view(&new)[0].attempts, 0);
    }

    #[test]
    fn the_view_shows_error_rate_and_latency_over_the_window() {
        let (h, _) = health();
        let channels = [channel("a", 0, 1)];
        for i in 1..=8u64 {
            h.record(
                &channels[0],
                Outcome::Answered,
                Duration::from_millis(i * 10),
            );
        }
        h.record(
            &channels[0],
            Outcome::Untranslatable,
            Duration::from_millis(1),
        );
        h.record(&channels[0], Outcome::Failed, Duration::from_millis(1));
        let v = &h.view(&channels)[0];
        assert_eq!(
            (v.recent_attempts, v.attempts, v.failures, v.untranslatable),
            (10, 10, 2, 1)
        );
        assert!((v.recent_error_rate - 0.2).abs() < 1e-9);
        assert_eq!(v.latency_ms_mean, Some(45));
        assert_eq!(v.latency_ms_p95, Some(80));
        // The window keeps the last 10 only.
        for _ in 0..10 {
            h.record(&channels[0], Outcome::Answered, Duration::from_millis(1));
        }
        let v = &h.view(&channels)[0];
        assert_eq!((v.recent_attempts, v.recent_error_rate), (10, 0.0));
    }
}
