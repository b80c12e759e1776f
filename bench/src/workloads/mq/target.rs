//! The broker side of a run: which brokers and queues serve the topic (from a name server's
//! route or a broker address given directly), topic creation, the brokers' flush setting and
//! version, and per-queue max offsets to check counts against what the brokers stored.

use anyhow::{bail, Context};
use ferromq::config::fastjson::parse_lenient;
use ferromq::remoting::body::{BrokerData, TopicRouteData};
use ferromq::remoting::client::{connect_tokio, ClientConfig, RemotingClient};
use ferromq::remoting::headers::{
    CreateTopicRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader, OffsetResponseHeader,
};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode};
use std::net::SocketAddr;
use std::time::Duration;

/// Time limit of an administrative request.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Permission bits (`PermName`): writable, readable.
const PERM_WRITE: i32 = 2;
const PERM_READ: i32 = 4;

/// One master broker serving the topic.
#[derive(Debug, Clone)]
pub struct Broker {
    /// Broker name (from the route; from GET_BROKER_CONFIG in direct mode).
    pub name: String,
    /// Address of the master.
    pub addr: SocketAddr,
    /// Writable queue count.
    pub write_queues: i32,
    /// Readable queue count.
    pub read_queues: i32,
}

/// What GET_BROKER_CONFIG said.
#[derive(Debug, Clone, Default)]
pub struct BrokerInfo {
    /// `flushDiskType`, e.g. `ASYNC_FLUSH`.
    pub flush_disk_type: Option<String>,
    /// `brokerName`.
    pub broker_name: Option<String>,
    /// The `version` field of the response (the broker's `MQVersion` code).
    pub version_code: Option<i32>,
}

/// Sends an administrative request with the standard time limit and checks for SUCCESS.
pub async fn admin(
    client: &RemotingClient,
    request: RemotingCommand,
    what: &str,
) -> anyhow::Result<RemotingCommand> {
    let response = client
        .request_timeout(request, ADMIN_TIMEOUT)
        .await
        .with_context(|| what.to_owned())?;
    if response.response_code() != ResponseCode::SUCCESS {
        bail!(
            "{what}: {} {}",
            response.response_code(),
            response.remark.as_deref().unwrap_or("")
        );
    }
    Ok(response)
}

/// Connects to `addr`.
pub async fn connect(addr: SocketAddr, config: &ClientConfig) -> anyhow::Result<RemotingClient> {
    let (client, _inbound) = connect_tokio(addr, config.clone()).await?;
    Ok(client)
}

/// The topic's route from a name server, or `None` when the topic has none.
pub async fn route(
    namesrv: &RemotingClient,
    topic: &str,
) -> anyhow::Result<Option<TopicRouteData>> {
    let header = GetRouteInfoRequestHeader {
        topic: topic.to_owned(),
        accept_standard_json_only: Some(true),
    };
    let request =
        RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
    let response = namesrv
        .request_timeout(request, ADMIN_TIMEOUT)
        .await
        .context("GET_ROUTEINFO_BY_TOPIC")?;
    if response.response_code() == ResponseCode::TOPIC_NOT_EXIST {
        return Ok(None);
    }
    if response.response_code() != ResponseCode::SUCCESS {
        bail!(
            "route of {topic}: {} {}",
            response.response_code(),
            response.remark.as_deref().unwrap_or("")
        );
    }
    let value = parse_lenient(&response.body)
        .map_err(|e| anyhow::anyhow!("route of {topic} is not JSON: {e}"))?;
    let route: TopicRouteData =
        serde_json::from_value(value).context("route body is not a TopicRouteData")?;
    Ok(Some(route))
}

/// The master brokers of a route with their queue counts.
pub fn masters(route: &TopicRouteData) -> anyhow::Result<Vec<Broker>> {
    let mut brokers = Vec::new();
    for queue_data in &route.queue_datas {
        let Some(data) = route
            .broker_datas
            .iter()
            .find(|b| b.broker_name == queue_data.broker_name)
        else {
            continue;
        };
        let Some(addr) = data.broker_addrs.get(&0) else {
            continue;
        };
        let addr: SocketAddr = addr
            .parse()
            .with_context(|| format!("broker address {addr}"))?;
        let write_queues = if queue_data.perm & PERM_WRITE != 0 {
            queue_data.write_queue_nums
        } else {
            0
        };
        let read_queues = if queue_data.perm & PERM_READ != 0 {
            queue_data.read_queue_nums
        } else {
            0
        };
        brokers.push(Broker {
            name: queue_data.broker_name.clone(),
            addr,
            write_queues,
            read_queues,
        });
    }
    if brokers.is_empty() {
        bail!("the route names no master broker");
    }
    Ok(brokers)
}

/// Name and master address of every broker a name server knows (GET_BROKER_CLUSTER_INFO).
pub async fn cluster_masters(
    namesrv: &RemotingClient,
) -> anyhow::Result<Vec<(String, SocketAddr)>> {
    let request = RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO);
    let response = admin(namesrv, request, "GET_BROKER_CLUSTER_INFO").await?;
    let value = parse_lenient(&response.body)
        .map_err(|e| anyhow::anyhow!("cluster info is not JSON: {e}"))?;
    let mut masters = Vec::new();
    if let Some(table) = value.get("brokerAddrTable").and_then(|t| t.as_object()) {
        for data in table.values() {
            let data: BrokerData =
                serde_json::from_value(data.clone()).context("cluster info broker data")?;
            if let Some(addr) = data.broker_addrs.get(&0) {
                let parsed: SocketAddr = addr
                    .parse()
                    .with_context(|| format!("broker address {addr}"))?;
                masters.push((data.broker_name.clone(), parsed));
            }
        }
    }
    Ok(masters)
}

/// UPDATE_AND_CREATE_TOPIC on one broker.
pub async fn create_topic(broker: &RemotingClient, topic: &str, queues: i32) -> anyhow::Result<()> {
    let header = CreateTopicRequestHeader::read_write(topic, queues);
    let request =
        RemotingCommand::request_with_header(RequestCode::UPDATE_AND_CREATE_TOPIC, &header);
    admin(broker, request, "UPDATE_AND_CREATE_TOPIC").await?;
    Ok(())
}

/// GET_BROKER_CONFIG (26): flush type, name and version; `None` fields when not reported.
pub async fn broker_info(broker: &RemotingClient) -> BrokerInfo {
    let request = RemotingCommand::request(RequestCode::GET_BROKER_CONFIG);
    let Ok(response) = admin(broker, request, "GET_BROKER_CONFIG").await else {
        return BrokerInfo::default();
    };
    let text = String::from_utf8_lossy(&response.body);
    let lookup = |key: &str| {
        text.lines().find_map(|line| {
            let (k, v) = line.split_once('=')?;
            (k.trim() == key).then(|| v.trim().to_owned())
        })
    };
    BrokerInfo {
        flush_disk_type: lookup("flushDiskType"),
        broker_name: lookup("brokerName"),
        version_code: Some(response.version),
    }
}

/// GET_MAX_OFFSET of one queue.
pub async fn max_offset(
    broker: &RemotingClient,
    topic: &str,
    queue_id: i32,
) -> anyhow::Result<i64> {
    let header = GetMaxOffsetRequestHeader {
        topic: topic.to_owned(),
        queue_id,
        committed: None,
    };
    let request = RemotingCommand::request_with_header(RequestCode::GET_MAX_OFFSET, &header);
    let response = admin(broker, request, "GET_MAX_OFFSET").await?;
    let header: OffsetResponseHeader = response.decode_header()?;
    Ok(header.offset)
}

/// GET_MIN_OFFSET of one queue.
pub async fn min_offset(
    broker: &RemotingClient,
    topic: &str,
    queue_id: i32,
) -> anyhow::Result<i64> {
    let header = GetMinOffsetRequestHeader {
        topic: topic.to_owned(),
        queue_id,
    };
    let request = RemotingCommand::request_with_header(RequestCode::GET_MIN_OFFSET, &header);
    let response = admin(broker, request, "GET_MIN_OFFSET").await?;
    let header: OffsetResponseHeader = response.decode_header()?;
    Ok(header.offset)
}

/// The sum of the max offsets of every readable queue of every broker.
pub async fn total_max_offset(
    brokers: &[(Broker, RemotingClient)],
    topic: &str,
) -> anyhow::Result<i64> {
    let mut total = 0;
    for (broker, client) in brokers {
        for queue_id in 0..broker.read_queues.max(broker.write_queues) {
            total += max_offset(client, topic, queue_id).await?;
        }
    }
    Ok(total)
}
