//! Helpers shared by the delay and retry tests: raw sends and pulls against a broker
//! process, and stored records decoded with their properties.

#![allow(dead_code)]

use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::{GetMaxOffsetRequestHeader, OffsetResponseHeader};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode};
use ferromq::store::message::{decode_record, parse_properties, Record};
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Longest any test waits for something to happen.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// Properties in their wire form.
pub fn props(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}\u{1}{v}\u{2}"))
        .collect()
}

/// A stored message as a pull or query answers it.
#[derive(Clone, Debug)]
pub struct Stored {
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub reconsume_times: i32,
    pub born_timestamp: i64,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub flag: i32,
    pub body: Vec<u8>,
    pub properties: Vec<(String, String)>,
}

impl Stored {
    pub fn prop(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every record of a pull or query body.
pub fn stored(body: &[u8]) -> Vec<Stored> {
    let mut at = 0;
    let mut found = Vec::new();
    while at < body.len() {
        let Ok(Record::Message { record, size }) = decode_record(&body[at..], true) else {
            panic!("body is not records at {at}");
        };
        found.push(Stored {
            topic: record.topic.to_owned(),
            queue_id: record.queue_id,
            queue_offset: record.queue_offset,
            physical_offset: record.physical_offset,
            reconsume_times: record.reconsume_times,
            born_timestamp: record.born_timestamp,
            store_timestamp: record.store_timestamp,
            store_host: record.store_host,
            flag: record.flag,
            body: record.body.to_vec(),
            properties: parse_properties(record.properties),
        });
        at += size;
    }
    found
}

/// SEND_MESSAGE_V2 of one message with the given wire properties.
pub fn send_request(
    topic: &str,
    queue_id: i32,
    body: &[u8],
    properties: &str,
    reconsume_times: Option<i32>,
    max_reconsume_times: Option<i32>,
) -> RemotingCommand {
    let mut header = crate::common::send_header(topic, queue_id, properties);
    header.d = 4;
    header.j = reconsume_times;
    header.l = max_reconsume_times;
    crate::common::send_command(&header, body)
}

/// Sends and expects SUCCESS.
pub async fn send(client: &RemotingClient, topic: &str, queue: i32, body: &[u8], props: &str) {
    let response = client
        .request(send_request(topic, queue, body, props, None, None))
        .await
        .unwrap();
    assert_eq!(response.code, 0, "send refused: {:?}", response.remark);
}

/// One pull (no suspension, subscription `*` in the request) of up to 32 messages.
pub async fn pull(
    client: &RemotingClient,
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> RemotingCommand {
    let header = super::common::pull_header(group, topic, queue_id, offset);
    let request = RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header);
    client.request(request).await.unwrap()
}

/// Every message of a queue, pulled from offset 0 (bounded).
pub async fn pull_all(
    client: &RemotingClient,
    group: &str,
    topic: &str,
    queue: i32,
) -> Vec<Stored> {
    let mut all = Vec::new();
    for _ in 0..1000 {
        let offset = all.len() as i64;
        let response = pull(client, group, topic, queue, offset).await;
        if response.code != ResponseCode::SUCCESS.0 {
            break;
        }
        let found = stored(&response.body);
        assert!(!found.is_empty());
        all.extend(found);
    }
    all
}

/// Polls a queue until it holds `count` messages; all of them.
pub async fn wait_for(
    client: &RemotingClient,
    group: &str,
    topic: &str,
    queue: i32,
    count: usize,
) -> Vec<Stored> {
    let started = Instant::now();
    loop {
        let all = pull_all(client, group, topic, queue).await;
        if all.len() >= count {
            return all;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "{topic}/{queue} holds {} of {count} messages",
            all.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn max_offset(client: &RemotingClient, topic: &str, queue_id: i32) -> i64 {
    let request = RemotingCommand::request_with_header(
        RequestCode::GET_MAX_OFFSET,
        &GetMaxOffsetRequestHeader {
            topic: topic.into(),
            queue_id,
            committed: None,
        },
    );
    let response = client.request(request).await.unwrap();
    let header: OffsetResponseHeader = response.decode_header().unwrap();
    header.offset
}
