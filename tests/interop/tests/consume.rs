//! Consuming with the crates.io RocketMQ client (`rocketmq-client-rust`) from a ferromq
//! started in this process: a push consumer group of two members, a consumer that stops and
//! comes back, and a tag filter. Counts and bodies are checked.
//!
//! ferromq does not yet send NOTIFY_CONSUMER_IDS_CHANGED, so members learn of each other on
//! the client's own rebalance timer; these tests shorten it to one second with the client's
//! `rocketmq.client.rebalance.waitInterval` setting.

mod common;

use common::{
    bounded, message, start_producer, start_push_consumer, unique, wait_until, Client, Ferromq,
    Received, SEND_TIMEOUT_MS,
};
use rocketmq_client_rust::{DefaultMQProducer, SendStatus};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const TEST_LIMIT: Duration = Duration::from_secs(90);
const REBALANCE_INTERVAL_MS: u64 = 1_000;
const RECEIVE_LIMIT: Duration = Duration::from_secs(30);

fn client(scope: &str) -> Client {
    // Read by the client when a consumer starts; each test runs in its own process under
    // nextest, and all of them want the same value.
    std::env::set_var(
        "rocketmq.client.rebalance.waitInterval",
        REBALANCE_INTERVAL_MS.to_string(),
    );
    Client::new(scope)
}

async fn send_all(producer: &DefaultMQProducer, topic: &str, tags: &[&str], bodies: &[String]) {
    for (i, body) in bodies.iter().enumerate() {
        let tag = tags[i % tags.len()];
        let msg = message(topic, tag, &format!("K{i}"), body.as_bytes());
        let result = bounded("send", producer.send_with_timeout(msg, SEND_TIMEOUT_MS))
            .await
            .expect("the send succeeds")
            .expect("a sync send has a result");
        assert_eq!(result.send_status, SendStatus::SendOk);
    }
}

fn bodies(label: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{label}-{i}")).collect()
}

/// Waits until `received` has `count` messages, then a little longer to catch extras.
async fn receive(received: &Received, count: usize) {
    let got = wait_until(RECEIVE_LIMIT, || received.len() >= count).await;
    assert!(
        got,
        "received {} of {count}: {:#?}",
        received.len(),
        received.body_counts()
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
}

#[test]
fn push_group_of_two_receives_every_message_exactly_once() {
    const COUNT: usize = 64;
    let ferromq = Ferromq::start("push-group");
    let client = client("push-group");
    client.run(TEST_LIMIT, async {
        let topic = unique("GroupTopic");
        let group = unique("group_cg");
        ferromq.create_topic(&topic, 8).await;
        let received = Received::default();
        let mut first =
            start_push_consumer(&client, &ferromq, &group, (&topic, "*"), "first", &received).await;
        let mut second = start_push_consumer(
            &client,
            &ferromq,
            &group,
            (&topic, "*"),
            "second",
            &received,
        )
        .await;
        let both = wait_until(Duration::from_secs(10), || {
            ferromq.broker().state().consumer_ids(&group).len() == 2
        })
        .await;
        assert!(both, "{:?}", ferromq.broker().state().consumer_ids(&group));
        // Let both members rebalance on their timers after seeing each other.
        tokio::time::sleep(Duration::from_millis(3 * REBALANCE_INTERVAL_MS)).await;

        let producer = start_producer(&client, &ferromq, &unique("group_pg")).await;
        let sent = bodies("group", COUNT);
        send_all(&producer, &topic, &["TagA"], &sent).await;
        receive(&received, COUNT).await;

        let counts = received.body_counts();
        let expected: BTreeMap<String, usize> = sent.iter().map(|b| (b.clone(), 1)).collect();
        assert_eq!(counts, expected, "every message exactly once");
        let mut owners: BTreeMap<i32, BTreeSet<String>> = BTreeMap::new();
        for (member, seen) in received.all() {
            owners.entry(seen.queue_id).or_default().insert(member);
        }
        for (queue, members) in &owners {
            assert_eq!(members.len(), 1, "queue {queue} consumed by {members:?}");
        }
        let members: BTreeSet<String> = owners.values().flatten().cloned().collect();
        assert_eq!(members.len(), 2, "both members got queues: {owners:?}");

        bounded("shutdown", first.shutdown()).await;
        bounded("shutdown", second.shutdown()).await;
        let mut producer = producer;
        bounded("producer shutdown", producer.shutdown()).await;
    });
}

#[test]
fn restarted_consumer_resumes_from_its_committed_offset() {
    const COUNT: usize = 16;
    let ferromq = Ferromq::start("resume");
    let client = client("resume");
    client.run(TEST_LIMIT, async {
        let topic = unique("ResumeTopic");
        let group = unique("resume_cg");
        ferromq.create_topic(&topic, 2).await;
        let producer = start_producer(&client, &ferromq, &unique("resume_pg")).await;
        let before = bodies("before", COUNT);
        send_all(&producer, &topic, &["TagA"], &before).await;

        let first_run = Received::default();
        let mut consumer =
            start_push_consumer(&client, &ferromq, &group, (&topic, "*"), "run1", &first_run).await;
        receive(&first_run, COUNT).await;
        let counts = first_run.body_counts();
        let expected: BTreeMap<String, usize> = before.iter().map(|b| (b.clone(), 1)).collect();
        assert_eq!(counts, expected);
        bounded("shutdown", consumer.shutdown()).await;
        // The consumer commits its offsets to the broker when it stops.
        let state = ferromq.broker().state();
        let committed = || {
            (0..2)
                .map(|q| state.committed_offset(&group, &topic, q).unwrap_or(0))
                .sum::<i64>()
        };
        let all_committed = wait_until(Duration::from_secs(10), || {
            committed() == i64::try_from(COUNT).expect("small")
        })
        .await;
        assert!(all_committed, "committed {} of {COUNT}", committed());

        let after = bodies("after", COUNT);
        send_all(&producer, &topic, &["TagA"], &after).await;
        let second_run = Received::default();
        let mut consumer = start_push_consumer(
            &client,
            &ferromq,
            &group,
            (&topic, "*"),
            "run2",
            &second_run,
        )
        .await;
        receive(&second_run, COUNT).await;
        let counts = second_run.body_counts();
        let expected: BTreeMap<String, usize> = after.iter().map(|b| (b.clone(), 1)).collect();
        assert_eq!(
            counts, expected,
            "only what was sent after the stop, once each"
        );
        bounded("shutdown", consumer.shutdown()).await;
        let mut producer = producer;
        bounded("producer shutdown", producer.shutdown()).await;
    });
}

#[test]
fn tag_filter_delivers_only_the_subscribed_tags() {
    const COUNT: usize = 30;
    let ferromq = Ferromq::start("tags");
    let client = client("tags");
    client.run(TEST_LIMIT, async {
        let topic = unique("TagTopic");
        let group = unique("tag_cg");
        ferromq.create_topic(&topic, 2).await;
        let producer = start_producer(&client, &ferromq, &unique("tag_pg")).await;
        let sent = bodies("tag", COUNT);
        let tags = ["TagA", "TagB", "TagC"];
        send_all(&producer, &topic, &tags, &sent).await;

        let received = Received::default();
        let expression = "TagA || TagC";
        let mut consumer = start_push_consumer(
            &client,
            &ferromq,
            &group,
            (&topic, expression),
            "m",
            &received,
        )
        .await;
        let wanted: BTreeMap<String, usize> = sent
            .iter()
            .enumerate()
            .filter(|(i, _)| tags[i % 3] != "TagB")
            .map(|(_, b)| (b.clone(), 1))
            .collect();
        receive(&received, wanted.len()).await;
        assert_eq!(received.body_counts(), wanted);
        for (_, seen) in received.all() {
            let tag = seen.tag.unwrap_or_default();
            assert!(tag == "TagA" || tag == "TagC", "{tag} delivered");
        }
        bounded("shutdown", consumer.shutdown()).await;
        let mut producer = producer;
        bounded("producer shutdown", producer.shutdown()).await;
    });
}
