//! Retry and dead letter against a real `ferromq broker` process: CONSUMER_SEND_MSG_BACK puts
//! a pulled message in `SCHEDULE_TOPIC_XXXX` at level `3 + reconsumeTimes`, then in
//! `%RETRY%<group>` with `reconsumeTimes` one higher, `RETRY_TOPIC` and `ORIGIN_MESSAGE_ID`;
//! past `maxReconsumeTimes` (or at a negative level) it goes to `%DLQ%<group>`, readable;
//! unknown groups and offsets get Java's codes and remarks; a producer's send to a `%RETRY%`
//! topic past the maximum is dead-lettered.

mod common;
mod sched;

use common::{connect, BrokerProcess, TempDir};
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::{ConsumerSendMsgBackRequestHeader, SendMessageResponseHeader};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use ferromq::store::message::offset_msg_id;
use sched::{props, pull_all, runtime, send_request, wait_for, Stored};

const SCHEDULE: &str = "SCHEDULE_TOPIC_XXXX";
const LEVELS: &str = "messageDelayLevel=1s 1s 1s 1s 1s 1s 1s 1s";

async fn send_back(
    client: &RemotingClient,
    group: &str,
    offset: i64,
    delay_level: i32,
    max: Option<i32>,
) -> RemotingCommand {
    let header = ConsumerSendMsgBackRequestHeader {
        offset,
        group: group.into(),
        delay_level,
        origin_msg_id: Some("ignored-by-the-broker".into()),
        origin_topic: Some("RetryT".into()),
        unit_mode: Some(false),
        max_reconsume_times: max,
    };
    let request =
        RemotingCommand::request_with_header(RequestCode::CONSUMER_SEND_MSG_BACK, &header);
    client.request(request).await.unwrap()
}

async fn send_ok(client: &RemotingClient, group: &str, message: &Stored, level: i32, max: i32) {
    let response = send_back(client, group, message.physical_offset, level, Some(max)).await;
    assert_eq!(response.code, 0, "{:?}", response.remark);
}

async fn topic_config(client: &RemotingClient, topic: &str) -> serde_json::Value {
    let request = RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG);
    let response = client.request(request).await.unwrap();
    assert_eq!(response.code, 0);
    let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
    body["topicConfigTable"][topic].clone()
}

#[test]
fn send_back_retries_with_growing_reconsume_times_then_dead_letters() {
    let dir = TempDir::on_disk("retry-dlq");
    let broker = BrokerProcess::start(dir.path(), LEVELS);
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let group = "g1";
        let retry = "%RETRY%g1";
        let dlq = "%DLQ%g1";
        let properties = props(&[
            ("UNIQ_KEY", "U-retry"),
            ("KEYS", "k1"),
            ("TAGS", "t1"),
            ("user", "v1"),
        ]);
        let request = send_request("RetryT", 0, b"payload", &properties, None, None);
        let response = client.request(request).await.unwrap();
        assert_eq!(response.code, 0);
        let sent: SendMessageResponseHeader = response.decode_header().unwrap();
        let original = wait_for(&client, group, "RetryT", 0, 1).await.remove(0);
        let origin_id = offset_msg_id(original.store_host, original.physical_offset);
        assert_eq!(sent.msg_id, origin_id);

        // First send-back at level 0: level 3 (queue 2 of the schedule topic), then the
        // retry topic.
        send_ok(&client, group, &original, 0, 3).await;
        let waiting = wait_for(&client, group, SCHEDULE, 2, 1).await;
        assert_eq!(waiting.len(), 1);
        assert_eq!(waiting[0].prop("DELAY"), Some("3"));
        assert_eq!(waiting[0].prop("REAL_TOPIC"), Some(retry));
        assert_eq!(topic_config(&client, retry).await["perm"], 6);
        let mut seen = vec![original.clone()];
        for times in 1..=3 {
            let all = wait_for(&client, group, retry, 0, times).await;
            assert_eq!(all.len(), times, "each send-back delivered once");
            let copy = all[times - 1].clone();
            assert_eq!(copy.reconsume_times, i32::try_from(times).unwrap());
            assert_eq!(copy.prop("RETRY_TOPIC"), Some("RetryT"));
            assert_eq!(copy.prop("ORIGIN_MESSAGE_ID"), Some(origin_id.as_str()));
            assert_eq!(copy.prop("UNIQ_KEY"), Some("U-retry"));
            assert_eq!(copy.prop("KEYS"), Some("k1"));
            assert_eq!(copy.prop("TAGS"), Some("t1"));
            assert_eq!(copy.prop("user"), Some("v1"));
            // As Java's: the level it waited at, and the send-back's WAIT.
            let level = 2 + i32::try_from(times).unwrap();
            assert_eq!(copy.prop("DELAY"), Some(level.to_string().as_str()));
            assert_eq!(copy.prop("WAIT"), Some("false"));
            assert_eq!(copy.body, b"payload");
            assert_eq!(copy.born_timestamp, original.born_timestamp);
            // Level 3 + reconsumeTimes: this copy's send-back waits in queue 2 + times.
            if times < 3 {
                send_ok(&client, group, &copy, 0, 3).await;
                let queue = 2 + i32::try_from(times).unwrap();
                assert_eq!(wait_for(&client, group, SCHEDULE, queue, 1).await.len(), 1);
            }
            seen.push(copy);
        }
        // reconsumeTimes 3 has reached the maximum: dead letter, at once and without delay.
        send_ok(&client, group, &seen[3], 0, 3).await;
        let dead = wait_for(&client, group, dlq, 0, 1).await;
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].reconsume_times, 4);
        assert_eq!(dead[0].prop("DELAY"), Some("0"));
        assert_eq!(dead[0].prop("RETRY_TOPIC"), Some("RetryT"));
        assert_eq!(dead[0].prop("ORIGIN_MESSAGE_ID"), Some(origin_id.as_str()));
        assert_eq!(dead[0].body, b"payload");
        let config = topic_config(&client, dlq).await;
        assert_eq!(
            config["perm"], 6,
            "Java 4.9.8 creates the DLQ readable and writable"
        );
        assert_eq!(config["readQueueNums"], 1);
        assert_eq!(config["writeQueueNums"], 1);
        assert_eq!(pull_all(&client, group, retry, 0).await.len(), 3);

        // A negative level dead-letters the original at once.
        send_ok(&client, group, &original, -1, 16).await;
        let dead = wait_for(&client, group, dlq, 0, 2).await;
        assert_eq!(dead[1].reconsume_times, 1);

        // Without the header's maximum the group's (16) applies: reconsumeTimes 4 retries.
        let response = send_back(&client, group, dead[0].physical_offset, 2, None).await;
        assert_eq!(response.code, 0);
        let all = wait_for(&client, group, retry, 0, 4).await;
        assert_eq!(all[3].reconsume_times, 5);
    });
}

#[test]
fn send_back_refusals_get_javas_codes_and_remarks() {
    let dir = TempDir::on_disk("retry-refusals");
    let broker = BrokerProcess::start(dir.path(), LEVELS);
    let strict_dir = TempDir::on_disk("retry-strict");
    let strict = BrokerProcess::start(
        strict_dir.path(),
        &format!("{LEVELS}\nautoCreateSubscriptionGroup=false"),
    );
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::RocketMq).await;
        let response = send_back(&client, "g1", 123_456_789, 0, None).await;
        assert_eq!(response.code, ResponseCode::SYSTEM_ERROR.0);
        assert_eq!(
            response.remark.as_deref(),
            Some("look message by offset failed, 123456789")
        );
        // autoCreateSubscriptionGroup (true by default) creates an unknown group.
        let request = send_request("RetryT", 0, b"x", "", None, None);
        assert_eq!(client.request(request).await.unwrap().code, 0);
        let response = send_back(&client, "fresh-group", 0, 0, None).await;
        assert_eq!(response.code, 0, "{:?}", response.remark);
        assert_eq!(topic_config(&client, "%RETRY%fresh-group").await["perm"], 6);

        let client = connect(strict.addr, SerializeType::Json).await;
        let response = send_back(&client, "nobody", 0, 0, None).await;
        assert_eq!(response.code, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST.0);
        let remark = response.remark.unwrap_or_default();
        assert!(
            remark.starts_with("subscription group not exist, nobody "),
            "{remark}"
        );
        let request = send_request("%RETRY%nobody", 0, b"x", "", Some(1), Some(3));
        let response = client.request(request).await.unwrap();
        assert_eq!(response.code, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST.0);
    });
}

#[test]
fn a_producer_send_to_a_retry_topic_past_the_maximum_is_dead_lettered() {
    let dir = TempDir::on_disk("retry-producer");
    let broker = BrokerProcess::start(dir.path(), LEVELS);
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let retry = "%RETRY%g2";
        let properties = props(&[("UNIQ_KEY", "U-below")]);
        let request = send_request(retry, 0, b"below", &properties, Some(2), Some(3));
        assert_eq!(client.request(request).await.unwrap().code, 0);
        let properties = props(&[("UNIQ_KEY", "U-past")]);
        let request = send_request(retry, 0, b"past", &properties, Some(3), Some(3));
        let response = client.request(request).await.unwrap();
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let kept = wait_for(&client, "g2", retry, 0, 1).await;
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].body, b"below");
        let dead = wait_for(&client, "g2", "%DLQ%g2", 0, 1).await;
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].body, b"past");
        assert_eq!(dead[0].reconsume_times, 3);
    });
}
