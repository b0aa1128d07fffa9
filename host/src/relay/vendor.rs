//! The HTTP client of text calls: how a checked guest-built request reaches
//! its vendor, and how the answer's head and body come back.
//!
//! A text call to an `https://` vendor goes straight through hyper's pooled
//! client (`hyper_util::client::legacy`, TLS by rustls with the webpki roots
//! and ALPN for HTTP/2, as reqwest's own set-up has it); one to an `http://`
//! vendor over an HTTP/1 connection the call itself drives (`driven`).
//! reqwest wraps the pooled client in layers a vendor call has no use for:
//! it parses the URL twice more per call (its redirect layer and its
//! response), boxes the request and the answer, and keeps a redirect
//! policy's state. Interleaved runs at
//! 32 connections measured 14–15 µs of CPU per call less without them
//! (README, "Where the time goes").
//!
//! reqwest still carries two kinds of text call:
//! - a multipart form (images' edits, audio transcriptions): reqwest writes
//!   the form's body;
//! - every call, when the environment names a proxy (`HTTP_PROXY`,
//!   `HTTPS_PROXY`, `ALL_PROXY`, upper or lower case): reqwest applies them
//!   and `NO_PROXY` as before, and the direct client is not used at all.
//!
//! Either way a vendor's redirect is not followed: a text vendor has no
//! reason to send one, and its `3xx` answer is the vendor's error, mapped
//! like any other. (The video API's downloads keep following redirects:
//! they use `AppState::http`.)

use super::driven::{self, Connections, DrivenBody};
use super::upstream::{self, ClientPayload, SendError};
use crate::config::ChannelConfig;
use crate::error::ApiError;
use crate::plugins::bindings::types::AuthScheme;
use crate::plugins::session::{OutboundBody, OutboundRequest};
use axum::http::{header, HeaderValue, Request, Response};
use bytes::Bytes;
use futures_util::{Stream, TryStreamExt};
use http_body_util::{BodyDataStream, BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long an idle pooled connection to a vendor is kept.
const POOL_IDLE: Duration = driven::POOL_IDLE;

/// The environment variables that name a proxy for reqwest.
const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

type DirectClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The text calls' client; see the module's doc.
pub struct VendorClient {
    /// `None` when the environment names a proxy.
    direct: Option<DirectClient>,
    /// Plain-HTTP vendors' connections (used when `direct` is there).
    driven: Connections,
    /// Forms, and every call when a proxy is named.
    reqwest: reqwest::Client,
}

/// A vendor request, built and ready to send by the client that built it.
pub enum Prepared<'a> {
    Direct(&'a DirectClient, Request<Full<Bytes>>),
    Driven(&'a Connections, Request<Full<Bytes>>),
    Reqwest(reqwest::RequestBuilder),
}

/// A vendor's answer: its head, and its body still to be read.
pub type VendorResponse = Response<VendorBody>;

/// A vendor answer's body, from any of the clients.
pub type VendorBody = Either<Either<Incoming, DrivenBody>, reqwest::Body>;

impl VendorClient {
    /// The client for this process: direct unless the environment names a
    /// proxy.
    pub fn new(connect_timeout: Duration) -> anyhow::Result<Self> {
        let proxied = names_a_proxy(|v| std::env::var_os(v));
        if proxied {
            tracing::info!(
                "a proxy is named in the environment: text calls go through it (reqwest)"
            );
        }
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        Self::build(connect_timeout, roots, proxied)
    }

    fn build(
        connect_timeout: Duration,
        roots: rustls::RootCertStore,
        proxied: bool,
    ) -> anyhow::Result<Self> {
        let reqwest = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .pool_idle_timeout(POOL_IDLE)
            .tcp_nodelay(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(connect_timeout));
        let driven = Connections::new(tcp.clone());
        if proxied {
            return Ok(VendorClient {
                direct: None,
                driven,
                reqwest,
            });
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(tcp);
        let direct = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(connector);
        Ok(VendorClient {
            direct: Some(direct),
            driven,
            reqwest,
        })
    }

    /// Builds the request with the channel's credential in the place the
    /// adapter named. Fails as [`upstream::build`] does.
    pub fn prepare(
        &self,
        channel: &ChannelConfig,
        auth: AuthScheme,
        req: OutboundRequest,
        client: ClientPayload<'_>,
    ) -> Result<Prepared<'_>, ApiError> {
        let direct = match &self.direct {
            Some(direct)
                if matches!(
                    (&req.body, &client),
                    (OutboundBody::Bytes(_), _)
                        | (OutboundBody::ClientBody, ClientPayload::Bytes(_))
                ) =>
            {
                direct
            }
            _ => {
                let b = upstream::build(&self.reqwest, channel, auth, req, client)?;
                return Ok(Prepared::Reqwest(b));
            }
        };
        let uri = upstream::uri(channel, &req.path)?;
        let body = match (req.body, client) {
            (OutboundBody::Bytes(bytes), _) => Bytes::from(bytes),
            (_, ClientPayload::Bytes(body)) => body.clone(),
            // Sent by reqwest (checked above).
            (_, ClientPayload::Form(_)) => Bytes::new(),
        };
        let mut headers = req.headers;
        // What reqwest sends by default, so a vendor sees the same request
        // from either client.
        headers
            .entry(header::ACCEPT)
            .or_insert(HeaderValue::from_static("*/*"));
        if let Some((name, value)) = upstream::credential(channel, auth)? {
            headers.insert(name, value);
        }
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = req.method;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        if Connections::takes(request.uri()) {
            return Ok(Prepared::Driven(&self.driven, request));
        }
        Ok(Prepared::Direct(direct, request))
    }
}

impl Prepared<'_> {
    /// Sends and waits for the answer's head, at most `timeout`. With
    /// tracing on, the wait is the `upstream` span, whose context goes to
    /// the vendor in `traceparent` (`telemetry`).
    pub async fn send(self, timeout: Duration) -> Result<VendorResponse, SendError> {
        match self {
            Prepared::Reqwest(b) => {
                let resp = upstream::send(b, timeout).await?;
                Ok(Response::from(resp).map(Either::Right))
            }
            Prepared::Driven(conns, request) => {
                match traced(request, timeout, |r| conns.send(r)).await {
                    None => Err(SendError::Timeout(timeout)),
                    Some(Err(e)) => Err(describe_driven(e, timeout)),
                    Some(Ok(r)) => Ok(r.map(|b| Either::Left(Either::Right(b)))),
                }
            }
            Prepared::Direct(direct, request) => {
                match traced(request, timeout, |r| direct.request(r)).await {
                    None => Err(SendError::Timeout(timeout)),
                    Some(Err(e)) if timed_out(&e) => Err(SendError::Timeout(timeout)),
                    Some(Err(e)) => Err(SendError::Transport(describe_send(&e))),
                    Some(Ok(r)) => Ok(r.map(|b| Either::Left(Either::Left(b)))),
                }
            }
        }
    }
}

/// `send(request)` in the `upstream` span, whose context goes to the vendor
/// in the request's `traceparent`; `None` when no answer came within
/// `timeout`.
async fn traced<F: std::future::Future>(
    mut request: Request<Full<Bytes>>,
    timeout: Duration,
    send: impl FnOnce(Request<Full<Bytes>>) -> F,
) -> Option<F::Output> {
    let span = crate::telemetry::span!("upstream", otel.kind = "client");
    span.in_scope(|| crate::telemetry::inject_headers(request.headers_mut()));
    tracing::Instrument::instrument(tokio::time::timeout(timeout, send(request)), span)
        .await
        .ok()
}

/// Whether an environment (`var` reads one of its variables) names a
/// proxy: one of [`PROXY_VARS`] is set and not empty.
fn names_a_proxy(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    PROXY_VARS
        .iter()
        .any(|v| var(v).is_some_and(|s| !s.is_empty()))
}

/// A connect timeout (`connect_timeout`) is a timeout, as reqwest has it.
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut src = Some(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::TimedOut {
                return true;
            }
        }
        src = s.source();
    }
    false
}

/// A driven connection's failure, described as the pooled client's are.
fn describe_driven(e: driven::Failure, timeout: Duration) -> SendError {
    tracing::debug!("upstream transport error: {e:?}");
    match e {
        driven::Failure::Connect(e) if timed_out(&*e) => SendError::Timeout(timeout),
        driven::Failure::Connect(_) => SendError::Transport(upstream::CONNECT_FAILED.into()),
        driven::Failure::Send(e) if timed_out(&e) => SendError::Timeout(timeout),
        driven::Failure::Send(e) => {
            SendError::Transport(upstream::with_sources(upstream::REQUEST_FAILED, Some(&e)))
        }
        driven::Failure::NoOrigin => SendError::Transport(upstream::REQUEST_FAILED.into()),
    }
}

/// A send error for clients: what went wrong, not where (the upstream's
/// URL names internal hosts); the full error goes to the log.
fn describe_send(e: &hyper_util::client::legacy::Error) -> String {
    tracing::debug!("upstream transport error: {e:?}");
    if e.is_connect() {
        return upstream::CONNECT_FAILED.into();
    }
    upstream::with_sources(upstream::REQUEST_FAILED, Some(e))
}

/// A failure reading an answer's body, for clients.
pub fn describe_read(e: BoxError) -> String {
    tracing::debug!("upstream body error: {e:?}");
    upstream::with_sources(upstream::READ_FAILED, Some(&*e))
}

/// The answer's body as a stream of byte chunks; a read failure is
/// described for clients ([`describe_read`]).
pub fn bytes_stream(
    body: VendorBody,
) -> impl Stream<Item = Result<Bytes, String>> + Send + Unpin + 'static {
    BodyDataStream::new(body).map_err(describe_read)
}

/// Reads a whole answer body, refusing more than `cap` bytes.
pub async fn read_capped<B>(body: B, cap: usize) -> Result<Bytes, String>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    match Limited::new(body, cap).collect().await {
        Ok(all) => Ok(all.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(format!("the answer exceeds {cap} bytes"))
        }
        Err(e) => Err(describe_read(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::session::AnswerMode;
    use axum::http::{HeaderMap, Method, StatusCode, Version};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::sync::{Arc, Mutex};
    use tokio::net::TcpListener;

    /// A self-signed certificate for `127.0.0.1` and `localhost`, for the
    /// TLS vendor below only (its key is public: it secures nothing).
    const CERT: &[u8] = include_bytes!("testdata/vendor-cert.pem");
    const KEY: &[u8] = include_bytes!("testdata/vendor-key.pem");

    /// What the vendor saw of one request.
    #[derive(Debug, Clone)]
    struct Seen {
        method: Method,
        path: String,
        version: Version,
        headers: HeaderMap,
        body: Bytes,
    }

    /// A vendor on a loopback port, over TLS (HTTP/2 or HTTP/1.1 by ALPN) or
    /// plain HTTP: `/moved` answers `307` to `/elsewhere`, anything else
    /// `200` with `ok`. Returns its base URL and what it saw.
    async fn vendor(tls: bool) -> (String, Arc<Mutex<Vec<Seen>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let acceptor = tls.then(|| {
            let certs = vec![CertificateDer::from_pem_slice(CERT).unwrap()];
            let key = PrivateKeyDer::from_pem_slice(KEY).unwrap();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(certs, key)
                .unwrap();
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            tokio_rustls::TlsAcceptor::from(Arc::new(config))
        });
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let log = log.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let log = log.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body.collect().await.unwrap().to_bytes();
                            log.lock().unwrap().push(Seen {
                                method: parts.method,
                                path: parts.uri.path().to_string(),
                                version: parts.version,
                                headers: parts.headers,
                                body,
                            });
                            let mut resp = Response::new(Full::new(Bytes::from_static(b"ok")));
                            if parts.uri.path() == "/v1/moved" {
                                *resp.status_mut() = StatusCode::TEMPORARY_REDIRECT;
                                resp.headers_mut().insert(
                                    header::LOCATION,
                                    HeaderValue::from_static("/v1/elsewhere"),
                                );
                            }
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    });
                    let server = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = match acceptor {
                        Some(a) => {
                            let io = a.accept(tcp).await.unwrap();
                            server
                                .serve_connection(hyper_util::rt::TokioIo::new(io), service)
                                .await
                        }
                        None => {
                            server
                                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                                .await
                        }
                    };
                });
            }
        });
        let scheme = if tls { "https" } else { "http" };
        (format!("{scheme}://127.0.0.1:{}/v1", addr.port()), seen)
    }

    fn client(proxied: bool) -> VendorClient {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(CERT).unwrap())
            .unwrap();
        VendorClient::build(Duration::from_secs(5), roots, proxied).unwrap()
    }

    fn channel(base: &str) -> ChannelConfig {
        let mut channel = ChannelConfig::for_test("c", base);
        channel.key = Some("sk-vendor".into());
        channel
    }

    fn request(path: &str, body: &'static [u8]) -> OutboundRequest {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        OutboundRequest {
            method: Method::POST,
            path: path.into(),
            headers,
            body: OutboundBody::Bytes(body.to_vec()),
            answer: AnswerMode::Translate,
            state: String::new(),
        }
    }

    async fn call(
        client: &VendorClient,
        channel: &ChannelConfig,
        auth: AuthScheme,
        req: OutboundRequest,
    ) -> (StatusCode, Bytes) {
        let prepared = client
            .prepare(channel, auth, req, ClientPayload::none())
            .unwrap();
        let resp = prepared.send(Duration::from_secs(5)).await.unwrap();
        let status = resp.status();
        let body = read_capped(resp.into_body(), 1024).await.unwrap();
        (status, body)
    }

    #[tokio::test]
    async fn a_tls_vendor_is_called_over_http2_with_the_credential() {
        let (base, seen) = vendor(true).await;
        let (status, body) = call(
            &client(false),
            &channel(&base),
            AuthScheme::Bearer,
            request("/chat/completions", b"{\"model\":\"m\"}"),
        )
        .await;
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"ok"[..]));
        let seen = seen.lock().unwrap()[0].clone();
        assert_eq!(seen.method, Method::POST);
        assert_eq!(seen.path, "/v1/chat/completions");
        assert_eq!(seen.version, Version::HTTP_2, "ALPN chose HTTP/2");
        assert_eq!(seen.headers["authorization"], "Bearer sk-vendor");
        assert_eq!(seen.headers["content-type"], "application/json");
        assert_eq!(seen.headers["accept"], "*/*");
        assert_eq!(&seen.body[..], b"{\"model\":\"m\"}");
    }

    #[tokio::test]
    async fn a_vendor_whose_certificate_is_not_trusted_is_not_called() {
        let (base, seen) = vendor(true).await;
        let untrusting = VendorClient::build(
            Duration::from_secs(5),
            rustls::RootCertStore::empty(),
            false,
        )
        .unwrap();
        let prepared = untrusting
            .prepare(
                &channel(&base),
                AuthScheme::Bearer,
                request("/chat/completions", b"{}"),
                ClientPayload::none(),
            )
            .unwrap();
        match prepared.send(Duration::from_secs(5)).await {
            Err(SendError::Transport(e)) => {
                assert_eq!(e, "the upstream refused or dropped the connection")
            }
            Err(e) => panic!("{e}"),
            Ok(r) => panic!("answered {}", r.status()),
        }
        assert!(seen.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_redirect_is_the_vendors_answer_from_either_client() {
        for proxied in [false, true] {
            let (base, seen) = vendor(false).await;
            let (status, _) = call(
                &client(proxied),
                &channel(&base),
                AuthScheme::XApiKey,
                request("/moved", b"{}"),
            )
            .await;
            assert_eq!(status, StatusCode::TEMPORARY_REDIRECT, "proxied: {proxied}");
            let seen = seen.lock().unwrap().clone();
            assert_eq!(seen.len(), 1, "followed: {seen:?}");
            assert_eq!(seen[0].headers["x-api-key"], "sk-vendor");
            assert_eq!(seen[0].headers["accept"], "*/*");
            assert_eq!(seen[0].version, Version::HTTP_11);
        }
    }

    #[test]
    fn any_proxy_variable_that_is_set_sends_text_calls_through_reqwest() {
        assert!(!names_a_proxy(|_| None));
        assert!(!names_a_proxy(|v| (v == "HTTPS_PROXY").then(|| "".into())));
        assert!(!names_a_proxy(|v| (v == "NO_PROXY").then(|| "*".into())));
        for var in PROXY_VARS {
            assert!(
                names_a_proxy(|v| (v == var).then(|| "http://proxy:3128".into())),
                "{var}"
            );
        }
    }

    #[tokio::test]
    async fn an_answer_over_the_cap_is_refused() {
        let body = Full::new(Bytes::from_static(b"0123456789"));
        assert_eq!(
            read_capped(body, 9).await.unwrap_err(),
            "the answer exceeds 9 bytes"
        );
        let body = Full::new(Bytes::from_static(b"0123456789"));
        assert_eq!(&read_capped(body, 10).await.unwrap()[..], b"0123456789");
    }
}
