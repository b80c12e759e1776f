//! Configuration with Java's key names and defaults.
//!
//! Files are Java `.properties` text ([`properties`]); each server reads its own keys
//! ([`namesrv`]) and reports unknown keys as warnings and bad values as errors that name the
//! file, line, key and what would be valid.

pub mod broker;
pub mod controller;
pub mod controller_mode;
pub use ferromq_protocol::fastjson;
pub mod namesrv;
pub mod persist;
pub mod pop;
pub mod properties;
pub use ferromq_protocol::topic;

use std::path::PathBuf;

/// A configuration value that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A value does not parse or is out of range.
    #[error("{origin}: {key} = '{value}' is invalid: {expected}")]
    BadValue {
        /// File and line, or "command line".
        origin: String,
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What a valid value looks like.
        expected: String,
    },
}

/// Parses a value with `FromStr`, turning failure into [`ConfigError::BadValue`].
pub(crate) fn parse_value<T: std::str::FromStr>(
    origin: &str,
    key: &str,
    value: &str,
    expected: &str,
) -> Result<T, ConfigError> {
    value
        .trim()
        .parse()
        .map_err(|_| bad_value(origin, key, value, expected))
}

/// Parses a Java boolean strictly (`true` / `false`, any case): a typo in a config file is
/// an error rather than a silent `false`.
pub(crate) fn parse_bool(origin: &str, key: &str, value: &str) -> Result<bool, ConfigError> {
    ferromq_client::config::parse_java_bool(value)
        .ok_or_else(|| bad_value(origin, key, value, "true or false"))
}

/// Parses a duration in milliseconds, at least 1.
pub(crate) fn parse_millis(
    origin: &str,
    key: &str,
    value: &str,
) -> Result<std::time::Duration, ConfigError> {
    let ms: u64 = parse_value(origin, key, value, "milliseconds, at least 1")?;
    if ms == 0 {
        return Err(bad_value(origin, key, value, "milliseconds, at least 1"));
    }
    Ok(std::time::Duration::from_millis(ms))
}

/// The error for `value` of `key` at `origin`, saying what a valid value looks like.
pub(crate) fn bad_value(origin: &str, key: &str, value: &str, expected: &str) -> ConfigError {
    ConfigError::BadValue {
        origin: origin.to_owned(),
        key: key.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    }
}
