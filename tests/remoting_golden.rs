//! Golden tests on bytes the real Java RocketMQ 4.9.8 client, broker and name server sent.
//!
//! Method: every frame under `fixtures/java-4.9.8/wire/` is decoded and checked against the
//! capture's own index (code, flag, opaque, serialization, extFields, body length); requests and
//! responses are decoded again into their typed headers; binary frames re-encode byte for byte
//! and JSON frames re-encode to equal JSON. Then the captured broker registrations are replayed,
//! byte for byte, into a ferromq name server, followed by every captured client lookup, and the
//! answers are compared field for field with the Java name server's answers. The only
//! differences allowed are the fields RocketMQ 5.x added (ferromq answers in 5.x shapes) and
//! the `version` each server stamps.

mod common;

use ferromq::config::namesrv::NamesrvConfig;
use ferromq::remoting::codec::{check_frame, decode_frame, encode_to_vec, FrameDecoder};
use ferromq::remoting::header::CommandHeader;
use ferromq::remoting::headers::*;
use ferromq::remoting::{ExtFields, RemotingCommand, RequestCode, ResponseCode, SerializeType};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Fields RocketMQ 5.x added to bodies ferromq emits; a 4.9.8 answer lacks them.
const FIELDS_ADDED_IN_5X: &[&str] = &["enableActingMaster", "zoneName"];

struct Captured {
    seq: u64,
    server: String,
    entry: Value,
    bytes: Vec<u8>,
    command: RemotingCommand,
}

fn load_folder(folder: &Path) -> Vec<Captured> {
    let index = std::fs::read_to_string(folder.join("index.jsonl")).unwrap();
    index
        .lines()
        .map(|line| {
            let entry: Value = serde_json::from_str(line).unwrap();
            let bytes = std::fs::read(folder.join(entry["file"].as_str().unwrap())).unwrap();
            let size = check_frame(&bytes, 1 << 24).unwrap().expect("whole frame");
            assert_eq!(size, bytes.len(), "{}", entry["file"]);
            let command = decode_frame(&bytes).unwrap();
            Captured {
                seq: entry["seq"].as_u64().unwrap(),
                server: entry["server"].as_str().unwrap().to_owned(),
                entry,
                bytes,
                command,
            }
        })
        .collect()
}

fn scenario_folders(tree: &str) -> Vec<PathBuf> {
    let root = common::fixtures_dir().join("wire").join(tree);
    let mut folders = Vec::new();
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        if dir.join("index.jsonl").is_file() {
            folders.push(dir.clone());
        }
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && path.file_name().unwrap() != "frames" {
                stack.push(path);
            }
        }
    }
    folders.sort();
    folders
}

/// Decodes the typed header a request or response of `request_code` carries, and checks that
/// every field it read has the text of the wire.
fn check_typed_header(request_code: RequestCode, command: &RemotingCommand) {
    fn check<H: CommandHeader>(command: &RemotingCommand) {
        let header: H = command.decode_header().unwrap_or_else(|e| {
            panic!(
                "{} does not decode: {e}: {command:?}",
                std::any::type_name::<H>()
            )
        });
        let mut written = ExtFields::new();
        header.write_to(&mut written);
        for (key, value) in written.iter() {
            assert_eq!(command.ext(key), Some(value), "field {key} of {command:?}");
        }
    }
    if command.is_response() {
        // Error responses carry no header fields, except the pull statuses of §7.2.2.
        let pull_status = [0, 19, 20, 21].contains(&command.code);
        if command.code != ResponseCode::SUCCESS.0
            && !(request_code == RequestCode::PULL_MESSAGE && pull_status)
        {
            return;
        }
        match request_code {
            RequestCode::SEND_MESSAGE
            | RequestCode::SEND_MESSAGE_V2
            | RequestCode::SEND_BATCH_MESSAGE => check::<SendMessageResponseHeader>(command),
            RequestCode::PULL_MESSAGE => check::<PullMessageResponseHeader>(command),
            RequestCode::QUERY_CONSUMER_OFFSET => {
                check::<QueryConsumerOffsetResponseHeader>(command)
            }
            RequestCode::REGISTER_BROKER => check::<RegisterBrokerResponseHeader>(command),
            RequestCode::GET_MAX_OFFSET | RequestCode::GET_MIN_OFFSET => {
                check::<OffsetResponseHeader>(command);
            }
            _ => {}
        }
        return;
    }
    match request_code {
        RequestCode::SEND_MESSAGE => check::<SendMessageRequestHeader>(command),
        RequestCode::SEND_MESSAGE_V2 | RequestCode::SEND_BATCH_MESSAGE => {
            check::<SendMessageRequestHeaderV2>(command);
        }
        RequestCode::PULL_MESSAGE => check::<PullMessageRequestHeader>(command),
        RequestCode::QUERY_CONSUMER_OFFSET => check::<QueryConsumerOffsetRequestHeader>(command),
        RequestCode::UPDATE_CONSUMER_OFFSET => check::<UpdateConsumerOffsetRequestHeader>(command),
        RequestCode::UNREGISTER_CLIENT => check::<UnregisterClientRequestHeader>(command),
        RequestCode::GET_CONSUMER_LIST_BY_GROUP => {
            check::<GetConsumerListByGroupRequestHeader>(command);
        }
        RequestCode::NOTIFY_CONSUMER_IDS_CHANGED => {
            check::<NotifyConsumerIdsChangedRequestHeader>(command);
        }
        RequestCode::CONSUMER_SEND_MSG_BACK => check::<ConsumerSendMsgBackRequestHeader>(command),
        RequestCode::END_TRANSACTION => check::<EndTransactionRequestHeader>(command),
        RequestCode::CHECK_TRANSACTION_STATE => {
            check::<CheckTransactionStateRequestHeader>(command);
        }
        RequestCode::VIEW_MESSAGE_BY_ID => check::<ViewMessageRequestHeader>(command),
        RequestCode::QUERY_TOPIC_CONSUME_BY_WHO => {
            check::<QueryTopicConsumeByWhoRequestHeader>(command);
        }
        RequestCode::GET_CONSUMER_CONNECTION_LIST => {
            check::<GetConsumerConnectionListRequestHeader>(command);
        }
        RequestCode::GET_CONSUME_STATS => check::<GetConsumeStatsRequestHeader>(command),
        RequestCode::GET_TOPIC_STATS_INFO => check::<GetTopicStatsInfoRequestHeader>(command),
        RequestCode::GET_ROUTEINFO_BY_TOPIC => check::<GetRouteInfoRequestHeader>(command),
        RequestCode::REGISTER_BROKER => check::<RegisterBrokerRequestHeader>(command),
        RequestCode::UNREGISTER_BROKER => check::<UnregisterBrokerRequestHeader>(command),
        RequestCode::HEART_BEAT
        | RequestCode::LOCK_BATCH_MQ
        | RequestCode::UNLOCK_BATCH_MQ
        | RequestCode::GET_BROKER_RUNTIME_INFO
        | RequestCode::GET_BROKER_CLUSTER_INFO
        | RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => {}
        other => panic!("no typed header check for captured request {other}"),
    }
}

fn check_tree(tree: &str) -> usize {
    let mut count = 0;
    for folder in scenario_folders(tree) {
        for captured in load_folder(&folder) {
            let Captured {
                entry,
                bytes,
                command,
                ..
            } = &captured;
            let header = &entry["header"];
            let serialize_type = match entry["serialize"].as_str().unwrap() {
                "JSON" => SerializeType::Json,
                _ => SerializeType::RocketMq,
            };
            assert_eq!(command.serialize_type, serialize_type);
            assert_eq!(i64::from(command.code), entry["code"].as_i64().unwrap());
            assert_eq!(i64::from(command.flag), entry["flag"].as_i64().unwrap());
            assert_eq!(i64::from(command.opaque), entry["opaque"].as_i64().unwrap());
            assert_eq!(
                command.body.len() as u64,
                entry["body_len"].as_u64().unwrap()
            );
            assert_eq!(
                command.remark.as_deref().filter(|r| !r.is_empty()),
                header["remark"].as_str().filter(|r| !r.is_empty())
            );
            let expected_ext = header["extFields"].as_object().cloned().unwrap_or_default();
            let decoded_ext = command.ext_fields.clone().unwrap_or_default();
            assert_eq!(decoded_ext.len(), expected_ext.len(), "{}", entry["file"]);
            for (key, value) in &expected_ext {
                assert_eq!(
                    decoded_ext.get(key),
                    value.as_str(),
                    "{key} in {}",
                    entry["file"]
                );
            }
            let request_code = if command.is_response() {
                RequestCode(i32::try_from(entry["request_code"].as_i64().unwrap()).unwrap())
            } else {
                command.request_code()
            };
            check_typed_header(request_code, command);

            let reencoded = encode_to_vec(command);
            match serialize_type {
                SerializeType::RocketMq => assert_eq!(&reencoded, bytes, "{}", entry["file"]),
                SerializeType::Json => assert_json_frames_equal(&reencoded, bytes),
            }
            count += 1;
        }
    }
    count
}

/// Frame files on disk, so that a frame missing from an index cannot go unchecked.
fn frame_file_count(tree: &str) -> usize {
    scenario_folders(tree)
        .iter()
        .map(|folder| std::fs::read_dir(folder.join("frames")).unwrap().count())
        .sum()
}

fn split_frame(frame: &[u8]) -> (&[u8], &[u8]) {
    let header_len = (u32::from_be_bytes(frame[4..8].try_into().unwrap()) & 0xFF_FFFF) as usize;
    (&frame[8..8 + header_len], &frame[8 + header_len..])
}

fn assert_json_frames_equal(ours: &[u8], theirs: &[u8]) {
    let (our_header, our_body) = split_frame(ours);
    let (their_header, their_body) = split_frame(theirs);
    let mut ours: Value = serde_json::from_slice(our_header).unwrap();
    let theirs: Value = serde_json::from_slice(their_header).unwrap();
    // Java always writes this informational key; the Go-shaped probe frames do not.
    if theirs.get("serializeTypeCurrentRPC").is_none() {
        ours.as_object_mut()
            .unwrap()
            .remove("serializeTypeCurrentRPC");
    }
    assert_eq!(ours, theirs);
    assert_eq!(our_body, their_body);
}

#[test]
fn every_json_frame_decodes_and_reencodes_to_equal_json() {
    let count = check_tree("json");
    assert_eq!(count, frame_file_count("json"));
    assert!(count > 300, "only {count} frames found");
}

#[test]
fn every_rocketmq_frame_decodes_and_reencodes_byte_for_byte() {
    let count = check_tree("rocketmq");
    assert_eq!(count, frame_file_count("rocketmq"));
    assert!(count > 300, "only {count} frames found");
}

#[test]
fn frames_split_at_every_byte_decode_the_same() {
    let folder = common::fixtures_dir().join("wire/rocketmq/a_producer");
    let frames = load_folder(&folder);
    let stream: Vec<u8> = frames
        .iter()
        .flat_map(|c| c.bytes.iter().copied())
        .collect();
    for chunk_size in [1, 7, 64, 4096] {
        let mut decoder = FrameDecoder::new(1 << 24);
        let mut decoded = Vec::new();
        for chunk in stream.chunks(chunk_size) {
            decoder.extend(chunk);
            while let Some(command) = decoder.next_command().unwrap() {
                decoded.push(command);
            }
        }
        assert_eq!(decoded.len(), frames.len());
        for (command, captured) in decoded.iter().zip(&frames) {
            assert_eq!(command, &captured.command);
        }
    }
}

/// Java's fastjson output (bare numeric keys allowed) as a JSON value.
fn lenient_json(bytes: &[u8]) -> Value {
    ferromq::config::fastjson::parse_lenient(bytes).unwrap()
}

/// `ours` has every field of `theirs` with an equal value, and only 5.x additions besides.
fn assert_superset(ours: &Value, theirs: &Value, path: &str) {
    match (ours, theirs) {
        (Value::Object(ours), Value::Object(theirs)) => {
            for (key, value) in theirs {
                let mine = ours
                    .get(key)
                    .unwrap_or_else(|| panic!("{path}.{key} missing"));
                assert_superset(mine, value, &format!("{path}.{key}"));
            }
            for key in ours.keys() {
                assert!(
                    theirs.contains_key(key) || FIELDS_ADDED_IN_5X.contains(&key.as_str()),
                    "{path}.{key} is extra"
                );
            }
        }
        (Value::Array(ours), Value::Array(theirs)) => {
            assert_eq!(ours.len(), theirs.len(), "{path} length");
            // Java's order comes from hash maps; compare as multisets.
            let mut unmatched: Vec<&Value> = ours.iter().collect();
            for value in theirs {
                let found = unmatched.iter().position(|mine| {
                    std::panic::catch_unwind(|| assert_superset(mine, value, path)).is_ok()
                });
                let found = found.unwrap_or_else(|| panic!("{path}: no match for {value}"));
                unmatched.remove(found);
            }
        }
        _ => assert_eq!(ours, theirs, "{path}"),
    }
}

async fn exchange(stream: &mut tokio::net::TcpStream, frame: &[u8]) -> Option<RemotingCommand> {
    stream.write_all(frame).await.unwrap();
    let request = decode_frame(frame).unwrap();
    if request.is_oneway() {
        return None;
    }
    let mut decoder = FrameDecoder::new(1 << 24);
    let mut chunk = vec![0u8; 65536];
    loop {
        if let Some(response) = decoder.next_command().unwrap() {
            return Some(response);
        }
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut chunk))
            .await
            .expect("response in time")
            .unwrap();
        assert!(read > 0, "name server closed the connection");
        decoder.extend(&chunk[..read]);
    }
}

fn assert_response_matches(ours: &RemotingCommand, theirs: &RemotingCommand, what: &str) {
    assert_eq!(
        ours.code, theirs.code,
        "{what}: code; remark {:?}",
        ours.remark
    );
    assert_eq!(ours.flag, theirs.flag, "{what}: flag");
    assert_eq!(ours.opaque, theirs.opaque, "{what}: opaque");
    assert_eq!(
        ours.serialize_type, theirs.serialize_type,
        "{what}: serialization"
    );
    assert_eq!(ours.language, theirs.language, "{what}: language");
    assert_eq!(ours.remark, theirs.remark, "{what}: remark");
    let ours_ext = ours.ext_fields.clone().unwrap_or_default();
    let theirs_ext = theirs.ext_fields.clone().unwrap_or_default();
    assert_eq!(ours_ext, theirs_ext, "{what}: extFields");
    match (ours.body.is_empty(), theirs.body.is_empty()) {
        (true, true) => {}
        (false, false) => {
            assert_superset(&lenient_json(&ours.body), &lenient_json(&theirs.body), what);
        }
        _ => panic!("{what}: body presence differs"),
    }
}

/// Replays one tree's captured name server traffic against a fresh ferromq name server.
async fn replay_namesrv(tree: &str) {
    let dir = common::TempDir::new("golden-namesrv");
    let config = NamesrvConfig {
        bind_address: "127.0.0.1".parse().unwrap(),
        listen_port: 0,
        kv_config_path: dir.path().join("kvConfig.json"),
        ..NamesrvConfig::default()
    };
    let namesrv =
        ferromq::namesrv::start(config, ferromq_shards::Shutdown::new()).expect("namesrv starts");
    let root = common::fixtures_dir().join("wire").join(tree);

    // Every namesrv request/response pair, by folder, matched on (connection, opaque).
    let mut pairs: BTreeMap<String, Vec<(Captured, Option<Captured>)>> = BTreeMap::new();
    for folder in scenario_folders(tree) {
        let name = folder.strip_prefix(&root).unwrap().display().to_string();
        let mut requests: Vec<(Captured, Option<Captured>)> = Vec::new();
        for captured in load_folder(&folder) {
            if captured.server != "namesrv" {
                continue;
            }
            if captured.command.is_response() {
                let conn = captured.entry["conn"].as_u64();
                let slot = requests.iter_mut().rev().find(|(request, response)| {
                    response.is_none()
                        && request.entry["conn"].as_u64() == conn
                        && request.command.opaque == captured.command.opaque
                });
                slot.expect("response has a request").1 = Some(captured);
            } else {
                requests.push((captured, None));
            }
        }
        pairs.insert(name, requests);
    }
    let registration = pairs
        .remove("g_broker_registration")
        .expect("registration capture");
    let (unregister, registrations): (Vec<_>, Vec<_>) = registration
        .into_iter()
        .partition(|(request, _)| request.command.request_code() == RequestCode::UNREGISTER_BROKER);

    let mut broker = tokio::net::TcpStream::connect(namesrv.addr).await.unwrap();
    let mut client = tokio::net::TcpStream::connect(namesrv.addr).await.unwrap();
    let mut compared = 0;

    // Phase 1: only the boot registration; a topic created later has no route yet.
    let mut registrations = registrations.into_iter();
    let (first, first_response) = registrations.next().unwrap();
    let ours = exchange(&mut broker, &first.bytes).await.unwrap();
    assert_response_matches(
        &ours,
        &first_response.unwrap().command,
        "first registration",
    );
    for (request, response) in pairs.values().flatten() {
        let Some(response) = response else { continue };
        if response.command.code == ResponseCode::TOPIC_NOT_EXIST.0 {
            let ours = exchange(&mut client, &request.bytes).await.unwrap();
            assert_response_matches(&ours, &response.command, "route before creation");
            compared += 1;
        }
    }

    // Phase 2: the rest of the broker's life; then every successful client lookup.
    for (request, response) in registrations {
        let ours = exchange(&mut broker, &request.bytes).await;
        match (ours, response) {
            (Some(ours), Some(theirs)) => {
                assert_response_matches(
                    &ours,
                    &theirs.command,
                    &format!("registration {}", request.seq),
                );
                compared += 1;
            }
            (None, None) => {}
            (ours, theirs) => panic!(
                "registration {}: {ours:?} vs {:?}",
                request.seq,
                theirs.map(|t| t.command)
            ),
        }
    }
    for (folder, requests) in &pairs {
        for (request, response) in requests {
            let Some(response) = response else { continue };
            if response.command.code != ResponseCode::SUCCESS.0 {
                continue;
            }
            let ours = exchange(&mut client, &request.bytes).await.unwrap();
            let what = format!(
                "{folder} #{} {}",
                request.seq,
                request.command.request_code()
            );
            if request.command.request_code() == RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER {
                // The listing ran while the broker was still creating retry topics: it must be
                // a subset of the final one.
                let theirs = lenient_json(&response.command.body);
                let mine = lenient_json(&ours.body);
                for topic in theirs["topicList"].as_array().unwrap() {
                    assert!(
                        mine["topicList"].as_array().unwrap().contains(topic),
                        "{what}: {topic}"
                    );
                }
                continue;
            }
            assert_response_matches(&ours, &response.command, &what);
            if folder.starts_with("e_route_flavours") {
                // Byte-exact but for the 5.x field: proves both flavours' key quoting.
                let ours = String::from_utf8(ours.body.clone()).unwrap();
                let stripped = ours.replace(r#","enableActingMaster":false"#, "");
                assert_eq!(stripped.as_bytes(), &response.command.body[..], "{what}");
            }
            compared += 1;
        }
    }

    // Phase 3: clean shutdown of the broker.
    for (request, response) in unregister {
        let ours = exchange(&mut broker, &request.bytes).await.unwrap();
        assert_response_matches(&ours, &response.unwrap().command, "unregister");
        compared += 1;
    }
    assert!(compared > 40, "only {compared} answers compared");
    namesrv.shutdown().unwrap();
}

#[tokio::test]
async fn namesrv_answers_captured_json_requests_like_java() {
    replay_namesrv("json").await;
}

#[tokio::test]
async fn namesrv_answers_captured_rocketmq_requests_like_java() {
    replay_namesrv("rocketmq").await;
}
