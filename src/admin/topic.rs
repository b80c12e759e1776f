//! Topic commands: updateTopic, deleteTopic, topicList, topicRoute, topicStatus
//! (`tools/.../command/topic/*SubCommand`).

use super::client::{bad_body, route_masters};
use super::cluster::BrokerTargetArgs;
use super::output::{human_time, int, text, Report, Table};
use super::{AdminClient, AdminError};
use crate::config::fastjson::queue_keyed_map;
use crate::remoting::body::{JsonFlavour, TopicList};
use crate::remoting::headers::{
    CreateTopicRequestHeader, DeleteTopicFromNamesrvRequestHeader, DeleteTopicRequestHeader,
    GetTopicStatsInfoRequestHeader, PutKvConfigRequestHeader,
};
use crate::remoting::{RemotingCommand, RequestCode};
use serde_json::json;

/// Flags of `updateTopic`.
#[derive(Debug, clap::Args)]
pub struct UpdateTopicArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// The broker, or every master of the cluster.
    #[command(flatten)]
    pub target: BrokerTargetArgs,
    /// Readable queues.
    #[arg(short = 'r', long = "readQueueNums", default_value_t = 8)]
    pub read_queue_nums: i32,
    /// Writable queues.
    #[arg(short = 'w', long = "writeQueueNums", default_value_t = 8)]
    pub write_queue_nums: i32,
    /// Permission: 2 write, 4 read, 6 both.
    #[arg(short = 'p', long = "perm", default_value_t = 6)]
    pub perm: i32,
    /// Ordered topic; with -c the name servers also get its `orderConf`.
    #[arg(short = 'o', long = "order", default_value_t = false, action = clap::ArgAction::Set)]
    pub order: bool,
}

/// Flags of `deleteTopic`.
#[derive(Debug, clap::Args)]
pub struct DeleteTopicArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// The cluster to delete it from.
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: String,
}

/// Flags of `topicList` (none beyond the common ones).
#[derive(Debug, clap::Args)]
pub struct TopicListArgs {}

/// Flags of `topicRoute`.
#[derive(Debug, clap::Args)]
pub struct TopicRouteArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
}

/// Flags of `topicStatus`.
#[derive(Debug, clap::Args)]
pub struct TopicStatusArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
}

/// Namespace of ordered-topic configs in the name server's KV store (`NamesrvUtil`).
const ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// `updateTopic`: UPDATE_AND_CREATE_TOPIC to the broker or to every master of the cluster.
///
/// # Errors
/// The first broker that refuses, or cannot be reached.
pub fn update_topic(
    client: &mut AdminClient,
    args: &UpdateTopicArgs,
) -> Result<Report, AdminError> {
    let targets = args.target.resolve(client)?;
    let header = CreateTopicRequestHeader {
        topic: args.topic.clone(),
        default_topic: "TBW102".to_owned(),
        read_queue_nums: args.read_queue_nums,
        write_queue_nums: args.write_queue_nums,
        perm: args.perm,
        topic_filter_type: "SINGLE_TAG".to_owned(),
        topic_sys_flag: Some(0),
        order: args.order,
        attributes: None,
        force: None,
    };
    let mut text = String::new();
    for addr in &targets {
        client.request(addr, RequestCode::UPDATE_AND_CREATE_TOPIC, &header)?;
        text.push_str(&format!("create topic to {addr} success.\n"));
    }
    let mut order_conf = None;
    if let (true, Some(cluster)) = (args.order, args.target.cluster.as_deref()) {
        let conf = client
            .cluster_masters(cluster)?
            .iter()
            .map(|b| format!("{}:{}", b.broker_name, args.write_queue_nums))
            .collect::<Vec<_>>()
            .join(";");
        let header = PutKvConfigRequestHeader {
            namespace: ORDER_TOPIC_CONFIG.to_owned(),
            key: args.topic.clone(),
            value: conf.clone(),
        };
        for namesrv in client.namesrvs().to_vec() {
            client.request(&namesrv, RequestCode::PUT_KV_CONFIG, &header)?;
        }
        text.push_str(&format!("set cluster orderConf=[{conf}]\n"));
        order_conf = Some(conf);
    }
    text.push_str(&format!(
        "TopicConfig [topicName={}, readQueueNums={}, writeQueueNums={}, perm={}, order={}]\n",
        args.topic, args.read_queue_nums, args.write_queue_nums, args.perm, args.order
    ));
    let json = json!({
        "topicName": args.topic,
        "readQueueNums": args.read_queue_nums,
        "writeQueueNums": args.write_queue_nums,
        "perm": args.perm,
        "order": args.order,
        "orderConf": order_conf,
        "brokerAddrs": targets,
    });
    Ok(Report { json, text })
}

/// `deleteTopic`: DELETE_TOPIC_IN_BROKER on every master of the cluster, then
/// DELETE_TOPIC_IN_NAMESRV on every name server.
///
/// # Errors
/// The first refusal.
pub fn delete_topic(
    client: &mut AdminClient,
    args: &DeleteTopicArgs,
) -> Result<Report, AdminError> {
    let (brokers, namesrvs) = delete_in_cluster(client, &args.topic, &args.cluster)?;
    let text = format!(
        "delete topic [{}] from cluster [{}] success.\ndelete topic [{}] from NameServer \
         success.\n",
        args.topic, args.cluster, args.topic
    );
    let json = json!({
        "topic": args.topic,
        "clusterName": args.cluster,
        "brokerAddrs": brokers,
        "namesrvAddrs": namesrvs,
    });
    Ok(Report { json, text })
}

/// Deletes `topic` from the masters of `cluster` and from every name server; the addresses
/// of both.
///
/// # Errors
/// The first refusal.
pub fn delete_in_cluster(
    client: &mut AdminClient,
    topic: &str,
    cluster: &str,
) -> Result<(Vec<String>, Vec<String>), AdminError> {
    let masters: Vec<String> = client
        .cluster_masters(cluster)?
        .into_iter()
        .map(|b| b.addr)
        .collect();
    let header = DeleteTopicRequestHeader {
        topic: topic.to_owned(),
    };
    for addr in &masters {
        client.request(addr, RequestCode::DELETE_TOPIC_IN_BROKER, &header)?;
    }
    let header = DeleteTopicFromNamesrvRequestHeader {
        topic: topic.to_owned(),
        cluster_name: Some(cluster.to_owned()),
    };
    let namesrvs = client.namesrvs().to_vec();
    for addr in &namesrvs {
        client.request(addr, RequestCode::DELETE_TOPIC_IN_NAMESRV, &header)?;
    }
    Ok((masters, namesrvs))
}

/// `topicList`: GET_ALL_TOPIC_LIST_FROM_NAMESERVER, sorted.
///
/// # Errors
/// The name server's refusal.
pub fn topic_list(client: &mut AdminClient, _args: &TopicListArgs) -> Result<Report, AdminError> {
    let topics = all_topics(client)?;
    let text: String = topics.iter().map(|t| format!("{t}\n")).collect();
    Ok(Report {
        json: json!({ "topicList": topics }),
        text,
    })
}

/// Every topic the name server knows, sorted.
///
/// # Errors
/// The name server's refusal.
pub fn all_topics(client: &mut AdminClient) -> Result<Vec<String>, AdminError> {
    let response = client.namesrv_call(RemotingCommand::request(
        RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    ))?;
    let mut list: TopicList = serde_json::from_slice(&response.body)
        .map_err(|e| bad_body("name server", e.to_string()))?;
    list.topic_list.sort();
    Ok(list.topic_list)
}

/// `topicRoute`: the route as a table (mqadmin's `-l` form); `--json` gives the route
/// itself.
///
/// # Errors
/// TOPIC_NOT_EXIST from the name server when no broker serves the topic.
pub fn topic_route(client: &mut AdminClient, args: &TopicRouteArgs) -> Result<Report, AdminError> {
    let route = client.topic_route(&args.topic)?;
    let json = serde_json::from_slice(&route.to_json(JsonFlavour::Standard))
        .map_err(|e| bad_body("name server", e.to_string()))?;
    let mut table = Table::new(&[
        "#Cluster Name",
        "#Broker Name",
        "#Broker Addrs",
        "#Read Queue",
        "#Write Queue",
        "#Perm",
    ]);
    let (mut read_total, mut write_total) = (0, 0);
    for broker in &route.broker_datas {
        let Some(queues) = route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == broker.broker_name)
        else {
            continue;
        };
        read_total += queues.read_queue_nums;
        write_total += queues.write_queue_nums;
        let addrs: Vec<String> = broker
            .broker_addrs
            .iter()
            .map(|(id, addr)| format!("{id}={addr}"))
            .collect();
        table.row(vec![
            broker.cluster.clone(),
            broker.broker_name.clone(),
            format!("{{{}}}", addrs.join(", ")),
            queues.read_queue_nums.to_string(),
            queues.write_queue_nums.to_string(),
            queues.perm.to_string(),
        ]);
    }
    table.row(vec![
        "Total:".to_owned(),
        route.broker_datas.len().to_string(),
        String::new(),
        read_total.to_string(),
        write_total.to_string(),
        String::new(),
    ]);
    Ok(Report {
        json,
        text: table.render(),
    })
}

/// `topicStatus`: GET_TOPIC_STATS_INFO on the master of every broker serving the topic.
///
/// # Errors
/// The route lookup's or a broker's refusal.
pub fn topic_status(
    client: &mut AdminClient,
    args: &TopicStatusArgs,
) -> Result<Report, AdminError> {
    let route = client.topic_route(&args.topic)?;
    let header = GetTopicStatsInfoRequestHeader {
        topic: args.topic.clone(),
    };
    let mut queues = Vec::new();
    for (_, addr) in route_masters(&route) {
        let response = client.request(&addr, RequestCode::GET_TOPIC_STATS_INFO, &header)?;
        let entries =
            queue_keyed_map(&response.body, "offsetTable").map_err(|r| bad_body(&addr, r))?;
        for (queue, offsets) in entries {
            queues.push(json!({
                "brokerName": text(&queue, "brokerName"),
                "queueId": int(&queue, "queueId"),
                "minOffset": int(&offsets, "minOffset"),
                "maxOffset": int(&offsets, "maxOffset"),
                "lastUpdateTimestamp": int(&offsets, "lastUpdateTimestamp"),
            }));
        }
    }
    queues.sort_by_key(|q| (text(q, "brokerName"), int(q, "queueId")));
    let mut table = Table::new(&[
        "#Broker Name",
        "#QID",
        "#Min Offset",
        "#Max Offset",
        "#Last Updated",
    ]);
    for queue in &queues {
        table.row(vec![
            text(queue, "brokerName"),
            int(queue, "queueId").to_string(),
            int(queue, "minOffset").to_string(),
            int(queue, "maxOffset").to_string(),
            human_time(int(queue, "lastUpdateTimestamp")),
        ]);
    }
    Ok(Report {
        json: json!({ "topic": args.topic, "queues": queues }),
        text: table.render(),
    })
}
