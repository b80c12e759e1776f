//! A snapshot of a cluster read through the admin requests mqadmin uses, so it works
//! against any RocketMQ broker: GET_BROKER_RUNTIME_INFO (through `clusterList`), and on each
//! master GET_ALL_TOPIC_CONFIG, GET_TOPIC_STATS_INFO per topic (sent together, one round
//! trip) and GET_ALL_CONSUMER_OFFSET. `admin top` shows one per refresh; the status page
//! keeps fifteen minutes of them. Rates are the change of offsets between two snapshots; a
//! group's lag is the sum over the queues it committed in of the queue's end minus its
//! committed offset.

use super::cluster::{self, ClusterListArgs};
use super::output::{int, text};
use super::{AdminClient, AdminError};
use crate::config::fastjson::{parse_lenient, queue_keyed_map};
use crate::remoting::headers::GetTopicStatsInfoRequestHeader;
use crate::remoting::{RemotingCommand, RequestCode};
use ferromq_protocol::names::{REPLY_TOPIC_POSTFIX, SYSTEM_TOPICS, SYSTEM_TOPIC_PREFIX};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Instant;

/// One broker's figures at a refresh.
#[derive(Clone, Debug)]
pub struct BrokerFigures {
    /// Its cluster.
    pub cluster: String,
    /// Its broker name.
    pub name: String,
    /// Its broker id (0 is the master).
    pub id: i64,
    /// Its remoting address.
    pub addr: String,
    /// `brokerRole` as it reports it (ASYNC_MASTER, SYNC_MASTER, SLAVE).
    pub role: String,
    /// Messages put per second (`putTps`, its freshest figure).
    pub in_tps: f64,
    /// Messages read per second (`getTransferedTps`).
    pub out_tps: f64,
    /// `putLatency99`, in ms.
    pub put_p99_ms: Option<f64>,
    /// `commitLogDiskRatio`, 0..1.
    pub disk_ratio: Option<f64>,
    /// The CommitLog's max offset.
    pub max_offset: Option<i64>,
    /// Bytes its slave is behind (`haLagBytes`), on a master with a slave.
    pub ha_lag: Option<i64>,
}

impl BrokerFigures {
    /// Its figures as text, in the order of the brokers' tables of `top` and the status
    /// page: name, id, address, role, in/s, out/s, put p99 ms, disk, max offset, HA lag;
    /// `-` where it reported nothing.
    #[must_use]
    pub fn cells(&self) -> [String; 10] {
        [
            self.name.clone(),
            self.id.to_string(),
            self.addr.clone(),
            self.role.clone(),
            format!("{:.1}", self.in_tps),
            format!("{:.1}", self.out_tps),
            or_dash(self.put_p99_ms.map(|ms| format!("{ms:.2}"))),
            or_dash(self.disk_ratio.map(|r| format!("{:.1}%", r * 100.0))),
            or_dash(self.max_offset),
            or_dash(self.ha_lag),
        ]
    }
}

/// The change of `now` against `before` per second over `seconds`, as text; `-` without a
/// before or a time between.
#[must_use]
pub fn rate(now: i64, before: Option<i64>, seconds: f64) -> String {
    match before {
        #[allow(clippy::cast_precision_loss)] // offsets far below 2^52
        Some(before) if seconds > 0.0 => format!("{:.1}", (now - before) as f64 / seconds),
        _ => "-".to_owned(),
    }
}

fn or_dash<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// A group's figures in one topic at a refresh.
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupFigures {
    /// Sum of its committed offsets.
    pub committed: i64,
    /// Sum over its queues of the queue's end minus its committed offset.
    pub lag: i64,
}

/// One queue of a group at a refresh.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueFigures {
    /// The queue's end (its max offset).
    pub end: i64,
    /// The group's committed offset in it.
    pub committed: i64,
}

/// What one refresh read.
#[derive(Debug)]
pub struct Sample {
    /// When it was read.
    pub at: Instant,
    /// Every broker the name server lists.
    pub brokers: Vec<BrokerFigures>,
    /// Per topic, the sum of its queues' ends over the masters.
    pub topics: BTreeMap<String, i64>,
    /// Per (group, topic).
    pub groups: BTreeMap<(String, String), GroupFigures>,
    /// Per (group, topic, broker name, queue id): the queue's end and the group's
    /// committed offset in it.
    pub queues: BTreeMap<(String, String, String, i64), QueueFigures>,
    /// Requests that failed, one line each.
    pub problems: Vec<String>,
}

/// Reads every figure once. Only the name server's refusal is an error; a broker that does
/// not answer is shown with what it did answer and a line in `problems`.
pub fn take_sample(
    client: &mut AdminClient,
    cluster_name: Option<&str>,
    max_topics: usize,
) -> Result<Sample, AdminError> {
    let list = cluster::cluster_list(
        client,
        &ClusterListArgs {
            cluster: cluster_name.map(str::to_owned),
        },
    )?;
    let brokers: Vec<BrokerFigures> = list
        .json
        .as_array()
        .map(|all| all.iter().map(broker_figures).collect())
        .unwrap_or_default();
    let mut sample = Sample {
        at: Instant::now(),
        brokers,
        topics: BTreeMap::new(),
        groups: BTreeMap::new(),
        queues: BTreeMap::new(),
        problems: Vec::new(),
    };
    let masters: Vec<(String, String)> = sample
        .brokers
        .iter()
        .filter(|b| b.id == 0)
        .map(|b| (b.name.clone(), b.addr.clone()))
        .collect();
    for (name, addr) in masters {
        if let Err(error) = read_master(client, (&name, &addr), max_topics, &mut sample) {
            sample.problems.push(format!("{name} ({addr}): {error}"));
        }
    }
    Ok(sample)
}

fn broker_figures(entry: &Value) -> BrokerFigures {
    let runtime = &entry["runtime"];
    let get = |key: &str| runtime[key].as_str().map(str::to_owned);
    // TPS values are "10s 1min 10min"; the first is the freshest.
    let tps = |key: &str| {
        get(key)
            .and_then(|v| v.split(' ').next().and_then(|n| n.parse::<f64>().ok()))
            .unwrap_or(0.0)
    };
    let number = |key: &str| get(key).and_then(|v| v.parse::<f64>().ok());
    BrokerFigures {
        cluster: text(entry, "clusterName"),
        name: text(entry, "brokerName"),
        id: int(entry, "brokerId"),
        addr: text(entry, "brokerAddr"),
        role: text(entry, "role"),
        in_tps: tps("putTps"),
        out_tps: tps("getTransferedTps"),
        put_p99_ms: number("putLatency99"),
        disk_ratio: number("commitLogDiskRatio"),
        max_offset: get("commitLogMaxOffset").and_then(|v| v.parse().ok()),
        ha_lag: entry["haLagBytes"].as_i64(),
    }
}

/// A master's topics' ends and its groups' offsets, added into `sample`.
fn read_master(
    client: &mut AdminClient,
    (name, addr): (&str, &str),
    max_topics: usize,
    sample: &mut Sample,
) -> Result<(), AdminError> {
    let offsets = body_json(client, addr, RequestCode::GET_ALL_CONSUMER_OFFSET)?;
    let configs = body_json(client, addr, RequestCode::GET_ALL_TOPIC_CONFIG)?;
    let own_names: Vec<&str> = sample
        .brokers
        .iter()
        .flat_map(|b| [b.name.as_str(), b.cluster.as_str()])
        .collect();
    let mut topics: Vec<String> = configs["topicConfigTable"]
        .as_object()
        .map(|table| table.keys().cloned().collect())
        .unwrap_or_default();
    topics.retain(|topic| !is_system(topic, &own_names));
    topics.sort();
    topics.truncate(max_topics);
    // Per (topic, queue), the queue's end on this master.
    let mut ends: BTreeMap<(String, i64), i64> = BTreeMap::new();
    // One round trip for all the topics: the requests go out together on one connection.
    let requests = topics
        .iter()
        .map(|topic| {
            let header = GetTopicStatsInfoRequestHeader {
                topic: topic.clone(),
            };
            RemotingCommand::request_with_header(RequestCode::GET_TOPIC_STATS_INFO, &header)
        })
        .collect();
    let answers = client.call_ok_all(addr, requests)?;
    for (topic, response) in topics.iter().zip(answers) {
        let queues = queue_keyed_map(&response.body, "offsetTable")
            .map_err(|reason| super::client::bad_body(addr, reason))?;
        let mut total = 0;
        for (queue, offsets) in queues {
            let end = int(&offsets, "maxOffset");
            total += end;
            ends.insert((topic.clone(), int(&queue, "queueId")), end);
        }
        *sample.topics.entry(topic.clone()).or_default() += total;
    }
    let table = offsets["offsetTable"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (key, queues) in table {
        let Some((topic, group)) = key.split_once('@') else {
            continue;
        };
        if !sample.topics.contains_key(topic) {
            continue;
        }
        let figures = sample
            .groups
            .entry((group.to_owned(), topic.to_owned()))
            .or_default();
        for (queue, committed) in queues.as_object().into_iter().flatten() {
            let (Ok(queue), Some(committed)) = (queue.parse::<i64>(), committed.as_i64()) else {
                continue;
            };
            figures.committed += committed;
            let end = ends.get(&(topic.to_owned(), queue)).copied();
            if let Some(end) = end {
                figures.lag += (end - committed).max(0);
            }
            let key = (group.to_owned(), topic.to_owned(), name.to_owned(), queue);
            sample.queues.insert(
                key,
                QueueFigures {
                    end: end.unwrap_or(0),
                    committed,
                },
            );
        }
    }
    Ok(())
}

/// A broker's answer to `code` (no header) as JSON.
fn body_json(client: &mut AdminClient, addr: &str, code: RequestCode) -> Result<Value, AdminError> {
    let response = client.call_ok(addr, RemotingCommand::request(code))?;
    parse_lenient(&response.body).map_err(|reason| super::client::bad_body(addr, reason))
}

/// Whether `topic` is one the brokers keep for themselves (not shown): the fixed system
/// topics, `rmq_sys_*`, retry and dead-letter topics, and the topics named after a broker or
/// cluster (`own_names`), with a cluster's reply topic.
pub fn is_system(topic: &str, own_names: &[&str]) -> bool {
    let reply_of_own = topic
        .strip_suffix(REPLY_TOPIC_POSTFIX)
        .and_then(|rest| rest.strip_suffix('_'))
        .is_some_and(|cluster| own_names.contains(&cluster));
    SYSTEM_TOPICS.contains(&topic)
        || topic.starts_with(SYSTEM_TOPIC_PREFIX)
        || topic.starts_with("%RETRY%")
        || topic.starts_with("%DLQ%")
        || own_names.contains(&topic)
        || reply_of_own
}
