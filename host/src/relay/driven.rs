//! Plain-HTTP vendor connections driven by the call that uses them.
//!
//! hyper's pooled client (`hyper_util::client::legacy`) runs each connection
//! as a task of its own. A call hands its request to that task through a
//! channel and wakes it; the task writes the request, reads the answer's head
//! and then each chunk of its body, and hands each over to the call through
//! another channel, waking the call's task every time. On the gateway's one
//! runtime thread that is a task switch on the way out and one for each piece
//! of the answer, a stream's way to its first token among them (README,
//! "Where the time goes").
//!
//! Here a connection (hyper's `client::conn::http1`) belongs to one call at a
//! time, and that call polls it: the request is written in the call's own
//! poll, the answer's head is read in the poll that finds it, and the answer's
//! body, [`DrivenBody`], polls the connection whenever it has nothing to give,
//! then gives what the connection read. Between calls a connection waits in
//! [`Connections`], unpolled. Taking one out polls it once, so that one the
//! vendor closed in the meantime is seen and dropped; a request that such a
//! connection still refused unsent goes once more, on a new connection. A
//! request that was written is never sent twice, as with the pooled client.
//!
//! A connection goes back to wait only when its answer was read to the end
//! and hyper says it can take the next request; a body dropped before its end
//! drops its connection (the vendor may still be writing to it). At most
//! [`MAX_IDLE_PER_ORIGIN`] wait per vendor origin, none longer than
//! [`POOL_IDLE`]: the oldest go first when more come back, and a sweep every
//! [`SWEEP_EVERY`] closes those past their time whether or not calls come.
//!
//! Only `http://` vendors go this way (self-hosted servers, sidecars, the
//! simulator). Over TLS ALPN usually settles on HTTP/2, whose one connection
//! carries many calls at once and so has to be a task of its own: `https://`
//! vendors keep the pooled client (`vendor`).

use axum::http::uri::{Authority, PathAndQuery, Scheme};
use axum::http::{header, HeaderValue, Request, Response, Uri};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tower::Service;

/// How long a connection may wait between calls (the pooled client's too).
pub const POOL_IDLE: Duration = Duration::from_secs(90);

/// How many connections to one vendor origin may wait between calls: more
/// than the calls a 2-core gateway keeps in flight to one vendor under the
/// bench's load (32), few enough that an origin's idle ones hold a bounded
/// number of descriptors (each a socket and hyper's buffers, some 16 KiB).
pub const MAX_IDLE_PER_ORIGIN: usize = 128;

/// How often connections past [`POOL_IDLE`] are closed, calls or not.
pub const SWEEP_EVERY: Duration = Duration::from_secs(30);

type Io = TokioIo<TcpStream>;

/// One HTTP/1 connection to a vendor: the handle requests go in by, and the
/// connection itself, which does nothing unless polled.
struct Conn {
    send: http1::SendRequest<Full<Bytes>>,
    /// `None` once it has ended (closed, or failed).
    io: Option<http1::Connection<Io, Full<Bytes>>>,
}

impl Conn {
    /// Polls the connection once: it writes what it was given, reads what
    /// came, and hands both on. Returns whether it can still be polled.
    ///
    /// An ended connection is dropped at once: a request it never took
    /// (the vendor's close read just before it) is given back only then,
    /// and an answer's body sees its end or error only then.
    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if let Some(io) = self.io.as_mut() {
            if let Poll::Ready(end) = Pin::new(io).poll(cx) {
                if let Err(e) = end {
                    tracing::debug!("vendor connection ended: {e}");
                }
                self.io = None;
            }
        }
        self.io.is_some()
    }

    /// Whether the connection can take a request now: polled once without
    /// a waker to notice a close or a stray byte since it was last used.
    fn usable(&mut self) -> bool {
        let waker = futures_util::task::noop_waker();
        self.drive(&mut Context::from_waker(&waker)) && self.send.is_ready()
    }
}

/// An origin's connections waiting for a call, oldest first.
type Idle = HashMap<Authority, Vec<(Box<Conn>, Instant)>>;

/// The waiting connections of every plain-HTTP vendor origin; see the
/// module's doc.
pub struct Connections {
    tcp: HttpConnector,
    idle: Arc<Mutex<Idle>>,
    /// Whether the sweep's task was started (at the first connection made).
    sweeping: std::sync::atomic::AtomicBool,
}

impl Connections {
    /// `tcp` makes new connections (its timeout and `TCP_NODELAY` hold).
    pub fn new(tcp: HttpConnector) -> Self {
        Connections {
            tcp,
            idle: Arc::default(),
            sweeping: false.into(),
        }
    }

    /// Whether a request to `uri` goes this way: a plain `http://` URL.
    pub fn takes(uri: &Uri) -> bool {
        uri.scheme() == Some(&Scheme::HTTP) && uri.authority().is_some()
    }

    /// Sends `req` (an absolute `http://` URI, [`Connections::takes`]) and
    /// waits for the answer's head; its body drives the connection from
    /// then on. The request goes in origin form with a `Host` header, as the
    /// pooled client sends it.
    pub async fn send(
        &self,
        mut req: Request<Full<Bytes>>,
    ) -> Result<Response<DrivenBody>, Failure> {
        let Some(origin) = req.uri().authority().cloned() else {
            return Err(Failure::NoOrigin);
        };
        if !req.headers().contains_key(header::HOST) {
            if let Ok(host) = HeaderValue::from_str(&host_header(req.uri())) {
                req.headers_mut().insert(header::HOST, host);
            }
        }
        let path = req
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        // The absolute URI stays for a new connection's connector.
        let target = std::mem::replace(req.uri_mut(), Uri::from(path));
        let mut waiting = self.take_idle(&origin);
        loop {
            let reused = waiting.is_some();
            let mut conn = match waiting.take() {
                Some(conn) => conn,
                None => self.connect(&target).await?,
            };
            let answer = conn.send.try_send_request(req);
            match drive_until(&mut conn, answer).await {
                Ok(resp) => {
                    let home = Arc::downgrade(&self.idle);
                    return Ok(resp.map(|body| DrivenBody {
                        body,
                        conn: Some(conn),
                        home,
                        origin,
                        gate: None,
                    }));
                }
                Err(mut refused) => match refused.take_message() {
                    // Never written: a connection the vendor closed while it
                    // waited. Once more on a new one.
                    Some(unsent) if reused => req = unsent,
                    _ => return Err(Failure::Send(refused.into_error())),
                },
            }
        }
    }

    /// A waiting connection to `origin` that can take a request, the most
    /// recently used first; those past their time or closed are dropped.
    fn take_idle(&self, origin: &Authority) -> Option<Box<Conn>> {
        loop {
            let (mut conn, since) = {
                let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
                idle.get_mut(origin)?.pop()?
            };
            if since.elapsed() < POOL_IDLE && conn.usable() {
                return Some(conn);
            }
        }
    }

    async fn connect(&self, target: &Uri) -> Result<Box<Conn>, Failure> {
        let io = self
            .tcp
            .clone()
            .call(target.clone())
            .await
            .map_err(|e| Failure::Connect(e.into()))?;
        let (send, io) = http1::handshake(io).await.map_err(Failure::Send)?;
        self.start_sweep();
        Ok(Box::new(Conn { send, io: Some(io) }))
    }

    /// Starts the task that closes connections past their time, once, on
    /// the runtime of the first call.
    fn start_sweep(&self) {
        if self.sweeping.swap(true, Ordering::Relaxed) {
            return;
        }
        let idle = Arc::downgrade(&self.idle);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(SWEEP_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(idle) = idle.upgrade() else { return };
                let now = Instant::now();
                // Dropped outside the lock: closing is a syscall each.
                let mut expired = Vec::new();
                {
                    let mut idle = idle.lock().unwrap_or_else(|p| p.into_inner());
                    idle.retain(|_, list| {
                        expired.extend(list.drain(..past_time(list, now)));
                        !list.is_empty()
                    });
                }
                drop(expired);
            }
        });
    }
}

/// How many of `list`'s connections (oldest first) are past [`POOL_IDLE`].
fn past_time(list: &[(Box<Conn>, Instant)], now: Instant) -> usize {
    list.partition_point(|(_, since)| now.saturating_duration_since(*since) >= POOL_IDLE)
}

/// Puts a connection whose answer was read whole back to wait, if hyper
/// says it can take another request.
fn check_in(home: &Weak<Mutex<Idle>>, origin: &Authority, mut conn: Box<Conn>) {
    let Some(home) = home.upgrade() else { return };
    if !conn.usable() {
        return;
    }
    let now = Instant::now();
    let mut idle = home.lock().unwrap_or_else(|p| p.into_inner());
    let list = idle.entry(origin.clone()).or_default();
    let stale = past_time(list, now);
    // Over the cap the oldest goes (it is the likeliest to be closed by the
    // vendor next); both drops close a socket, rarely.
    let over = (list.len() - stale + 1).saturating_sub(MAX_IDLE_PER_ORIGIN);
    list.drain(..stale + over);
    list.push((conn, now));
}

/// Polls `conn`, then `answer`, until the answer's head is in.
///
/// What the connection hands to the call (the head here, the body's chunks
/// in [`DrivenBody`]) is read without a waker while the connection is
/// polled by the same task: the connection's socket is what wakes the task,
/// and a waker there would have the connection's hand-over wake the task
/// once more, for a poll that finds nothing. Once the connection has ended
/// the call's waker is given, so that nothing is waited for unwoken.
/// (The body's chunks come through hyper's own channel, which has no
/// budget.)
async fn drive_until<F: Future>(conn: &mut Conn, answer: F) -> F::Output {
    let mut answer = std::pin::pin!(answer);
    let waker = futures_util::task::noop_waker();
    std::future::poll_fn(|cx| {
        // The answer is a tokio channel, which counts against the task's
        // budget and, when that is spent, wakes the waker it was given for
        // a later poll: then it must be the task's.
        if conn.drive(cx) && tokio::task::coop::has_budget_remaining() {
            answer.as_mut().poll(&mut Context::from_waker(&waker))
        } else {
            answer.as_mut().poll(cx)
        }
    })
    .await
}

/// `Host` as the pooled client writes it: the host, and the port unless it
/// is the scheme's default.
fn host_header(uri: &Uri) -> String {
    let host = uri.host().unwrap_or_default();
    match uri.port_u16() {
        Some(port) if port != 80 => format!("{host}:{port}"),
        _ => host.to_string(),
    }
}

/// Why a request got no answer's head.
#[derive(Debug)]
pub enum Failure {
    /// No connection could be made (refused, unresolved, timed out).
    Connect(Box<dyn std::error::Error + Send + Sync>),
    /// The connection failed or closed before the head came.
    Send(hyper::Error),
    /// The request's URI has no host ([`Connections::takes`] says no).
    NoOrigin,
}

/// What polling a [`DrivenBody`] gives.
type Polled = Poll<Option<Result<Frame<Bytes>, hyper::Error>>>;

/// A vendor answer's body that drives its connection: see the module's doc.
pub struct DrivenBody {
    body: Incoming,
    /// `None` once the answer was read whole and the connection went back.
    conn: Option<Box<Conn>>,
    home: Weak<Mutex<Idle>>,
    origin: Authority,
    /// What the connection is driven with (`Gate`): made at the body's
    /// first poll.
    gate: Option<(Arc<Gate>, Waker)>,
}

/// The waker a body's connection is driven with: the task's, but for
/// wakes raised while the body takes what the connection handed over.
///
/// hyper hands a chunk of the answer over through a channel of one slot.
/// Once it has put a chunk in, it waits for the slot to be free, with the
/// waker it was driven with; taking the chunk out wakes that waker. It is
/// the waker of the task taking the chunk, which is running: the wake
/// only makes the runtime poll the task once more, right after, for a
/// poll that drives the connection and finds nothing new. One such poll
/// followed every chunk.
///
/// So the body takes with the gate shut, and a wake raised meanwhile is
/// only noted. A noted wake is not lost: when the take gave a frame, the
/// reader polls the body again before it waits on it, and that poll
/// drives the connection, which looks at every source again (the slot, the
/// socket's readiness, which a wake does not clear); when the take gave
/// nothing, the body gives the wake to the task itself before it answers
/// `Pending`. Wakes from elsewhere (the socket's, from the I/O driver,
/// possibly on another thread) pass whenever the gate is open, and one that
/// comes while it is shut is noted as any other.
struct Gate {
    task: Mutex<Option<Waker>>,
    state: AtomicU8,
}

/// `Gate::state`: wakes go to the task.
const OPEN: u8 = 0;
/// `Gate::state`: wakes are noted, none yet.
const SHUT: u8 = 1;
/// `Gate::state`: wakes are noted, and one came.
const SHUT_WOKEN: u8 = 2;

impl Gate {
    fn new() -> Arc<Gate> {
        Arc::new(Gate {
            task: Mutex::new(None),
            state: AtomicU8::new(OPEN),
        })
    }

    /// Lets go of the task's waker: the connection goes back to wait, or
    /// away, and its wakes reach no task from now on.
    fn forget(&self) {
        *self.task.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Makes `waker` the task's waker (kept when it is the same task's).
    fn serve(&self, waker: &Waker) {
        let mut task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if !task.as_ref().is_some_and(|t| t.will_wake(waker)) {
            *task = Some(waker.clone());
        }
    }

    fn shut(&self) {
        self.state.store(SHUT, Ordering::SeqCst);
    }

    /// Opens the gate; whether a wake came while it was shut.
    fn open(&self) -> bool {
        self.state.swap(OPEN, Ordering::SeqCst) == SHUT_WOKEN
    }
}

impl Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Noted only if the gate is still shut when the note is made: one
        // opened in between sends the wake on.
        let mut state = self.state.load(Ordering::SeqCst);
        while state != OPEN {
            if state == SHUT_WOKEN {
                return;
            }
            match self
                .state
                .compare_exchange(SHUT, SHUT_WOKEN, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(task) = task.as_ref() {
            task.wake_by_ref();
        }
    }
}

impl DrivenBody {
    /// The body's next frame of what the connection read so far; at the
    /// end the connection goes back to wait.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Polled {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.check_in();
        }
        polled
    }

    /// [`DrivenBody::poll_read`] with the gate shut and no waker for the
    /// body itself (the connection's socket wakes the task); whether a wake
    /// came meanwhile.
    fn take(&mut self, gate: &Gate) -> (Polled, bool) {
        let waker = futures_util::task::noop_waker();
        gate.shut();
        let polled = self.poll_read(&mut Context::from_waker(&waker));
        (polled, gate.open())
    }

    fn check_in(&mut self) {
        if let Some((gate, _)) = &self.gate {
            gate.forget();
        }
        if let Some(conn) = self.conn.take() {
            check_in(&self.home, &self.origin, conn);
        }
    }
}

impl Body for DrivenBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        if this.conn.is_none() {
            // Read whole and given back: what is left is the body's end.
            return Pin::new(&mut this.body).poll_frame(cx);
        }
        let (gate, gate_waker) = this
            .gate
            .get_or_insert_with(|| {
                let gate = Gate::new();
                let waker = Waker::from(gate.clone());
                (gate, waker)
            })
            .clone();
        gate.serve(cx.waker());
        // What the connection handed over before (a wake the take raised
        // is seen to by the drive below, or by the reader's next poll when
        // it gave a frame: see `Gate`), then what it reads now.
        if let (Poll::Ready(frame), _) = this.take(&gate) {
            return Poll::Ready(frame);
        }
        let open = this
            .conn
            .as_mut()
            .is_some_and(|conn| conn.drive(&mut Context::from_waker(&gate_waker)));
        if !open {
            // Ended: the body has its end or its error now.
            return this.poll_read(cx);
        }
        let (polled, woken) = this.take(&gate);
        if polled.is_pending() && woken {
            cx.waker().wake_by_ref();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for DrivenBody {
    /// A reader that stopped at the body's last frame, without asking for
    /// its end, still gives the connection back.
    fn drop(&mut self) {
        if self.body.is_end_stream() {
            self.check_in();
        } else if let Some((gate, _)) = &self.gate {
            gate.forget();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A vendor on a loopback port that answers each request on a
    /// connection with `answer(n)` (n counts the server's requests from 0),
    /// then closes the connection if `close_after` says so. Returns its
    /// base URL and the number of connections it accepted.
    async fn vendor(
        answer: fn(usize) -> &'static [u8],
        close_after: fn(usize) -> bool,
    ) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let served = Arc::new(AtomicUsize::new(0));
        let (a, s) = (accepted.clone(), served.clone());
        tokio::spawn(async move {
            loop {
                let (mut tcp, _) = listener.accept().await.unwrap();
                a.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        // One request: a head and a body of Content-Length.
                        let Some(end) = request_end(&buf) else {
                            match tcp.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                            continue;
                        };
                        buf.drain(..end);
                        let n = s.fetch_add(1, Ordering::SeqCst);
                        if tcp.write_all(answer(n)).await.is_err() || close_after(n) {
                            return;
                        }
                    }
                });
            }
        });
        (format!("http://{addr}"), accepted, served)
    }

    /// Where the first whole request in `buf` ends, if one is there.
    fn request_end(buf: &[u8]) -> Option<usize> {
        let head = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let text = String::from_utf8_lossy(&buf[..head]).to_ascii_lowercase();
        let len = text
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse::<usize>().unwrap());
        (buf.len() >= head + len).then_some(head + len)
    }

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
        5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";

    fn post(base: &str) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(Bytes::from_static(b"{}")));
        *req.method_mut() = axum::http::Method::POST;
        *req.uri_mut() = format!("{base}/v1/chat/completions").parse().unwrap();
        req
    }

    fn connections() -> Connections {
        Connections::new(HttpConnector::new())
    }

    async fn call(c: &Connections, base: &str) -> Result<(u16, Bytes), Failure> {
        let resp = c.send(post(base)).await?;
        let status = resp.status().as_u16();
        Ok((status, resp.into_body().collect().await.unwrap().to_bytes()))
    }

    fn waiting(c: &Connections) -> usize {
        c.idle.lock().unwrap().values().map(Vec::len).sum()
    }

    /// A waker that counts its wakes and rouses whoever waits on `rouse`.
    #[derive(Default)]
    struct Counted {
        wakes: AtomicUsize,
        rouse: tokio::sync::Notify,
    }

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.wakes.fetch_add(1, Ordering::SeqCst);
            self.rouse.notify_one();
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn taking_a_chunk_wakes_nobody() {
        // The answer's chunks come in one read: hyper hands them over one
        // at a time, each after the one before was taken.
        let (base, _, _) = vendor(|_| CHUNKED, |_| false).await;
        let c = connections();
        let mut body = c.send(post(&base)).await.unwrap().into_body();
        let counted = Arc::new(Counted::default());
        let waker = Waker::from(counted.clone());
        let mut cx = Context::from_waker(&waker);
        let mut read = Vec::new();
        let mut polls = 0;
        loop {
            polls += 1;
            assert!(polls < 100, "the body ends");
            let before = counted.wakes.load(Ordering::SeqCst);
            match Pin::new(&mut body).poll_frame(&mut cx) {
                // On this runtime nothing else runs during the poll: a wake
                // in it is one the poll raised, for a poll that would find
                // nothing new.
                Poll::Ready(Some(frame)) => {
                    read.extend_from_slice(&frame.unwrap().into_data().unwrap());
                    assert_eq!(
                        counted.wakes.load(Ordering::SeqCst),
                        before,
                        "a take woke the task"
                    );
                }
                Poll::Ready(None) => break,
                Poll::Pending => counted.rouse.notified().await,
            }
        }
        assert_eq!(read, b"hello world");
        assert_eq!(waiting(&c), 1, "the connection went back to wait");
    }

    #[test]
    fn a_wake_while_the_gate_is_shut_is_noted_and_not_sent() {
        let counted = Arc::new(Counted::default());
        let gate = Gate::new();
        gate.serve(&Waker::from(counted.clone()));
        let through = Waker::from(gate.clone());
        gate.shut();
        through.wake_by_ref();
        through.wake_by_ref();
        assert_eq!(counted.wakes.load(Ordering::SeqCst), 0);
        assert!(gate.open(), "the wake was noted");
        assert!(!gate.open(), "and the note cleared");
        through.wake_by_ref();
        assert_eq!(
            counted.wakes.load(Ordering::SeqCst),
            1,
            "an open gate sends it on"
        );
        gate.shut();
        assert!(!gate.open(), "no wake, no note");
        gate.forget();
        through.wake();
        assert_eq!(
            counted.wakes.load(Ordering::SeqCst),
            1,
            "a forgotten task is not woken"
        );
    }

    #[tokio::test]
    async fn calls_one_after_another_share_one_connection() {
        let (base, accepted, _) =
            vendor(|n| if n % 2 == 0 { OK } else { CHUNKED }, |_| false).await;
        let c = connections();
        for i in 0..6 {
            let (status, body) = call(&c, &base).await.unwrap();
            assert_eq!(status, 200);
            let want: &[u8] = if i % 2 == 0 { b"ok" } else { b"hello world" };
            assert_eq!(&body[..], want, "call {i}");
            assert_eq!(waiting(&c), 1, "back to wait after call {i}");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_the_vendor_closed_while_it_waited_is_not_used() {
        // The vendor closes each connection after its answer, without
        // saying so: the next call finds it closed and makes a new one.
        let (base, accepted, served) = vendor(|_| OK, |_| true).await;
        let c = connections();
        for _ in 0..3 {
            assert_eq!(call(&c, &base).await.unwrap().0, 200);
            // The runtime's turns until its reactor has seen the close (a
            // few on loopback; bounded).
            for _ in 0..1000 {
                let open = c
                    .idle
                    .lock()
                    .unwrap()
                    .values_mut()
                    .flatten()
                    .any(|(conn, _)| conn.usable());
                if !open {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
        assert_eq!(served.load(Ordering::SeqCst), 3, "no request sent twice");
    }

    #[tokio::test]
    async fn an_answer_that_says_close_keeps_no_connection() {
        const CLOSING: &[u8] =
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok";
        let (base, accepted, _) = vendor(|_| CLOSING, |_| true).await;
        let c = connections();
        for _ in 0..2 {
            assert_eq!(call(&c, &base).await.unwrap().0, 200);
            assert_eq!(waiting(&c), 0);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_body_dropped_before_its_end_drops_its_connection() {
        const SLOW: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n";
        let (base, accepted, _) = vendor(|n| if n == 0 { SLOW } else { OK }, |_| false).await;
        let c = connections();
        let resp = c.send(post(&base)).await.unwrap();
        let mut body = resp.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"hello");
        drop(body);
        assert_eq!(waiting(&c), 0);
        assert_eq!(
            call(&c, &base).await.unwrap(),
            (200, Bytes::from_static(b"ok"))
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_truncated_answer_is_a_read_error_not_an_end() {
        const CUT: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello";
        let (base, _, _) = vendor(|_| CUT, |_| true).await;
        let c = connections();
        let resp = c.send(post(&base)).await.unwrap();
        assert!(resp.into_body().collect().await.is_err());
        assert_eq!(waiting(&c), 0);
    }

    #[tokio::test]
    async fn a_vendor_that_is_not_listening_is_a_connect_failure() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        match call(&connections(), &base).await {
            Err(Failure::Connect(_)) => {}
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn the_vendor_sees_origin_form_and_the_host() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let head = tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while request_end(&buf).is_none() {
                let n = tcp.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
            }
            tcp.write_all(OK).await.unwrap();
            String::from_utf8(buf).unwrap()
        });
        let c = connections();
        let mut req = post(&format!("http://{addr}"));
        *req.uri_mut() = format!("http://{addr}/v1/x?a=1").parse().unwrap();
        let resp = c.send(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let head = head.await.unwrap().to_ascii_lowercase();
        assert!(head.starts_with("post /v1/x?a=1 http/1.1\r\n"), "{head}");
        assert!(head.contains(&format!("\r\nhost: {addr}\r\n")), "{head}");
    }

    #[test]
    fn the_host_header_leaves_out_the_default_port() {
        let uri = |s: &str| s.parse::<Uri>().unwrap();
        assert_eq!(host_header(&uri("http://h.example/x")), "h.example");
        assert_eq!(host_header(&uri("http://h.example:80/x")), "h.example");
        assert_eq!(
            host_header(&uri("http://h.example:8080/x")),
            "h.example:8080"
        );
        assert_eq!(host_header(&uri("http://u:p@[::1]:9/x")), "[::1]:9");
    }

    #[test]
    fn only_plain_http_goes_this_way() {
        assert!(Connections::takes(&"http://h/x".parse().unwrap()));
        assert!(!Connections::takes(&"https://h/x".parse().unwrap()));
        assert!(!Connections::takes(&"/x".parse().unwrap()));
    }
}
