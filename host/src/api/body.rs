//! Reading request bodies: the size limit, the idle timeout and the memory
//! budget, decided here for every route that reads one.
//!
//! A body is read only after the caller is authenticated and its token and
//! balance checked (the handlers take `Caller` first and call
//! [`can_afford_a_call`] before reading), so an unpaid upload is refused
//! before its first byte is buffered. Then, while it is read:
//!
//! - a declared `Content-Length` over `max_body_bytes` is refused with 413
//!   before anything is read (the request middleware does that, for every
//!   route), and the bytes actually received are counted against the same
//!   limit;
//! - a body that sends nothing for `body_idle_timeout` ends with 408;
//! - every byte held counts against `max_buffered_body_bytes`, shared by
//!   all requests. A request that finds no room waits for it (its client's
//!   upload stalls: backpressure, not an error) up to the idle timeout,
//!   then gets 503. The bytes stay counted until the request is over (its
//!   [`BodyLease`] is dropped), because the call holds them until then.
//!
//! So the memory slow or unpaid uploads can pin is at most
//! `max_buffered_body_bytes` (plus hyper's per-connection read buffers),
//! whatever the number of clients.

use crate::error::ApiError;
use crate::state::SharedState;
use axum::body::Body;
use axum::extract::Request;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt as _;
use http_body_util::BodyExt as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The shared budget of request bytes held in memory.
pub struct BodyBudget {
    room: Arc<Semaphore>,
}

impl BodyBudget {
    pub fn new(bytes: usize) -> BodyBudget {
        BodyBudget {
            room: Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS))),
        }
    }
}

/// A request's share of the budget: the bytes of its body, given back when
/// the last holder drops it.
#[derive(Clone, Default)]
pub struct BodyLease(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl BodyLease {
    fn add(&self, permit: OwnedSemaphorePermit) {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match held.as_mut() {
            Some(p) => p.merge(permit),
            None => *held = Some(permit),
        }
    }

    /// Bytes counted.
    pub fn bytes(&self) -> usize {
        let held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.as_ref().map_or(0, OwnedSemaphorePermit::num_permits)
    }
}

impl std::fmt::Debug for BodyLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BodyLease({} bytes)", self.bytes())
    }
}

/// Why reading stopped, kept beside the stream (whose error type the
/// multipart reader wraps) to become the client's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Idle,
    NoRoom,
    TooLarge,
    Broken,
}

/// A body being read under the limits.
struct Guarded {
    body: Body,
    lease: BodyLease,
    room: Arc<Semaphore>,
    idle: Duration,
    limit: usize,
    read: usize,
    stopped: Arc<Mutex<Option<Stop>>>,
}

impl Guarded {
    fn new(state: &SharedState, body: Body) -> (Guarded, BodyLease, Arc<Mutex<Option<Stop>>>) {
        let lease = BodyLease::default();
        let stopped = Arc::new(Mutex::new(None));
        let limits = &state.config.limits;
        let g = Guarded {
            body,
            lease: lease.clone(),
            room: state.bodies.room.clone(),
            idle: limits.body_idle_timeout,
            limit: limits.max_body_bytes,
            read: 0,
            stopped: stopped.clone(),
        };
        (g, lease, stopped)
    }

    fn stop(&self, why: Stop) -> Stop {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        why
    }

    /// The next data chunk, counted and paid for.
    async fn next(&mut self) -> Result<Option<Bytes>, Stop> {
        loop {
            let frame = match tokio::time::timeout(self.idle, self.body.frame()).await {
                Err(_) => return Err(self.stop(Stop::Idle)),
                Ok(None) => return Ok(None),
                Ok(Some(Err(_))) => return Err(self.stop(Stop::Broken)),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            self.read += data.len();
            if self.read > self.limit {
                return Err(self.stop(Stop::TooLarge));
            }
            let n = u32::try_from(data.len()).map_err(|_| self.stop(Stop::TooLarge))?;
            if n > 0 {
                let permit =
                    tokio::time::timeout(self.idle, self.room.clone().acquire_many_owned(n))
                        .await
                        .map_err(|_| self.stop(Stop::NoRoom))?
                        .map_err(|_| self.stop(Stop::NoRoom))?;
                self.lease.add(permit);
            }
            return Ok(Some(data));
        }
    }
}

fn answer(state: &SharedState, why: Stop) -> ApiError {
    let limits = &state.config.limits;
    match why {
        Stop::Idle => ApiError::RequestTimeout(format!(
            "the request body sent nothing for {} s",
            limits.body_idle_timeout.as_secs()
        )),
        Stop::NoRoom => ApiError::Busy(
            "the gateway is holding as many request bytes as it allows; retry shortly".into(),
        ),
        Stop::TooLarge => ApiError::BodyTooLarge(limits.max_body_bytes),
        Stop::Broken => ApiError::InvalidRequest("the request body could not be read".into()),
    }
}

/// A JSON (or any) body, whole, in one buffer sized from its declared
/// length, with its lease.
pub async fn read_whole(state: &SharedState, req: Request) -> Result<(Bytes, BodyLease), ApiError> {
    let limit = state.config.limits.max_body_bytes;
    let declared = declared_length(req.headers()).map_or(0, |n| n.min(limit as u64) as usize);
    let (mut g, lease, _) = Guarded::new(state, req.into_body());
    let mut out = BytesMut::with_capacity(declared);
    while let Some(chunk) = g.next().await.map_err(|why| answer(state, why))? {
        out.extend_from_slice(&chunk);
    }
    Ok((out.freeze(), lease))
}

/// The request with its body re-plumbed through the limits, for readers that
/// take a whole request (the multipart reader); `failure` turns the reader's
/// error back into the reason reading stopped.
pub fn guarded_request(state: &SharedState, req: Request) -> (Request, BodyLease, BodyFailure) {
    let (parts, body) = req.into_parts();
    let (g, lease, stopped) = Guarded::new(state, body);
    let stream = futures_util::stream::unfold(g, |mut g| async move {
        match g.next().await {
            Ok(Some(chunk)) => Some((Ok::<_, std::io::Error>(chunk), g)),
            Ok(None) => None,
            Err(_) => Some((Err(std::io::Error::other("request body stopped")), g)),
        }
    })
    .fuse();
    let req = Request::from_parts(parts, Body::from_stream(stream));
    (req, lease, BodyFailure(stopped))
}

/// Why a guarded body stopped, if it did.
pub struct BodyFailure(Arc<Mutex<Option<Stop>>>);

impl BodyFailure {
    /// The limit's answer when a limit stopped the body, else `otherwise`.
    pub fn or(&self, state: &SharedState, otherwise: ApiError) -> ApiError {
        let stopped = *self.0.lock().unwrap_or_else(|p| p.into_inner());
        match stopped {
            Some(why) => answer(state, why),
            None => otherwise,
        }
    }
}

/// Refuses, before a body is read, a caller whose account could not pay for
/// even the cheapest call (or whose token's quota is used up).
pub fn can_afford_a_call(
    state: &SharedState,
    caller: &crate::auth::Caller,
) -> Result<(), ApiError> {
    state
        .ledger
        .can_reserve(&caller.token.account_id, Some(&caller.token.id), 1)
        .map_err(|refusal| crate::billing::refusal_error(refusal, 1, &state.config.currency))
}

/// A declared `Content-Length` over the limit: refused before routing.
pub fn declared_too_large(headers: &axum::http::HeaderMap, limit: usize) -> bool {
    declared_length(headers).is_some_and(|n| n > limit as u64)
}

fn declared_length(headers: &axum::http::HeaderMap) -> Option<u64> {
    headers
        .get(axum::http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}
