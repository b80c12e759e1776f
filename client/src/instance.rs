//! One client instance: the name server and broker connections, routes and heartbeats that
//! every producer and consumer of a process shares (Java `MQClientInstance`).
//!
//! The instance owns:
//! - a connection pool keyed by `host:port`, reconnecting when a connection closed;
//! - the name server list with fail-over from the last one that answered;
//! - a route cache per topic, refreshed every `poll_name_server_interval` for topics in use;
//! - the registered producer and consumer groups, which make up the heartbeat sent to every
//!   broker every `heartbeat_broker_interval`;
//! - the handling of requests brokers send on our connections.
//!
//! Timers are tokio tasks holding a weak reference: dropping the last `Arc` or calling
//! [`ClientInstance::shutdown`] ends them.

use super::config::ClientConfig;
use super::error::{ClientError, Result};
use super::message::{decode_messages, MessageExt, MessageQueue};
use crate::remoting::{
    connect_tokio, ClientConfig as ConnectionConfig, ClientError as RemotingError, InboundRequests,
    RemotingClient,
};
use ferromq_protocol::fastjson::parse_lenient;
use ferromq_protocol::fastjson::queue_keyed_map;
use ferromq_protocol::remoting::body::TopicRouteData;
use ferromq_protocol::remoting::headers::{
    CreateTopicRequestHeader, GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, GetRouteInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader, OffsetResponseHeader, PullMessageRequestHeader,
    PullMessageResponseHeader, QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader,
    ResetOffsetRequestHeader, SearchOffsetRequestHeader, UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use ferromq_protocol::remoting::heartbeat::{ConsumerData, HeartbeatData, ProducerData};
use ferromq_protocol::remoting::{RemotingCommand, RequestCode, ResponseCode, FLAG_RESPONSE};
use futures::StreamExt;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::task::JoinHandle;

/// The id of a master broker in `brokerAddrs` (`MixAll.MASTER_ID`).
pub const MASTER_ID: i64 = 0;
/// Write permission bit of a queue (`PermName.PERM_WRITE`).
const PERM_WRITE: i32 = 2;
/// Read permission bit of a queue (`PermName.PERM_READ`).
const PERM_READ: i32 = 4;

/// What the instance needs from a consumer (Java `MQConsumerInner`).
#[doc(alias = "MQConsumerInner")]
pub trait ConsumerInner: Send + Sync {
    /// The group's entry in the heartbeat.
    fn consumer_data(&self) -> ConsumerData;
    /// The broker said the group's members changed (NOTIFY_CONSUMER_IDS_CHANGED): rebalance.
    fn on_consumer_ids_changed(&self);
    /// Topics whose routes the instance must keep fresh.
    fn topics(&self) -> Vec<String>;
    /// The broker pushed new offsets for `topic` (RESET_CONSUMER_CLIENT_OFFSET, after an
    /// admin's INVOKE_BROKER_TO_RESET_OFFSET): consume the owned queues among them again
    /// from there. Only push consumers do (`MQClientInstance.resetOffset`); others ignore it.
    fn reset_offset(&self, topic: &str, offsets: Vec<(MessageQueue, i64)>) {
        tracing::info!(
            topic,
            queues = offsets.len(),
            "offset reset ignored by this consumer"
        );
    }
}

/// Answers broker requests other than NOTIFY_CONSUMER_IDS_CHANGED and
/// RESET_CONSUMER_CLIENT_OFFSET (both go to the consumer): called with the broker
/// address and the request; `Some` is sent back as the response.
pub type RequestHook = Arc<dyn Fn(&str, RemotingCommand) -> Option<RemotingCommand> + Send + Sync>;

/// A topic's route and the queues derived from it (Java `TopicPublishInfo` plus the
/// subscribe set).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicRouteInfo {
    /// The route as the name server sent it.
    pub data: TopicRouteData,
    /// Writable queues of brokers with a master, in Java's `topicRouteData2TopicPublishInfo`
    /// order (queue data sorted by broker name, then queue id).
    pub publish_queues: Vec<MessageQueue>,
    /// Readable queues (`topicRouteData2TopicSubscribeInfo`).
    pub subscribe_queues: Vec<MessageQueue>,
    /// Whether the route came with an `orderTopicConf`.
    pub order_topic: bool,
}

impl TopicRouteInfo {
    /// Derives the queue lists of `topic` from its route.
    #[must_use]
    pub fn new(topic: &str, data: TopicRouteData) -> TopicRouteInfo {
        let mut publish_queues = Vec::new();
        let order_conf = data.order_topic_conf.as_deref().unwrap_or("");
        let order_topic = !order_conf.is_empty();
        if order_topic {
            for entry in order_conf.split(';') {
                let Some((broker, count)) = entry.split_once(':') else {
                    continue;
                };
                let count: i32 = count.trim().parse().unwrap_or(0);
                publish_queues.extend((0..count).map(|id| MessageQueue::new(topic, broker, id)));
            }
        } else {
            let mut queue_datas = data.queue_datas.clone();
            queue_datas.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
            for queue in &queue_datas {
                if queue.perm & PERM_WRITE == 0 {
                    continue;
                }
                let has_master = data.broker_datas.iter().any(|broker| {
                    broker.broker_name == queue.broker_name
                        && broker.broker_addrs.contains_key(&MASTER_ID)
                });
                if !has_master {
                    continue;
                }
                publish_queues.extend(
                    (0..queue.write_queue_nums)
                        .map(|id| MessageQueue::new(topic, &queue.broker_name, id)),
                );
            }
        }
        let subscribe_queues = data
            .queue_datas
            .iter()
            .filter(|queue| queue.perm & PERM_READ != 0)
            .flat_map(|queue| {
                (0..queue.read_queue_nums)
                    .map(|id| MessageQueue::new(topic, &queue.broker_name, id))
            })
            .collect();
        TopicRouteInfo {
            data,
            publish_queues,
            subscribe_queues,
            order_topic,
        }
    }
}

/// What a pull found (Java `PullStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PullStatus {
    /// Messages were found.
    Found,
    /// Nothing new (PULL_NOT_FOUND).
    NoNewMsg,
    /// Messages exist but none matched the filter (PULL_RETRY_IMMEDIATELY).
    NoMatchedMsg,
    /// The offset is outside the queue (PULL_OFFSET_MOVED).
    OffsetIllegal,
}

/// The result of a pull (Java `PullResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullResult {
    /// What was found.
    pub status: PullStatus,
    /// Where the next pull starts.
    pub next_begin_offset: i64,
    /// Smallest offset of the queue.
    pub min_offset: i64,
    /// Largest offset of the queue.
    pub max_offset: i64,
    /// Which broker id to pull from next (0 = master).
    pub suggest_which_broker_id: i64,
    /// The messages (empty unless `Found`).
    pub messages: Vec<MessageExt>,
}

/// A pooled connection; dropping it stops its inbound-request task, which closes the socket
/// once no request is using the handle.
#[derive(Debug)]
struct Connection {
    client: RemotingClient,
    inbound_task: JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.inbound_task.abort();
    }
}

/// The shared client runtime of a process (Java `MQClientInstance`).
#[doc(alias = "MQClientInstance")]
pub struct ClientInstance {
    config: ClientConfig,
    client_id: String,
    me: Weak<ClientInstance>,
    connections: Mutex<HashMap<String, Connection>>,
    connecting: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    namesrv_index: AtomicUsize,
    routes: Mutex<HashMap<String, Arc<TopicRouteInfo>>>,
    broker_addrs: Mutex<BTreeMap<String, BTreeMap<i64, String>>>,
    producers: Mutex<BTreeSet<String>>,
    consumers: Mutex<BTreeMap<String, Arc<dyn ConsumerInner>>>,
    hook: Mutex<Option<RequestHook>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    started: AtomicBool,
    stopped: AtomicBool,
}

impl std::fmt::Debug for ClientInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientInstance")
            .field("client_id", &self.client_id)
            .field("namesrv_addr", &self.config.namesrv_addr)
            .field("producers", &*lock(&self.producers))
            .field(
                "consumers",
                &lock(&self.consumers).keys().collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Locks `mutex`, poisoned or not.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its map consistent, so a poisoned lock is usable.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Turns a non-SUCCESS response into [`ClientError::Broker`].
///
/// # Errors
/// [`ClientError::Broker`] with the code and remark.
pub fn expect_success(response: RemotingCommand) -> Result<RemotingCommand> {
    if response.code == ResponseCode::SUCCESS.0 {
        Ok(response)
    } else {
        Err(broker_error(&response))
    }
}

fn broker_error(response: &RemotingCommand) -> ClientError {
    ClientError::Broker {
        code: response.code,
        remark: response.remark.clone().unwrap_or_default(),
    }
}

fn bad_header(error: impl std::fmt::Display) -> ClientError {
    ClientError::BadResponse(error.to_string())
}

impl ClientInstance {
    /// A new instance; nothing runs until [`ClientInstance::start`].
    #[must_use]
    pub fn new(config: ClientConfig) -> Arc<ClientInstance> {
        let client_id = config.client_id();
        Arc::new_cyclic(|me| ClientInstance {
            config,
            client_id,
            me: me.clone(),
            connections: Mutex::new(HashMap::new()),
            connecting: Mutex::new(HashMap::new()),
            namesrv_index: AtomicUsize::new(0),
            routes: Mutex::new(HashMap::new()),
            broker_addrs: Mutex::new(BTreeMap::new()),
            producers: Mutex::new(BTreeSet::new()),
            consumers: Mutex::new(BTreeMap::new()),
            hook: Mutex::new(None),
            tasks: Mutex::new(Vec::new()),
            started: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        })
    }

    /// The settings.
    #[must_use]
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// `clientIP@instanceName`.
    #[must_use]
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Starts the route-refresh and heartbeat timers (idempotent). Must run inside a tokio
    /// runtime.
    ///
    /// # Errors
    /// [`ClientError::Shutdown`] after [`ClientInstance::shutdown`].
    pub fn start(&self) -> Result<()> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(ClientError::Shutdown);
        }
        if self.started.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let routes = self.spawn_timer(self.config.poll_name_server_interval, |me| async move {
            me.refresh_routes_in_use().await;
        });
        let heartbeat = self.spawn_timer(self.config.heartbeat_broker_interval, |me| async move {
            if let Err(error) = me.send_heartbeat_to_all_brokers().await {
                tracing::warn!(%error, "heartbeat failed");
            }
        });
        lock(&self.tasks).extend([routes, heartbeat]);
        Ok(())
    }

    fn spawn_timer<F, Fut>(&self, period: Duration, tick: F) -> JoinHandle<()>
    where
        F: Fn(Arc<ClientInstance>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let me = self.me.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period.max(Duration::from_millis(10)));
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // Asserted endless: ends when the instance is dropped or the task is aborted.
            loop {
                interval.tick().await;
                let Some(me) = me.upgrade() else { return };
                if me.stopped.load(Ordering::Acquire) {
                    return;
                }
                tick(me).await;
            }
        })
    }

    /// Stops the timers, unregisters every group from every broker (UNREGISTER_CLIENT) and
    /// closes the connections. Later calls fail with [`ClientError::Shutdown`].
    pub async fn shutdown(&self) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
        let producers: Vec<String> = lock(&self.producers).iter().cloned().collect();
        let consumers: Vec<String> = lock(&self.consumers).keys().cloned().collect();
        for group in producers {
            self.unregister_client(Some(&group), None).await;
        }
        for group in consumers {
            self.unregister_client(None, Some(&group)).await;
        }
        lock(&self.producers).clear();
        lock(&self.consumers).clear();
        lock(&self.connections).clear();
    }

    /// Whether [`ClientInstance::shutdown`] ran.
    #[must_use]
    pub fn is_shutdown(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    // ----- groups and heartbeats -----

    /// Adds a producer group to the heartbeat. Returns false if it was registered already.
    pub fn register_producer(&self, group: &str) -> bool {
        lock(&self.producers).insert(group.to_owned())
    }

    /// Removes a producer group and tells the brokers (UNREGISTER_CLIENT).
    pub async fn unregister_producer(&self, group: &str) {
        if lock(&self.producers).remove(group) {
            self.unregister_client(Some(group), None).await;
        }
    }

    /// Adds a consumer group. Returns false (and keeps the old one) if the group is taken.
    pub fn register_consumer(&self, group: &str, consumer: Arc<dyn ConsumerInner>) -> bool {
        let mut consumers = lock(&self.consumers);
        if consumers.contains_key(group) {
            return false;
        }
        consumers.insert(group.to_owned(), consumer);
        true
    }

    /// Removes a consumer group and tells the brokers (UNREGISTER_CLIENT).
    pub async fn unregister_consumer(&self, group: &str) {
        let removed = lock(&self.consumers).remove(group).is_some();
        if removed {
            self.unregister_client(None, Some(group)).await;
        }
    }

    /// The registered consumer of `group`.
    #[must_use]
    pub fn consumer(&self, group: &str) -> Option<Arc<dyn ConsumerInner>> {
        lock(&self.consumers).get(group).cloned()
    }

    /// Sets the handler of broker requests other than those for consumers.
    pub fn set_request_hook(&self, hook: RequestHook) {
        *lock(&self.hook) = Some(hook);
    }

    /// The handler set by [`ClientInstance::set_request_hook`], to chain a new one to it.
    #[must_use]
    pub fn request_hook(&self) -> Option<RequestHook> {
        lock(&self.hook).clone()
    }

    /// The heartbeat body: every registered group.
    #[must_use]
    pub fn heartbeat_data(&self) -> HeartbeatData {
        let producer_data_set = lock(&self.producers)
            .iter()
            .map(|group| ProducerData {
                group_name: group.clone(),
            })
            .collect();
        let consumers: Vec<Arc<dyn ConsumerInner>> =
            lock(&self.consumers).values().cloned().collect();
        HeartbeatData {
            client_id: self.client_id.clone(),
            producer_data_set,
            consumer_data_set: consumers.iter().map(|c| c.consumer_data()).collect(),
        }
    }

    /// Sends HEART_BEAT to every known broker: masters only when there are no consumers (as
    /// Java), every broker otherwise. Nothing is sent when no group is registered.
    ///
    /// # Errors
    /// The last failure, after trying every broker.
    pub async fn send_heartbeat_to_all_brokers(&self) -> Result<()> {
        let data = self.heartbeat_data();
        if data.producer_data_set.is_empty() && data.consumer_data_set.is_empty() {
            return Ok(());
        }
        let masters_only = data.consumer_data_set.is_empty();
        let body = data.to_json();
        let mut outcome = Ok(());
        for addr in self.broker_addresses(masters_only) {
            let request = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body.clone());
            let sent = self
                .invoke_broker(&addr, request, self.config.request_timeout)
                .await
                .and_then(expect_success);
            if let Err(error) = sent {
                tracing::warn!(%addr, %error, "heartbeat to broker failed");
                outcome = Err(error);
            }
        }
        outcome
    }

    fn broker_addresses(&self, masters_only: bool) -> Vec<String> {
        let table = lock(&self.broker_addrs);
        let mut addrs: Vec<String> = table
            .values()
            .flat_map(|addrs| addrs.iter())
            .filter(|(id, _)| !masters_only || **id == MASTER_ID)
            .map(|(_, addr)| addr.clone())
            .collect();
        addrs.sort();
        addrs.dedup();
        addrs
    }

    async fn unregister_client(&self, producer: Option<&str>, consumer: Option<&str>) {
        for addr in self.broker_addresses(false) {
            let header = UnregisterClientRequestHeader {
                client_id: self.client_id.clone(),
                producer_group: producer.map(str::to_owned),
                consumer_group: consumer.map(str::to_owned),
            };
            let request =
                RemotingCommand::request_with_header(RequestCode::UNREGISTER_CLIENT, &header);
            let sent = self
                .request_on(&addr, request, self.config.request_timeout)
                .await
                .and_then(expect_success);
            if let Err(error) = sent {
                tracing::debug!(%addr, %error, "unregister client failed");
            }
        }
    }

    // ----- routes -----

    /// The route of `topic`, from the cache or fetched on a miss.
    ///
    /// # Errors
    /// [`ClientError::NoRoute`] when the topic does not exist; name server failures;
    /// [`ClientError::Shutdown`].
    pub async fn topic_route(&self, topic: &str) -> Result<Arc<TopicRouteInfo>> {
        if self.is_shutdown() {
            return Err(ClientError::Shutdown);
        }
        if let Some(route) = self.cached_route(topic) {
            return Ok(route);
        }
        self.refresh_topic_route(topic).await
    }

    /// The cached route of `topic`, if any.
    #[must_use]
    pub fn cached_route(&self, topic: &str) -> Option<Arc<TopicRouteInfo>> {
        lock(&self.routes).get(topic).cloned()
    }

    /// Fetches the route of `topic` (GET_ROUTEINFO_BY_TOPIC) and caches it.
    ///
    /// # Errors
    /// [`ClientError::NoRoute`] when the name server knows no such topic.
    pub async fn refresh_topic_route(&self, topic: &str) -> Result<Arc<TopicRouteInfo>> {
        let data = self.fetch_route(topic).await?;
        let info = Arc::new(TopicRouteInfo::new(topic, data));
        self.remember_route(topic, info.clone());
        Ok(info)
    }

    /// Asks the name servers for the route of `topic` without caching it.
    ///
    /// # Errors
    /// [`ClientError::NoRoute`] when the name server knows no such topic.
    pub async fn fetch_route(&self, topic: &str) -> Result<TopicRouteData> {
        let header = GetRouteInfoRequestHeader {
            topic: topic.to_owned(),
            accept_standard_json_only: Some(true),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
        let response = self.invoke_namesrv(request).await?;
        if response.code == ResponseCode::TOPIC_NOT_EXIST.0 {
            return Err(ClientError::NoRoute {
                topic: topic.to_owned(),
            });
        }
        let response = expect_success(response)?;
        let value = parse_lenient(&response.body).map_err(ClientError::BadResponse)?;
        serde_json::from_value(value).map_err(bad_header)
    }

    /// Caches `info` as the route of `topic` and learns its broker addresses.
    pub fn remember_route(&self, topic: &str, info: Arc<TopicRouteInfo>) {
        {
            let mut table = lock(&self.broker_addrs);
            for broker in &info.data.broker_datas {
                table.insert(broker.broker_name.clone(), broker.broker_addrs.clone());
            }
        }
        lock(&self.routes).insert(topic.to_owned(), info);
    }

    /// Refreshes the routes of every cached topic and every consumer's topics.
    pub async fn refresh_routes_in_use(&self) {
        let mut topics: BTreeSet<String> = lock(&self.routes).keys().cloned().collect();
        let consumers: Vec<Arc<dyn ConsumerInner>> =
            lock(&self.consumers).values().cloned().collect();
        topics.extend(consumers.iter().flat_map(|c| c.topics()));
        for topic in topics {
            if let Err(error) = self.refresh_topic_route(&topic).await {
                tracing::debug!(%topic, %error, "route refresh failed");
            }
        }
    }

    /// The master address of a broker group, from the cached routes.
    #[must_use]
    pub fn master_addr(&self, broker_name: &str) -> Option<String> {
        lock(&self.broker_addrs)
            .get(broker_name)?
            .get(&MASTER_ID)
            .cloned()
    }

    /// An address of a broker group for reads: the master if known, else any slave
    /// (Java `findBrokerAddressInSubscribe`).
    #[must_use]
    pub fn any_broker_addr(&self, broker_name: &str) -> Option<String> {
        let table = lock(&self.broker_addrs);
        let addrs = table.get(broker_name)?;
        addrs
            .get(&MASTER_ID)
            .or_else(|| addrs.values().next())
            .cloned()
    }

    /// The master address of `mq`'s broker, refreshing the topic's route once on a miss.
    ///
    /// # Errors
    /// [`ClientError::NoRoute`] when no master is known even after the refresh.
    pub async fn master_addr_of(&self, mq: &MessageQueue) -> Result<String> {
        if let Some(addr) = self.master_addr(&mq.broker_name) {
            return Ok(addr);
        }
        self.refresh_topic_route(&mq.topic).await?;
        self.master_addr(&mq.broker_name)
            .ok_or_else(|| ClientError::NoRoute {
                topic: mq.topic.clone(),
            })
    }

    // ----- requests -----

    /// Sends `request` to the name servers, starting with the last one that answered and
    /// failing over to the next on any error.
    ///
    /// # Errors
    /// [`ClientError::NameServer`] when every name server failed.
    pub async fn invoke_namesrv(&self, request: RemotingCommand) -> Result<RemotingCommand> {
        let addrs = &self.config.namesrv_addr;
        if addrs.is_empty() {
            return Err(ClientError::NameServer("no name server address".to_owned()));
        }
        let start = self.namesrv_index.load(Ordering::Relaxed);
        let mut last_error = String::new();
        for step in 0..addrs.len() {
            let index = (start + step) % addrs.len();
            let addr = &addrs[index];
            match self
                .invoke_broker(addr, request.clone(), self.config.request_timeout)
                .await
            {
                Ok(response) => {
                    self.namesrv_index.store(index, Ordering::Relaxed);
                    return Ok(response);
                }
                Err(ClientError::Shutdown) => return Err(ClientError::Shutdown),
                Err(error) => {
                    tracing::debug!(%addr, %error, "name server failed, trying the next");
                    last_error = format!("{addr}: {error}");
                }
            }
        }
        Err(ClientError::NameServer(last_error))
    }

    /// Sends `request` to `addr` on its pooled connection (connecting or reconnecting as
    /// needed) and waits up to `timeout` for the response. The request is not retried.
    ///
    /// # Errors
    /// [`ClientError::Remoting`] (connect, closed, timeout); [`ClientError::Shutdown`].
    pub async fn invoke_broker(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        if self.is_shutdown() {
            return Err(ClientError::Shutdown);
        }
        self.request_on(addr, request, timeout).await
    }

    async fn request_on(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let client = self.connection(addr).await?;
        let outcome = client.request_timeout(request, timeout).await;
        if let Err(RemotingError::Closed) = outcome {
            self.forget_connection(addr, &client);
        }
        Ok(outcome?)
    }

    /// Sends `request` to `addr` as oneway.
    ///
    /// # Errors
    /// [`ClientError::Remoting`]; [`ClientError::Shutdown`].
    pub async fn invoke_broker_oneway(&self, addr: &str, request: RemotingCommand) -> Result<()> {
        if self.is_shutdown() {
            return Err(ClientError::Shutdown);
        }
        let client = self.connection(addr).await?;
        let outcome = client.oneway(request).await;
        if outcome.is_err() {
            self.forget_connection(addr, &client);
        }
        Ok(outcome?)
    }

    /// The open connection to `addr`, connecting (with one retry) when there is none or the
    /// pooled one closed.
    async fn connection(&self, addr: &str) -> Result<RemotingClient> {
        if let Some(client) = self.open_connection(addr) {
            return Ok(client);
        }
        // One connect per address at a time: concurrent first requests share it.
        let gate = lock(&self.connecting)
            .entry(addr.to_owned())
            .or_default()
            .clone();
        let _connecting = gate.lock().await;
        if let Some(client) = self.open_connection(addr) {
            return Ok(client);
        }
        let socket = resolve(addr).await?;
        let config = ConnectionConfig {
            serialize_type: self.config.serialize_type,
            credentials: self.config.credentials.clone(),
            tls: self.config.tls.clone(),
            ..ConnectionConfig::default()
        };
        let timeout = self.config.request_timeout;
        let mut attempt = 0;
        let (client, inbound) = loop {
            attempt += 1;
            let connected =
                match tokio::time::timeout(timeout, connect_tokio(socket, config.clone())).await {
                    Ok(connected) => connected,
                    Err(_) => Err(RemotingError::Timeout(timeout)),
                };
            match connected {
                Ok(pair) => break pair,
                Err(error) if attempt >= 2 => return Err(error.into()),
                Err(error) => tracing::debug!(%addr, %error, "connect failed, retrying once"),
            }
        };
        let inbound_task = tokio::spawn(serve_inbound(
            self.me.clone(),
            addr.to_owned(),
            client.clone(),
            inbound,
        ));
        let mut connections = lock(&self.connections);
        if self.is_shutdown() {
            inbound_task.abort();
            return Err(ClientError::Shutdown);
        }
        connections.insert(
            addr.to_owned(),
            Connection {
                client: client.clone(),
                inbound_task,
            },
        );
        Ok(client)
    }

    fn open_connection(&self, addr: &str) -> Option<RemotingClient> {
        lock(&self.connections)
            .get(addr)
            .filter(|connection| !connection.client.is_closed())
            .map(|connection| connection.client.clone())
    }

    fn forget_connection(&self, addr: &str, client: &RemotingClient) {
        let mut connections = lock(&self.connections);
        if connections
            .get(addr)
            .is_some_and(|c| c.client.is_closed() && client.is_closed())
        {
            connections.remove(addr);
        }
    }

    /// Answers one request a broker sent on our connection.
    fn handle_inbound(&self, addr: &str, request: RemotingCommand) -> Option<RemotingCommand> {
        let oneway = request.is_oneway();
        if request.request_code() == RequestCode::NOTIFY_CONSUMER_IDS_CHANGED {
            match request.decode_header::<NotifyConsumerIdsChangedRequestHeader>() {
                Ok(header) => {
                    tracing::info!(group = %header.consumer_group, %addr, "consumer ids changed");
                    if let Some(consumer) = self.consumer(&header.consumer_group) {
                        consumer.on_consumer_ids_changed();
                    }
                }
                Err(error) => tracing::warn!(%error, "bad NOTIFY_CONSUMER_IDS_CHANGED"),
            }
            return (!oneway).then(|| RemotingCommand::success_to(&request));
        }
        if request.request_code() == RequestCode::RESET_CONSUMER_CLIENT_OFFSET {
            self.reset_offset(addr, &request);
            return (!oneway).then(|| RemotingCommand::success_to(&request));
        }
        let hook = lock(&self.hook).clone();
        let opaque = request.opaque;
        let answer = hook.and_then(|hook| hook(addr, request.clone()));
        match answer {
            Some(mut response) => {
                response.opaque = opaque;
                response.flag |= FLAG_RESPONSE;
                (!oneway).then_some(response)
            }
            None if oneway => None,
            None => Some(RemotingCommand::response_to(
                &request,
                ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                Some(format!("{} request type not supported", request.code)),
            )),
        }
    }

    /// RESET_CONSUMER_CLIENT_OFFSET (`ClientRemotingProcessor.resetOffset`): hands the
    /// broker's `ResetOffsetBody` to the group's consumer.
    fn reset_offset(&self, addr: &str, request: &RemotingCommand) {
        let header = match request.decode_header::<ResetOffsetRequestHeader>() {
            Ok(header) => header,
            Err(error) => {
                tracing::warn!(%error, %addr, "bad RESET_CONSUMER_CLIENT_OFFSET");
                return;
            }
        };
        let entries = if request.body.is_empty() {
            Vec::new()
        } else {
            match queue_keyed_map(&request.body, "offsetTable") {
                Ok(entries) => entries,
                Err(error) => {
                    tracing::warn!(%error, %addr, "bad ResetOffsetBody");
                    return;
                }
            }
        };
        let offsets: Vec<(MessageQueue, i64)> = entries
            .into_iter()
            .filter_map(|(queue, offset)| {
                Some((serde_json::from_value(queue).ok()?, offset.as_i64()?))
            })
            .collect();
        tracing::info!(
            %addr,
            topic = %header.topic,
            group = %header.group,
            timestamp = header.timestamp,
            queues = offsets.len(),
            "reset offset pushed by the broker"
        );
        match self.consumer(&header.group) {
            Some(consumer) => consumer.reset_offset(&header.topic, offsets),
            None => tracing::info!(group = %header.group, "[reset-offset] no such consumer"),
        }
    }

    // ----- consumer helpers -----

    /// The client ids of `group`'s members, from one broker of `topic`
    /// (GET_CONSUMER_LIST_BY_GROUP).
    ///
    /// # Errors
    /// No route; the broker's error.
    pub async fn consumer_id_list(&self, topic: &str, group: &str) -> Result<Vec<String>> {
        let route = self.topic_route(topic).await?;
        let addr = route
            .data
            .broker_datas
            .iter()
            .find_map(|broker| {
                broker
                    .broker_addrs
                    .get(&MASTER_ID)
                    .or_else(|| broker.broker_addrs.values().next())
            })
            .cloned()
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_owned(),
            })?;
        let header = GetConsumerListByGroupRequestHeader {
            consumer_group: group.to_owned(),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::GET_CONSUMER_LIST_BY_GROUP, &header);
        let response = expect_success(
            self.invoke_broker(&addr, request, self.config.request_timeout)
                .await?,
        )?;
        let value = parse_lenient(&response.body).map_err(ClientError::BadResponse)?;
        let ids = value
            .get("consumerIdList")
            .and_then(serde_json::Value::as_array)
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| id.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        Ok(ids)
    }

    /// The committed offset of `group` on `mq` (QUERY_CONSUMER_OFFSET); `None` when the
    /// broker has none (QUERY_NOT_FOUND).
    ///
    /// # Errors
    /// No route; the broker's error.
    pub async fn query_consumer_offset(
        &self,
        group: &str,
        mq: &MessageQueue,
    ) -> Result<Option<i64>> {
        let addr = self.master_addr_of(mq).await?;
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: group.to_owned(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            set_zero_if_not_found: None,
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::QUERY_CONSUMER_OFFSET, &header);
        let response = self
            .invoke_broker(&addr, request, self.config.request_timeout)
            .await?;
        if response.code == ResponseCode::QUERY_NOT_FOUND.0 {
            return Ok(None);
        }
        let response = expect_success(response)?;
        let header: QueryConsumerOffsetResponseHeader =
            response.decode_header().map_err(bad_header)?;
        Ok(header.offset)
    }

    /// Commits `offset` for `group` on `mq` (UPDATE_CONSUMER_OFFSET, oneway as Java sends it).
    ///
    /// # Errors
    /// No route; connection failures.
    pub async fn update_consumer_offset(
        &self,
        group: &str,
        mq: &MessageQueue,
        offset: i64,
    ) -> Result<()> {
        let addr = self.master_addr_of(mq).await?;
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: group.to_owned(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            commit_offset: offset,
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::UPDATE_CONSUMER_OFFSET, &header);
        self.invoke_broker_oneway(&addr, request).await
    }

    /// The next offset to be written in `mq` (GET_MAX_OFFSET).
    ///
    /// # Errors
    /// No route; the broker's error.
    pub async fn get_max_offset(&self, mq: &MessageQueue) -> Result<i64> {
        let header = GetMaxOffsetRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            committed: None,
        };
        self.offset_request(
            mq,
            RemotingCommand::request_with_header(RequestCode::GET_MAX_OFFSET, &header),
        )
        .await
    }

    /// The smallest offset still stored in `mq` (GET_MIN_OFFSET).
    ///
    /// # Errors
    /// No route; the broker's error.
    pub async fn get_min_offset(&self, mq: &MessageQueue) -> Result<i64> {
        let header = GetMinOffsetRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
        };
        self.offset_request(
            mq,
            RemotingCommand::request_with_header(RequestCode::GET_MIN_OFFSET, &header),
        )
        .await
    }

    /// The offset of the first message of `mq` stored at or after `timestamp` ms
    /// (SEARCH_OFFSET_BY_TIMESTAMP).
    ///
    /// # Errors
    /// No route; the broker's error.
    pub async fn search_offset(&self, mq: &MessageQueue, timestamp: i64) -> Result<i64> {
        let header = SearchOffsetRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            timestamp,
            boundary_type: None,
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::SEARCH_OFFSET_BY_TIMESTAMP, &header);
        self.offset_request(mq, request).await
    }

    /// When the oldest message still stored in `mq` was stored, ms since the epoch; -1 for a
    /// queue that holds none (GET_EARLIEST_MSG_STORETIME; Java's `MQAdmin.earliestMsgStoreTime`).
    ///
    /// # Errors
    /// No route; the broker's error.
    pub async fn earliest_msg_store_time(&self, mq: &MessageQueue) -> Result<i64> {
        let header = GetEarliestMsgStoretimeRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::GET_EARLIEST_MSG_STORETIME, &header);
        let addr = self.master_addr_of(mq).await?;
        let response = expect_success(
            self.invoke_broker(&addr, request, self.config.request_timeout)
                .await?,
        )?;
        let header: GetEarliestMsgStoretimeResponseHeader =
            response.decode_header().map_err(bad_header)?;
        Ok(header.timestamp)
    }

    /// Creates `topic` with `queues` read and write queues on every master broker that
    /// serves the topic `key` (normally `TBW102`), as Java's `MQAdmin.createTopic` does:
    /// UPDATE_AND_CREATE_TOPIC to each master; the name servers learn the route with each
    /// broker's next registration.
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] for a topic name Java's client refuses; no route of
    /// `key`, or no master in it; the first broker's refusal.
    pub async fn create_topic(&self, key: &str, topic: &str, queues: i32) -> Result<()> {
        if let Some(problem) = ferromq_protocol::names::topic_name_problem(topic) {
            return Err(ClientError::InvalidMessage(problem));
        }
        let route = self.fetch_route(key).await?;
        let masters: Vec<&String> = route
            .broker_datas
            .iter()
            .filter_map(|broker| broker.broker_addrs.get(&0))
            .collect();
        if masters.is_empty() {
            return Err(ClientError::NoRoute {
                topic: key.to_owned(),
            });
        }
        let mut header = CreateTopicRequestHeader::read_write(topic, queues);
        key.clone_into(&mut header.default_topic);
        for addr in masters {
            let request =
                RemotingCommand::request_with_header(RequestCode::UPDATE_AND_CREATE_TOPIC, &header);
            expect_success(
                self.invoke_broker(addr, request, self.config.request_timeout)
                    .await?,
            )?;
        }
        Ok(())
    }

    async fn offset_request(&self, mq: &MessageQueue, request: RemotingCommand) -> Result<i64> {
        let addr = self.master_addr_of(mq).await?;
        let response = expect_success(
            self.invoke_broker(&addr, request, self.config.request_timeout)
                .await?,
        )?;
        let header: OffsetResponseHeader = response.decode_header().map_err(bad_header)?;
        Ok(header.offset)
    }

    /// Pulls from `addr` (PULL_MESSAGE) and decodes the result. `timeout` must exceed the
    /// header's `suspend_timeout_millis` for long polling.
    ///
    /// # Errors
    /// Connection failures; a response code other than the four pull outcomes.
    pub async fn pull(
        &self,
        addr: &str,
        header: PullMessageRequestHeader,
        timeout: Duration,
    ) -> Result<PullResult> {
        let request = RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header);
        let response = self.invoke_broker(addr, request, timeout).await?;
        let status = match ResponseCode(response.code) {
            ResponseCode::SUCCESS => PullStatus::Found,
            ResponseCode::PULL_NOT_FOUND => PullStatus::NoNewMsg,
            ResponseCode::PULL_RETRY_IMMEDIATELY => PullStatus::NoMatchedMsg,
            ResponseCode::PULL_OFFSET_MOVED => PullStatus::OffsetIllegal,
            _ => return Err(broker_error(&response)),
        };
        let header: PullMessageResponseHeader = response.decode_header().map_err(bad_header)?;
        let messages = if status == PullStatus::Found {
            decode_messages(&response.body)?
        } else {
            Vec::new()
        };
        Ok(PullResult {
            status,
            next_begin_offset: header.next_begin_offset,
            min_offset: header.min_offset,
            max_offset: header.max_offset,
            suggest_which_broker_id: header.suggest_which_broker_id,
            messages,
        })
    }
}

/// Resolves `host:port`.
async fn resolve(addr: &str) -> Result<std::net::SocketAddr> {
    if let Ok(socket) = addr.parse() {
        return Ok(socket);
    }
    tokio::net::lookup_host(addr)
        .await
        .ok()
        .and_then(|mut found| found.next())
        .ok_or_else(|| ClientError::BadAddress(addr.to_owned()))
}

/// Reads the requests a peer sends on one connection and answers them.
async fn serve_inbound(
    instance: Weak<ClientInstance>,
    addr: String,
    client: RemotingClient,
    mut inbound: InboundRequests,
) {
    // Ends when the connection closes (the driver drops the sender) or the task is aborted.
    while let Some(request) = inbound.next().await {
        let Some(instance) = instance.upgrade() else {
            return;
        };
        let response = instance.handle_inbound(&addr, request);
        drop(instance);
        if let Some(response) = response {
            if client.send_response(response).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferromq_protocol::remoting::body::{BrokerData, QueueData};

    fn queue(broker: &str, read: i32, write: i32, perm: i32) -> QueueData {
        QueueData {
            broker_name: broker.into(),
            read_queue_nums: read,
            write_queue_nums: write,
            perm,
            topic_sys_flag: 0,
        }
    }

    fn broker(name: &str, ids: &[i64]) -> BrokerData {
        BrokerData {
            cluster: "c".into(),
            broker_name: name.into(),
            broker_addrs: ids.iter().map(|id| (*id, format!("{name}:{id}"))).collect(),
            enable_acting_master: false,
            zone_name: None,
        }
    }

    #[test]
    fn publish_queues_skip_unwritable_and_masterless_brokers_in_name_order() {
        let data = TopicRouteData {
            queue_datas: vec![
                queue("b", 2, 2, 6),
                queue("a", 1, 2, 6),
                queue("ro", 1, 1, 4),
                queue("slave-only", 1, 1, 6),
            ],
            broker_datas: vec![
                broker("a", &[0]),
                broker("b", &[0, 1]),
                broker("ro", &[0]),
                broker("slave-only", &[1]),
            ],
            ..TopicRouteData::default()
        };
        let info = TopicRouteInfo::new("T", data);
        let publish: Vec<(String, i32)> = info
            .publish_queues
            .iter()
            .map(|q| (q.broker_name.clone(), q.queue_id))
            .collect();
        assert_eq!(
            publish,
            vec![
                ("a".into(), 0),
                ("a".into(), 1),
                ("b".into(), 0),
                ("b".into(), 1)
            ]
        );
        assert_eq!(info.subscribe_queues.len(), 2 + 1 + 1 + 1);
        assert!(!info.order_topic);
    }

    struct Notified(std::sync::atomic::AtomicUsize);

    impl ConsumerInner for Notified {
        fn consumer_data(&self) -> ConsumerData {
            ConsumerData::default()
        }
        fn on_consumer_ids_changed(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn topics(&self) -> Vec<String> {
            Vec::new()
        }
    }

    #[test]
    fn broker_requests_reach_the_consumer_the_hook_or_are_refused() {
        let instance = ClientInstance::new(ClientConfig::new("127.0.0.1:1"));
        let consumer = Arc::new(Notified(std::sync::atomic::AtomicUsize::new(0)));
        instance.register_consumer("cg", consumer.clone());
        let header = NotifyConsumerIdsChangedRequestHeader {
            consumer_group: "cg".into(),
        };
        let mut notify =
            RemotingCommand::request_with_header(RequestCode::NOTIFY_CONSUMER_IDS_CHANGED, &header);
        notify.mark_oneway();
        assert_eq!(instance.handle_inbound("b:1", notify), None);
        assert_eq!(consumer.0.load(Ordering::SeqCst), 1);

        let mut unknown = RemotingCommand::request(RequestCode::GET_CONSUMER_RUNNING_INFO);
        unknown.opaque = 9;
        let refused = instance.handle_inbound("b:1", unknown.clone()).unwrap();
        assert_eq!(refused.code, ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0);
        assert_eq!(refused.opaque, 9);
        assert!(refused.is_response());

        instance.set_request_hook(Arc::new(|addr: &str, request: RemotingCommand| {
            assert_eq!(addr, "b:1");
            (request.code == RequestCode::GET_CONSUMER_RUNNING_INFO.0)
                .then(|| RemotingCommand::success_to(&request).with_body(b"running".to_vec()))
        }));
        let answered = instance.handle_inbound("b:1", unknown).unwrap();
        assert_eq!(answered.code, ResponseCode::SUCCESS.0);
        assert_eq!(
            (answered.opaque, answered.body.as_slice()),
            (9, b"running".as_slice())
        );
        let mut oneway = RemotingCommand::request(RequestCode::CHECK_TRANSACTION_STATE);
        oneway.mark_oneway();
        assert_eq!(instance.handle_inbound("b:1", oneway), None);
    }

    #[test]
    fn order_topic_conf_lists_queues_per_broker() {
        let data = TopicRouteData {
            order_topic_conf: Some("x:2;y:1".into()),
            ..TopicRouteData::default()
        };
        let info = TopicRouteInfo::new("T", data);
        assert!(info.order_topic);
        assert_eq!(info.publish_queues.len(), 3);
        assert_eq!(info.publish_queues[2], MessageQueue::new("T", "y", 0));
    }
}
