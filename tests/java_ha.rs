//! Replication against the Java 4.9.8 broker of the kit (`../shared/java-4.9.8/`) over the
//! classic HA link (`reference/ha.md` §2): a Java slave (`brokerRole=SLAVE`, `brokerId=1`)
//! behind a ferromq master copies the master's CommitLog byte for byte, across a segment
//! roll, and serves the messages at the master's offsets.

mod common;

use common::java::{java_broker_port, JavaServer, Standalone};
use common::{connect, pull_header, TempDir};
use ferromq::client::{ClientConfig, Message, Producer};
use ferromq::remoting::headers::PullMessageResponseHeader;
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use ferromq::store::message::{decode_record, Record};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Small segments, so that the run rolls into a second one.
const SEGMENT: u64 = 4 << 20;
const TOPIC: &str = "HaCopy";

/// The CommitLog directory under a store root or a standalone's data directory.
fn commit_log_dir(root: &Path) -> PathBuf {
    [root.join("commitlog"), root.join("store").join("commitlog")]
        .into_iter()
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| root.join("commitlog"))
}

/// The segment files of a CommitLog directory, by name.
fn segments(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().len() == 20)
                .map(|e| {
                    let bytes = std::fs::read(e.path()).unwrap_or_default();
                    (e.file_name().to_string_lossy().into_owned(), bytes)
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The kit's broker as the slave (`brokerId=1`) of `broker_name`, whose master listens on
/// `master_port` (HA on the next port), its store in `dir`; and its CommitLog directory.
fn java_slave(
    dir: &TempDir,
    master: &Standalone,
    broker_name: &str,
    master_port: u16,
) -> (JavaServer, PathBuf) {
    let store = dir.path().join("slave-store");
    let slave = JavaServer::broker(
        dir.path(),
        master.namesrv.port(),
        &store,
        &format!(
            "brokerName={broker_name}\nbrokerId=1\nbrokerRole=SLAVE\n\
             haMasterAddress=127.0.0.1:{}\nmappedFileSizeCommitLog={SEGMENT}",
            master_port + 1
        ),
    );
    (slave, commit_log_dir(&store))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Sends `count` messages of about 1 KiB to the master, numbered from `first`.
fn produce(namesrv: &str, first: usize, count: usize) {
    runtime().block_on(async {
        let producer = Producer::new("ha_copy_pg", ClientConfig::new(namesrv));
        producer.start().await.unwrap();
        for i in first..first + count {
            let body = format!("ha-{i:06}-{}", "h".repeat(900 + i % 200));
            producer.send(Message::new(TOPIC, body)).await.unwrap();
        }
        producer.shutdown().await;
    });
}

/// (queue offset, body) of every message of queue 0 of [`TOPIC`] a broker serves.
fn pull_queue(broker: &str) -> Vec<(i64, Vec<u8>)> {
    pull_queue_of(broker, TOPIC)
}

/// (queue offset, body) of every message of queue 0 of `topic` a broker serves.
fn pull_queue_of(broker: &str, topic: &str) -> Vec<(i64, Vec<u8>)> {
    runtime().block_on(async {
        let client = connect(broker.parse().unwrap(), SerializeType::Json).await;
        let mut offset = 0;
        let mut all = Vec::new();
        loop {
            let request = RemotingCommand::request_with_header(
                RequestCode::PULL_MESSAGE,
                &pull_header("ha_copy_reader", topic, 0, offset),
            );
            let response = client
                .request_timeout(request, Duration::from_secs(10))
                .await
                .unwrap();
            if response.code != 0 {
                return all;
            }
            let header: PullMessageResponseHeader = response.decode_header().unwrap();
            let mut at = 0;
            while at < response.body.len() {
                let Ok(Record::Message { record, size }) =
                    decode_record(&response.body[at..], false)
                else {
                    panic!("{broker}: not a record at {at} of a pull at {offset}");
                };
                all.push((record.queue_offset, record.body.to_vec()));
                at += size;
            }
            offset = header.next_begin_offset;
        }
    })
}

#[test]
fn a_java_slave_copies_a_ferromq_masters_commit_log_byte_for_byte() {
    let port = java_broker_port();
    let master = Standalone::start_on(
        &format!("brokerName=broker-ha\nmappedFileSizeCommitLog={SEGMENT}"),
        port,
    );
    let namesrv = master.namesrv_addr();
    produce(&namesrv, 0, 1000);
    let dir = TempDir::on_disk("java-ha");
    let (slave, slave_log) = java_slave(&dir, &master, "broker-ha", port);
    // The slave reports 0 (empty) within haSendHeartbeatInterval; the master then sends
    // from the start of its last segment, here the first.
    let deadline = Instant::now() + Duration::from_secs(60);
    while segments(&slave_log).is_empty() {
        assert!(Instant::now() < deadline, "the slave never got a byte");
        std::thread::sleep(Duration::from_millis(200));
    }
    produce(&namesrv, 1000, 6000);
    let master_log = commit_log_dir(&master.data);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ours = segments(&master_log);
        let theirs = segments(&slave_log);
        assert!(
            ours.len() >= 2,
            "the run stays in one segment: {}",
            ours.len()
        );
        let names =
            |files: &[(String, Vec<u8>)]| files.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
        // Java makes the segment after next ahead of time (`AllocateMappedFileService`):
        // files past the master's hold nothing yet.
        let extra_empty = theirs
            .get(ours.len()..)
            .is_some_and(|rest| rest.iter().all(|f| f.1.iter().all(|&b| b == 0)));
        if theirs.get(..ours.len()) == Some(&ours[..]) && extra_empty {
            break;
        }
        if Instant::now() >= deadline {
            let differ = ours
                .iter()
                .zip(&theirs)
                .find(|(a, b)| a != b)
                .map(|(a, b)| {
                    let at = a.1.iter().zip(&b.1).position(|(x, y)| x != y);
                    format!(
                        "{} differs first at {at:?} (sizes {} and {})",
                        a.0,
                        a.1.len(),
                        b.1.len()
                    )
                });
            panic!(
                "the slave's CommitLog is not the master's: master {:?}, slave {:?}, {differ:?}",
                names(&ours),
                names(&theirs)
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    // The slave serves what the master serves, at the same offsets.
    let from_master = pull_queue(&master.broker_addr());
    assert!(
        from_master.len() > 500,
        "{} messages in queue 0",
        from_master.len()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let from_slave = pull_queue(&slave.addr());
        if from_slave == from_master {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slave serves {} messages of queue 0, the master {}",
            from_slave.len(),
            from_master.len()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    slave.stop();
}

/// The CommitLog offset in an offset message id (`offsetMsgId`: address, port, offset).
fn physical_of(offset_msg_id: &str) -> u64 {
    u64::from_str_radix(&offset_msg_id[offset_msg_id.len() - 16..], 16).unwrap()
}

/// The record at `physical` in a CommitLog directory of `SEGMENT`-byte files, if there is one.
fn record_body_at(dir: &Path, physical: u64) -> Option<Vec<u8>> {
    let start = physical - physical % SEGMENT;
    let file = std::fs::read(dir.join(format!("{start:020}"))).ok()?;
    let at = usize::try_from(physical - start).ok()?;
    match decode_record(file.get(at..)?, true) {
        Ok(Record::Message { record, .. }) => Some(record.body.to_vec()),
        _ => None,
    }
}

/// SYNC_MASTER: with no slave a put is answered SLAVE_NOT_AVAILABLE (stored all the same);
/// with a Java slave attached each put is answered SEND_OK only once the slave holds it (its
/// CommitLog has the record when the answer arrives); once the slave is killed, puts are
/// answered SLAVE_NOT_AVAILABLE again, never SEND_OK, and every one of them is stored.
#[test]
fn a_sync_master_answers_once_the_java_slave_holds_the_message() {
    use common::send_request;
    use ferromq::remoting::headers::SendMessageResponseHeader;
    use ferromq::remoting::ResponseCode;
    let port = java_broker_port();
    let master = Standalone::start_on(
        &format!(
            "brokerName=broker-sync\nbrokerRole=SYNC_MASTER\nmappedFileSizeCommitLog={SEGMENT}"
        ),
        port,
    );
    let rt = runtime();
    let client = rt.block_on(connect(master.broker, SerializeType::Json));
    let send = |i: usize| -> (i32, SendMessageResponseHeader) {
        rt.block_on(async {
            let body = format!("sync-{i:05}");
            let request = send_request("HaSync", 0, body.as_bytes(), "WAIT\u{1}true\u{2}");
            let response = client
                .request_timeout(request, Duration::from_secs(10))
                .await
                .unwrap();
            (response.code, response.decode_header().unwrap())
        })
    };
    let (code, _) = send(0);
    assert_eq!(code, ResponseCode::SLAVE_NOT_AVAILABLE.0, "no slave yet");

    let dir = TempDir::on_disk("java-ha-sync");
    let (slave, slave_log) = java_slave(&dir, &master, "broker-sync", port);
    // The slave counts once it has reported (within haSendHeartbeatInterval).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = 1;
    loop {
        let (code, _) = send(i);
        i += 1;
        if code == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the slave never counted: {code}");
        std::thread::sleep(Duration::from_millis(200));
    }
    for _ in 0..200 {
        let (code, header) = send(i);
        assert_eq!(code, 0, "message {i}");
        let body = record_body_at(&slave_log, physical_of(&header.msg_id));
        assert_eq!(
            body.as_deref(),
            Some(format!("sync-{i:05}").as_bytes()),
            "message {i} answered before the slave held it"
        );
        i += 1;
    }
    let mut slave = slave;
    slave.child.kill().unwrap();
    let _ = slave.child.wait();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, _) = send(i);
        i += 1;
        assert_ne!(code, 0, "SEND_OK with the slave dead");
        assert!(
            code == ResponseCode::FLUSH_SLAVE_TIMEOUT.0
                || code == ResponseCode::SLAVE_NOT_AVAILABLE.0,
            "{code}"
        );
        if code == ResponseCode::SLAVE_NOT_AVAILABLE.0 {
            break;
        }
        assert!(Instant::now() < deadline, "never SLAVE_NOT_AVAILABLE");
    }
    // Every put was stored, whatever its answer said of the slave.
    let stored = pull_queue_of(&master.broker_addr(), "HaSync");
    assert_eq!(stored.len(), i, "stored on the master");
}
