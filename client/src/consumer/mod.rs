//! Consumers: the push consumer ([`PushConsumer`]) and the lite pull consumer
//! ([`LitePullConsumer`]), with what they share: queue allocation, rebalance, process queues
//! and offset stores.
//!
//! A push consumer owns a share of its topics' queues (rebalanced every 20 s and whenever the
//! broker says the group changed), long-polls each owned queue and hands the messages to a
//! listener, committing the smallest unconsumed offset of each queue. A lite pull consumer
//! does the pulling the same way but buffers the messages for the application's `poll()`.
//!
//! ```
//! use ferromq_client::consumer::{ConsumeConcurrentlyStatus, PushConsumer, PushConsumerConfig};
//! use ferromq_client::{ClientConfig, MessageExt};
//! # let namesrv = std::env::var("FERROMQ_NAMESRV").expect("a name server address");
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let config = PushConsumerConfig::new("my_group");
//! let consumer = PushConsumer::new(ClientConfig::new(&namesrv), config);
//! consumer.subscribe("TopicTest", "TagA || TagB")?;
//! consumer.register_message_listener_concurrently(|messages: &[MessageExt]| {
//!     for message in messages {
//!         println!("{}", String::from_utf8_lossy(&message.body));
//!     }
//!     ConsumeConcurrentlyStatus::ConsumeSuccess
//! });
//! consumer.start().await?;
//! // ... the listener runs on the consumer's tasks until:
//! consumer.shutdown().await;
//! # Ok::<(), ferromq_client::ClientError>(())
//! # }).unwrap();
//! ```

pub mod allocate;
pub mod calls;
pub mod offset_file;
pub mod offset_store;
pub mod process_queue;
pub mod pull;
pub mod push;
pub mod rebalance;

pub use allocate::{
    AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle, AllocateStrategy,
};
pub use ferromq_protocol::filter::MessageSelector;
pub use ferromq_protocol::remoting::heartbeat::MessageQueue;
pub use pull::{LitePullConsumer, LitePullConsumerConfig};
pub use push::{PushConsumer, PushConsumerConfig};

pub use ferromq_protocol::names::RETRY_GROUP_TOPIC_PREFIX;

use super::message::MessageExt;
use std::path::PathBuf;

/// The property holding the original topic of a retried message (`RETRY_TOPIC`).
pub const PROPERTY_RETRY_TOPIC: &str = "RETRY_TOPIC";

/// The retry topic of a group.
#[must_use]
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

/// How a group shares messages (`MessageModel`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MessageModel {
    /// Each message goes to one member of the group (`CLUSTERING`).
    #[default]
    Clustering,
    /// Each message goes to every member (`BROADCASTING`).
    Broadcasting,
}

impl MessageModel {
    /// Java's name.
    #[must_use]
    pub fn java_name(self) -> &'static str {
        match self {
            MessageModel::Clustering => "CLUSTERING",
            MessageModel::Broadcasting => "BROADCASTING",
        }
    }
}

/// Where a consumer starts on a queue its group never committed (`ConsumeFromWhere`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConsumeFromWhere {
    /// The queue's end (`CONSUME_FROM_LAST_OFFSET`). Note that a broker answers offset 0 for
    /// a queue that still begins at 0, as Java's does, so a new group reads such a queue
    /// from its start.
    #[default]
    LastOffset,
    /// The queue's start (`CONSUME_FROM_FIRST_OFFSET`).
    FirstOffset,
    /// The first message stored at or after this time, ms since the epoch
    /// (`CONSUME_FROM_TIMESTAMP`; Java's `consumeTimestamp`).
    Timestamp(i64),
}

impl ConsumeFromWhere {
    /// Java's name.
    #[must_use]
    pub fn java_name(self) -> &'static str {
        match self {
            ConsumeFromWhere::LastOffset => "CONSUME_FROM_LAST_OFFSET",
            ConsumeFromWhere::FirstOffset => "CONSUME_FROM_FIRST_OFFSET",
            ConsumeFromWhere::Timestamp(_) => "CONSUME_FROM_TIMESTAMP",
        }
    }
}

/// Where to start on a queue, decided from the committed offset
/// (`RebalancePushImpl.computePullFromWhere`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartFrom {
    /// This offset.
    Offset(i64),
    /// The queue's max offset (ask the broker).
    MaxOffset,
    /// The first offset stored at or after this time (ask the broker).
    Timestamp(i64),
}

/// The start decision: `committed` is the stored offset, or -1 when the group has none.
#[must_use]
pub fn start_from(from: ConsumeFromWhere, topic: &str, committed: i64) -> StartFrom {
    if committed >= 0 {
        return StartFrom::Offset(committed);
    }
    let retry = topic.starts_with(RETRY_GROUP_TOPIC_PREFIX);
    match from {
        ConsumeFromWhere::LastOffset if retry => StartFrom::Offset(0),
        ConsumeFromWhere::LastOffset => StartFrom::MaxOffset,
        ConsumeFromWhere::FirstOffset => StartFrom::Offset(0),
        ConsumeFromWhere::Timestamp(_) if retry => StartFrom::MaxOffset,
        ConsumeFromWhere::Timestamp(ms) => StartFrom::Timestamp(ms),
    }
}

/// What a concurrent listener says about a batch (`ConsumeConcurrentlyStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeConcurrentlyStatus {
    /// Consumed (`CONSUME_SUCCESS`).
    ConsumeSuccess,
    /// Deliver the batch again later (`RECONSUME_LATER`).
    ReconsumeLater,
}

/// What an orderly listener says about a batch (`ConsumeOrderlyStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeOrderlyStatus {
    /// Consumed (`SUCCESS`).
    Success,
    /// Stop this queue for `suspend_current_queue_time`, then deliver the batch again
    /// (`SUSPEND_CURRENT_QUEUE_A_MOMENT`).
    SuspendCurrentQueueAMoment,
}

/// A listener consuming batches of any queue in parallel (`MessageListenerConcurrently`).
///
/// It runs on a blocking-capable thread, so it may block; at most `consume_thread_max` run
/// at once. Any `Fn(&[MessageExt]) -> ConsumeConcurrentlyStatus` is one.
pub trait MessageListenerConcurrently: Send + Sync + 'static {
    /// Consumes one batch (at most `consume_message_batch_max_size` messages of one queue).
    fn consume_message(&self, messages: &[MessageExt]) -> ConsumeConcurrentlyStatus;
}

impl<F> MessageListenerConcurrently for F
where
    F: Fn(&[MessageExt]) -> ConsumeConcurrentlyStatus + Send + Sync + 'static,
{
    fn consume_message(&self, messages: &[MessageExt]) -> ConsumeConcurrentlyStatus {
        self(messages)
    }
}

/// A listener consuming each queue strictly in order, one batch at a time
/// (`MessageListenerOrderly`). Any `Fn(&[MessageExt]) -> ConsumeOrderlyStatus` is one.
pub trait MessageListenerOrderly: Send + Sync + 'static {
    /// Consumes one batch of one queue; the next batch of that queue waits for the answer.
    fn consume_message(&self, messages: &[MessageExt]) -> ConsumeOrderlyStatus;
}

impl<F> MessageListenerOrderly for F
where
    F: Fn(&[MessageExt]) -> ConsumeOrderlyStatus + Send + Sync + 'static,
{
    fn consume_message(&self, messages: &[MessageExt]) -> ConsumeOrderlyStatus {
        self(messages)
    }
}

/// Java's default root of broadcasting offset files: `~/.rocketmq_offsets`
/// (`rocketmq.client.localOffsetStoreDir`).
#[must_use]
pub fn default_offsets_root() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".rocketmq_offsets")
}

/// Java's `resetRetryAndNamespace`: a message consumed from the group's retry topic gets its
/// original topic back from the `RETRY_TOPIC` property.
pub fn restore_retry_topic(message: &mut MessageExt, group: &str) {
    if message.topic == retry_topic(group) {
        if let Some(topic) = message.properties.get(PROPERTY_RETRY_TOPIC) {
            message.topic = topic.clone();
        }
    }
}

/// The heartbeat entry of a consumer group (`ConsumerData`): `consume_type` is
/// `CONSUME_PASSIVELY` for push consumers, `CONSUME_ACTIVELY` for pull consumers.
pub(crate) fn consumer_data(
    group: &str,
    consume_type: &str,
    message_model: MessageModel,
    consume_from_where: ConsumeFromWhere,
    subscriptions: &std::collections::BTreeMap<String, crate::SubscriptionData>,
) -> crate::ConsumerData {
    crate::ConsumerData {
        group_name: group.to_owned(),
        consume_type: Some(consume_type.to_owned()),
        message_model: Some(message_model.java_name().to_owned()),
        consume_from_where: Some(consume_from_where.java_name().to_owned()),
        subscription_data_set: subscriptions.values().cloned().collect(),
        unit_mode: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_offsets_follow_java() {
        use ConsumeFromWhere::*;
        assert_eq!(start_from(LastOffset, "T", 7), StartFrom::Offset(7));
        assert_eq!(start_from(LastOffset, "T", -1), StartFrom::MaxOffset);
        assert_eq!(start_from(LastOffset, "%RETRY%g", -1), StartFrom::Offset(0));
        assert_eq!(start_from(FirstOffset, "T", -1), StartFrom::Offset(0));
        assert_eq!(start_from(Timestamp(5), "T", -1), StartFrom::Timestamp(5));
        assert_eq!(
            start_from(Timestamp(5), "%RETRY%g", -1),
            StartFrom::MaxOffset
        );
        assert_eq!(start_from(Timestamp(5), "T", 0), StartFrom::Offset(0));
    }
}
