//! Pull consumers of the crates.io RocketMQ client (`rocketmq-client-rust`) against a ferromq
//! started in this process: the classic pull consumer walking one queue by offset (with and
//! without a tag), and the lite pull consumer subscribed to a topic.

mod common;

use common::{
    bounded, message, start_producer, start_pull_consumer, unique, Client, Ferromq, Seen,
    CALL_TIMEOUT, SEND_TIMEOUT_MS,
};
use rocketmq_client_rust::{DefaultLitePullConsumer, PullStatus, SendStatus};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use std::collections::BTreeMap;
use std::time::Duration;

const TEST_LIMIT: Duration = Duration::from_secs(60);
const TAGS: [&str; 2] = ["TagA", "TagB"];

#[test]
fn pull_consumer_walks_a_queue_by_offset() {
    const COUNT: usize = 10;
    let ferromq = Ferromq::start("pull");
    let client = Client::new("pull");
    client.run(TEST_LIMIT, async {
        let topic = unique("PullTopic");
        ferromq.create_topic(&topic, 1).await;
        let mut producer = start_producer(&client, &ferromq, &unique("pull_pg")).await;
        for i in 0..COUNT {
            let body = format!("pull-{i}");
            let msg = message(&topic, TAGS[i % 2], &format!("K{i}"), body.as_bytes());
            let result = bounded("send", producer.send_with_timeout(msg, SEND_TIMEOUT_MS))
                .await
                .expect("the send succeeds")
                .expect("a result");
            assert_eq!(result.send_status, SendStatus::SendOk);
            assert_eq!(result.queue_offset, u64::try_from(i).expect("small"));
        }
        let consumer = start_pull_consumer(&client, &ferromq, &unique("pull_cg")).await;
        let queues = bounded("queues", consumer.fetch_subscribe_message_queues(&topic))
            .await
            .expect("the topic's queues");
        assert_eq!(queues.len(), 1, "{queues:?}");
        let queue = &queues[0];
        // Dispatch makes a message pullable after its send is answered (as Java's reput
        // does): wait, bounded, until all ten are.
        let expected_max = i64::try_from(COUNT).expect("small");
        let visible_by = std::time::Instant::now() + CALL_TIMEOUT;
        let max = loop {
            let max = bounded("max", consumer.max_offset(queue))
                .await
                .expect("max offset");
            if max >= expected_max || std::time::Instant::now() >= visible_by {
                break max;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let min = bounded("min", consumer.min_offset(queue))
            .await
            .expect("min offset");
        assert_eq!((min, max), (0, expected_max));

        // Four at a time, from 0 to the end.
        let mut offset = 0;
        let mut seen = Vec::new();
        while offset < max {
            let result = bounded("pull", consumer.pull(queue, "*", offset, 4))
                .await
                .expect("pull answered");
            assert_eq!(*result.pull_status(), PullStatus::Found);
            let found = result.msg_found_list().unwrap_or_default();
            assert!(
                !found.is_empty() && found.len() <= 4,
                "{} found",
                found.len()
            );
            for (k, message) in found.iter().enumerate() {
                assert_eq!(
                    message.queue_offset,
                    offset + i64::try_from(k).expect("small")
                );
                seen.push(Seen::of(message));
            }
            assert_eq!(result.max_offset(), u64::try_from(max).expect("positive"));
            offset = i64::try_from(result.next_begin_offset()).expect("fits");
        }
        let bodies: Vec<&str> = seen.iter().map(|s| s.body.as_str()).collect();
        let expected: Vec<String> = (0..COUNT).map(|i| format!("pull-{i}")).collect();
        assert_eq!(bodies, expected);
        for (i, s) in seen.iter().enumerate() {
            assert_eq!(s.tag.as_deref(), Some(TAGS[i % 2]));
            assert_eq!(s.queue_offset, i64::try_from(i).expect("small"));
        }

        // At the end: nothing new.
        let result = bounded("pull at end", consumer.pull(queue, "*", max, 4))
            .await
            .expect("pull answered");
        assert_eq!(*result.pull_status(), PullStatus::NoNewMsg);
        assert_eq!(
            result.next_begin_offset(),
            u64::try_from(max).expect("positive")
        );

        // With a tag: only TagB, the broker skipping the rest.
        let mut offset = 0;
        let mut tagged = Vec::new();
        for _ in 0..COUNT {
            if offset >= max {
                break;
            }
            let result = bounded("tag pull", consumer.pull(queue, "TagB", offset, 32))
                .await
                .expect("pull answered");
            if *result.pull_status() == PullStatus::Found {
                for message in result.msg_found_list().unwrap_or_default() {
                    tagged.push(Seen::of(message));
                }
            }
            offset = i64::try_from(result.next_begin_offset()).expect("fits");
        }
        let tagged: Vec<&str> = tagged.iter().map(|s| s.body.as_str()).collect();
        let expected: Vec<String> = (1..COUNT).step_by(2).map(|i| format!("pull-{i}")).collect();
        assert_eq!(tagged, expected);

        bounded("pull shutdown", consumer.shutdown())
            .await
            .expect("stops");
        bounded("producer shutdown", producer.shutdown()).await;
    });
}

#[test]
fn lite_pull_consumer_polls_every_message_once() {
    const COUNT: usize = 40;
    let ferromq = Ferromq::start("lite");
    let client = Client::new("lite");
    client.run(TEST_LIMIT, async {
        let topic = unique("LiteTopic");
        ferromq.create_topic(&topic, 4).await;
        let mut producer = start_producer(&client, &ferromq, &unique("lite_pg")).await;
        for i in 0..COUNT {
            let body = format!("lite-{i}");
            let msg = message(&topic, "TagA", &format!("K{i}"), body.as_bytes());
            let result = bounded("send", producer.send_with_timeout(msg, SEND_TIMEOUT_MS))
                .await
                .expect("the send succeeds")
                .expect("a result");
            assert_eq!(result.send_status, SendStatus::SendOk);
        }
        let consumer = DefaultLitePullConsumer::builder(client.runtime())
            .consumer_group(unique("lite_cg"))
            .name_server_addr(ferromq.namesrv_addr.clone())
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .broker_suspend_max_time_millis(500)
            .consumer_timeout_millis_when_suspend(3_000)
            .consumer_pull_timeout_millis(3_000)
            .poll_timeout_millis(500)
            .build()
            .expect("a valid lite pull consumer");
        bounded("subscribe", consumer.subscribe_with_expression(&topic, "*"))
            .await
            .expect("subscribe");
        bounded("start", consumer.start())
            .await
            .expect("the lite consumer starts");
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while counts.len() < COUNT && tokio::time::Instant::now() < deadline {
            for message in bounded("poll", consumer.poll_with_timeout(500)).await {
                *counts.entry(Seen::of(&message).body).or_insert(0) += 1;
            }
        }
        // Two polls more: nothing else may come.
        for _ in 0..2 {
            for message in bounded("poll", consumer.poll_with_timeout(500)).await {
                *counts.entry(Seen::of(&message).body).or_insert(0) += 1;
            }
        }
        let expected: BTreeMap<String, usize> =
            (0..COUNT).map(|i| (format!("lite-{i}"), 1)).collect();
        assert_eq!(counts, expected);
        bounded("lite shutdown", consumer.shutdown()).await;
        bounded("producer shutdown", producer.shutdown()).await;
    });
}
