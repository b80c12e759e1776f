//! `ferromq admin resetOffsetByTime` against an online push consumer: the broker serves
//! INVOKE_BROKER_TO_RESET_OFFSET (222) and pushes RESET_CONSUMER_CLIENT_OFFSET (220) to the
//! group's members, which consume again from the reset offsets; with no member online the
//! broker answers CONSUMER_NOT_ONLINE and the admin commits the offsets itself; a topic the
//! broker does not have is refused. Both a concurrently and an orderly consuming member.
//!
//! Method: a real `ferromq namesrv` and `ferromq broker`, the crate's producer and push
//! consumer, and the real `ferromq admin` binary; every wait is a bounded poll.

mod common;

use common::{connect, BrokerProcess, NamesrvProcess, TempDir};
use ferromq::client::consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeOrderlyStatus, MessageQueue, PushConsumer,
    PushConsumerConfig,
};
use ferromq::client::producer::Producer;
use ferromq::client::{ClientConfig, ClientInstance, Message, MessageExt};
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::{CreateTopicRequestHeader, ResetOffsetRequestHeader};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const WAIT: Duration = Duration::from_secs(30);
const TOPIC: &str = "ResetTopic";
const GROUP: &str = "reset-group";

/// `ferromq admin -n <namesrv> <args> --json`, which must succeed.
fn admin_json(namesrv: SocketAddr, args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .arg("admin")
        .args(["-n", &namesrv.to_string()])
        .args(args)
        .arg("--json")
        .env_remove("NAMESRV_ADDR")
        .output()
        .expect("run ferromq admin");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "admin {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

async fn wait_until<F: std::future::Future<Output = bool>>(
    what: &str,
    mut done: impl FnMut() -> F,
) {
    let deadline = Instant::now() + WAIT;
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn create_topic(admin: &RemotingClient, routes: &ClientInstance, queues: i32) {
    let header = CreateTopicRequestHeader::read_write(TOPIC, queues);
    let request =
        RemotingCommand::request_with_header(RequestCode::UPDATE_AND_CREATE_TOPIC, &header);
    let response = admin.request(request).await.unwrap();
    assert_eq!(response.code, 0, "{:?}", response.remark);
    wait_until("the topic's route", || async {
        routes
            .refresh_topic_route(TOPIC)
            .await
            .is_ok_and(|route| route.subscribe_queues.len() == queues as usize)
    })
    .await;
}

async fn invoke_reset(admin: &RemotingClient, topic: &str, timestamp: i64) -> RemotingCommand {
    let header = ResetOffsetRequestHeader {
        topic: topic.into(),
        group: GROUP.into(),
        timestamp,
        is_force: false,
        queue_id: None,
        offset: None,
    };
    let request =
        RemotingCommand::request_with_header(RequestCode::INVOKE_BROKER_TO_RESET_OFFSET, &header);
    admin.request(request).await.unwrap()
}

fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_by_time_replays_to_the_online_consumer_and_falls_back_when_none_is() {
    reset_scenario(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_by_time_replays_to_an_online_orderly_consumer() {
    reset_scenario(true).await;
}

/// The whole story with a concurrently or an orderly consuming member.
async fn reset_scenario(orderly: bool) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let dir = TempDir::on_disk("client-reset-offset");
    let namesrv = NamesrvProcess::start("");
    let config = format!(
        "brokerName=broker-a\nbrokerClusterName=DefaultCluster\nnamesrvAddr={}\n\
         registerNameServerPeriod=200\nflushConsumerOffsetInterval=100",
        namesrv.addr
    );
    let broker = BrokerProcess::start(&dir.path().join("store"), &config);
    let admin = connect(broker.addr, SerializeType::Json).await;
    let client = |instance: &str| {
        let mut config = ClientConfig::new(&namesrv.addr.to_string());
        config.instance_name = instance.to_owned();
        config.poll_name_server_interval = Duration::from_millis(500);
        config.heartbeat_broker_interval = Duration::from_secs(1);
        config.persist_consumer_offset_interval = Duration::from_millis(200);
        config
    };
    let routes = ClientInstance::new(client("routes"));
    let queues: Vec<MessageQueue> = (0..2)
        .map(|q| MessageQueue::new(TOPIC, "broker-a", q))
        .collect();
    create_topic(&admin, &routes, 2).await;

    // A topic the broker does not have: TOPIC_NOT_EXIST with this remark, as Java 5.x
    // (4.9.8: SYSTEM_ERROR `[reset-offset] reset offset failed, no topic in this broker...`).
    let refused = invoke_reset(&admin, "NoSuchTopic", 0).await;
    assert_eq!(refused.code, ResponseCode::TOPIC_NOT_EXIST.0);
    assert_eq!(
        refused.remark.as_deref(),
        Some("Topic NoSuchTopic does not exist")
    );

    // N messages, both queues, all before `before_first + 1 s`.
    let before_first = now_ms() - 1000;
    let producer = Producer::new("reset-producer", client("producer"));
    producer.start().await.unwrap();
    const N: usize = 8;
    for i in 0..N {
        let message = Message::new(TOPIC, format!("reset-{i}")).with_tags("TagA");
        producer
            .send_to_queue(message, &queues[i % 2])
            .await
            .unwrap();
    }
    let max = N as i64 / 2;

    // The consumer takes all of them once and commits.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut config = PushConsumerConfig::new(GROUP);
    config.consume_from_where = ConsumeFromWhere::FirstOffset;
    config.rebalance_interval = Duration::from_millis(300);
    config.lock_interval = Duration::from_secs(1);
    config.pull_time_delay_when_exception = Duration::from_millis(200);
    config.broker_suspend_max_time = Duration::from_secs(2);
    config.consumer_timeout_when_suspend = Duration::from_secs(5);
    config.offsets_root = dir.path().join("offsets");
    let consumer = PushConsumer::new(client("consumer"), config);
    consumer.subscribe(TOPIC, "*").unwrap();
    let record = seen.clone();
    let keep = move |messages: &[MessageExt]| {
        let mut record = record.lock().unwrap();
        record.extend(messages.iter().map(MessageExt::msg_id));
    };
    if orderly {
        consumer.register_message_listener_orderly(move |messages: &[MessageExt]| {
            keep(messages);
            ConsumeOrderlyStatus::Success
        });
    } else {
        consumer.register_message_listener_concurrently(move |messages: &[MessageExt]| {
            keep(messages);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
    }
    consumer.start().await.unwrap();
    let counts = |seen: &Arc<Mutex<Vec<String>>>| {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for id in seen.lock().unwrap().iter() {
            *counts.entry(id.clone()).or_default() += 1;
        }
        counts
    };
    let committed_at_max = || async {
        for mq in &queues {
            let committed = routes.query_consumer_offset(GROUP, mq).await;
            if !matches!(committed, Ok(Some(offset)) if offset == max) {
                return false;
            }
        }
        true
    };
    wait_until("every message consumed once", || async {
        counts(&seen).len() == N
    })
    .await;
    wait_until("the offsets committed", committed_at_max).await;
    assert!(
        counts(&seen).values().all(|&n| n == 1),
        "{:?}",
        counts(&seen)
    );

    // Back to before the first message, through the broker: the consumer gets them again.
    let reset = admin_json(
        namesrv.addr,
        &[
            "resetOffsetByTime",
            "-g",
            GROUP,
            "-t",
            TOPIC,
            "-s",
            &before_first.to_string(),
        ],
    );
    assert_eq!(reset["mode"], "broker", "{reset}");
    let rows = reset["queues"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{reset}");
    for (queue_id, row) in rows.iter().enumerate() {
        assert_eq!(row["queueId"], queue_id as i64, "{reset}");
        assert_eq!(row["rollbackOffset"], 0, "{reset}");
    }
    wait_until("every message consumed twice", || async {
        let counts = counts(&seen);
        counts.len() == N && counts.values().all(|&n| n >= 2)
    })
    .await;
    wait_until("the offsets committed at the max again", committed_at_max).await;
    let counts_now = counts(&seen);
    assert!(counts_now.values().all(|&n| n == 2), "{counts_now:?}");

    // Nobody online: CONSUMER_NOT_ONLINE with Java's remark, and the admin commits itself.
    consumer.shutdown().await;
    let offline = invoke_reset(&admin, TOPIC, before_first).await;
    assert_eq!(offline.code, ResponseCode::CONSUMER_NOT_ONLINE.0);
    assert_eq!(
        offline.remark,
        Some(format!(
            "Consumer not online, so can not reset offset, Group: {GROUP} Topic: {TOPIC} \
             Timestamp: {before_first}"
        ))
    );
    let reset = admin_json(
        namesrv.addr,
        &[
            "resetOffsetByTime",
            "-g",
            GROUP,
            "-t",
            TOPIC,
            "-s",
            &before_first.to_string(),
        ],
    );
    assert_eq!(reset["mode"], "commit", "{reset}");
    for mq in &queues {
        let committed = routes.query_consumer_offset(GROUP, mq).await.unwrap();
        assert_eq!(committed, Some(0), "{mq}");
    }
    assert_eq!(
        counts(&seen),
        counts_now,
        "nothing consumed after the shutdown"
    );
    producer.shutdown().await;
    drop(broker);
}
