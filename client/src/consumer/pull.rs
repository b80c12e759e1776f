//! The lite pull consumer (`DefaultLitePullConsumer`): queues by subscription (rebalanced) or
//! by assignment, pulled in the background into a bounded buffer that `poll()` drains.
//!
//! Each owned queue has a pull task and a generation number. `seek` bumps the generation, so
//! batches pulled before the seek are dropped at `poll()` instead of delivered: the next
//! message `poll()` returns for that queue is the one at the sought offset.
//!
//! Offsets: `poll()` advances a queue's consumed offset past what it returned; `commit_sync()`
//! (and auto commit every `auto_commit_interval`, checked in `poll()`) writes those to the
//! offset store and persists them.
//!
//! ```
//! use ferromq_client::consumer::{LitePullConsumer, LitePullConsumerConfig};
//! use ferromq_client::ClientConfig;
//! use std::time::Duration;
//! # let namesrv = std::env::var("FERROMQ_NAMESRV").expect("a name server address");
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let consumer = LitePullConsumer::new(
//!     ClientConfig::new(&namesrv),
//!     LitePullConsumerConfig::new("my_group"),
//! );
//! let queues = consumer.fetch_message_queues("TopicTest").await?;
//! consumer.assign(queues.clone()).await?;
//! consumer.start().await?;
//! consumer.seek(&queues[0], 0)?;
//! let messages = consumer.poll(Duration::from_secs(1)).await;
//! println!("{} messages", messages.len());
//! consumer.commit_sync().await;
//! consumer.shutdown().await;
//! # Ok::<(), ferromq_client::ClientError>(())
//! # }).unwrap();
//! ```

use super::allocate::{AllocateMessageQueueAveragely, AllocateStrategy};
use super::calls;
use super::offset_file::offsets_path;
use super::offset_store::{OffsetStore, ReadOffsetType};
use super::push::pull_sys_flag;
use super::rebalance::{allocate_topic, diff};
use super::{default_offsets_root, ConsumeFromWhere, MessageModel, MessageQueue};
use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::instance::lock;
use crate::instance::PullStatus;
use crate::instance::{ClientInstance, ConsumerInner};
use crate::message::MessageExt;
use ferromq_protocol::filter::MessageSelector;
use ferromq_protocol::remoting::headers::PullMessageRequestHeader;
use ferromq_protocol::remoting::heartbeat::{ConsumerData, SubscriptionData};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

/// Settings of a lite pull consumer, with Java's defaults (`DefaultLitePullConsumer`).
#[derive(Clone, Debug)]
pub struct LitePullConsumerConfig {
    /// Consumer group.
    pub group: String,
    /// `messageModel`.
    pub message_model: MessageModel,
    /// `consumeFromWhere`.
    pub consume_from_where: ConsumeFromWhere,
    /// `allocateMessageQueueStrategy`.
    pub allocate_strategy: Arc<dyn AllocateStrategy>,
    /// Messages per pull (`pullBatchSize`, 10).
    pub pull_batch_size: i32,
    /// Commit in `poll()` every `auto_commit_interval` (`autoCommit`, true).
    pub auto_commit: bool,
    /// `autoCommitIntervalMillis` (5 s).
    pub auto_commit_interval: Duration,
    /// Most messages buffered for `poll()` over all queues (`pullThresholdForAll`, 10000).
    pub pull_threshold_for_all: usize,
    /// How long the broker holds a pull with nothing new (`brokerSuspendMaxTimeMillis`, 20 s).
    pub broker_suspend_max_time: Duration,
    /// Timeout of such a pull (`consumerTimeoutMillisWhenSuspend`, 30 s).
    pub consumer_timeout_when_suspend: Duration,
    /// Pause after a failed pull (`PULL_TIME_DELAY_MILLS_ON_EXCEPTION`, 3 s).
    pub pull_time_delay_when_exception: Duration,
    /// Rebalance period in subscribe mode (20 s).
    pub rebalance_interval: Duration,
    /// Root of broadcasting offset files.
    pub offsets_root: PathBuf,
}

impl LitePullConsumerConfig {
    /// Java's defaults for `group`.
    #[must_use]
    pub fn new(group: &str) -> LitePullConsumerConfig {
        LitePullConsumerConfig {
            group: group.to_owned(),
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::LastOffset,
            allocate_strategy: Arc::new(AllocateMessageQueueAveragely),
            pull_batch_size: 10,
            auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            pull_threshold_for_all: 10_000,
            broker_suspend_max_time: Duration::from_secs(20),
            consumer_timeout_when_suspend: Duration::from_secs(30),
            pull_time_delay_when_exception: Duration::from_secs(3),
            rebalance_interval: Duration::from_secs(20),
            offsets_root: default_offsets_root(),
        }
    }
}

/// How long a paused queue's pull task waits before it looks again, resumed or not
/// (`PULL_TIME_DELAY_MILLS_WHEN_PAUSE`).
const PULL_DELAY_WHEN_PAUSED: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct QueueState {
    generation: u64,
    /// Next offset to pull.
    pull_offset: i64,
    /// Next offset `poll()` hands out (what a commit writes); `None` before the first poll.
    consumed: Option<i64>,
    dropped: bool,
    /// Not pulled until resumed (`pause`); what was pulled before is still polled.
    paused: bool,
}

#[derive(Debug)]
struct OwnedQueue {
    mq: MessageQueue,
    state: Mutex<QueueState>,
    cancel: CancellationToken,
    /// A seek happened: a pull in flight must be abandoned.
    seeked: Notify,
    /// The queue was resumed.
    resumed: Notify,
}

#[derive(Debug)]
struct Batch {
    mq: MessageQueue,
    generation: u64,
    messages: Vec<MessageExt>,
}

#[derive(Debug)]
struct Inner {
    config: LitePullConsumerConfig,
    instance: Arc<ClientInstance>,
    owns_instance: bool,
    subscriptions: Mutex<BTreeMap<String, SubscriptionData>>,
    assigned: Mutex<Option<Vec<MessageQueue>>>,
    queues: Mutex<BTreeMap<MessageQueue, Arc<OwnedQueue>>>,
    offsets: OffsetStore,
    sender: mpsc::Sender<Batch>,
    receiver: tokio::sync::Mutex<mpsc::Receiver<Batch>>,
    cancel: CancellationToken,
    rebalance_now: Notify,
    started: AtomicBool,
    next_auto_commit: Mutex<Instant>,
}

/// A consumer the application polls (`DefaultLitePullConsumer`).
#[doc(alias = "DefaultLitePullConsumer")]
#[doc(alias = "DefaultLitePullConsumerImpl")]
#[derive(Debug, Clone)]
pub struct LitePullConsumer {
    inner: Arc<Inner>,
}

impl LitePullConsumer {
    /// A consumer with its own client instance.
    #[must_use]
    pub fn new(client: ClientConfig, config: LitePullConsumerConfig) -> LitePullConsumer {
        LitePullConsumer::build(ClientInstance::new(client), true, config)
    }

    /// A consumer sharing `instance`.
    #[must_use]
    pub fn with_instance(instance: Arc<ClientInstance>, config: LitePullConsumerConfig) -> Self {
        LitePullConsumer::build(instance, false, config)
    }

    fn build(
        instance: Arc<ClientInstance>,
        owns_instance: bool,
        config: LitePullConsumerConfig,
    ) -> Self {
        let offsets = match config.message_model {
            MessageModel::Clustering => OffsetStore::remote(&config.group),
            MessageModel::Broadcasting => OffsetStore::local_file(
                &config.group,
                offsets_path(&config.offsets_root, instance.client_id(), &config.group),
            ),
        };
        let batches = config.pull_threshold_for_all
            / usize::try_from(config.pull_batch_size.max(1)).unwrap_or(1);
        let (sender, receiver) = mpsc::channel(batches.max(1));
        LitePullConsumer {
            inner: Arc::new(Inner {
                next_auto_commit: Mutex::new(Instant::now() + config.auto_commit_interval),
                config,
                instance,
                owns_instance,
                subscriptions: Mutex::new(BTreeMap::new()),
                assigned: Mutex::new(None),
                queues: Mutex::new(BTreeMap::new()),
                offsets,
                sender,
                receiver: tokio::sync::Mutex::new(receiver),
                cancel: CancellationToken::new(),
                rebalance_now: Notify::new(),
                started: AtomicBool::new(false),
            }),
        }
    }

    /// Subscribes to `topic` with a tag expression; queues are then allocated by rebalance.
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] after `assign`, or for an empty topic.
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        self.subscribe_with_selector(topic, &MessageSelector::by_tag(expression))
    }

    /// Subscribes to `topic` with a tag or SQL92 selector (`subscribe(topic, MessageSelector)`);
    /// an SQL92 one needs a broker with `enablePropertyFilter=true`.
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] after `assign`, or for an empty topic or SQL92
    /// expression.
    pub fn subscribe_with_selector(&self, topic: &str, selector: &MessageSelector) -> Result<()> {
        if lock(&self.inner.assigned).is_some() {
            return Err(ClientError::InvalidMessage(
                "assign() was called: cannot subscribe".into(),
            ));
        }
        if topic.is_empty() {
            return Err(ClientError::InvalidMessage("empty topic".to_owned()));
        }
        let data = SubscriptionData::from_selector(topic, selector)
            .map_err(ClientError::InvalidMessage)?;
        lock(&self.inner.subscriptions).insert(topic.to_owned(), data);
        self.inner.rebalance_now.notify_one();
        Ok(())
    }

    /// Consumes exactly these queues (no rebalance), with all tags.
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] after `subscribe`.
    pub async fn assign(&self, mqs: Vec<MessageQueue>) -> Result<()> {
        if !lock(&self.inner.subscriptions).is_empty() {
            return Err(ClientError::InvalidMessage(
                "subscribe() was called: cannot assign".into(),
            ));
        }
        *lock(&self.inner.assigned) = Some(mqs.clone());
        if self.inner.started.load(Ordering::Acquire) {
            self.inner.apply_assignment(mqs.into_iter().collect()).await;
        }
        Ok(())
    }

    /// Starts pulling.
    ///
    /// # Errors
    /// Instance start errors, or an unreadable offsets file.
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
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
        let assigned = lock(&inner.assigned).clone();
        match assigned {
            Some(mqs) => inner.apply_assignment(mqs.into_iter().collect()).await,
            None => {
                for topic in inner.topics() {
                    if let Err(error) = inner.instance.topic_route(&topic).await {
                        tracing::warn!(topic, %error, "no route for a subscribed topic");
                    }
                }
                if let Err(error) = inner.instance.send_heartbeat_to_all_brokers().await {
                    tracing::warn!(%error, "first heartbeat failed");
                }
                tokio::spawn(inner.clone().rebalance_loop());
            }
        }
        Ok(())
    }

    /// The messages pulled since the last call, waiting up to `timeout` for some
    /// (`poll(timeout)`); empty when none arrived in time.
    pub async fn poll(&self, timeout: Duration) -> Vec<MessageExt> {
        let inner = &self.inner;
        if inner.config.auto_commit {
            let due = {
                let mut next = lock(&inner.next_auto_commit);
                let due = Instant::now() >= *next;
                if due {
                    *next = Instant::now() + inner.config.auto_commit_interval;
                }
                due
            };
            if due {
                self.commit_sync().await;
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut receiver = inner.receiver.lock().await;
        loop {
            let batch = tokio::select! {
                batch = receiver.recv() => batch,
                () = tokio::time::sleep_until(deadline) => return Vec::new(),
            };
            let Some(batch) = batch else {
                return Vec::new();
            };
            let Some(queue) = lock(&inner.queues).get(&batch.mq).cloned() else {
                continue;
            };
            let mut state = lock(&queue.state);
            if state.dropped || state.generation != batch.generation {
                continue;
            }
            if let Some(last) = batch.messages.last() {
                state.consumed = Some(last.queue_offset + 1);
            }
            return batch.messages;
        }
    }

    /// Moves the next message of `mq` to `offset` (`seek`).
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] when `mq` is not owned.
    pub fn seek(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let Some(queue) = lock(&self.inner.queues).get(mq).cloned() else {
            return Err(ClientError::InvalidMessage(format!("{mq} is not assigned")));
        };
        {
            let mut state = lock(&queue.state);
            state.generation += 1;
            state.pull_offset = offset;
            state.consumed = Some(offset);
        }
        queue.seeked.notify_one();
        Ok(())
    }

    /// Stops pulling `queues` (`pause`) until [`LitePullConsumer::resume`]: messages pulled
    /// before are still handed out by `poll()`, nothing after. Queues this consumer does not
    /// own are ignored, as Java's are; a queue a rebalance hands over again starts unpaused.
    pub fn pause(&self, queues: &[MessageQueue]) {
        self.set_paused(queues, true);
    }

    /// Pulls paused `queues` again (`resume`), from where they stopped.
    pub fn resume(&self, queues: &[MessageQueue]) {
        self.set_paused(queues, false);
    }

    fn set_paused(&self, queues: &[MessageQueue], paused: bool) {
        let owned = lock(&self.inner.queues);
        for queue in queues.iter().filter_map(|mq| owned.get(mq)) {
            lock(&queue.state).paused = paused;
            if !paused {
                queue.resumed.notify_one();
            }
        }
    }

    /// Whether `mq` is owned and paused (`isPaused`).
    #[must_use]
    pub fn is_paused(&self, mq: &MessageQueue) -> bool {
        lock(&self.inner.queues)
            .get(mq)
            .is_some_and(|queue| lock(&queue.state).paused)
    }

    /// Seeks `mq` to its first offset (`seekToBegin`).
    ///
    /// # Errors
    /// Broker errors, or `mq` not owned.
    pub async fn seek_to_begin(&self, mq: &MessageQueue) -> Result<()> {
        let offset = self.inner.instance.get_min_offset(mq).await?;
        self.seek(mq, offset)
    }

    /// Seeks `mq` to its end (`seekToEnd`).
    ///
    /// # Errors
    /// Broker errors, or `mq` not owned.
    pub async fn seek_to_end(&self, mq: &MessageQueue) -> Result<()> {
        let offset = self.inner.instance.get_max_offset(mq).await?;
        self.seek(mq, offset)
    }

    /// Writes the consumed offsets of every owned queue and persists them (`commitSync`).
    pub async fn commit_sync(&self) {
        let inner = &self.inner;
        let queues: Vec<Arc<OwnedQueue>> = lock(&inner.queues).values().cloned().collect();
        let mut mqs = Vec::new();
        for queue in queues {
            if let Some(offset) = lock(&queue.state).consumed {
                inner.offsets.update(&queue.mq, offset, false);
                mqs.push(queue.mq.clone());
            }
        }
        match inner.config.message_model {
            MessageModel::Clustering => {
                for mq in &mqs {
                    if let Err(error) = inner.offsets.persist(&inner.instance, mq).await {
                        tracing::warn!(%error, %mq, "commit failed");
                    }
                }
            }
            MessageModel::Broadcasting => inner.offsets.persist_all(&inner.instance, &mqs).await,
        }
    }

    /// The committed offset of `mq` as stored (broker or file); -1 when none (`committed`).
    ///
    /// # Errors
    /// Broker or network errors.
    pub async fn committed(&self, mq: &MessageQueue) -> Result<i64> {
        self.inner
            .offsets
            .read(&self.inner.instance, mq, ReadOffsetType::Store)
            .await
    }

    /// The readable queues of `topic` (`fetchMessageQueues`).
    ///
    /// # Errors
    /// Route errors.
    pub async fn fetch_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        Ok(self
            .inner
            .instance
            .topic_route(topic)
            .await?
            .subscribe_queues
            .clone())
    }

    /// The queues owned now.
    #[must_use]
    pub fn assigned_queues(&self) -> BTreeSet<MessageQueue> {
        lock(&self.inner.queues).keys().cloned().collect()
    }

    /// Stops pulling, commits (with auto commit) and unregisters.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        if !inner.started.swap(false, Ordering::AcqRel) {
            return;
        }
        inner.cancel.cancel();
        if inner.config.auto_commit {
            self.commit_sync().await;
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

impl ConsumerInner for Inner {
    fn consumer_data(&self) -> ConsumerData {
        super::consumer_data(
            &self.config.group,
            "CONSUME_ACTIVELY",
            self.config.message_model,
            self.config.consume_from_where,
            &lock(&self.subscriptions),
        )
    }

    fn on_consumer_ids_changed(&self) {
        self.rebalance_now.notify_one();
    }

    fn topics(&self) -> Vec<String> {
        self.topics()
    }
}

impl Inner {
    fn topics(&self) -> Vec<String> {
        lock(&self.subscriptions).keys().cloned().collect()
    }

    async fn rebalance_loop(self: Arc<Self>) {
        loop {
            for topic in self.topics() {
                self.rebalance_topic(&topic).await;
            }
            tokio::select! {
                () = self.cancel.cancelled() => return,
                () = self.rebalance_now.notified() => {}
                () = tokio::time::sleep(self.config.rebalance_interval) => {}
            }
        }
    }

    async fn rebalance_topic(self: &Arc<Self>, topic: &str) {
        let route = match self.instance.topic_route(topic).await {
            Ok(route) => route,
            Err(error) => {
                tracing::warn!(topic, %error, "no route for a subscribed topic");
                return;
            }
        };
        let cids = if self.config.message_model == MessageModel::Clustering {
            match self
                .instance
                .consumer_id_list(topic, &self.config.group)
                .await
            {
                Ok(cids) if !cids.is_empty() => cids,
                _ => return,
            }
        } else {
            Vec::new()
        };
        let allocated = allocate_topic(
            self.config.message_model,
            self.config.allocate_strategy.as_ref(),
            &self.config.group,
            self.instance.client_id(),
            route.subscribe_queues.clone(),
            cids,
        );
        let owned: Vec<MessageQueue> = lock(&self.queues).keys().cloned().collect();
        let change = diff(topic, owned.iter(), &allocated);
        for mq in change.removed {
            self.remove_queue(&mq).await;
        }
        for mq in change.added {
            self.add_queue(mq).await;
        }
    }

    async fn apply_assignment(self: &Arc<Self>, wanted: BTreeSet<MessageQueue>) {
        let owned: Vec<MessageQueue> = lock(&self.queues).keys().cloned().collect();
        for mq in owned.iter().filter(|mq| !wanted.contains(*mq)) {
            self.remove_queue(mq).await;
        }
        for mq in wanted {
            if !owned.contains(&mq) {
                self.add_queue(mq).await;
            }
        }
    }

    async fn remove_queue(&self, mq: &MessageQueue) {
        let Some(queue) = lock(&self.queues).remove(mq) else {
            return;
        };
        lock(&queue.state).dropped = true;
        queue.cancel.cancel();
        if let Err(error) = self.offsets.persist(&self.instance, mq).await {
            tracing::warn!(%error, %mq, "cannot persist the offset of a removed queue");
        }
        self.offsets.remove(mq);
    }

    async fn add_queue(self: &Arc<Self>, mq: MessageQueue) {
        self.offsets.remove(&mq);
        let from = self.config.consume_from_where;
        let offset = match calls::start_offset(&self.instance, &self.offsets, from, &mq).await {
            Ok(offset) => offset,
            Err(error) => {
                tracing::warn!(%error, %mq, "cannot compute the start offset");
                return;
            }
        };
        let queue = Arc::new(OwnedQueue {
            mq: mq.clone(),
            state: Mutex::new(QueueState {
                generation: 0,
                pull_offset: offset,
                consumed: None,
                dropped: false,
                paused: false,
            }),
            cancel: self.cancel.child_token(),
            seeked: Notify::new(),
            resumed: Notify::new(),
        });
        lock(&self.queues).insert(mq, queue.clone());
        tokio::spawn(self.clone().pull_loop(queue));
    }

    fn subscription(&self, topic: &str) -> SubscriptionData {
        lock(&self.subscriptions)
            .get(topic)
            .cloned()
            .unwrap_or_else(|| SubscriptionData::from_expression(topic, "*"))
    }

    async fn pull_loop(self: Arc<Self>, queue: Arc<OwnedQueue>) {
        while !queue.cancel.is_cancelled() {
            if lock(&queue.state).paused {
                tokio::select! {
                    () = queue.cancel.cancelled() => return,
                    () = queue.resumed.notified() => {}
                    // A resume between the check and the wait is seen here at the latest.
                    () = tokio::time::sleep(PULL_DELAY_WHEN_PAUSED) => {}
                }
                continue;
            }
            let delay = tokio::select! {
                () = queue.cancel.cancelled() => return,
                () = queue.seeked.notified() => Duration::ZERO,
                delay = self.pull_once(&queue) => delay,
            };
            if !delay.is_zero() {
                tokio::select! {
                    () = queue.cancel.cancelled() => return,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }

    async fn pull_once(&self, queue: &OwnedQueue) -> Duration {
        let mq = &queue.mq;
        let (generation, offset) = {
            let state = lock(&queue.state);
            (state.generation, state.pull_offset)
        };
        let subscription = self.subscription(&mq.topic);
        let addr = match self.instance.master_addr_of(mq).await {
            Ok(addr) => addr,
            Err(error) => {
                tracing::warn!(%error, %mq, "no broker for a queue");
                return self.config.pull_time_delay_when_exception;
            }
        };
        let header = PullMessageRequestHeader {
            consumer_group: self.config.group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: offset,
            max_msg_nums: self.config.pull_batch_size,
            sys_flag: pull_sys_flag::build(false, true, true, true),
            commit_offset: 0,
            suspend_timeout_millis: i64::try_from(self.config.broker_suspend_max_time.as_millis())
                .unwrap_or(i64::MAX),
            subscription: Some(subscription.sub_string.clone()),
            sub_version: subscription.sub_version,
            expression_type: Some(subscription.expression_type().to_owned()),
            max_msg_bytes: None,
            request_source: None,
            broker_name: None,
        };
        let timeout = self.config.consumer_timeout_when_suspend;
        let result = match self.instance.pull(&addr, header, timeout).await {
            Ok(result) => result,
            Err(error) => {
                tracing::warn!(%error, %mq, "pull failed");
                return self.config.pull_time_delay_when_exception;
            }
        };
        {
            let mut state = lock(&queue.state);
            if state.generation != generation || state.dropped {
                return Duration::ZERO;
            }
            state.pull_offset = result.next_begin_offset;
        }
        if result.status == PullStatus::Found {
            let messages: Vec<MessageExt> = result
                .messages
                .into_iter()
                .filter(|m| subscription.matches_tag(m.tags()))
                .collect();
            if !messages.is_empty() {
                let batch = Batch {
                    mq: mq.clone(),
                    generation,
                    messages,
                };
                // Waits while the buffer is full: that is the flow control.
                if self.sender.send(batch).await.is_err() {
                    return self.config.pull_time_delay_when_exception;
                }
            }
        }
        Duration::ZERO
    }
}
