//! The store's cleaning on request (`AdminBrokerProcessor`): DELETE_EXPIRED_COMMITLOG
//! (mqadmin `deleteExpiredCommitLog`), CLEAN_EXPIRED_CONSUMEQUEUE (`cleanExpiredCQ`) and
//! CLEAN_UNUSED_TOPIC (`cleanUnusedTopic`). Each answers SUCCESS, as Java's, once its work is
//! done or (the CommitLog deletion) scheduled.

use super::Context;
use crate::broker::reply::Response;
use crate::broker::transaction::OP_TOPIC;
use crate::remoting::{RemotingCommand, RequestCode};
use std::collections::BTreeMap;

/// Where delayed messages wait (`TopicValidator.RMQ_SYS_SCHEDULE_TOPIC`): never cleaned.
const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";

/// The requests of the module header.
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    match request.request_code() {
        RequestCode::DELETE_EXPIRED_COMMITLOG => {
            // `executeDeleteFilesManually`: the next retention passes delete expired
            // segments whatever `deleteWhen` says.
            tracing::warn!("deleting expired CommitLog segments on request");
            ctx.store.shared().delete_files_manually();
        }
        RequestCode::CLEAN_EXPIRED_CONSUMEQUEUE => clean_expired_queues(ctx).await,
        _ => clean_unused_topics(ctx).await,
    }
    Some(RemotingCommand::success_to(request))
}

/// CLEAN_EXPIRED_CONSUMEQUEUE (`cleanExpiredConsumerQueue`): the queues of a topic whose
/// every message the CommitLog no longer holds (their last unit points below its first
/// offset) are dropped, so that the topic starts again at offset 0.
///
/// Java drops such queues one by one; ferromq drops a topic's queues together, only when
/// all of its non-empty queues are expired (a topic with some live queue keeps them all, its
/// expired ones answer as empty). Delayed messages' queues are never dropped.
async fn clean_expired_queues(ctx: &Context) {
    let min = i64::try_from(ctx.store.shared().min_physical_offset()).unwrap_or(i64::MAX);
    let mut topics: BTreeMap<String, bool> = BTreeMap::new();
    for ((topic, queue_id), state) in ctx.store.shared().queues() {
        if topic == SCHEDULE_TOPIC {
            continue;
        }
        let last = state.max_offset() - 1;
        if last < 0 {
            // Made just now: Java leaves it.
            continue;
        }
        let expired = match ctx.reader.unit_at(&topic, queue_id, last).await {
            Ok(Some(unit)) => unit.physical_offset < min,
            // Below the queue's own start: nothing readable is left in it.
            Ok(None) => true,
            Err(error) => {
                tracing::warn!(topic, queue_id, %error, "cannot read the queue's last unit");
                false
            }
        };
        let all = topics.entry(topic).or_insert(true);
        *all &= expired;
    }
    for (topic, expired) in topics {
        if !expired {
            continue;
        }
        tracing::info!(
            topic,
            min,
            "cleanExpiredConsumerQueue: topic's queues dropped"
        );
        if let Err(error) = ctx.store.drop_topic(&topic).await {
            tracing::warn!(topic, %error, "the expired queues stay");
        }
    }
}

/// CLEAN_UNUSED_TOPIC (`cleanUnusedTopic`): the queues of every topic the broker has no
/// config for are dropped, but delayed messages' and transaction ops'.
async fn clean_unused_topics(ctx: &Context) {
    let mut unused: Vec<String> = ctx
        .store
        .shared()
        .queues()
        .into_iter()
        .map(|((topic, _), _)| topic)
        .filter(|topic| topic != SCHEDULE_TOPIC && topic != OP_TOPIC)
        .filter(|topic| ctx.state.topic(topic).is_none())
        .collect();
    unused.dedup();
    for topic in unused {
        tracing::info!(
            topic,
            "cleanUnusedTopic: queues of a topic without config dropped"
        );
        if let Err(error) = ctx.store.drop_topic(&topic).await {
            tracing::warn!(topic, %error, "the unused topic's queues stay");
        }
    }
}
