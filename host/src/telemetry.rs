//! OpenTelemetry traces, exported over OTLP (HTTP, protobuf) when
//! `[tracing] otlp_endpoint` is set, and off otherwise.
//!
//! What a trace holds: one `request` span per public API request (a child
//! of the client's W3C `traceparent` when it sent one), and under it `auth`,
//! `reserve` (the billing hold), one `guest` span per WebAssembly call (the
//! adapter's request and answer sides, each policy), `upstream` (the vendor
//! request, whose context goes to the vendor in `traceparent` /
//! `tracestate`) and `settle`. Attributes: route, client protocol, model,
//! status, channel, plugin; never a key, a token or a body.
//!
//! Off costs one relaxed atomic load per would-be span: [`span!`] gives
//! `Span::none()` without touching the subscriber, and nothing is injected
//! into vendor requests. On, spans use the target [`TARGET`], which only
//! the OpenTelemetry layer listens to (the log output never shows them).
//!
//! Export runs on the SDK's batch processor thread; its HTTP requests go
//! through the gateway's own `reqwest` client on the gateway's runtime
//! ([`RuntimeClient`]). [`Tracing::shutdown`] flushes what is queued.

use crate::config::TracingConfig;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `tracing` target of every span meant for export.
pub const TARGET: &str = "gateway::otel";

static ON: AtomicBool = AtomicBool::new(false);

/// Whether spans are being exported (set once, at start-up).
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// An exported span (`Span::none()` when tracing is off):
/// `span!("name", field = value, ...)`.
macro_rules! span {
    ($name:literal $(, $($fields:tt)*)?) => {
        if $crate::telemetry::on() {
            tracing::info_span!(target: "gateway::otel", $name $(, $($fields)*)?)
        } else {
            tracing::Span::none()
        }
    };
}
pub(crate) use span;

/// The current span, for work handed to another task (`Span::none()` when
/// tracing is off).
pub fn current() -> tracing::Span {
    if on() {
        tracing::Span::current()
    } else {
        tracing::Span::none()
    }
}

/// The exporter, kept by `main` until shutdown.
pub struct Tracing {
    provider: SdkTracerProvider,
}

impl Tracing {
    /// Sends what is still queued and stops the exporter (blocking; at most
    /// a few seconds).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            eprintln!("warning: flushing the trace exporter failed: {e}");
        }
    }
}

/// The layer that turns [`TARGET`] spans into OpenTelemetry spans, and the
/// exporter behind it, when `config` names an endpoint; `rt` runs the
/// export requests.
pub fn layer<S>(
    config: &TracingConfig,
    rt: tokio::runtime::Handle,
) -> anyhow::Result<Option<(impl tracing_subscriber::Layer<S>, Tracing)>>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
    use tracing_subscriber::Layer as _;
    let Some(endpoint) = &config.otlp_endpoint else {
        return Ok(None);
    };
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(traces_url(endpoint))
        .with_http_client(RuntimeClient { http, rt })
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(config.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("gateway");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(
            tracing_subscriber::filter::Targets::new().with_target(TARGET, tracing::Level::TRACE),
        );
    ON.store(true, Ordering::Relaxed);
    Ok(Some((layer, Tracing { provider })))
}

/// The collector's traces URL: `/v1/traces` under the endpoint, as the
/// OTLP/HTTP convention for a base endpoint has it (an endpoint that
/// already ends so is taken as it is).
pub fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    }
}

/// Makes `span` a child of the trace the client's `traceparent` (and
/// `tracestate`) name, if it sent a valid one.
pub fn adopt_client_parent(span: &tracing::Span, headers: &HeaderMap) {
    if !on() || !headers.contains_key("traceparent") {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&Headers(headers));
    let _ = span.set_parent(cx);
}

/// Adds `traceparent` / `tracestate` for the current span to a vendor
/// request (nothing when tracing is off).
pub fn inject(b: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    if !on() {
        return b;
    }
    let mut headers = HeaderMap::new();
    inject_headers(&mut headers);
    b.headers(headers)
}

/// [`inject`], into a request's headers.
pub fn inject_headers(headers: &mut HeaderMap) {
    if !on() {
        return;
    }
    let cx = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&cx, &mut HeadersMut(headers));
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// The OTLP exporter's HTTP client: the batch processor calls it from its
/// own thread; the request runs on the gateway's runtime.
#[derive(Debug)]
struct RuntimeClient {
    http: reqwest::Client,
    rt: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for RuntimeClient {
    async fn send_bytes(
        &self,
        request: axum::http::Request<bytes::Bytes>,
    ) -> Result<axum::http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let (parts, body) = request.into_parts();
        let http = self.http.clone();
        let sent = self.rt.spawn(async move {
            let resp = http
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await?;
            let (status, headers) = (resp.status(), resp.headers().clone());
            let body = resp.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        let (status, headers, body) = sent.await??;
        let mut out = axum::http::Response::new(body);
        *out.status_mut() = status;
        *out.headers_mut() = headers;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_once() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/v1/traces"),
            "http://collector:4318/v1/traces"
        );
    }

    #[test]
    fn off_means_no_span_and_no_header() {
        // Nothing in this test process turns tracing on.
        let s = span!("request", route = "x");
        assert!(s.is_none());
        let b = inject(reqwest::Client::new().get("http://127.0.0.1:9/"));
        let req = b.build().expect("a request");
        assert!(req.headers().get("traceparent").is_none());
    }
}
