//! Request-rate and concurrency limits, and which address a request counts
//! against.
//!
//! The rate limit is an exact sliding window: the gateway remembers when each
//! of an address's last `limit` accepted requests arrived, so the
//! `limit + 1`-th inside any window of `window` seconds is refused — no
//! bucket-boundary bursts. Refused requests are not counted.

use crate::clock::SharedClock;
use ipnet::IpNet;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

const SHARDS: usize = 16;

pub struct RateLimiter {
    limit: usize,
    window_ms: i64,
    clock: SharedClock,
    shards: Vec<Mutex<HashMap<IpAddr, VecDeque<i64>>>>,
}

/// Refusal: seconds until the oldest counted request leaves the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub u64);

impl RateLimiter {
    pub fn new(limit: u32, window: std::time::Duration, clock: SharedClock) -> Self {
        Self {
            limit: limit as usize,
            window_ms: window.as_millis() as i64,
            clock,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, ip: &IpAddr) -> &Mutex<HashMap<IpAddr, VecDeque<i64>>> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        ip.hash(&mut h);
        &self.shards[h.finish() as usize % SHARDS]
    }

    /// Counts one request from `ip`, or refuses it.
    pub fn check(&self, ip: IpAddr) -> Result<(), RetryAfter> {
        let now = self.clock.now_ms();
        let mut map = self.shard(&ip).lock().unwrap_or_else(|p| p.into_inner());
        let log = map.entry(ip).or_default();
        while log.front().is_some_and(|t| now - *t >= self.window_ms) {
            log.pop_front();
        }
        if log.len() >= self.limit {
            let oldest = log.front().copied().unwrap_or(now);
            let wait_ms = (oldest + self.window_ms - now).max(1);
            return Err(RetryAfter((wait_ms as u64).div_ceil(1000)));
        }
        log.push_back(now);
        Ok(())
    }

    /// Forgets addresses with nothing left in their window (called
    /// periodically so memory follows the active client count).
    pub fn sweep(&self) {
        let now = self.clock.now_ms();
        for shard in &self.shards {
            let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
            map.retain(|_, log| log.back().is_some_and(|t| now - *t < self.window_ms));
        }
    }
}

/// Caps text calls in flight per group. Groups without a configured cap (or
/// with 0) are not limited.
pub struct GroupSlots {
    groups: HashMap<String, (u32, Arc<Semaphore>)>,
}

impl GroupSlots {
    pub fn new(caps: &HashMap<String, u32>) -> Self {
        Self {
            groups: caps
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(g, n)| (g.clone(), (*n, Arc::new(Semaphore::new(*n as usize)))))
                .collect(),
        }
    }

    /// A slot for one call, held until the permit is dropped; `Err(cap)` when
    /// the group is full.
    pub fn acquire(&self, group: &str) -> Result<Option<OwnedSemaphorePermit>, u32> {
        match self.groups.get(group) {
            None => Ok(None),
            Some((cap, sem)) => sem.clone().try_acquire_owned().map(Some).map_err(|_| *cap),
        }
    }
}

/// The address a request counts against: the TCP peer, unless the peer is a
/// trusted proxy, in which case the right-most address in `X-Forwarded-For`
/// that is not itself a trusted proxy.
pub fn client_ip(peer: IpAddr, forwarded_for: Option<&str>, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let Some(xff) = forwarded_for else {
        return peer;
    };
    let mut last = peer;
    for part in xff.rsplit(',') {
        match part.trim().parse::<IpAddr>() {
            Ok(ip) if is_trusted(&ip) => last = ip,
            Ok(ip) => return ip,
            Err(_) => return last,
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::time::Duration;

    #[test]
    fn the_361st_request_in_the_window_is_refused_exactly() {
        let clock = Arc::new(ManualClock::new(0));
        let rl = RateLimiter::new(360, Duration::from_secs(180), clock.clone());
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        for i in 0..360 {
            clock.set_ms(i * 100); // spread over 36 s
            assert!(rl.check(ip).is_ok(), "request {}", i + 1);
        }
        clock.set_ms(36_000);
        // The first request (t=0) leaves the window at t=180 s.
        assert_eq!(rl.check(ip), Err(RetryAfter(144)));
        // Another address is not affected.
        assert!(rl.check("10.0.0.2".parse().unwrap()).is_ok());
        clock.set_ms(179_999);
        assert!(rl.check(ip).is_err());
        clock.set_ms(180_000);
        assert!(rl.check(ip).is_ok());
        assert!(rl.check(ip).is_err(), "t=0.1 s is still inside the window");
        rl.sweep();
        clock.set_ms(1_000_000);
        rl.sweep();
        assert!(rl.shards.iter().all(|s| s.lock().unwrap().is_empty()));
    }

    #[test]
    fn forwarded_for_only_from_trusted_proxies() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let peer_proxy: IpAddr = "10.1.1.1".parse().unwrap();
        let stranger: IpAddr = "203.0.113.9".parse().unwrap();
        assert_eq!(client_ip(stranger, Some("1.2.3.4"), &trusted), stranger);
        assert_eq!(
            client_ip(
                peer_proxy,
                Some("1.2.3.4, 198.51.100.7, 10.2.2.2"),
                &trusted
            ),
            "198.51.100.7".parse::<IpAddr>().unwrap()
        );
        assert_eq!(client_ip(peer_proxy, None, &trusted), peer_proxy);
        assert_eq!(client_ip(peer_proxy, Some("garbage"), &trusted), peer_proxy);
    }

    #[test]
    fn group_slots() {
        let caps: HashMap<String, u32> = [("vip".to_string(), 1), ("off".to_string(), 0)].into();
        let slots = GroupSlots::new(&caps);
        let held = slots.acquire("vip").unwrap();
        assert!(held.is_some());
        assert_eq!(slots.acquire("vip").unwrap_err(), 1);
        drop(held);
        assert!(slots.acquire("vip").is_ok());
        assert!(slots.acquire("off").unwrap().is_none());
        assert!(slots.acquire("default").unwrap().is_none());
    }
}
