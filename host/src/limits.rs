//! Request-rate and concurrency limits, and which address a request counts
//! against.
//!
//! The rate limit is a sliding window kept in [`SLICES`] slices: each
//! address has a count per slice of `window / SLICES`, and a request is
//! refused while the slices that can hold a request of the last `window`
//! (the current one, the [`SLICES`] before it) hold `limit` accepted ones.
//! So no window of `window` seconds ever holds more than `limit` accepted
//! requests (no bucket-boundary bursts), and an address costs the same
//! few hundred bytes whatever the limit (a log of every accepted request's
//! time, as this was before, cost 8 bytes per request in the window: some
//! 13 MiB for one busy address at a high limit). The price: a request
//! counts for up to one slice longer than the window (2.8 s of 180 s), so
//! a client at its limit may be refused, and told to wait, up to a slice
//! longer than an exact log would. Refused requests are not counted.

use crate::clock::SharedClock;
use axum::http::HeaderMap;
use ipnet::IpNet;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

const SHARDS: usize = 16;

/// How many slices a window is cut into (see the module doc).
const SLICES: usize = 64;

/// Slots of an address's ring: the current slice and the [`SLICES`] before
/// it, which together cover any window that ends in the current slice.
const RING: usize = SLICES + 1;

pub struct RateLimiter {
    limit: u32,
    /// A slice's length: the window over [`SLICES`], rounded up, so that
    /// [`SLICES`] slices are never shorter than the window.
    slice_ms: i64,
    clock: SharedClock,
    shards: Vec<Mutex<HashMap<IpAddr, Slices>>>,
}

/// One address's accepted requests per slice.
struct Slices {
    /// The newest slice counted into (a slice number: time / slice length).
    newest: i64,
    /// The counts of slices `newest - SLICES ..= newest`, by slice number
    /// modulo [`RING`].
    counts: [u32; RING],
    /// The sum of `counts`.
    total: u32,
}

impl Slices {
    fn new(slice: i64) -> Slices {
        Slices {
            newest: slice,
            counts: [0; RING],
            total: 0,
        }
    }

    fn slot(slice: i64) -> usize {
        slice.rem_euclid(RING as i64) as usize
    }

    /// Moves the ring forward to `slice`, forgetting slices that no window
    /// ending in it can hold. A clock that stepped back counts into the
    /// newest slice.
    fn advance(&mut self, slice: i64) {
        if slice <= self.newest {
            return;
        }
        if slice - self.newest >= RING as i64 {
            self.counts = [0; RING];
            self.total = 0;
        } else {
            for s in self.newest + 1..=slice {
                let slot = Slices::slot(s);
                self.total -= self.counts[slot];
                self.counts[slot] = 0;
            }
        }
        self.newest = slice;
    }

    /// The first slice number at which fewer than `limit` are counted, if
    /// no further request is accepted.
    fn frees_at(&self, limit: u32) -> i64 {
        let mut left = self.total;
        let oldest = self.newest - SLICES as i64;
        for s in oldest..=self.newest {
            left -= self.counts[Slices::slot(s)];
            if left < limit {
                // Slice `s` stops counting once the ring has moved RING past it.
                return s + RING as i64;
            }
        }
        self.newest + RING as i64
    }
}

/// Refusal: seconds until enough counted requests leave the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub u64);

impl RateLimiter {
    pub fn new(limit: u32, window: std::time::Duration, clock: SharedClock) -> Self {
        let window_ms = (window.as_millis() as i64).max(1);
        Self {
            limit,
            slice_ms: (window_ms + SLICES as i64 - 1) / SLICES as i64,
            clock,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, ip: &IpAddr) -> &Mutex<HashMap<IpAddr, Slices>> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        ip.hash(&mut h);
        &self.shards[h.finish() as usize % SHARDS]
    }

    /// Counts one request from `ip`, or refuses it.
    pub fn check(&self, ip: IpAddr) -> Result<(), RetryAfter> {
        let now = self.clock.now_ms();
        let slice = now.div_euclid(self.slice_ms);
        let mut map = self.shard(&ip).lock().unwrap_or_else(|p| p.into_inner());
        let log = map.entry(ip).or_insert_with(|| Slices::new(slice));
        log.advance(slice);
        if log.total >= self.limit {
            let wait_ms = (log.frees_at(self.limit) * self.slice_ms - now).max(1);
            return Err(RetryAfter((wait_ms as u64).div_ceil(1000)));
        }
        log.counts[Slices::slot(log.newest)] += 1;
        log.total += 1;
        Ok(())
    }

    /// Forgets addresses with nothing left in their window (called
    /// periodically so memory follows the active client count).
    pub fn sweep(&self) {
        let slice = self.clock.now_ms().div_euclid(self.slice_ms);
        for shard in &self.shards {
            let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
            map.retain(|_, log| {
                log.advance(slice);
                log.total > 0
            });
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

/// The address a request comes from: the TCP peer, unless the peer is a
/// trusted proxy. Then the proxies' own record decides: every `Forwarded`
/// header line (its `for=` parameters), or, when there is none, every
/// `X-Forwarded-For` line, read in order as one list; the right-most entry
/// that is not itself a trusted proxy wins. Each proxy appends to the right,
/// so entries left of the first untrusted one are the client's own words and
/// are never believed. An entry that does not parse ends the walk at the
/// nearest trusted hop: the request counts against that proxy.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let peer = peer.to_canonical();
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    };
    let forwarded = values("forwarded");
    let hops: Vec<Option<IpAddr>> = if forwarded.is_empty() {
        values("x-forwarded-for")
            .iter()
            .flat_map(|line| line.split(','))
            .map(|entry| parse_hop(entry.trim()))
            .collect()
    } else {
        forwarded
            .iter()
            .flat_map(|line| line.split(','))
            .map(|element| {
                element
                    .split(';')
                    .filter_map(|pair| pair.split_once('='))
                    .find(|(k, _)| k.trim().eq_ignore_ascii_case("for"))
                    .and_then(|(_, v)| parse_hop(v.trim().trim_matches('"')))
            })
            .collect()
    };
    let mut nearest = peer;
    for hop in hops.into_iter().rev() {
        match hop {
            Some(ip) if is_trusted(&ip) => nearest = ip,
            Some(ip) => return ip,
            None => return nearest,
        }
    }
    nearest
}

/// One hop's address: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1` or
/// `[2001:db8::1]:4711`; `unknown` and obfuscated names are `None`.
pub(crate) fn parse_hop(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    if let Ok(sa) = s.parse::<std::net::SocketAddr>() {
        return Some(sa.ip().to_canonical());
    }
    let bracketed = s.strip_prefix('[')?.split(']').next()?;
    bracketed.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
}

/// What a client address is counted as: itself for IPv4, its network of
/// `v6_prefix` bits for IPv6 (one host usually holds a whole /64, so
/// counting single addresses would let it rotate around any limit).
pub fn counted_as(ip: IpAddr, v6_prefix: u8) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => ipnet::Ipv6Net::new(v6, v6_prefix.min(128))
            .map(|n| IpAddr::V6(n.network()))
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::time::Duration;

    #[test]
    fn the_361st_request_in_the_window_is_refused_and_retry_after_says_when() {
        let clock = Arc::new(ManualClock::new(0));
        let rl = RateLimiter::new(360, Duration::from_secs(180), clock.clone());
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        for i in 0..360 {
            clock.set_ms(i * 100); // spread over 36 s
            assert!(rl.check(ip).is_ok(), "request {}", i + 1);
        }
        clock.set_ms(36_000);
        // The first request (t=0, slice 0 of 2,813 ms) stops counting when
        // slice 65 begins: at 182.845 s, one slice later than an exact log.
        assert_eq!(rl.check(ip), Err(RetryAfter(147)));
        // Another address is not affected.
        assert!(rl.check("10.0.0.2".parse().unwrap()).is_ok());
        clock.set_ms(182_844);
        assert!(rl.check(ip).is_err());
        clock.set_ms(182_845);
        // Slice 0 held the 29 requests of its first 2.8 s; they leave together.
        for i in 0..29 {
            assert!(rl.check(ip).is_ok(), "freed place {}", i + 1);
        }
        assert!(rl.check(ip).is_err(), "t=2.9 s is still counted");
        rl.sweep();
        assert!(!rl.shards.iter().all(|s| s.lock().unwrap().is_empty()));
        clock.set_ms(1_000_000);
        rl.sweep();
        assert!(rl.shards.iter().all(|s| s.lock().unwrap().is_empty()));
    }

    /// Random arrivals against an exact log of what was accepted: no window
    /// ever holds more than the limit; a request is refused only when the
    /// limit was reached within the window rounded up to slices plus one
    /// slice; and a client that waits its Retry-After is accepted.
    #[test]
    fn never_more_than_the_limit_in_any_window_and_never_refused_much_early() {
        for (limit, window_ms, seed) in [(5u32, 10_000i64, 1u64), (360, 180_000, 2), (3, 1_000, 3)]
        {
            let clock = Arc::new(ManualClock::new(0));
            let rl = RateLimiter::new(
                limit,
                Duration::from_millis(window_ms as u64),
                clock.clone(),
            );
            let ip: IpAddr = "192.0.2.7".parse().unwrap();
            let counted_ms = RING as i64 * rl.slice_ms;
            assert!(counted_ms - window_ms < rl.slice_ms + SLICES as i64);
            let since =
                |accepted: &[i64], from: i64| accepted.iter().filter(|t| **t > from).count();
            let mut accepted: Vec<i64> = Vec::new();
            let (mut now, mut state) = (0i64, seed);
            // When a refused client may come back, until someone is accepted.
            let mut retry_at: Option<i64> = None;
            let mut refusals = 0;
            for _ in 0..20_000 {
                // A small linear congruential generator: gaps from 0 to a
                // twenty-fifth of the window over the limit, so arrivals run
                // at about twice the limit's pace.
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                now += ((state >> 33) as i64) % (window_ms / 25 / limit as i64 + 2);
                clock.set_ms(now);
                match rl.check(ip) {
                    Ok(()) => {
                        assert!(
                            since(&accepted, now - window_ms) < limit as usize,
                            "over at {now}"
                        );
                        accepted.push(now);
                        retry_at = None;
                    }
                    Err(RetryAfter(secs)) => {
                        refusals += 1;
                        assert!(
                            since(&accepted, now - counted_ms) >= limit as usize,
                            "refused early at {now}"
                        );
                        assert!(
                            retry_at.is_none_or(|t| now < t),
                            "refused after its Retry-After"
                        );
                        let at = now + secs as i64 * 1000;
                        retry_at = Some(retry_at.map_or(at, |t| t.min(at)));
                    }
                }
            }
            assert!(
                refusals > 100 && accepted.len() > 100,
                "the limit was reached often"
            );
        }
    }

    #[test]
    fn a_refused_client_that_waits_its_retry_after_is_accepted() {
        let clock = Arc::new(ManualClock::new(5_000));
        let rl = RateLimiter::new(3, Duration::from_secs(60), clock.clone());
        let ip: IpAddr = "192.0.2.8".parse().unwrap();
        for t in [5_000, 20_000, 40_000] {
            clock.set_ms(t);
            assert!(rl.check(ip).is_ok());
        }
        clock.set_ms(41_000);
        let Err(RetryAfter(secs)) = rl.check(ip) else {
            panic!("the fourth is refused")
        };
        clock.set_ms(41_000 + secs as i64 * 1000 - 1_000);
        assert!(rl.check(ip).is_err(), "not a whole second early");
        clock.set_ms(41_000 + secs as i64 * 1000);
        assert!(rl.check(ip).is_ok());
    }

    #[test]
    fn a_clock_that_steps_back_counts_into_the_newest_slice() {
        let clock = Arc::new(ManualClock::new(100_000));
        let rl = RateLimiter::new(2, Duration::from_secs(10), clock.clone());
        let ip: IpAddr = "192.0.2.9".parse().unwrap();
        assert!(rl.check(ip).is_ok());
        clock.set_ms(50_000);
        assert!(rl.check(ip).is_ok());
        assert!(rl.check(ip).is_err());
        clock.set_ms(100_000 + 10_000 + 2 * rl.slice_ms);
        assert!(rl.check(ip).is_ok());
    }

    fn headers(lines: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in lines {
            h.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn forwarded_for_only_from_trusted_proxies() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let proxy = ip("10.1.1.1");
        let stranger = ip("203.0.113.9");
        let xff = |v: &str| headers(&[("x-forwarded-for", v)]);
        assert_eq!(client_ip(stranger, &xff("1.2.3.4"), &trusted), stranger);
        assert_eq!(
            client_ip(proxy, &xff("1.2.3.4, 198.51.100.7, 10.2.2.2"), &trusted),
            ip("198.51.100.7")
        );
        assert_eq!(client_ip(proxy, &HeaderMap::new(), &trusted), proxy);
        assert_eq!(client_ip(proxy, &xff("garbage"), &trusted), proxy);
        assert_eq!(
            client_ip(proxy, &xff("198.51.100.7, garbage, 10.2.2.2"), &trusted),
            ip("10.2.2.2"),
            "a broken chain counts against the nearest trusted hop"
        );
        // A v4-mapped peer is the same proxy.
        assert_eq!(
            client_ip(ip("::ffff:10.1.1.1"), &xff("198.51.100.7"), &trusted),
            ip("198.51.100.7")
        );
    }

    #[test]
    fn every_forwarded_for_line_is_read_in_order() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let proxy = ip("10.1.1.1");
        // The client forged the first line; the proxy appended the second.
        let two_lines = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "198.51.100.7"),
        ]);
        assert_eq!(client_ip(proxy, &two_lines, &trusted), ip("198.51.100.7"));
        // The same, comma-joined, and with a second trusted proxy.
        let joined = headers(&[("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.9.9.9")]);
        assert_eq!(client_ip(proxy, &joined, &trusted), ip("198.51.100.7"));
        let mixed = headers(&[
            ("x-forwarded-for", "6.6.6.6, 7.7.7.7"),
            ("x-forwarded-for", "198.51.100.7, 10.9.9.9"),
            ("x-forwarded-for", "10.8.8.8"),
        ]);
        assert_eq!(client_ip(proxy, &mixed, &trusted), ip("198.51.100.7"));
        let v6 = headers(&[("x-forwarded-for", "2001:db8::7, [2001:db8::8]:443")]);
        assert_eq!(client_ip(proxy, &v6, &trusted), ip("2001:db8::8"));
    }

    #[test]
    fn forwarded_header_lines_win_over_x_forwarded_for() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let proxy = ip("10.1.1.1");
        let h = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("forwarded", "for=6.6.6.6;proto=https"),
            (
                "forwarded",
                r#"for="[2001:db8:cafe::17]:4711";by=10.1.1.1, for=10.2.2.2"#,
            ),
        ]);
        assert_eq!(client_ip(proxy, &h, &trusted), ip("2001:db8:cafe::17"));
        let h = headers(&[("forwarded", "for=192.0.2.60:8080, For=10.2.2.2")]);
        assert_eq!(client_ip(proxy, &h, &trusted), ip("192.0.2.60"));
        let h = headers(&[("forwarded", "for=unknown, for=10.2.2.2")]);
        assert_eq!(client_ip(proxy, &h, &trusted), ip("10.2.2.2"));
    }

    #[test]
    fn ipv6_clients_count_per_network() {
        assert_eq!(
            counted_as(ip("2001:db8:1:2:aaaa::1"), 64),
            ip("2001:db8:1:2::")
        );
        assert_eq!(
            counted_as(ip("2001:db8:1:2:bbbb::9"), 64),
            counted_as(ip("2001:db8:1:2:aaaa::1"), 64)
        );
        assert_eq!(counted_as(ip("2001:db8::1"), 128), ip("2001:db8::1"));
        assert_eq!(counted_as(ip("203.0.113.9"), 64), ip("203.0.113.9"));
        assert_eq!(counted_as(ip("::ffff:203.0.113.9"), 64), ip("203.0.113.9"));
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
