//! Every request code there is, sent to a real `ferromq broker` and a real `ferromq namesrv`
//! in the shapes a broken or hostile peer sends: no header at all; every header field a peer
//! could name set to text where a number belongs, to -1, past `i64`, empty, or 8 KiB long;
//! a body that is not JSON, JSON nested 100,000 deep, or 256 KiB of noise. And each of them
//! again as oneway.
//!
//! Each request is answered (with whatever code: the point is an answer, not a hang), on its
//! own connection that stays usable, and the servers never exit. At the end the broker still
//! stores and serves a message, the name server still routes, and the broker's resident
//! anonymous memory (heap, not the mapped store) grew by less than 128 MiB over the sweep
//! (32 requests of up to 1 MiB in flight at a time).

mod common;

use common::{connect, BrokerProcess, NamesrvProcess, TempDir};
use ferromq::broker::codes::route_of;
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::EVERY_HEADER;
use ferromq::remoting::{ExtFields, RemotingCommand, RequestCode, ResponseCode, SerializeType};
use ferromq_protocol::acl;
use std::net::SocketAddr;
use std::time::Duration;

/// Every key a peer's ext fields can name: each typed header's (Java's names; SEND_MESSAGE_V2's
/// letters), then those read outside them (ACL's, the zone of a 5.x client, a query by key's
/// flag), each once.
fn field_names() -> Vec<&'static str> {
    let outside = [
        acl::ACCESS_KEY,
        acl::SIGNATURE,
        acl::SECURITY_TOKEN,
        acl::UNIQUE_MSG_QUERY_FLAG,
        "__ZONE_NAME",
    ];
    let mut keys: Vec<&str> = EVERY_HEADER
        .iter()
        .flat_map(|(_, fields)| fields.iter().map(|f| f.key))
        .chain(outside)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Requests in flight at once, each on its own connection.
const CONCURRENT: usize = 32;

/// The header shapes: a name and the value every field gets (`None`: no header).
fn headers() -> Vec<(&'static str, Option<String>)> {
    vec![
        ("none", None),
        ("text", Some("x%y z".to_owned())),
        ("minus", Some("-1".to_owned())),
        ("past-i64", Some("9223372036854775808".to_owned())),
        ("empty", Some(String::new())),
        ("long", Some("t".repeat(8 * 1024))),
    ]
}

/// The body shapes.
fn bodies() -> Vec<(&'static str, Vec<u8>)> {
    let mut noise = Vec::with_capacity(256 * 1024);
    let mut x: u32 = 0x9e37_79b9;
    while noise.len() < 256 * 1024 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    vec![
        ("empty", Vec::new()),
        ("not-json", b"{\"topicConfigTable\": [1, 2,".to_vec()),
        (
            "deep-json",
            [b"[".repeat(100_000), b"]".repeat(100_000)].concat(),
        ),
        ("noise", noise),
    ]
}

fn request(code: RequestCode, value: Option<&str>, body: &[u8]) -> RemotingCommand {
    let mut command = RemotingCommand::request(code);
    if let Some(value) = value {
        let mut fields = ExtFields::new();
        for field in field_names() {
            fields.insert(field, value);
        }
        command.ext_fields = Some(fields);
    }
    command.body = body.to_vec();
    command
}

/// The broker's anonymous resident memory (heap and stacks, not the mapped store), KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Sends every code in every shape to `addr`, a few connections at a time; returns the
/// requests that were not answered, as "code/header/body: why".
async fn sweep(addr: SocketAddr, serialize: SerializeType) -> Vec<String> {
    let mut unanswered = Vec::new();
    let shapes: Vec<(&str, Option<String>, &str, Vec<u8>)> = headers()
        .into_iter()
        .flat_map(|(h, v)| {
            bodies()
                .into_iter()
                .map(move |(b, body)| (h, v.clone(), b, body))
        })
        .collect();
    for ((header, value, body_name, body), codes) in shapes.iter().flat_map(|shape| {
        RequestCode::ALL
            .chunks(CONCURRENT)
            .map(move |codes| (shape, codes))
    }) {
        let mut tasks = Vec::new();
        for (name, code) in codes {
            let client = connect(addr, serialize).await;
            let command = request(*code, value.as_deref(), body);
            let what = format!("{name}/{header}/{body_name}");
            tasks.push(tokio::spawn(async move {
                // A pull may be held as long as a long poll lasts; nothing else that long.
                let limit = Duration::from_secs(40);
                let answered = client.request_timeout(command.clone(), limit).await;
                let mut oneway = command;
                oneway.opaque = 0;
                let _ = client.oneway(oneway).await;
                // The connection is still usable after both.
                let probe = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO);
                let usable = client.request_timeout(probe, Duration::from_secs(10)).await;
                match (answered, usable) {
                    (Ok(_), Ok(_)) => None,
                    (Err(e), _) => Some(format!("{what}: no answer ({e})")),
                    (_, Err(e)) => Some(format!("{what}: connection unusable after ({e})")),
                }
            }));
        }
        for task in tasks {
            if let Some(problem) = task.await.unwrap() {
                unanswered.push(problem);
            }
        }
    }
    unanswered
}

async fn still_serves(namesrv: &str, broker: &RemotingClient) {
    use ferromq::client::{ClientConfig, Message, Producer, SendStatus};
    let producer = Producer::new("sweep_after", ClientConfig::new(namesrv));
    producer.start().await.unwrap();
    let sent = producer
        .send(Message::new("SweepAfter", "still here"))
        .await;
    assert_eq!(sent.unwrap().send_status, SendStatus::SendOk);
    producer.shutdown().await;
    let probe = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO);
    let answer = broker.request_timeout(probe, Duration::from_secs(10)).await;
    assert_eq!(answer.unwrap().response_code(), ResponseCode::SUCCESS);
}

#[test]
fn every_code_in_every_hostile_shape_is_answered_and_hurts_nothing() {
    let dir = TempDir::on_disk("hostile-sweep");
    let mut namesrv = NamesrvProcess::start("");
    let conf = format!(
        "brokerName=broker-sweep\nnamesrvAddr={}\ndiskSpaceWarningLevelRatio=0.999\n\
         diskMaxUsedSpaceRatio=95",
        namesrv.addr
    );
    let mut broker = BrokerProcess::start(&dir.path().join("store"), &conf);
    let pid = broker.child.id();
    common::runtime().block_on(async {
        let before = rss_kib(pid);
        let mut problems = Vec::new();
        for serialize in [SerializeType::Json, SerializeType::RocketMq] {
            problems.extend(sweep(broker.addr, serialize).await);
            problems.extend(sweep(namesrv.addr, serialize).await);
        }
        let after = rss_kib(pid);
        assert!(
            problems.is_empty(),
            "{} problems: {:#?}",
            problems.len(),
            &problems[..problems.len().min(20)]
        );
        assert!(
            broker.child.try_wait().unwrap().is_none(),
            "the broker exited"
        );
        assert!(
            namesrv.child.try_wait().unwrap().is_none(),
            "the name server exited"
        );
        let grown_mib = after.saturating_sub(before) / 1024;
        eprintln!(
            "broker RssAnon {} MiB -> {} MiB",
            before / 1024,
            after / 1024
        );
        assert!(
            grown_mib < 256,
            "the broker's memory grew by {grown_mib} MiB"
        );
        let client = connect(broker.addr, SerializeType::Json).await;
        still_serves(&namesrv.addr.to_string(), &client).await;
        served_as_the_table_says(&client).await;
    });
}

/// The broker serves exactly the codes of its table (`broker::codes::ROUTES`): each of them
/// gets an answer of its processor, every other code REQUEST_CODE_NOT_SUPPORTED.
async fn served_as_the_table_says(broker: &RemotingClient) {
    let mut wrong = Vec::new();
    for (name, code) in RequestCode::ALL {
        // Not the pulls: with no header they are refused at once too, but a valid-looking
        // one would be held; neither is needed to tell served from not served.
        let command = RemotingCommand::request(*code);
        let answer = broker
            .request_timeout(command, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("{name}: no answer ({e})"));
        let routed = route_of(*code).is_some();
        let unsupported = answer.response_code() == ResponseCode::REQUEST_CODE_NOT_SUPPORTED;
        if routed == unsupported {
            let answer = (answer.code, answer.remark);
            wrong.push(format!("{name}: routed {routed}, answered {answer:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "served otherwise than the table says: {wrong:#?}"
    );
}
