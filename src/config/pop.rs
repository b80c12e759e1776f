//! The POP consumption keys of a broker (Java 5.x `BrokerConfig`, with Java's names and
//! defaults): the revive queues, the retry topic's share of pops, long polling of pops and
//! the revive service's pace, and how QUERY_ASSIGNMENT assigns queues.

use super::{parse_bool, parse_value, ConfigError};
use std::time::Duration;

/// POP settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PopConfig {
    /// `reviveQueueNum` (8): queues of `rmq_sys_REVIVE_LOG_<cluster>`.
    pub revive_queue_num: i32,
    /// `popFromRetryProbability` (20): percent of pops that read the retry topic first.
    pub pop_from_retry_probability: i32,
    /// `enableRetryTopicV2` (false): retry topics named `%RETRY%<group>+<topic>`.
    pub enable_retry_topic_v2: bool,
    /// `popPollingSize` (1024): pops of one queue that may wait at once.
    pub pop_polling_size: usize,
    /// `maxPopPollingSize` (100000): pops that may wait at once in the broker.
    pub max_pop_polling_size: usize,
    /// `reviveInterval` (1000 ms): pause between revive rounds.
    pub revive_interval: Duration,
    /// `reviveMaxSlow` (3): an idle revive queue waits up to this many intervals more.
    pub revive_max_slow: u32,
    /// `reviveScanTime` (10000 ms): longest a round reads one revive queue.
    pub revive_scan_time: Duration,
    /// `serverLoadBalancerEnable` (true): QUERY_ASSIGNMENT divides a topic's queues among
    /// a group's consumers; off, each gets them all.
    pub server_load_balancer_enable: bool,
    /// `defaultMessageRequestMode` (PULL): how a group consumes a topic no
    /// SET_MESSAGE_REQUEST_MODE named, `true` for POP.
    pub default_message_request_mode_pop: bool,
    /// `defaultPopShareQueueNum` (-1): in POP mode, how many following consumers' queues a
    /// consumer also pops (-1 or 0: all queues, as queue -1).
    pub default_pop_share_queue_num: i32,
}

impl Default for PopConfig {
    fn default() -> Self {
        PopConfig {
            revive_queue_num: 8,
            pop_from_retry_probability: 20,
            enable_retry_topic_v2: false,
            pop_polling_size: 1024,
            max_pop_polling_size: 100_000,
            revive_interval: Duration::from_millis(1000),
            revive_max_slow: 3,
            revive_scan_time: Duration::from_millis(10_000),
            server_load_balancer_enable: true,
            default_message_request_mode_pop: false,
            default_pop_share_queue_num: -1,
        }
    }
}

impl PopConfig {
    /// Applies `key` if it is a POP key: `None` when it is not one.
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] when the value does not parse.
    pub fn apply(&mut self, at: &str, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let millis = |value: &str| -> Result<Duration, ConfigError> {
            parse_value::<u64>(at, key, value, "milliseconds").map(Duration::from_millis)
        };
        let applied = match key {
            "reviveQueueNum" => parse_value(at, key, value, "a queue count 1..=999")
                .and_then(|n: i32| match n {
                    1..=999 => Ok(n),
                    _ => Err(super::bad_value(at, key, value, "a queue count 1..=999")),
                })
                .map(|n| self.revive_queue_num = n),
            "popFromRetryProbability" => parse_value(at, key, value, "a percentage")
                .map(|n| self.pop_from_retry_probability = n),
            "enableRetryTopicV2" => {
                parse_bool(at, key, value).map(|b| self.enable_retry_topic_v2 = b)
            }
            "popPollingSize" => {
                parse_value(at, key, value, "a count").map(|n| self.pop_polling_size = n)
            }
            "maxPopPollingSize" => {
                parse_value(at, key, value, "a count").map(|n| self.max_pop_polling_size = n)
            }
            "reviveInterval" => millis(value).map(|d| self.revive_interval = d),
            "reviveMaxSlow" => {
                parse_value(at, key, value, "a count").map(|n| self.revive_max_slow = n)
            }
            "reviveScanTime" => millis(value).map(|d| self.revive_scan_time = d),
            "serverLoadBalancerEnable" => {
                parse_bool(at, key, value).map(|b| self.server_load_balancer_enable = b)
            }
            "defaultMessageRequestMode" => match value.trim() {
                "PULL" => Ok(false),
                "POP" => Ok(true),
                _ => Err(super::bad_value(at, key, value, "PULL or POP")),
            }
            .map(|pop| self.default_message_request_mode_pop = pop),
            "defaultPopShareQueueNum" => {
                parse_value(at, key, value, "a count").map(|n| self.default_pop_share_queue_num = n)
            }
            _ => return None,
        };
        Some(applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_keys_apply_and_bad_values_are_refused() {
        let mut config = PopConfig::default();
        assert_eq!(config.revive_queue_num, 8);
        assert_eq!(config.pop_from_retry_probability, 20);
        assert!(!config.enable_retry_topic_v2);
        for (key, value) in [
            ("reviveQueueNum", "4"),
            ("popFromRetryProbability", "50"),
            ("enableRetryTopicV2", "true"),
            ("reviveInterval", "500"),
            ("reviveScanTime", "2000"),
            ("defaultMessageRequestMode", "POP"),
            ("defaultPopShareQueueNum", "2"),
            ("serverLoadBalancerEnable", "false"),
        ] {
            assert!(matches!(
                config.apply("broker.conf", key, value),
                Some(Ok(()))
            ));
        }
        assert_eq!(config.revive_queue_num, 4);
        assert_eq!(config.pop_from_retry_probability, 50);
        assert!(config.enable_retry_topic_v2);
        assert_eq!(config.revive_interval, Duration::from_millis(500));
        assert_eq!(config.revive_scan_time, Duration::from_millis(2000));
        assert!(config.default_message_request_mode_pop);
        assert_eq!(config.default_pop_share_queue_num, 2);
        assert!(!config.server_load_balancer_enable);
        assert!(matches!(
            config.apply("broker.conf", "defaultMessageRequestMode", "PUSH"),
            Some(Err(_))
        ));
        assert!(config.apply("broker.conf", "listenPort", "1").is_none());
        assert!(matches!(
            config.apply("broker.conf", "reviveQueueNum", "0"),
            Some(Err(_))
        ));
        assert!(matches!(
            config.apply("broker.conf", "reviveInterval", "x"),
            Some(Err(_))
        ));
    }
}
