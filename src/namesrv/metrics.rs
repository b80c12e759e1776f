//! The name server's metrics. Java 5.x's name server exports none; ferromq's uses the
//! broker's keys (`metricsExporterType`, `metricsPromExporterHost/Port`, `metricsLabel`;
//! its own default port, 5558) and exports what its users look at: request latencies under
//! the remoting name every Java server uses (`rocketmq_rpc_latency_milliseconds`, as the
//! 5.x proxy does, with `node_type="namesrv"`), and its routes and live brokers under
//! `ferromq_namesrv_*`, read from the snapshot the owner publishes after every change.

use super::route_snapshot::SharedRouteSnapshot;
use crate::metrics::config::{ExporterType, MetricsConfig};
use crate::metrics::exporter::Exporter;
use crate::metrics::rpc::RpcStats;
use crate::metrics::{gauge, Labels};
use crate::status::StatusPage;
use ferromq_shards::ShardsHandle;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;
use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;

/// Starts the Prometheus endpoint when `metricsExporterType=PROM`; `None` when metrics are
/// off. `addr` is the name server's own (its host is the endpoint's default).
///
/// # Errors
/// A bad host, or a port that cannot be bound.
pub fn start(
    config: &MetricsConfig,
    addr: SocketAddr,
    rpc: Arc<RpcStats>,
    snapshot: SharedRouteSnapshot,
    shards: &ShardsHandle<()>,
) -> Result<Option<Exporter>, String> {
    let mut labels: Vec<(Cow<'static, str>, Cow<'static, str>)> = config
        .labels()
        .into_iter()
        .map(|(key, value)| (Cow::Owned(key), Cow::Owned(value)))
        .collect();
    labels.push(("node_type".into(), "namesrv".into()));
    labels.push(("node_id".into(), addr.to_string().into()));
    let mut registry = Registry::with_labels(labels.into_iter());
    registry.register_collector(Box::new(NamesrvCollector { rpc, snapshot }));
    match config.exporter_type {
        ExporterType::Prom => {}
        ExporterType::Log => {
            let every = std::time::Duration::from_millis(config.logging_interval_ms);
            return Exporter::start_logging(registry, every, shards.shutdown.clone())
                .map(Some)
                .map_err(|error| format!("metrics log: {error}"));
        }
        ExporterType::Disable | ExporterType::OtlpGrpc => return Ok(None),
    }
    let endpoint = config.prom_addr(addr.ip())?;
    // The name server's page reads the cluster through the name server itself.
    let page = config.status_page.then(|| {
        StatusPage::new(
            Some(addr.to_string()),
            None,
            std::time::Duration::from_millis(config.status_page_interval_ms),
        )
    });
    Exporter::start(endpoint, registry, page, shards.shutdown.clone())
        .map(Some)
        .map_err(|error| format!("metrics endpoint on {endpoint}: {error}"))
}

#[derive(Debug)]
struct NamesrvCollector {
    rpc: Arc<RpcStats>,
    snapshot: SharedRouteSnapshot,
}

impl Collector for NamesrvCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let snapshot = self.snapshot.load();
        gauge(
            &mut encoder,
            "ferromq_namesrv_topics",
            "Topics with a route.",
            [(Labels::new(), snapshot.topic_count() as u64)],
        )?;
        gauge(
            &mut encoder,
            "ferromq_namesrv_brokers",
            "Live brokers (registered and not expired).",
            [(Labels::new(), snapshot.broker_count() as u64)],
        )?;
        crate::metrics::rpc::encode_latency(&mut encoder, &self.rpc)
    }
}
