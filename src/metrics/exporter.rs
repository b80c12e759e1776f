//! The HTTP endpoint scrapes read (`metricsExporterType=PROM`): `GET /metrics` answers the
//! Prometheus text format (version 0.0.4, as Java 5.x's `PrometheusHttpServer`); every
//! other path is the [status page](crate::status) when it is on.
//!
//! It runs on a thread of its own with a current-thread tokio runtime and hyper's HTTP/1
//! server, off the shards: a scrape reads the shards' counters (atomics, or tables whose
//! lock only the scrape and their own shard take) and never sends a shard work. The routes
//! are one `match` ([`route`]), so that the status page can join `/metrics` on the same
//! port. Requests are small and read whole by hyper; anything but `GET` of a known path
//! gets 404 or 405, never a closed connection without an answer.

use crate::status::StatusPage;
use bytes::Bytes;
use ferromq_shards::Shutdown;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Scrapes served at the same time; a connection past it is dropped at once.
const CONNECTIONS_MAX: usize = 64;
/// How long a connection may take to send its request head (slow clients are dropped).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A running exporter: the endpoint's address (none for the log) and its thread, which ends
/// at the shutdown signal.
#[derive(Debug)]
pub struct Exporter {
    /// The address it listens on (the real port when 0 was asked for); `None` for the log.
    pub addr: Option<SocketAddr>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Exporter {
    /// Binds `addr` now (so that a port in use fails the start, as in Java) and serves
    /// `registry`, and `page` on the other paths, until `shutdown`.
    ///
    /// # Errors
    /// The port cannot be bound, or the threads cannot start.
    pub fn start(
        addr: SocketAddr,
        registry: Registry,
        page: Option<StatusPage>,
        shutdown: Shutdown,
    ) -> std::io::Result<Exporter> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let registry = Arc::new(registry);
        let page = page.map(Arc::new);
        if let Some(page) = &page {
            page.start_sampler(shutdown.clone())?;
        }
        let thread = std::thread::Builder::new()
            .name("metrics-http".to_owned())
            .spawn(move || run(listener, registry, page, shutdown))?;
        tracing::info!(endpoint = %addr, "metrics endpoint listening (Prometheus text, /metrics)");
        Ok(Exporter {
            addr: Some(addr),
            thread: Some(thread),
        })
    }

    /// Writes `registry` to the log every `interval` until `shutdown`
    /// (`metricsExporterType=LOG`, Java's `LoggingMetricExporter`): one INFO line per sample,
    /// target `ferromq::metrics`, field `sample`, in the Prometheus text format.
    ///
    /// # Errors
    /// The thread cannot start.
    pub fn start_logging(
        registry: Registry,
        interval: Duration,
        shutdown: Shutdown,
    ) -> std::io::Result<Exporter> {
        let thread = std::thread::Builder::new()
            .name("metrics-log".to_owned())
            .spawn(move || {
                let look = Duration::from_millis(50).min(interval);
                let mut next = std::time::Instant::now() + interval;
                while !shutdown.is_triggered() {
                    if std::time::Instant::now() < next {
                        std::thread::sleep(look);
                        continue;
                    }
                    next += interval;
                    let mut text = String::new();
                    if prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)
                        .is_err()
                    {
                        tracing::warn!("metrics could not be encoded");
                        continue;
                    }
                    let samples = text.lines().filter(|line| !line.starts_with('#'));
                    for sample in samples.filter(|line| !line.is_empty()) {
                        tracing::info!(target: "ferromq::metrics", sample);
                    }
                }
            })?;
        tracing::info!(
            every_ms = interval.as_millis(),
            "metrics written to the log"
        );
        Ok(Exporter {
            addr: None,
            thread: Some(thread),
        })
    }

    /// Waits for the thread to end (it ends at the shutdown signal).
    pub fn join(mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(
    listener: std::net::TcpListener,
    registry: Arc<Registry>,
    page: Option<Arc<StatusPage>>,
    shutdown: Shutdown,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "metrics endpoint: cannot start its runtime");
            return;
        }
    };
    let serve = |stream: tokio::net::TcpStream, peer: SocketAddr| {
        let registry = Arc::clone(&registry);
        let page = page.clone();
        async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let registry = Arc::clone(&registry);
                let page = page.clone();
                async move {
                    let response = match page {
                        Some(page) if request.uri().path() != "/metrics" => {
                            crate::status::answer(&page, request).await
                        }
                        _ => route(&request, &registry),
                    };
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(true)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
            if let Err(error) = served {
                tracing::debug!(%peer, %error, "metrics endpoint: connection ended");
            }
        }
    };
    runtime.block_on(crate::serve::accept_loop(
        listener,
        "metrics endpoint",
        CONNECTIONS_MAX,
        &shutdown,
        serve,
    ));
}

/// Answers one request: `GET /metrics` the exposition, other paths 404, other methods 405.
fn route(request: &Request<Incoming>, registry: &Registry) -> Response<Full<Bytes>> {
    match (request.method(), request.uri().path()) {
        (&Method::GET | &Method::HEAD, "/metrics") => {
            let mut text = String::new();
            match prometheus_client::encoding::prometheus_text::encode(&mut text, registry) {
                Ok(()) => answer(
                    StatusCode::OK,
                    prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                    text,
                ),
                Err(_) => answer(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    "metrics could not be encoded\n".to_owned(),
                ),
            }
        }
        (_, "/metrics") => answer(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".to_owned(),
        ),
        _ => answer(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found; metrics are at /metrics\n".to_owned(),
        ),
    }
}

fn answer(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}
