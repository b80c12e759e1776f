//! Metrics under Java 5.x's names (`BrokerMetricsConstant`, `DefaultStoreMetricsConstant`,
//! `RemotingMetricsConstant`) and ferromq's own under `ferromq_`, exported as Java's
//! `metricsExporterType` says ([`config`]): a Prometheus endpoint ([`exporter`]).
//!
//! Nothing here counts: each shard counts in slots of its own (`broker::stats`), and a
//! scrape's collector (`broker::metrics`) reads them and writes families with the helpers
//! below, which leave out a family with no series, as Java's OpenTelemetry exporter does.
//!
//! Names: Java's instrument names as its Prometheus exporter writes them (a unit joins the
//! name: `rocketmq_storage_size_bytes`, `rocketmq_rpc_latency_milliseconds`; counters end in
//! `_total`), so a 5.x scrape config, alert or dashboard works unchanged.

pub mod config;
pub mod exporter;
pub mod rpc;
pub mod shard;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;

/// A series' labels: Java's label names, their values.
pub type Labels = Vec<(&'static str, String)>;

/// One histogram series: the sum and count of what it recorded, and the count in each
/// bucket (not cumulative) for each upper bound of the family, the last `+Inf`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistogramValue {
    /// Sum of the recorded values.
    pub sum: f64,
    /// Values recorded.
    pub count: u64,
    /// Per bucket, its upper bound and how many values fell in it.
    pub buckets: Vec<(f64, u64)>,
}

/// Writes one family: its descriptor, then each series through `write`; nothing at all
/// when `series` is empty.
fn family<T>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric_type: MetricType,
    series: impl IntoIterator<Item = (Labels, T)>,
    write: impl Fn(&mut MetricEncoder, &T) -> std::fmt::Result,
) -> std::fmt::Result {
    let mut series = series.into_iter().peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (labels, value) in series {
        write(&mut family.encode_family(&labels)?, &value)?;
    }
    Ok(())
}

/// Writes a gauge family; nothing when `series` is empty.
///
/// # Errors
/// The encoder's.
pub fn gauge<V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, V)>,
) -> std::fmt::Result {
    family(
        encoder,
        name,
        help,
        MetricType::Gauge,
        series,
        |metric, value| metric.encode_gauge(value),
    )
}

/// Writes a counter family named `name` + `_total`; nothing when `series` is empty.
///
/// # Errors
/// The encoder's.
pub fn counter<V: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, V)>,
) -> std::fmt::Result {
    family(
        encoder,
        name,
        help,
        MetricType::Counter,
        series,
        |metric, value| metric.encode_counter::<NoLabelSet, _, u64>(value, None),
    )
}

/// Writes a histogram family; nothing when `series` is empty.
///
/// # Errors
/// The encoder's.
pub fn histogram(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, HistogramValue)>,
) -> std::fmt::Result {
    family(
        encoder,
        name,
        help,
        MetricType::Histogram,
        series,
        |metric, value| {
            metric.encode_histogram::<NoLabelSet>(value.sum, value.count, &value.buckets, None)
        },
    )
}
