//! One module per workload.

pub mod commitlog;
pub mod mq;
pub mod plot;
pub mod route;
pub mod timeline;

/// The quantiles every workload reports, as JSON.
fn latency_json(h: &hdrhistogram::Histogram<u64>) -> serde_json::Value {
    serde_json::json!({
        "p50": h.value_at_quantile(0.50),
        "p90": h.value_at_quantile(0.90),
        "p99": h.value_at_quantile(0.99),
        "p999": h.value_at_quantile(0.999),
        "p9999": h.value_at_quantile(0.9999),
        "max": h.max(),
    })
}
