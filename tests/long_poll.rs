//! Long polling and the puts the broker makes itself: a pull held on an empty queue (15 s
//! suspend, as the Java push consumer asks) must be answered as soon as the delay
//! scheduler, a send-back or a transaction commit stores a message there, and for a queue's
//! first message too — not when its suspend ends.
//!
//! Method: a real `ferromq broker` process (delay levels of 1 s); each case holds a pull at
//! the queue's end, makes the broker put into that queue, and times the answer; every case
//! runs several rounds, since a missed wake-up may be intermittent. A missed wake-up shows
//! as a 15 s answer (the suspend) or 5 s (the periodic re-check of held pulls).

mod common;
mod sched;

use common::{connect, BrokerProcess, TempDir};
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::{
    ConsumerSendMsgBackRequestHeader, EndTransactionRequestHeader, PullMessageRequestHeader,
    SendMessageResponseHeader,
};
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use ferromq::store::message::decode_offset_msg_id;
use sched::{max_offset, props, runtime, send_request, stored};
use std::time::{Duration, Instant};

/// What the held pulls ask: Java's push consumer suspends 15 s.
const SUSPEND_MS: i64 = 15_000;
/// An answer later than this after the put was not woken by it (a delay of 1 s included).
const WOKEN_WITHIN: Duration = Duration::from_secs(4);
/// Rounds per case.
const ROUNDS: usize = 4;

/// A pull of `group` on `topic`/`queue` at `offset`, held up to [`SUSPEND_MS`].
fn held_pull(group: &str, topic: &str, queue: i32, offset: i64) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        suspend_timeout_millis: SUSPEND_MS,
        // Commit offset, suspend, subscription in the request: as the Java client pulls.
        sys_flag: 0x1 | 0x2 | 0x4,
        ..common::pull_header(group, topic, queue, offset)
    };
    RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header)
}

/// Starts a held pull at the queue's end, runs `put`, and answers how long after `put`
/// began the pull returned a message, with the message's properties.
async fn woken_by(
    client: &RemotingClient,
    group: &str,
    topic: &str,
    queue: i32,
    put: impl std::future::Future<Output = ()>,
) -> (Duration, Vec<(String, String)>) {
    let offset = max_offset(client, topic, queue).await;
    let pulling = {
        let client = client.clone();
        let request = held_pull(group, topic, queue, offset);
        tokio::spawn(async move {
            client
                .request_timeout(request, Duration::from_secs(30))
                .await
                .unwrap()
        })
    };
    // The pull is held once it has found nothing: give it the time to get there.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    put.await;
    let response = pulling.await.unwrap();
    let took = started.elapsed();
    assert_eq!(response.code, 0, "pull: {:?}", response.remark);
    let found = stored(&response.body);
    assert_eq!(found.len(), 1, "one message");
    assert_eq!(found[0].queue_offset, offset);
    (took, found[0].properties.clone())
}

fn send_ok(response: &RemotingCommand) -> SendMessageResponseHeader {
    assert_eq!(response.code, 0, "send: {:?}", response.remark);
    response.decode_header().unwrap()
}

#[test]
fn a_held_pull_is_woken_by_the_delay_scheduler() {
    let dir = TempDir::on_disk("long-poll-delay");
    let broker = BrokerProcess::start(dir.path(), "messageDelayLevel=1s 1s 1s");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        // The topic exists (a send to another queue makes it); round 0 is queue 0's first
        // message, and the schedule queue's.
        let make = send_request("LpDelay", 1, b"make", &props(&[]), None, None);
        send_ok(&client.request(make).await.unwrap());
        for round in 0..ROUNDS {
            let delayed = props(&[("DELAY", "1"), ("TAGS", "t")]);
            let request = send_request("LpDelay", 0, b"later", &delayed, None, None);
            let (took, properties) = woken_by(&client, "lp-delay", "LpDelay", 0, async {
                send_ok(&client.request(request).await.unwrap());
            })
            .await;
            assert!(
                took < WOKEN_WITHIN,
                "round {round}: a delayed message reached a held pull after {took:?}"
            );
            assert!(properties.iter().any(|(k, v)| k == "DELAY" && v == "1"));
        }
    });
}

#[test]
fn a_held_pull_on_a_retry_queue_is_woken_by_a_send_back() {
    let dir = TempDir::on_disk("long-poll-retry");
    let broker = BrokerProcess::start(dir.path(), "messageDelayLevel=1s 1s 1s");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let group = "lp-retry";
        let retry = format!("%RETRY%{group}");
        for round in 0..ROUNDS {
            let request = send_request("LpRetry", 0, b"fails", &props(&[]), None, None);
            let sent = send_ok(&client.request(request).await.unwrap());
            let (_, physical) = decode_offset_msg_id(&sent.msg_id).unwrap();
            // The retry topic is made by the first send-back: round 0's pull waits on a
            // queue that does not exist yet, so it is held from the start of round 1.
            if round == 0 {
                send_back(&client, group, physical).await;
                continue;
            }
            let (took, properties) = woken_by(&client, group, &retry, 0, async {
                send_back(&client, group, physical).await;
            })
            .await;
            assert!(
                took < WOKEN_WITHIN,
                "round {round}: a send-back reached a held pull after {took:?}"
            );
            assert!(properties
                .iter()
                .any(|(k, v)| k == "RETRY_TOPIC" && v == "LpRetry"));
        }
    });
}

async fn send_back(client: &RemotingClient, group: &str, offset: i64) {
    let header = ConsumerSendMsgBackRequestHeader {
        offset,
        group: group.into(),
        // Level 1: one second.
        delay_level: 1,
        origin_msg_id: None,
        origin_topic: Some("LpRetry".into()),
        unit_mode: Some(false),
        max_reconsume_times: Some(16),
    };
    let request =
        RemotingCommand::request_with_header(RequestCode::CONSUMER_SEND_MSG_BACK, &header);
    let response = client.request(request).await.unwrap();
    assert_eq!(response.code, 0, "send-back: {:?}", response.remark);
}

#[test]
fn a_held_pull_is_woken_by_a_transaction_commit() {
    let dir = TempDir::on_disk("long-poll-tx");
    let broker = BrokerProcess::start(dir.path(), "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        for round in 0..ROUNDS {
            let half_props = props(&[("TRAN_MSG", "true"), ("PGROUP", "lp-tx-producer")]);
            let mut request = send_request("LpTx", 0, b"paid", &half_props, None, None);
            // The prepared type in the sys flag, as the Java producer sends a half.
            let mut fields = request.ext_fields.take().unwrap();
            fields.insert("f", "4");
            request.ext_fields = Some(fields);
            let sent = send_ok(&client.request(request).await.unwrap());
            let (_, physical) = decode_offset_msg_id(&sent.msg_id).unwrap();
            let (took, properties) = woken_by(&client, "lp-tx", "LpTx", 0, async {
                let end = EndTransactionRequestHeader {
                    producer_group: "lp-tx-producer".into(),
                    tran_state_table_offset: sent.queue_offset,
                    commit_log_offset: physical,
                    commit_or_rollback: 8,
                    from_transaction_check: Some(false),
                    msg_id: sent.msg_id.clone(),
                    transaction_id: None,
                    topic: None,
                };
                let commit =
                    RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &end);
                client.oneway(commit).await.unwrap();
            })
            .await;
            assert!(
                took < WOKEN_WITHIN,
                "round {round}: a commit reached a held pull after {took:?}"
            );
            assert!(properties
                .iter()
                .any(|(k, v)| k == "TRAN_MSG" && v == "true"));
        }
    });
}
