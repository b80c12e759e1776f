//! Harness for the interop tests: a ferromq name server and broker started in this process
//! through the library (as `ferromq standalone` wires them), and the crates.io RocketMQ client
//! (`rocketmq-client-rust`) set up on its own tokio runtime.
//!
//! Every wait here is bounded: a test that cannot reach its goal fails with a message
//! instead of hanging.

// Each test file uses a part of the harness.
#![allow(dead_code)]
// The classic pull consumer is deprecated by the client in favour of the lite one, but it is
// what many applications run, so it is exercised too.
#![allow(deprecated)]

use ferromq::broker::BrokerHandle;
use ferromq::config::broker::BrokerConfig;
use ferromq::config::namesrv::NamesrvConfig;
use ferromq::namesrv::NamesrvHandle;
use ferromq::remoting::client::{connect_tokio, ClientConfig};
use ferromq::remoting::headers::{
    CreateTopicRequestHeader, GetRouteInfoRequestHeader, PullMessageRequestHeader,
};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode};
use ferromq::store::dispatch::DelayLevels;
use ferromq::store::flush::FlushDiskType;
use ferromq::store::message::{decode_record, parse_properties, Record};
use ferromq_shards::Shutdown;
use rocketmq_client_rust::{
    ClientResult, ClientRuntime, ClientRuntimeConfig, ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus, DefaultMQProducer, DefaultMQPullConsumer, DefaultMQPushConsumer,
    MQPushConsumer, PullStatus,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a topic may take to reach the name server (one registration period and a bit).
const ROUTE_WAIT: Duration = Duration::from_secs(10);

/// The broker's registration period in these tests: topics created by the harness reach the
/// name server within it.
const REGISTER_PERIOD: Duration = Duration::from_millis(500);

/// A name server and a broker in this process, with their data in a directory of their own.
#[derive(Debug)]
pub struct Ferromq {
    /// `127.0.0.1:port` of the name server, as clients are given it.
    pub namesrv_addr: String,
    /// The broker's listening address.
    pub broker_addr: SocketAddr,
    namesrv: Option<NamesrvHandle>,
    broker: Option<BrokerHandle>,
    flush: FlushDiskType,
    dir: PathBuf,
    delay_levels: Option<DelayLevels>,
    /// Broker config lines (`key=value`) applied on top of the harness's, at every start.
    extra_config: String,
}

impl Ferromq {
    /// Starts a name server (one shard, 127.0.0.1:0) and a broker registered with it, with
    /// ASYNC_FLUSH, in a fresh directory under `CARGO_TARGET_TMPDIR`.
    #[must_use]
    pub fn start(name: &str) -> Ferromq {
        Self::start_with(name, async_flush())
    }

    /// As [`Ferromq::start`], with the given flush mode.
    #[must_use]
    pub fn start_with(name: &str, flush: FlushDiskType) -> Ferromq {
        Self::start_configured(name, flush, None, "")
    }

    fn start_configured(
        name: &str,
        flush: FlushDiskType,
        delay_levels: Option<DelayLevels>,
        extra_config: &str,
    ) -> Ferromq {
        // The store opens its segments with O_DIRECT, which a tmpfs /tmp refuses: keep the
        // data on the build's own disk.
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "interop-{name}-{}-{}",
            std::process::id(),
            now_ns()
        ));
        std::fs::create_dir_all(&dir).expect("create the test directory");
        let namesrv_config = NamesrvConfig {
            bind_address: std::net::Ipv4Addr::LOCALHOST.into(),
            listen_port: 0,
            kv_config_path: dir.join("namesrv").join("kvConfig.json"),
            shards: Some("1".parse().expect("one name server shard")),
            ..NamesrvConfig::default()
        };
        let namesrv =
            ferromq::namesrv::start(namesrv_config, Shutdown::new()).expect("start the namesrv");
        let namesrv_addr = format!("127.0.0.1:{}", namesrv.addr.port());
        let mut ferromq = Ferromq {
            namesrv_addr,
            broker_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            namesrv: Some(namesrv),
            broker: None,
            flush,
            dir,
            delay_levels,
            extra_config: extra_config.to_owned(),
        };
        ferromq.start_broker();
        ferromq
    }

    /// Starts the broker (again) over the same store.
    ///
    /// # Panics
    /// When a broker is already running or it cannot start.
    pub fn start_broker(&mut self) {
        assert!(self.broker.is_none(), "the broker is already running");
        let mut config = BrokerConfig {
            broker_name: "broker-a".to_owned(),
            broker_ip1: std::net::Ipv4Addr::LOCALHOST.into(),
            bind_address: std::net::Ipv4Addr::LOCALHOST.into(),
            listen_port: 0,
            namesrv_addr: vec![self.namesrv_addr.clone()],
            register_name_server_period: REGISTER_PERIOD,
            ..BrokerConfig::default()
        };
        config.store.store_path_root_dir = self.dir.join("store");
        config.store.flush_disk_type = self.flush;
        // Small segments: a test writes a few MiB at most.
        config.store.mapped_file_size_commit_log = 64 << 20;
        if let Some(levels) = &self.delay_levels {
            config.store.message_delay_level = levels.clone();
        }
        let extra = ferromq::config::properties::parse(&self.extra_config);
        let unknown = config
            .apply("the test's extra config", &extra)
            .expect("valid extra broker config");
        assert!(unknown.is_empty(), "unknown broker config keys {unknown:?}");
        let broker = ferromq::broker::start(config, Shutdown::new()).expect("start the broker");
        self.broker_addr = broker.addr;
        self.broker = Some(broker);
    }

    /// Stops the broker, leaving its store and the name server in place.
    ///
    /// # Panics
    /// When a shard of the broker died.
    pub fn stop_broker(&mut self) {
        if let Some(broker) = self.broker.take() {
            broker.shutdown().expect("the broker stops cleanly");
        }
    }

    /// The running broker.
    ///
    /// # Panics
    /// When it is stopped.
    #[must_use]
    pub fn broker(&self) -> &BrokerHandle {
        self.broker.as_ref().expect("the broker is running")
    }

    /// Creates `topic` with `queues` read and write queues on the broker and waits until
    /// the name server serves its route (the next registration).
    ///
    /// # Panics
    /// When the route does not appear within [`ROUTE_WAIT`].
    pub async fn create_topic(&self, topic: &str, queues: i32) {
        // As an admin tool does: UPDATE_AND_CREATE_TOPIC to the broker.
        let (broker, _inbound) = connect_tokio(self.broker().addr, ClientConfig::default())
            .await
            .expect("connect to the broker");
        let header = CreateTopicRequestHeader::read_write(topic, queues);
        let request =
            RemotingCommand::request_with_header(RequestCode::UPDATE_AND_CREATE_TOPIC, &header);
        let created = broker
            .request_timeout(request, Duration::from_secs(10))
            .await
            .expect("topic creation answered");
        assert_eq!(
            created.code,
            ResponseCode::SUCCESS.0,
            "{:?}",
            created.remark
        );
        let namesrv: SocketAddr = self.namesrv_addr.parse().expect("namesrv address");
        let (client, _inbound) = connect_tokio(namesrv, ClientConfig::default())
            .await
            .expect("connect to the namesrv");
        let deadline = Instant::now() + ROUTE_WAIT;
        loop {
            let header = GetRouteInfoRequestHeader {
                topic: topic.to_owned(),
                accept_standard_json_only: None,
            };
            let request =
                RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
            let response = client
                .request_timeout(request, Duration::from_secs(3))
                .await
                .expect("route lookup answered");
            if response.code == ResponseCode::SUCCESS.0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "topic {topic} not routed by the namesrv after {ROUTE_WAIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Ferromq {
    fn drop(&mut self) {
        self.stop_broker();
        if let Some(namesrv) = self.namesrv.take() {
            let _ = namesrv.shutdown();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// ASYNC_FLUSH with Java's 500 ms interval.
#[must_use]
pub fn async_flush() -> FlushDiskType {
    FlushDiskType::AsyncFlush {
        interval: Duration::from_millis(500),
    }
}

/// The third-party client's runtime, set up in the three steps its examples show: a runtime
/// owner from a runtime config, the global telemetry, and the client runtime from the owner's
/// root context.
pub struct Client {
    owner: Option<RuntimeOwner>,
    runtime: Arc<ClientRuntime>,
    telemetry: Option<rocketmq_observability::TelemetryRuntimeGuard>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

impl Client {
    /// Sets up the client runtime.
    ///
    /// On 2 CPUs the default blocking lanes are too small for a push consumer (consume tasks
    /// fail with `runtime.capacity.exhausted` and come back as retries), so the blocking
    /// threads and the `storage_io` / `metadata_io` lanes are raised.
    ///
    /// # Panics
    /// When the client cannot be set up.
    #[must_use]
    pub fn new(scope: &str) -> Client {
        let mut config = RuntimeConfig {
            thread_name: format!("interop-{scope}"),
            ..RuntimeConfig::default()
        }
        .with_max_blocking_threads(64)
        .expect("64 blocking threads is a valid limit");
        for lane in [
            &mut config.blocking_lane_policies.storage_io,
            &mut config.blocking_lane_policies.metadata_io,
        ] {
            lane.max_concurrency = 32;
            lane.max_queue_depth = 8192;
        }
        let owner = RuntimeOwner::plan(config)
            .expect("valid runtime config")
            .build()
            .expect("build the client runtime");
        let mut telemetry_config = rocketmq_observability::TelemetryBootstrapConfig::default();
        telemetry_config.logging.filter =
            std::env::var("RUST_LOG").unwrap_or_else(|_| "warn,ferromq=info".to_owned());
        let telemetry =
            rocketmq_observability::install_global(&telemetry_config).expect("install telemetry");
        let runtime = ClientRuntime::try_new(
            owner.root_context().component("client"),
            ClientRuntimeConfig::default(),
            telemetry.handle(),
        )
        .expect("create the client runtime");
        Client {
            owner: Some(owner),
            runtime,
            telemetry: Some(telemetry),
        }
    }

    /// The runtime producers and consumers are built from.
    #[must_use]
    pub fn runtime(&self) -> Arc<ClientRuntime> {
        Arc::clone(&self.runtime)
    }

    /// Runs `future` on the client's tokio runtime, failing the test after `limit`.
    ///
    /// # Panics
    /// When `limit` runs out.
    pub fn run<F: Future>(&self, limit: Duration, future: F) -> F::Output {
        let owner = self.owner.as_ref().expect("the runtime is up");
        owner.block_on(async {
            match tokio::time::timeout(limit, future).await {
                Ok(output) => output,
                Err(_) => panic!("the test did not finish within {limit:?}"),
            }
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let Some(owner) = self.owner.take() else {
            return;
        };
        let runtime = Arc::clone(&self.runtime);
        owner.block_on(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), runtime.shutdown()).await;
        });
        let _ = owner.shutdown_runtime_blocking_with_timeout(Duration::from_secs(10));
        if let Some(telemetry) = self.telemetry.take() {
            let _ = telemetry.shutdown();
        }
    }
}

/// How long one client call may take before the test gives up on it.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Send timeout given to the client, ms.
pub const SEND_TIMEOUT_MS: u64 = 5_000;

/// A message as a test checks it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seen {
    /// The body, as text.
    pub body: String,
    /// The tag, if any.
    pub tag: Option<String>,
    /// The keys, space-joined, if any.
    pub keys: Option<String>,
    /// Queue it was stored in.
    pub queue_id: i32,
    /// Its queue offset.
    pub queue_offset: i64,
    /// The offset message id the broker gave it.
    pub msg_id: String,
}

impl Seen {
    /// The test's view of a received message.
    #[must_use]
    pub fn of(message: &MessageExt) -> Seen {
        Seen {
            body: String::from_utf8_lossy(&message.body().unwrap_or_default()).into_owned(),
            tag: message.get_tags().map(|t| t.to_string()),
            keys: message.message.keys().map(|k| k.join(" ")),
            queue_id: message.queue_id,
            queue_offset: message.queue_offset,
            msg_id: message.msg_id.to_string(),
        }
    }
}

/// A message with `body`, `tag` and the key `key`.
#[must_use]
pub fn message(topic: &str, tag: &str, key: &str, body: &[u8]) -> Message {
    Message::builder()
        .topic(topic)
        .tags(tag)
        .keys(vec![key.to_owned()])
        .body_slice(body)
        .build_unchecked()
}

/// A started producer of `group`.
///
/// # Panics
/// When it does not start.
pub async fn start_producer(client: &Client, ferromq: &Ferromq, group: &str) -> DefaultMQProducer {
    let mut producer = DefaultMQProducer::builder(client.runtime())
        .producer_group(group.to_owned())
        .name_server_addr(ferromq.namesrv_addr.clone())
        .send_msg_timeout(u32::try_from(SEND_TIMEOUT_MS).unwrap_or(u32::MAX))
        .build();
    bounded("producer start", producer.start())
        .await
        .expect("the producer starts");
    producer
}

/// A started classic pull consumer of `group`; pulls are never left waiting on the broker
/// for long.
///
/// # Panics
/// When it does not start.
pub async fn start_pull_consumer(
    client: &Client,
    ferromq: &Ferromq,
    group: &str,
) -> DefaultMQPullConsumer {
    let consumer = DefaultMQPullConsumer::builder(client.runtime())
        .consumer_group(group.to_owned())
        .name_server_addr(ferromq.namesrv_addr.clone())
        .broker_suspend_max_time(Duration::from_millis(500))
        .consumer_timeout_when_suspend(Duration::from_secs(3))
        .consumer_pull_timeout(Duration::from_secs(3))
        .build()
        .expect("a valid pull consumer");
    bounded("pull consumer start", consumer.start())
        .await
        .expect("the pull consumer starts");
    consumer
}

/// Every message of `topic`, read queue by queue from offset 0 to the queue's max offset
/// with a pull consumer, sorted by queue and offset; waits (bounded) until there are at
/// least `expected`.
///
/// # Panics
/// When fewer than `expected` are there within [`CALL_TIMEOUT`].
pub async fn read_topic(
    consumer: &DefaultMQPullConsumer,
    topic: &str,
    expected: usize,
) -> Vec<Seen> {
    let deadline = Instant::now() + CALL_TIMEOUT;
    loop {
        let mut seen = Vec::new();
        let queues = bounded(
            "fetch queues",
            consumer.fetch_subscribe_message_queues(topic),
        )
        .await
        .expect("the topic's queues");
        for queue in &queues {
            let max = bounded("max offset", consumer.max_offset(queue))
                .await
                .expect("max offset");
            let mut offset = 0;
            while offset < max {
                let result = bounded("pull", consumer.pull(queue, "*", offset, 32))
                    .await
                    .expect("pull answered");
                assert_eq!(
                    *result.pull_status(),
                    PullStatus::Found,
                    "pull {topic} queue {} at {offset} of {max}",
                    queue.queue_id()
                );
                for message in result.msg_found_list().unwrap_or_default() {
                    seen.push(Seen::of(message));
                }
                offset = i64::try_from(result.next_begin_offset()).expect("offset fits i64");
            }
        }
        if seen.len() >= expected || Instant::now() >= deadline {
            assert!(
                seen.len() >= expected,
                "{topic}: {} messages stored, {expected} expected",
                seen.len()
            );
            seen.sort_by_key(|s| (s.queue_id, s.queue_offset));
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a push consumer received, by member.
#[derive(Clone, Debug, Default)]
pub struct Received(Arc<Mutex<Vec<(String, Seen)>>>);

impl Received {
    /// Everything received so far, with the member that got it.
    #[must_use]
    pub fn all(&self) -> Vec<(String, Seen)> {
        self.0.lock().expect("not poisoned").clone()
    }

    /// How many messages were received.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.lock().expect("not poisoned").len()
    }

    /// Whether none was.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bodies received, with how many times each was.
    #[must_use]
    pub fn body_counts(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for (_, seen) in self.all() {
            *counts.entry(seen.body).or_insert(0) += 1;
        }
        counts
    }
}

/// A started push consumer of `group` on `topic` / `expression`, from the first offset,
/// recording what it consumes into `received` under the name `member`.
///
/// # Panics
/// When it does not start.
pub async fn start_push_consumer(
    client: &Client,
    ferromq: &Ferromq,
    group: &str,
    subscription: (&str, &str),
    member: &str,
    received: &Received,
) -> DefaultMQPushConsumer {
    let (topic, expression) = subscription;
    let mut consumer = DefaultMQPushConsumer::builder(client.runtime())
        .consumer_group(group.to_owned())
        .name_server_addr(ferromq.namesrv_addr.clone())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build();
    bounded("subscribe", consumer.subscribe(topic, expression))
        .await
        .expect("subscribe");
    let sink = Arc::clone(&received.0);
    let member = member.to_owned();
    consumer.register_message_listener_concurrently(
        move |messages: &[&MessageExt],
              _: &ConsumeConcurrentlyContext|
              -> ClientResult<ConsumeConcurrentlyStatus> {
            let mut sink = sink.lock().expect("not poisoned");
            for message in messages {
                sink.push((member.clone(), Seen::of(message)));
            }
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        },
    );
    bounded("push consumer start", consumer.start())
        .await
        .expect("the push consumer starts");
    consumer
}

/// Runs a client call, failing the test after [`CALL_TIMEOUT`].
///
/// # Panics
/// When the call takes longer.
pub async fn bounded<F: Future>(what: &str, call: F) -> F::Output {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(output) => output,
        Err(_) => panic!("{what} did not finish within {CALL_TIMEOUT:?}"),
    }
}

/// Waits until `done` holds, checking every 20 ms; whether it did within `limit`.
pub async fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A name unique to this process and moment, for topics and groups.
#[must_use]
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        now_ns() % 1_000_000_000
    )
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

impl Ferromq {
    /// As [`Ferromq::start`], with the broker's `messageDelayLevel` set to `levels` (e.g.
    /// `"1s 2s 3s"`), kept across broker restarts.
    ///
    /// # Panics
    /// When `levels` do not parse or the broker does not start.
    #[must_use]
    pub fn start_with_delay_levels(name: &str, levels: &str) -> Ferromq {
        let levels = DelayLevels::parse(levels).expect("valid delay levels");
        Self::start_configured(name, async_flush(), Some(levels), "")
    }
}

/// A stored message as a raw pull answers it.
#[derive(Debug)]
pub struct Stored {
    /// The topic it is stored under.
    pub topic: String,
    /// Its queue offset.
    pub queue_offset: i64,
    /// `reconsumeTimes`.
    pub reconsume_times: i32,
    /// When the producer made it, ms since the epoch.
    pub born_timestamp: i64,
    /// When the broker stored this copy, ms since the epoch.
    pub store_timestamp: i64,
    /// The body, as text.
    pub body: String,
    /// Its properties, in stored order.
    pub properties: Vec<(String, String)>,
}

impl Stored {
    /// The value of property `name`.
    #[must_use]
    pub fn prop(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every message of queue `queue_id` of `topic`, pulled from offset 0 by `group` with
/// ferromq's own remoting client (no suspension); polls until there are at least `expected`,
/// for at most `limit`, and returns what is there then.
///
/// # Panics
/// When the broker cannot be reached or answers with something that is not records.
pub async fn pull_queue(
    ferromq: &Ferromq,
    (group, topic, queue_id): (&str, &str, i32),
    expected: usize,
    limit: Duration,
) -> Vec<Stored> {
    let (client, _inbound) = connect_tokio(ferromq.broker_addr, ClientConfig::default())
        .await
        .expect("connect to the broker");
    let deadline = Instant::now() + limit;
    loop {
        let mut all = Vec::new();
        for _ in 0..100 {
            let header = PullMessageRequestHeader {
                consumer_group: group.to_owned(),
                topic: topic.to_owned(),
                queue_id,
                queue_offset: i64::try_from(all.len()).expect("small"),
                max_msg_nums: 32,
                sys_flag: 0x4,
                commit_offset: 0,
                suspend_timeout_millis: 0,
                subscription: Some("*".to_owned()),
                sub_version: 0,
                expression_type: Some("TAG".to_owned()),
                max_msg_bytes: None,
                request_source: None,
                broker_name: None,
            };
            let request = RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header);
            let response = client
                .request_timeout(request, Duration::from_secs(3))
                .await
                .expect("pull answered");
            if response.code != ResponseCode::SUCCESS.0 {
                break;
            }
            let mut at = 0;
            while at < response.body.len() {
                let Ok(Record::Message { record, size }) =
                    decode_record(&response.body[at..], true)
                else {
                    panic!("{topic}: the pull body is not records at {at}");
                };
                all.push(Stored {
                    topic: record.topic.to_owned(),
                    queue_offset: record.queue_offset,
                    born_timestamp: record.born_timestamp,
                    store_timestamp: record.store_timestamp,
                    reconsume_times: record.reconsume_times,
                    body: String::from_utf8_lossy(record.body).into_owned(),
                    properties: parse_properties(record.properties),
                });
                at += size;
            }
        }
        if all.len() >= expected || Instant::now() >= deadline {
            return all;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Ferromq {
    /// As [`Ferromq::start`], with `lines` (`key=value` broker config, one a line, e.g.
    /// `"transactionCheckInterval=300"`) applied on top of the harness's config, kept across
    /// broker restarts.
    ///
    /// # Panics
    /// When a line does not parse, names an unknown key, or the broker does not start.
    #[must_use]
    pub fn start_with_config(name: &str, lines: &str) -> Ferromq {
        Self::start_configured(name, async_flush(), None, lines)
    }
}
