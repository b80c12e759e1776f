//! The client instance against real `ferromq namesrv` and `ferromq broker` processes: routes,
//! consumer heartbeats and NOTIFY_CONSUMER_IDS_CHANGED, the consumer helper calls (member
//! list, offsets, pulls) and UNREGISTER_CLIENT at shutdown.

mod common;

use common::{BrokerProcess, NamesrvProcess, TempDir};
use ferromq::client::{
    ClientConfig, ClientError, ClientInstance, ConsumerData, ConsumerInner, Message, MessageQueue,
    Producer, PullStatus, SubscriptionData,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);
const TOPIC: &str = "InstanceT";
const GROUP: &str = "instance_cg";

struct Cluster {
    _broker: BrokerProcess,
    namesrv: NamesrvProcess,
    _dir: TempDir,
}

fn cluster(name: &str) -> Cluster {
    let namesrv = NamesrvProcess::start("");
    let dir = TempDir::on_disk(name);
    // Java registers an auto-created topic at once; ferromq at its next registration, so
    // register often.
    let config = format!(
        "brokerName=broker-a\nnamesrvAddr={}\nregisterNameServerPeriod=200",
        namesrv.addr
    );
    let broker = BrokerProcess::start(&dir.path().join("store"), &config);
    Cluster {
        _broker: broker,
        namesrv,
        _dir: dir,
    }
}

/// A consumer that only counts rebalance notifications.
struct CountingConsumer {
    notified: AtomicUsize,
}

impl ConsumerInner for CountingConsumer {
    fn consumer_data(&self) -> ConsumerData {
        ConsumerData {
            group_name: GROUP.into(),
            consume_type: Some("CONSUME_PASSIVELY".into()),
            message_model: Some("CLUSTERING".into()),
            consume_from_where: Some("CONSUME_FROM_LAST_OFFSET".into()),
            subscription_data_set: vec![SubscriptionData::from_expression(TOPIC, "*")],
            unit_mode: false,
        }
    }

    fn on_consumer_ids_changed(&self) {
        self.notified.fetch_add(1, Ordering::SeqCst);
    }

    fn topics(&self) -> Vec<String> {
        vec![TOPIC.to_owned()]
    }
}

fn instance(cluster: &Cluster, name: &str) -> Arc<ClientInstance> {
    let mut config = ClientConfig::new(&cluster.namesrv.addr.to_string());
    config.instance_name = name.to_owned();
    ClientInstance::new(config)
}

/// Polls `check` every 20 ms until it holds (bounded by [`DEADLINE`]).
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `count` messages to `TOPIC` so that the topic exists with 4 queues.
async fn create_topic(cluster: &Cluster, count: usize) -> Vec<MessageQueue> {
    let producer = Producer::new(
        "instance_pg",
        ClientConfig::new(&cluster.namesrv.addr.to_string()),
    );
    eventually("the broker registration", || async {
        producer.instance().fetch_route("TBW102").await.is_ok()
    })
    .await;
    producer.start().await.unwrap();
    let queue = producer.publish_queues(TOPIC).await.unwrap()[0].clone();
    for i in 0..count {
        producer
            .send_to_queue(Message::new(TOPIC, format!("m{i}")), &queue)
            .await
            .unwrap();
    }
    eventually("the topic's own route", || async {
        producer.instance().fetch_route(TOPIC).await.is_ok()
    })
    .await;
    let queues = producer.publish_queues(TOPIC).await.unwrap();
    producer.shutdown().await;
    queues
}

#[test]
fn members_offsets_and_pulls_through_the_instance() {
    let cluster = cluster("instance-members");
    common::runtime().block_on(async {
        let queues = create_topic(&cluster, 3).await;
        let queue = queues[0].clone();
        let first = instance(&cluster, "first");
        first.start().unwrap();
        let consumer = Arc::new(CountingConsumer {
            notified: AtomicUsize::new(0),
        });
        assert!(first.register_consumer(GROUP, consumer.clone()));
        assert!(
            !first.register_consumer(GROUP, consumer.clone()),
            "one consumer per group"
        );
        first.topic_route(TOPIC).await.unwrap();
        first.send_heartbeat_to_all_brokers().await.unwrap();
        let ids = first.consumer_id_list(TOPIC, GROUP).await.unwrap();
        assert_eq!(ids, vec![first.client_id().to_owned()]);

        // A second member joins: the broker notifies the first on its connection.
        let second = instance(&cluster, "second");
        second.start().unwrap();
        let other = Arc::new(CountingConsumer {
            notified: AtomicUsize::new(0),
        });
        second.register_consumer(GROUP, other);
        second.topic_route(TOPIC).await.unwrap();
        let notified_before = consumer.notified.load(Ordering::SeqCst);
        second.send_heartbeat_to_all_brokers().await.unwrap();
        eventually("NOTIFY_CONSUMER_IDS_CHANGED", || async {
            consumer.notified.load(Ordering::SeqCst) > notified_before
        })
        .await;
        let mut ids = first.consumer_id_list(TOPIC, GROUP).await.unwrap();
        ids.sort();
        let mut expected = vec![first.client_id().to_owned(), second.client_id().to_owned()];
        expected.sort();
        assert_eq!(ids, expected);

        // Offsets: none committed yet (Java answers 0 while the queue's messages are all in
        // memory, QUERY_NOT_FOUND otherwise), then a committed one is read back.
        let fresh = first.query_consumer_offset(GROUP, &queue).await.unwrap();
        assert!(matches!(fresh, None | Some(0)), "{fresh:?}");
        first
            .update_consumer_offset(GROUP, &queue, 2)
            .await
            .unwrap();
        eventually("the committed offset", || async {
            first.query_consumer_offset(GROUP, &queue).await.unwrap() == Some(2)
        })
        .await;
        assert_eq!(first.get_min_offset(&queue).await.unwrap(), 0);
        // The max offset is published by dispatch, after the sends were answered.
        eventually("the queue's max offset", || async {
            first.get_max_offset(&queue).await.unwrap() == 3
        })
        .await;
        assert_eq!(first.search_offset(&queue, 0).await.unwrap(), 0);

        // Pulls: found, nothing new at the end, offset moved beyond it.
        let addr = first.master_addr("broker-a").unwrap();
        let pull = |offset| common::pull_header(GROUP, TOPIC, queue.queue_id, offset);
        let timeout = Duration::from_secs(5);
        let found = first.pull(&addr, pull(1), timeout).await.unwrap();
        assert_eq!(found.status, PullStatus::Found);
        let bodies: Vec<&[u8]> = found.messages.iter().map(|m| m.body.as_slice()).collect();
        assert_eq!(bodies, vec![b"m1".as_slice(), b"m2".as_slice()]);
        assert_eq!(found.next_begin_offset, 3);
        assert_eq!(found.max_offset, 3);
        let empty = first.pull(&addr, pull(3), timeout).await.unwrap();
        assert_eq!(empty.status, PullStatus::NoNewMsg);
        assert!(empty.messages.is_empty());
        let beyond = first.pull(&addr, pull(100), timeout).await.unwrap();
        assert_eq!(beyond.status, PullStatus::OffsetIllegal);
        // Java's correction: back to the minimum offset when it is 0.
        assert_eq!(beyond.next_begin_offset, 0);

        // Shutdown unregisters the group: only the first member is left.
        second.shutdown().await;
        eventually("the member list without the second", || async {
            first.consumer_id_list(TOPIC, GROUP).await.unwrap() == vec![first.client_id()]
        })
        .await;
        assert!(matches!(
            second.topic_route(TOPIC).await,
            Err(ClientError::Shutdown)
        ));
        first.shutdown().await;
    });
}

#[test]
fn an_unknown_topic_has_no_route_and_every_dead_name_server_is_reported() {
    let cluster = cluster("instance-noroute");
    common::runtime().block_on(async {
        let live = instance(&cluster, "live");
        eventually("the broker registration", || async {
            live.fetch_route("TBW102").await.is_ok()
        })
        .await;
        let missing = live.topic_route("NoSuchTopic").await;
        assert!(
            matches!(&missing, Err(ClientError::NoRoute { topic }) if topic == "NoSuchTopic"),
            "{missing:?}"
        );
        let dead = ClientInstance::new(ClientConfig::new("127.0.0.1:1;127.0.0.1:2"));
        let failed = dead.topic_route("TBW102").await;
        assert!(
            matches!(&failed, Err(ClientError::NameServer(text)) if text.contains("127.0.0.1:")),
            "{failed:?}"
        );
    });
}
