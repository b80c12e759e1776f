//! The metrics keys of Java 5.x's `BrokerConfig`, with its defaults: which exporter runs
//! (`metricsExporterType`), where the Prometheus endpoint listens
//! (`metricsPromExporterHost`, `metricsPromExporterPort`), the labels every metric carries
//! (`metricsLabel`) and whether counters are deltas (`metricsInDelta`).

use std::net::{IpAddr, SocketAddr};

/// Java's `metricsPromExporterPort` default.
pub const PROM_EXPORTER_PORT_DEFAULT: u16 = 5557;

/// Which exporter runs (`MetricsExporterType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[doc(alias = "MetricsExporterType")]
pub enum ExporterType {
    /// No metrics (Java's default).
    #[default]
    Disable,
    /// OpenTelemetry over gRPC to `metricsGrpcExporterTarget`: refused at start by
    /// ferromq for now.
    OtlpGrpc,
    /// A Prometheus scrape endpoint on `metricsPromExporterHost:metricsPromExporterPort`.
    Prom,
    /// Metrics written to the log every `metricLoggingExporterIntervalInMills`.
    Log,
}

impl ExporterType {
    /// Java's name (`DISABLE`, `OTLP_GRPC`, `PROM`, `LOG`).
    #[must_use]
    pub fn java_name(self) -> &'static str {
        match self {
            ExporterType::Disable => "DISABLE",
            ExporterType::OtlpGrpc => "OTLP_GRPC",
            ExporterType::Prom => "PROM",
            ExporterType::Log => "LOG",
        }
    }

    /// A value as Java's setters read it: the name, or its number (`MetricsExporterType.
    /// valueOf(int)`: 1, 2, 3; any other number is DISABLE).
    fn parse(value: &str) -> Option<ExporterType> {
        let by_name = match value {
            "DISABLE" => Some(ExporterType::Disable),
            "OTLP_GRPC" => Some(ExporterType::OtlpGrpc),
            "PROM" => Some(ExporterType::Prom),
            "LOG" => Some(ExporterType::Log),
            _ => None,
        };
        by_name.or_else(|| {
            value.parse::<i32>().ok().map(|number| match number {
                1 => ExporterType::OtlpGrpc,
                2 => ExporterType::Prom,
                3 => ExporterType::Log,
                _ => ExporterType::Disable,
            })
        })
    }
}

/// The `metrics*` keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `metricsExporterType` (DISABLE).
    pub exporter_type: ExporterType,
    /// `metricsPromExporterHost` (empty: `brokerIP1`, as Java).
    pub prom_exporter_host: String,
    /// `metricsPromExporterPort` (5557).
    pub prom_exporter_port: u16,
    /// `metricsGrpcExporterTarget` (empty).
    pub grpc_exporter_target: String,
    /// `metricsGrpcExporterHeader` (empty).
    pub grpc_exporter_header: String,
    /// `metricsLabel` (empty): `key:value` pairs, comma-separated, added to every metric.
    pub label: String,
    /// `metricsInDelta` (false): counters as deltas, marked `aggregation="delta"`.
    pub in_delta: bool,
    /// `metricLoggingExporterIntervalInMills` (10000): how often LOG writes the metrics.
    pub logging_interval_ms: u64,
    /// `statusPageEnable` (true; ferromq's): the status page on the Prometheus endpoint's
    /// port, at `/`.
    pub status_page: bool,
    /// `statusPageSampleIntervalMs` (5000; ferromq's): how often the status page reads the
    /// cluster.
    pub status_page_interval_ms: u64,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            exporter_type: ExporterType::Disable,
            prom_exporter_host: String::new(),
            prom_exporter_port: PROM_EXPORTER_PORT_DEFAULT,
            grpc_exporter_target: String::new(),
            grpc_exporter_header: String::new(),
            label: String::new(),
            in_delta: false,
            logging_interval_ms: 10_000,
            status_page: true,
            status_page_interval_ms: 5000,
        }
    }
}

impl MetricsConfig {
    /// Applies one key: `Ok(false)` when it is not a metrics key, `Err` with what a valid
    /// value is.
    ///
    /// # Errors
    /// What the key takes, when its value does not parse.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let value = value.trim();
        match key {
            "metricsExporterType" => {
                self.exporter_type = ExporterType::parse(value)
                    .ok_or_else(|| "DISABLE, OTLP_GRPC, PROM or LOG".to_owned())?;
            }
            "metricsPromExporterHost" => value.clone_into(&mut self.prom_exporter_host),
            "metricsPromExporterPort" => {
                self.prom_exporter_port = value.parse().map_err(|_| "a port".to_owned())?;
            }
            "metricsGrpcExporterTarget" => value.clone_into(&mut self.grpc_exporter_target),
            "metricsGrpcExporterHeader" => value.clone_into(&mut self.grpc_exporter_header),
            "metricsLabel" => value.clone_into(&mut self.label),
            "metricsInDelta" => self.in_delta = boolean(value)?,
            "metricLoggingExporterIntervalInMills" => {
                self.logging_interval_ms = value
                    .parse()
                    .ok()
                    .filter(|ms| *ms >= 1)
                    .ok_or_else(|| "a number of milliseconds, at least 1".to_owned())?;
            }
            "statusPageEnable" => self.status_page = boolean(value)?,
            "statusPageSampleIntervalMs" => {
                self.status_page_interval_ms = value
                    .parse()
                    .ok()
                    .filter(|ms| *ms >= 100)
                    .ok_or_else(|| "a number of milliseconds, at least 100".to_owned())?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The keys as GET_BROKER_CONFIG shows them.
    #[must_use]
    pub fn java_properties(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "metricsExporterType",
                self.exporter_type.java_name().to_owned(),
            ),
            ("metricsPromExporterHost", self.prom_exporter_host.clone()),
            (
                "metricsPromExporterPort",
                self.prom_exporter_port.to_string(),
            ),
            (
                "metricsGrpcExporterTarget",
                self.grpc_exporter_target.clone(),
            ),
            (
                "metricsGrpcExporterHeader",
                self.grpc_exporter_header.clone(),
            ),
            ("metricsLabel", self.label.clone()),
            ("metricsInDelta", self.in_delta.to_string()),
        ]
    }

    /// The Prometheus endpoint's address: `metricsPromExporterHost`, or `default_host`
    /// when it is empty (Java takes `brokerIP1`).
    ///
    /// # Errors
    /// The host is not an IP address.
    pub fn prom_addr(&self, default_host: IpAddr) -> Result<SocketAddr, String> {
        let host = if self.prom_exporter_host.is_empty() {
            default_host
        } else {
            self.prom_exporter_host.parse().map_err(|_| {
                format!(
                    "metricsPromExporterHost={} is not an IP address",
                    self.prom_exporter_host
                )
            })?
        };
        Ok(SocketAddr::new(host, self.prom_exporter_port))
    }

    /// The `metricsLabel` pairs, in order; a pair that is not `key:value` is skipped with a
    /// warning, as Java does.
    #[must_use]
    pub fn labels(&self) -> Vec<(String, String)> {
        self.label
            .split(',')
            .filter(|item| !item.is_empty())
            .filter_map(|item| {
                let mut parts = item.split(':');
                match (parts.next(), parts.next(), parts.next()) {
                    (Some(key), Some(value), None) => Some((key.to_owned(), value.to_owned())),
                    _ => {
                        tracing::warn!(label = %self.label, "metricsLabel is not valid");
                        None
                    }
                }
            })
            .collect()
    }

    /// Refuses what ferromq does not export yet.
    ///
    /// # Errors
    /// The exporter type asked for and what to use instead.
    pub fn check(&self) -> Result<(), String> {
        match self.exporter_type {
            ExporterType::Disable | ExporterType::Prom | ExporterType::Log => Ok(()),
            other => Err(format!(
                "metricsExporterType={} is not supported by ferromq yet; use PROM \
                 (a Prometheus endpoint on metricsPromExporterPort), LOG or DISABLE",
                other.java_name()
            )),
        }
    }
}

/// A boolean as Java's setters read it (any case).
fn boolean(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("true or false".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_as_java_reads_them() {
        let mut config = MetricsConfig::default();
        assert_eq!(config.exporter_type, ExporterType::Disable);
        assert_eq!(config.prom_exporter_port, 5557);
        assert_eq!(config.set("metricsExporterType", "PROM"), Ok(true));
        assert_eq!(config.exporter_type, ExporterType::Prom);
        assert_eq!(config.set("metricsExporterType", "1"), Ok(true));
        assert_eq!(config.exporter_type, ExporterType::OtlpGrpc);
        assert!(config.check().is_err());
        assert!(config.set("metricsExporterType", "prometheus").is_err());
        assert_eq!(config.set("metricsInDelta", "TRUE"), Ok(true));
        assert!(config.in_delta);
        assert_eq!(config.set("metricsLabel", "a:1,broken,b:2"), Ok(true));
        assert_eq!(
            config.labels(),
            vec![("a".into(), "1".into()), ("b".into(), "2".into())]
        );
        assert_eq!(config.set("listenPort", "1"), Ok(false));
        assert_eq!(
            config.prom_addr(IpAddr::from([127, 0, 0, 1])),
            Ok(SocketAddr::from(([127, 0, 0, 1], 5557)))
        );
    }
}
