//! The broker's statistics, read by the Java 4.9.8 admin API and compared with the traffic
//! the test made (`tests/java/StatsQueries.java`) against `ferromq standalone`:
//!
//! - VIEW_BROKER_STATS_DATA (mqadmin `statsAll`): `TOPIC_PUT_NUMS` of the topic sums the
//!   messages sent, `TOPIC_PUT_SIZE` the bytes the broker stored for them (its own
//!   `putMessageSizeTotal`, nothing else being put), `GROUP_GET_NUMS` of `topic@group` the
//!   messages the consumer pulled; an item nothing counted is Java's SYSTEM_ERROR;
//! - GET_CONSUME_STATS' `consumeTps` (mqadmin `consumerProgress`): near the rate the consumer
//!   pulled at during its 30 s run (a minute window sampled every 10 s, opened by a zero
//!   snapshot 10 s before its first: between 0.6 and 1 times the rate, with slack);
//! - GET_BROKER_CONSUME_STATS (mqadmin `brokerConsumeStats`): the group's diff is the
//!   messages it has not consumed;
//! - GET_BROKER_RUNTIME_INFO: under `ASYNC_FLUSH` with a sync not due within the test, every
//!   byte of the CommitLog remains to flush (`remainHowManyDataToFlush` is
//!   `commitLogMaxOffset` in Java's human-readable text), and dispatch is not behind.

mod common;

use common::java::{run_java, run_kit, Serialize, Standalone};
use common::{connect, runtime};
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use std::collections::BTreeMap;
use std::time::Duration;

const TOPIC: &str = "StatsQueriesT";

/// `mqadmin <command> -n <namesrv> <args>`: its text, which must hold no Java exception.
fn mqadmin(namesrv: &str, command: &str, args: &[&str]) -> String {
    let mut all = vec![command, "-n", namesrv];
    all.extend_from_slice(args);
    let output = run_kit("mqadmin", &all, Serialize::Json, Duration::from_secs(60));
    assert!(
        !output.timed_out && output.status.is_some_and(|s| s.success()),
        "mqadmin {command} did not end cleanly:\n{}",
        output.text
    );
    assert!(!output.text.contains("Exception"), "{}", output.text);
    output.text
}

/// The whitespace-separated cells of the lines that start with `first`.
fn rows<'a>(text: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| cells.first() == Some(&first))
        .collect()
}

/// GET_BROKER_RUNTIME_INFO's table.
fn runtime_info(broker: std::net::SocketAddr) -> BTreeMap<String, String> {
    runtime().block_on(async {
        let client = connect(broker, SerializeType::Json).await;
        let request = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO);
        let response = client
            .request(request)
            .await
            .expect("runtime info answered");
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
        body["table"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect()
    })
}

#[test]
fn java_stats_requests_report_the_traffic_made() {
    // A sync every hour: the test's bytes all wait for it.
    let server = Standalone::start("flushDiskType=ASYNC_FLUSH\nflushIntervalCommitLog=3600000");
    let output = run_java(
        "StatsQueries",
        &[&server.namesrv_addr(), &server.broker_addr(), TOPIC],
        Serialize::Json,
        Duration::from_secs(240),
    );
    output.assert_passed("StatsQueries");
    let result = |key: &str| output.results.get(key).cloned().unwrap_or_default();
    let figure = |key: &str| -> f64 {
        result(key)
            .parse()
            .unwrap_or_else(|_| panic!("{key}: {}", output.text))
    };
    let text = &output.text;
    assert_eq!(result("putSum"), "400", "{text}");
    assert!(figure("putSizeAvg") > 100.0, "{text}");
    // SYSTEM_ERROR (1) with Java's remark.
    assert_eq!(
        result("unknown"),
        "CODE:_1__DESC:_The_stats_<TOPIC_PUT_NUMS>_<NoSuchTopicSq>_not_exist",
        "{text}"
    );
    let pulled = figure("pulled");
    // One message per 100 ms for 30 s, fewer when a pull is slow.
    assert!((150.0..=301.0).contains(&pulled), "{text}");
    assert_eq!(figure("getSum"), pulled, "{text}");
    assert!(figure("getSizeSum") > pulled * 100.0, "{text}");
    let rate = figure("pullRate");
    let tps = figure("consumeTps");
    assert!(
        tps >= rate * 0.5 && tps <= rate * 1.1,
        "consumeTps {tps}, pulled at {rate}/s: {text}"
    );
    // Read a moment later, the same window or the next sample's.
    let broker_tps = figure("brokerConsumeTps");
    assert!(broker_tps > 0.0 && broker_tps <= rate * 1.1, "{text}");
    assert_eq!(figure("groupDiff"), 400.0 - pulled, "{text}");
    assert_eq!(result("expectedDiff"), result("groupDiff"), "{text}");
    assert!(figure("totalDiff") >= figure("groupDiff"), "{text}");

    eprintln!("{:?}", output.results);

    // mqadmin brokerConsumeStats: the group's queues, each with the diff of its offsets
    // (rows of queues the group consumed from), and the broker's total.
    let namesrv = server.namesrv_addr();
    let text = mqadmin(
        &namesrv,
        "brokerConsumeStats",
        &["-b", &server.broker_addr()],
    );
    let diffs: i64 = rows(&text, TOPIC)
        .iter()
        .filter(|cells| cells[1] == "sq_cg")
        .map(|cells| {
            let (broker, consumer, diff): (i64, i64, i64) = (
                cells[4].parse().unwrap(),
                cells[5].parse().unwrap(),
                cells[6].parse().unwrap(),
            );
            assert_eq!(broker - consumer, diff, "{text}");
            diff
        })
        .sum();
    assert_eq!(diffs.to_string(), result("groupDiff"), "{text}");
    assert!(
        text.contains(&format!("Diff Total: {}", result("totalDiff"))),
        "{text}"
    );
    // mqadmin statsAll: the topic's row for the group, its accumulation the messages not
    // consumed, and what it pulled in the minute window (the 24 h count falls back to it
    // before the hour window has a sample); the puts' minute window may have slid past
    // them by now (their first sample is over 40 s old), so those cells only parse.
    let text = mqadmin(&namesrv, "statsAll", &["-t", TOPIC]);
    let row = rows(&text, TOPIC);
    assert_eq!(row.len(), 1, "{text}");
    let row = &row[0];
    assert_eq!(row[1], "sq_cg", "{text}");
    assert_eq!(row[2], result("groupDiff"), "{text}");
    let _: f64 = row[3].parse().unwrap();
    let out_tps: f64 = row[4].parse().unwrap();
    assert!(out_tps > 0.0, "{text}");
    let _: u64 = row[5].parse().unwrap();
    assert_eq!(row[6], result("pulled"), "{text}");

    let info = runtime_info(server.broker);
    assert_eq!(
        info["putMessageSizeTotal"],
        result("putSizeSum"),
        "{info:?}"
    );
    let max: u64 = info["commitLogMaxOffset"].parse().unwrap();
    assert_eq!(info["commitLogMinOffset"], "0");
    // 400 messages of about 200 bytes: KiB, as Java's `humanReadableByteCount` writes them.
    assert!((1024..1024 * 1024).contains(&max), "{info:?}");
    #[allow(clippy::cast_precision_loss)]
    let expected = format!("{:.1} KiB", max as f64 / 1024.0);
    assert_eq!(info["remainHowManyDataToFlush"], expected, "{info:?}");
    assert_eq!(info["dispatchBehindBytes"], "0", "{info:?}");
}
