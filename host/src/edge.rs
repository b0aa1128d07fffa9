//! The edge: how client connections are accepted, kept and ended, around the
//! HTTP router. It owns what the router cannot see because no request exists
//! yet (or any more):
//!
//! - **Connection caps**, in all and per client address (IPv6 per network,
//!   as the rate limit counts). A connection over a cap gets a 503 envelope
//!   and is closed before anything is read from it. The cap in all is kept
//!   below the process's descriptor limit (raised to its hard limit at
//!   start), leaving room for upstream connections and files, so a flood of
//!   idle sockets can never starve the gateway of descriptors.
//! - **Time limits of a connection**: a request head must arrive whole
//!   within `header_read_timeout` of its first byte (of the connection's
//!   opening, for the first request); a kept-alive connection with no
//!   request for `keepalive_idle_timeout` is closed; a client that accepts
//!   no bytes for `write_timeout` is dropped. The first two run only while
//!   no request is in flight on the connection (the router's own timeouts
//!   cover a request's body and its answer); the edge learns that from the
//!   answers' bodies, which mark the end of their request when dropped.
//!   Dropping a client that stops reading ends its answer's body, which is
//!   how a stream learns that its client is gone (it settles for what was
//!   delivered and releases its guest instance).
//! - **hyper's own answers**: an unreadable request line or headers, or
//!   headers over `max_header_bytes`, make hyper write a bare 400 / 414 /
//!   431 without a body. The edge swaps that (told apart from the routers'
//!   answers by its missing `x-request-id`) for the same status with the
//!   error envelope, so clients see one error shape everywhere HTTP still
//!   allows a body. A head cut short by its timeout gets a 408 envelope,
//!   best effort, before the close.

use crate::config::LimitsConfig;
use crate::error::ApiError;
use crate::ids::new_request_id;
use crate::limits::counted_as;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use futures_util::task::AtomicWaker;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future as _;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// Descriptors kept back from the connection cap for everything else the
/// process opens (upstream connections take one per call in flight, so the
/// clients get half of what remains).
const RESERVED_DESCRIPTORS: u64 = 256;

/// How long shutdown waits for connections with requests in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// The edge's settings, from `[limits]`.
#[derive(Debug, Clone)]
pub struct EdgeLimits {
    pub header_read_timeout: Duration,
    pub keepalive_idle_timeout: Duration,
    pub write_timeout: Duration,
    pub max_header_bytes: usize,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub ipv6_prefix_len: u8,
}

impl EdgeLimits {
    /// The configured limits, the connection cap lowered to what the
    /// descriptor limit allows (raised to its hard limit first).
    pub fn from_config(l: &LimitsConfig) -> EdgeLimits {
        let descriptors = rlimit::increase_nofile_limit(u64::MAX).unwrap_or(1024);
        let fits = usize::try_from(descriptors.saturating_sub(RESERVED_DESCRIPTORS) / 2)
            .unwrap_or(usize::MAX)
            .max(16);
        if fits < l.max_connections {
            tracing::warn!(
                "limits.max_connections = {} is more than {descriptors} file descriptors allow; serving at most {fits} client connections",
                l.max_connections
            );
        }
        EdgeLimits {
            header_read_timeout: l.header_read_timeout,
            keepalive_idle_timeout: l.keepalive_idle_timeout,
            write_timeout: l.write_timeout,
            max_header_bytes: l.max_header_bytes,
            max_connections: l.max_connections.min(fits),
            max_connections_per_ip: l.max_connections_per_ip,
            ipv6_prefix_len: l.ipv6_prefix_len,
        }
    }
}

/// Serves `router` on `listener` until `stop`, then waits (bounded) for the
/// connections with requests in flight.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: EdgeLimits,
    stop: CancellationToken,
) {
    let table = Arc::new(Connections::new(&limits));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        // The edge's own header timeout applies (see `GuardedIo`).
        .header_read_timeout(None)
        .max_buf_size(limits.max_header_bytes);
    let limits = Arc::new(limits);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors (or another transient failure):
                    // back off instead of spinning on the error.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let slot = match table.admit(peer.ip()) {
            Ok(slot) => slot,
            Err(refusal) => {
                tokio::spawn(refuse(tcp, refusal));
                continue;
            }
        };
        // Answers are small and written in one go; Nagle's algorithm would
        // only hold them back waiting for the client's delayed ACK.
        let _ = tcp.set_nodelay(true);
        let activity = Arc::new(Activity::default());
        let io = TokioIo::new(GuardedIo::new(tcp, activity.clone(), limits.clone()));
        let app = router.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let mut req = crate::api::normalise_prefix(req.map(Body::new));
            req.extensions_mut().insert(ConnectInfo(peer));
            let in_flight = InFlight::begin(&activity);
            let call = app.clone().oneshot(req);
            async move {
                let resp = call.await?;
                // The request ends when its answer's body is dropped:
                // written out, or abandoned with the connection.
                Ok::<_, Infallible>(resp.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _held = &in_flight;
                        frame
                    }))
                }))
            }
        });
        let conn = builder
            .serve_connection_with_upgrades(io, service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _slot = slot;
            if let Err(e) = conn.await {
                tracing::debug!("connection from {peer} ended: {e}");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("shutdown: connections still open after {SHUTDOWN_GRACE:?}; closing them");
    }
}

/// Answers a connection over a cap with the envelope, then closes it;
/// never waits on the client for more than a second.
async fn refuse(mut tcp: TcpStream, refusal: ApiError) {
    let bytes = refusal.raw_response(&new_request_id());
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        tcp.write_all(&bytes).await?;
        tcp.shutdown().await
    })
    .await;
}

// ---------------------------------------------------------------------------
// Connection caps.

struct Connections {
    max_total: usize,
    max_per_ip: usize,
    v6_prefix: u8,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One admitted connection; its place is given back when dropped.
struct Slot {
    table: Arc<Connections>,
    key: IpAddr,
}

impl Connections {
    fn new(l: &EdgeLimits) -> Connections {
        Connections {
            max_total: l.max_connections,
            max_per_ip: l.max_connections_per_ip,
            v6_prefix: l.ipv6_prefix_len,
            open: Mutex::new((0, HashMap::new())),
        }
    }

    fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Slot, ApiError> {
        let key = counted_as(peer, self.v6_prefix);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.0 >= self.max_total {
            return Err(ApiError::TooManyConnections(format!(
                "(the gateway's limit is {})",
                self.max_total
            )));
        }
        let mine = open.1.get(&key).copied().unwrap_or(0);
        if self.max_per_ip > 0 && mine >= self.max_per_ip {
            return Err(ApiError::TooManyConnections(format!(
                "from {key} (the limit is {} per address)",
                self.max_per_ip
            )));
        }
        open.0 += 1;
        open.1.insert(key, mine + 1);
        Ok(Slot {
            table: self.clone(),
            key,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.table.open.lock().unwrap_or_else(|p| p.into_inner());
        open.0 = open.0.saturating_sub(1);
        if let Some(n) = open.1.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.1.remove(&self.key);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Requests in flight on one connection.

#[derive(Default)]
struct Activity {
    in_flight: AtomicUsize,
    /// Requests finished so far: a change tells the reader a new idle period
    /// began.
    finished: AtomicU64,
    /// The connection's reader, woken when the last request in flight ends
    /// so that its idle timer starts even if the client sends nothing.
    reader: AtomicWaker,
}

struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(activity: &Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.finished.fetch_add(1, Ordering::SeqCst);
        self.0.reader.wake();
    }
}

// ---------------------------------------------------------------------------
// The socket, with the edge's timers and hyper's bare answers replaced.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A request is in flight: no read deadline here.
    Busy,
    /// Waiting for the next request: `keepalive_idle_timeout`.
    Idle,
    /// A request head is arriving: `header_read_timeout` from its start.
    Head,
}

struct GuardedIo {
    io: TcpStream,
    activity: Arc<Activity>,
    limits: Arc<EdgeLimits>,
    phase: Phase,
    seen_finished: u64,
    read_deadline: Pin<Box<Sleep>>,
    write_armed: bool,
    write_deadline: Pin<Box<Sleep>>,
    /// An envelope answer replacing hyper's bare one, and how much of it
    /// is written.
    replacement: Option<(Vec<u8>, usize)>,
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what.to_string())
}

impl GuardedIo {
    fn new(io: TcpStream, activity: Arc<Activity>, limits: Arc<EdgeLimits>) -> GuardedIo {
        let now = Instant::now();
        GuardedIo {
            io,
            activity,
            // A new connection must start its first request promptly.
            phase: Phase::Head,
            seen_finished: 0,
            read_deadline: Box::pin(tokio::time::sleep_until(now + limits.header_read_timeout)),
            write_armed: false,
            write_deadline: Box::pin(tokio::time::sleep_until(now + limits.write_timeout)),
            limits,
            replacement: None,
        }
    }

    /// Starts, or keeps, the read deadline that fits the connection's state.
    fn track_phase(&mut self) {
        if self.activity.in_flight.load(Ordering::SeqCst) > 0 {
            self.phase = Phase::Busy;
            return;
        }
        let finished = self.activity.finished.load(Ordering::SeqCst);
        if self.phase == Phase::Busy || finished != self.seen_finished {
            self.seen_finished = finished;
            self.phase = Phase::Idle;
            let at = Instant::now() + self.limits.keepalive_idle_timeout;
            self.read_deadline.as_mut().reset(at);
        }
    }

    /// Applies the write timeout to one write attempt's outcome.
    fn timed_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match r {
            Poll::Pending => {
                if !self.write_armed {
                    self.write_armed = true;
                    let at = Instant::now() + self.limits.write_timeout;
                    self.write_deadline.as_mut().reset(at);
                }
                if self.write_deadline.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(timed_out(
                        "the client accepted no bytes within the write timeout",
                    )));
                }
                Poll::Pending
            }
            ready => {
                self.write_armed = false;
                ready
            }
        }
    }

    /// Writes what is left of a replacement answer; ready once it is out.
    fn flush_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = &mut self.replacement {
            if *done >= bytes.len() {
                self.replacement = None;
                break;
            }
            let r = Pin::new(&mut self.io).poll_write(cx, &bytes[*done..]);
            let written = match r {
                Poll::Ready(Ok(n)) => n,
                other => return self.timed_write(cx, other).map_ok(|_| ()),
            };
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            if let Some((_, done)) = &mut self.replacement {
                *done += written;
            }
        }
        Poll::Ready(Ok(()))
    }

    /// hyper's own answer to a request it could not read, as the envelope
    /// answer. Every answer of the routers carries `x-request-id`; hyper's
    /// bare ones never do, which tells them apart.
    fn replace_bare_answer(&self, buf: &[u8]) -> Option<Vec<u8>> {
        if !buf.starts_with(b"HTTP/1.") {
            return None;
        }
        let err = match buf.get(9..12)? {
            b"400" => ApiError::InvalidRequest(
                "the request line or headers could not be read as HTTP/1.1".into(),
            ),
            b"414" => ApiError::UriTooLong,
            b"431" => ApiError::HeadersTooLarge(self.limits.max_header_bytes),
            _ => return None,
        };
        let head_end = buf
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or(buf.len());
        if buf[..head_end]
            .windows(15)
            .any(|w| w.eq_ignore_ascii_case(b"\r\nx-request-id:"))
        {
            return None;
        }
        Some(err.raw_response(&new_request_id()))
    }
}

impl AsyncRead for GuardedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.track_phase();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if this.phase == Phase::Idle && buf.filled().len() > before {
                    this.phase = Phase::Head;
                    let at = Instant::now() + this.limits.header_read_timeout;
                    this.read_deadline.as_mut().reset(at);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                this.activity.reader.register(cx.waker());
                if this.phase != Phase::Busy && this.read_deadline.as_mut().poll(cx).is_ready() {
                    if this.phase == Phase::Head {
                        let late = ApiError::RequestTimeout(format!(
                            "the request head did not arrive within {} s",
                            this.limits.header_read_timeout.as_secs()
                        ));
                        // Best effort: the client may not be reading either.
                        let _ = this.io.try_write(&late.raw_response(&new_request_id()));
                        return Poll::Ready(Err(timed_out("request head timed out")));
                    }
                    return Poll::Ready(Err(timed_out("idle connection")));
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

impl GuardedIo {
    /// One write of hyper's, `len` bytes starting with `first`: a pending
    /// replacement answer goes out before anything else; hyper's own bare
    /// answer is swapped for the envelope (its bytes count as written);
    /// anything else is written by `write` under the write timeout.
    fn write(
        &mut self,
        cx: &mut Context<'_>,
        first: &[u8],
        len: usize,
        write: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.flush_replacement(cx))?;
        if let Some(answer) = self.replace_bare_answer(first) {
            self.replacement = Some((answer, 0));
            if let Poll::Ready(Err(e)) = self.flush_replacement(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(len));
        }
        let r = write(Pin::new(&mut self.io), cx);
        self.timed_write(cx, r)
    }

    /// A flush or shutdown, after any pending replacement answer.
    fn after_replacement(
        &mut self,
        cx: &mut Context<'_>,
        op: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<()>>,
    ) -> Poll<io::Result<()>> {
        std::task::ready!(self.flush_replacement(cx))?;
        let r = op(Pin::new(&mut self.io), cx);
        self.timed_write(cx, r)
    }
}

impl AsyncWrite for GuardedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .write(cx, buf, buf.len(), |io, cx| io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &b[..]);
        let len = bufs.iter().map(|b| b.len()).sum();
        self.get_mut()
            .write(cx, first, len, |io, cx| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut()
            .after_replacement(cx, |io, cx| io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut()
            .after_replacement(cx, |io, cx| io.poll_shutdown(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_ip: usize) -> EdgeLimits {
        EdgeLimits {
            header_read_timeout: Duration::from_secs(1),
            keepalive_idle_timeout: Duration::from_secs(1),
            write_timeout: Duration::from_secs(1),
            max_header_bytes: 8192,
            max_connections: total,
            max_connections_per_ip: per_ip,
            ipv6_prefix_len: 64,
        }
    }

    #[test]
    fn connection_caps_count_per_address_and_in_all() {
        let table = Arc::new(Connections::new(&limits(3, 2)));
        let a: IpAddr = "198.51.100.1".parse().unwrap();
        let v6a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let v6b: IpAddr = "2001:db8:1:2::2".parse().unwrap();
        let s1 = table.admit(a).unwrap();
        let _s2 = table.admit(a).unwrap();
        assert_eq!(
            table
                .admit(a)
                .err()
                .map(|e| e.code().to_string())
                .as_deref(),
            Some("too_many_connections")
        );
        let _s3 = table.admit(v6a).unwrap();
        assert!(table.admit(v6b).is_err(), "the gateway's cap of 3");
        drop(s1);
        let _s4 = table.admit(v6b).unwrap();
        assert!(
            table.admit(v6a).is_err(),
            "one /64 holds two; all three are taken"
        );
        let t = table.open.lock().unwrap();
        assert_eq!(t.0, 3);
        assert_eq!(t.1.len(), 2);
    }
}
