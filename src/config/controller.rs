//! Controller configuration: `controller.conf` keys (`ControllerConfig` and the listen
//! address of `NettyServerConfig` in Java) with Java's defaults.
//!
//! The heartbeat timeout is not here: each broker sends its own (`controllerHeartBeatTimeoutMills`
//! of its `broker.conf`, default 10 s) in every BROKER_HEARTBEAT, as Java's brokers do.

use super::properties::Property;
use super::{parse_bool, parse_millis as millis, parse_value, ConfigError};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Controller settings.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// `bindAddress` (default `0.0.0.0`).
    pub bind_address: IpAddr,
    /// `listenPort` (default 9878, the port of Java's quick-start controller peer `n0`).
    pub listen_port: u16,
    /// `controllerDLegerGroup` (default `FerromqController`): the group name
    /// GET_METADATA_INFO reports.
    pub group: String,
    /// `controllerDLegerSelfId` (default `n0`).
    pub self_id: String,
    /// `controllerDLegerPeers` (`id-host:port;...`, default empty: this controller alone).
    /// When set, the controllers' raft addresses: the state is replicated over them with
    /// raft, `self_id` names this one, and only the raft leader decides. Brokers use the
    /// controllers' listen addresses (`controllerAddr`), not these.
    pub peers: String,
    /// `scanNotActiveBrokerInterval` (default 5 000 ms): how often silent brokers are dropped.
    pub scan_not_active_broker_interval: Duration,
    /// `scanInactiveMasterInterval` (default 5 000 ms): how often groups with a dead master
    /// and a live broker are re-elected. One loop runs both scans, at the shorter interval.
    pub scan_inactive_master_interval: Duration,
    /// `enableElectUncleanMaster` (default false): elect outside the SyncStateSet when no
    /// member of it is alive (may lose acknowledged messages).
    pub enable_elect_unclean_master: bool,
    /// `notifyBrokerRoleChanged` (default true): push NOTIFY_BROKER_ROLE_CHANGED after an
    /// election instead of waiting for the brokers' next GET_REPLICA_INFO.
    pub notify_broker_role_changed: bool,
    /// `electMasterMaxRetryCount` (default 3). Read, without effect: the state machine
    /// answers a retry as it answered the first try, so one attempt decides.
    pub elect_master_max_retry_count: u32,
    /// `controllerStorePath` (default empty: state in memory only): the directory of the
    /// event log (`events.jsonl`), replayed at start; with `controllerDLegerPeers`, of the
    /// raft log, vote and snapshot (`raft.redb`), and then required.
    pub controller_store_path: String,
    /// `configBlackList`: keys UPDATE_CONTROLLER_CONFIG may not change, `;`-separated.
    pub config_black_list: String,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            listen_port: 9878,
            group: "FerromqController".to_owned(),
            self_id: "n0".to_owned(),
            peers: String::new(),
            scan_not_active_broker_interval: Duration::from_secs(5),
            scan_inactive_master_interval: Duration::from_secs(5),
            enable_elect_unclean_master: false,
            notify_broker_role_changed: true,
            elect_master_max_retry_count: 3,
            controller_store_path: String::new(),
            config_black_list: "configBlackList;configStorePath".to_owned(),
        }
    }
}

/// Java keys read without effect: thread pools, DLedger's and JRaft's storage, metrics.
const IGNORED_JAVA_KEYS: &[&str] = &[
    "rocketmqHome",
    "configStorePath",
    "controllerType",
    "controllerThreadPoolNums",
    "controllerRequestThreadPoolQueueCapacity",
    "mappedFileSize",
    "isProcessReadEvent",
    "serverWorkerThreads",
    "serverSelectorThreads",
];

impl ControllerConfig {
    /// The address to listen on.
    #[must_use]
    pub fn listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.listen_port)
    }

    /// The address brokers reach this controller at, given the bound one (loopback when
    /// bound to every interface). The raft peers' addresses are another port.
    #[must_use]
    pub fn advertised_addr(&self, bound: SocketAddr) -> String {
        let ip = if bound.ip().is_unspecified() {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            bound.ip()
        };
        SocketAddr::new(ip, bound.port()).to_string()
    }

    /// Applies properties read from `origin` on top of `self`; returns the unknown keys.
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
                    self.listen_port = parse_value(&at, key, value, "a port 0..=65535")?;
                }
                "controllerDLegerGroup" => value.trim().clone_into(&mut self.group),
                "controllerDLegerSelfId" => value.trim().clone_into(&mut self.self_id),
                "controllerDLegerPeers" => value.trim().clone_into(&mut self.peers),
                "scanNotActiveBrokerInterval" => {
                    self.scan_not_active_broker_interval = millis(&at, key, value)?;
                }
                "scanInactiveMasterInterval" => {
                    self.scan_inactive_master_interval = millis(&at, key, value)?;
                }
                "enableElectUncleanMaster" => {
                    self.enable_elect_unclean_master = parse_bool(&at, key, value)?;
                }
                "notifyBrokerRoleChanged" => {
                    self.notify_broker_role_changed = parse_bool(&at, key, value)?;
                }
                "electMasterMaxRetryCount" => {
                    self.elect_master_max_retry_count =
                        parse_value(&at, key, value, "a count 0..=4294967295")?;
                }
                "controllerStorePath" => value.trim().clone_into(&mut self.controller_store_path),
                "configBlackList" => value.clone_into(&mut self.config_black_list),
                _ if IGNORED_JAVA_KEYS.contains(&key)
                    || key.starts_with("metric")
                    || key.starts_with("jRaft") =>
                {
                    tracing::debug!(key, "Java controller key has no effect in ferromq");
                }
                _ => unknown.push(key.to_owned()),
            }
        }
        Ok(unknown)
    }

    /// The settings as Java properties text (GET_CONTROLLER_CONFIG), one `key=value` a line.
    #[must_use]
    pub fn to_properties(&self) -> String {
        let entries: [(&str, String); 12] = [
            ("bindAddress", self.bind_address.to_string()),
            ("configBlackList", self.config_black_list.clone()),
            ("controllerDLegerGroup", self.group.clone()),
            ("controllerDLegerPeers", self.peers.clone()),
            ("controllerDLegerSelfId", self.self_id.clone()),
            ("controllerStorePath", self.controller_store_path.clone()),
            (
                "electMasterMaxRetryCount",
                self.elect_master_max_retry_count.to_string(),
            ),
            (
                "enableElectUncleanMaster",
                self.enable_elect_unclean_master.to_string(),
            ),
            ("listenPort", self.listen_port.to_string()),
            (
                "notifyBrokerRoleChanged",
                self.notify_broker_role_changed.to_string(),
            ),
            (
                "scanInactiveMasterInterval",
                self.scan_inactive_master_interval.as_millis().to_string(),
            ),
            (
                "scanNotActiveBrokerInterval",
                self.scan_not_active_broker_interval.as_millis().to_string(),
            ),
        ];
        entries
            .iter()
            .map(|(key, value)| format!("{key}={value}\n"))
            .collect()
    }

    /// Whether UPDATE_CONTROLLER_CONFIG may not change `key` (`configBlackList`, plus the
    /// three keys Java always protects).
    #[must_use]
    pub fn is_black_listed(&self, key: &str) -> bool {
        ["configBlackList", "configStorePath", "rocketmqHome"].contains(&key)
            || self
                .config_black_list
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
        let mut config = ControllerConfig::default();
        let text = "listenPort=9999\nenableElectUncleanMaster=true\ncontrollerType=DLedger\n\
                    controllerDLegerPeers=n0-10.0.0.1:9878;n1-10.0.0.2:9878\nbogus=1\n";
        let unknown = config.apply("controller.conf", &parse(text)).unwrap();
        assert_eq!(config.listen_port, 9999);
        assert!(config.enable_elect_unclean_master);
        assert_eq!(unknown, vec!["bogus".to_owned()]);
        assert_eq!(config.peers, "n0-10.0.0.1:9878;n1-10.0.0.2:9878");
        let bound = SocketAddr::from(([0, 0, 0, 0], 9999));
        assert_eq!(config.advertised_addr(bound), "127.0.0.1:9999");
    }

    #[test]
    fn advertised_addr_without_peers_is_the_bound_one() {
        let config = ControllerConfig::default();
        let bound = SocketAddr::from(([0, 0, 0, 0], 9878));
        assert_eq!(config.advertised_addr(bound), "127.0.0.1:9878");
        let bound = SocketAddr::from(([10, 1, 2, 3], 9878));
        assert_eq!(config.advertised_addr(bound), "10.1.2.3:9878");
    }
}
