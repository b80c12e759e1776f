//! A quick produce/consume run with the crates.io RocketMQ client against a ferromq in this
//! process, once per flush mode: one synchronous producer sending 1 KiB messages, then one push
//! consumer draining the backlog. It prints messages/s and send latency percentiles (issue 4's
//! note) and checks only counts, never times.
//!
//! Client, broker and name server share the machine's cores, and the figures are those of
//! whatever profile the tests were built in (`cargo nextest run --release` for real ones).
//! `FERROMQ_INTEROP_FIGURES_COUNT` sets the number of messages (default 2000).

use ferromq::store::flush::FlushDiskType;
mod common;

use common::{
    async_flush, bounded, message, start_producer, start_push_consumer, unique, wait_until, Client,
    Ferromq, Received, SEND_TIMEOUT_MS,
};
use rocketmq_client_rust::SendStatus;
use std::time::{Duration, Instant};

const TEST_LIMIT: Duration = Duration::from_secs(120);
const WARM_UP: usize = 100;
const BODY_SIZE_BYTES: usize = 1024;

fn count() -> usize {
    std::env::var("FERROMQ_INTEROP_FIGURES_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

fn run(flush: FlushDiskType, label: &str) {
    let count = count();
    let ferromq = Ferromq::start_with(label, flush);
    let client = Client::new(label);
    client.run(TEST_LIMIT, async {
        let topic = unique("FiguresTopic");
        ferromq.create_topic(&topic, 4).await;
        let mut producer = start_producer(&client, &ferromq, &unique("figures_pg")).await;
        let body = vec![b'x'; BODY_SIZE_BYTES];
        let mut latencies_us = Vec::with_capacity(count);
        let mut started = Instant::now();
        for i in 0..WARM_UP + count {
            if i == WARM_UP {
                started = Instant::now();
            }
            let msg = message(&topic, "TagA", &format!("K{i}"), &body);
            let begin = Instant::now();
            let result = bounded("send", producer.send_with_timeout(msg, SEND_TIMEOUT_MS))
                .await
                .expect("the send succeeds")
                .expect("a result");
            assert_eq!(result.send_status, SendStatus::SendOk);
            if i >= WARM_UP {
                latencies_us.push(u64::try_from(begin.elapsed().as_micros()).unwrap_or(u64::MAX));
            }
        }
        let produce_s = started.elapsed().as_secs_f64();
        latencies_us.sort_unstable();
        let at = |q: f64| {
            let index = ((latencies_us.len() as f64 - 1.0) * q).round() as usize;
            latencies_us[index] as f64 / 1000.0
        };

        let received = Received::default();
        let consume_start = Instant::now();
        let mut consumer = start_push_consumer(
            &client,
            &ferromq,
            &unique("figures_cg"),
            (&topic, "*"),
            "m",
            &received,
        )
        .await;
        let mut first_at = None;
        let total = WARM_UP + count;
        let all = wait_until(Duration::from_secs(60), || {
            if first_at.is_none() && !received.is_empty() {
                first_at = Some(consume_start.elapsed());
            }
            received.len() >= total
        })
        .await;
        let consume_s = consume_start.elapsed().as_secs_f64();
        assert!(all, "consumed {} of {total}", received.len());
        // Every key once: a count of deliveries alone would pass a duplicate beside a loss.
        let mut keys: Vec<String> = received
            .all()
            .into_iter()
            .map(|(_, seen)| seen.keys.unwrap_or_default())
            .collect();
        keys.sort_unstable();
        let mut sent: Vec<String> = (0..total).map(|i| format!("K{i}")).collect();
        sent.sort_unstable();
        assert_eq!(keys, sent, "each message consumed once");
        let first_s = first_at.unwrap_or_default().as_secs_f64();
        let drain_s = (consume_s - first_s).max(1e-3);
        eprintln!(
            "interop figures [{label}, {} build]: produce {count} x {BODY_SIZE_BYTES} B, one \
             sync producer: {:.0} msg/s, send latency p50 {:.2} ms p99 {:.2} ms max {:.2} ms; \
             push consume {total}: first message after {first_s:.2} s (rebalance), then \
             {:.0} msg/s ({consume_s:.2} s in all)",
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            count as f64 / produce_s,
            at(0.50),
            at(0.99),
            at(1.0),
            total as f64 / drain_s,
        );
        bounded("shutdown", consumer.shutdown()).await;
        bounded("producer shutdown", producer.shutdown()).await;
    });
}

#[test]
fn figures_async_flush() {
    run(async_flush(), "ASYNC_FLUSH");
}

#[test]
fn figures_sync_flush() {
    run(FlushDiskType::SyncFlush, "SYNC_FLUSH");
}
