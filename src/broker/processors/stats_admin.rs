//! The statistics requests of `AdminBrokerProcessor`: VIEW_BROKER_STATS_DATA (`mqadmin
//! statsAll`, the admin API's `viewBrokerStatsData`) and GET_BROKER_CONSUME_STATS (`mqadmin
//! brokerConsumeStats`, `fetchConsumeStatsInBroker`).
//!
//! The figures come from the broker's per-topic and per-group items
//! ([`crate::broker::stats::items`]) and from the queues and committed offsets.

use super::{last_store_time, queue_keyed_map, Context, DISPATCH_WAIT_MAX};
use crate::broker::reply::{error, with_body, Response};
use crate::broker::state::BrokerState;
use crate::broker::stats::items::{StatsName, WindowFigures};
use crate::remoting::headers::{GetConsumeStatsInBrokerHeader, ViewBrokerStatsDataRequestHeader};
use crate::remoting::heartbeat::MessageQueue;
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use crate::store::reader::StoreReader;

/// VIEW_BROKER_STATS_DATA and GET_BROKER_CONSUME_STATS.
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    match request.request_code() {
        RequestCode::VIEW_BROKER_STATS_DATA => view_broker_stats_data(&ctx.state, request),
        _ => {
            ctx.reader.dispatched_to_committed(DISPATCH_WAIT_MAX).await;
            broker_consume_stats(&ctx.state, &ctx.reader, request).await
        }
    }
}

/// VIEW_BROKER_STATS_DATA (315): one item's last minute, hour and day (`BrokerStatsData`:
/// `statsMinute`, `statsHour`, `statsDay`, each `{sum, tps, avgpt}`). SYSTEM_ERROR "The
/// stats <name> <key> not exist" for a name ferromq does not keep or a key nothing counted,
/// as Java for an item it has not made.
#[must_use]
pub fn view_broker_stats_data(state: &BrokerState, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<ViewBrokerStatsDataRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let figures = StatsName::parse(&header.stats_name)
        .and_then(|name| state.stats.items.figures(name, &header.stats_key));
    let Some(figures) = figures else {
        let remark = format!(
            "The stats <{}> <{}> not exist",
            header.stats_name, header.stats_key
        );
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    };
    let window =
        |w: WindowFigures| serde_json::json!({ "avgpt": w.avgpt, "sum": w.sum, "tps": w.tps });
    let body = serde_json::json!({
        "statsDay": window(figures.day),
        "statsHour": window(figures.hour),
        "statsMinute": window(figures.minute),
    });
    with_body(request, body.to_string())
}

/// GET_BROKER_CONSUME_STATS (317): for every subscription group, a `ConsumeStats` per topic
/// it committed offsets in (each writable queue's max and committed offsets, the group's
/// `consumeTps`), as Java's `fetchAllConsumeStatsInBroker`: with `isOrder`, ordered topics
/// only; an online group's topics only those it subscribes to. `totalDiff` adds up every
/// queue's max offset minus committed offset.
pub async fn broker_consume_stats(
    state: &BrokerState,
    reader: &StoreReader,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<GetConsumeStatsInBrokerHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let only_order = header.is_order.unwrap_or(false);
    let (_, groups) = state.groups();
    let mut list = Vec::with_capacity(groups.len());
    let mut total_diff: i64 = 0;
    for (group, _) in groups {
        let online = state.subscription_count(&group) > 0;
        let mut stats_of_group = Vec::new();
        for name in state.topics_of_group(&group) {
            let Some(topic) = state.topic(&name) else {
                continue;
            };
            if only_order && !topic.order {
                continue;
            }
            if online && state.subscription(&group, &name).is_none() {
                continue;
            }
            let mut entries = Vec::new();
            for queue_id in 0..topic.write_queue_nums {
                let broker_offset = reader.max_offset_in_queue(&name, queue_id).max(0);
                let consumer_offset = state
                    .committed_offset(&group, &name, queue_id)
                    .unwrap_or(0)
                    .max(0);
                total_diff += broker_offset - consumer_offset;
                let last = last_store_time(reader, &name, queue_id, consumer_offset).await;
                let value = serde_json::json!({
                    "brokerOffset": broker_offset,
                    "consumerOffset": consumer_offset,
                    "lastTimestamp": last,
                });
                let queue = MessageQueue {
                    topic: name.clone(),
                    broker_name: state.config.broker_name.clone(),
                    queue_id,
                };
                entries.push((queue, value));
            }
            let tps = state.stats.items.group_get_tps(&name, &group);
            stats_of_group.push(format!(
                r#"{{"consumeTps":{},"offsetTable":{}}}"#,
                crate::broker::stats::java_double(tps),
                queue_keyed_map(&entries)
            ));
        }
        let key = serde_json::Value::String(group).to_string();
        list.push(format!("{{{key}:[{}]}}", stats_of_group.join(",")));
    }
    let broker_addr = format!("{}:{}", state.config.broker_ip1, state.listen_port());
    let body = format!(
        r#"{{"brokerAddr":{},"consumeStatsList":[{}],"totalDiff":{total_diff}}}"#,
        serde_json::Value::String(broker_addr),
        list.join(",")
    );
    with_body(request, body)
}
