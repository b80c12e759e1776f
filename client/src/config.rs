//! Settings shared by every producer and consumer of one client instance.

use ferromq_protocol::acl::Credentials;
use ferromq_protocol::remoting::SerializeType;
use std::time::Duration;

/// Settings of a [`ClientInstance`](super::ClientInstance) (Java `ClientConfig`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Name server addresses, `host:port` each; tried in turn (fail-over).
    pub namesrv_addr: Vec<String>,
    /// Instance name; with `client_ip` it forms the client id (`instanceName`).
    pub instance_name: String,
    /// The IP this client reports (`clientIP`): first non-loopback IPv4, else 127.0.0.1.
    pub client_ip: String,
    /// Time limit of a request (Java's 3 s `sendMsgTimeout`/`timeoutMillis` defaults).
    pub request_timeout: Duration,
    /// How often routes of topics in use are refreshed (`pollNameServerInterval`, 30 s).
    pub poll_name_server_interval: Duration,
    /// How often heartbeats are sent to brokers (`heartbeatBrokerInterval`, 30 s).
    pub heartbeat_broker_interval: Duration,
    /// How often consumers persist offsets (`persistConsumerOffsetInterval`, 5 s).
    pub persist_consumer_offset_interval: Duration,
    /// Header serialization of requests (JSON by default, as Java).
    pub serialize_type: SerializeType,
    /// Keys that sign every request, for brokers with `aclEnable=true` (Java's
    /// `AclClientRPCHook`); `None` sends unsigned requests.
    pub credentials: Option<Credentials>,
    /// Encrypts every connection (Java's `useTLS`, from `-Dtls.enable=true`); `None` speaks
    /// plain TCP.
    pub tls: Option<crate::tls::TlsClient>,
}

impl ClientConfig {
    /// Settings with Java's defaults and the name servers in `namesrv`, a `;`-separated list
    /// such as `"a:9876;b:9876"` (Java's `namesrvAddr` form).
    #[must_use]
    pub fn new(namesrv: &str) -> ClientConfig {
        ClientConfig {
            namesrv_addr: namesrv
                .split(';')
                .map(str::trim)
                .filter(|addr| !addr.is_empty())
                .map(str::to_owned)
                .collect(),
            instance_name: "DEFAULT".to_owned(),
            client_ip: local_ipv4(),
            request_timeout: Duration::from_secs(3),
            poll_name_server_interval: Duration::from_secs(30),
            heartbeat_broker_interval: Duration::from_secs(30),
            persist_consumer_offset_interval: Duration::from_secs(5),
            serialize_type: SerializeType::Json,
            credentials: None,
            tls: None,
        }
    }

    /// The client id, `clientIP@instanceName` (Java `buildMQClientId` without unit name).
    #[must_use]
    pub fn client_id(&self) -> String {
        format!("{}@{}", self.client_ip, self.instance_name)
    }
}

/// The first non-loopback IPv4 address of this host, else 127.0.0.1.
///
/// A UDP socket "connected" to a public address learns the outgoing interface's address
/// without sending a packet; a host without a route falls back to loopback.
#[must_use]
pub fn local_ipv4() -> String {
    let probe = || -> std::io::Result<std::net::IpAddr> {
        let socket = std::net::UdpSocket::bind("0.0.0.0:0")?;
        socket.connect("192.0.2.1:9")?;
        Ok(socket.local_addr()?.ip())
    };
    match probe() {
        Ok(std::net::IpAddr::V4(ip)) if !ip.is_loopback() && !ip.is_unspecified() => ip.to_string(),
        _ => "127.0.0.1".to_owned(),
    }
}

/// Java's `Boolean.parseBoolean` made strict: `true` or `false` in any case, around spaces,
/// and `None` for anything else, so that a typo in a setting is an error rather than a
/// silent `false`.
#[must_use]
pub fn parse_java_bool(value: &str) -> Option<bool> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("true") {
        Some(true)
    } else if value.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namesrv_list_splits_on_semicolons() {
        let config = ClientConfig::new(" a:9876; b:9876;");
        assert_eq!(config.namesrv_addr, vec!["a:9876", "b:9876"]);
        assert_eq!(config.instance_name, "DEFAULT");
        assert_eq!(config.request_timeout, Duration::from_secs(3));
        assert!(config.client_id().ends_with("@DEFAULT"));
        assert!(config.client_ip.parse::<std::net::Ipv4Addr>().is_ok());
    }

    #[test]
    fn java_booleans_are_either_word_in_any_case_and_nothing_else() {
        assert_eq!(parse_java_bool(" TRUE "), Some(true));
        assert_eq!(parse_java_bool("False"), Some(false));
        for typo in ["", "yes", "1", "ture", "true false"] {
            assert_eq!(parse_java_bool(typo), None, "{typo:?}");
        }
    }
}
