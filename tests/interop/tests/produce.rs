//! Producing with the crates.io RocketMQ client (`rocketmq-client-rust`) to a ferromq started
//! in this process: sync, async, oneway and batch sends. Every message is read back with a
//! pull consumer and checked: body, tag, key, and the queue, offset and message id the send
//! result named.

mod common;

use common::{
    bounded, message, read_topic, start_producer, start_pull_consumer, unique, wait_until, Client,
    Ferromq, Seen, CALL_TIMEOUT, SEND_TIMEOUT_MS,
};
use rocketmq_client_rust::{ClientError, SendResult, SendStatus};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const COUNT: usize = 20;
const TEST_LIMIT: Duration = Duration::from_secs(60);

/// Where a send result says a message went: queue, queue offset, offset message id.
type Place = (i32, i64, String);

/// Each sent body and its place.
type Placed = BTreeMap<String, Place>;

/// Each async send's body and what its callback was told.
type Outcomes = Arc<Mutex<Vec<(String, Result<Place, String>)>>>;

fn placed(result: &SendResult) -> Place {
    assert_eq!(result.send_status, SendStatus::SendOk);
    let queue = result
        .message_queue
        .as_ref()
        .expect("the result names its queue");
    let offset = i64::try_from(result.queue_offset).expect("offset fits i64");
    let id = result.offset_msg_id.clone().expect("an offset message id");
    (queue.queue_id(), offset, id)
}

/// Every stored message is one of the sent ones, where its result said, with its tag and key.
fn check_stored(stored: &[Seen], sent: &Placed, label: &str) {
    assert_eq!(stored.len(), sent.len(), "stored: {stored:#?}");
    for seen in stored {
        let (queue, offset, id) = sent
            .get(&seen.body)
            .unwrap_or_else(|| panic!("unexpected message {seen:?}"));
        assert_eq!(
            (seen.queue_id, seen.queue_offset),
            (*queue, *offset),
            "{seen:?}"
        );
        assert!(seen.msg_id.eq_ignore_ascii_case(id), "{seen:?} vs {id}");
        assert_eq!(seen.tag.as_deref(), Some("TagA"), "{seen:?}");
        let index = seen
            .body
            .strip_prefix(&format!("{label}-"))
            .expect("body label");
        assert_eq!(seen.keys.as_deref(), Some(format!("K{index}").as_str()));
    }
}

#[test]
fn sync_send_stores_each_message_where_its_result_says() {
    let ferromq = Ferromq::start("sync");
    let client = Client::new("sync");
    client.run(TEST_LIMIT, async {
        let topic = unique("SyncTopic");
        ferromq.create_topic(&topic, 4).await;
        let mut producer = start_producer(&client, &ferromq, &unique("sync_pg")).await;
        let mut sent = Placed::new();
        for i in 0..COUNT {
            let body = format!("sync-{i}");
            let msg = message(&topic, "TagA", &format!("K{i}"), body.as_bytes());
            let result = bounded(
                "sync send",
                producer.send_with_timeout(msg, SEND_TIMEOUT_MS),
            )
            .await
            .expect("the send succeeds")
            .expect("a sync send has a result");
            sent.insert(body, placed(&result));
        }
        let queues: std::collections::BTreeSet<i32> = sent.values().map(|p| p.0).collect();
        assert!(
            queues.len() > 1,
            "the producer spreads over queues: {queues:?}"
        );
        let puller = start_pull_consumer(&client, &ferromq, &unique("sync_check")).await;
        let stored = read_topic(&puller, &topic, COUNT).await;
        check_stored(&stored, &sent, "sync");
        bounded("pull shutdown", puller.shutdown())
            .await
            .expect("stops");
        bounded("producer shutdown", producer.shutdown()).await;
    });
}

#[test]
fn async_send_calls_back_once_per_message_and_stores_them() {
    let ferromq = Ferromq::start("async");
    let client = Client::new("async");
    client.run(TEST_LIMIT, async {
        let topic = unique("AsyncTopic");
        ferromq.create_topic(&topic, 4).await;
        let mut producer = start_producer(&client, &ferromq, &unique("async_pg")).await;
        let outcomes = Outcomes::default();
        for i in 0..COUNT {
            let body = format!("async-{i}");
            let msg = message(&topic, "TagA", &format!("K{i}"), body.as_bytes());
            let sink = Arc::clone(&outcomes);
            let callback = move |result: Option<&SendResult>, error: Option<&ClientError>| {
                let outcome = match (result, error) {
                    (Some(result), None) => Ok(placed(result)),
                    (_, error) => Err(format!("{error:?}")),
                };
                sink.lock()
                    .expect("not poisoned")
                    .push((body.clone(), outcome));
            };
            bounded(
                "async send",
                producer.send_with_callback_timeout(msg, callback, SEND_TIMEOUT_MS),
            )
            .await
            .expect("the async send is accepted");
        }
        let all_called = wait_until(CALL_TIMEOUT, || {
            outcomes.lock().expect("not poisoned").len() >= COUNT
        })
        .await;
        assert!(
            all_called,
            "callbacks: {:?}",
            outcomes.lock().expect("not poisoned")
        );
        let mut sent = Placed::new();
        for (body, outcome) in outcomes.lock().expect("not poisoned").iter() {
            let placed = outcome
                .clone()
                .unwrap_or_else(|e| panic!("{body} failed: {e}"));
            assert!(
                sent.insert(body.clone(), placed).is_none(),
                "{body} called back twice"
            );
        }
        assert_eq!(sent.len(), COUNT);
        let puller = start_pull_consumer(&client, &ferromq, &unique("async_check")).await;
        let stored = read_topic(&puller, &topic, COUNT).await;
        check_stored(&stored, &sent, "async");
        bounded("pull shutdown", puller.shutdown())
            .await
            .expect("stops");
        bounded("producer shutdown", producer.shutdown()).await;
    });
}

#[test]
fn oneway_send_stores_every_message() {
    let ferromq = Ferromq::start("oneway");
    let client = Client::new("oneway");
    client.run(TEST_LIMIT, async {
        let topic = unique("OnewayTopic");
        ferromq.create_topic(&topic, 4).await;
        let mut producer = start_producer(&client, &ferromq, &unique("oneway_pg")).await;
        for i in 0..COUNT {
            let body = format!("oneway-{i}");
            let msg = message(&topic, "TagA", &format!("K{i}"), body.as_bytes());
            bounded("oneway send", producer.send_oneway(msg))
                .await
                .expect("the oneway send is written");
        }
        let puller = start_pull_consumer(&client, &ferromq, &unique("oneway_check")).await;
        // A oneway send has no answer: wait until the broker has stored them all.
        let stored = read_topic(&puller, &topic, COUNT).await;
        assert_eq!(stored.len(), COUNT, "{stored:#?}");
        let bodies: std::collections::BTreeSet<&str> =
            stored.iter().map(|s| s.body.as_str()).collect();
        let expected: Vec<String> = (0..COUNT).map(|i| format!("oneway-{i}")).collect();
        let expected: std::collections::BTreeSet<&str> =
            expected.iter().map(String::as_str).collect();
        assert_eq!(bodies, expected);
        for seen in &stored {
            assert_eq!(seen.tag.as_deref(), Some("TagA"));
            let index = seen.body.strip_prefix("oneway-").expect("label");
            assert_eq!(seen.keys.as_deref(), Some(format!("K{index}").as_str()));
        }
        bounded("pull shutdown", puller.shutdown())
            .await
            .expect("stops");
        bounded("producer shutdown", producer.shutdown()).await;
    });
}

#[test]
fn batch_send_stores_the_batch_in_order_in_one_queue() {
    const BATCHES: usize = 3;
    const BATCH_SIZE: usize = 10;
    let ferromq = Ferromq::start("batch");
    let client = Client::new("batch");
    client.run(TEST_LIMIT, async {
        let topic = unique("BatchTopic");
        ferromq.create_topic(&topic, 4).await;
        let mut producer = start_producer(&client, &ferromq, &unique("batch_pg")).await;
        let mut sent = Placed::new();
        for batch in 0..BATCHES {
            let bodies: Vec<String> = (0..BATCH_SIZE)
                .map(|i| format!("batch-{}", batch * BATCH_SIZE + i))
                .collect();
            let messages = bodies
                .iter()
                .enumerate()
                .map(|(i, body)| {
                    let key = format!("K{}", batch * BATCH_SIZE + i);
                    message(&topic, "TagA", &key, body.as_bytes())
                })
                .collect();
            let result = bounded(
                "batch send",
                producer.send_batch_with_timeout(messages, SEND_TIMEOUT_MS),
            )
            .await
            .expect("the batch send succeeds");
            let (queue, first, ids) = placed(&result);
            let ids: Vec<&str> = ids.split(',').collect();
            assert_eq!(
                ids.len(),
                BATCH_SIZE,
                "one offset message id per message: {ids:?}"
            );
            let uniq = result.msg_id.clone().expect("client message ids");
            assert_eq!(uniq.as_str().split(',').count(), BATCH_SIZE, "{uniq}");
            // One producer, nothing else writing: the batch's offsets are consecutive.
            for (i, (body, id)) in bodies.iter().zip(&ids).enumerate() {
                let offset = first + i64::try_from(i).expect("small");
                sent.insert(body.clone(), (queue, offset, (*id).to_owned()));
            }
        }
        let puller = start_pull_consumer(&client, &ferromq, &unique("batch_check")).await;
        let stored = read_topic(&puller, &topic, BATCHES * BATCH_SIZE).await;
        check_stored(&stored, &sent, "batch");
        bounded("pull shutdown", puller.shutdown())
            .await
            .expect("stops");
        bounded("producer shutdown", producer.shutdown()).await;
    });
}
