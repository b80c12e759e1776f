//! The client producer against real `ferromq namesrv` and `ferromq broker` processes: every
//! send mode, counted and read back through the client instance's pull, compression,
//! message ids, validation, name server fail-over and a broker restart.

mod common;

use common::{BrokerProcess, NamesrvProcess, TempDir};
use ferromq::client::{
    decode_messages, expect_success, ClientConfig, ClientError, ClientInstance, Message,
    MessageExt, MessageQueue, Producer, PullStatus, SendResult, SendStatus,
};
use ferromq::remoting::headers::{PullMessageRequestHeader, QueryMessageRequestHeader};
use ferromq::remoting::{RemotingCommand, RequestCode};
use ferromq::store::message::{decode_record, Record};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

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
        let namesrv = NamesrvProcess::start("");
        let dir = TempDir::on_disk(name);
        let store = dir.path().join("store");
        let broker_config = format!("brokerName=broker-a\nnamesrvAddr={}", namesrv.addr);
        let broker = BrokerProcess::start(&store, &broker_config);
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
    PullMessageRequestHeader {
        consumer_group: "client-test-reader".into(),
        topic: queue.topic.clone(),
        queue_id: queue.queue_id,
        queue_offset: offset,
        max_msg_nums: 32,
        // The subscription travels in the request (0x4).
        sys_flag: 0x4,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
        request_source: None,
        broker_name: None,
    }
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
    runtime().block_on(async {
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
    runtime().block_on(async {
        let producer = started_producer(&cluster, "async_pg").await;
        const N: usize = 60;
        let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..N {
            let done = done_tx.clone();
            producer.send_async(
                Message::new("ClientAsyncT", format!("async-{i}")),
                move |r| {
                    let _ = done.send(r);
                },
            );
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
fn oneway_sends_are_all_stored() {
    let cluster = Cluster::start("client-oneway");
    runtime().block_on(async {
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
    runtime().block_on(async {
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
    runtime().block_on(async {
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
    runtime().block_on(async {
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
    let cluster = Cluster::start("client-msgid");
    runtime().block_on(async {
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
        let addr = producer.instance().master_addr("broker-a").unwrap();
        let started = Instant::now();
        let found = loop {
            let header = QueryMessageRequestHeader {
                topic: "ClientIdT".into(),
                key: id.clone(),
                max_num: 32,
                begin_timestamp: 0,
                end_timestamp: i64::MAX,
            };
            let mut request =
                RemotingCommand::request_with_header(RequestCode::QUERY_MESSAGE, &header);
            request
                .ext_fields
                .get_or_insert_with(Default::default)
                .insert("_UNIQUE_KEY_QUERY", "true");
            let response = producer
                .instance()
                .invoke_broker(&addr, request, Duration::from_secs(3))
                .await
                .unwrap();
            if response.code == 0 {
                break decode_messages(&response.body).unwrap();
            }
            assert!(
                started.elapsed() < DEADLINE,
                "never indexed: {:?}",
                response.remark
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].body, b"find me");
        assert_eq!(&found[0].msg_id(), id);
        producer.shutdown().await;
    });
}

#[test]
fn an_oversized_body_is_refused_without_contacting_anyone() {
    runtime().block_on(async {
        // Nothing listens at the name server address: any network use would fail differently.
        let dead = dead_address();
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

fn dead_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr.to_string()
}

#[test]
fn a_dead_first_name_server_is_skipped() {
    let cluster = Cluster::start("client-failover");
    runtime().block_on(async {
        let config = ClientConfig::new(&format!("{};{}", dead_address(), cluster.namesrv()));
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
    let rt = runtime();
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

#[test]
fn the_heartbeat_registers_the_producer_group_at_the_broker() {
    let cluster = Cluster::start("client-heartbeat");
    runtime().block_on(async {
        let producer = started_producer(&cluster, "heartbeat_pg").await;
        // The first send learns the broker; the heartbeat then reaches it.
        producer
            .send(Message::new("ClientHeartbeatT", "x"))
            .await
            .unwrap();
        let instance: &Arc<ClientInstance> = producer.instance();
        instance.send_heartbeat_to_all_brokers().await.unwrap();
        let addr = instance.master_addr("broker-a").unwrap();
        let header = ferromq::remoting::headers::GetProducerConnectionListRequestHeader {
            producer_group: "heartbeat_pg".into(),
        };
        let request = RemotingCommand::request_with_header(
            RequestCode::GET_PRODUCER_CONNECTION_LIST,
            &header,
        );
        let response = instance
            .invoke_broker(&addr, request, Duration::from_secs(3))
            .await
            .and_then(expect_success)
            .unwrap();
        let body = String::from_utf8(response.body).unwrap();
        assert!(body.contains(instance.client_id()), "{body}");
        producer.shutdown().await;
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
    runtime().block_on(async {
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
            while producer
                .instance()
                .fetch_route("TBW102")
                .await
                .map_or(0, |route| route.broker_datas.len())
                < 2
            {
                assert!(started.elapsed() < DEADLINE, "both brokers register");
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
    runtime().block_on(async {
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
