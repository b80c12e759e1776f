//! Retry and dead letter through the crates.io RocketMQ client (`rocketmq-client-rust`): its
//! push consumer's listener answers RECONSUME_LATER, the client sends the message back
//! (CONSUMER_SEND_MSG_BACK), and ferromq redelivers it through `%RETRY%<group>` with
//! `reconsumeTimes` one higher each time; SUCCESS ends the redeliveries. With the consumer's
//! `maxReconsumeTimes` at 2 a message that always fails ends in `%DLQ%<group>`, read back
//! with raw PULL_MESSAGE requests through ferromq's own remoting client.
//!
//! The broker's delay levels are all one second here, so each retry (level 3 +
//! reconsumeTimes) waits a second.

mod common;

use common::{
    bounded, pull_queue, start_producer, unique, wait_until, Client, Ferromq, SEND_TIMEOUT_MS,
};
use rocketmq_client_rust::{
    ClientResult, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQProducer,
    DefaultMQPushConsumer, MQPushConsumer, SendStatus,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TEST_LIMIT: Duration = Duration::from_secs(120);
const LEVELS: &str = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s";
/// Longest wait for a redelivery: the one-second level, the pull and a margin.
const REDELIVERY_LIMIT: Duration = Duration::from_secs(20);
/// The group raw pulls read with, apart from the push consumer's.
const READER: &str = "interop-raw-reader";
/// Longest wait for stored copies to show in a raw pull.
const PULL_LIMIT: Duration = Duration::from_secs(10);

/// One delivery as the listener saw it.
#[derive(Clone, Debug)]
struct Delivery {
    topic: String,
    reconsume_times: i32,
    retry_topic: Option<String>,
    keys: Option<String>,
    tag: Option<String>,
    user: Option<String>,
}

type Deliveries = Arc<Mutex<BTreeMap<String, Vec<Delivery>>>>;

fn delivery(message: &MessageExt) -> (String, Delivery) {
    let inner = &message.message;
    let body = String::from_utf8_lossy(&message.body().unwrap_or_default()).into_owned();
    let seen = Delivery {
        topic: message.topic().to_string(),
        reconsume_times: message.reconsume_times,
        retry_topic: inner.property("RETRY_TOPIC").map(str::to_owned),
        keys: inner.keys().map(|k| k.join(" ")),
        tag: inner.tags().map(str::to_owned),
        user: inner.property("user").map(str::to_owned),
    };
    (body, seen)
}

/// A push consumer whose listener records every delivery and fails a message whose body
/// is `fail<N>-...` while its `reconsumeTimes` is below N (`failN` with N = `always` never
/// succeeds).
async fn start_consumer(
    client: &Client,
    ferromq: &Ferromq,
    group: &str,
    topic: &str,
    max_reconsume_times: Option<i32>,
    deliveries: &Deliveries,
) -> DefaultMQPushConsumer {
    let mut builder = DefaultMQPushConsumer::builder(client.runtime())
        .consumer_group(group.to_owned())
        .name_server_addr(ferromq.namesrv_addr.clone())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset);
    if let Some(max) = max_reconsume_times {
        builder = builder.max_reconsume_times(max);
    }
    let mut consumer = builder.build();
    bounded("subscribe", consumer.subscribe(topic, "*"))
        .await
        .expect("subscribe");
    let sink = Arc::clone(deliveries);
    consumer.register_message_listener_concurrently(
        move |messages: &[&MessageExt],
              _: &ConsumeConcurrentlyContext|
              -> ClientResult<ConsumeConcurrentlyStatus> {
            let mut sink = sink.lock().expect("not poisoned");
            let mut status = ConsumeConcurrentlyStatus::ConsumeSuccess;
            for message in messages {
                let (body, seen) = delivery(message);
                if fails(&body, seen.reconsume_times) {
                    status = ConsumeConcurrentlyStatus::ReconsumeLater;
                }
                sink.entry(body).or_default().push(seen);
            }
            Ok(status)
        },
    );
    bounded("push consumer start", consumer.start())
        .await
        .expect("the push consumer starts");
    consumer
}

/// Whether the listener fails `body` at this `reconsume_times`.
fn fails(body: &str, reconsume_times: i32) -> bool {
    let Some(rest) = body.strip_prefix("fail") else {
        return false;
    };
    let count = rest.split('-').next().unwrap_or_default();
    if count == "always" {
        return true;
    }
    count
        .parse::<i32>()
        .is_ok_and(|count| reconsume_times < count)
}

fn message(topic: &str, body: &str) -> Message {
    Message::builder()
        .topic(topic)
        .tags("RetryTag")
        .keys(vec![format!("key-{body}")])
        .body_slice(body.as_bytes())
        .raw_property("user", format!("u-{body}"))
        .expect("a user property")
        .build_unchecked()
}

async fn send(producer: &DefaultMQProducer, topic: &str, body: &str) -> String {
    let result = bounded(
        "send",
        producer.send_with_timeout(message(topic, body), SEND_TIMEOUT_MS),
    )
    .await
    .expect("the send succeeds")
    .expect("a sync send has a result");
    assert_eq!(result.send_status, SendStatus::SendOk, "{body}");
    result
        .offset_msg_id
        .expect("the broker gives an offset message id")
}

/// Reconsume times of each delivery of `body`.
fn times(deliveries: &Deliveries, body: &str) -> Vec<i32> {
    deliveries
        .lock()
        .expect("not poisoned")
        .get(body)
        .map(|seen| seen.iter().map(|d| d.reconsume_times).collect())
        .unwrap_or_default()
}

#[test]
fn reconsume_later_redelivers_with_growing_reconsume_times_until_success() {
    let ferromq = Ferromq::start_with_delay_levels("retry-grow", LEVELS);
    let client = Client::new("retry-grow");
    client.run(TEST_LIMIT, async {
        let topic = unique("RetryTopic");
        let group = unique("retry_cg");
        ferromq.create_topic(&topic, 2).await;
        let deliveries: Deliveries = Arc::default();
        let mut consumer =
            start_consumer(&client, &ferromq, &group, &topic, None, &deliveries).await;
        let mut producer = start_producer(&client, &ferromq, &unique("retry_pg")).await;
        let plan = [("ok-0", 0), ("fail1-a", 1), ("fail3-b", 3)];
        let mut ids = BTreeMap::new();
        for (body, _) in plan {
            ids.insert(body, send(&producer, &topic, body).await);
        }

        for (body, failures) in plan {
            let wanted = failures + 1;
            let rounds = u32::try_from(wanted).expect("small");
            let got = wait_until(REDELIVERY_LIMIT * rounds, || {
                times(&deliveries, body).len() >= usize::try_from(wanted).expect("small")
            })
            .await;
            let seen = times(&deliveries, body);
            assert!(got, "{body}: deliveries with reconsumeTimes {seen:?}");
        }
        // A redelivery after SUCCESS would come within a retry level (1 s); give it three.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let all = deliveries.lock().expect("not poisoned").clone();
        for (body, failures) in plan {
            let seen = &all[body];
            let reconsume: Vec<i32> = seen.iter().map(|d| d.reconsume_times).collect();
            let expected: Vec<i32> = (0..=failures).collect();
            assert_eq!(reconsume, expected, "{body}: {seen:#?}");
            for (i, copy) in seen.iter().enumerate() {
                // The client gives a retried copy its original topic back.
                assert_eq!(copy.topic, topic, "{body} delivery {i}");
                assert_eq!(copy.keys.as_deref(), Some(format!("key-{body}").as_str()));
                assert_eq!(copy.tag.as_deref(), Some("RetryTag"));
                assert_eq!(copy.user.as_deref(), Some(format!("u-{body}").as_str()));
                // Redeliveries came through the broker's retry topic, not a local resubmit.
                let retried = (i > 0).then_some(topic.as_str());
                assert_eq!(copy.retry_topic.as_deref(), retried, "{body} delivery {i}");
            }
        }

        // The broker's %RETRY% topic holds one copy per failure, reconsumeTimes 1, 2, ...
        let retry_topic = format!("%RETRY%{group}");
        let stored = pull_queue(&ferromq, (READER, &retry_topic, 0), 4, PULL_LIMIT).await;
        let mut by_body: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for copy in &stored {
            assert_eq!(copy.topic, retry_topic);
            assert_eq!(copy.prop("RETRY_TOPIC"), Some(topic.as_str()));
            let body = copy.body.as_str();
            let origin = ids.get(body).map(String::as_str);
            assert_eq!(copy.prop("ORIGIN_MESSAGE_ID"), origin, "{body}");
            by_body.entry(body).or_default().push(copy.reconsume_times);
        }
        let expected = BTreeMap::from([("fail1-a", vec![1]), ("fail3-b", vec![1, 2, 3])]);
        assert_eq!(by_body, expected, "{stored:#?}");

        bounded("shutdown", consumer.shutdown()).await;
        bounded("producer shutdown", producer.shutdown()).await;
    });
}

#[test]
fn a_message_failing_past_max_reconsume_times_ends_in_the_dlq() {
    const MAX: i32 = 2;
    let ferromq = Ferromq::start_with_delay_levels("retry-dlq", LEVELS);
    let client = Client::new("retry-dlq");
    client.run(TEST_LIMIT, async {
        let topic = unique("DlqTopic");
        let group = unique("dlq_cg");
        ferromq.create_topic(&topic, 2).await;
        let deliveries: Deliveries = Arc::default();
        let mut consumer =
            start_consumer(&client, &ferromq, &group, &topic, Some(MAX), &deliveries).await;
        let mut producer = start_producer(&client, &ferromq, &unique("dlq_pg")).await;
        let body = "failalways-x";
        let id = send(&producer, &topic, body).await;

        // Deliveries at reconsumeTimes 0, 1, 2; the send-back of the last goes to the DLQ.
        let dlq = format!("%DLQ%{group}");
        let dead = pull_queue(&ferromq, (READER, &dlq, 0), 1, REDELIVERY_LIMIT * 3).await;
        let seen = times(&deliveries, body);
        assert_eq!(dead.len(), 1, "DLQ {dead:#?}, deliveries {seen:?}");
        let dead = &dead[0];
        assert_eq!(dead.topic, dlq);
        assert_eq!(dead.body, body);
        assert_eq!(dead.reconsume_times, MAX + 1);
        assert_eq!(dead.prop("RETRY_TOPIC"), Some(topic.as_str()));
        assert_eq!(dead.prop("ORIGIN_MESSAGE_ID"), Some(id.as_str()));
        assert_eq!(dead.prop("KEYS"), Some(format!("key-{body}").as_str()));
        assert_eq!(dead.prop("TAGS"), Some("RetryTag"));
        assert_eq!(dead.prop("user"), Some(format!("u-{body}").as_str()));

        // Nothing comes after the dead letter: give a retry level (1 s) three times over.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let seen = times(&deliveries, body);
        assert_eq!(seen, (0..=MAX).collect::<Vec<_>>(), "deliveries");
        let retry_topic = format!("%RETRY%{group}");
        let retried = pull_queue(&ferromq, (READER, &retry_topic, 0), 2, PULL_LIMIT).await;
        let retried: Vec<i32> = retried.iter().map(|s| s.reconsume_times).collect();
        assert_eq!(retried, [1, 2], "retry copies before the DLQ");
        assert_eq!(
            pull_queue(&ferromq, (READER, &dlq, 0), 1, PULL_LIMIT)
                .await
                .len(),
            1
        );

        bounded("shutdown", consumer.shutdown()).await;
        bounded("producer shutdown", producer.shutdown()).await;
    });
}
