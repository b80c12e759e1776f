//! The push consumer (`DefaultMQPushConsumer`): rebalance, one long-polling pull task per
//! owned queue, and the concurrent or orderly consume path.
//!
//! Tasks (all tokio, all stopped by one cancellation token at shutdown):
//! - rebalance: at start, every `rebalance_interval` and on NOTIFY_CONSUMER_IDS_CHANGED; the
//!   only task that adds or removes owned queues, so rebalances never race each other;
//! - one pull loop per owned queue (`PullMessageService` + `pullMessage`), flow-controlled by
//!   the queue's process queue;
//! - consume: concurrent batches run on blocking threads, at most `consume_thread_max` at a
//!   time; orderly mode runs one consume loop per queue so a queue never has two batches out;
//! - offsets persisted every `persist_consumer_offset_interval`; queue locks renewed every
//!   `lock_interval` in orderly clustering.
//!
//! Invariant: a queue's committed offset only ever names its smallest unconsumed message, and a
//! queue that stopped being ours (dropped) never commits again.

use super::allocate::{AllocateMessageQueueAveragely, AllocateStrategy};
use super::calls;
use super::offset_file::offsets_path;
use super::offset_store::OffsetStore;
use super::process_queue::{ProcessQueue, Queued};
use super::rebalance::{allocate_topic, diff};
use super::{
    default_offsets_root, restore_retry_topic, retry_topic, ConsumeConcurrentlyStatus,
    ConsumeFromWhere, ConsumeOrderlyStatus, MessageListenerConcurrently, MessageListenerOrderly,
    MessageModel, MessageQueue, RETRY_GROUP_TOPIC_PREFIX,
};
use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::instance::lock;
use crate::instance::{ClientInstance, ConsumerInner};
use crate::instance::{PullResult, PullStatus};
use crate::message::MessageExt;
use ferromq_protocol::filter::MessageSelector;
use ferromq_protocol::remoting::headers::PullMessageRequestHeader;
use ferromq_protocol::remoting::heartbeat::{ConsumerData, SubscriptionData};
use futures::future::BoxFuture;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

/// `PullSysFlag` bits.
pub mod pull_sys_flag {
    /// Also commit the `commitOffset` header value.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// Long polling: hold the pull until a message arrives or the suspend time ends.
    pub const SUSPEND: i32 = 0x2;
    /// Filter with the `subscription` header instead of the heartbeat subscription.
    pub const SUBSCRIPTION: i32 = 0x4;
    /// Class filter (unused).
    pub const CLASS_FILTER: i32 = 0x8;
    /// Lite pull.
    pub const LITE_PULL_MESSAGE: i32 = 0x10;

    /// `buildSysFlag`.
    #[must_use]
    pub fn build(commit_offset: bool, suspend: bool, subscription: bool, lite: bool) -> i32 {
        let mut flag = 0;
        if commit_offset {
            flag |= COMMIT_OFFSET;
        }
        if suspend {
            flag |= SUSPEND;
        }
        if subscription {
            flag |= SUBSCRIPTION;
        }
        if lite {
            flag |= LITE_PULL_MESSAGE;
        }
        flag
    }
}

/// Settings of a push consumer, with Java's defaults (`DefaultMQPushConsumer` fields).
#[derive(Clone, Debug)]
pub struct PushConsumerConfig {
    /// Consumer group (`consumerGroup`).
    pub group: String,
    /// `messageModel`.
    pub message_model: MessageModel,
    /// `consumeFromWhere`.
    pub consume_from_where: ConsumeFromWhere,
    /// `allocateMessageQueueStrategy` (average by default).
    pub allocate_strategy: Arc<dyn AllocateStrategy>,
    /// Most listener calls at once (`consumeThreadMax`, 20).
    pub consume_thread_max: usize,
    /// Pause pulling a queue holding this many messages (`pullThresholdForQueue`, 1000).
    pub pull_threshold_for_queue: usize,
    /// Pause pulling a queue holding this many MiB (`pullThresholdSizeForQueue`, 100).
    pub pull_threshold_size_for_queue_mib: u64,
    /// Messages per pull (`pullBatchSize`, 32).
    pub pull_batch_size: i32,
    /// Messages per listener call (`consumeMessageBatchMaxSize`, 1).
    pub consume_message_batch_max_size: usize,
    /// Concurrent mode: pause pulling when a queue's offsets span more
    /// (`consumeConcurrentlyMaxSpan`, 2000).
    pub consume_concurrently_max_span: i64,
    /// Rebalance period (`rocketmq.client.rebalance.waitInterval`, 20 s).
    pub rebalance_interval: Duration,
    /// How long the broker holds a pull with nothing new (`brokerSuspendMaxTimeMillis`, 15 s).
    pub broker_suspend_max_time: Duration,
    /// Timeout of a long-polling pull (`consumerTimeoutMillisWhenSuspend`, 30 s).
    pub consumer_timeout_when_suspend: Duration,
    /// Pause after flow control kicks in (`PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL`, 50 ms).
    pub pull_time_delay_when_flow_control: Duration,
    /// Pause after a failed pull (`pullTimeDelayMillsWhenException`, 3 s).
    pub pull_time_delay_when_exception: Duration,
    /// Orderly: pause of a suspended queue (`suspendCurrentQueueTimeMillis`, 1 s).
    pub suspend_current_queue_time: Duration,
    /// Concurrent: a failed batch that could not be sent back is consumed again after this
    /// (`submitConsumeRequestLater`, 5 s).
    pub consume_retry_delay: Duration,
    /// Sent with a failed message; after this many the broker dead-letters it
    /// (`maxReconsumeTimes`, 16).
    pub max_reconsume_times: i32,
    /// Orderly clustering: how often the queue locks are renewed (`REBALANCE_LOCK_INTERVAL`,
    /// 20 s).
    pub lock_interval: Duration,
    /// Orderly clustering: how long a queue lock is trusted without renewal
    /// (`rocketmq.client.rebalance.lockMaxLiveTime`, 30 s); keep it below the broker's
    /// `rebalanceLockMaxLiveTime` (60 s) so a member stops before another may take the queue.
    pub lock_max_live_time: Duration,
    /// Root of broadcasting offset files (`rocketmq.client.localOffsetStoreDir`,
    /// `~/.rocketmq_offsets`).
    pub offsets_root: PathBuf,
    /// Send the subscription with every pull (`postSubscriptionWhenPull`, false).
    pub post_subscription_when_pull: bool,
    /// At shutdown, wait this long for listener calls in flight
    /// (`awaitTerminationMillisWhenShutdown`, 0).
    pub await_termination_when_shutdown: Duration,
}

impl PushConsumerConfig {
    /// Java's defaults for `group`.
    #[must_use]
    pub fn new(group: &str) -> PushConsumerConfig {
        PushConsumerConfig {
            group: group.to_owned(),
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::LastOffset,
            allocate_strategy: Arc::new(AllocateMessageQueueAveragely),
            consume_thread_max: 20,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue_mib: 100,
            pull_batch_size: 32,
            consume_message_batch_max_size: 1,
            consume_concurrently_max_span: 2000,
            rebalance_interval: Duration::from_secs(20),
            broker_suspend_max_time: Duration::from_secs(15),
            consumer_timeout_when_suspend: Duration::from_secs(30),
            pull_time_delay_when_flow_control: Duration::from_millis(50),
            pull_time_delay_when_exception: Duration::from_secs(3),
            suspend_current_queue_time: Duration::from_secs(1),
            consume_retry_delay: Duration::from_secs(5),
            max_reconsume_times: 16,
            lock_interval: Duration::from_secs(20),
            lock_max_live_time: Duration::from_secs(30),
            offsets_root: default_offsets_root(),
            post_subscription_when_pull: false,
            await_termination_when_shutdown: Duration::ZERO,
        }
    }
}

#[derive(Clone)]
enum Listener {
    Concurrently(Arc<dyn MessageListenerConcurrently>),
    Orderly(Arc<dyn MessageListenerOrderly>),
}

impl Queued for MessageExt {
    fn queue_offset(&self) -> i64 {
        self.queue_offset
    }
    fn body_len(&self) -> usize {
        self.body.len()
    }
}

/// One owned queue.
#[derive(Debug)]
struct QueueState {
    mq: MessageQueue,
    pq: Mutex<ProcessQueue<MessageExt>>,
    cancel: CancellationToken,
    /// Orderly: new messages arrived.
    wake: Notify,
    /// Orderly: held while a batch of this queue is with the listener (`consumeLock`).
    consume_lock: tokio::sync::Mutex<()>,
}

impl QueueState {
    fn pq(&self) -> std::sync::MutexGuard<'_, ProcessQueue<MessageExt>> {
        lock(&self.pq)
    }

    fn dropped(&self) -> bool {
        self.pq().dropped
    }
}

/// New offsets of queues, as a broker pushes them (`ResetOffsetBody.offsetTable`).
type OffsetTable = Vec<(MessageQueue, i64)>;

/// How long a queue's pull waits while the consumer is suspended
/// (`PULL_TIME_DELAY_MILLS_WHEN_SUSPEND`).
const PULL_DELAY_WHEN_SUSPENDED: Duration = Duration::from_secs(1);

struct Inner {
    config: PushConsumerConfig,
    instance: Arc<ClientInstance>,
    owns_instance: bool,
    subscriptions: Mutex<BTreeMap<String, SubscriptionData>>,
    listener: Mutex<Option<Listener>>,
    queues: Mutex<BTreeMap<MessageQueue, Arc<QueueState>>>,
    offsets: OffsetStore,
    rebalance_now: Notify,
    /// Offset tables pushed by brokers (RESET_CONSUMER_CLIENT_OFFSET), by topic, applied by
    /// the rebalance loop before its next rebalance.
    resets: Mutex<Vec<(String, OffsetTable)>>,
    /// Orderly clustering: serializes LOCK_BATCH_MQ renewals with UNLOCK_BATCH_MQ of removed
    /// queues, so a renewal sent before a removal never lands after its unlock and re-locks a
    /// queue that already belongs to another member.
    lock_ops: tokio::sync::Mutex<()>,
    permits: Arc<Semaphore>,
    cancel: CancellationToken,
    started: AtomicBool,
    /// No queue is pulled while set (`suspend`).
    suspended: AtomicBool,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumer")
            .field("group", &self.config.group)
            .field("client_id", &self.instance.client_id())
            .finish_non_exhaustive()
    }
}

/// A consumer that pulls in the background and pushes messages to a listener
/// (`DefaultMQPushConsumer`).
#[doc(alias = "DefaultMQPushConsumer")]
#[doc(alias = "DefaultMQPushConsumerImpl")]
#[derive(Debug, Clone)]
pub struct PushConsumer {
    inner: Arc<Inner>,
}

impl PushConsumer {
    /// A consumer with its own client instance.
    #[must_use]
    pub fn new(client: ClientConfig, config: PushConsumerConfig) -> PushConsumer {
        PushConsumer::build(ClientInstance::new(client), true, config)
    }

    /// A consumer sharing `instance` with other producers and consumers of this process.
    #[must_use]
    pub fn with_instance(
        instance: Arc<ClientInstance>,
        config: PushConsumerConfig,
    ) -> PushConsumer {
        PushConsumer::build(instance, false, config)
    }

    fn build(
        instance: Arc<ClientInstance>,
        owns_instance: bool,
        config: PushConsumerConfig,
    ) -> Self {
        let offsets = match config.message_model {
            MessageModel::Clustering => OffsetStore::remote(&config.group),
            MessageModel::Broadcasting => OffsetStore::local_file(
                &config.group,
                offsets_path(&config.offsets_root, instance.client_id(), &config.group),
            ),
        };
        let permits = Arc::new(Semaphore::new(config.consume_thread_max.max(1)));
        PushConsumer {
            inner: Arc::new(Inner {
                config,
                instance,
                owns_instance,
                subscriptions: Mutex::new(BTreeMap::new()),
                listener: Mutex::new(None),
                queues: Mutex::new(BTreeMap::new()),
                offsets,
                rebalance_now: Notify::new(),
                resets: Mutex::new(Vec::new()),
                lock_ops: tokio::sync::Mutex::new(()),
                permits,
                cancel: CancellationToken::new(),
                started: AtomicBool::new(false),
                suspended: AtomicBool::new(false),
            }),
        }
    }

    /// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`).
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] for an empty topic.
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        self.subscribe_with_selector(topic, &MessageSelector::by_tag(expression))
    }

    /// Subscribes to `topic` with a tag or SQL92 selector (`subscribe(topic, MessageSelector)`);
    /// an SQL92 one needs a broker with `enablePropertyFilter=true`.
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] for an empty topic or SQL92 expression.
    pub fn subscribe_with_selector(&self, topic: &str, selector: &MessageSelector) -> Result<()> {
        if topic.is_empty() {
            return Err(ClientError::InvalidMessage("empty topic".to_owned()));
        }
        let data = SubscriptionData::from_selector(topic, selector)
            .map_err(ClientError::InvalidMessage)?;
        lock(&self.inner.subscriptions).insert(topic.to_owned(), data);
        if self.inner.started.load(Ordering::Acquire) {
            // The brokers learn the new subscription before the first pull of it.
            let (inner, topic) = (self.inner.clone(), topic.to_owned());
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return Err(ClientError::Shutdown);
            };
            runtime.spawn(async move {
                let _ = inner.instance.topic_route(&topic).await;
                if let Err(error) = inner.instance.send_heartbeat_to_all_brokers().await {
                    tracing::warn!(%error, "heartbeat after subscribe failed");
                }
                inner.rebalance_now.notify_one();
            });
        }
        Ok(())
    }

    /// Stops pulling every queue (`suspend`) until [`PushConsumer::resume`]; messages pulled
    /// before still reach the listener, and the consumer keeps its queues and heartbeats.
    pub fn suspend(&self) {
        self.inner.suspended.store(true, Ordering::Release);
    }

    /// Pulls again after [`PushConsumer::suspend`] (`resume`), within a second, and
    /// rebalances at once, as Java's does.
    pub fn resume(&self) {
        self.inner.suspended.store(false, Ordering::Release);
        self.inner.rebalance_now.notify_one();
    }

    /// Whether the consumer is suspended (`isPause`).
    #[must_use]
    pub fn is_suspended(&self) -> bool {
        self.inner.suspended.load(Ordering::Acquire)
    }

    /// Sets a concurrent listener (`registerMessageListener(MessageListenerConcurrently)`).
    pub fn register_message_listener_concurrently(
        &self,
        listener: impl MessageListenerConcurrently,
    ) {
        *lock(&self.inner.listener) = Some(Listener::Concurrently(Arc::new(listener)));
    }

    /// Sets an orderly listener (`registerMessageListener(MessageListenerOrderly)`).
    pub fn register_message_listener_orderly(&self, listener: impl MessageListenerOrderly) {
        *lock(&self.inner.listener) = Some(Listener::Orderly(Arc::new(listener)));
    }

    /// This consumer's client id (`ip@instanceName`).
    #[must_use]
    pub fn client_id(&self) -> String {
        self.inner.instance.client_id().to_owned()
    }

    /// The queues this consumer owns now (in clustering, its share of the group's retry
    /// topic `%RETRY%<group>` included).
    #[must_use]
    pub fn assigned_queues(&self) -> BTreeSet<MessageQueue> {
        lock(&self.inner.queues).keys().cloned().collect()
    }

    /// Orderly clustering: the owned queues whose broker lock this consumer holds and trusts
    /// now (locked, renewed within `lock_max_live_time`, not dropped) — the queues it may
    /// consume (`ProcessQueue.isLocked && !isLockExpired`).
    #[must_use]
    pub fn locked_queues(&self) -> BTreeSet<MessageQueue> {
        let max_live = self.inner.config.lock_max_live_time;
        lock(&self.inner.queues)
            .iter()
            .filter(|(_, state)| state.pq().lock_held(max_live))
            .map(|(mq, _)| mq.clone())
            .collect()
    }

    /// The offset this consumer would commit for `mq` now, if it owns it.
    #[must_use]
    pub fn consumed_offset(&self, mq: &MessageQueue) -> Option<i64> {
        self.inner.offsets.in_memory(mq)
    }

    /// How many pulled messages of `mq` wait or are being consumed (the process queue's
    /// count, which flow control bounds), if this consumer owns `mq`.
    #[must_use]
    pub fn cached_message_count(&self, mq: &MessageQueue) -> Option<usize> {
        lock(&self.inner.queues)
            .get(mq)
            .map(|state| state.pq().count())
    }

    /// Asks for a rebalance now (what NOTIFY_CONSUMER_IDS_CHANGED does).
    pub fn rebalance_immediately(&self) {
        self.inner.rebalance_now.notify_one();
    }

    /// Starts: fetches routes, registers with the instance, heartbeats, rebalances and starts
    /// pulling.
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] without a listener or a subscription, or when the
    /// offsets file cannot be read; the instance's start errors.
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
        if lock(&inner.listener).is_none() {
            return Err(ClientError::InvalidMessage(
                "no message listener registered".into(),
            ));
        }
        if lock(&inner.subscriptions).is_empty() {
            return Err(ClientError::InvalidMessage("no subscription".into()));
        }
        if inner.started.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let started = self.start_inner().await;
        if started.is_err() {
            inner.started.store(false, Ordering::Release);
        }
        started
    }

    async fn start_inner(&self) -> Result<()> {
        let inner = &self.inner;
        if inner.config.message_model == MessageModel::Clustering {
            let retry = retry_topic(&inner.config.group);
            let data = SubscriptionData::from_expression(&retry, "*");
            lock(&inner.subscriptions).entry(retry).or_insert(data);
        }
        inner.offsets.load()?;
        if inner.owns_instance {
            inner.instance.start()?;
        }
        let consumer: Arc<dyn ConsumerInner> = inner.clone();
        if !inner
            .instance
            .register_consumer(&inner.config.group, consumer)
        {
            return Err(ClientError::InvalidMessage(format!(
                "group {} is already registered on this client instance",
                inner.config.group
            )));
        }
        for topic in inner.topics() {
            if let Err(error) = inner.instance.topic_route(&topic).await {
                inner.log_route_error(&topic, &error);
            }
        }
        if let Err(error) = inner.instance.send_heartbeat_to_all_brokers().await {
            tracing::warn!(%error, "first heartbeat failed");
        }
        tokio::spawn(inner.clone().rebalance_loop());
        tokio::spawn(inner.clone().persist_loop());
        if inner.orderly() && inner.config.message_model == MessageModel::Clustering {
            tokio::spawn(inner.clone().lock_loop());
        }
        Ok(())
    }

    /// Stops pulling, persists offsets, releases queue locks and unregisters the group.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        if !inner.started.swap(false, Ordering::AcqRel) {
            return;
        }
        inner.cancel.cancel();
        // Dropped first: batches waiting for a permit never reach the listener, and results
        // of batches in flight are not committed (they are redelivered to the next owner).
        for state in lock(&inner.queues).values() {
            state.pq().dropped = true;
        }
        let all = u32::try_from(inner.config.consume_thread_max.max(1)).unwrap_or(u32::MAX);
        let waited = tokio::time::timeout(
            inner.config.await_termination_when_shutdown,
            inner.permits.acquire_many(all),
        )
        .await;
        drop(waited);
        let owned: Vec<MessageQueue> = lock(&inner.queues).keys().cloned().collect();
        match inner.config.message_model {
            MessageModel::Clustering => {
                for mq in &owned {
                    if let Err(error) = inner.offsets.persist(&inner.instance, mq).await {
                        tracing::warn!(%error, %mq, "cannot persist offset at shutdown");
                    }
                }
                if inner.orderly() {
                    inner.unlock_idle_queues().await;
                }
            }
            MessageModel::Broadcasting => inner.offsets.persist_all(&inner.instance, &owned).await,
        }
        inner
            .instance
            .unregister_consumer(&inner.config.group)
            .await;
        if inner.owns_instance {
            inner.instance.shutdown().await;
        }
    }
}

fn by_broker(mqs: &[MessageQueue]) -> BTreeMap<String, Vec<MessageQueue>> {
    let mut brokers: BTreeMap<String, Vec<MessageQueue>> = BTreeMap::new();
    for mq in mqs {
        brokers
            .entry(mq.broker_name.clone())
            .or_default()
            .push(mq.clone());
    }
    brokers
}

impl ConsumerInner for Inner {
    fn consumer_data(&self) -> ConsumerData {
        super::consumer_data(
            &self.config.group,
            "CONSUME_PASSIVELY",
            self.config.message_model,
            self.config.consume_from_where,
            &lock(&self.subscriptions),
        )
    }

    fn on_consumer_ids_changed(&self) {
        self.rebalance_now.notify_one();
    }

    fn topics(&self) -> Vec<String> {
        lock(&self.subscriptions).keys().cloned().collect()
    }

    fn reset_offset(&self, topic: &str, offsets: Vec<(MessageQueue, i64)>) {
        lock(&self.resets).push((topic.to_owned(), offsets));
        self.rebalance_now.notify_one();
    }
}

/// Sleeps `delay` unless `cancel` fires first; returns false when cancelled.
async fn pause(cancel: &CancellationToken, delay: Duration) -> bool {
    tokio::select! {
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(delay) => true,
    }
}

impl Inner {
    fn topics(&self) -> Vec<String> {
        lock(&self.subscriptions).keys().cloned().collect()
    }

    fn orderly(&self) -> bool {
        matches!(*lock(&self.listener), Some(Listener::Orderly(_)))
    }

    fn clustering(&self) -> bool {
        self.config.message_model == MessageModel::Clustering
    }

    /// Errors about the retry topic are expected while the broker does not serve it.
    fn log_route_error(&self, topic: &str, error: &ClientError) {
        if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            tracing::debug!(topic, %error, "no route for the retry topic");
        } else {
            tracing::warn!(topic, %error, "no route for a subscribed topic");
        }
    }

    async fn rebalance_loop(self: Arc<Self>) {
        loop {
            self.apply_resets().await;
            self.rebalance().await;
            tokio::select! {
                () = self.cancel.cancelled() => return,
                () = self.rebalance_now.notified() => {}
                () = tokio::time::sleep(self.config.rebalance_interval) => {}
            }
        }
    }

    /// Applies the offset tables brokers pushed (`MQClientInstance.resetOffset`): each owned
    /// queue among them is dropped (its cached messages discarded, its pull task stopped,
    /// results of batches in flight not committed), its new offset committed to the broker,
    /// and the queue released; the rebalance that follows takes it again from that offset.
    async fn apply_resets(self: &Arc<Self>) {
        let resets = std::mem::take(&mut *lock(&self.resets));
        for (topic, offsets) in resets {
            for (mq, offset) in offsets {
                if mq.topic != topic {
                    continue;
                }
                let Some(state) = lock(&self.queues).remove(&mq) else {
                    continue;
                };
                // Orderly: the batch in flight finishes first (up to 1 s, as in
                // `remove_queue`), so the queue is never with the listener twice at once.
                let in_flight = if self.orderly() {
                    tokio::time::timeout(Duration::from_secs(1), state.consume_lock.lock())
                        .await
                        .ok()
                } else {
                    None
                };
                {
                    let mut pq = state.pq();
                    pq.dropped = true;
                    pq.clear();
                }
                state.cancel.cancel();
                self.offsets.update(&mq, offset, false);
                if let Err(error) = self.offsets.persist(&self.instance, &mq).await {
                    tracing::warn!(%error, %mq, "cannot commit a reset offset");
                }
                self.offsets.remove(&mq);
                drop(in_flight);
                tracing::info!(group = self.config.group, %mq, offset, "[reset-offset] applied");
            }
        }
    }

    /// One rebalance of every subscribed topic (`doRebalance`).
    async fn rebalance(self: &Arc<Self>) {
        for topic in self.topics() {
            if self.cancel.is_cancelled() {
                return;
            }
            let route = match self.instance.topic_route(&topic).await {
                Ok(route) => route,
                Err(error) => {
                    self.log_route_error(&topic, &error);
                    continue;
                }
            };
            let mq_all = route.subscribe_queues.clone();
            let cid_all = if self.clustering() {
                match self
                    .instance
                    .consumer_id_list(&topic, &self.config.group)
                    .await
                {
                    Ok(cids) if !cids.is_empty() => cids,
                    Ok(_) => continue,
                    Err(error) => {
                        tracing::warn!(topic, %error, "cannot get the group's member list");
                        continue;
                    }
                }
            } else {
                Vec::new()
            };
            let allocated = allocate_topic(
                self.config.message_model,
                self.config.allocate_strategy.as_ref(),
                &self.config.group,
                self.instance.client_id(),
                mq_all,
                cid_all,
            );
            let owned: Vec<MessageQueue> = lock(&self.queues).keys().cloned().collect();
            let change = diff(&topic, owned.iter(), &allocated);
            if !change.removed.is_empty() || !change.added.is_empty() {
                tracing::info!(
                    group = self.config.group,
                    topic,
                    removed = change.removed.len(),
                    added = change.added.len(),
                    "rebalance changed the owned queues"
                );
            }
            for mq in change.removed {
                self.remove_queue(&mq).await;
            }
            for mq in change.added {
                self.add_queue(mq).await;
            }
        }
    }

    async fn remove_queue(self: &Arc<Self>, mq: &MessageQueue) {
        let Some(state) = lock(&self.queues).remove(mq) else {
            return;
        };
        let orderly_clustering = self.orderly() && self.clustering();
        // Orderly: the batch in flight finishes and commits first (waiting up to 1 s, as
        // Java's `lockConsume` wait), so the next owner starts right after it.
        let guard = if orderly_clustering {
            let in_flight = state.consume_lock.lock();
            tokio::time::timeout(Duration::from_secs(1), in_flight)
                .await
                .ok()
        } else {
            None
        };
        state.pq().dropped = true;
        state.cancel.cancel();
        if let Err(error) = self.offsets.persist(&self.instance, mq).await {
            tracing::warn!(%error, %mq, "cannot persist the offset of a removed queue");
        }
        self.offsets.remove(mq);
        if !orderly_clustering {
            return;
        }
        let mqs = std::slice::from_ref(mq);
        match guard {
            Some(guard) => {
                let serial = self.lock_ops.lock().await;
                let unlocked = calls::unlock_batch(&self.instance, &self.config.group, mqs);
                if let Err(error) = unlocked.await {
                    tracing::warn!(%error, %mq, "cannot unlock a removed queue");
                }
                drop(serial);
                drop(guard);
            }
            None => {
                // A slow batch: release the broker lock once it is done (its result is not
                // committed; the next owner gets it again), so two members never consume
                // the queue at once and the rebalance does not wait for it.
                let (inner, mq) = (self.clone(), mq.clone());
                let state = state.clone();
                tokio::spawn(async move {
                    let _guard = state.consume_lock.lock().await;
                    let _serial = inner.lock_ops.lock().await;
                    let mqs = std::slice::from_ref(&mq);
                    let unlocked = calls::unlock_batch(&inner.instance, &inner.config.group, mqs);
                    if let Err(error) = unlocked.await {
                        tracing::warn!(%error, %mq, "cannot unlock a removed queue");
                    }
                });
            }
        }
    }

    async fn add_queue(self: &Arc<Self>, mq: MessageQueue) {
        let orderly_clustering = self.orderly() && self.clustering();
        if orderly_clustering {
            match calls::lock_batch(
                &self.instance,
                &self.config.group,
                std::slice::from_ref(&mq),
            )
            .await
            {
                Ok(locked) if locked.contains(&mq) => {}
                Ok(_) => {
                    tracing::info!(%mq, "queue locked by another member; retrying next rebalance");
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, %mq, "cannot lock a queue");
                    return;
                }
            }
        }
        self.offsets.remove(&mq);
        let from = self.config.consume_from_where;
        let offset = match calls::start_offset(&self.instance, &self.offsets, from, &mq).await {
            Ok(offset) => offset,
            Err(error) => {
                tracing::warn!(%error, %mq, "cannot compute the start offset");
                return;
            }
        };
        let mut pq = ProcessQueue::default();
        if orderly_clustering {
            pq.locked = true;
            pq.last_lock = Some(Instant::now());
        }
        let state = Arc::new(QueueState {
            mq: mq.clone(),
            pq: Mutex::new(pq),
            cancel: self.cancel.child_token(),
            wake: Notify::new(),
            consume_lock: tokio::sync::Mutex::new(()),
        });
        lock(&self.queues).insert(mq, state.clone());
        if self.orderly() {
            tokio::spawn(self.clone().orderly_loop(state.clone()));
        }
        tokio::spawn(self.clone().pull_loop(state, offset));
    }

    async fn persist_loop(self: Arc<Self>) {
        let interval = self.instance.config().persist_consumer_offset_interval;
        while pause(&self.cancel, interval).await {
            let owned: Vec<MessageQueue> = lock(&self.queues).keys().cloned().collect();
            // Cancelled mid-way: shutdown persists the newer offsets itself.
            tokio::select! {
                () = self.cancel.cancelled() => return,
                () = self.offsets.persist_all(&self.instance, &owned) => {}
            }
        }
    }

    /// Orderly clustering: renews the locks of every owned queue (`lockAll`).
    async fn lock_loop(self: Arc<Self>) {
        while pause(&self.cancel, self.config.lock_interval).await {
            let _serial = self.lock_ops.lock().await;
            let owned: Vec<MessageQueue> = lock(&self.queues).keys().cloned().collect();
            for (broker, mqs) in by_broker(&owned) {
                let locked = calls::lock_batch(&self.instance, &self.config.group, &mqs).await;
                let locked = match locked {
                    Ok(locked) => locked,
                    Err(error) => {
                        tracing::warn!(%error, broker, "cannot renew queue locks");
                        continue;
                    }
                };
                let queues = lock(&self.queues);
                for mq in &mqs {
                    if let Some(state) = queues.get(mq) {
                        let mut pq = state.pq();
                        pq.locked = locked.contains(mq);
                        if pq.locked {
                            pq.last_lock = Some(Instant::now());
                        }
                    }
                }
            }
        }
    }

    async fn pull_loop(self: Arc<Self>, state: Arc<QueueState>, mut offset: i64) {
        while !state.cancel.is_cancelled() {
            let delay = tokio::select! {
                () = state.cancel.cancelled() => return,
                delay = self.pull_once(&state, &mut offset) => delay,
            };
            if !delay.is_zero() && !pause(&state.cancel, delay).await {
                return;
            }
        }
    }

    /// One pull of one queue (`pullMessage` + `PullCallback`); returns the pause before the
    /// next one.
    async fn pull_once(self: &Arc<Self>, state: &Arc<QueueState>, offset: &mut i64) -> Duration {
        let config = &self.config;
        let mq = &state.mq;
        {
            let pq = state.pq();
            if pq.dropped {
                return Duration::ZERO;
            }
            if self.suspended.load(Ordering::Acquire) {
                return PULL_DELAY_WHEN_SUSPENDED;
            }
            let size_max = config.pull_threshold_size_for_queue_mib * 1024 * 1024;
            if pq.count() > config.pull_threshold_for_queue || pq.size_bytes() > size_max {
                return config.pull_time_delay_when_flow_control;
            }
            if !self.orderly() && pq.max_span() > config.consume_concurrently_max_span {
                return config.pull_time_delay_when_flow_control;
            }
            if self.orderly() && self.clustering() && !pq.locked {
                return config.pull_time_delay_when_exception;
            }
        }
        let Some(subscription) = lock(&self.subscriptions).get(&mq.topic).cloned() else {
            return config.pull_time_delay_when_exception;
        };
        let commit_offset = if self.clustering() {
            self.offsets.in_memory(mq).unwrap_or(0)
        } else {
            0
        };
        let post = config.post_subscription_when_pull;
        let sys_flag = pull_sys_flag::build(commit_offset > 0, true, post, false);
        let addr = match self.instance.master_addr_of(mq).await {
            Ok(addr) => addr,
            Err(error) => {
                self.log_route_error(&mq.topic, &error);
                return config.pull_time_delay_when_exception;
            }
        };
        let header = PullMessageRequestHeader {
            consumer_group: config.group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: *offset,
            max_msg_nums: config.pull_batch_size,
            sys_flag,
            commit_offset,
            suspend_timeout_millis: millis(config.broker_suspend_max_time),
            subscription: post.then(|| subscription.sub_string.clone()),
            sub_version: subscription.sub_version,
            expression_type: Some(subscription.expression_type().to_owned()),
            max_msg_bytes: None,
            request_source: None,
            broker_name: None,
        };
        let timeout = config.consumer_timeout_when_suspend;
        let result = match self.instance.pull(&addr, header, timeout).await {
            Ok(result) => result,
            Err(error) => {
                self.log_route_error(&mq.topic, &error);
                return config.pull_time_delay_when_exception;
            }
        };
        self.on_pulled(state, offset, &subscription, result);
        Duration::ZERO
    }

    fn on_pulled(
        self: &Arc<Self>,
        state: &Arc<QueueState>,
        offset: &mut i64,
        subscription: &SubscriptionData,
        result: PullResult,
    ) {
        let mq = &state.mq;
        *offset = result.next_begin_offset;
        match result.status {
            PullStatus::Found => {
                let mut messages: Vec<MessageExt> = result
                    .messages
                    .into_iter()
                    .filter(|m| subscription.matches_tag(m.tags()))
                    .collect();
                for message in &mut messages {
                    restore_retry_topic(message, &self.config.group);
                }
                if messages.is_empty() {
                    return;
                }
                let added = {
                    let mut pq = state.pq();
                    if pq.dropped {
                        return;
                    }
                    pq.put(messages.iter().cloned())
                };
                if added == 0 {
                    return;
                }
                let listener = lock(&self.listener).clone();
                match listener {
                    Some(Listener::Concurrently(listener)) => {
                        let batch = self.config.consume_message_batch_max_size.max(1);
                        for chunk in messages.chunks(batch) {
                            let task = self.clone().consume_concurrently(
                                state.clone(),
                                listener.clone(),
                                chunk.to_vec(),
                                Duration::ZERO,
                            );
                            tokio::spawn(task);
                        }
                    }
                    Some(Listener::Orderly(_)) => state.wake.notify_one(),
                    None => {}
                }
            }
            PullStatus::NoNewMsg | PullStatus::NoMatchedMsg => {
                // Nothing held: the filtered-out range counts as consumed (`correctTagsOffset`).
                if state.pq().count() == 0 {
                    self.offsets.update(mq, *offset, true);
                }
            }
            PullStatus::OffsetIllegal => {
                tracing::warn!(%mq, next = *offset, "pull offset illegal; corrected");
                state.pq().clear();
                self.offsets.update(mq, *offset, false);
            }
        }
    }

    /// Runs one batch through a concurrent listener, then commits or retries
    /// (`ConsumeRequest.run` + `processConsumeResult`).
    fn consume_concurrently(
        self: Arc<Self>,
        state: Arc<QueueState>,
        listener: Arc<dyn MessageListenerConcurrently>,
        messages: Vec<MessageExt>,
        delay: Duration,
    ) -> BoxFuture<'static, ()> {
        // Boxed: a failed batch schedules this same future again.
        Box::pin(self.consume_concurrently_inner(state, listener, messages, delay))
    }

    async fn consume_concurrently_inner(
        self: Arc<Self>,
        state: Arc<QueueState>,
        listener: Arc<dyn MessageListenerConcurrently>,
        messages: Vec<MessageExt>,
        delay: Duration,
    ) {
        if !delay.is_zero() && !pause(&state.cancel, delay).await {
            return;
        }
        if state.dropped() {
            return;
        }
        let Ok(permit) = self.permits.clone().acquire_owned().await else {
            return;
        };
        if state.dropped() {
            return;
        }
        let run = tokio::task::spawn_blocking(move || {
            let status = listener.consume_message(&messages);
            (status, messages)
        });
        let Ok((status, messages)) = run.await else {
            tracing::warn!(mq = %state.mq, "listener panicked; the batch will be redelivered");
            return;
        };
        drop(permit);
        if state.dropped() {
            return;
        }
        let ok = match status {
            ConsumeConcurrentlyStatus::ConsumeSuccess => messages.len(),
            ConsumeConcurrentlyStatus::ReconsumeLater => 0,
        };
        let mut again = Vec::new();
        for message in &messages[ok..] {
            match self.config.message_model {
                MessageModel::Broadcasting => {
                    tracing::warn!(
                        msg_id = message.msg_id(),
                        "broadcasting: failed message dropped"
                    );
                }
                MessageModel::Clustering => {
                    let group = &self.config.group;
                    let max = self.config.max_reconsume_times;
                    let sent = calls::send_back(&self.instance, group, &state.mq, message, max);
                    if let Err(error) = sent.await {
                        tracing::debug!(%error, "send back failed; consuming again locally");
                        let mut retry = message.clone();
                        retry.reconsume_times += 1;
                        again.push(retry);
                    }
                }
            }
        }
        let done: Vec<i64> = messages
            .iter()
            .map(|m| m.queue_offset)
            .filter(|o| !again.iter().any(|a| a.queue_offset == *o))
            .collect();
        let commit = {
            let mut pq = state.pq();
            for retry in &again {
                pq.update(retry.queue_offset, |m| {
                    m.reconsume_times = retry.reconsume_times
                });
            }
            let commit = pq.remove(done);
            (!pq.dropped).then_some(commit)
        };
        if let Some(commit) = commit.filter(|c| *c >= 0) {
            self.offsets.update(&state.mq, commit, true);
        }
        if !again.is_empty() {
            let listener = match lock(&self.listener).clone() {
                Some(Listener::Concurrently(listener)) => listener,
                _ => return,
            };
            let delay = self.config.consume_retry_delay;
            let task = self
                .clone()
                .consume_concurrently(state, listener, again, delay);
            tokio::spawn(task);
        }
    }

    /// The consume loop of one queue with an orderly listener (`ConsumeMessageOrderlyService`).
    async fn orderly_loop(self: Arc<Self>, state: Arc<QueueState>) {
        let Some(Listener::Orderly(listener)) = lock(&self.listener).clone() else {
            return;
        };
        let batch = self.config.consume_message_batch_max_size.max(1);
        while !state.cancel.is_cancelled() {
            if self.clustering() && !self.lock_fresh(&state).await {
                if !pause(&state.cancel, self.config.suspend_current_queue_time).await {
                    return;
                }
                continue;
            }
            let guard = state.consume_lock.lock().await;
            let messages: Vec<MessageExt> = {
                let mut pq = state.pq();
                if pq.dropped {
                    return;
                }
                let offsets = pq.take(batch);
                pq.taken(&offsets).into_iter().cloned().collect()
            };
            if messages.is_empty() {
                drop(guard);
                tokio::select! {
                    () = state.cancel.cancelled() => return,
                    () = state.wake.notified() => {}
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                continue;
            }
            let Ok(permit) = self.permits.clone().acquire_owned().await else {
                return;
            };
            let call = listener.clone();
            let run = tokio::task::spawn_blocking(move || call.consume_message(&messages));
            let status = run
                .await
                .unwrap_or(ConsumeOrderlyStatus::SuspendCurrentQueueAMoment);
            drop(permit);
            let suspend = {
                let mut pq = state.pq();
                match status {
                    ConsumeOrderlyStatus::Success => {
                        let commit = pq.commit();
                        if commit >= 0 && !pq.dropped {
                            self.offsets.update(&state.mq, commit, false);
                        }
                        false
                    }
                    ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => {
                        pq.consume_again();
                        true
                    }
                }
            };
            drop(guard);
            if suspend && !pause(&state.cancel, self.config.suspend_current_queue_time).await {
                return;
            }
        }
    }

    /// Shutdown of an orderly consumer: releases the lock of every owned queue once no batch
    /// of it is with the listener (`unlockAll`). A queue whose batch is still running after
    /// `max(await_termination_when_shutdown, 1 s)` keeps its broker lock until it expires, so
    /// the next owner never consumes it while the listener still does (Java unlocks at once).
    async fn unlock_idle_queues(&self) {
        let states: Vec<Arc<QueueState>> = lock(&self.queues).values().cloned().collect();
        let wait = self
            .config
            .await_termination_when_shutdown
            .max(Duration::from_secs(1));
        let deadline = tokio::time::Instant::now() + wait;
        let mut guards = Vec::new();
        let mut idle = Vec::new();
        for state in &states {
            match tokio::time::timeout_at(deadline, state.consume_lock.lock()).await {
                Ok(guard) => {
                    guards.push(guard);
                    idle.push(state.mq.clone());
                }
                Err(_) => {
                    tracing::warn!(mq = %state.mq, "batch still consuming; lock left to expire");
                }
            }
        }
        let _serial = self.lock_ops.lock().await;
        for (broker, mqs) in by_broker(&idle) {
            if let Err(error) = calls::unlock_batch(&self.instance, &self.config.group, &mqs).await
            {
                tracing::warn!(%error, broker, "cannot unlock queues at shutdown");
            }
        }
        drop(guards);
    }

    /// Whether this queue's lock is held and fresh; tries to take it when not.
    async fn lock_fresh(&self, state: &QueueState) -> bool {
        if state.pq().lock_held(self.config.lock_max_live_time) {
            return true;
        }
        // A removed queue is never locked again: its unlock may already be on the way.
        let _serial = self.lock_ops.lock().await;
        if state.dropped() {
            return false;
        }
        let mqs = std::slice::from_ref(&state.mq);
        let locked = calls::lock_batch(&self.instance, &self.config.group, mqs)
            .await
            .is_ok_and(|set| set.contains(&state.mq));
        let mut pq = state.pq();
        pq.locked = locked;
        if locked {
            pq.last_lock = Some(Instant::now());
        }
        locked
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::pull_sys_flag::*;

    #[test]
    fn sys_flag_bits_match_java() {
        assert_eq!(build(true, true, false, false), 3);
        assert_eq!(build(false, true, true, false), 6);
        assert_eq!(build(false, false, false, true), 16);
        assert_eq!(CLASS_FILTER, 8);
    }
}
