//! OpenTelemetry traces over OTLP/HTTP: one server span per request and one
//! client span per attempt, continuing the client's W3C `traceparent`. When
//! traces are off nothing here exists: no provider, no spans, no attributes.

mod attrs;
mod export;
mod span;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Context, InstrumentationScope};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::runtime;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use thiserror::Error;

pub use span::{AttemptOutcome, AttemptSpan, AttemptStart, AttemptTrace, RequestEnd, TraceHandle};

use crate::config::Telemetry;

/// How long one export may take before the batch is dropped.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why traces could not be turned on.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The exporter refused its settings.
    #[error("cannot build the OTLP trace exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// The exporter's HTTP client could not be made (its TLS setup).
    #[error("cannot make the OTLP exporter's HTTP client: {0}")]
    Client(#[from] crate::egress::ClientError),
    /// The batch exporter runs as a task and needs a runtime to start on.
    #[error("traces must be installed from inside a tokio runtime")]
    NoRuntime,
}

/// The installed tracer: spans batch up on a tokio task and leave as OTLP
/// protobuf over HTTP or HTTPS.
pub struct Tracer {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").finish_non_exhaustive()
    }
}

impl Tracer {
    /// Starts exporting to `telemetry`'s endpoint, from the current tokio runtime.
    pub fn install(telemetry: &Telemetry) -> Result<Arc<Self>, TraceError> {
        tokio::runtime::Handle::try_current().map_err(|_| TraceError::NoRuntime)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(export::ExportClient::new(EXPORT_TIMEOUT)?)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(&telemetry.traces_endpoint)
            .with_timeout(EXPORT_TIMEOUT)
            .build()?;
        let processor = BatchSpanProcessor::builder(exporter, runtime::Tokio).build();
        let resource = Resource::builder().with_service_name(telemetry.service_name.clone()).build();
        let provider = SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource).build();
        let scope = InstrumentationScope::builder("baton").with_version(env!("CARGO_PKG_VERSION")).build();
        let tracer = provider.tracer_with_scope(scope);
        Ok(Arc::new(Tracer { provider, tracer }))
    }

    /// Begins a request's trace now, as a child of the `traceparent` in
    /// `headers` when it has a valid one; its span starts once the route is known.
    pub fn begin(&self, headers: &http::HeaderMap) -> TraceStart {
        let parent = TraceContextPropagator::new().extract_with_context(&Context::new(), &Headers(headers));
        TraceStart { tracer: self.tracer.clone(), parent, at: SystemTime::now() }
    }

    /// Exports every span still waiting and stops, within `limit`; whether
    /// it finished in time.
    pub async fn shutdown(&self, limit: Duration) -> bool {
        let provider = self.provider.clone();
        // The SDK blocks on the export task: wait for it off the runtime's threads.
        let stopping = tokio::task::spawn_blocking(move || provider.shutdown());
        matches!(tokio::time::timeout(limit, stopping).await, Ok(Ok(Ok(()))))
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        // Dropping the last provider blocks on the export task, which may need
        // the very thread dropping it: stop (or find it stopped) elsewhere.
        let provider = self.provider.clone();
        let _ = std::thread::Builder::new().name("baton-traces-stop".into()).spawn(move || provider.shutdown());
    }
}

/// A request's trace before its span starts: the client's context and the
/// time the request arrived.
pub struct TraceStart {
    tracer: SdkTracer,
    parent: Context,
    at: SystemTime,
}

/// The request's headers, as the propagator reads them.
struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}
