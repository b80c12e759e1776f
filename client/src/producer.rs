//! The producer (Java `DefaultMQProducer`): sync, async, oneway, batch, to-a-queue and
//! selector sends, with retries to another broker and latency fault avoidance.
//!
//! ```
//! use ferromq_client::{ClientConfig, Message, Producer, SendStatus};
//!
//! # let namesrv = std::env::var("FERROMQ_NAMESRV").expect("a name server address");
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let producer = Producer::new("my_producer_group", ClientConfig::new(&namesrv));
//! producer.start().await?;
//! let message = Message::new("TopicTest", "hello").with_tags("TagA").with_keys(["order-1"]);
//! let sent = producer.send(message).await?;
//! assert_eq!(sent.send_status, SendStatus::SendOk);
//! println!("{} stored at {} offset {}", sent.msg_id, sent.message_queue, sent.queue_offset);
//!
//! // Ordered messages: every message of one order goes to the same queue.
//! let order_id = 42usize;
//! let message = Message::new("TopicTest", "step 1");
//! producer
//!     .send_with_selector(message, move |queues, _message| order_id % queues.len())
//!     .await?;
//! producer.shutdown().await;
//! # Ok::<(), ferromq_client::ClientError>(())
//! # }).unwrap();
//! ```
//!
//! What a send does, in Java's order: validate (topic, body, `maxMessageSize`), set
//! `UNIQ_KEY`, compress a body of at least `compress_msg_body_over_howmuch` bytes with zlib
//! (sys flag bit 0; never for batches), find the publish queues (the topic's route, or the
//! `TBW102` template's when the topic does not exist yet so the broker auto-creates it), pick a
//! queue, send SEND_MESSAGE_V2 (310) or SEND_BATCH_MESSAGE (320) with
//! `SendMessageRequestHeaderV2`, and on failure retry on another broker.

use super::error::{ClientError, Result};
use super::instance::{ClientInstance, TopicRouteInfo};
use super::latency::{select_queue, LatencyFaultTolerance};
use super::message::{deflate, property, Message, MessageQueue, COMPRESSED_FLAG};
use super::msg_id::create_uniq_id;
use super::ClientConfig;
use ferromq_protocol::batch::BatchEntry;
use ferromq_protocol::calendar::now_ms;
use ferromq_protocol::names::{group_name_problem, topic_name_problem, RETRY_GROUP_TOPIC_PREFIX};
use ferromq_protocol::remoting::headers::{SendMessageRequestHeaderV2, SendMessageResponseHeader};
use ferromq_protocol::remoting::{RemotingCommand, RequestCode, ResponseCode};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The topic whose route new topics borrow (`TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`).
pub use ferromq_protocol::names::AUTO_CREATE_TOPIC_KEY_TOPIC;
use ferromq_protocol::names::NOT_ALLOWED_SEND_TOPICS;
/// Message system flag of a transaction half message (`TRANSACTION_PREPARED_TYPE`).
const TRANSACTION_PREPARED_TYPE: i32 = 0x1 << 2;
/// The region a broker reports when it has none (`MixAll.DEFAULT_TRACE_REGION_ID`).
const DEFAULT_REGION: &str = "DefaultRegion";

/// Producer settings, with Java's `DefaultMQProducer` defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerOptions {
    /// Time budget of one send, retries included (`sendMsgTimeout`, 3 s).
    pub send_msg_timeout: Duration,
    /// Extra attempts of a sync send, each on another broker when there is one
    /// (`retryTimesWhenSendFailed`, 2).
    pub retry_times_when_send_failed: u32,
    /// Extra attempts of an async send (`retryTimesWhenSendAsyncFailed`, 2).
    pub retry_times_when_send_async_failed: u32,
    /// Retry a sync send whose status is not SEND_OK (`retryAnotherBrokerWhenNotStoreOK`,
    /// false).
    pub retry_another_broker_when_not_store_ok: bool,
    /// Bodies of at least this many bytes are compressed (`compressMsgBodyOverHowmuch`, 4096).
    pub compress_msg_body_over_howmuch: usize,
    /// zlib level of that compression (`compressLevel`, 5).
    pub compress_level: u32,
    /// Largest body accepted (`maxMessageSize`, 4 MiB).
    pub max_message_size: usize,
    /// Queues per broker of an auto-created topic (`defaultTopicQueueNums`, 4).
    pub default_topic_queue_nums: i32,
    /// The template topic of auto-creation (`createTopicKey`, `TBW102`).
    pub create_topic_key: String,
    /// Avoid brokers that were slow or failed (`sendLatencyFaultEnable`). Off by default,
    /// as in Java; without it a retry still moves to another broker.
    pub send_latency_fault_enable: bool,
    /// Most async sends in flight (`backPressureForAsyncSendNum`, 1024). Java enforces it
    /// only with `enableBackpressureForAsyncMode`; here it always holds.
    pub back_pressure_for_async_send_num: usize,
    /// Most body bytes of async sends in flight (`backPressureForAsyncSendSize`, 100 MiB).
    pub back_pressure_for_async_send_size: usize,
}

impl Default for ProducerOptions {
    fn default() -> Self {
        ProducerOptions {
            send_msg_timeout: Duration::from_secs(3),
            retry_times_when_send_failed: 2,
            retry_times_when_send_async_failed: 2,
            retry_another_broker_when_not_store_ok: false,
            compress_msg_body_over_howmuch: 4096,
            compress_level: 5,
            max_message_size: ferromq_protocol::limits::MESSAGE_SIZE_MAX,
            default_topic_queue_nums: 4,
            create_topic_key: AUTO_CREATE_TOPIC_KEY_TOPIC.to_owned(),
            send_latency_fault_enable: false,
            back_pressure_for_async_send_num: 1024,
            back_pressure_for_async_send_size: 100 * 1024 * 1024,
        }
    }
}

/// How the broker stored a message (Java `SendStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendStatus {
    /// Stored (and flushed/replicated as the broker is configured).
    SendOk,
    /// Stored, but the synchronous flush timed out.
    FlushDiskTimeout,
    /// Stored, but replication to the slave timed out.
    FlushSlaveTimeout,
    /// Stored, but no slave is available for synchronous replication.
    SlaveNotAvailable,
}

/// The outcome of a send (Java `SendResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendResult {
    /// How it was stored.
    pub send_status: SendStatus,
    /// The `UNIQ_KEY` (for a batch, the messages' ids joined by commas).
    pub msg_id: String,
    /// The broker's offset message id(s).
    pub offset_msg_id: String,
    /// The queue it went to.
    pub message_queue: MessageQueue,
    /// Its offset in that queue (the first message's for a batch).
    pub queue_offset: i64,
    /// The broker's region (`MSG_REGION`), `DefaultRegion` if none.
    pub region_id: String,
    /// Transaction id, if the broker sent one.
    pub transaction_id: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Sync,
    Async,
    Oneway,
}

/// A message ready for the wire.
#[derive(Debug)]
struct Outgoing {
    topic: String,
    body: Vec<u8>,
    flag: i32,
    sys_flag: i32,
    properties: String,
    batch: bool,
    uniq_id: String,
    /// Retry messages (`%RETRY%` topics) carry their count and limit in the header.
    reconsume_times: i32,
    max_reconsume_times: Option<i32>,
}

/// Sends messages (Java `DefaultMQProducer`). Cheap to clone; clones share everything.
#[doc(alias = "DefaultMQProducer")]
#[derive(Clone, Debug)]
pub struct Producer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    group: String,
    options: ProducerOptions,
    instance: Arc<ClientInstance>,
    owns_instance: bool,
    faults: LatencyFaultTolerance,
    send_which_queue: Mutex<HashMap<String, Arc<AtomicUsize>>>,
    running: AtomicBool,
    async_in_flight: InFlight,
}

/// The async sends in flight, bounded in count and bytes.
#[derive(Debug)]
struct InFlight {
    count: Arc<tokio::sync::Semaphore>,
    bytes: Arc<tokio::sync::Semaphore>,
    bytes_max: usize,
}

impl InFlight {
    fn new(count_max: usize, bytes_max: usize) -> InFlight {
        let bytes_max = bytes_max.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        InFlight {
            count: Arc::new(tokio::sync::Semaphore::new(count_max.max(1))),
            bytes: Arc::new(tokio::sync::Semaphore::new(bytes_max)),
            bytes_max,
        }
    }

    /// Waits for room for one send of `size` bytes (a body over the whole budget waits for
    /// the whole budget). The permits are never closed, so acquiring cannot fail; `None`
    /// would only mean no limit.
    async fn acquire(
        &self,
        size: usize,
    ) -> Option<(
        tokio::sync::OwnedSemaphorePermit,
        tokio::sync::OwnedSemaphorePermit,
    )> {
        let count = self.count.clone().acquire_owned().await.ok()?;
        let size = u32::try_from(size.clamp(1, self.bytes_max)).unwrap_or(u32::MAX);
        let bytes = self.bytes.clone().acquire_many_owned(size).await.ok()?;
        Some((count, bytes))
    }
}

impl Producer {
    /// A producer of `group` with its own client instance and default options.
    #[must_use]
    pub fn new(group: &str, config: ClientConfig) -> Producer {
        Producer::with_options(
            group,
            ClientInstance::new(config),
            ProducerOptions::default(),
        )
    }

    /// A producer of `group` on a shared client instance, with `options`.
    #[must_use]
    pub fn with_options(
        group: &str,
        instance: Arc<ClientInstance>,
        options: ProducerOptions,
    ) -> Producer {
        Producer::build(group, instance, options, false)
    }

    /// A producer with its own instance and `options`.
    #[must_use]
    pub fn with_config(group: &str, config: ClientConfig, options: ProducerOptions) -> Producer {
        Producer::build(group, ClientInstance::new(config), options, true)
    }

    fn build(
        group: &str,
        instance: Arc<ClientInstance>,
        options: ProducerOptions,
        owns_instance: bool,
    ) -> Producer {
        let async_in_flight = InFlight::new(
            options.back_pressure_for_async_send_num,
            options.back_pressure_for_async_send_size,
        );
        Producer {
            inner: Arc::new(Inner {
                group: group.to_owned(),
                async_in_flight,
                options,
                instance,
                owns_instance,
                faults: LatencyFaultTolerance::default(),
                send_which_queue: Mutex::new(HashMap::new()),
                running: AtomicBool::new(false),
            }),
        }
    }

    /// The producer group.
    #[must_use]
    pub fn group(&self) -> &str {
        &self.inner.group
    }

    /// The client instance this producer uses.
    #[must_use]
    pub fn instance(&self) -> &Arc<ClientInstance> {
        &self.inner.instance
    }

    /// The options.
    #[must_use]
    pub fn options(&self) -> &ProducerOptions {
        &self.inner.options
    }

    /// Starts the instance (if needed), registers the group for heartbeats and sends one.
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] for a bad group name or a group already registered on
    /// the instance; [`ClientError::Shutdown`] for a shut-down instance.
    pub async fn start(&self) -> Result<()> {
        let group = &self.inner.group;
        if let Some(problem) = group_name_problem(group) {
            return Err(ClientError::InvalidMessage(problem));
        }
        self.inner.instance.start()?;
        if !self.inner.instance.register_producer(group) {
            return Err(ClientError::InvalidMessage(format!(
                "The producer group[{group}] has been created before, specify another name please."
            )));
        }
        self.inner.running.store(true, Ordering::Release);
        if let Err(error) = self.inner.instance.send_heartbeat_to_all_brokers().await {
            tracing::debug!(%error, "first heartbeat failed");
        }
        Ok(())
    }

    /// Unregisters the group and, if the producer created its instance, shuts it down.
    pub async fn shutdown(&self) {
        if !self.inner.running.swap(false, Ordering::AcqRel) {
            return;
        }
        self.inner
            .instance
            .unregister_producer(&self.inner.group)
            .await;
        if self.inner.owns_instance {
            self.inner.instance.shutdown().await;
        }
    }

    /// Sends and waits for the broker, retrying on another broker up to
    /// `retry_times_when_send_failed` times.
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] before sending; the last failure otherwise.
    pub async fn send(&self, message: Message) -> Result<SendResult> {
        let outgoing = self.prepare(message)?;
        self.send_default(&outgoing, Mode::Sync)
            .await?
            .ok_or(ClientError::Shutdown)
    }

    /// Sends in a spawned task and calls `callback` with the outcome; retries up to
    /// `retry_times_when_send_async_failed` times. Must be called inside a tokio runtime.
    ///
    /// Returns once the send is under way. Back-pressure: while
    /// `back_pressure_for_async_send_num` sends or `back_pressure_for_async_send_size` body
    /// bytes are in flight, this waits for some to finish. A message that fails validation
    /// reaches the callback as an error too.
    pub async fn send_async<F>(&self, message: Message, callback: F)
    where
        F: FnOnce(Result<SendResult>) + Send + 'static,
    {
        let outgoing = self.prepare(message);
        let size = outgoing.as_ref().map_or(0, |o| o.body.len());
        let permits = self.inner.async_in_flight.acquire(size).await;
        let producer = self.clone();
        tokio::spawn(async move {
            let outcome = async {
                producer
                    .send_default(&outgoing?, Mode::Async)
                    .await?
                    .ok_or(ClientError::Shutdown)
            }
            .await;
            callback(outcome);
            // Released after the callback, so a callback that feeds new sends is bounded too.
            drop(permits);
        });
    }

    /// Sends without waiting for the broker's answer (no retry).
    ///
    /// # Errors
    /// Validation, routing and connection failures.
    pub async fn send_oneway(&self, message: Message) -> Result<()> {
        let outgoing = self.prepare(message)?;
        self.send_default(&outgoing, Mode::Oneway).await.map(|_| ())
    }

    /// Sends `messages` as one batch (SEND_BATCH_MESSAGE): one topic, no delay level, never
    /// compressed; stored as separate messages with consecutive queue offsets.
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] for an empty or mixed batch; send failures.
    pub async fn send_batch(&self, messages: Vec<Message>) -> Result<SendResult> {
        let outgoing = self.prepare_batch(messages)?;
        self.send_default(&outgoing, Mode::Sync)
            .await?
            .ok_or(ClientError::Shutdown)
    }

    /// Sends to `queue` and waits; no retry (the queue is fixed).
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] when the queue's topic is not the message's; send
    /// failures.
    pub async fn send_to_queue(
        &self,
        message: Message,
        queue: &MessageQueue,
    ) -> Result<SendResult> {
        if queue.topic != message.topic {
            return Err(ClientError::InvalidMessage(format!(
                "message's topic {} not equal mq's topic {}",
                message.topic, queue.topic
            )));
        }
        let outgoing = self.prepare(message)?;
        self.publish_info(&outgoing.topic).await?;
        let timeout = self.inner.options.send_msg_timeout;
        self.send_kernel(queue, &outgoing, Mode::Sync, timeout)
            .await?
            .ok_or(ClientError::Shutdown)
    }

    /// Sends to the queue `selector` picks from the topic's publish queues (an index, taken
    /// modulo their count) and waits; no retry on another queue, so order per queue holds.
    ///
    /// # Errors
    /// Routing and send failures.
    pub async fn send_with_selector<S>(&self, message: Message, selector: S) -> Result<SendResult>
    where
        S: FnOnce(&[MessageQueue], &Message) -> usize,
    {
        let info = self.publish_info(&message.topic).await?;
        let index = selector(&info.publish_queues, &message);
        let queue = info
            .publish_queues
            .get(index % info.publish_queues.len().max(1))
            .cloned()
            .ok_or_else(|| ClientError::NoRoute {
                topic: message.topic.clone(),
            })?;
        self.send_to_queue(message, &queue).await
    }

    /// The queues a send to `topic` may use.
    ///
    /// # Errors
    /// [`ClientError::NoRoute`] when neither the topic nor the template topic has a route.
    pub async fn publish_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        Ok(self.publish_info(topic).await?.publish_queues.clone())
    }

    // ----- preparation -----

    fn check_running(&self) -> Result<()> {
        if self.inner.running.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(ClientError::Shutdown)
        }
    }

    fn check_message(&self, message: &Message) -> Result<()> {
        if let Some(problem) = topic_name_problem(&message.topic) {
            return Err(ClientError::InvalidMessage(problem));
        }
        if NOT_ALLOWED_SEND_TOPICS.contains(&message.topic.as_str()) {
            return Err(ClientError::InvalidMessage(format!(
                "Sending message to topic[{}] is forbidden.",
                message.topic
            )));
        }
        if message.body.is_empty() {
            return Err(ClientError::InvalidMessage(
                "the message body length is zero".to_owned(),
            ));
        }
        let max = self.inner.options.max_message_size;
        if message.body.len() > max {
            return Err(ClientError::InvalidMessage(format!(
                "the message body size over max value, MAX: {max}"
            )));
        }
        Ok(())
    }

    fn prepare(&self, mut message: Message) -> Result<Outgoing> {
        self.check_running()?;
        self.check_message(&message)?;
        let uniq_id = match message.property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX) {
            Some(id) => id.to_owned(),
            None => {
                let id = create_uniq_id();
                message.put_property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX, &id);
                id
            }
        };
        let options = &self.inner.options;
        let mut sys_flag = 0;
        let mut body = std::mem::take(&mut message.body);
        if body.len() >= options.compress_msg_body_over_howmuch {
            if let Some(compressed) = deflate(&body, options.compress_level) {
                body = compressed;
                sys_flag |= COMPRESSED_FLAG;
            }
        }
        if message.property(property::TRANSACTION_PREPARED) == Some("true") {
            sys_flag |= TRANSACTION_PREPARED_TYPE;
        }
        let properties = properties_string(&message.properties)?;
        let (mut reconsume_times, mut max_reconsume_times) = (0, None);
        if message.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            let number = |name| message.property(name).and_then(|v| v.parse().ok());
            reconsume_times = number(property::RECONSUME_TIME).unwrap_or(0);
            max_reconsume_times = number(property::MAX_RECONSUME_TIMES);
        }
        Ok(Outgoing {
            topic: message.topic,
            body,
            flag: message.flag,
            sys_flag,
            properties,
            batch: false,
            uniq_id,
            reconsume_times,
            max_reconsume_times,
        })
    }

    fn prepare_batch(&self, messages: Vec<Message>) -> Result<Outgoing> {
        self.check_running()?;
        let Some(first) = messages.first() else {
            return Err(ClientError::InvalidMessage("the batch is empty".to_owned()));
        };
        let topic = first.topic.clone();
        let wait = first.wait_store_msg_ok();
        let mut body = Vec::new();
        let mut ids = Vec::with_capacity(messages.len());
        for mut message in messages {
            self.check_message(&message)?;
            if message.delay_level() > 0 {
                return Err(ClientError::InvalidMessage(
                    "TimeDelayLevel is not supported for batching".to_owned(),
                ));
            }
            if message.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
                return Err(ClientError::InvalidMessage(
                    "Retry Group is not supported for batching".to_owned(),
                ));
            }
            if message.topic != topic {
                return Err(ClientError::InvalidMessage(
                    "The topic of the messages in one batch should be the same".to_owned(),
                ));
            }
            if message.wait_store_msg_ok() != wait {
                return Err(ClientError::InvalidMessage(
                    "The waitStoreMsgOK of the messages in one batch should the same".to_owned(),
                ));
            }
            let id = match message.property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX) {
                Some(id) => id.to_owned(),
                None => create_uniq_id(),
            };
            message.put_property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX, &id);
            ids.push(id);
            BatchEntry {
                flag: message.flag,
                properties: properties_string(&message.properties)?.into_bytes(),
                body: message.body,
            }
            .encode(&mut body);
        }
        if body.len() > self.inner.options.max_message_size {
            return Err(ClientError::InvalidMessage(format!(
                "the message body size over max value, MAX: {}",
                self.inner.options.max_message_size
            )));
        }
        let mut batch_properties = Message::default();
        batch_properties.set_wait_store_msg_ok(wait);
        Ok(Outgoing {
            topic,
            body,
            flag: 0,
            sys_flag: 0,
            properties: batch_properties.properties_string(),
            batch: true,
            uniq_id: ids.join(","),
            reconsume_times: 0,
            max_reconsume_times: None,
        })
    }

    // ----- routing -----

    /// The route used for publishing to `topic`: cached, fetched, or borrowed from the
    /// template topic (Java `tryToFindTopicPublishInfo`).
    async fn publish_info(&self, topic: &str) -> Result<Arc<TopicRouteInfo>> {
        let instance = &self.inner.instance;
        if let Some(info) = instance.cached_route(topic) {
            if !info.publish_queues.is_empty() {
                return Ok(info);
            }
        }
        match instance.refresh_topic_route(topic).await {
            Ok(info) if !info.publish_queues.is_empty() => return Ok(info),
            Ok(_) | Err(ClientError::NoRoute { .. }) => {}
            Err(error) => return Err(error),
        }
        let options = &self.inner.options;
        let mut data = instance.fetch_route(&options.create_topic_key).await?;
        for queue in &mut data.queue_datas {
            let nums = options.default_topic_queue_nums.min(queue.read_queue_nums);
            queue.read_queue_nums = nums;
            queue.write_queue_nums = nums;
        }
        let info = Arc::new(TopicRouteInfo::new(topic, data));
        if info.publish_queues.is_empty() {
            return Err(ClientError::NoRoute {
                topic: topic.to_owned(),
            });
        }
        instance.remember_route(topic, info.clone());
        Ok(info)
    }

    fn queue_index(&self, topic: &str) -> Arc<AtomicUsize> {
        let mut table = self
            .inner
            .send_which_queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        table
            .entry(topic.to_owned())
            .or_insert_with(|| Arc::new(AtomicUsize::new(random_start())))
            .clone()
    }

    fn select(&self, info: &TopicRouteInfo, last_broker: Option<&str>) -> Option<MessageQueue> {
        let index = self.queue_index(&info.publish_queues.first()?.topic);
        let now = Instant::now();
        let faults = &self.inner.faults;
        let fault_enabled = self.inner.options.send_latency_fault_enable;
        select_queue(&info.publish_queues, &index, last_broker, |broker| {
            !fault_enabled || faults.is_available(broker, now)
        })
        .cloned()
    }

    fn record_latency(&self, broker: &str, started: Instant, isolation: bool) {
        if self.inner.options.send_latency_fault_enable {
            let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.inner
                .faults
                .record_send(broker, latency_ms, isolation, Instant::now());
        }
    }

    // ----- sending -----

    /// Java `sendDefaultImpl`: pick a queue, send, and on failure pick a queue of another
    /// broker, within the time budget.
    async fn send_default(&self, outgoing: &Outgoing, mode: Mode) -> Result<Option<SendResult>> {
        let options = &self.inner.options;
        let started = Instant::now();
        let deadline = started + options.send_msg_timeout;
        let info = self.publish_info(&outgoing.topic).await?;
        let attempts = match mode {
            Mode::Sync => 1 + options.retry_times_when_send_failed,
            Mode::Async => 1 + options.retry_times_when_send_async_failed,
            Mode::Oneway => 1,
        };
        let mut last_broker: Option<String> = None;
        let mut last_error: Option<ClientError> = None;
        let mut not_ok: Option<SendResult> = None;
        for attempt in 0..attempts {
            let Some(queue) = self.select(&info, last_broker.as_deref()) else {
                break;
            };
            let Some(remaining) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            if attempt > 0 {
                tracing::debug!(%queue, attempt, "retrying the send");
            }
            last_broker = Some(queue.broker_name.clone());
            let sent_at = Instant::now();
            match self.send_kernel(&queue, outgoing, mode, remaining).await {
                Ok(result) => {
                    self.record_latency(&queue.broker_name, sent_at, false);
                    match result {
                        Some(result)
                            if mode == Mode::Sync
                                && result.send_status != SendStatus::SendOk
                                && options.retry_another_broker_when_not_store_ok =>
                        {
                            not_ok = Some(result);
                        }
                        result => return Ok(result),
                    }
                }
                Err(error) => {
                    self.record_latency(&queue.broker_name, sent_at, true);
                    if !retryable(&error) {
                        return Err(error);
                    }
                    tracing::debug!(%queue, %error, "send failed");
                    last_error = Some(error);
                }
            }
        }
        if let Some(result) = not_ok {
            return Ok(Some(result));
        }
        Err(last_error.unwrap_or(ClientError::Remoting(
            crate::remoting::ClientError::Timeout(options.send_msg_timeout),
        )))
    }

    /// Java `sendKernelImpl`: one request to `queue`'s master.
    async fn send_kernel(
        &self,
        queue: &MessageQueue,
        outgoing: &Outgoing,
        mode: Mode,
        timeout: Duration,
    ) -> Result<Option<SendResult>> {
        let instance = &self.inner.instance;
        let addr = instance.master_addr_of(queue).await?;
        let header = SendMessageRequestHeaderV2 {
            a: self.inner.group.clone(),
            b: outgoing.topic.clone(),
            c: self.inner.options.create_topic_key.clone(),
            d: self.inner.options.default_topic_queue_nums,
            e: queue.queue_id,
            f: outgoing.sys_flag,
            g: now_ms(),
            h: outgoing.flag,
            i: Some(outgoing.properties.clone()),
            j: Some(outgoing.reconsume_times),
            k: Some(false),
            l: outgoing.max_reconsume_times,
            m: Some(outgoing.batch),
            n: None,
        };
        let code = if outgoing.batch {
            RequestCode::SEND_BATCH_MESSAGE
        } else {
            RequestCode::SEND_MESSAGE_V2
        };
        let request =
            RemotingCommand::request_with_header(code, &header).with_body(outgoing.body.clone());
        if mode == Mode::Oneway {
            instance.invoke_broker_oneway(&addr, request).await?;
            return Ok(None);
        }
        let response = instance.invoke_broker(&addr, request, timeout).await?;
        process_send_response(queue, outgoing, &response).map(Some)
    }
}

/// Java `processSendResponse`.
fn process_send_response(
    queue: &MessageQueue,
    outgoing: &Outgoing,
    response: &RemotingCommand,
) -> Result<SendResult> {
    let send_status = match ResponseCode(response.code) {
        ResponseCode::SUCCESS => SendStatus::SendOk,
        ResponseCode::FLUSH_DISK_TIMEOUT => SendStatus::FlushDiskTimeout,
        ResponseCode::FLUSH_SLAVE_TIMEOUT => SendStatus::FlushSlaveTimeout,
        ResponseCode::SLAVE_NOT_AVAILABLE => SendStatus::SlaveNotAvailable,
        _ => {
            return Err(ClientError::Broker {
                code: response.code,
                remark: response.remark.clone().unwrap_or_default(),
            })
        }
    };
    let header: SendMessageResponseHeader = response
        .decode_header()
        .map_err(|error| ClientError::BadResponse(error.to_string()))?;
    Ok(SendResult {
        send_status,
        msg_id: outgoing.uniq_id.clone(),
        offset_msg_id: header.msg_id,
        message_queue: MessageQueue::new(&outgoing.topic, &queue.broker_name, header.queue_id),
        queue_offset: header.queue_offset,
        region_id: response
            .ext("MSG_REGION")
            .unwrap_or(DEFAULT_REGION)
            .to_owned(),
        transaction_id: header.transaction_id,
    })
}

/// Whether a send error is worth another attempt (Java retries remoting failures and these
/// broker codes).
fn retryable(error: &ClientError) -> bool {
    match error {
        ClientError::Remoting(_) | ClientError::NoRoute { .. } | ClientError::BadAddress(_) => true,
        ClientError::Broker { code, .. } => [
            ResponseCode::TOPIC_NOT_EXIST,
            ResponseCode::SERVICE_NOT_AVAILABLE,
            ResponseCode::SYSTEM_ERROR,
            ResponseCode::NO_PERMISSION,
            ResponseCode::NO_BUYER_ID,
            ResponseCode::NOT_IN_CURRENT_UNIT,
        ]
        .contains(&ResponseCode(*code)),
        _ => false,
    }
}

/// Properties in wire form, refusing what the 2-byte length of a stored record cannot hold.
fn properties_string(properties: &std::collections::BTreeMap<String, String>) -> Result<String> {
    let text = ferromq_protocol::message::properties_to_string(
        properties.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    if text.len() > usize::try_from(i16::MAX).unwrap_or(usize::MAX) {
        return Err(ClientError::InvalidMessage(format!(
            "the properties are {} bytes, more than {}",
            text.len(),
            i16::MAX
        )));
    }
    Ok(text)
}

/// A start for a topic's round robin that differs between producers (Java starts its
/// `ThreadLocalIndex` at a random value).
fn random_start() -> usize {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(Instant::now().elapsed().as_nanos());
    usize::try_from(hasher.finish() % 1024).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn producer() -> Producer {
        let producer = Producer::new("pg", ClientConfig::new("127.0.0.1:1"));
        producer.inner.running.store(true, Ordering::Release);
        producer
    }

    #[test]
    fn large_bodies_are_compressed_and_small_ones_are_not() {
        let producer = producer();
        let small = producer
            .prepare(Message::new("T", vec![b'a'; 4095]))
            .unwrap();
        assert_eq!(small.sys_flag & COMPRESSED_FLAG, 0);
        assert_eq!(small.body.len(), 4095);
        let big = producer
            .prepare(Message::new("T", vec![b'a'; 4096]))
            .unwrap();
        assert_eq!(big.sys_flag & COMPRESSED_FLAG, COMPRESSED_FLAG);
        assert_eq!(
            super::super::message::inflate(&big.body).unwrap(),
            vec![b'a'; 4096]
        );
        assert!(big.properties.contains("UNIQ_KEY\u{1}"));
        assert_eq!(big.uniq_id.len(), 32);
    }

    #[test]
    fn invalid_messages_are_refused_before_sending() {
        let producer = producer();
        let too_big = Message::new("T", vec![0; 4 * 1024 * 1024 + 1]);
        assert!(matches!(
            producer.prepare(too_big),
            Err(ClientError::InvalidMessage(_))
        ));
        assert!(producer.prepare(Message::new("T", Vec::new())).is_err());
        assert!(producer.prepare(Message::new("bad topic", "x")).is_err());
        assert!(producer
            .prepare(Message::new("SCHEDULE_TOPIC_XXXX", "x"))
            .is_err());
        let delayed = vec![
            Message::new("T", "a"),
            Message::new("T", "b").with_delay_level(2),
        ];
        assert!(producer.prepare_batch(delayed).is_err());
        let mixed = vec![Message::new("T", "a"), Message::new("U", "b")];
        assert!(producer.prepare_batch(mixed).is_err());
        assert!(producer.prepare_batch(Vec::new()).is_err());
        assert!(group_name_problem("ok_group-1").is_none());
        assert!(group_name_problem("no spaces").is_some());
    }

    #[test]
    fn retry_messages_carry_their_counts_in_the_header() {
        let producer = producer();
        let mut retry = Message::new("%RETRY%cg", "again");
        retry.put_property(property::RECONSUME_TIME, "3");
        retry.put_property(property::MAX_RECONSUME_TIMES, "16");
        let outgoing = producer.prepare(retry).unwrap();
        assert_eq!(
            (outgoing.reconsume_times, outgoing.max_reconsume_times),
            (3, Some(16))
        );
        let plain = producer.prepare(Message::new("T", "x")).unwrap();
        assert_eq!(
            (plain.reconsume_times, plain.max_reconsume_times),
            (0, None)
        );
    }

    #[test]
    fn a_batch_is_encoded_as_java_encodes_messages() {
        let producer = producer();
        let batch = producer
            .prepare_batch(vec![
                Message::new("T", "one"),
                Message::new("T", "two").with_flag(3),
            ])
            .unwrap();
        assert!(batch.batch);
        assert_eq!(batch.sys_flag, 0);
        assert_eq!(batch.properties, "WAIT\u{1}true");
        let entries = ferromq_protocol::batch::decode_batch(&batch.body).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].body, b"two");
        assert_eq!(entries[1].flag, 3);
        let ids: Vec<&str> = batch.uniq_id.split(',').collect();
        assert_eq!(ids.len(), 2);
        let props = String::from_utf8(entries[0].properties.clone()).unwrap();
        assert!(props.contains(&format!("UNIQ_KEY\u{1}{}", ids[0])));
    }
}
