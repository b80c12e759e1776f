//! The store's cleaning on request, from the Java 4.9.8 admin API
//! (`tests/java/StoreAdmin.java`) against `ferromq standalone` with 1 MiB CommitLog
//! segments, checked by what the store then holds:
//!
//! - DELETE_EXPIRED_COMMITLOG (mqadmin `deleteExpiredCommitLog`): with `fileReservedTime=0`
//!   and `deleteWhen` an hour that is not now, no segment goes until it is asked; then every
//!   segment but the newest goes, and the queues' min offsets move past what went.
//! - CLEAN_EXPIRED_CONSUMEQUEUE (`cleanExpiredCQ`): a topic whose messages were all in the
//!   deleted segments loses its queues (max offset back to 0); a topic with messages still in
//!   the CommitLog keeps them.
//! - CLEAN_UNUSED_TOPIC (`cleanUnusedTopic`): after a restart on a `topics.json` that no
//!   longer names a topic, its queues go; a topic still configured keeps its queues.

mod common;

use common::java::{run_java, Serialize, Standalone};
use common::{connect, send_request};
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::{ExtFields, RemotingCommand, RequestCode, SerializeType};
use std::path::Path;
use std::time::{Duration, Instant};

const SEGMENT: usize = 1 << 20;

fn config() -> String {
    // An hour that is not this one (local time, as `deleteWhen` is read), so retention
    // deletes nothing by itself.
    let hour = (chrono::Local::now()
        .format("%H")
        .to_string()
        .parse::<u32>()
        .unwrap()
        + 12)
        % 24;
    format!(
        "mappedFileSizeCommitLog={SEGMENT}\nfileReservedTime=0\ndeleteWhen={hour:02}\n\
         cleanResourceInterval=200\ndiskMaxUsedSpaceRatio=95\ndiskSpaceWarningLevelRatio=0.99"
    )
}

fn runtime() -> tokio::runtime::Runtime {
    common::runtime()
}

async fn send(client: &RemotingClient, topic: &str, body: &[u8]) {
    let answer = client
        .request(send_request(topic, 0, body, ""))
        .await
        .unwrap();
    assert_eq!(answer.code, 0, "send to {topic}: {:?}", answer.remark);
}

async fn offset(client: &RemotingClient, code: RequestCode, topic: &str) -> i64 {
    let mut request = RemotingCommand::request(code);
    let mut fields = ExtFields::new();
    fields.insert("topic", topic);
    fields.insert("queueId", "0");
    request.ext_fields = Some(fields);
    let answer = client.request(request).await.unwrap();
    assert_eq!(answer.code, 0, "{code:?} of {topic}: {:?}", answer.remark);
    answer.ext("offset").unwrap().parse().unwrap()
}

fn segments(data: &Path) -> usize {
    std::fs::read_dir(data.join("store/commitlog"))
        .map(|dir| dir.filter_map(Result::ok).count())
        .unwrap_or(0)
}

fn admin(server: &Standalone, op: &str) {
    let output = run_java(
        "StoreAdmin",
        &[&server.namesrv_addr(), &server.broker_addr(), op],
        Serialize::Json,
        Duration::from_secs(60),
    );
    output.assert_passed(op);
    assert_eq!(
        output.results.get("ok").map(String::as_str),
        Some("true"),
        "{}",
        output.text
    );
}

#[test]
fn java_admin_cleans_the_commit_log_and_queues_on_request() {
    let server = Standalone::start(&config());
    let rt = runtime();
    let client = rt.block_on(connect(server.broker, SerializeType::Json));
    let big = vec![b'x'; 64 * 1024];
    rt.block_on(async {
        for _ in 0..20 {
            send(&client, "CleanOldT", b"old").await;
        }
        // 3.5 MiB: the old topic's segment and two more fill up.
        for _ in 0..56 {
            send(&client, "CleanLiveT", &big).await;
        }
    });
    let before = segments(&server.data);
    assert!(before >= 4, "{before} segments");
    // Retention runs every 200 ms and must delete nothing by itself.
    let watch = Instant::now();
    while watch.elapsed() < Duration::from_secs(2) {
        assert_eq!(
            segments(&server.data),
            before,
            "deleted before it was asked"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    admin(&server, "deleteExpiredCommitLog");
    let deadline = Instant::now() + Duration::from_secs(30);
    while segments(&server.data) > 1 {
        assert!(
            Instant::now() < deadline,
            "{} segments left",
            segments(&server.data)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    rt.block_on(async {
        assert_eq!(
            offset(&client, RequestCode::GET_MAX_OFFSET, "CleanOldT").await,
            20
        );
        let live_max = offset(&client, RequestCode::GET_MAX_OFFSET, "CleanLiveT").await;
        assert_eq!(live_max, 56);
        // ConsumeQueue retention raises the min offset past what went, on its next pass.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let live_min = offset(&client, RequestCode::GET_MIN_OFFSET, "CleanLiveT").await;
            if live_min > 0 {
                assert!(live_min < 56, "live min offset {live_min}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "live min offset still {live_min}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });

    admin(&server, "cleanExpiredCQ");
    rt.block_on(async {
        assert_eq!(
            offset(&client, RequestCode::GET_MAX_OFFSET, "CleanOldT").await,
            0
        );
        assert_eq!(
            offset(&client, RequestCode::GET_MAX_OFFSET, "CleanLiveT").await,
            56
        );
    });
}

#[test]
fn java_admin_cleans_the_queues_of_unconfigured_topics() {
    let server = Standalone::start("");
    let rt = runtime();
    rt.block_on(async {
        let client = connect(server.broker, SerializeType::Json).await;
        for _ in 0..5 {
            send(&client, "UnusedT", b"u").await;
            send(&client, "KeptT", b"k").await;
        }
    });
    let (dir, data) = server.stop();
    let topics_file = data.join("store/config/topics.json");
    let text = std::fs::read_to_string(&topics_file).unwrap();
    let mut topics: serde_json::Value =
        ferromq::config::fastjson::parse_lenient(text.as_bytes()).unwrap();
    let removed = topics["topicConfigTable"]
        .as_object_mut()
        .unwrap()
        .remove("UnusedT");
    assert!(removed.is_some(), "{text}");
    std::fs::write(&topics_file, topics.to_string()).unwrap();
    let _ = std::fs::remove_file(data.join("store/config/topics.json.bak"));

    let server = Standalone::start_in(dir, data, "");
    let client = rt.block_on(connect(server.broker, SerializeType::Json));
    rt.block_on(async {
        assert_eq!(
            offset(&client, RequestCode::GET_MAX_OFFSET, "UnusedT").await,
            5
        );
    });
    admin(&server, "cleanUnusedTopic");
    rt.block_on(async {
        assert_eq!(
            offset(&client, RequestCode::GET_MAX_OFFSET, "UnusedT").await,
            0
        );
        assert_eq!(
            offset(&client, RequestCode::GET_MAX_OFFSET, "KeptT").await,
            5
        );
    });
}
