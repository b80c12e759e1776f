//! The gRPC endpoint's keys: Java 5.x `ProxyConfig`'s names and defaults for what the
//! endpoint checks and tells clients, plus ferromq's `grpcServerEnable`.
//!
//! Java serves gRPC from a proxy process or from a broker started with `--enable-proxy`;
//! a ferromq broker serves it when `grpcServerEnable=true`, so that brokers that do not ask
//! for it (and the many a test host runs at once) do not fight over port 8081.

use crate::config::{parse_bool, parse_value, ConfigError};
use std::time::Duration;

/// Java's `grpcServerPort` default.
pub const GRPC_SERVER_PORT_DEFAULT: u16 = 8081;

/// The gRPC keys.
#[derive(Clone, Debug, PartialEq)]
pub struct GrpcConfig {
    /// `grpcServerEnable` (false): whether the broker serves `MessagingService`.
    pub enable: bool,
    /// `grpcServerPort` (8081); 0 takes any free port (logged).
    pub server_port: u16,
    /// `enableMessageBodyEmptyCheck` (true).
    pub enable_message_body_empty_check: bool,
    /// `maxUserPropertySize` (16 KiB): user properties, tag and keys together, in bytes.
    pub max_user_property_size: usize,
    /// `userPropertyMaxNum` (128).
    pub user_property_max_num: usize,
    /// `maxMessageGroupSize` (64): a message group's UTF-8 length must stay below it.
    pub max_message_group_size: usize,
    /// `maxDelayTimeMills` (1 day): how far ahead a delivery timestamp may be.
    pub max_delay_time: Duration,
    /// `maxTransactionRecoverySecond` (1 h).
    pub max_transaction_recovery_second: u64,
    /// `enableTopicMessageTypeCheck` (true): sent to producers as `validate_message_type`.
    pub enable_topic_message_type_check: bool,
    /// `grpcClientProducerMaxAttempts` (3).
    pub producer_max_attempts: i32,
    /// `grpcClientProducerBackoffInitialMillis` (10).
    pub producer_backoff_initial: Duration,
    /// `grpcClientProducerBackoffMaxMillis` (1000).
    pub producer_backoff_max: Duration,
    /// `grpcClientProducerBackoffMultiplier` (2).
    pub producer_backoff_multiplier: i32,
    /// `grpcClientConsumerMaxLongPollingTimeoutMillis` (20 s).
    pub consumer_max_long_polling_timeout: Duration,
    /// `grpcClientConsumerMinLongPollingTimeoutMillis` (5 s).
    pub consumer_min_long_polling_timeout: Duration,
    /// `grpcClientConsumerLongPollingBatchSize` (32).
    pub consumer_long_polling_batch_size: i32,
    /// `minInvisibleTimeMillsForRecv` (10 s).
    pub min_invisible_time_for_recv: Duration,
}

impl Default for GrpcConfig {
    fn default() -> Self {
        GrpcConfig {
            enable: false,
            server_port: GRPC_SERVER_PORT_DEFAULT,
            enable_message_body_empty_check: true,
            max_user_property_size: 16 * 1024,
            user_property_max_num: 128,
            max_message_group_size: 64,
            max_delay_time: Duration::from_secs(24 * 3600),
            max_transaction_recovery_second: 3600,
            enable_topic_message_type_check: true,
            producer_max_attempts: 3,
            producer_backoff_initial: Duration::from_millis(10),
            producer_backoff_max: Duration::from_millis(1000),
            producer_backoff_multiplier: 2,
            consumer_max_long_polling_timeout: Duration::from_secs(20),
            consumer_min_long_polling_timeout: Duration::from_secs(5),
            consumer_long_polling_batch_size: 32,
            min_invisible_time_for_recv: Duration::from_secs(10),
        }
    }
}

impl GrpcConfig {
    /// Applies `key` if it is a gRPC key: `None` when it is not one. `maxMessageSize`, the
    /// proxy's body limit, is the broker's own key of the same name and default
    /// (`MessageStoreConfig`), read there.
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] when the value does not parse as the key's type.
    pub fn apply(&mut self, at: &str, key: &str, value: &str) -> Option<Result<(), ConfigError>> {
        let millis = |value: &str| -> Result<Duration, ConfigError> {
            parse_value::<u64>(at, key, value, "milliseconds").map(Duration::from_millis)
        };
        let flag = |value: &str| parse_bool(at, key, value);
        let applied = match key {
            "grpcServerEnable" => flag(value).map(|b| self.enable = b),
            "grpcServerPort" => {
                parse_value(at, key, value, "a port number").map(|p| self.server_port = p)
            }
            "enableMessageBodyEmptyCheck" => {
                flag(value).map(|b| self.enable_message_body_empty_check = b)
            }
            "maxUserPropertySize" => parse_value(at, key, value, "a size in bytes")
                .map(|n| self.max_user_property_size = n),
            "userPropertyMaxNum" => {
                parse_value(at, key, value, "a count").map(|n| self.user_property_max_num = n)
            }
            "maxMessageGroupSize" => {
                parse_value(at, key, value, "a size").map(|n| self.max_message_group_size = n)
            }
            "maxDelayTimeMills" => millis(value).map(|d| self.max_delay_time = d),
            "maxTransactionRecoverySecond" => parse_value(at, key, value, "seconds")
                .map(|n| self.max_transaction_recovery_second = n),
            "enableTopicMessageTypeCheck" => {
                flag(value).map(|b| self.enable_topic_message_type_check = b)
            }
            "grpcClientProducerMaxAttempts" => {
                parse_value(at, key, value, "a count").map(|n| self.producer_max_attempts = n)
            }
            "grpcClientProducerBackoffInitialMillis" => {
                millis(value).map(|d| self.producer_backoff_initial = d)
            }
            "grpcClientProducerBackoffMaxMillis" => {
                millis(value).map(|d| self.producer_backoff_max = d)
            }
            "grpcClientProducerBackoffMultiplier" => parse_value(at, key, value, "an integer")
                .map(|n| self.producer_backoff_multiplier = n),
            "grpcClientConsumerMaxLongPollingTimeoutMillis" => {
                millis(value).map(|d| self.consumer_max_long_polling_timeout = d)
            }
            "grpcClientConsumerMinLongPollingTimeoutMillis" => {
                millis(value).map(|d| self.consumer_min_long_polling_timeout = d)
            }
            "grpcClientConsumerLongPollingBatchSize" => parse_value(at, key, value, "a count")
                .map(|n| self.consumer_long_polling_batch_size = n),
            "minInvisibleTimeMillsForRecv" => {
                millis(value).map(|d| self.min_invisible_time_for_recv = d)
            }
            _ => return None,
        };
        Some(applied)
    }

    /// Refuses a combination of keys no request could be served under: a minimum long
    /// polling timeout above the maximum (the consumer clamps a poll between the two).
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] naming both keys.
    pub fn check(&self, origin: &str) -> Result<(), ConfigError> {
        let (min, max) = (
            self.consumer_min_long_polling_timeout,
            self.consumer_max_long_polling_timeout,
        );
        if min > max {
            return Err(crate::config::bad_value(
                origin,
                "grpcClientConsumerMinLongPollingTimeoutMillis",
                &min.as_millis().to_string(),
                &format!(
                    "at most grpcClientConsumerMaxLongPollingTimeoutMillis ({} ms)",
                    max.as_millis()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_with_java_parsing_and_others_are_left_alone() {
        let mut config = GrpcConfig::default();
        assert!(config.apply("broker.conf", "listenPort", "1").is_none());
        assert!(matches!(
            config.apply("broker.conf", "grpcServerEnable", "TRUE"),
            Some(Ok(()))
        ));
        assert!(config.enable);
        assert!(matches!(
            config.apply("b", "grpcServerPort", " 9081 "),
            Some(Ok(()))
        ));
        assert_eq!(config.server_port, 9081);
        assert!(matches!(
            config.apply("b", "maxDelayTimeMills", "5"),
            Some(Ok(()))
        ));
        assert_eq!(config.max_delay_time, Duration::from_millis(5));
        let refused = config
            .apply("broker.conf", "grpcServerPort", "http")
            .map(|r| r.is_err());
        assert_eq!(refused, Some(true));
    }

    #[test]
    fn min_long_polling_above_max_is_refused_naming_both_keys() {
        let mut config = GrpcConfig::default();
        assert!(config.check("broker.conf").is_ok());
        config.consumer_min_long_polling_timeout = Duration::from_secs(30);
        let refused = config.check("broker.conf").unwrap_err().to_string();
        assert!(refused.contains("grpcClientConsumerMinLongPollingTimeoutMillis"));
        assert!(refused.contains("grpcClientConsumerMaxLongPollingTimeoutMillis (20000 ms)"));
        config.consumer_max_long_polling_timeout = Duration::from_secs(30);
        assert!(config.check("broker.conf").is_ok());
    }
}
