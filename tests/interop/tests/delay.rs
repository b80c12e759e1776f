//! Delayed messages through the crates.io RocketMQ client (`rocketmq-client-rust`): its
//! producer sends with delay levels 1, 2 and 3 to a ferromq whose `messageDelayLevel` is
//! `1s 2s 3s 4s 5s`, and its push consumer receives each message no earlier than its delay
//! after the send and within a second after it, with its keys, tag and user property; and
//! messages still waiting when the broker stops are delivered once each after it starts
//! again over the same store (read back with ferromq's own remoting client).

mod common;

use common::{
    bounded, pull_queue, start_producer, unique, wait_until, Client, Ferromq, SEND_TIMEOUT_MS,
};
use rocketmq_client_rust::{
    ClientResult, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQPushConsumer,
    MQPushConsumer, SendStatus,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const TEST_LIMIT: Duration = Duration::from_secs(90);
const LEVELS: &str = "1s 2s 3s 4s 5s";
/// The brief's bound: delivered within this long after the delay.
const LATE_MS: i64 = 1_000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One delivery as the listener saw it.
#[derive(Clone, Debug)]
struct Delivery {
    received_ms: i64,
    topic: String,
    tag: Option<String>,
    keys: Option<String>,
    user: Option<String>,
    born_ms: i64,
    store_ms: i64,
    real_topic_property: Option<String>,
}

type Deliveries = Arc<Mutex<BTreeMap<String, Vec<Delivery>>>>;

fn delivery(message: &MessageExt) -> (String, Delivery) {
    let inner = &message.message;
    let body = String::from_utf8_lossy(&message.body().unwrap_or_default()).into_owned();
    let seen = Delivery {
        received_ms: now_ms(),
        topic: message.topic().to_string(),
        tag: inner.tags().map(str::to_owned),
        keys: inner.keys().map(|k| k.join(" ")),
        user: inner.property("user").map(str::to_owned),
        born_ms: message.born_timestamp,
        store_ms: message.store_timestamp,
        real_topic_property: inner.property("REAL_TOPIC").map(str::to_owned),
    };
    (body, seen)
}

async fn start_consumer(
    client: &Client,
    ferromq: &Ferromq,
    group: &str,
    topic: &str,
    deliveries: &Deliveries,
) -> DefaultMQPushConsumer {
    let mut consumer = DefaultMQPushConsumer::builder(client.runtime())
        .consumer_group(group.to_owned())
        .name_server_addr(ferromq.namesrv_addr.clone())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build();
    bounded("subscribe", consumer.subscribe(topic, "*"))
        .await
        .expect("subscribe");
    let sink = Arc::clone(deliveries);
    consumer.register_message_listener_concurrently(
        move |messages: &[&MessageExt],
              _: &ConsumeConcurrentlyContext|
              -> ClientResult<ConsumeConcurrentlyStatus> {
            let mut sink = sink.lock().expect("not poisoned");
            for message in messages {
                let (body, seen) = delivery(message);
                sink.entry(body).or_default().push(seen);
            }
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        },
    );
    bounded("push consumer start", consumer.start())
        .await
        .expect("the push consumer starts");
    consumer
}

fn delayed(topic: &str, level: i32, body: &str) -> Message {
    Message::builder()
        .topic(topic)
        .tags(format!("Tag{level}"))
        .keys(vec![format!("K{level}"), "shared".to_owned()])
        .delay_level(level)
        .body_slice(body.as_bytes())
        .raw_property("user", format!("v{level}"))
        .expect("a user property")
        .build_unchecked()
}

#[test]
fn each_delay_level_is_received_on_time_with_keys_tag_and_user_property() {
    let ferromq = Ferromq::start_with_delay_levels("delay-levels", LEVELS);
    let client = Client::new("delay-levels");
    client.run(TEST_LIMIT, async {
        let topic = unique("DelayTopic");
        let group = unique("delay_cg");
        ferromq.create_topic(&topic, 4).await;
        let deliveries: Deliveries = Arc::default();
        let mut consumer = start_consumer(&client, &ferromq, &group, &topic, &deliveries).await;
        let mut producer = start_producer(&client, &ferromq, &unique("delay_pg")).await;

        // An undelayed message first: once it arrives the consumer holds every queue, so
        // the delayed ones are timed from a consumer that is already pulling.
        let warm = Message::builder()
            .topic(topic.as_str())
            .tags("Warm")
            .body_slice(b"warm-up")
            .build_unchecked();
        bounded("send", producer.send_with_timeout(warm, SEND_TIMEOUT_MS))
            .await
            .expect("the warm-up send succeeds");
        let warmed = wait_until(Duration::from_secs(30), || {
            deliveries
                .lock()
                .expect("not poisoned")
                .contains_key("warm-up")
        })
        .await;
        assert!(warmed, "the undelayed message was not received in 30 s");

        let mut sent_at = BTreeMap::new();
        for level in [3, 1, 2] {
            let body = format!("delayed-{level}");
            let before = now_ms();
            let result = bounded(
                "send",
                producer.send_with_timeout(delayed(&topic, level, &body), SEND_TIMEOUT_MS),
            )
            .await
            .expect("the delayed send succeeds")
            .expect("a sync send has a result");
            assert_eq!(result.send_status, SendStatus::SendOk, "level {level}");
            sent_at.insert(body, (level, before, now_ms()));
        }

        let all_in = wait_until(Duration::from_secs(15), || {
            let got = deliveries.lock().expect("not poisoned");
            sent_at.keys().all(|body| got.contains_key(body))
        })
        .await;
        let got = deliveries.lock().expect("not poisoned").clone();
        assert!(all_in, "delayed messages missing: {got:#?}");
        for (body, (level, before, after)) in &sent_at {
            let copies = &got[body];
            assert_eq!(copies.len(), 1, "{body} delivered once: {copies:#?}");
            let seen = &copies[0];
            let delay = i64::from(*level) * 1_000;
            // The client stamps the born time inside the send, between `before` and `after`.
            assert!(
                (*before..=*after).contains(&seen.born_ms),
                "{body}: born {} outside the send {before}..={after}",
                seen.born_ms
            );
            let waited = seen.received_ms - after;
            let took = seen.received_ms - before;
            assert!(
                waited >= delay - (after - before) && took >= delay,
                "{body} (level {level}) received {took} ms after the send began"
            );
            assert!(
                took <= delay + LATE_MS,
                "{body} (level {level}, {delay} ms) received {took} ms after the send began"
            );
            let stored_after = seen.store_ms - seen.born_ms;
            eprintln!("{body}: received {took} ms after the send, stored {stored_after} ms");
            assert!(
                (delay..delay + LATE_MS).contains(&stored_after),
                "{body}: the delivered copy was stored {stored_after} ms after its birth"
            );
            assert_eq!(seen.topic, topic, "{body} arrives in its real topic");
            assert_eq!(seen.tag.as_deref(), Some(format!("Tag{level}").as_str()));
            assert_eq!(
                seen.keys.as_deref(),
                Some(format!("K{level} shared").as_str())
            );
            assert_eq!(seen.user.as_deref(), Some(format!("v{level}").as_str()));
            // The copy names its own topic where it names one (Java leaves REAL_TOPIC and
            // REAL_QID on it).
            if let Some(real) = &seen.real_topic_property {
                assert_eq!(real, &topic, "{body}");
            }
        }
        // The delayed ones arrive in delay order, whatever the order they were sent in.
        let mut by_arrival: Vec<_> = sent_at.keys().collect();
        by_arrival.sort_by_key(|body| got[*body][0].received_ms);
        assert_eq!(by_arrival, ["delayed-1", "delayed-2", "delayed-3"]);

        bounded("shutdown", consumer.shutdown()).await;
        bounded("producer shutdown", producer.shutdown()).await;
    });
}

#[test]
fn delayed_messages_survive_a_broker_restart_between_send_and_delivery() {
    const PER_LEVEL: usize = 5;
    /// After a restart the schedule's first look comes a second later; then 100 ms checks.
    const AFTER_RESTART_MS: i64 = 2_500;
    let mut ferromq = Ferromq::start_with_delay_levels("delay-restart", LEVELS);
    let client = Client::new("delay-restart");
    client.run(TEST_LIMIT, async {
        let topic = unique("DelayRestart");
        ferromq.create_topic(&topic, 2).await;
        let mut producer = start_producer(&client, &ferromq, &unique("restart_pg")).await;
        let mut expected = BTreeMap::new();
        for i in 0..PER_LEVEL {
            for level in [3, 4] {
                let body = format!("restart-{level}-{i}");
                let result = bounded(
                    "send",
                    producer.send_with_timeout(delayed(&topic, level, &body), SEND_TIMEOUT_MS),
                )
                .await
                .expect("the delayed send succeeds")
                .expect("a sync send has a result");
                assert_eq!(result.send_status, SendStatus::SendOk, "{body}");
                expected.insert(body, level);
            }
        }
        bounded("producer shutdown", producer.shutdown()).await;
        // Stop and start the broker over the same store while every message still waits.
        ferromq.stop_broker();
        ferromq.start_broker();
        let restarted_ms = now_ms();

        let mut stored = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while stored.len() < expected.len() && std::time::Instant::now() < deadline {
            stored.clear();
            for queue in 0..2 {
                let limit = Duration::from_millis(200);
                let found = pull_queue(&ferromq, ("delay-reader", &topic, queue), 1, limit).await;
                stored.extend(found);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for copy in &stored {
            *counts.entry(copy.body.as_str()).or_default() += 1;
        }
        let wanted: BTreeMap<&str, usize> = expected.keys().map(|b| (b.as_str(), 1)).collect();
        assert_eq!(
            counts, wanted,
            "each delayed message delivered once after the restart"
        );
        for copy in &stored {
            let level = expected[&copy.body];
            let delay = i64::from(level) * 1_000;
            let due = copy.born_timestamp + delay;
            assert!(
                copy.store_timestamp >= restarted_ms,
                "{} was delivered before the restart: the test did not test a restart",
                copy.body
            );
            assert!(
                copy.store_timestamp >= due,
                "{}: delivered {} ms before its delay",
                copy.body,
                due - copy.store_timestamp
            );
            let latest = due.max(restarted_ms) + AFTER_RESTART_MS;
            assert!(
                copy.store_timestamp <= latest,
                "{}: delivered {} ms after it was due (restart at {restarted_ms}, due {due})",
                copy.body,
                copy.store_timestamp - due
            );
            assert_eq!(copy.prop("TAGS"), Some(format!("Tag{level}").as_str()));
            assert_eq!(copy.prop("KEYS"), Some(format!("K{level} shared").as_str()));
            assert_eq!(copy.prop("user"), Some(format!("v{level}").as_str()));
        }
    });
}
