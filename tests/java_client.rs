//! The Java 4.9.8 client against `ferromq standalone`: the programs of `tests/java/` (see
//! `Support.java`) send, consume, filter, order, delay, retry, transact and query the way a
//! Java application does, each checking every message it gets back, under both header
//! serializations. Each test starts its own standalone on ephemeral loopback ports.

mod common;

use common::java::{run_java, Serialize, Standalone};
use std::time::Duration;

/// Runs `SendConsume` in `mode` with `count` messages under `serialize`.
fn send_consume(mode: &str, count: u32, serialize: Serialize) {
    let server = Standalone::start("");
    let topic = format!("JavaSend_{mode}");
    run_java(
        "SendConsume",
        &[&server.namesrv_addr(), &topic, mode, &count.to_string()],
        serialize,
        Duration::from_secs(240),
    )
    .assert_passed(&format!("SendConsume {mode} {serialize:?}"));
}

#[test]
fn java_sync_send_consume_json_every_message_as_sent() {
    send_consume("sync", 300, Serialize::Json);
}

#[test]
fn java_sync_send_consume_rocketmq_every_message_as_sent() {
    send_consume("sync", 300, Serialize::Rocketmq);
}

#[test]
fn java_async_send_consume_every_message_as_sent() {
    for serialize in Serialize::BOTH {
        send_consume("async", 300, serialize);
    }
}

#[test]
fn java_oneway_send_consume_every_message_as_sent() {
    for serialize in Serialize::BOTH {
        send_consume("oneway", 300, serialize);
    }
}

#[test]
fn java_batch_send_consume_every_message_as_sent() {
    for serialize in Serialize::BOTH {
        send_consume("batch", 300, serialize);
    }
}

/// Runs a program against a fresh standalone and asserts it passed.
fn run_on_fresh(main: &str, args: &[&str], serialize: Serialize, timeout: Duration) {
    let server = Standalone::start("");
    let mut all = vec![server.namesrv_addr()];
    all.extend(args.iter().map(|arg| (*arg).to_owned()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    run_java(main, &all, serialize, timeout).assert_passed(&format!("{main} {serialize:?}"));
}

/// `RECONSUME_LATER` with maxReconsumeTimes 2: redelivered 10 s and then 30 s later with the
/// same id, then in `%DLQ%<group>` with reconsumeTimes 3, `RETRY_TOPIC` and
/// `ORIGIN_MESSAGE_ID`. Three messages a run, each timed: a long-polling pull on the retry
/// queue that is not woken shows as a gap of 15 s or more. The messages go once the consumer
/// pulls its retry queue (a client race can put that 20 s after its start, with any broker).
#[test]
fn java_retry_then_dlq_on_time_json() {
    run_on_fresh(
        "RetryDlq",
        &["JavaRetry", "3"],
        Serialize::Json,
        Duration::from_secs(180),
    );
}

#[test]
fn java_retry_then_dlq_on_time_rocketmq() {
    run_on_fresh(
        "RetryDlq",
        &["JavaRetry", "3"],
        Serialize::Rocketmq,
        Duration::from_secs(180),
    );
}

/// Delay levels 1-3, three messages each, interleaved: each delivered once, between its
/// delay and 3 s after it, with `DELAY`, `REAL_TOPIC` and `REAL_QID` as Java delivers it.
#[test]
fn java_delay_levels_one_to_three_on_time() {
    for serialize in Serialize::BOTH {
        run_on_fresh(
            "Delay",
            &["JavaDelay", "3", "3"],
            serialize,
            Duration::from_secs(120),
        );
    }
}

/// The first delayed message of a broker just started, five fresh brokers in a row: each
/// level-1 message arrives on time.
#[test]
fn java_delay_first_message_of_a_fresh_broker_on_time() {
    for round in 0..5 {
        let topic = format!("JavaDelayFresh{round}");
        run_on_fresh(
            "Delay",
            &[&topic, "1", "1"],
            Serialize::Json,
            Duration::from_secs(60),
        );
    }
}

/// maxOffset asked right after each of 300 SEND_OKs counts the message; min offset,
/// earliest store time and search by time as Java answers them.
#[test]
fn java_max_offset_after_send_ok_counts_the_message() {
    for serialize in Serialize::BOTH {
        run_on_fresh(
            "Offsets",
            &["JavaOffsets", "300"],
            serialize,
            Duration::from_secs(120),
        );
    }
}

/// Two and three push consumers of one group share the 8 queues: each message reaches one
/// member, once, and every member gets some.
#[test]
fn java_clustering_members_each_message_once() {
    for (members, serialize) in [("2", Serialize::Json), ("3", Serialize::Rocketmq)] {
        let topic = format!("JavaCluster{members}");
        let args = [topic.as_str(), members, "clustering", "400"];
        run_on_fresh("Members", &args, serialize, Duration::from_secs(120));
    }
}

/// Broadcasting: every member gets every message.
#[test]
fn java_broadcasting_every_member_every_message() {
    let args = ["JavaBroadcast", "2", "broadcasting", "200"];
    run_on_fresh("Members", &args, Serialize::Json, Duration::from_secs(120));
}

/// A group restarted resumes from the offsets its last member committed at shutdown.
#[test]
fn java_consumer_restart_resumes_from_committed_offsets() {
    for serialize in Serialize::BOTH {
        run_on_fresh(
            "Resume",
            &["JavaResume", "100"],
            serialize,
            Duration::from_secs(120),
        );
    }
}

/// An orderly listener (queue locks at the broker) sees each order's steps in sequence.
#[test]
fn java_orderly_consumer_sees_each_order_in_sequence() {
    for serialize in Serialize::BOTH {
        run_on_fresh(
            "Orderly",
            &["JavaOrderly"],
            serialize,
            Duration::from_secs(120),
        );
    }
}

/// Commit, rollback, and unknown-then-checked-back: the committed ones delivered, the
/// rolled-back ones never, each unknown one checked once.
#[test]
fn java_transactions_commit_rollback_and_check_back() {
    run_on_fresh(
        "Transaction",
        &["JavaTx", "12"],
        Serialize::Json,
        Duration::from_secs(180),
    );
}

#[test]
fn java_transactions_commit_rollback_and_check_back_rocketmq() {
    let args = ["JavaTx", "12"];
    run_on_fresh(
        "Transaction",
        &args,
        Serialize::Rocketmq,
        Duration::from_secs(180),
    );
}

/// queryMessage by key, viewMessage by offset id and by unique key.
#[test]
fn java_query_by_key_unique_key_and_offset_id() {
    for serialize in Serialize::BOTH {
        run_on_fresh(
            "Query",
            &["JavaQuery", "50"],
            serialize,
            Duration::from_secs(120),
        );
    }
}

/// DefaultMQPullConsumer and DefaultLitePullConsumer (subscribe and assign modes).
#[test]
fn java_pull_and_lite_pull_consumers_read_every_message() {
    for serialize in Serialize::BOTH {
        let args = ["JavaPull", "100"];
        run_on_fresh("PullConsumers", &args, serialize, Duration::from_secs(120));
    }
}
