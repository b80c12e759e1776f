//! The admin client: one remoting connection per name server or broker address, opened on
//! first use and kept while the client lives, on a small tokio runtime of its own, so it is
//! called from plain (blocking) code such as `ferromq admin`'s commands.
//!
//! This is the `MQClientAPIImpl` part of Java's `DefaultMQAdminExt`, cut down to what the
//! commands need: send a typed request, wait with a time limit, and turn any non-success
//! answer into [`AdminError::Remote`] carrying the code and remark.
//!
//! ```
//! use ferromq_client::admin::AdminClient;
//! use std::time::Duration;
//!
//! # let namesrv = std::env::var("FERROMQ_NAMESRV").expect("a name server address");
//! let mut admin = AdminClient::new(Some(&namesrv), Duration::from_secs(3))?;
//! for broker in admin.brokers()? {
//!     let (name, id) = (&broker.broker_name, broker.broker_id);
//!     println!("{} {name} id {id} at {}", broker.cluster, broker.addr);
//! }
//! let route = admin.topic_route("TopicTest")?;
//! assert!(!route.queue_datas.is_empty());
//! # Ok::<(), ferromq_client::admin::AdminError>(())
//! ```

use crate::remoting::{connect_tokio, ClientConfig, RemotingClient};
use ferromq_protocol::acl::Credentials;
use ferromq_protocol::fastjson::parse_lenient;
use ferromq_protocol::remoting::body::TopicRouteData;
use ferromq_protocol::remoting::headers::GetRouteInfoRequestHeader;
use ferromq_protocol::remoting::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

/// Why an admin command failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// A name server or broker answered with a code other than SUCCESS.
    #[error("CODE: {} ({})  DESC: {remark}  [{request} to {addr}]", code.0,
        code.name().unwrap_or("?"))]
    Remote {
        /// Who answered.
        addr: String,
        /// What was asked.
        request: RequestCode,
        /// The response code.
        code: ResponseCode,
        /// The remark.
        remark: String,
    },
    /// An address could not be reached or did not answer in time.
    #[error("{addr}: {reason}; check the address and that the server runs")]
    Connection {
        /// The address.
        addr: String,
        /// What went wrong.
        reason: String,
    },
    /// An answer whose body is not what the request returns.
    #[error("unexpected answer from {from}: {reason}")]
    BadResponse {
        /// Who answered.
        from: String,
        /// What is wrong.
        reason: String,
    },
    /// Flags that do not make a command (beyond what the parser checks).
    #[error("{0}")]
    Usage(String),
    /// Nothing matched.
    #[error("{0}")]
    NotFound(String),
    /// The tokio runtime did not start.
    #[error("cannot start the admin runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Connections to the name servers and brokers of one admin command.
#[doc(alias = "DefaultMQAdminExt")]
#[derive(Debug)]
pub struct AdminClient {
    namesrvs: Vec<String>,
    timeout: Duration,
    runtime: tokio::runtime::Runtime,
    connections: HashMap<String, RemotingClient>,
    credentials: Option<Credentials>,
    tls: Option<crate::tls::TlsClient>,
}

/// One broker of a cluster as the name server knows it (`BrokerData` flattened per id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerEntry {
    /// Cluster name.
    pub cluster: String,
    /// Broker name.
    pub broker_name: String,
    /// Broker id; 0 is the master.
    pub broker_id: i64,
    /// `host:port`.
    pub addr: String,
}

impl AdminClient {
    /// A client for the `;`-separated name server list (may be empty when every address the
    /// command needs is given directly).
    ///
    /// # Errors
    /// [`AdminError::Runtime`] when the tokio runtime cannot start.
    pub fn new(namesrv: Option<&str>, timeout: Duration) -> Result<AdminClient, AdminError> {
        let namesrvs = namesrv
            .unwrap_or_default()
            .split(';')
            .map(str::trim)
            .filter(|addr| !addr.is_empty())
            .map(str::to_owned)
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(AdminError::Runtime)?;
        Ok(AdminClient {
            namesrvs,
            timeout,
            runtime,
            connections: HashMap::new(),
            credentials: None,
            tls: None,
        })
    }

    /// Signs every request with `credentials` from now on (brokers with `aclEnable=true`);
    /// connections already open keep how they were made.
    pub fn set_credentials(&mut self, credentials: Option<Credentials>) {
        self.credentials = credentials;
        self.connections.clear();
    }

    /// Encrypts every connection opened from now on (servers with `tls.server.mode`
    /// `permissive` or `enforcing`); connections already open are closed.
    pub fn set_tls(&mut self, tls: Option<crate::tls::TlsClient>) {
        self.tls = tls;
        self.connections.clear();
    }

    /// The name servers given with `-n`.
    #[must_use]
    pub fn namesrvs(&self) -> &[String] {
        &self.namesrvs
    }

    /// Sends `request` to `addr` and returns the answer whatever its code.
    ///
    /// # Errors
    /// [`AdminError::Connection`] when the address cannot be reached or does not answer in
    /// time.
    pub fn call(
        &mut self,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, AdminError> {
        let client = self.connection(addr)?;
        self.runtime
            .block_on(client.request_timeout(request, self.timeout))
            .map_err(|e| connection_failed(addr, e.to_string()))
    }

    /// Sends every request to `addr` at once on its one connection (the answers are matched
    /// by opaque, so a hundred requests cost about one round trip) and returns the answers in
    /// the order of the requests, each checked for SUCCESS as [`AdminClient::call_ok`] does.
    ///
    /// # Errors
    /// The first failed answer, in the order of the requests.
    pub fn call_ok_all(
        &mut self,
        addr: &str,
        requests: Vec<RemotingCommand>,
    ) -> Result<Vec<RemotingCommand>, AdminError> {
        let client = self.connection(addr)?;
        let timeout = self.timeout;
        let calls = requests.into_iter().map(|request| {
            let client = client.clone();
            async move {
                let code = request.request_code();
                let response = client
                    .request_timeout(request, timeout)
                    .await
                    .map_err(|e| connection_failed(addr, e.to_string()))?;
                check(addr, code, response)
            }
        });
        self.runtime
            .block_on(futures::future::join_all(calls))
            .into_iter()
            .collect()
    }

    /// The open connection to `addr`, or a new one.
    fn connection(&mut self, addr: &str) -> Result<RemotingClient, AdminError> {
        if let Some(client) = self.connections.get(addr).filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        let timeout = self.timeout;
        let connect = async {
            let target: SocketAddr = tokio::net::lookup_host(addr)
                .await
                .map_err(|e| format!("not a host:port address ({e})"))?
                .next()
                .ok_or_else(|| "resolves to no address".to_owned())?;
            let config = ClientConfig {
                credentials: self.credentials.clone(),
                tls: self.tls.clone(),
                ..ClientConfig::default()
            };
            connect_tokio(target, config)
                .await
                .map_err(|e| e.to_string())
        };
        let (client, _inbound) = self
            .runtime
            .block_on(async { tokio::time::timeout(timeout, connect).await })
            .map_err(|_| connection_failed(addr, format!("no connection within {timeout:?}")))?
            .map_err(|reason| connection_failed(addr, reason))?;
        self.connections.insert(addr.to_owned(), client.clone());
        Ok(client)
    }

    /// Sends `request` to `addr` and returns the answer when its code is SUCCESS.
    ///
    /// # Errors
    /// [`AdminError::Remote`] with the code and remark of any other answer, or a connection
    /// error.
    pub fn call_ok(
        &mut self,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, AdminError> {
        let code = request.request_code();
        let response = self.call(addr, request)?;
        check(addr, code, response)
    }

    /// A request with `header` to `addr`, expecting SUCCESS.
    ///
    /// # Errors
    /// As [`AdminClient::call_ok`].
    pub fn request(
        &mut self,
        addr: &str,
        code: RequestCode,
        header: &impl CommandHeader,
    ) -> Result<RemotingCommand, AdminError> {
        self.call_ok(addr, RemotingCommand::request_with_header(code, header))
    }

    /// Sends `request` to the name servers in turn until one answers; the answer of the
    /// first that does, whatever its code, is checked for SUCCESS.
    ///
    /// # Errors
    /// [`AdminError::Usage`] without name servers, [`AdminError::Remote`], or the last
    /// connection error.
    pub fn namesrv_call(
        &mut self,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, AdminError> {
        if self.namesrvs.is_empty() {
            return Err(AdminError::Usage(
                "no name server: pass -n host:port or set NAMESRV_ADDR".to_owned(),
            ));
        }
        let mut last = None;
        for addr in self.namesrvs.clone() {
            match self.call(&addr, request.clone()) {
                Ok(response) => return check(&addr, request.request_code(), response),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| AdminError::Usage("no name server answered".to_owned())))
    }

    /// The route of `topic` from the name server (GET_ROUTEINFO_BY_TOPIC).
    ///
    /// # Errors
    /// [`AdminError::Remote`] (TOPIC_NOT_EXIST when no broker serves it) and friends.
    pub fn topic_route(&mut self, topic: &str) -> Result<TopicRouteData, AdminError> {
        let header = GetRouteInfoRequestHeader {
            topic: topic.to_owned(),
            accept_standard_json_only: Some(true),
        };
        let response = self.namesrv_call(RemotingCommand::request_with_header(
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
            &header,
        ))?;
        let value =
            parse_lenient(&response.body).map_err(|reason| bad_body("name server", reason))?;
        serde_json::from_value(value).map_err(|e| bad_body("name server", e.to_string()))
    }

    /// Every broker the name server knows (GET_BROKER_CLUSTER_INFO), ordered by cluster,
    /// broker name and id.
    ///
    /// # Errors
    /// As [`AdminClient::namesrv_call`], or [`AdminError::BadResponse`].
    pub fn brokers(&mut self) -> Result<Vec<BrokerEntry>, AdminError> {
        let response = self.namesrv_call(RemotingCommand::request(
            RequestCode::GET_BROKER_CLUSTER_INFO,
        ))?;
        let info = parse_lenient(&response.body).map_err(|r| bad_body("name server", r))?;
        let mut brokers = Vec::new();
        let clusters = info["clusterAddrTable"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (cluster, names) in clusters {
            for name in names
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str())
            {
                let addrs = &info["brokerAddrTable"][name]["brokerAddrs"];
                let addrs: BTreeMap<i64, String> = addrs
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(id, addr)| Some((id.parse().ok()?, addr.as_str()?.to_owned())))
                    .collect();
                for (broker_id, addr) in addrs {
                    brokers.push(BrokerEntry {
                        cluster: cluster.clone(),
                        broker_name: name.to_owned(),
                        broker_id,
                        addr,
                    });
                }
            }
        }
        brokers.sort_by(|a, b| {
            (&a.cluster, &a.broker_name, a.broker_id).cmp(&(
                &b.cluster,
                &b.broker_name,
                b.broker_id,
            ))
        });
        Ok(brokers)
    }

    /// Master addresses of `cluster` (`CommandUtil.fetchMasterAddrByClusterName`).
    ///
    /// # Errors
    /// [`AdminError::NotFound`] when the cluster has no master.
    pub fn cluster_masters(&mut self, cluster: &str) -> Result<Vec<BrokerEntry>, AdminError> {
        let masters: Vec<BrokerEntry> = self
            .brokers()?
            .into_iter()
            .filter(|b| b.cluster == cluster && b.broker_id == 0)
            .collect();
        if masters.is_empty() {
            return Err(AdminError::NotFound(format!(
                "no master broker in cluster [{cluster}]"
            )));
        }
        Ok(masters)
    }

    /// The target brokers of a command taking `-b addr` or `-c cluster`: the one broker, or
    /// every master of the cluster.
    ///
    /// # Errors
    /// [`AdminError::Usage`] when neither is given.
    pub fn targets(
        &mut self,
        broker: Option<&str>,
        cluster: Option<&str>,
    ) -> Result<Vec<String>, AdminError> {
        match (broker, cluster) {
            (Some(addr), _) => Ok(vec![addr.to_owned()]),
            (None, Some(cluster)) => Ok(self
                .cluster_masters(cluster)?
                .into_iter()
                .map(|b| b.addr)
                .collect()),
            (None, None) => Err(AdminError::Usage(
                "give a broker (-b host:port) or a cluster (-c name)".to_owned(),
            )),
        }
    }
}

/// Master address of every broker group in a topic route, with the broker name, in route
/// order (`BrokerData.selectBrokerAddr` prefers the master).
#[must_use]
pub fn route_masters(route: &TopicRouteData) -> Vec<(String, String)> {
    route
        .broker_datas
        .iter()
        .filter_map(|broker| {
            let addr = broker
                .broker_addrs
                .get(&0)
                .or_else(|| broker.broker_addrs.values().next())?;
            Some((broker.broker_name.clone(), addr.clone()))
        })
        .collect()
}

fn connection_failed(addr: &str, reason: String) -> AdminError {
    AdminError::Connection {
        addr: addr.to_owned(),
        reason,
    }
}

/// `response` when its code is SUCCESS, else [`AdminError::Remote`] naming `addr` and the
/// `request` it answers.
pub fn check(
    addr: &str,
    request: RequestCode,
    response: RemotingCommand,
) -> Result<RemotingCommand, AdminError> {
    if response.code == ResponseCode::SUCCESS.0 {
        return Ok(response);
    }
    Err(AdminError::Remote {
        addr: addr.to_owned(),
        request,
        code: ResponseCode(response.code),
        remark: response.remark.unwrap_or_default(),
    })
}

/// A body that is not what the request's answer should be ([`AdminError::BadResponse`]).
pub fn bad_body(from: &str, reason: impl Into<String>) -> AdminError {
    AdminError::BadResponse {
        from: from.to_owned(),
        reason: reason.into(),
    }
}
