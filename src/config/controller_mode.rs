//! The controller-mode keys of a broker (RocketMQ 5.x `BrokerConfig` and
//! `MessageStoreConfig`, Java's names and defaults): whether the broker takes its id and role
//! from a controller, where the controllers are, and how often it heartbeats and asks.

use super::{parse_bool, parse_value, ConfigError};
use std::time::Duration;

/// Controller-mode settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerModeConfig {
    /// `enableControllerMode` (false): id and role come from the controller; `brokerId` and
    /// `brokerRole` only set the role the broker starts in (a slave until told otherwise).
    pub enable: bool,
    /// `controllerAddr` (none): the controllers, `;`-separated `host:port`.
    pub controller_addr: Vec<String>,
    /// `syncBrokerMetadataPeriod` (5 000 ms): how often the broker asks the controller for
    /// its group's master and SyncStateSet (CONTROLLER_GET_REPLICA_INFO).
    pub sync_broker_metadata_period: Duration,
    /// `checkSyncStateSetPeriod` (5 000 ms): how often a master checks which slaves are in
    /// sync.
    pub check_sync_state_set_period: Duration,
    /// `syncControllerMetadataPeriod` (10 000 ms): how often the broker looks for the
    /// controllers' leader (CONTROLLER_GET_METADATA_INFO).
    pub sync_controller_metadata_period: Duration,
    /// `controllerHeartBeatTimeoutMills` (10 000 ms): sent in each heartbeat; the controller
    /// counts the broker gone when it has heard nothing for this long.
    pub controller_heartbeat_timeout: Duration,
    /// `brokerHeartbeatInterval` (1 000 ms): BROKER_HEARTBEAT to every controller.
    pub broker_heartbeat_interval: Duration,
    /// `sendHeartbeatTimeoutMillis` (1 000 ms): how long one controller request may take.
    pub send_heartbeat_timeout: Duration,
    /// `brokerElectionPriority` (`i32::MAX`): lower is elected first among equals.
    pub broker_election_priority: i32,
    /// `allAckInSyncStateSet` (false): a SYNC put is acknowledged once every member of the
    /// SyncStateSet has it.
    pub all_ack_in_sync_state_set: bool,
    /// `minInSyncReplicas` (1): replicas (the master counted) a put needs otherwise.
    pub min_in_sync_replicas: u32,
    /// `haMaxTimeSlaveNotCatchup` (15 000 ms): a slave behind the master for longer leaves
    /// the SyncStateSet.
    pub ha_max_time_slave_not_catchup: Duration,
}

impl Default for ControllerModeConfig {
    fn default() -> Self {
        ControllerModeConfig {
            enable: false,
            controller_addr: Vec::new(),
            sync_broker_metadata_period: Duration::from_millis(5_000),
            check_sync_state_set_period: Duration::from_millis(5_000),
            sync_controller_metadata_period: Duration::from_millis(10_000),
            controller_heartbeat_timeout: Duration::from_millis(10_000),
            broker_heartbeat_interval: Duration::from_millis(1_000),
            send_heartbeat_timeout: Duration::from_millis(1_000),
            broker_election_priority: i32::MAX,
            all_ack_in_sync_state_set: false,
            min_in_sync_replicas: 1,
            ha_max_time_slave_not_catchup: Duration::from_millis(15_000),
        }
    }
}

impl ControllerModeConfig {
    /// Applies `key` if it is a controller-mode key: `None` when it is not one.
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] when the value does not parse.
    pub fn apply(&mut self, at: &str, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let millis = |value: &str| -> Result<Duration, ConfigError> {
            parse_value::<u64>(at, key, value, "milliseconds").map(Duration::from_millis)
        };
        let applied = match key {
            "enableControllerMode" => parse_bool(at, key, value).map(|b| self.enable = b),
            "controllerAddr" => {
                self.controller_addr = value
                    .split(';')
                    .map(str::trim)
                    .filter(|addr| !addr.is_empty())
                    .map(str::to_owned)
                    .collect();
                Ok(())
            }
            "syncBrokerMetadataPeriod" => {
                millis(value).map(|d| self.sync_broker_metadata_period = d)
            }
            "checkSyncStateSetPeriod" => {
                millis(value).map(|d| self.check_sync_state_set_period = d)
            }
            "syncControllerMetadataPeriod" => {
                millis(value).map(|d| self.sync_controller_metadata_period = d)
            }
            "controllerHeartBeatTimeoutMills" => {
                millis(value).map(|d| self.controller_heartbeat_timeout = d)
            }
            "brokerHeartbeatInterval" => millis(value).map(|d| self.broker_heartbeat_interval = d),
            "sendHeartbeatTimeoutMillis" => millis(value).map(|d| self.send_heartbeat_timeout = d),
            "brokerElectionPriority" => {
                parse_value(at, key, value, "an integer").map(|n| self.broker_election_priority = n)
            }
            "allAckInSyncStateSet" => {
                parse_bool(at, key, value).map(|b| self.all_ack_in_sync_state_set = b)
            }
            "minInSyncReplicas" => parse_value(at, key, value, "a replica count")
                .map(|n| self.min_in_sync_replicas = n),
            "haMaxTimeSlaveNotCatchup" => {
                millis(value).map(|d| self.ha_max_time_slave_not_catchup = d)
            }
            _ => return None,
        };
        Some(applied)
    }

    /// The keys and values as `broker.conf` spells them (GET_BROKER_CONFIG).
    #[must_use]
    pub fn java_properties(&self) -> Vec<(&'static str, String)> {
        let ms = |d: Duration| d.as_millis().to_string();
        vec![
            ("enableControllerMode", self.enable.to_string()),
            ("controllerAddr", self.controller_addr.join(";")),
            (
                "syncBrokerMetadataPeriod",
                ms(self.sync_broker_metadata_period),
            ),
            (
                "checkSyncStateSetPeriod",
                ms(self.check_sync_state_set_period),
            ),
            (
                "syncControllerMetadataPeriod",
                ms(self.sync_controller_metadata_period),
            ),
            (
                "controllerHeartBeatTimeoutMills",
                ms(self.controller_heartbeat_timeout),
            ),
            (
                "brokerHeartbeatInterval",
                ms(self.broker_heartbeat_interval),
            ),
            (
                "sendHeartbeatTimeoutMillis",
                ms(self.send_heartbeat_timeout),
            ),
            (
                "brokerElectionPriority",
                self.broker_election_priority.to_string(),
            ),
            (
                "allAckInSyncStateSet",
                self.all_ack_in_sync_state_set.to_string(),
            ),
            ("minInSyncReplicas", self.min_in_sync_replicas.to_string()),
            (
                "haMaxTimeSlaveNotCatchup",
                ms(self.ha_max_time_slave_not_catchup),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_keys_apply_and_bad_values_are_refused() {
        let mut config = ControllerModeConfig::default();
        for (key, value) in [
            ("enableControllerMode", "true"),
            ("controllerAddr", "127.0.0.1:9878; 127.0.0.1:9868;"),
            ("syncBrokerMetadataPeriod", "500"),
            ("allAckInSyncStateSet", "true"),
        ] {
            assert!(matches!(
                config.apply("broker.conf", key, value),
                Some(Ok(()))
            ));
        }
        assert!(config.enable && config.all_ack_in_sync_state_set);
        assert_eq!(config.controller_addr, ["127.0.0.1:9878", "127.0.0.1:9868"]);
        assert_eq!(
            config.sync_broker_metadata_period,
            Duration::from_millis(500)
        );
        assert!(matches!(
            config.apply("broker.conf", "brokerHeartbeatInterval", "soon"),
            Some(Err(_))
        ));
        assert!(config.apply("broker.conf", "brokerRole", "SLAVE").is_none());
        let shown = config.java_properties();
        assert!(shown.contains(&("controllerAddr", "127.0.0.1:9878;127.0.0.1:9868".to_owned())));
    }
}
