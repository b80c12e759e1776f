//! Consumer and producer group commands: updateSubGroup, deleteSubGroup, consumerProgress,
//! consumerConnection, producerConnection, resetOffsetByTime
//! (`tools/.../command/consumer/*`, `connection/*`, `offset/ResetOffsetByTimeOldCommand`).

use super::client::{bad_body, check, route_masters};
use super::cluster::BrokerTargetArgs;
use super::output::{human_time, int, parse_timestamp, text, Report, Table};
use super::{AdminClient, AdminError};
use crate::config::fastjson::parse_lenient;
use crate::config::fastjson::queue_keyed_map;
use crate::remoting::headers::{
    DeleteSubscriptionGroupRequestHeader, GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader, GetMaxOffsetRequestHeader,
    GetProducerConnectionListRequestHeader, GetTopicStatsInfoRequestHeader, OffsetResponseHeader,
    ResetOffsetRequestHeader, SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use serde_json::{json, Value};

/// Flags of `updateSubGroup`; the defaults are those of a new `SubscriptionGroupConfig`.
#[derive(Debug, clap::Args)]
pub struct UpdateSubGroupArgs {
    /// Group name.
    #[arg(short = 'g', long = "groupName")]
    pub group: String,
    /// The broker, or every master of the cluster.
    #[command(flatten)]
    pub target: BrokerTargetArgs,
    /// Whether the group may consume.
    #[arg(short = 's', long = "consumeEnable", default_value_t = true,
        action = clap::ArgAction::Set)]
    pub consume_enable: bool,
    /// Whether a new consumer may start from the min offset.
    #[arg(short = 'm', long = "consumeFromMinEnable", default_value_t = true,
        action = clap::ArgAction::Set)]
    pub consume_from_min_enable: bool,
    /// Whether broadcasting consumption is allowed.
    #[arg(short = 'd', long = "consumeBroadcastEnable", default_value_t = true,
        action = clap::ArgAction::Set)]
    pub consume_broadcast_enable: bool,
    /// Queues of the group's retry topic.
    #[arg(short = 'q', long = "retryQueueNums", default_value_t = 1)]
    pub retry_queue_nums: i32,
    /// Redeliveries before a message goes to the dead-letter topic.
    #[arg(short = 'r', long = "retryMaxTimes", default_value_t = 16)]
    pub retry_max_times: i32,
    /// Broker id consumers pull from.
    #[arg(short = 'i', long = "brokerId", default_value_t = 0)]
    pub broker_id: i64,
    /// Broker id to pull from when consumption falls behind.
    #[arg(
        short = 'w',
        long = "whichBrokerWhenConsumeSlowly",
        default_value_t = 1
    )]
    pub which_broker_when_consume_slowly: i64,
    /// Whether members are told when the group changes.
    #[arg(short = 'a', long = "notifyConsumerIdsChanged", default_value_t = true,
        action = clap::ArgAction::Set)]
    pub notify_consumer_ids_changed: bool,
}

/// Flags of `deleteSubGroup`. With a cluster, the group's retry and dead-letter topics go
/// too.
#[derive(Debug, clap::Args)]
pub struct DeleteSubGroupArgs {
    /// Group name.
    #[arg(short = 'g', long = "groupName")]
    pub group: String,
    /// The broker, or every master of the cluster.
    #[command(flatten)]
    pub target: BrokerTargetArgs,
    /// Also remove the group's committed offsets.
    #[arg(short = 'r', long = "removeOffset", default_value_t = false,
        action = clap::ArgAction::Set)]
    pub remove_offset: bool,
}

/// Flags of `consumerProgress`.
#[derive(Debug, clap::Args)]
pub struct ConsumerProgressArgs {
    /// Consumer group; without it, one summary line per group that has a retry topic.
    #[arg(short = 'g', long = "groupName")]
    pub group: Option<String>,
    /// Only this topic (its route's brokers are asked); else every master is asked.
    #[arg(short = 't', long = "topicName")]
    pub topic: Option<String>,
    /// Only the masters of this cluster.
    #[arg(short = 'c', long = "cluster")]
    pub cluster: Option<String>,
}

/// Flags of `consumerConnection`.
#[derive(Debug, clap::Args)]
pub struct ConsumerConnectionArgs {
    /// Consumer group.
    #[arg(short = 'g', long = "consumerGroup")]
    pub group: String,
    /// Ask this broker; else the masters in turn until one knows the group.
    #[arg(short = 'b', long = "brokerAddr")]
    pub broker: Option<String>,
}

/// Flags of `producerConnection`.
#[derive(Debug, clap::Args)]
pub struct ProducerConnectionArgs {
    /// Producer group.
    #[arg(short = 'g', long = "producerGroup")]
    pub group: String,
    /// A topic the group sends to; the masters of its route are asked in turn.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
}

/// Flags of `resetOffsetByTime`.
#[derive(Debug, clap::Args)]
pub struct ResetOffsetByTimeArgs {
    /// Consumer group.
    #[arg(short = 'g', long = "group")]
    pub group: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// `now` (the max offsets), epoch milliseconds, or `yyyy-MM-dd#HH:mm:ss:SSS` (UTC).
    #[arg(short = 's', long = "timestamp")]
    pub timestamp: String,
    /// Also move offsets forward (else only back to the time).
    #[arg(short = 'f', long = "force", default_value_t = true, action = clap::ArgAction::Set)]
    pub force: bool,
    /// Only this broker (`host:port`).
    #[arg(short = 'b', long = "broker")]
    pub broker: Option<String>,
    /// Only this queue id.
    #[arg(short = 'q', long = "queue")]
    pub queue: Option<i32>,
}

/// `updateSubGroup`: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP to the broker or every master.
///
/// # Errors
/// The first refusal.
pub fn update_sub_group(
    client: &mut AdminClient,
    args: &UpdateSubGroupArgs,
) -> Result<Report, AdminError> {
    let targets = args.target.resolve(client)?;
    let config = json!({
        "groupName": args.group,
        "consumeEnable": args.consume_enable,
        "consumeFromMinEnable": args.consume_from_min_enable,
        "consumeBroadcastEnable": args.consume_broadcast_enable,
        "retryQueueNums": args.retry_queue_nums,
        "retryMaxTimes": args.retry_max_times,
        "brokerId": args.broker_id,
        "whichBrokerWhenConsumeSlowly": args.which_broker_when_consume_slowly,
        "notifyConsumerIdsChangedEnable": args.notify_consumer_ids_changed,
    });
    let mut text = String::new();
    for addr in &targets {
        let mut request =
            RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP);
        request.body = config.to_string().into_bytes();
        client.call_ok(addr, request)?;
        text.push_str(&format!("create subscription group to {addr} success.\n"));
    }
    text.push_str(&format!("{config}\n"));
    Ok(Report {
        json: json!({ "config": config, "brokerAddrs": targets }),
        text,
    })
}

/// `deleteSubGroup`: DELETE_SUBSCRIPTIONGROUP on the broker or every master; with a cluster
/// also the group's `%RETRY%` and `%DLQ%` topics, as mqadmin does.
///
/// # Errors
/// The first refusal.
pub fn delete_sub_group(
    client: &mut AdminClient,
    args: &DeleteSubGroupArgs,
) -> Result<Report, AdminError> {
    let targets = args.target.resolve(client)?;
    let header = DeleteSubscriptionGroupRequestHeader {
        group_name: args.group.clone(),
        remove_offset: Some(args.remove_offset),
        clean_offset: Some(args.remove_offset),
    };
    let mut text = String::new();
    for addr in &targets {
        client.request(addr, RequestCode::DELETE_SUBSCRIPTIONGROUP, &header)?;
        text.push_str(&format!(
            "delete subscription group [{}] from broker [{addr}] success.\n",
            args.group
        ));
    }
    let mut topics = Vec::new();
    if let Some(cluster) = &args.target.cluster {
        for prefix in ["%RETRY%", "%DLQ%"] {
            let topic = format!("{prefix}{}", args.group);
            super::topic::delete_in_cluster(client, &topic, cluster)?;
            text.push_str(&format!(
                "delete topic [{topic}] from cluster [{cluster}] success.\n"
            ));
            topics.push(topic);
        }
    }
    Ok(Report {
        json: json!({ "groupName": args.group, "brokerAddrs": targets, "deletedTopics": topics }),
        text,
    })
}

/// GET_CONSUME_STATS of `group` (optionally for one topic) at `addr`: the consume TPS and
/// one JSON object per queue.
fn consume_stats(
    client: &mut AdminClient,
    addr: &str,
    group: &str,
    topic: Option<&str>,
) -> Result<(f64, Vec<Value>), AdminError> {
    let header = GetConsumeStatsRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.map(str::to_owned),
        topic_list: None,
    };
    let response = client.request(addr, RequestCode::GET_CONSUME_STATS, &header)?;
    let tps = serde_json::from_slice::<Value>(&response.body)
        .ok()
        .and_then(|v| v["consumeTps"].as_f64())
        .unwrap_or(0.0);
    let entries = queue_keyed_map(&response.body, "offsetTable").map_err(|r| bad_body(addr, r))?;
    let queues = entries
        .into_iter()
        .map(|(queue, offsets)| {
            let broker_offset = int(&offsets, "brokerOffset");
            let consumer_offset = int(&offsets, "consumerOffset");
            json!({
                "topic": text(&queue, "topic"),
                "brokerName": text(&queue, "brokerName"),
                "queueId": int(&queue, "queueId"),
                "brokerOffset": broker_offset,
                "consumerOffset": consumer_offset,
                "diff": broker_offset - consumer_offset,
                "lastTimestamp": int(&offsets, "lastTimestamp"),
            })
        })
        .collect();
    Ok((tps, queues))
}

/// The masters to ask about a group: those of the topic's route, else every master (of the
/// cluster, if given); (broker name, address) pairs.
fn group_brokers(
    client: &mut AdminClient,
    topic: Option<&str>,
    cluster: Option<&str>,
) -> Result<Vec<(String, String)>, AdminError> {
    if let Some(topic) = topic {
        return Ok(route_masters(&client.topic_route(topic)?));
    }
    Ok(client
        .brokers()?
        .into_iter()
        .filter(|b| b.broker_id == 0 && cluster.is_none_or(|c| c == b.cluster))
        .map(|b| (b.broker_name, b.addr))
        .collect())
}

/// `consumerProgress`: GET_CONSUME_STATS on every relevant master, one row per queue, then
/// the totals.
///
/// # Errors
/// A broker's refusal, or [`AdminError::NotFound`] when no broker has offsets of the group.
pub fn consumer_progress(
    client: &mut AdminClient,
    args: &ConsumerProgressArgs,
) -> Result<Report, AdminError> {
    let Some(group) = &args.group else {
        return all_groups_progress(client, args.cluster.as_deref());
    };
    let brokers = group_brokers(client, args.topic.as_deref(), args.cluster.as_deref())?;
    let mut tps_total = 0.0;
    let mut queues = Vec::new();
    for (_, addr) in brokers {
        let (tps, found) = consume_stats(client, &addr, group, args.topic.as_deref())?;
        tps_total += tps;
        queues.extend(found);
    }
    if queues.is_empty() {
        return Err(AdminError::NotFound(format!(
            "no consume stats of group [{group}]: it has committed no offset{}",
            args.topic
                .as_ref()
                .map(|t| format!(" in topic [{t}]"))
                .unwrap_or_default()
        )));
    }
    queues.sort_by_key(|q| (text(q, "topic"), text(q, "brokerName"), int(q, "queueId")));
    let diff_total: i64 = queues.iter().map(|q| int(q, "diff")).sum();
    let mut table = Table::new(&[
        "#Topic",
        "#Broker Name",
        "#QID",
        "#Broker Offset",
        "#Consumer Offset",
        "#Diff",
        "#LastTime",
    ]);
    for queue in &queues {
        table.row(vec![
            text(queue, "topic"),
            text(queue, "brokerName"),
            int(queue, "queueId").to_string(),
            int(queue, "brokerOffset").to_string(),
            int(queue, "consumerOffset").to_string(),
            int(queue, "diff").to_string(),
            human_time(int(queue, "lastTimestamp")),
        ]);
    }
    let text = format!(
        "{}\nConsume TPS: {tps_total:.2}\nConsume Diff Total: {diff_total}\n",
        table.render()
    );
    let json = json!({
        "group": group,
        "consumeTps": tps_total,
        "diffTotal": diff_total,
        "queues": queues,
    });
    Ok(Report { json, text })
}

/// `consumerProgress` without a group: every group with a `%RETRY%` topic, its online
/// members, how they consume, and its total difference (`GroupConsumeInfo`). A group whose
/// stats a broker refuses counts as having none there.
fn all_groups_progress(
    client: &mut AdminClient,
    cluster: Option<&str>,
) -> Result<Report, AdminError> {
    let topics = super::topic::all_topics(client)?;
    let brokers: Vec<String> = group_brokers(client, None, cluster)?
        .into_iter()
        .map(|(_, addr)| addr)
        .collect();
    let mut groups = Vec::new();
    for group in topics.iter().filter_map(|t| t.strip_prefix("%RETRY%")) {
        let (mut tps, mut diff) = (0.0, 0);
        for addr in &brokers {
            if let Ok((found_tps, queues)) = consume_stats(client, addr, group, None) {
                tps += found_tps;
                diff += queues.iter().map(|q| int(q, "diff")).sum::<i64>();
            }
        }
        let request = RemotingCommand::request_with_header(
            RequestCode::GET_CONSUMER_CONNECTION_LIST,
            &GetConsumerConnectionListRequestHeader {
                consumer_group: group.to_owned(),
            },
        );
        let members = first_answer(client, &brokers, &request).unwrap_or(Value::Null);
        let connections = members["connectionSet"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let version = connections.iter().map(|c| int(c, "version")).min();
        let consume_type = match members["consumeType"].as_str() {
            Some("CONSUME_PASSIVELY") => "PUSH",
            Some("CONSUME_ACTIVELY") => "PULL",
            _ => "",
        };
        groups.push(json!({
            "group": group,
            "count": connections.len(),
            "version": version,
            "consumeType": consume_type,
            "messageModel": members["messageModel"].as_str().unwrap_or_default(),
            "consumeTps": tps,
            "diffTotal": diff,
        }));
    }
    let mut table = Table::new(&[
        "#Group",
        "#Count",
        "#Version",
        "#Type",
        "#Model",
        "#TPS",
        "#Diff Total",
    ]);
    for group in &groups {
        table.row(vec![
            text(group, "group"),
            int(group, "count").to_string(),
            group["version"]
                .as_i64()
                .map_or_else(|| "OFFLINE".to_owned(), |v| v.to_string()),
            text(group, "consumeType"),
            text(group, "messageModel"),
            format!("{:.0}", group["consumeTps"].as_f64().unwrap_or(0.0)),
            int(group, "diffTotal").to_string(),
        ]);
    }
    Ok(Report {
        json: groups.into(),
        text: table.render(),
    })
}

/// Asks `brokers` in turn; the first success, else the last refusal.
fn first_answer(
    client: &mut AdminClient,
    brokers: &[String],
    request: &RemotingCommand,
) -> Result<Value, AdminError> {
    let mut last = AdminError::NotFound("no broker to ask".to_owned());
    for addr in brokers {
        match client.call_ok(addr, request.clone()) {
            Ok(response) => {
                return parse_lenient(&response.body).map_err(|r| bad_body(addr, r));
            }
            Err(error) => last = error,
        }
    }
    Err(last)
}

fn connection_table(connections: &Value) -> Table {
    let mut table = Table::new(&["#ClientId", "#ClientAddr", "#Language", "#Version"]);
    for connection in connections.as_array().into_iter().flatten() {
        table.row(vec![
            text(connection, "clientId"),
            text(connection, "clientAddr"),
            text(connection, "language"),
            int(connection, "version").to_string(),
        ]);
    }
    table
}

/// `consumerConnection`: GET_CONSUMER_CONNECTION_LIST; `--json` gives the broker's
/// `ConsumerConnection` body as it is.
///
/// # Errors
/// CONSUMER_NOT_ONLINE when no broker has a member of the group online.
pub fn consumer_connection(
    client: &mut AdminClient,
    args: &ConsumerConnectionArgs,
) -> Result<Report, AdminError> {
    let brokers: Vec<String> = match &args.broker {
        Some(addr) => vec![addr.clone()],
        None => group_brokers(client, None, None)?
            .into_iter()
            .map(|(_, addr)| addr)
            .collect(),
    };
    let request = RemotingCommand::request_with_header(
        RequestCode::GET_CONSUMER_CONNECTION_LIST,
        &GetConsumerConnectionListRequestHeader {
            consumer_group: args.group.clone(),
        },
    );
    let body = first_answer(client, &brokers, &request)?;
    let mut text = connection_table(&body["connectionSet"]).render();
    text.push_str("\nBelow is subscription:\n");
    let mut subscriptions = Table::new(&["#Topic", "#SubExpression"]);
    for subscription in body["subscriptionTable"].as_object().into_iter().flatten() {
        subscriptions.row(vec![
            subscription.0.clone(),
            self::text(subscription.1, "subString"),
        ]);
    }
    text.push_str(&subscriptions.render());
    for (label, field) in [
        ("ConsumeType", "consumeType"),
        ("MessageModel", "messageModel"),
        ("ConsumeFromWhere", "consumeFromWhere"),
    ] {
        text.push_str(&format!("\n{label}: {}", self::text(&body, field)));
    }
    text.push('\n');
    Ok(Report { json: body, text })
}

/// `producerConnection`: GET_PRODUCER_CONNECTION_LIST at the masters of the topic's route;
/// `--json` gives the broker's `ProducerConnection` body.
///
/// # Errors
/// The last broker's refusal when none knows the group.
pub fn producer_connection(
    client: &mut AdminClient,
    args: &ProducerConnectionArgs,
) -> Result<Report, AdminError> {
    let brokers: Vec<String> = group_brokers(client, Some(&args.topic), None)?
        .into_iter()
        .map(|(_, addr)| addr)
        .collect();
    let request = RemotingCommand::request_with_header(
        RequestCode::GET_PRODUCER_CONNECTION_LIST,
        &GetProducerConnectionListRequestHeader {
            producer_group: args.group.clone(),
        },
    );
    let body = first_answer(client, &brokers, &request)?;
    let text = connection_table(&body["connectionSet"]).render();
    Ok(Report { json: body, text })
}

fn offset_of(response: &RemotingCommand, addr: &str) -> Result<i64, AdminError> {
    response
        .decode_header::<OffsetResponseHeader>()
        .map(|h| h.offset)
        .map_err(|e| bad_body(addr, e.to_string()))
}

/// `resetOffsetByTime`, as mqadmin does it: first INVOKE_BROKER_TO_RESET_OFFSET on every
/// master of the topic, which resets the group's online consumers too; when a broker
/// answers CONSUMER_NOT_ONLINE (no member online) or does not serve that request, the old
/// path (`resetOffsetByTimestampOld`): per queue, SEARCH_OFFSET_BY_TIMESTAMP
/// (GET_MAX_OFFSET for `now`), then UPDATE_CONSUMER_OFFSET when forced or when that moves
/// the offset back. On the old path, online consumers keep their own offsets and may commit
/// over the reset; stop them first. The JSON output's `mode` says which path ran (`broker`
/// or `commit`).
///
/// # Errors
/// A bad timestamp, or a broker's refusal.
pub fn reset_offset_by_time(
    client: &mut AdminClient,
    args: &ResetOffsetByTimeArgs,
) -> Result<Report, AdminError> {
    // mqadmin sends -1 for `now`, which brokers read as "the max offset".
    let timestamp = match args.timestamp.trim() {
        "now" => -1,
        other => parse_timestamp(other, 0).map_err(AdminError::Usage)?,
    };
    let brokers: Vec<String> = route_masters(&client.topic_route(&args.topic)?)
        .into_iter()
        .map(|(_, addr)| addr)
        .filter(|addr| args.broker.as_ref().is_none_or(|b| b == addr))
        .collect();
    // Brokers before 5.x ignore a queue id in the request and would reset every queue.
    let by_broker = match args.queue {
        Some(_) => None,
        None => reset_by_broker(client, &brokers, args, timestamp)?,
    };
    let (mode, rows, columns) = match by_broker {
        Some(rows) => (
            "broker",
            rows,
            &["brokerName", "queueId", "rollbackOffset"][..],
        ),
        None => (
            "commit",
            reset_by_commit(client, &brokers, args, timestamp)?,
            &[
                "brokerName",
                "queueId",
                "brokerOffset",
                "consumerOffset",
                "timestampOffset",
                "rollbackOffset",
            ][..],
        ),
    };
    let headers: Vec<String> = columns.iter().map(|c| format!("#{c}")).collect();
    let mut table = Table::new(&headers.iter().map(String::as_str).collect::<Vec<_>>());
    for row in &rows {
        table.row(
            columns
                .iter()
                .map(|c| match &row[*c] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .collect(),
        );
    }
    let text = format!(
        "rollback consumer offset by specified consumerGroup[{}], topic[{}], force[{}], \
         timestamp(string)[{}], timestamp(long)[{timestamp}]\n{}",
        args.group,
        args.topic,
        args.force,
        args.timestamp,
        table.render()
    );
    let json = json!({
        "group": args.group,
        "topic": args.topic,
        "timestamp": timestamp,
        "force": args.force,
        "mode": mode,
        "queues": rows,
    });
    Ok(Report { json, text })
}

/// INVOKE_BROKER_TO_RESET_OFFSET on every broker: the new offset of each queue, or `None`
/// when a broker cannot do it (no member online, or the request is not served).
fn reset_by_broker(
    client: &mut AdminClient,
    brokers: &[String],
    args: &ResetOffsetByTimeArgs,
    timestamp: i64,
) -> Result<Option<Vec<Value>>, AdminError> {
    let header = ResetOffsetRequestHeader {
        topic: args.topic.clone(),
        group: args.group.clone(),
        timestamp,
        is_force: args.force,
        queue_id: None,
        offset: None,
    };
    let mut rows = Vec::new();
    for addr in brokers {
        let request = RemotingCommand::request_with_header(
            RequestCode::INVOKE_BROKER_TO_RESET_OFFSET,
            &header,
        );
        let response = client.call(addr, request)?;
        let code = ResponseCode(response.code);
        if code == ResponseCode::CONSUMER_NOT_ONLINE
            || code == ResponseCode::REQUEST_CODE_NOT_SUPPORTED
        {
            return Ok(None);
        }
        let response = check(addr, RequestCode::INVOKE_BROKER_TO_RESET_OFFSET, response)?;
        let entries =
            queue_keyed_map(&response.body, "offsetTable").map_err(|r| bad_body(addr, r))?;
        rows.extend(entries.into_iter().map(|(queue, offset)| {
            json!({
                "brokerName": text(&queue, "brokerName"),
                "queueId": int(&queue, "queueId"),
                "rollbackOffset": offset.as_i64().unwrap_or(0),
            })
        }));
    }
    rows.sort_by_key(|r| (text(r, "brokerName"), int(r, "queueId")));
    Ok(Some(rows))
}

/// The old path: the offsets found by time (or the max offsets for -1), committed per
/// queue. Queues the group never committed in start from their min offset.
fn reset_by_commit(
    client: &mut AdminClient,
    brokers: &[String],
    args: &ResetOffsetByTimeArgs,
    timestamp: i64,
) -> Result<Vec<Value>, AdminError> {
    let mut rows = Vec::new();
    for addr in brokers {
        let (_, mut queues) = consume_stats(client, addr, &args.group, Some(&args.topic))?;
        queues.retain(|q| text(q, "topic") == args.topic);
        if queues.is_empty() {
            queues = never_consumed(client, addr, &args.topic)?;
        }
        for queue in queues {
            let queue_id = i32::try_from(int(&queue, "queueId")).unwrap_or(-1);
            if args.queue.is_some_and(|q| q != queue_id) {
                continue;
            }
            let consumer_offset = int(&queue, "consumerOffset");
            let response = if timestamp == -1 {
                let header = GetMaxOffsetRequestHeader {
                    topic: args.topic.clone(),
                    queue_id,
                    committed: None,
                };
                client.request(addr, RequestCode::GET_MAX_OFFSET, &header)?
            } else {
                let header = SearchOffsetRequestHeader {
                    topic: args.topic.clone(),
                    queue_id,
                    timestamp,
                    boundary_type: None,
                };
                client.request(addr, RequestCode::SEARCH_OFFSET_BY_TIMESTAMP, &header)?
            };
            let timestamp_offset = offset_of(&response, addr)?;
            let mut rollback_offset = consumer_offset;
            if args.force || timestamp_offset <= consumer_offset {
                rollback_offset = timestamp_offset;
                let header = UpdateConsumerOffsetRequestHeader {
                    consumer_group: args.group.clone(),
                    topic: args.topic.clone(),
                    queue_id,
                    commit_offset: timestamp_offset,
                };
                client.request(addr, RequestCode::UPDATE_CONSUMER_OFFSET, &header)?;
            }
            rows.push(json!({
                "brokerName": text(&queue, "brokerName"),
                "queueId": queue_id,
                "brokerOffset": int(&queue, "brokerOffset"),
                "consumerOffset": consumer_offset,
                "timestampOffset": timestamp_offset,
                "rollbackOffset": rollback_offset,
            }));
        }
    }
    rows.sort_by_key(|r| (text(r, "brokerName"), int(r, "queueId")));
    Ok(rows)
}

/// Queues of `topic` at `addr` for a group that never committed there: broker offset the
/// max, consumer offset the min (`resetOffsetByTimestampOld`'s `hasConsumed == false` case).
fn never_consumed(
    client: &mut AdminClient,
    addr: &str,
    topic: &str,
) -> Result<Vec<Value>, AdminError> {
    let header = GetTopicStatsInfoRequestHeader {
        topic: topic.to_owned(),
    };
    let response = client.request(addr, RequestCode::GET_TOPIC_STATS_INFO, &header)?;
    let entries = queue_keyed_map(&response.body, "offsetTable").map_err(|r| bad_body(addr, r))?;
    Ok(entries
        .into_iter()
        .map(|(queue, offsets)| {
            json!({
                "topic": topic,
                "brokerName": text(&queue, "brokerName"),
                "queueId": int(&queue, "queueId"),
                "brokerOffset": int(&offsets, "maxOffset"),
                "consumerOffset": int(&offsets, "minOffset"),
            })
        })
        .collect())
}
