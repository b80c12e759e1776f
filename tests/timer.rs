//! Timer messages (RocketMQ 5.x's `TIMER_DELIVER_MS`, `TIMER_DELAY_SEC`, `TIMER_DELAY_MS`)
//! against a real `ferromq broker` process, over raw remoting frames: admission as Java's
//! put hook answers it, delivery of messages with random times over a window (each once,
//! none before its time, within the precision), the roll of times beyond the roll window,
//! recall (RECALL_MESSAGE 370), the files in Java 5.x's layout, and a SIGTERM and a SIGKILL
//! of the broker in the middle of a window losing nothing (duplicates counted and printed).
//!
//! Times are the broker's: a delivered message's store time against the time it asked for
//! (one machine, one clock).

mod common;
mod sched;

use common::{connect, BrokerProcess, TempDir};
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::{RecallMessageRequestHeader, RecallMessageResponseHeader};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use sched::{max_offset, now_ms, props, pull_all, runtime, send_request, Stored, DEADLINE};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
const GROUP: &str = "timer-reader";
/// `timerPrecisionMs`, Java's default.
const PRECISION_MS: i64 = 1000;
/// Allowed lateness past the precision: the timer looks every 100 ms, then a put, on a
/// loaded two-core machine.
const SLACK_MS: i64 = 1500;

/// Sends one message and answers the response (any code).
async fn send_raw(
    client: &RemotingClient,
    topic: &str,
    queue: i32,
    body: &str,
    properties: &str,
) -> RemotingCommand {
    let request = send_request(topic, queue, body.as_bytes(), properties, None, None);
    client.request(request).await.unwrap()
}

/// A timer message `body` asking for `when` (one of the three properties), with a
/// `UNIQ_KEY` of its own; answers the send's response.
async fn send_timer(
    client: &RemotingClient,
    topic: &str,
    queue: i32,
    body: &str,
    when: (&str, String),
) -> RemotingCommand {
    let uniq = format!("UNIQ-{body}");
    let properties = props(&[
        (when.0, &when.1),
        ("UNIQ_KEY", &uniq),
        ("KEYS", &format!("key-{body}")),
        ("user", &format!("value-{body}")),
    ]);
    send_raw(client, topic, queue, body, &properties).await
}

/// Every message of the queues of `topic`.
async fn all_of(client: &RemotingClient, topic: &str, queues: i32) -> Vec<Stored> {
    let mut all = Vec::new();
    for queue in 0..queues {
        all.extend(pull_all(client, GROUP, topic, queue).await);
    }
    all
}

/// Polls until `done` holds for the messages of `topic`, or `deadline` passes; answers them.
async fn wait_until(
    client: &RemotingClient,
    topic: &str,
    queues: i32,
    deadline: Duration,
    done: impl Fn(&[Stored]) -> bool,
) -> Vec<Stored> {
    let started = Instant::now();
    loop {
        let all = all_of(client, topic, queues).await;
        if done(&all) || started.elapsed() > deadline {
            return all;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A small deterministic generator (64-bit LCG): the seed is printed, a failure replays.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn seed() -> u64 {
    std::env::var("TIMER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| u64::try_from(now_ms()).unwrap())
}

/// What a window of timer messages asked for: body → the time it may be delivered from.
type Asked = HashMap<String, i64>;

/// Sends `count` messages to `topic` (queues 0..4) with random times in
/// `[now + 1 s, now + window_ms]`, through each of the three properties in turn.
async fn send_window(
    client: &RemotingClient,
    topic: &str,
    prefix: &str,
    count: usize,
    window_ms: u64,
    rng: &mut Lcg,
) -> Asked {
    let mut asked = Asked::new();
    for i in 0..count {
        let body = format!("{prefix}{i}");
        let delay_ms = 1000 + rng.below(window_ms - 1000);
        let now = now_ms();
        let delay = i64::try_from(delay_ms).unwrap();
        let (when, at) = match i % 3 {
            0 => (("TIMER_DELIVER_MS", (now + delay).to_string()), now + delay),
            1 => {
                let seconds = delay / 1000;
                (
                    ("TIMER_DELAY_SEC", seconds.to_string()),
                    now + seconds * 1000,
                )
            }
            _ => (("TIMER_DELAY_MS", delay.to_string()), now + delay),
        };
        let queue = i32::try_from(i % 4).unwrap();
        let response = send_timer(client, topic, queue, &body, when).await;
        assert_eq!(response.code, 0, "send refused: {:?}", response.remark);
        asked.insert(body, at);
    }
    asked
}

/// Checks a window's deliveries: each asked message at least once, none before its time;
/// answers the lateness of each first delivery (ms, sorted) and the duplicates.
fn check_window(asked: &Asked, delivered: &[Stored], slack_ms: i64) -> (Vec<i64>, usize) {
    let mut first: HashMap<&str, &Stored> = HashMap::new();
    let mut duplicates = 0;
    for message in delivered {
        let body = std::str::from_utf8(&message.body).unwrap();
        let Some(at) = asked.get(body) else { continue };
        assert!(
            message.store_timestamp >= *at,
            "{body} delivered {} ms early",
            at - message.store_timestamp
        );
        assert_eq!(
            message.prop("UNIQ_KEY"),
            Some(format!("UNIQ-{body}").as_str())
        );
        assert_eq!(message.prop("user"), Some(format!("value-{body}").as_str()));
        assert!(
            message.prop("TIMER_DEQUEUE_MS").is_some(),
            "{body} without TIMER_DEQUEUE_MS"
        );
        assert!(
            message.prop("TIMER_OUT_MS").is_some(),
            "{body} without TIMER_OUT_MS"
        );
        assert_eq!(message.prop("REAL_TOPIC"), None, "{body} keeps REAL_TOPIC");
        if first.insert(body, message).is_some() {
            duplicates += 1;
        }
    }
    let missing: Vec<&String> = asked
        .keys()
        .filter(|b| !first.contains_key(b.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} never delivered: {missing:?}",
        missing.len()
    );
    let mut late: Vec<i64> = first
        .iter()
        .map(|(body, m)| m.store_timestamp - asked[*body])
        .collect();
    late.sort_unstable();
    let worst = *late.last().unwrap();
    assert!(
        worst <= PRECISION_MS + slack_ms,
        "a message delivered {worst} ms after its time"
    );
    (late, duplicates)
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

#[test]
fn timer_messages_are_delivered_once_none_early_within_the_precision() {
    let dir = TempDir::on_disk("timer-window");
    let broker = BrokerProcess::start(dir.path(), "");
    let seed = seed();
    println!("TIMER_TEST_SEED={seed}");
    let mut rng = Lcg(seed);
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let topic = "TimerWindow";
        let asked = send_window(&client, topic, "w", 600, 8_000, &mut rng).await;
        // Past times are delivered at once, not parked.
        for i in 0..3 {
            let when = ("TIMER_DELIVER_MS", (now_ms() - 60_000).to_string());
            let response = send_timer(&client, topic, 0, &format!("past{i}"), when).await;
            assert_eq!(response.code, 0);
        }
        let is_past = |m: &Stored| m.body.starts_with(b"past");
        let past = wait_until(&client, topic, 4, Duration::from_secs(5), |all| {
            all.iter().filter(|m| is_past(m)).count() >= 3
        })
        .await;
        let past: Vec<_> = past
            .iter()
            .filter(|m| m.body.starts_with(b"past"))
            .collect();
        assert_eq!(past.len(), 3, "a past time is delivered at once");
        assert!(past.iter().all(|m| m.prop("TIMER_OUT_MS").is_none()));
        // The rest wait in the timer topic's queue 0, as Java parks them.
        let parked = max_offset(&client, TIMER_TOPIC, 0).await;
        assert!(parked >= 590, "{parked} parked");

        let count = asked.len() + 3;
        let delivered = wait_until(&client, topic, 4, Duration::from_secs(30), |all| {
            all.len() >= count
        })
        .await;
        let (late, duplicates) = check_window(&asked, &delivered, SLACK_MS);
        println!(
            "timer window: {} messages over 8 s, lateness p50 {} ms, p99 {} ms, max {} ms, \
             duplicates {duplicates}",
            late.len(),
            percentile(&late, 0.5),
            percentile(&late, 0.99),
            late.last().unwrap()
        );
        assert_eq!(
            duplicates, 0,
            "a broker left alone delivers each message once"
        );
    });
}

#[test]
fn timer_admission_answers_as_javas_put_hook() {
    let dir = TempDir::on_disk("timer-admission");
    let broker = BrokerProcess::start(dir.path(), "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let topic = "TimerAdmission";
        let remark = "timer message illegal, the delay time should not be bigger than the max \
                      delay 259200000ms; or if set del msg, the delay time should be bigger \
                      than the current time";
        for (name, value) in [
            ("TIMER_DELAY_SEC", "259300".to_owned()),
            ("TIMER_DELIVER_MS", (now_ms() + 4 * 86_400_000).to_string()),
            ("TIMER_DELAY_MS", "soon".to_owned()),
        ] {
            let response = send_timer(&client, topic, 0, "refused", (name, value)).await;
            assert_eq!(response.code, ResponseCode::MESSAGE_ILLEGAL.0, "{name}");
            assert_eq!(response.remark.as_deref(), Some(remark));
        }
        // A delay level wins: the timer properties go, the level applies.
        let properties = props(&[("DELAY", "1"), ("TIMER_DELAY_SEC", "100")]);
        let response = send_raw(&client, topic, 0, "level", &properties).await;
        assert_eq!(response.code, 0);
        let scheduled = sched::wait_for(&client, GROUP, "SCHEDULE_TOPIC_XXXX", 0, 1).await;
        assert_eq!(scheduled.len(), 1);
        assert_eq!(scheduled[0].prop("TIMER_DELAY_SEC"), None);
        // RECALL_MESSAGE is off by default, as in Java.
        let recall = recall_request(topic, "aGFuZGxl");
        let response = client.request(recall).await.unwrap();
        assert_eq!(response.code, ResponseCode::NO_PERMISSION.0);
        assert_eq!(
            response.remark.as_deref(),
            Some("recall failed, operation is forbidden")
        );
    });
    let off = TempDir::on_disk("timer-disabled");
    let broker = BrokerProcess::start(off.path(), "timerWheelEnable=false");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let when = ("TIMER_DELAY_SEC", "5".to_owned());
        let response = send_timer(&client, "TimerOff", 0, "off", when).await;
        assert_eq!(response.code, ResponseCode::SYSTEM_ERROR.0);
        assert_eq!(
            response.remark.as_deref(),
            Some("accurate timer message is not enabled, timerWheelEnable is false")
        );
    });
    // As Java, no timer at all: none of its files.
    assert!(
        !off.path().join("timerwheel").exists(),
        "a disabled timer made its wheel"
    );
}

fn recall_request(topic: &str, handle: &str) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::RECALL_MESSAGE,
        &RecallMessageRequestHeader {
            producer_group: Some("timer-producer".into()),
            topic: topic.into(),
            recall_handle: handle.into(),
        },
    )
}

#[test]
fn timer_recall_cancels_a_pending_message() {
    let dir = TempDir::on_disk("timer-recall");
    let broker = BrokerProcess::start(dir.path(), "recallMessageEnable=true");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let topic = "TimerRecall";
        let at = (now_ms() + 3_000).to_string();
        let kept = send_timer(&client, topic, 0, "kept", ("TIMER_DELIVER_MS", at.clone())).await;
        assert_eq!(kept.code, 0);
        let gone = send_timer(&client, topic, 0, "gone", ("TIMER_DELIVER_MS", at)).await;
        assert_eq!(gone.code, 0);
        let handle = gone
            .ext("recallHandle")
            .expect("a timer send answers a recall handle");
        // A handle of another topic is refused.
        let response = client
            .request(recall_request("Other", handle))
            .await
            .unwrap();
        assert_eq!(response.code, ResponseCode::TOPIC_NOT_EXIST.0);
        let response = client.request(recall_request(topic, "!!")).await.unwrap();
        assert_eq!(response.code, ResponseCode::ILLEGAL_OPERATION.0);
        assert_eq!(response.remark.as_deref(), Some("recall handle is invalid"));
        let response = client.request(recall_request(topic, handle)).await.unwrap();
        assert_eq!(response.code, 0, "recall refused: {:?}", response.remark);
        let header: RecallMessageResponseHeader = response.decode_header().unwrap();
        assert_eq!(header.msg_id, "UNIQ-gone");
        let delivered = wait_until(&client, topic, 1, DEADLINE, |all| !all.is_empty()).await;
        assert_eq!(delivered.len(), 1);
        assert_eq!(delivered[0].body, b"kept");
        // Two more slots: the recalled message would have come with the kept one.
        tokio::time::sleep(Duration::from_millis(2 * 1000)).await;
        let after = all_of(&client, topic, 1).await;
        let bodies: Vec<&[u8]> = after.iter().map(|m| m.body.as_slice()).collect();
        assert_eq!(
            bodies,
            [b"kept".as_slice()],
            "the recalled message was delivered"
        );
    });
}

/// The broker's GET_BROKER_RUNTIME_INFO table.
async fn runtime_info(client: &RemotingClient) -> HashMap<String, String> {
    let request = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO);
    let response = client.request(request).await.unwrap();
    assert_eq!(response.code, 0);
    let table: ferromq::remoting::body::KvTable = serde_json::from_slice(&response.body).unwrap();
    table.table.into_iter().collect()
}

/// Polls the runtime info until `done` holds for it, for at most [`DEADLINE`].
async fn runtime_until(
    client: &RemotingClient,
    what: &str,
    done: impl Fn(&HashMap<String, String>) -> bool,
) -> HashMap<String, String> {
    let started = Instant::now();
    loop {
        let info = runtime_info(client).await;
        if done(&info) {
            return info;
        }
        assert!(started.elapsed() < DEADLINE, "never {what}: {info:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn timer_progress_shows_in_the_runtime_info() {
    let dir = TempDir::on_disk("timer-progress");
    let broker = BrokerProcess::start(dir.path(), "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let topic = "TimerProgress";
        let figure = |info: &HashMap<String, String>, key: &str| -> f64 {
            info[key]
                .parse()
                .unwrap_or_else(|_| panic!("{key} {:?}", info[key]))
        };
        // 5.x's keys, from the start: nothing waits.
        let idle = runtime_until(&client, "the timer's figures", |info| {
            info.contains_key("timerCongestNum")
        })
        .await;
        assert_eq!(idle["timerCongestNum"], "0");
        assert_eq!(idle["timerOffsetBehind"], "0");
        assert!(figure(&idle, "timerReadBehind") <= 2.0, "{idle:?}");
        let at = (now_ms() + 5_000).to_string();
        for n in 0..5 {
            let body = format!("progress-{n}");
            let response = send_timer(&client, topic, 0, &body, ("TIMER_DELIVER_MS", at.clone()));
            assert_eq!(response.await.code, 0);
        }
        // Enqueued: five in the wheel, none left in the timer queue, a rate seen.
        let pending = runtime_until(&client, "five pending", |info| {
            info["timerCongestNum"] == "5" && info["timerOffsetBehind"] == "0"
        })
        .await;
        assert!(figure(&pending, "timerDequeueTps") == 0.0, "{pending:?}");
        runtime_until(&client, "an enqueue rate", |info| {
            figure(info, "timerEnqueueTps") > 0.0
        })
        .await;
        // Delivered: the wheel is empty again.
        let delivered = wait_until(&client, topic, 1, DEADLINE, |all| all.len() == 5).await;
        assert_eq!(delivered.len(), 5);
        runtime_until(&client, "the wheel emptied", |info| {
            info["timerCongestNum"] == "0"
        })
        .await;
    });
}

#[test]
fn timer_rolls_times_beyond_the_roll_window() {
    let dir = TempDir::on_disk("timer-roll");
    let broker = BrokerProcess::start(dir.path(), "timerRollWindowSlot=2");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let topic = "TimerRoll";
        let at = now_ms() + 6_000;
        let response = send_timer(
            &client,
            topic,
            0,
            "rolled",
            ("TIMER_DELIVER_MS", at.to_string()),
        )
        .await;
        assert_eq!(response.code, 0);
        let delivered = wait_until(&client, topic, 1, DEADLINE, |all| !all.is_empty()).await;
        assert_eq!(delivered.len(), 1);
        let message = &delivered[0];
        assert!(
            message.store_timestamp >= at,
            "rolled message delivered early"
        );
        assert!(message.store_timestamp - at <= PRECISION_MS + SLACK_MS);
        let rolls: i32 = message.prop("TIMER_ROLL_TIMES").unwrap().parse().unwrap();
        assert!(rolls >= 1, "TIMER_ROLL_TIMES {rolls}");
        // Each roll went back through the timer topic.
        let parked = max_offset(&client, TIMER_TOPIC, 0).await;
        assert_eq!(parked, 1 + i64::from(rolls));
    });
}

#[test]
fn timer_survives_a_restart_and_a_kill_9_in_the_middle() {
    let dir = TempDir::on_disk("timer-crash");
    let seed = seed();
    println!("TIMER_TEST_SEED={seed}");
    let mut rng = Lcg(seed);
    let topic = "TimerCrash";
    let mut broker = BrokerProcess::start(dir.path(), "");
    let asked = runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        send_window(&client, topic, "c", 300, 12_000, &mut rng).await
    });
    let sent_at = Instant::now();
    // SIGTERM once some are delivered, start again on the same store.
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        wait_until(&client, topic, 4, DEADLINE, |all| all.len() >= 40).await;
    });
    assert!(broker.terminate().success());
    let files = dir.path();
    assert_eq!(
        std::fs::metadata(files.join("timerwheel")).unwrap().len(),
        38_707_200
    );
    assert_eq!(
        std::fs::metadata(files.join("config/timercheck"))
            .unwrap()
            .len(),
        4096
    );
    let timerlog = files.join("timerlog/00000000000000000000");
    assert_eq!(std::fs::metadata(&timerlog).unwrap().len(), 100 << 20);
    let check = std::fs::read(files.join("config/timercheck")).unwrap();
    let word = |i: usize| i64::from_be_bytes(check[i * 8..i * 8 + 8].try_into().unwrap());
    assert_eq!(word(2), 300, "lastTimerQueueOffset: every message enqueued");
    assert_eq!(word(1), 300 * 52, "lastTimerLogFlushPos: 300 units");
    assert!(
        word(0) > 0 && word(0) % PRECISION_MS == 0,
        "lastReadTimeMs {}",
        word(0)
    );

    let mut broker = BrokerProcess::start(dir.path(), "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        wait_until(&client, topic, 4, DEADLINE, |all| all.len() >= 150).await;
    });
    // SIGKILL in the middle of the window.
    common::kill(&mut broker.child);
    assert!(
        sent_at.elapsed() < Duration::from_secs(12),
        "the window ended before the kill"
    );
    let broker = BrokerProcess::start(dir.path(), "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let delivered = wait_until(&client, topic, 4, DEADLINE, |all| {
            let bodies: std::collections::HashSet<&[u8]> =
                all.iter().map(|m| m.body.as_slice()).collect();
            bodies.len() >= asked.len()
        })
        .await;
        // A restart may deliver late what its stop held up: no bound on lateness here.
        let (late, duplicates) = check_window(&asked, &delivered, 60_000);
        println!(
            "timer across SIGTERM and SIGKILL: {} messages, none lost, duplicates {duplicates}, \
             lateness p50 {} ms, max {} ms",
            late.len(),
            percentile(&late, 0.5),
            late.last().unwrap()
        );
    });
}

/// Messages and window of the Java client tests: 1,000 over 20 s, to keep the suite short;
/// `TIMER_JAVA_COUNT` and `TIMER_JAVA_WINDOW_MS` scale them (the 10,000 over 60 s).
fn java_scale() -> (u32, u64) {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    (
        var("TIMER_JAVA_COUNT").map_or(1_000, |v: u64| u32::try_from(v).unwrap()),
        var("TIMER_JAVA_WINDOW_MS").unwrap_or(20_000),
    )
}

/// The Java 4.9.8 client sending `TIMER_DELIVER_MS` and `TIMER_DELAY_SEC` as user properties
/// against `ferromq standalone`: each message once, none early, within the precision; a past
/// time at once; over-max refused with MESSAGE_ILLEGAL.
#[test]
fn java_498_client_timer_properties_on_time() {
    use common::java::{self, Serialize, Standalone};
    let server = Standalone::start("");
    let (count, window_ms) = java_scale();
    let output = java::run_java(
        "Timer",
        &[
            &server.namesrv_addr(),
            "JavaTimer498",
            &count.to_string(),
            &window_ms.to_string(),
        ],
        Serialize::Json,
        Duration::from_secs(240) + Duration::from_millis(window_ms),
    );
    output.assert_passed("Timer (4.9.8 client)");
    assert_eq!(output.figure("delivered"), f64::from(count + 3));
    assert_eq!(output.figure("over_max_code"), 13.0);
    println!(
        "4.9.8 client, {count} timer messages over {window_ms} ms: lateness p50 {} ms, \
         p99 {} ms, max {} ms",
        output.figure("late_p50_ms"),
        output.figure("late_p99_ms"),
        output.figure("late_max_ms")
    );
}

/// The Java 5.x remoting client's `Message.setDeliverTimeMs` and `recallMessage` against
/// `ferromq standalone` (with `recallMessageEnable`): each message once, none early, within
/// the precision; the recalled one never.
#[test]
fn java5_client_deliver_time_and_recall() {
    use common::java::{self, Serialize, Standalone};
    let kit = java::kit5();
    let server = Standalone::start("recallMessageEnable=true");
    let (count, window_ms) = java_scale();
    let output = java::run_java_on(
        &kit,
        &java::classes5(),
        "Java5Timer",
        &[
            &server.namesrv_addr(),
            "JavaTimer5",
            &count.to_string(),
            &window_ms.to_string(),
        ],
        Serialize::Json,
        "",
        Duration::from_secs(240) + Duration::from_millis(window_ms),
    );
    output.assert_passed("Java5Timer (5.x client)");
    assert_eq!(output.figure("delivered"), f64::from(count));
    assert_eq!(output.figure("recalled_id_matches"), 1.0);
    println!(
        "5.x client, {count} timer messages over {window_ms} ms: lateness p50 {} ms, \
         p99 {} ms, max {} ms",
        output.figure("late_p50_ms"),
        output.figure("late_p99_ms"),
        output.figure("late_max_ms")
    );
}

/// Our client's `Message::with_deliver_time_ms` through a name server: each message is
/// stored in the timer topic at once and delivered once, none before its time.
#[test]
fn rust_client_deliver_time_ms_is_honoured() {
    use common::NamesrvProcess;
    use ferromq::client::{ClientConfig, Message, Producer};
    let namesrv = NamesrvProcess::start("");
    let dir = TempDir::on_disk("timer-rust-client");
    let config = format!("brokerName=broker-a\nnamesrvAddr={}", namesrv.addr);
    let broker = BrokerProcess::start(dir.path(), &config);
    runtime().block_on(async {
        let producer = Producer::new("timer-rust", ClientConfig::new(&namesrv.addr.to_string()));
        producer.start().await.unwrap();
        let topic = "TimerRustClient";
        let mut asked = Asked::new();
        let started = Instant::now();
        for i in 0..20 {
            let body = format!("r{i}");
            let at = now_ms() + 2_000 + i * 100;
            let message = Message::new(topic, body.clone())
                .with_keys([format!("key-{body}")])
                .with_deliver_time_ms(at);
            assert_eq!(message.deliver_time_ms(), Some(at));
            // The first sends wait for the broker's registration with the name server.
            loop {
                match producer.send(message.clone()).await {
                    Ok(_) => break,
                    Err(error) => {
                        assert!(started.elapsed() < DEADLINE, "send failed: {error}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            asked.insert(body, at);
        }
        let client = connect(broker.addr, SerializeType::Json).await;
        let delivered = wait_until(&client, topic, 4, DEADLINE, |all| all.len() >= 20).await;
        let mut first = HashMap::new();
        for message in &delivered {
            let body = String::from_utf8(message.body.clone()).unwrap();
            assert!(
                message.store_timestamp >= asked[&body],
                "{body} delivered early"
            );
            assert!(first.insert(body, ()).is_none(), "delivered twice");
        }
        assert_eq!(first.len(), 20);
        producer.shutdown().await;
    });
}
