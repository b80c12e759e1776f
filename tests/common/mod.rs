//! Shared harness for integration tests: start a real `ferromq` process on an ephemeral
//! loopback port in a temporary directory, learn its address from its log, and talk to it
//! with the library's remoting client.

#![allow(dead_code)]

pub mod client5;
pub mod controller;
pub mod delivery;
pub mod java;
pub mod netns;
pub mod programs;
pub mod python;
pub mod store;

use ferromq::remoting::client::{connect_tokio, ClientConfig, RemotingClient};
use ferromq::remoting::SerializeType;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A temporary directory removed on drop. Honours `FERROMQ_TEST_DATA_DIR` for the parent.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        Self::under(name, std::env::temp_dir())
    }

    /// A directory on the build's own disk (`CARGO_TARGET_TMPDIR`): store tests need a
    /// filesystem with O_DIRECT, which a tmpfs `/tmp` is not.
    pub fn on_disk(name: &str) -> TempDir {
        Self::under(name, PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
    }

    /// A fresh directory under `FERROMQ_TEST_DATA_DIR`, else under `default_parent`.
    fn under(name: &str, default_parent: PathBuf) -> TempDir {
        let parent =
            std::env::var_os("FERROMQ_TEST_DATA_DIR").map_or(default_parent, PathBuf::from);
        let unique = format!(
            "ferromq-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let path = parent.join(unique);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `ferromq namesrv` child process; killed on drop.
pub struct NamesrvProcess {
    pub child: Child,
    pub addr: SocketAddr,
    pub dir: TempDir,
    pub log: mpsc::Receiver<String>,
    /// Log lines read before the address was known.
    pub early_log: Vec<String>,
}

impl NamesrvProcess {
    /// Starts `ferromq namesrv --listen 127.0.0.1:0` with `extra_config` lines appended to a
    /// config file whose `kvConfigPath` points into a fresh temporary directory.
    pub fn start(extra_config: &str) -> NamesrvProcess {
        Self::start_with_args(extra_config, &[])
    }

    pub fn start_with_args(extra_config: &str, args: &[&str]) -> NamesrvProcess {
        Self::start_in(ferromq_command(), extra_config, "127.0.0.1:0", args)
    }

    /// As [`NamesrvProcess::start_with_args`], run by `program` (the `ferromq` binary,
    /// possibly behind a prefix such as `ip netns exec`) and listening on `listen`.
    pub fn start_in(
        program: Command,
        extra_config: &str,
        listen: &str,
        args: &[&str],
    ) -> NamesrvProcess {
        let dir = TempDir::new("namesrv");
        let config = dir.path().join("namesrv.conf");
        let kv = dir.path().join("kvConfig.json");
        std::fs::write(
            &config,
            format!("kvConfigPath={}\n{extra_config}\n", kv.display()),
        )
        .unwrap();
        let mut all_args = vec!["-c", config.to_str().unwrap(), "--listen", listen];
        all_args.extend_from_slice(args);
        let (child, addr, log, early_log) = spawn_server_in(program, "namesrv", &all_args);
        NamesrvProcess {
            child,
            addr,
            dir,
            log,
            early_log,
        }
    }

    /// Waits (bounded) for a log line containing `needle`.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> Option<String> {
        wait_for_log_from_start(&self.early_log, &self.log, needle, timeout)
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        terminate(&mut self.child, Duration::from_secs(10))
    }
}

impl Drop for NamesrvProcess {
    fn drop(&mut self) {
        kill(&mut self.child);
    }
}

/// Sends SIGTERM to a server process and waits up to `timeout` for its exit status.
pub fn terminate(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let pid = child.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    wait_exit(child, timeout).expect("the server exits after SIGTERM")
}

/// Kills a server process (SIGKILL) and reaps it.
pub fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Spawns `ferromq <subcommand> <args>`, echoes its log, and waits for its "listening
/// addr=" line. Its log filter is `info`, or `FERROMQ_TEST_LOG` when set (a `RUST_LOG`
/// filter, for finding out why a test failed).
pub fn spawn_server(
    subcommand: &str,
    args: &[&str],
) -> (Child, SocketAddr, mpsc::Receiver<String>, Vec<String>) {
    spawn_server_in(ferromq_command(), subcommand, args)
}

/// The built `ferromq` binary, as a command to add arguments to.
pub fn ferromq_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferromq"))
}

/// As [`spawn_server`], run by `program`: the `ferromq` binary, possibly behind a prefix
/// such as `ip netns exec NAME`.
pub fn spawn_server_in(
    mut program: Command,
    subcommand: &str,
    args: &[&str],
) -> (Child, SocketAddr, mpsc::Receiver<String>, Vec<String>) {
    let mut child = program
        .arg(subcommand)
        .args(args)
        .env(
            "RUST_LOG",
            std::env::var("FERROMQ_TEST_LOG").unwrap_or_else(|_| "info".to_owned()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ferromq");
    let stderr = child.stderr.take().unwrap();
    let (lines_tx, lines_rx) = mpsc::channel();
    let label = subcommand.to_owned();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            eprintln!("[{label}] {line}");
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut early_log = Vec::new();
    let addr = wait_for_addr(&lines_rx, &mut child, &mut early_log);
    (child, addr, lines_rx, early_log)
}

/// A two-worker tokio runtime for a test's client side.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A `ferromq broker` child process over a store directory; killed on drop.
pub struct BrokerProcess {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: mpsc::Receiver<String>,
    /// Log lines read before the address was known.
    pub early_log: Vec<String>,
}

impl BrokerProcess {
    /// Starts `ferromq broker --listen 127.0.0.1:0` over `store`, with `config` as its
    /// `broker.conf` (written into `store`).
    pub fn start(store: &Path, config: &str) -> BrokerProcess {
        Self::start_on(store, config, "127.0.0.1:0")
    }

    /// As [`BrokerProcess::start`], listening on `listen`.
    pub fn start_on(store: &Path, config: &str, listen: &str) -> BrokerProcess {
        let config = format!("brokerIP1=127.0.0.1\n{config}");
        Self::start_in(ferromq_command(), store, &config, listen)
    }

    /// As [`BrokerProcess::start_on`], run by `program` (the `ferromq` binary, possibly
    /// behind a prefix such as `ip netns exec`), with `config` written as it is (no
    /// `brokerIP1` line added).
    pub fn start_in(program: Command, store: &Path, config: &str, listen: &str) -> BrokerProcess {
        std::fs::create_dir_all(store).unwrap();
        let file = store.join("broker.conf");
        std::fs::write(&file, format!("{config}\n")).unwrap();
        let args = [
            "-c",
            file.to_str().unwrap(),
            "--listen",
            listen,
            "--store",
            store.to_str().unwrap(),
        ];
        let (child, addr, log, early_log) = spawn_server_in(program, "broker", &args);
        BrokerProcess {
            child,
            addr,
            log,
            early_log,
        }
    }

    /// Waits (bounded) for a log line containing `needle`, from the broker's start on.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> Option<String> {
        wait_for_log_from_start(&self.early_log, &self.log, needle, timeout)
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        terminate(&mut self.child, Duration::from_secs(20))
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        kill(&mut self.child);
    }
}

fn wait_for_addr(
    lines: &mpsc::Receiver<String>,
    child: &mut Child,
    early_log: &mut Vec<String>,
) -> SocketAddr {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                early_log.push(line.clone());
                if let Some(rest) = line.split("addr=").nth(1) {
                    if line.contains("listening") {
                        let addr = rest.split_whitespace().next().unwrap();
                        return addr.parse().unwrap();
                    }
                }
            }
            Err(_) => {
                let status = child.try_wait().unwrap();
                panic!("server did not report its address (exit status {status:?})");
            }
        }
    }
}

/// A line containing `needle` among those a server logged before it was ready (`early`),
/// else the next such line of `log`, waiting at most `timeout`.
fn wait_for_log_from_start(
    early: &[String],
    log: &mpsc::Receiver<String>,
    needle: &str,
    timeout: Duration,
) -> Option<String> {
    if let Some(line) = early.iter().find(|line| line.contains(needle)) {
        return Some(line.clone());
    }
    wait_for_line(log, needle, timeout)
}

/// The first line of a server's `log` that holds `needle`, within `timeout`.
pub fn wait_for_line(
    log: &mpsc::Receiver<String>,
    needle: &str,
    timeout: Duration,
) -> Option<String> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.checked_duration_since(std::time::Instant::now())?;
        match log.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return Some(line),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

/// Polls a child's exit status until `timeout`.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A client connection in the given serialization.
pub async fn connect(addr: SocketAddr, serialize_type: SerializeType) -> RemotingClient {
    let config = ClientConfig {
        serialize_type,
        ..ClientConfig::default()
    };
    let (client, _inbound) = connect_tokio(addr, config).await.expect("connect");
    client
}

/// Where the Java 4.9.8 fixtures are: `FERROMQ_FIXTURES`, else the committed
/// `tests/fixtures/java-4.9.8` (made by `scripts/fixtures/generate`; see its README.md).
pub fn fixtures_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FERROMQ_FIXTURES") {
        return PathBuf::from(dir);
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/java-4.9.8");
    assert!(
        dir.is_dir(),
        "Java fixtures not found at {}; run scripts/fixtures/generate or set FERROMQ_FIXTURES",
        dir.display()
    );
    dir
}

/// A directory of simulated segment files for store tests; clones share it.
#[derive(Clone, Default)]
pub struct SimDirectory(
    pub  std::rc::Rc<
        std::cell::RefCell<std::collections::BTreeMap<u64, ferromq_uring::sim::SimSegment>>,
    >,
);

impl ferromq::store::commit_log::SegmentOpener for SimDirectory {
    type File = ferromq_uring::sim::SimSegment;

    async fn open(
        &self,
        start: u64,
        size: u64,
    ) -> Result<ferromq_uring::sim::SimSegment, ferromq_uring::IoError> {
        let mut files = self.0.borrow_mut();
        let size = usize::try_from(size).unwrap();
        let file = files
            .entry(start)
            .or_insert_with(|| ferromq_uring::sim::SimSegment::new(size));
        Ok(file.clone())
    }
}

/// A message to topic `T` with `body`, as a producer on loopback would send it.
pub fn put_message(queue_id: i32, body: &[u8]) -> ferromq::store::commit_log::PutMessage {
    ferromq::store::commit_log::PutMessage {
        topic: "T".into(),
        queue_id,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1,
        born_host: "127.0.0.1:5000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: body.to_vec(),
        properties: b"TAGS\x01a\x02".to_vec(),
    }
}

/// A message for store tests: `topic`/`queue_id`, `body`, optional tags and keys.
pub fn store_message(
    topic: &str,
    queue_id: i32,
    body: &[u8],
    tags: Option<&str>,
    keys: Option<&str>,
) -> ferromq::store::commit_log::PutMessage {
    let mut properties = Vec::new();
    if let Some(tags) = tags {
        properties.push(("TAGS", tags));
    }
    if let Some(keys) = keys {
        properties.push(("KEYS", keys));
    }
    let text = ferromq::store::message::properties_to_string(properties);
    ferromq::store::commit_log::PutMessage {
        topic: topic.into(),
        properties: text.into_bytes(),
        ..put_message(queue_id, body)
    }
}

/// Store settings for tests: small segments and queues, fast flushes, under `dir`.
pub fn small_store_config(dir: &Path) -> ferromq::store::config::StoreConfig {
    let mut config = ferromq::store::config::StoreConfig::new(dir);
    config.mapped_file_size_commit_log = 64 * 1024;
    config.consume_queue_units_per_file = 100;
    config.flush_disk_type = ferromq::store::flush::FlushDiskType::SyncFlush;
    config.flush_interval_consume_queue = Duration::from_millis(20);
    config.max_hash_slot_num = 64;
    config.max_index_num = 256;
    config.delete_commit_log_files_interval = Duration::ZERO;
    config
}

/// A PULL_MESSAGE header that reads up to 32 messages of `queue_id` from `offset` without
/// suspension, the subscription (`*`, TAG) carried in the request (sys flag 0x4).
pub fn pull_header(
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> ferromq::remoting::headers::PullMessageRequestHeader {
    ferromq::remoting::headers::PullMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: 0x4,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
        request_source: None,
        broker_name: None,
    }
}

/// A SEND_MESSAGE_V2 header for `topic`/`queue` with `properties`, born now (a topic it
/// creates gets 8 queues); tests change the fields they care about.
pub fn send_header(
    topic: &str,
    queue: i32,
    properties: &str,
) -> ferromq::remoting::headers::SendMessageRequestHeaderV2 {
    ferromq::remoting::headers::SendMessageRequestHeaderV2 {
        a: "StoreRustProducer".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 8,
        e: queue,
        f: 0,
        g: i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap(),
        h: 0,
        i: Some(properties.into()),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    }
}

/// A SEND_MESSAGE_V2 request of `header` carrying `body`.
pub fn send_command(
    header: &ferromq::remoting::headers::SendMessageRequestHeaderV2,
    body: &[u8],
) -> ferromq::remoting::RemotingCommand {
    let mut request = ferromq::remoting::RemotingCommand::request_with_header(
        ferromq::remoting::RequestCode::SEND_MESSAGE_V2,
        header,
    );
    request.body = body.to_vec();
    request
}

/// A SEND_MESSAGE_V2 of `body` to `topic`/`queue` with `properties`.
pub fn send_request(
    topic: &str,
    queue: i32,
    body: &[u8],
    properties: &str,
) -> ferromq::remoting::RemotingCommand {
    send_command(&send_header(topic, queue, properties), body)
}

/// A thread sending `request(n)` (n = 0, 1, …) to a broker about fifty times a second until
/// stopped, for at most a minute, counting the sends answered SUCCESS: traffic whose rate a
/// view is to show.
pub struct PacedSends {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PacedSends {
    pub fn start(
        broker: SocketAddr,
        request: impl Fn(u64) -> ferromq::remoting::RemotingCommand + Send + 'static,
    ) -> PacedSends {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (stopped, counted) = (stop.clone(), sent.clone());
        let thread = std::thread::spawn(move || {
            runtime().block_on(async {
                let client = connect(broker, SerializeType::Json).await;
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                let mut n = 0;
                while !stopped.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
                    let response = client.request(request(n)).await.expect("send");
                    if response.code == 0 {
                        counted.fetch_add(1, Ordering::Relaxed);
                    }
                    n += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            });
        });
        PacedSends {
            stop,
            sent,
            thread: Some(thread),
        }
    }

    /// The sends answered SUCCESS so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops the thread and waits for it; the sends answered SUCCESS.
    pub fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the sending thread");
        }
        self.sent()
    }
}
