//! The push and lite pull consumers against real `ferromq namesrv` and `ferromq broker`
//! processes: every message counted per group and per member, order per queue, redelivery
//! after RECONSUME_LATER, rebalance as members join and leave, tag filtering, start offsets,
//! committed offsets surviving a consumer restart, the broadcasting offsets file, and the
//! lite pull consumer's poll / seek / commit.
//!
//! Method: each test starts a name server and a broker registering with it every 200 ms,
//! creates its topics on the broker, waits (bounded) for their routes, and sends messages with
//! the client's producer to chosen queues, each body unique. Consumers run with short intervals
//! (rebalance, persist, retry) so every wait is a bounded poll of an observable condition.

mod common;

use common::{connect, BrokerProcess, NamesrvProcess, TempDir};
use ferromq::client::consumer::{
    offset_file, AllocateMessageQueueAveragelyByCircle, ConsumeConcurrentlyStatus,
    ConsumeFromWhere, ConsumeOrderlyStatus, LitePullConsumer, LitePullConsumerConfig, MessageModel,
    MessageQueue, PushConsumer, PushConsumerConfig,
};
use ferromq::client::producer::Producer;
use ferromq::client::{ClientConfig, ClientError, ClientInstance, Message, MessageExt};
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::CreateTopicRequestHeader;
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

struct Cluster {
    namesrv: NamesrvProcess,
    _broker: BrokerProcess,
    dir: TempDir,
    admin: RemotingClient,
    routes: Arc<ClientInstance>,
    producer: Producer,
}

impl Cluster {
    async fn start(name: &str) -> Cluster {
        // Client logs when asked for, e.g. RUST_LOG=ferromq::client=debug.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let dir = TempDir::on_disk(name);
        let namesrv = NamesrvProcess::start("");
        let config = format!(
            "brokerName=broker-a\nbrokerClusterName=DefaultCluster\nnamesrvAddr={}\n\
             registerNameServerPeriod=200\nflushConsumerOffsetInterval=100",
            namesrv.addr
        );
        let broker = BrokerProcess::start(&dir.path().join("store"), &config);
        let admin = connect(broker.addr, SerializeType::Json).await;
        let routes = ClientInstance::new(ClientConfig::new(&namesrv.addr.to_string()));
        let mut producer_client = ClientConfig::new(&namesrv.addr.to_string());
        producer_client.instance_name = "producer".to_owned();
        let producer = Producer::new("test-producer", producer_client);
        producer.start().await.unwrap();
        Cluster {
            producer,
            namesrv,
            _broker: broker,
            dir,
            admin,
            routes,
        }
    }

    fn client(&self, instance: &str) -> ClientConfig {
        let mut config = ClientConfig::new(&self.namesrv.addr.to_string());
        config.instance_name = instance.to_owned();
        config.poll_name_server_interval = Duration::from_millis(500);
        config.heartbeat_broker_interval = Duration::from_secs(1);
        config.persist_consumer_offset_interval = Duration::from_millis(200);
        config
    }

    fn offsets_root(&self) -> PathBuf {
        self.dir.path().join("offsets")
    }

    async fn create_topic(&self, topic: &str, queues: i32) -> Vec<MessageQueue> {
        let header = CreateTopicRequestHeader::read_write(topic, queues);
        let request =
            RemotingCommand::request_with_header(RequestCode::UPDATE_AND_CREATE_TOPIC, &header);
        let response = self.admin.request(request).await.unwrap();
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(route) = self.routes.refresh_topic_route(topic).await {
                if route.subscribe_queues.len() == queues as usize {
                    let mut all = route.subscribe_queues.clone();
                    all.sort();
                    return all;
                }
            }
            assert!(Instant::now() < deadline, "no route for {topic}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends with the client's producer to one queue; returns the queue offset.
    async fn send(&self, topic: &str, queue_id: i32, body: &str, tags: &str) -> i64 {
        let message = Message::new(topic, body).with_tags(tags);
        let queue = MessageQueue::new(topic, "broker-a", queue_id);
        let sent = self.producer.send_to_queue(message, &queue).await.unwrap();
        assert_eq!(sent.message_queue, queue);
        sent.queue_offset
    }

    /// Sends `count` messages `<prefix>-<i>` round robin over `queues`, then waits until the
    /// broker has dispatched them all (pullable).
    async fn send_many(&self, topic: &str, queues: &[MessageQueue], prefix: &str, count: usize) {
        for i in 0..count {
            let queue = &queues[i % queues.len()];
            self.send(topic, queue.queue_id, &format!("{prefix}-{i}"), "TagA")
                .await;
        }
    }

    async fn max_offset(&self, mq: &MessageQueue) -> i64 {
        self.routes.get_max_offset(mq).await.unwrap()
    }
}

/// Every message a listener saw: (consumer, body, queue id, queue offset, reconsume times,
/// message id).
type Seen = Arc<Mutex<Vec<(String, String, i32, i64, i32, String)>>>;

fn record(seen: &Seen, who: &str, message: &MessageExt) {
    seen.lock().unwrap().push((
        who.to_owned(),
        String::from_utf8_lossy(&message.body).into_owned(),
        message.queue_id,
        message.queue_offset,
        message.reconsume_times,
        message.msg_id(),
    ));
}

fn bodies(seen: &Seen, who: Option<&str>) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for (consumer, body, ..) in seen.lock().unwrap().iter() {
        if who.is_none_or(|w| w == consumer) {
            *counts.entry(body.clone()).or_insert(0) += 1;
        }
    }
    counts
}

fn push_config(cluster: &Cluster, group: &str) -> PushConsumerConfig {
    let mut config = PushConsumerConfig::new(group);
    config.rebalance_interval = Duration::from_millis(300);
    config.consume_retry_delay = Duration::from_millis(200);
    config.suspend_current_queue_time = Duration::from_millis(100);
    config.pull_time_delay_when_exception = Duration::from_millis(200);
    config.lock_interval = Duration::from_secs(1);
    config.broker_suspend_max_time = Duration::from_secs(2);
    config.consumer_timeout_when_suspend = Duration::from_secs(5);
    config.offsets_root = cluster.offsets_root();
    config
}

async fn counting_consumer(
    cluster: &Cluster,
    who: &str,
    config: PushConsumerConfig,
    topic: &str,
    seen: &Seen,
) -> PushConsumer {
    let consumer = PushConsumer::new(cluster.client(who), config);
    consumer.subscribe(topic, "*").unwrap();
    let (seen, name) = (seen.clone(), who.to_owned());
    consumer.register_message_listener_concurrently(move |messages: &[MessageExt]| {
        for message in messages {
            record(&seen, &name, message);
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    consumer.start().await.unwrap();
    consumer
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The queues of `topic` each consumer owns, checked for overlap and coverage.
fn ownership(consumers: &[&PushConsumer], all: &[MessageQueue]) -> bool {
    let topic = &all[0].topic;
    let mut owned = Vec::new();
    for consumer in consumers {
        owned.extend(
            consumer
                .assigned_queues()
                .into_iter()
                .filter(|q| &q.topic == topic),
        );
    }
    let unique: BTreeSet<&MessageQueue> = owned.iter().collect();
    unique.len() == owned.len() && unique.len() == all.len()
}

/// Waits until every queue's consumed offset reached its max offset on its owner.
async fn wait_committed(cluster: &Cluster, consumers: &[&PushConsumer], all: &[MessageQueue]) {
    let mut max = BTreeMap::new();
    for mq in all {
        max.insert(mq.clone(), cluster.max_offset(mq).await);
    }
    wait_until("every queue consumed to its end", || {
        all.iter().all(|mq| {
            consumers
                .iter()
                .any(|c| c.consumed_offset(mq) == Some(max[mq]))
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clustering_consumes_every_message_exactly_once_per_group() {
    let cluster = Cluster::start("consumer-clustering").await;
    let queues = cluster.create_topic("ClusterT", 8).await;
    let seen: Seen = Arc::default();
    let mut config = push_config(&cluster, "cluster-g");
    // The circle strategy here; the rebalance test uses the default (average).
    config.allocate_strategy = Arc::new(AllocateMessageQueueAveragelyByCircle);
    let c1 = counting_consumer(&cluster, "c1", config.clone(), "ClusterT", &seen).await;
    let c2 = counting_consumer(&cluster, "c2", config, "ClusterT", &seen).await;
    wait_until("two members sharing 8 queues", || {
        ownership(&[&c1, &c2], &queues)
            && !c1.assigned_queues().is_empty()
            && !c2.assigned_queues().is_empty()
    })
    .await;
    cluster.send_many("ClusterT", &queues, "m", 200).await;
    wait_until("200 messages", || bodies(&seen, None).len() == 200).await;
    wait_committed(&cluster, &[&c1, &c2], &queues).await;
    let mut ids: HashMap<String, usize> = HashMap::new();
    for (.., id) in seen.lock().unwrap().iter() {
        *ids.entry(id.clone()).or_insert(0) += 1;
    }
    assert_eq!(ids.len(), 200, "every message id seen");
    let twice: Vec<_> = ids.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    assert!(!bodies(&seen, Some("c1")).is_empty() && !bodies(&seen, Some("c2")).is_empty());
    c1.shutdown().await;
    c2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcasting_delivers_to_every_member_and_keeps_offsets_in_a_file() {
    let cluster = Cluster::start("consumer-broadcasting").await;
    let queues = cluster.create_topic("BroadT", 4).await;
    let seen: Seen = Arc::default();
    let mut config = push_config(&cluster, "broad-g");
    config.message_model = MessageModel::Broadcasting;
    let c1 = counting_consumer(&cluster, "b1", config.clone(), "BroadT", &seen).await;
    let c2 = counting_consumer(&cluster, "b2", config.clone(), "BroadT", &seen).await;
    wait_until("both members owning every queue", || {
        c1.assigned_queues().len() == 4 && c2.assigned_queues().len() == 4
    })
    .await;
    cluster.send_many("BroadT", &queues, "b", 40).await;
    wait_until("40 messages at each member", || {
        bodies(&seen, Some("b1")).len() == 40 && bodies(&seen, Some("b2")).len() == 40
    })
    .await;
    wait_committed(&cluster, &[&c1], &queues).await;
    wait_committed(&cluster, &[&c2], &queues).await;
    for who in ["b1", "b2"] {
        assert!(
            bodies(&seen, Some(who)).values().all(|n| *n == 1),
            "{who} saw duplicates"
        );
    }
    let client_id = c1.client_id();
    c1.shutdown().await;
    let path = offset_file::offsets_path(&cluster.offsets_root(), &client_id, "broad-g");
    let table = offset_file::read(&path).unwrap();
    assert_eq!(table.len(), 4, "{}", path.display());
    assert_eq!(table.values().sum::<i64>(), 40);

    // The same member restarted reads its file: it resumes after the 40.
    let again: Seen = Arc::default();
    let c1 = counting_consumer(&cluster, "b1", config, "BroadT", &again).await;
    wait_until("restarted member owning every queue", || {
        c1.assigned_queues().len() == 4
    })
    .await;
    cluster.send_many("BroadT", &queues, "late", 8).await;
    wait_until("the 8 new messages", || bodies(&again, None).len() == 8).await;
    wait_committed(&cluster, &[&c1], &queues).await;
    let counts = bodies(&again, None);
    assert!(counts.keys().all(|b| b.starts_with("late-")), "{counts:?}");
    c1.shutdown().await;
    c2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_listener_sees_each_queue_in_order() {
    let cluster = Cluster::start("consumer-orderly").await;
    let queues = cluster.create_topic("OrderT", 4).await;
    let seen: Seen = Arc::default();
    let suspended = Arc::new(Mutex::new(0));
    let mut consumers = Vec::new();
    for who in ["o1", "o2"] {
        let consumer = PushConsumer::new(cluster.client(who), push_config(&cluster, "order-g"));
        consumer.subscribe("OrderT", "*").unwrap();
        let (seen, suspended, name) = (seen.clone(), suspended.clone(), who.to_owned());
        consumer.register_message_listener_orderly(move |messages: &[MessageExt]| {
            let first = &messages[0];
            // Offset 3 of queue 0 is refused once: the queue must stop and retry it first.
            if first.queue_id == 0 && first.queue_offset == 3 {
                let mut suspended = suspended.lock().unwrap();
                if *suspended == 0 {
                    *suspended += 1;
                    return ConsumeOrderlyStatus::SuspendCurrentQueueAMoment;
                }
            }
            for message in messages {
                record(&seen, &name, message);
            }
            ConsumeOrderlyStatus::Success
        });
        consumer.start().await.unwrap();
        consumers.push(consumer);
    }
    let refs: Vec<&PushConsumer> = consumers.iter().collect();
    wait_until("two members sharing 4 locked queues", || {
        ownership(&refs, &queues)
    })
    .await;
    cluster.send_many("OrderT", &queues, "o", 100).await;
    wait_until("100 messages", || bodies(&seen, None).len() == 100).await;
    let mut per_queue: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (_, _, queue, offset, ..) in seen.lock().unwrap().iter() {
        per_queue.entry(*queue).or_default().push(*offset);
    }
    for (queue, offsets) in &per_queue {
        let expected: Vec<i64> = (0..25).collect();
        assert_eq!(offsets, &expected, "queue {queue} out of order");
    }
    assert_eq!(*suspended.lock().unwrap(), 1);
    for consumer in &consumers {
        consumer.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconsume_later_delivers_the_message_again() {
    let cluster = Cluster::start("consumer-reconsume").await;
    let queues = cluster.create_topic("RetryT", 2).await;
    let seen: Seen = Arc::default();
    let consumer = PushConsumer::new(cluster.client("r1"), push_config(&cluster, "retry-g"));
    consumer.subscribe("RetryT", "*").unwrap();
    let recorder = seen.clone();
    consumer.register_message_listener_concurrently(move |messages: &[MessageExt]| {
        let mut later = false;
        for message in messages {
            record(&recorder, "r1", message);
            later |= message.body == b"r-3" && message.reconsume_times == 0;
        }
        if later {
            ConsumeConcurrentlyStatus::ReconsumeLater
        } else {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    });
    consumer.start().await.unwrap();
    wait_until("the consumer owning both queues", || {
        consumer
            .assigned_queues()
            .iter()
            .filter(|q| q.topic == "RetryT")
            .count()
            == 2
    })
    .await;
    cluster.send_many("RetryT", &queues, "r", 10).await;
    wait_until("r-3 delivered twice", || {
        bodies(&seen, None).get("r-3") == Some(&2)
    })
    .await;
    wait_until("all 10 delivered", || bodies(&seen, None).len() == 10).await;
    let deliveries: Vec<i32> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, body, ..)| body == "r-3")
        .map(|(.., times, _)| *times)
        .collect();
    assert_eq!(deliveries, vec![0, 1], "reconsume times of each delivery");
    wait_committed(&cluster, &[&consumer], &queues).await;
    let counts = bodies(&seen, None);
    assert!(
        counts.iter().all(|(b, n)| *n == 1 || b == "r-3"),
        "{counts:?}"
    );
    consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalance_as_members_join_and_leave_owns_every_queue_once() {
    let cluster = Cluster::start("consumer-rebalance").await;
    let queues = cluster.create_topic("RebalT", 6).await;
    let seen: Seen = Arc::default();
    let config = push_config(&cluster, "rebal-g");
    let c1 = counting_consumer(&cluster, "j1", config.clone(), "RebalT", &seen).await;
    wait_until("one member owning all", || ownership(&[&c1], &queues)).await;
    let c2 = counting_consumer(&cluster, "j2", config.clone(), "RebalT", &seen).await;
    wait_until("two members 3 + 3", || {
        ownership(&[&c1, &c2], &queues) && c2.assigned_queues().len() >= 3
    })
    .await;
    let c3 = counting_consumer(&cluster, "j3", config, "RebalT", &seen).await;
    let topic_share = |c: &PushConsumer| {
        c.assigned_queues()
            .iter()
            .filter(|q| q.topic == "RebalT")
            .count()
    };
    wait_until("three members 2 + 2 + 2", || {
        ownership(&[&c1, &c2, &c3], &queues) && [&c1, &c2, &c3].iter().all(|c| topic_share(c) == 2)
    })
    .await;
    c2.shutdown().await;
    wait_until("two members left, 3 + 3", || {
        ownership(&[&c1, &c3], &queues) && topic_share(&c1) == 3 && topic_share(&c3) == 3
    })
    .await;
    c1.shutdown().await;
    wait_until("the last member owning all", || ownership(&[&c3], &queues)).await;
    // Messages sent now reach the last member only, each once.
    cluster.send_many("RebalT", &queues, "late", 12).await;
    wait_until("12 messages", || bodies(&seen, Some("j3")).len() == 12).await;
    c3.shutdown().await;
    // Each once, and to no other member: every `late` body counted over all members.
    let late: BTreeMap<String, usize> = bodies(&seen, None)
        .into_iter()
        .filter(|(body, _)| body.starts_with("late-"))
        .collect();
    let expected: BTreeMap<String, usize> = (0..12).map(|i| (format!("late-{i}"), 1)).collect();
    assert_eq!(late, expected, "each late message once, to the last member");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_expression_filters_messages() {
    let cluster = Cluster::start("consumer-tags").await;
    let queues = cluster.create_topic("TagT", 2).await;
    let seen: Seen = Arc::default();
    let consumer = PushConsumer::new(cluster.client("t1"), push_config(&cluster, "tag-g"));
    consumer.subscribe("TagT", "TagA || TagC").unwrap();
    let recorder = seen.clone();
    consumer.register_message_listener_concurrently(move |messages: &[MessageExt]| {
        for message in messages {
            let tag = message.tags().unwrap_or("").to_owned();
            record(&recorder, &tag, message);
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    consumer.start().await.unwrap();
    wait_until("the consumer owning both queues", || {
        consumer
            .assigned_queues()
            .iter()
            .filter(|q| q.topic == "TagT")
            .count()
            == 2
    })
    .await;
    for i in 0..30 {
        let tag = ["TagA", "TagB", "TagC"][i % 3];
        cluster
            .send("TagT", (i % 2) as i32, &format!("t-{i}"), tag)
            .await;
    }
    wait_until("20 matching messages", || bodies(&seen, None).len() == 20).await;
    wait_committed(&cluster, &[&consumer], &queues).await;
    assert!(bodies(&seen, Some("TagB")).is_empty());
    assert_eq!(bodies(&seen, Some("TagA")).len(), 10);
    assert_eq!(bodies(&seen, Some("TagC")).len(), 10);
    consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_offsets_of_a_new_group() {
    let cluster = Cluster::start("consumer-from").await;
    let queues = cluster.create_topic("FromT", 2).await;
    cluster.send_many("FromT", &queues, "old", 10).await;
    // FIRST_OFFSET starts at 0. LAST_OFFSET asks the broker first, and a broker answers 0
    // for a group without an offset on a queue that still begins at 0 (Java's
    // ConsumerManageProcessor does the same), so both read the 10 old messages.
    for (group, from) in [
        ("first-g", ConsumeFromWhere::FirstOffset),
        ("last-g", ConsumeFromWhere::LastOffset),
    ] {
        let seen: Seen = Arc::default();
        let mut config = push_config(&cluster, group);
        config.consume_from_where = from;
        let consumer = counting_consumer(&cluster, group, config, "FromT", &seen).await;
        wait_until("the 10 old messages", || bodies(&seen, None).len() == 10).await;
        consumer.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_consumer_resumes_at_the_committed_offsets() {
    let cluster = Cluster::start("consumer-resume").await;
    let queues = cluster.create_topic("ResumeT", 4).await;
    cluster.send_many("ResumeT", &queues, "m", 100).await;
    let seen: Seen = Arc::default();
    let mut config = push_config(&cluster, "resume-g");
    // One listener call at a time, slowly: the shutdown lands mid-stream with at most one
    // message in flight.
    config.consume_thread_max = 1;
    let first = PushConsumer::new(cluster.client("s1"), config.clone());
    first.subscribe("ResumeT", "*").unwrap();
    let recorder = seen.clone();
    first.register_message_listener_concurrently(move |messages: &[MessageExt]| {
        std::thread::sleep(Duration::from_millis(5));
        for message in messages {
            record(&recorder, "s1", message);
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    first.start().await.unwrap();
    wait_until("30 messages", || bodies(&seen, Some("s1")).len() >= 30).await;
    first.shutdown().await;
    let before = bodies(&seen, Some("s1")).len();
    assert!(
        before < 100,
        "the first consumer finished before its shutdown"
    );
    let mut committed = BTreeMap::new();
    for mq in &queues {
        let offset = cluster.routes.query_consumer_offset("resume-g", mq).await;
        committed.insert(mq.queue_id, offset.unwrap().unwrap_or(0));
    }

    cluster.send_many("ResumeT", &queues, "n", 20).await;
    let second = counting_consumer(&cluster, "s2", config, "ResumeT", &seen).await;
    wait_until("every message consumed by one of the two", || {
        bodies(&seen, None).len() == 120
    })
    .await;
    wait_committed(&cluster, &[&second], &queues).await;
    // The second consumer starts exactly at the committed offsets: everything below them was
    // consumed by the first, everything from them on comes (once) to the second.
    let seen = seen.lock().unwrap().clone();
    let by = |who: &str| -> BTreeSet<(i32, i64)> {
        seen.iter()
            .filter(|(w, ..)| w == who)
            .map(|(_, _, q, o, ..)| (*q, *o))
            .collect()
    };
    let (first_seen, second_seen) = (by("s1"), by("s2"));
    let second_count = seen.iter().filter(|(w, ..)| w == "s2").count();
    assert_eq!(
        second_count,
        second_seen.len(),
        "the second consumer saw duplicates"
    );
    for mq in &queues {
        let max = cluster.max_offset(mq).await;
        let from = committed[&mq.queue_id];
        for offset in 0..max {
            let key = (mq.queue_id, offset);
            if offset < from {
                assert!(
                    first_seen.contains(&key),
                    "committed past unconsumed {key:?}"
                );
                assert!(!second_seen.contains(&key), "{key:?} consumed again");
            } else {
                assert!(second_seen.contains(&key), "{key:?} lost");
            }
        }
    }
    let again = first_seen.intersection(&second_seen).count();
    eprintln!("consumed by the first and again by the second (uncommitted): {again}");
    second.shutdown().await;
}

fn lite_config(group: &str) -> LitePullConsumerConfig {
    let mut config = LitePullConsumerConfig::new(group);
    config.broker_suspend_max_time = Duration::from_secs(1);
    config.consumer_timeout_when_suspend = Duration::from_secs(5);
    config.rebalance_interval = Duration::from_millis(300);
    config.pull_time_delay_when_exception = Duration::from_millis(200);
    config
}

async fn poll_until(
    consumer: &LitePullConsumer,
    what: &str,
    mut done: impl FnMut(&[MessageExt]) -> bool,
) -> Vec<MessageExt> {
    let deadline = Instant::now() + WAIT;
    let mut all = Vec::new();
    loop {
        all.extend(consumer.poll(Duration::from_millis(200)).await);
        if done(&all) {
            return all;
        }
        assert!(Instant::now() < deadline, "timed out polling for {what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_polls_seeks_and_commits_assigned_queues() {
    let cluster = Cluster::start("consumer-lite").await;
    let queues = cluster.create_topic("LiteT", 2).await;
    for i in 0..20 {
        cluster.send("LiteT", 0, &format!("a-{i}"), "TagA").await;
    }
    for i in 0..10 {
        cluster.send("LiteT", 1, &format!("b-{i}"), "TagA").await;
    }
    let mut config = lite_config("lite-g");
    config.auto_commit = false;
    let consumer = LitePullConsumer::new(cluster.client("l1"), config);
    let fetched = consumer.fetch_message_queues("LiteT").await.unwrap();
    assert_eq!(fetched.len(), 2);
    consumer.assign(fetched).await.unwrap();
    consumer.start().await.unwrap();
    let (q0, q1) = (&queues[0], &queues[1]);
    let all = poll_until(&consumer, "30 messages", |m| m.len() >= 30).await;
    assert_eq!(all.len(), 30);
    for queue in [0, 1] {
        let offsets: Vec<i64> = all
            .iter()
            .filter(|m| m.queue_id == queue)
            .map(|m| m.queue_offset)
            .collect();
        let expected: Vec<i64> = (0..if queue == 0 { 20 } else { 10 }).collect();
        assert_eq!(offsets, expected);
    }
    assert_eq!(
        consumer.committed(q0).await.unwrap(),
        0,
        "nothing committed yet"
    );
    consumer.commit_sync().await;
    assert_eq!(consumer.committed(q0).await.unwrap(), 20);
    assert_eq!(consumer.committed(q1).await.unwrap(), 10);

    consumer.seek(q0, 5).unwrap();
    let again = poll_until(&consumer, "q0 from 5", |m| m.len() >= 15).await;
    let offsets: Vec<i64> = again.iter().map(|m| m.queue_offset).collect();
    assert_eq!(offsets, (5..20).collect::<Vec<i64>>());
    assert!(again.iter().all(|m| m.queue_id == 0));

    consumer.seek_to_begin(q1).await.unwrap();
    let again = poll_until(&consumer, "q1 from 0", |m| m.len() >= 10).await;
    assert_eq!(again[0].queue_offset, 0);
    assert!(again.iter().all(|m| m.queue_id == 1));

    consumer.seek_to_end(q0).await.unwrap();
    cluster.send("LiteT", 0, "a-20", "TagA").await;
    let again = poll_until(&consumer, "the new message", |m| !m.is_empty()).await;
    assert_eq!(again[0].queue_offset, 20);
    assert_eq!(again[0].body, b"a-20");
    consumer.commit_sync().await;
    assert_eq!(consumer.committed(q0).await.unwrap(), 21);
    consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_subscribes_and_auto_commits() {
    let cluster = Cluster::start("consumer-lite-sub").await;
    let queues = cluster.create_topic("LiteS", 4).await;
    cluster.send_many("LiteS", &queues, "s", 40).await;
    let mut config = lite_config("lite-sub-g");
    config.auto_commit_interval = Duration::from_millis(100);
    config.consume_from_where = ConsumeFromWhere::FirstOffset;
    let consumer = LitePullConsumer::new(cluster.client("ls1"), config);
    consumer.subscribe("LiteS", "TagA").unwrap();
    consumer.start().await.unwrap();
    let all = poll_until(&consumer, "40 messages", |m| m.len() >= 40).await;
    let unique: BTreeSet<Vec<u8>> = all.iter().map(|m| m.body.clone()).collect();
    assert_eq!(unique.len(), 40);
    assert_eq!(consumer.assigned_queues().len(), 4);
    // A poll after the auto-commit interval commits what the previous polls returned.
    let deadline = Instant::now() + WAIT;
    loop {
        let _ = consumer.poll(Duration::from_millis(150)).await;
        let mut committed = 0;
        for mq in &queues {
            committed += consumer.committed(mq).await.unwrap().max(0);
        }
        if committed == 40 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "auto commit never reached 40 ({committed})"
        );
    }
    consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_control_stops_pulling_a_full_process_queue() {
    let cluster = Cluster::start("consumer-flow").await;
    let queues = cluster.create_topic("FlowT", 1).await;
    cluster.send_many("FlowT", &queues, "f", 100).await;
    let mut config = push_config(&cluster, "flow-g");
    config.pull_threshold_for_queue = 10;
    config.pull_batch_size = 4;
    config.consume_thread_max = 1;
    config.pull_time_delay_when_flow_control = Duration::from_millis(10);
    let consumer = PushConsumer::new(cluster.client("f1"), config);
    consumer.subscribe("FlowT", "*").unwrap();
    // The listener holds its first call until released: nothing is consumed meanwhile.
    let gate = Arc::new(std::sync::Barrier::new(2));
    let consumed = Arc::new(Mutex::new(0usize));
    let (listener_gate, counter) = (gate.clone(), consumed.clone());
    consumer.register_message_listener_concurrently(move |messages: &[MessageExt]| {
        let mut count = counter.lock().unwrap();
        if *count == 0 {
            drop(count);
            listener_gate.wait();
            count = counter.lock().unwrap();
        }
        *count += messages.len();
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    consumer.start().await.unwrap();
    let mq = &queues[0];
    wait_until("the process queue filling", || {
        consumer.cached_message_count(mq).is_some_and(|n| n > 10)
    })
    .await;
    // Over the threshold it stops: at most one more pull batch lands on top.
    let watch_until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < watch_until {
        let held = consumer.cached_message_count(mq).unwrap_or(0);
        assert!(held <= 10 + 4, "flow control let {held} messages in");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::task::spawn_blocking(move || gate.wait())
        .await
        .unwrap();
    wait_until("all 100 consumed", || *consumed.lock().unwrap() == 100).await;
    consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_of_the_retry_topic_get_their_original_topic_back() {
    let cluster = Cluster::start("consumer-retry-topic").await;
    cluster.create_topic("OrigT", 1).await;
    let seen: Seen = Arc::default();
    let topics = Arc::new(Mutex::new(Vec::new()));
    let consumer = PushConsumer::new(cluster.client("rt1"), push_config(&cluster, "rt-g"));
    consumer.subscribe("OrigT", "*").unwrap();
    let (recorder, topic_log) = (seen.clone(), topics.clone());
    consumer.register_message_listener_concurrently(move |messages: &[MessageExt]| {
        for message in messages {
            record(&recorder, "rt1", message);
            topic_log.lock().unwrap().push(message.topic.clone());
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    consumer.start().await.unwrap();
    // Clustering subscribes to %RETRY%<group> too; the broker creates it at the heartbeat
    // and the consumer picks it up once the name server has its route.
    wait_until("the retry queue owned", || {
        consumer
            .assigned_queues()
            .iter()
            .any(|q| q.topic == "%RETRY%rt-g")
    })
    .await;
    let mut message = Message::new("%RETRY%rt-g", "retried");
    message.put_property("RETRY_TOPIC", "OrigT");
    let sent = cluster.producer.send(message).await.unwrap();
    assert_eq!(sent.message_queue.topic, "%RETRY%rt-g");
    wait_until("the retried message", || bodies(&seen, None).len() == 1).await;
    assert_eq!(*topics.lock().unwrap(), vec!["OrigT".to_owned()]);
    consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_queues_move_between_members_without_reordering() {
    let cluster = Cluster::start("consumer-orderly-move").await;
    let queues = cluster.create_topic("OrderMoveT", 4).await;
    cluster.send_many("OrderMoveT", &queues, "m", 200).await;
    let seen: Seen = Arc::default();
    let start = |who: &'static str| {
        let consumer = PushConsumer::new(cluster.client(who), push_config(&cluster, "move-g"));
        consumer.subscribe("OrderMoveT", "*").unwrap();
        let seen = seen.clone();
        consumer.register_message_listener_orderly(move |messages: &[MessageExt]| {
            std::thread::sleep(Duration::from_millis(20));
            for message in messages {
                record(&seen, who, message);
            }
            ConsumeOrderlyStatus::Success
        });
        consumer
    };
    let c1 = start("m1");
    c1.start().await.unwrap();
    wait_until("the first member under way", || {
        bodies(&seen, None).len() >= 20
    })
    .await;
    // The second member takes half the queues while the first is consuming them.
    let c2 = start("m2");
    c2.start().await.unwrap();
    wait_until("200 messages", || bodies(&seen, None).len() >= 200).await;
    let seen = seen.lock().unwrap().clone();
    let mut per_queue: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (_, _, queue, offset, ..) in &seen {
        per_queue.entry(*queue).or_default().push(*offset);
    }
    for (queue, offsets) in &per_queue {
        assert_eq!(offsets, &(0..50).collect::<Vec<i64>>(), "queue {queue}");
    }
    assert!(
        seen.iter().any(|(who, ..)| who == "m2"),
        "the second member never took a queue over"
    );
    c1.shutdown().await;
    c2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_brokers_notification_triggers_a_rebalance() {
    let cluster = Cluster::start("consumer-notify").await;
    let queues = cluster.create_topic("NotifyT", 4).await;
    let seen: Seen = Arc::default();
    let mut config = push_config(&cluster, "notify-g");
    // No periodic rebalance within the test: only NOTIFY_CONSUMER_IDS_CHANGED can move queues.
    config.rebalance_interval = Duration::from_secs(3600);
    let c1 = counting_consumer(&cluster, "n1", config.clone(), "NotifyT", &seen).await;
    wait_until("one member owning all", || ownership(&[&c1], &queues)).await;
    let c2 = counting_consumer(&cluster, "n2", config, "NotifyT", &seen).await;
    wait_until("the first member giving up half", || {
        ownership(&[&c1, &c2], &queues)
            && c1
                .assigned_queues()
                .iter()
                .filter(|q| q.topic == "NotifyT")
                .count()
                == 2
    })
    .await;
    c2.shutdown().await;
    wait_until("the first member taking all back", || {
        ownership(&[&c1], &queues)
    })
    .await;
    c1.shutdown().await;
}

/// Pausing a lite pull queue stops its pulls until it is resumed, three rounds over: what is
/// sent to it meanwhile is not polled while the other queue's messages are, and after the
/// resume its messages arrive, in order, from where it stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_lite_pull_queue_is_not_pulled_until_resumed() {
    let cluster = Cluster::start("consumer-pause").await;
    let queues = cluster.create_topic("PauseT", 2).await;
    let consumer = LitePullConsumer::new(cluster.client("p1"), lite_config("pause-g"));
    consumer.assign(queues.clone()).await.unwrap();
    consumer.start().await.unwrap();
    let (q0, q1) = (&queues[0], &queues[1]);
    for round in 0..3_i64 {
        consumer.pause(std::slice::from_ref(q0));
        assert!(consumer.is_paused(q0) && !consumer.is_paused(q1));
        // A pull of q0 held by the broker when it was paused ends empty within the broker's
        // suspend time (1 s); after that nothing pulls q0.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        for i in 0..5 {
            cluster
                .send("PauseT", 0, &format!("p{round}-{i}"), "TagA")
                .await;
            cluster
                .send("PauseT", 1, &format!("o{round}-{i}"), "TagA")
                .await;
        }
        let polled = poll_until(&consumer, "q1's five", |m| m.len() >= 5).await;
        let mut more = polled;
        let quiet = Instant::now() + Duration::from_secs(2);
        while Instant::now() < quiet {
            more.extend(consumer.poll(Duration::from_millis(200)).await);
        }
        let queue_ids: Vec<i32> = more.iter().map(|m| m.queue_id).collect();
        assert_eq!(
            queue_ids, [1; 5],
            "round {round}: a paused queue was pulled"
        );

        consumer.resume(std::slice::from_ref(q0));
        assert!(!consumer.is_paused(q0));
        let resumed = poll_until(&consumer, "q0's five", |m| m.len() >= 5).await;
        let offsets: Vec<(i32, i64)> = resumed
            .iter()
            .map(|m| (m.queue_id, m.queue_offset))
            .collect();
        let expected: Vec<(i32, i64)> = (0..5).map(|i| (0, round * 5 + i)).collect();
        assert_eq!(offsets, expected, "round {round}");
    }
    // Queues it does not own are ignored.
    consumer.pause(&[MessageQueue::new("PauseT", "broker-a", 7)]);
    assert!(!consumer.is_paused(&MessageQueue::new("PauseT", "broker-a", 7)));
    consumer.shutdown().await;
}

/// The client instance's admin calls (Java's `MQAdmin`): `create_topic` makes a topic on the
/// masters of the key topic's route, refusing a bad name or a key with no route, and
/// `earliest_msg_store_time` is -1 for an empty queue and then the first message's store time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instance_creates_topics_and_reads_the_earliest_store_time() {
    let cluster = Cluster::start("consumer-admin-calls").await;
    let instance = &cluster.routes;
    let deadline = Instant::now() + WAIT;
    while instance.fetch_route("TBW102").await.is_err() {
        assert!(Instant::now() < deadline, "the broker never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = instance.create_topic("TBW102", "bad topic!", 3).await;
    assert!(
        matches!(&refused, Err(ClientError::InvalidMessage(m)) if m.contains("illegal characters")),
        "{refused:?}"
    );
    let no_key = instance
        .create_topic("NoSuchKeyTopic", "MadeByClient", 3)
        .await;
    assert!(
        matches!(no_key, Err(ClientError::NoRoute { .. })),
        "{no_key:?}"
    );

    instance
        .create_topic("TBW102", "MadeByClient", 3)
        .await
        .unwrap();
    let queues = loop {
        if let Ok(route) = instance.refresh_topic_route("MadeByClient").await {
            break route.subscribe_queues.clone();
        }
        assert!(Instant::now() < deadline, "no route for the new topic");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(queues.len(), 3);
    let q0 = MessageQueue::new("MadeByClient", "broker-a", 0);
    assert_eq!(instance.earliest_msg_store_time(&q0).await.unwrap(), -1);
    let before = ferromq::calendar::now_ms();
    cluster.send("MadeByClient", 0, "first", "TagA").await;
    let after = ferromq::calendar::now_ms();
    cluster.send("MadeByClient", 0, "second", "TagA").await;
    // The answer comes from the ConsumeQueue, which the broker builds just after the write.
    let earliest = loop {
        let earliest = instance.earliest_msg_store_time(&q0).await.unwrap();
        if earliest != -1 {
            break earliest;
        }
        assert!(
            Instant::now() < deadline,
            "the sends never reached the ConsumeQueue"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        (before..=after).contains(&earliest),
        "{before} <= {earliest} <= {after}"
    );
}

/// A suspended push consumer pulls nothing until it is resumed, three rounds over: messages
/// sent meanwhile reach the listener only after the resume, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_push_consumer_pulls_nothing_until_resumed() {
    let cluster = Cluster::start("consumer-suspend").await;
    let queues = cluster.create_topic("SuspendT", 2).await;
    let seen: Seen = Arc::default();
    let config = push_config(&cluster, "suspend-g");
    let consumer = counting_consumer(&cluster, "s1", config, "SuspendT", &seen).await;
    cluster.send_many("SuspendT", &queues, "warm", 4).await;
    wait_until("the first four", || seen.lock().unwrap().len() == 4).await;
    for round in 0..3 {
        consumer.suspend();
        assert!(consumer.is_suspended());
        // Pulls the broker holds (up to its 2 s suspend) end empty; none starts after.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let before = seen.lock().unwrap().len();
        cluster
            .send_many("SuspendT", &queues, &format!("r{round}"), 6)
            .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            seen.lock().unwrap().len(),
            before,
            "round {round}: pulled while suspended"
        );
        consumer.resume();
        assert!(!consumer.is_suspended());
        wait_until("the round's six", || {
            seen.lock().unwrap().len() == before + 6
        })
        .await;
    }
    let counts = bodies(&seen, None);
    assert_eq!(counts.len(), 22);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    consumer.shutdown().await;
}
