//! The client producer against real `ferromq namesrv` and `ferromq broker` processes: every
//! send mode, counted and read back through the client instance's pull, compression,
//! message ids, validation, name server fail-over and a broker restart.

mod common;

use common::{BrokerProcess, NamesrvProcess, TempDir};
use ferromq::client::{
    expect_success, ClientConfig, ClientError, ClientInstance, Message, MessageExt, MessageQueue,
    Producer, PullStatus, SendResult, SendStatus,
};
use ferromq::remoting::headers::PullMessageRequestHeader;
use ferromq::remoting::{RemotingCommand, RequestCode};
use ferromq::store::message::{decode_record, Record};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

/// A name server and one broker registered with it.
struct Cluster {
    broker: BrokerProcess,
    namesrv: NamesrvProcess,
    store: PathBuf,
    broker_config: String,
    _dir: TempDir,
}

impl Cluster {
    fn start(name: &str) -> Cluster {
        Cluster::start_with(name, "127.0.0.1:0", "")
    }

    /// As [`Cluster::start`] with the broker on `listen` and `extra` broker config lines.
    fn start_with(name: &str, listen: &str, extra: &str) -> Cluster {
        let namesrv = NamesrvProcess::start("");
        let dir = TempDir::on_disk(name);
        let store = dir.path().join("store");
        let broker_config = format!("brokerName=broker-a\nnamesrvAddr={}\n{extra}", namesrv.addr);
        let broker = BrokerProcess::start_on(&store, &broker_config, listen);
        Cluster {
            broker,
            namesrv,
            store,
            broker_config,
            _dir: dir,
        }
    }

    fn namesrv(&self) -> String {
        self.namesrv.addr.to_string()
    }
}

/// Waits until the broker's registration reached the name server.
async fn wait_registered(instance: &ClientInstance) {
    let started = Instant::now();
    while instance.fetch_route("TBW102").await.is_err() {
        assert!(started.elapsed() < DEADLINE, "the broker never registered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn started_producer(cluster: &Cluster, group: &str) -> Producer {
    let producer = Producer::new(group, ClientConfig::new(&cluster.namesrv()));
    wait_registered(producer.instance()).await;
    producer.start().await.unwrap();
    producer
}

fn pull_header(queue: &MessageQueue, offset: i64) -> PullMessageRequestHeader {
    common::pull_header("client-test-reader", &queue.topic, queue.queue_id, offset)
}

/// Pulls `queue` from `offset` until `count` messages arrived (bounded).
async fn pull_n(
    instance: &ClientInstance,
    queue: &MessageQueue,
    offset: i64,
    count: usize,
) -> Vec<MessageExt> {
    let addr = instance.master_addr_of(queue).await.unwrap();
    let started = Instant::now();
    let mut messages = Vec::new();
    let mut next = offset;
    while messages.len() < count {
        assert!(
            started.elapsed() < DEADLINE,
            "only {} of {count} messages in {queue}",
            messages.len()
        );
        let header = pull_header(queue, next);
        let result = instance
            .pull(&addr, header, Duration::from_secs(5))
            .await
            .unwrap();
        if result.status == PullStatus::Found {
            next = result.next_begin_offset;
            messages.extend(result.messages);
        } else {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    messages
}

/// The sum of the max offsets of `topic`'s publish queues.
async fn stored_count(producer: &Producer, topic: &str) -> i64 {
    let mut total = 0;
    for queue in producer.publish_queues(topic).await.unwrap() {
        total += producer.instance().get_max_offset(&queue).await.unwrap();
    }
    total
}

async fn wait_stored(producer: &Producer, topic: &str, expected: i64) {
    let started = Instant::now();
    loop {
        let stored = stored_count(producer, topic).await;
        if stored == expected {
            return;
        }
        assert!(stored < expected, "{stored} stored, more than {expected}");
        assert!(
            started.elapsed() < DEADLINE,
            "{stored} of {expected} stored"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn a_sync_send_is_stored_with_body_keys_tags_and_properties_intact() {
    let cluster = Cluster::start("client-sync");
    common::runtime().block_on(async {
        let producer = started_producer(&cluster, "sync_pg").await;
        let mut message = Message::new("ClientSyncT", "hello ferromq")
            .with_tags("TagA")
            .with_keys(["k1", "k2"])
            .with_flag(7);
        message.put_user_property("color", "blue").unwrap();
        let sent = producer.send(message).await.unwrap();
        assert_eq!(sent.send_status, SendStatus::SendOk);
        assert_eq!(sent.message_queue.broker_name, "broker-a");
        assert_eq!(sent.region_id, "DefaultRegion");
        let read = pull_n(
            producer.instance(),
            &sent.message_queue,
            sent.queue_offset,
            1,
        )
        .await;
        let stored = &read[0];
        assert_eq!(stored.body, b"hello ferromq");
        assert_eq!(stored.tags(), Some("TagA"));
        assert_eq!(stored.keys(), Some("k1 k2"));
        assert_eq!(stored.property("color"), Some("blue"));
        assert_eq!(stored.flag, 7);
        assert_eq!(stored.msg_id(), sent.msg_id);
        assert_eq!(stored.offset_msg_id(), sent.offset_msg_id);
        assert_eq!(stored.queue_offset, sent.queue_offset);
        // A second send goes round robin to the next queue.
        let again = producer
            .send(Message::new("ClientSyncT", "second"))
            .await
            .unwrap();
        assert_ne!(again.message_queue, sent.message_queue);
        producer.shutdown().await;
        assert!(matches!(
            producer.send(Message::new("ClientSyncT", "late")).await,
            Err(ClientError::Shutdown)
        ));
    });
}

#[test]
fn async_sends_all_call_back_send_ok_and_are_all_stored() {
    let cluster = Cluster::start("client-async");
    common::runtime().block_on(async {
        let producer = started_producer(&cluster, "async_pg").await;
        const N: usize = 60;
        let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..N {
            let done = done_tx.clone();
            let message = Message::new("ClientAsyncT", format!("async-{i}"));
            producer
                .send_async(message, move |r| {
                    let _ = done.send(r);
                })
                .await;
        }
        let mut results: Vec<SendResult> = Vec::new();
        for _ in 0..N {
            let outcome = tokio::time::timeout(DEADLINE, done_rx.recv())
                .await
                .expect("every callback runs")
                .unwrap();
            results.push(outcome.unwrap());
        }
        assert!(results.iter().all(|r| r.send_status == SendStatus::SendOk));
        let mut ids: Vec<&str> = results.iter().map(|r| r.msg_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), N, "message ids are unique");
        wait_stored(&producer, "ClientAsyncT", N as i64).await;
        producer.shutdown().await;
    });
}

#[test]
fn async_sends_in_flight_are_bounded() {
    let cluster = Cluster::start("client-async-bound");
    common::runtime().block_on(async {
        let options = ferromq::client::ProducerOptions {
            back_pressure_for_async_send_num: 3,
            ..Default::default()
        };
        let config = ClientConfig::new(&cluster.namesrv());
        let producer = Producer::with_config("async_bound_pg", config, options);
        wait_registered(producer.instance()).await;
        producer.start().await.unwrap();
        let completed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let ok = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut most_outstanding = 0;
        for started in 1..=40 {
            let (completed_in, ok_in) = (completed.clone(), ok.clone());
            let message = Message::new("ClientAsyncBoundT", format!("m{started}"));
            producer
                .send_async(message, move |result| {
                    if result.is_ok() {
                        ok_in.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    completed_in.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                })
                .await;
            let outstanding = started - completed.load(std::sync::atomic::Ordering::SeqCst);
            most_outstanding = most_outstanding.max(outstanding);
        }
        assert!(most_outstanding <= 3, "{most_outstanding} sends in flight");
        wait_stored(&producer, "ClientAsyncBoundT", 40).await;
        let started = Instant::now();
        while completed.load(std::sync::atomic::Ordering::SeqCst) < 40 {
            assert!(started.elapsed() < DEADLINE, "every callback runs");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(ok.load(std::sync::atomic::Ordering::SeqCst), 40);
        producer.shutdown().await;
    });
}

#[test]
fn oneway_sends_are_all_stored() {
    let cluster = Cluster::start("client-oneway");
    common::runtime().block_on(async {
        let producer = started_producer(&cluster, "oneway_pg").await;
        for i in 0..50 {
            producer
                .send_oneway(Message::new("ClientOnewayT", format!("oneway-{i}")))
                .await
                .unwrap();
        }
        wait_stored(&producer, "ClientOnewayT", 50).await;
        producer.shutdown().await;
    });
}

#[test]
fn a_batch_is_stored_as_separate_messages_in_order() {
    let cluster = Cluster::start("client-batch");
    common::runtime().block_on(async {
        let producer = started_producer(&cluster, "batch_pg").await;
        let messages: Vec<Message> = (0..10)
            .map(|i| {
                Message::new("ClientBatchT", format!("batch-{i}")).with_keys([format!("key-{i}")])
            })
            .collect();
        let sent = producer.send_batch(messages).await.unwrap();
        assert_eq!(sent.send_status, SendStatus::SendOk);
        let ids: Vec<&str> = sent.msg_id.split(',').collect();
        assert_eq!(ids.len(), 10);
        let read = pull_n(producer.instance(), &sent.message_queue, 0, 10).await;
        for (i, message) in read.iter().enumerate() {
            assert_eq!(message.body, format!("batch-{i}").into_bytes());
            assert_eq!(message.keys(), Some(format!("key-{i}").as_str()));
            assert_eq!(message.msg_id(), ids[i]);
        }
        wait_stored(&producer, "ClientBatchT", 10).await;
        producer.shutdown().await;
    });
}

#[test]
fn send_to_queue_and_selector_keep_messages_on_the_chosen_queue_in_order() {
    let cluster = Cluster::start("client-queue");
    common::runtime().block_on(async {
        let producer = started_producer(&cluster, "queue_pg").await;
        let queues = producer.publish_queues("ClientQueueT").await.unwrap();
        assert_eq!(queues.len(), 4, "auto-created with defaultTopicQueueNums");
        let target = queues[2].clone();
        let sent = producer
            .send_to_queue(Message::new("ClientQueueT", "to queue 2"), &target)
            .await
            .unwrap();
        assert_eq!(sent.message_queue, target);
        assert_eq!(sent.queue_offset, 0);
        let wrong_topic = MessageQueue::new("Other", "broker-a", 0);
        assert!(matches!(
            producer
                .send_to_queue(Message::new("ClientQueueT", "x"), &wrong_topic)
                .await,
            Err(ClientError::InvalidMessage(_))
        ));
        // Orders 0..3, five steps each, interleaved; each order keyed to one queue.
        for step in 0..5 {
            for order in 0..3usize {
                let body = format!("order-{order}-step-{step}");
                let sent = producer
                    .send_with_selector(Message::new("ClientOrderT", body), |queues, _| {
                        order % queues.len()
                    })
                    .await
                    .unwrap();
                assert_eq!(sent.message_queue.queue_id, i32::try_from(order).unwrap());
            }
        }
        for order in 0..3 {
            let queue = MessageQueue::new("ClientOrderT", "broker-a", order);
            let read = pull_n(producer.instance(), &queue, 0, 5).await;
            let bodies: Vec<String> = read
                .iter()
                .map(|m| String::from_utf8(m.body.clone()).unwrap())
                .collect();
            let expected: Vec<String> = (0..5).map(|s| format!("order-{order}-step-{s}")).collect();
            assert_eq!(bodies, expected);
        }
        producer.shutdown().await;
    });
}

#[test]
fn a_large_body_is_stored_compressed_and_read_back_whole() {
    let cluster = Cluster::start("client-compress");
    common::runtime().block_on(async {
        let producer = started_producer(&cluster, "compress_pg").await;
        let body: Vec<u8> = (0..10 * 1024).map(|i| b"ferromq!"[i % 8]).collect();
        let sent = producer
            .send(Message::new("ClientZipT", body.clone()))
            .await
            .unwrap();
        let read = pull_n(
            producer.instance(),
            &sent.message_queue,
            sent.queue_offset,
            1,
        )
        .await;
        assert_eq!(read[0].sys_flag & 1, 1, "stored with the compressed flag");
        assert_eq!(read[0].body, body, "decode_messages inflates it");
        // The record itself holds the deflated bytes.
        let addr = producer.instance().master_addr("broker-a").unwrap();
        let header = pull_header(&sent.message_queue, sent.queue_offset);
        let request = RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header);
        let response = producer
            .instance()
            .invoke_broker(&addr, request, Duration::from_secs(3))
            .await
            .and_then(expect_success)
            .unwrap();
        let Ok(Record::Message { record, .. }) = decode_record(&response.body, true) else {
            panic!("a record");
        };
        assert!(
            record.body.len() < body.len() / 4,
            "{} bytes stored",
            record.body.len()
        );
        producer.shutdown().await;
    });
}

#[test]
fn message_ids_are_java_uniq_keys_and_find_the_message_by_query() {
    // Offset message ids carry the broker's configured port; a broker told to listen on
    // port 0 writes 0 there, so this broker gets a fixed (free) port.
    let cluster = Cluster::start_with("client-msgid", &free_address(), "");
    common::runtime().block_on(async {
        let producer = started_producer(&cluster, "msgid_pg").await;
        let sent = producer
            .send(Message::new("ClientIdT", "find me"))
            .await
            .unwrap();
        let id = &sent.msg_id;
        assert_eq!(id.len(), 32);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c)));
        let ip: std::net::Ipv4Addr = producer.instance().config().client_ip.parse().unwrap();
        let ip_hex: String = ip.octets().iter().map(|b| format!("{b:02X}")).collect();
        assert!(
            id.starts_with(&ip_hex),
            "{id} starts with the client IP {ip_hex}"
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let born = ferromq::client::msg_id::nearly_time_from_id(id, now).unwrap();
        assert!((now - born).abs() < 60_000, "born {born}, now {now}");
        // QUERY_MESSAGE by the UNIQ_KEY (what `queryMsgById` does), polled: indexing is
        // asynchronous.
        let instance = producer.instance();
        let started = Instant::now();
        let found = loop {
            let found = instance
                .query_message_by_uniq_key("ClientIdT", id)
                .await
                .unwrap();
            if !found.is_empty() {
                break found;
            }
            assert!(started.elapsed() < DEADLINE, "never indexed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].body, b"find me");
        assert_eq!(&found[0].msg_id(), id);
        // The offset id leads to the same record (VIEW_MESSAGE_BY_ID).
        let viewed = instance.view_message(&sent.offset_msg_id).await.unwrap();
        assert_eq!(viewed.body, b"find me");
        assert_eq!(&viewed.msg_id(), id);
        assert!(matches!(
            instance.view_message("not an id").await,
            Err(ClientError::InvalidMessage(_))
        ));
        producer.shutdown().await;
    });
}

#[test]
fn an_oversized_body_is_refused_without_contacting_anyone() {
    common::runtime().block_on(async {
        // Nothing listens at the name server address: any network use would fail differently.
        let dead = free_address();
        let producer = Producer::new("big_pg", ClientConfig::new(&dead));
        producer.start().await.unwrap();
        let outcome = producer
            .send(Message::new("ClientBigT", vec![0u8; 4 * 1024 * 1024 + 1]))
            .await;
        assert!(
            matches!(&outcome, Err(ClientError::InvalidMessage(text)) if text.contains("4194304")),
            "{outcome:?}"
        );
        let routed = producer.send(Message::new("ClientBigT", "small")).await;
        assert!(
            matches!(routed, Err(ClientError::NameServer(_))),
            "{routed:?}"
        );
        producer.shutdown().await;
    });
}

fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr.to_string()
}

#[test]
fn a_dead_first_name_server_is_skipped() {
    let cluster = Cluster::start("client-failover");
    common::runtime().block_on(async {
        let config = ClientConfig::new(&format!("{};{}", free_address(), cluster.namesrv()));
        let producer = Producer::new("failover_pg", config);
        wait_registered(producer.instance()).await;
        producer.start().await.unwrap();
        for i in 0..5 {
            let sent = producer
                .send(Message::new("ClientFailoverT", format!("m{i}")))
                .await
                .unwrap();
            assert_eq!(sent.send_status, SendStatus::SendOk);
        }
        wait_stored(&producer, "ClientFailoverT", 5).await;
        producer.shutdown().await;
    });
}

#[test]
fn sends_succeed_again_after_the_broker_restarts() {
    let mut cluster = Cluster::start("client-restart");
    let rt = common::runtime();
    let producer = rt.block_on(async {
        let producer = started_producer(&cluster, "restart_pg").await;
        for i in 0..5 {
            producer
                .send(Message::new("ClientRestartT", format!("before-{i}")))
                .await
                .unwrap();
        }
        producer
    });
    let port = cluster.broker.addr.port();
    let status = cluster.broker.terminate();
    assert!(status.success(), "{status:?}");
    rt.block_on(async {
        let down = producer
            .send(Message::new("ClientRestartT", "while down"))
            .await;
        assert!(down.is_err(), "{down:?}");
    });
    cluster.broker = BrokerProcess::start_on(
        &cluster.store,
        &cluster.broker_config,
        &format!("127.0.0.1:{port}"),
    );
    rt.block_on(async {
        for i in 0..5 {
            let sent = producer
                .send(Message::new("ClientRestartT", format!("after-{i}")))
                .await
                .unwrap();
            assert_eq!(sent.send_status, SendStatus::SendOk);
        }
        wait_stored(&producer, "ClientRestartT", 10).await;
        producer.shutdown().await;
    });
}

/// Whether the broker lists `client_id` in producer group `group`.
async fn producer_listed(observer: &ClientInstance, group: &str, client_id: &str) -> bool {
    let addr = observer.master_addr("broker-a").unwrap();
    let header = ferromq::remoting::headers::GetProducerConnectionListRequestHeader {
        producer_group: group.into(),
    };
    let request =
        RemotingCommand::request_with_header(RequestCode::GET_PRODUCER_CONNECTION_LIST, &header);
    let response = observer
        .invoke_broker(&addr, request, Duration::from_secs(3))
        .await
        .unwrap();
    response.code == 0 && String::from_utf8_lossy(&response.body).contains(client_id)
}

#[test]
fn timers_refresh_routes_and_heartbeat_and_shutdown_unregisters() {
    // The broker registers new topics every 200 ms; the client refreshes routes and sends
    // heartbeats every 100 ms.
    let cluster = Cluster::start_with(
        "client-timers",
        "127.0.0.1:0",
        "registerNameServerPeriod=200",
    );
    common::runtime().block_on(async {
        let mut config = ClientConfig::new(&cluster.namesrv());
        config.instance_name = "timers".into();
        config.poll_name_server_interval = Duration::from_millis(100);
        config.heartbeat_broker_interval = Duration::from_millis(100);
        let producer = Producer::new("timers_pg", config);
        wait_registered(producer.instance()).await;
        producer.start().await.unwrap();
        producer
            .send(Message::new("ClientTimersT", "x"))
            .await
            .unwrap();
        let instance: &Arc<ClientInstance> = producer.instance();
        // First sent on the template's route (inherit bit set), then the timer replaces it
        // with the topic's own route once the broker registered the topic. (On a slow disk
        // the send's answer can come after that refresh: the route is its own at once.)
        let started = Instant::now();
        while instance
            .cached_route("ClientTimersT")
            .unwrap()
            .data
            .queue_datas[0]
            .perm
            & 1
            == 1
        {
            assert!(
                started.elapsed() < DEADLINE,
                "the route was never refreshed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // No explicit heartbeat: the timer reaches the broker learnt from the route.
        let mut observer_config = ClientConfig::new(&cluster.namesrv());
        observer_config.instance_name = "observer".into();
        let observer = ClientInstance::new(observer_config);
        observer.topic_route("ClientTimersT").await.unwrap();
        let client_id = instance.client_id().to_owned();
        let started = Instant::now();
        while !producer_listed(&observer, "timers_pg", &client_id).await {
            assert!(
                started.elapsed() < DEADLINE,
                "no heartbeat reached the broker"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Shutdown sends UNREGISTER_CLIENT.
        producer.shutdown().await;
        let started = Instant::now();
        while producer_listed(&observer, "timers_pg", &client_id).await {
            assert!(started.elapsed() < DEADLINE, "still listed after shutdown");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        observer.shutdown().await;
    });
}

#[test]
fn sync_sends_retry_on_the_other_broker_when_one_is_down() {
    let namesrv = NamesrvProcess::start("");
    let dir = TempDir::on_disk("client-two-brokers");
    let start = |name: &str| {
        let config = format!("brokerName={name}\nnamesrvAddr={}", namesrv.addr);
        BrokerProcess::start(&dir.path().join(name), &config)
    };
    let mut broker_a = start("broker-a");
    let _broker_b = start("broker-b");
    common::runtime().block_on(async {
        let mut producers = Vec::new();
        for fault_avoidance in [false, true] {
            let options = ferromq::client::ProducerOptions {
                send_latency_fault_enable: fault_avoidance,
                ..Default::default()
            };
            let config = ClientConfig::new(&namesrv.addr.to_string());
            let group = format!("two_brokers_pg_{fault_avoidance}");
            let producer = Producer::with_config(&group, config, options);
            let started = Instant::now();
            loop {
                // The last answer goes into the failure message: a CI run once waited out
                // the deadline here with both brokers registered at the name server.
                let route = producer.instance().fetch_route("TBW102").await;
                let brokers = route.as_ref().map_or(0, |route| route.broker_datas.len());
                if brokers >= 2 {
                    break;
                }
                assert!(
                    started.elapsed() < DEADLINE,
                    "both brokers register; last route answer: {route:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            producer.start().await.unwrap();
            let queues = producer.publish_queues("ClientTwoT").await.unwrap();
            let brokers: std::collections::BTreeSet<&str> =
                queues.iter().map(|q| q.broker_name.as_str()).collect();
            assert_eq!(brokers.len(), 2, "{queues:?}");
            producers.push(producer);
        }
        common::kill(&mut broker_a.child);
        for producer in &producers {
            for i in 0..12 {
                let sent = producer
                    .send(Message::new("ClientTwoT", format!("m{i}")))
                    .await
                    .unwrap();
                assert_eq!(sent.message_queue.broker_name, "broker-b");
            }
        }
        for producer in producers {
            producer.shutdown().await;
        }
    });
}

#[test]
fn the_binary_header_serialization_works_too() {
    let cluster = Cluster::start("client-rocketmq-serialize");
    common::runtime().block_on(async {
        let mut config = ClientConfig::new(&cluster.namesrv());
        config.serialize_type = ferromq::remoting::SerializeType::RocketMq;
        let producer = Producer::new("binary_pg", config);
        wait_registered(producer.instance()).await;
        producer.start().await.unwrap();
        let sent = producer
            .send(Message::new("ClientBinaryT", "binary").with_tags("b"))
            .await
            .unwrap();
        let read = pull_n(
            producer.instance(),
            &sent.message_queue,
            sent.queue_offset,
            1,
        )
        .await;
        assert_eq!(read[0].body, b"binary");
        assert_eq!(read[0].tags(), Some("b"));
        producer.shutdown().await;
    });
}
