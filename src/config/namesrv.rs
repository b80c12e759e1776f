//! Name server configuration: `namesrv.conf` keys (`NamesrvConfig` and `NettyServerConfig`
//! in Java) with Java's defaults (`reference/namesrv.md` §9).

use super::properties::Property;
use super::{bad_value as bad, parse_bool, parse_millis as millis, parse_value, ConfigError};
use crate::limits;
use ferromq_shards::Placement;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Name server settings.
#[derive(Clone, Debug)]
pub struct NamesrvConfig {
    /// `bindAddress` (default `0.0.0.0`).
    pub bind_address: IpAddr,
    /// `listenPort` (default 9876).
    pub listen_port: u16,
    /// `kvConfigPath` (default `~/namesrv/kvConfig.json`).
    pub kv_config_path: PathBuf,
    /// `orderMessageEnable` (default false): put `orderTopicConf` into routes.
    pub order_message_enable: bool,
    /// `returnOrderTopicConfigToBroker` (default true).
    pub return_order_topic_config_to_broker: bool,
    /// `enableAllTopicList` (default true).
    pub enable_all_topic_list: bool,
    /// `scanNotActiveBrokerInterval` in ms (default 10 000).
    pub scan_not_active_broker_interval: Duration,
    /// `brokerExpiredTimeoutMillis` (default 120 000): a broker silent this long is dropped
    /// unless it registered with its own `heartbeatTimeoutMillis`.
    pub broker_expired_timeout: Duration,
    /// `serverChannelMaxIdleTimeSeconds` (default 120).
    pub channel_idle_timeout: Duration,
    /// `frameMaxLength` (default 16 MiB).
    pub frame_size_max: usize,
    /// `serverMaxConnections` per shard (default 65 536).
    pub connections_max: usize,
    /// `shards`: placement of shards on cores (default: one per available core).
    pub shards: Option<Placement>,
    /// `configBlackList`: keys UPDATE_NAMESRV_CONFIG may not change, `;`-separated.
    pub config_black_list: String,
    /// The `tls.*` keys (Java's `TlsSystemConfig`): TLS on the port.
    pub tls: crate::remoting::tls::TlsSettings,
    /// The broker's `metrics*` keys (Java's name server has none): `metricsExporterType`
    /// (DISABLE), `metricsPromExporterHost` (empty: `bindAddress`), `metricsPromExporterPort`
    /// (5558, beside the broker's 5557, so both run on one host with the defaults),
    /// `metricsLabel`.
    pub metrics: crate::metrics::config::MetricsConfig,
}

impl Default for NamesrvConfig {
    fn default() -> Self {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
        NamesrvConfig {
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            listen_port: 9876,
            kv_config_path: home.join("namesrv").join("kvConfig.json"),
            order_message_enable: false,
            return_order_topic_config_to_broker: true,
            enable_all_topic_list: true,
            scan_not_active_broker_interval: limits::SCAN_NOT_ACTIVE_BROKER_INTERVAL,
            broker_expired_timeout: limits::BROKER_EXPIRED_TIMEOUT,
            channel_idle_timeout: limits::CHANNEL_IDLE_TIMEOUT,
            frame_size_max: limits::FRAME_SIZE_MAX,
            connections_max: limits::CONNECTIONS_MAX,
            shards: None,
            config_black_list: "configBlackList;configStorePath;kvConfigPath".to_owned(),
            tls: crate::remoting::tls::TlsSettings::default(),
            metrics: crate::metrics::config::MetricsConfig {
                prom_exporter_port: NAMESRV_PROM_EXPORTER_PORT_DEFAULT,
                ..crate::metrics::config::MetricsConfig::default()
            },
        }
    }
}

/// `metricsPromExporterPort` of the name server: the broker's default plus one.
pub const NAMESRV_PROM_EXPORTER_PORT_DEFAULT: u16 =
    crate::metrics::config::PROM_EXPORTER_PORT_DEFAULT + 1;

/// Java keys that ferromq reads without effect: thread pools and buffers of Netty, which a
/// thread-per-core server does not have, and paths of features it does not implement.
const IGNORED_JAVA_KEYS: &[&str] = &[
    "rocketmqHome",
    "configStorePath",
    "productEnvName",
    "clusterTest",
    "serverWorkerThreads",
    "serverCallbackExecutorThreads",
    "serverSelectorThreads",
    "serverOnewaySemaphoreValue",
    "serverAsyncSemaphoreValue",
    "serverSocketSndBufSize",
    "serverSocketRcvBufSize",
    "serverPooledByteBufAllocatorEnable",
    "useEpollNativeSelector",
    "defaultThreadPoolNums",
    "clientRequestThreadPoolNums",
    "defaultThreadPoolQueueCapacity",
    "clientRequestThreadPoolQueueCapacity",
];

impl NamesrvConfig {
    /// The address to listen on.
    #[must_use]
    pub fn listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.listen_port)
    }

    /// Applies properties read from `origin` (a file name, for messages) on top of `self`.
    ///
    /// Returns the unknown keys, for the caller to log.
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] for the first value that does not parse.
    pub fn apply(
        &mut self,
        origin: &str,
        properties: &[Property],
    ) -> Result<Vec<String>, ConfigError> {
        let mut unknown = Vec::new();
        for property in properties {
            let at = format!("{origin} line {}", property.line);
            let (key, value) = (property.key.as_str(), property.value.as_str());
            match key {
                "bindAddress" => {
                    self.bind_address = parse_value(&at, key, value, "an IP address")?;
                }
                "listenPort" => {
                    self.listen_port = parse_value(&at, key, value, "a port 0..=65535")?
                }
                "kvConfigPath" => self.kv_config_path = PathBuf::from(value),
                "orderMessageEnable" => self.order_message_enable = parse_bool(&at, key, value)?,
                "returnOrderTopicConfigToBroker" => {
                    self.return_order_topic_config_to_broker = parse_bool(&at, key, value)?;
                }
                "enableAllTopicList" => self.enable_all_topic_list = parse_bool(&at, key, value)?,
                "scanNotActiveBrokerInterval" => {
                    self.scan_not_active_broker_interval = millis(&at, key, value)?;
                }
                "brokerExpiredTimeoutMillis" => {
                    self.broker_expired_timeout = millis(&at, key, value)?
                }
                "serverChannelMaxIdleTimeSeconds" => {
                    let seconds: u64 = parse_value(&at, key, value, "seconds, at least 1")?;
                    self.channel_idle_timeout = Duration::from_secs(seconds.max(1));
                }
                "frameMaxLength" => {
                    let max: usize = parse_value(&at, key, value, "bytes, 64..=2147483647")?;
                    if !(64..=i32::MAX as usize).contains(&max) {
                        return Err(bad(&at, key, value, "bytes, 64..=2147483647"));
                    }
                    self.frame_size_max = max;
                }
                "serverMaxConnections" => {
                    self.connections_max = parse_value(&at, key, value, "a connection count")?;
                }
                "shards" => {
                    let placement: Placement = value
                        .parse()
                        .map_err(|e| bad(&at, key, value, &format!("a shard placement ({e})")))?;
                    self.shards = Some(placement);
                }
                "configBlackList" => self.config_black_list = value.to_owned(),
                _ if IGNORED_JAVA_KEYS.contains(&key) => {
                    tracing::debug!(key, "Java name server key has no effect in ferromq");
                }
                _ if key.starts_with("metric") || key.starts_with("statusPage") => {
                    match self.metrics.set(key, value) {
                        Ok(true) => {}
                        Ok(false) => unknown.push(key.to_owned()),
                        Err(expected) => return Err(bad(&at, key, value, &expected)),
                    }
                }
                _ if key.starts_with("tls.") => match self.tls.set(key, value) {
                    Ok(true) => {}
                    Ok(false) => unknown.push(key.to_owned()),
                    Err(expected) => return Err(bad(&at, key, value, &expected)),
                },
                _ => unknown.push(key.to_owned()),
            }
        }
        Ok(unknown)
    }
}

impl NamesrvConfig {
    /// The settings as Java properties text (GET_NAMESRV_CONFIG), one `key=value` per line.
    #[must_use]
    pub fn to_properties(&self) -> String {
        let shards = self
            .shards
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let entries: [(&str, String); 13] = [
            ("bindAddress", self.bind_address.to_string()),
            (
                "brokerExpiredTimeoutMillis",
                self.broker_expired_timeout.as_millis().to_string(),
            ),
            ("configBlackList", self.config_black_list.clone()),
            ("enableAllTopicList", self.enable_all_topic_list.to_string()),
            ("frameMaxLength", self.frame_size_max.to_string()),
            ("kvConfigPath", self.kv_config_path.display().to_string()),
            ("listenPort", self.listen_port.to_string()),
            ("orderMessageEnable", self.order_message_enable.to_string()),
            (
                "returnOrderTopicConfigToBroker",
                self.return_order_topic_config_to_broker.to_string(),
            ),
            (
                "scanNotActiveBrokerInterval",
                self.scan_not_active_broker_interval.as_millis().to_string(),
            ),
            (
                "serverChannelMaxIdleTimeSeconds",
                self.channel_idle_timeout.as_secs().to_string(),
            ),
            ("serverMaxConnections", self.connections_max.to_string()),
            ("shards", shards),
        ];
        entries
            .iter()
            .map(|(key, value)| format!("{key}={value}\n"))
            .collect()
    }

    /// Whether `key` is in `configBlackList`.
    #[must_use]
    pub fn is_black_listed(&self, key: &str) -> bool {
        self.config_black_list
            .split(';')
            .any(|listed| listed.trim() == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::properties::parse;

    #[test]
    fn apply_reads_java_keys_and_reports_unknown() {
        let mut config = NamesrvConfig::default();
        let text = "listenPort=9999\norderMessageEnable=true\nserverWorkerThreads=8\nbogus=1\n";
        let unknown = config.apply("namesrv.conf", &parse(text)).unwrap();
        assert_eq!(config.listen_port, 9999);
        assert!(config.order_message_enable);
        assert_eq!(unknown, vec!["bogus".to_string()]);
    }

    #[test]
    fn apply_bad_value_names_file_line_and_key() {
        let mut config = NamesrvConfig::default();
        let error = config
            .apply("namesrv.conf", &parse("\nlistenPort=abc\n"))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "namesrv.conf line 2: listenPort = 'abc' is invalid: a port 0..=65535"
        );
    }
}
