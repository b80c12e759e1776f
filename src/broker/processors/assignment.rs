//! Server-side load balancing (Java 5.x's `QueryAssignmentProcessor`): QUERY_ASSIGNMENT
//! (400) answers which queues of a topic a consumer takes and how, PULL or POP;
//! SET_MESSAGE_REQUEST_MODE (401, `mqadmin setConsumeMode`) sets a group's mode on a topic;
//! GET_ALL_MESSAGE_REQUEST_MODE (402) answers the whole table.
//!
//! The queues are the topic's readable queues of the whole cluster, from the name servers
//! (see [`crate::broker::state::routes`]). In POP mode a consumer is given each broker's
//! queue -1 (pop any queue there) unless `popShareQueueNum` asks that consumers share
//! fewer queues, as Java's `allocate4Pop`.

use super::Context;
use crate::broker::reply::{error, Response};
use crate::broker::state::request_modes::{RequestMode, MODE_POP, MODE_PULL};
use crate::protocol::names::{PERM_READ, RETRY_GROUP_TOPIC_PREFIX};
use crate::remoting::body::TopicRouteData;
use crate::remoting::heartbeat::MessageQueue;
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use ferromq_client::consumer::{
    AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle, AllocateStrategy,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE and GET_ALL_MESSAGE_REQUEST_MODE.
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    match request.request_code() {
        RequestCode::QUERY_ASSIGNMENT => query_assignment(ctx, request).await,
        RequestCode::SET_MESSAGE_REQUEST_MODE => set_mode(ctx, request).await,
        _ => {
            let mut response = RemotingCommand::success_to(request);
            response.body = ctx.state.request_modes.to_json().into_bytes();
            Some(response)
        }
    }
}

/// The body of QUERY_ASSIGNMENT (`QueryAssignmentRequestBody`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AssignmentQuery {
    #[serde(default)]
    topic: String,
    #[serde(default)]
    consumer_group: String,
    #[serde(default)]
    client_id: String,
    #[serde(default)]
    strategy_name: String,
    /// `CLUSTERING` or `BROADCASTING`.
    #[serde(default)]
    message_model: String,
}

/// One queue of the answer (`MessageQueueAssignment`), fields in fastjson's order.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
struct Assignment {
    message_queue: QueueName,
    mode: &'static str,
}

/// `MessageQueue` as fastjson writes it: fields sorted.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
struct QueueName {
    broker_name: String,
    queue_id: i32,
    topic: String,
}

/// The answer's body (`QueryAssignmentResponseBody`); no list when the broker could not
/// tell (the client keeps what it had).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Assignments {
    #[serde(skip_serializing_if = "Option::is_none")]
    message_queue_assignments: Option<Vec<Assignment>>,
}

async fn query_assignment(ctx: &Context, request: &RemotingCommand) -> Response {
    let Ok(query) = serde_json::from_slice::<AssignmentQuery>(&request.body) else {
        let remark = "the body is no QueryAssignmentRequestBody";
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    };
    let state = &ctx.state;
    let runtime = state.runtime();
    let mode = state
        .request_modes
        .get(&query.topic, &query.consumer_group)
        .unwrap_or_else(|| {
            // A retry topic is always pulled.
            let pop = runtime.pop.default_message_request_mode_pop
                && !query.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX);
            RequestMode {
                consumer_group: query.consumer_group.clone(),
                mode: if pop { MODE_POP } else { MODE_PULL }.to_owned(),
                pop_share_queue_num: if pop {
                    runtime.pop.default_pop_share_queue_num
                } else {
                    0
                },
                topic: query.topic.clone(),
            }
        });
    let route = state.routes.route(&query.topic).await;
    let queues = route.map(|route| readable_queues(&query.topic, &route));
    let assigned = queues.and_then(|all| {
        if query.message_model == "BROADCASTING" {
            return Some(all);
        }
        if !runtime.pop.server_load_balancer_enable {
            return Some(all);
        }
        let members = state.consumer_ids(&query.consumer_group);
        if members.is_empty() {
            tracing::warn!(
                group = query.consumer_group,
                topic = query.topic,
                "QUERY_ASSIGNMENT: the group has no members"
            );
            return None;
        }
        let strategy = strategy_named(&query.strategy_name)?;
        Some(if mode.is_pop() {
            allocate_for_pop(strategy, &query, &all, &members, mode.pop_share_queue_num)
        } else {
            strategy.allocate(&query.consumer_group, &query.client_id, &all, &members)
        })
    });
    let mode_name = if mode.is_pop() { MODE_POP } else { MODE_PULL };
    let body = Assignments {
        message_queue_assignments: assigned.map(|queues| {
            let unique: BTreeSet<Assignment> = queues
                .into_iter()
                .map(|queue| Assignment {
                    message_queue: QueueName {
                        broker_name: queue.broker_name,
                        queue_id: queue.queue_id,
                        topic: queue.topic,
                    },
                    mode: mode_name,
                })
                .collect();
            unique.into_iter().collect()
        }),
    };
    let mut response = RemotingCommand::success_to(request);
    response.body = serde_json::to_vec(&body).unwrap_or_default();
    Some(response)
}

/// The readable queues of `topic` in its route, sorted as Java sorts `MessageQueue`s
/// (`topicRouteData2TopicSubscribeInfo`).
fn readable_queues(topic: &str, route: &TopicRouteData) -> Vec<MessageQueue> {
    let mut queues: Vec<MessageQueue> = route
        .queue_datas
        .iter()
        .filter(|data| data.perm & PERM_READ != 0)
        .flat_map(|data| {
            (0..data.read_queue_nums).map(|id| MessageQueue::new(topic, &data.broker_name, id))
        })
        .collect();
    queues.sort();
    queues
}

/// The strategy a client names (`AVG`, `AVG_BY_CIRCLE`); `None` for another (Java answers
/// no assignment then).
fn strategy_named(name: &str) -> Option<&'static dyn AllocateStrategy> {
    static AVG: AllocateMessageQueueAveragely = AllocateMessageQueueAveragely;
    static BY_CIRCLE: AllocateMessageQueueAveragelyByCircle = AllocateMessageQueueAveragelyByCircle;
    let strategies: [&'static dyn AllocateStrategy; 2] = [&AVG, &BY_CIRCLE];
    let found = strategies.into_iter().find(|s| s.name() == name);
    if found.is_none() {
        tracing::warn!(strategy = name, "QUERY_ASSIGNMENT: unknown strategy");
    }
    found
}

/// Java's `allocate4Pop`: every queue as each broker's queue -1 when consumers share all
/// (`share` ≤ 0, or at least the members but one); else the member's own queues and those of
/// the `share` members after it, or, with more members than queues, one queue each.
fn allocate_for_pop(
    strategy: &dyn AllocateStrategy,
    query: &AssignmentQuery,
    all: &[MessageQueue],
    members: &[String],
    share: i32,
) -> Vec<MessageQueue> {
    let everyone = usize::try_from(share)
        .ok()
        .filter(|&share| share > 0 && share < members.len().saturating_sub(1));
    let Some(share) = everyone else {
        return all
            .iter()
            .map(|queue| MessageQueue::new(&queue.topic, &queue.broker_name, -1))
            .collect();
    };
    let group = &query.consumer_group;
    if members.len() > all.len() {
        return members
            .iter()
            .position(|member| *member == query.client_id)
            .and_then(|index| all.get(index % all.len()))
            .cloned()
            .into_iter()
            .collect();
    }
    let mut queues = strategy.allocate(group, &query.client_id, all, members);
    if let Some(mut index) = members.iter().position(|member| *member == query.client_id) {
        for _ in 0..share {
            index = (index + 1) % members.len();
            queues.extend(strategy.allocate(group, &members[index], all, members));
        }
    }
    queues
}

/// SET_MESSAGE_REQUEST_MODE: Java's checks (not a retry topic, the topic exists, the group
/// exists or may be made), then the mode stored and persisted.
async fn set_mode(ctx: &Context, request: &RemotingCommand) -> Response {
    let Ok(mode) = serde_json::from_slice::<RequestMode>(&request.body) else {
        let remark = "the body is no SetMessageRequestModeRequestBody";
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    };
    if mode.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        let remark = "retry topic is not allowed to set mode";
        return error(request, ResponseCode::NO_PERMISSION, remark);
    }
    if ctx.state.topic(&mode.topic).is_none() {
        let remark = format!("topic[{}] not exist", mode.topic);
        return error(request, ResponseCode::TOPIC_NOT_EXIST, remark);
    }
    if ctx
        .state
        .group_or_create(&mode.consumer_group)
        .await
        .is_none()
    {
        let remark = "subscription group does not exist";
        return error(request, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, remark);
    }
    if mode.mode != MODE_POP && mode.mode != MODE_PULL {
        let remark = format!("no such message request mode: {}", mode.mode);
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    ctx.state.request_modes.set(mode).await;
    Some(RemotingCommand::success_to(request))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(brokers: &[&str], per_broker: i32) -> Vec<MessageQueue> {
        let mut all: Vec<MessageQueue> = brokers
            .iter()
            .flat_map(|b| (0..per_broker).map(move |id| MessageQueue::new("T", *b, id)))
            .collect();
        all.sort();
        all
    }

    fn query(client: &str) -> AssignmentQuery {
        AssignmentQuery {
            topic: "T".to_owned(),
            consumer_group: "G".to_owned(),
            client_id: client.to_owned(),
            strategy_name: "AVG".to_owned(),
            message_model: "CLUSTERING".to_owned(),
        }
    }

    #[test]
    fn pop_mode_shares_every_queue_as_queue_minus_one_per_broker() {
        let all = queues(&["a", "b"], 4);
        let members = vec!["c1".to_owned(), "c2".to_owned(), "c3".to_owned()];
        let avg = strategy_named("AVG").unwrap();
        let popped = allocate_for_pop(avg, &query("c2"), &all, &members, -1);
        let unique: BTreeSet<_> = popped
            .iter()
            .map(|q| (&q.broker_name, q.queue_id))
            .collect();
        assert_eq!(unique.len(), 2);
        assert!(unique.iter().all(|(_, id)| *id == -1));
        // One following member shared: c1 gets its own queues and c2's.
        let shared = allocate_for_pop(avg, &query("c1"), &all, &members, 1);
        let own = avg.allocate("G", "c1", &all, &members);
        let next = avg.allocate("G", "c2", &all, &members);
        assert_eq!(shared, [own, next].concat());
        // More members than queues: one queue each, by position.
        let few = queues(&["a"], 2);
        let one = allocate_for_pop(avg, &query("c3"), &few, &members, 1);
        assert_eq!(one, vec![few[0].clone()]);
    }

    #[test]
    fn the_answer_is_written_as_fastjson_writes_it() {
        let body = Assignments {
            message_queue_assignments: Some(vec![Assignment {
                message_queue: QueueName {
                    broker_name: "broker-a".to_owned(),
                    queue_id: -1,
                    topic: "T".to_owned(),
                },
                mode: MODE_POP,
            }]),
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            concat!(
                r#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"broker-a","#,
                r#""queueId":-1,"topic":"T"},"mode":"POP"}]}"#
            )
        );
        let none = Assignments {
            message_queue_assignments: None,
        };
        assert_eq!(serde_json::to_string(&none).unwrap(), "{}");
        assert!(strategy_named("CONSISTENT_HASH").is_none());
    }
}
