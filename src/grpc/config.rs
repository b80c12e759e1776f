//! The gRPC endpoint's keys: Java 5.x `ProxyConfig`'s names and defaults for what the
//! endpoint checks and tells clients, plus ferromq's `grpcServerEnable`.
//!
//! Java serves gRPC from a proxy process or from a broker started with `--enable-proxy`;
//! a ferromq broker serves it when `grpcServerEnable=true`, so that brokers that do not ask
//! for it (and the many a test host runs at once) do not fight over port 8081.

use crate::config::ConfigError;
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
    /// The keys [`GrpcConfig::set`] reads. `maxMessageSize`, the proxy's body limit, is the
    /// broker's own key of the same name and default (`MessageStoreConfig`), read there.
    pub const KEYS: [&'static str; 17] = [
        "grpcServerEnable",
        "grpcServerPort",
        "enableMessageBodyEmptyCheck",
        "maxUserPropertySize",
        "userPropertyMaxNum",
        "maxMessageGroupSize",
        "maxDelayTimeMills",
        "maxTransactionRecoverySecond",
        "enableTopicMessageTypeCheck",
        "grpcClientProducerMaxAttempts",
        "grpcClientProducerBackoffInitialMillis",
        "grpcClientProducerBackoffMaxMillis",
        "grpcClientProducerBackoffMultiplier",
        "grpcClientConsumerMaxLongPollingTimeoutMillis",
        "grpcClientConsumerMinLongPollingTimeoutMillis",
        "grpcClientConsumerLongPollingBatchSize",
        "minInvisibleTimeMillsForRecv",
    ];

    /// Applies one key; `Ok(false)` when the key is not one of ours, `Err` with what the
    /// value should be when it does not parse.
    ///
    /// # Errors
    /// The value does not parse as the key's type.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        fn number<T: std::str::FromStr>(value: &str, what: &str) -> Result<T, String> {
            value.trim().parse().map_err(|_| what.to_owned())
        }
        fn flag(value: &str) -> Result<bool, String> {
            match value.trim() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err("true or false".to_owned()),
            }
        }
        let millis = |value: &str| number::<u64>(value, "milliseconds").map(Duration::from_millis);
        match key {
            "grpcServerEnable" => self.enable = flag(value)?,
            "grpcServerPort" => self.server_port = number(value, "a port number")?,
            "enableMessageBodyEmptyCheck" => self.enable_message_body_empty_check = flag(value)?,
            "maxUserPropertySize" => {
                self.max_user_property_size = number(value, "a size in bytes")?;
            }
            "userPropertyMaxNum" => self.user_property_max_num = number(value, "a count")?,
            "maxMessageGroupSize" => self.max_message_group_size = number(value, "a size")?,
            "maxDelayTimeMills" => self.max_delay_time = millis(value)?,
            "maxTransactionRecoverySecond" => {
                self.max_transaction_recovery_second = number(value, "seconds")?;
            }
            "enableTopicMessageTypeCheck" => self.enable_topic_message_type_check = flag(value)?,
            "grpcClientProducerMaxAttempts" => {
                self.producer_max_attempts = number(value, "a count")?;
            }
            "grpcClientProducerBackoffInitialMillis" => {
                self.producer_backoff_initial = millis(value)?;
            }
            "grpcClientProducerBackoffMaxMillis" => self.producer_backoff_max = millis(value)?,
            "grpcClientProducerBackoffMultiplier" => {
                self.producer_backoff_multiplier = number(value, "an integer")?;
            }
            "grpcClientConsumerMaxLongPollingTimeoutMillis" => {
                self.consumer_max_long_polling_timeout = millis(value)?;
            }
            "grpcClientConsumerMinLongPollingTimeoutMillis" => {
                self.consumer_min_long_polling_timeout = millis(value)?;
            }
            "grpcClientConsumerLongPollingBatchSize" => {
                self.consumer_long_polling_batch_size = number(value, "a count")?;
            }
            "minInvisibleTimeMillsForRecv" => self.min_invisible_time_for_recv = millis(value)?,
            _ => return Ok(false),
        }
        Ok(true)
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
