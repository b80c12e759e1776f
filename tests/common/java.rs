//! The Java 4.9.8 kit (built from Maven Central by `scripts/java-kit` into the target dir, or
//! `FERROMQ_JAVA_KIT`) from Rust tests: the Java programs of `tests/java/` compiled once
//! against the kit's client, run with a timeout in either header serialization; the kit's
//! `mqadmin`, benchmark tools, name server and broker; and a `ferromq standalone` on
//! ephemeral loopback ports for them to talk to. The 5.x kit ([`kit5`]) is built the same way.
//!
//! A Java program checks what it sees itself and exits 0 only when everything held; it prints
//! one `FAIL ...` line per broken expectation and `RESULT key=value` lines with its figures.
//! Every wait is bounded: a program that overruns its time is killed and the test fails with
//! its output and the tail of the client's log.

use super::{spawn_server, TempDir};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The header serialization a Java client is run with (`rocketmq.serialize.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serialize {
    /// The client's default: JSON headers.
    Json,
    /// The binary header (`-Drocketmq.serialize.type=ROCKETMQ`).
    Rocketmq,
}

impl Serialize {
    /// Both, for tests that run a program under each.
    pub const BOTH: [Serialize; 2] = [Serialize::Json, Serialize::Rocketmq];

    /// `JVM_EXTRA` for a kit JVM: the serialization, and the client's console log quiet (it
    /// goes to `rocketmq_client.log` in full; a shutting-down consumer's expected warnings
    /// would bury a program's own lines).
    fn jvm_flags(self) -> &'static str {
        match self {
            Serialize::Json => "-Drocketmq.serialize.type=JSON -Drmq.console.level=ERROR",
            Serialize::Rocketmq => "-Drocketmq.serialize.type=ROCKETMQ -Drmq.console.level=ERROR",
        }
    }
}

/// The RocketMQ version of the kit the Java-referenced tests run by default.
pub const KIT_VERSION: &str = "4.9.8";

/// The RocketMQ 5.x version of the second reference kit ([`kit5`]): the newest 5.x release
/// whose modules Maven Central serves in full (5.5.1 lacks its parent pom, name server,
/// proxy, tools and client there).
pub const KIT5_VERSION: &str = "5.5.0";

/// Where the kit is: `FERROMQ_JAVA_KIT`, else the 4.9.8 kit that `scripts/java-kit` builds
/// from Maven Central into the target dir (built by the first test that asks, see
/// [`built_kit`]).
pub fn kit() -> PathBuf {
    if let Some(dir) = std::env::var_os("FERROMQ_JAVA_KIT") {
        return PathBuf::from(dir);
    }
    built_kit(KIT_VERSION)
}

/// The 5.x kit: `FERROMQ_JAVA5_KIT`, else the [`KIT5_VERSION`] kit built into the target dir.
pub fn kit5() -> PathBuf {
    if let Some(dir) = std::env::var_os("FERROMQ_JAVA5_KIT") {
        return PathBuf::from(dir);
    }
    built_kit(KIT5_VERSION)
}

/// The kit of `version` in `target/java-kit/<version>`, built by `scripts/java-kit` when it
/// is missing or stale. The script returns at once when the kit is current, and holds a
/// flock while it builds, so the test processes that nextest runs side by side wait for one
/// builder; this process asks it once per version. The first build downloads about 30 MB
/// (4.9.8) to 150 MB (5.x) into `~/.m2` and takes a minute or two; the wait is bounded.
pub fn built_kit(version: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<BTreeMap<String, PathBuf>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(dir) = built.get(version) {
        return dir.clone();
    }
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is target/tmp")
        .to_path_buf();
    let dir = target.join("java-kit").join(version);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/java-kit");
    let log = target
        .join("java-kit")
        .join(format!("{version}.{}.log", std::process::id()));
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let out = std::fs::File::create(&log).unwrap();
    let mut child = Command::new("bash")
        .arg(&script)
        .arg(version)
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("run scripts/java-kit");
    let status = super::wait_exit(&mut child, Duration::from_secs(20 * 60));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let Some(status) = status else {
        super::kill(&mut child);
        panic!("scripts/java-kit {version} took over 20 minutes:\n{text}");
    };
    assert!(
        status.success(),
        "scripts/java-kit {version} {} failed ({status}); it needs a JDK 17+, mvn, gcc and \
         Maven Central:\n{text}",
        dir.display()
    );
    built.insert(version.to_owned(), dir.clone());
    dir
}

/// Makes sure the kit is built and a JDK 17 or newer is there: installs one with the kit's
/// `bin/install-deps.sh` when it is missing (it needs root and apt; one test process
/// installs, the others wait on a lock), and fails the test with the remedy when that cannot
/// be done.
pub fn require_kit() {
    require(&kit());
}

/// [`require_kit`] for the 5.x kit.
pub fn require_kit5() {
    require(&kit5());
}

fn require(kit: &Path) {
    assert!(
        kit.join("bin/java-run").is_file(),
        "no Java kit at {}; unset FERROMQ_JAVA_KIT to build one",
        kit.display()
    );
    let script = kit.join("bin/install-deps.sh");
    let check = || {
        Command::new("bash")
            .arg(&script)
            .arg("--check")
            .output()
            .expect("run install-deps.sh --check")
    };
    if check().status.success() {
        return;
    }
    let lock = std::env::temp_dir().join("ferromq-java-kit-deps.lock");
    let install = Command::new("flock")
        .arg(&lock)
        .arg("bash")
        .arg(&script)
        .output()
        .expect("run flock install-deps.sh");
    let checked = check();
    assert!(
        checked.status.success(),
        "the Java kit's dependencies are missing and {} could not install them (it needs \
         root and apt):\n{}{}",
        script.display(),
        String::from_utf8_lossy(&install.stderr),
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// The classes of `tests/java/*.java`, compiled against [`kit`] (see [`compile`]).
pub fn classes() -> PathBuf {
    require_kit();
    compile(&kit(), "tests/java")
}

/// The classes of `tests/java5/*.java`, compiled against the 5.x kit ([`kit5`]).
pub fn classes5() -> PathBuf {
    require_kit5();
    compile(&kit5(), "tests/java5")
}

/// The classes of `tests/java5-grpc/*.java`, compiled against the 5.x kit's gRPC client
/// (`rocketmq-client-java`, the kit's `lib-grpc/`); run them with [`run_grpc_java`].
pub fn classes5_grpc() -> PathBuf {
    require_kit5();
    compile_with(&kit5(), "tests/java5-grpc", &[("KIT_CLIENT", "grpc")])
}

/// The Java sources of `dir` (relative to the checkout) compiled once per content and kit:
/// the directory is named by a hash of the sources and the kit's path, so every test process
/// (nextest runs each in its own) finds the classes another one made, and a changed source
/// gets a fresh directory.
pub fn compile(kit: &Path, dir: &str) -> PathBuf {
    compile_with(kit, dir, &[])
}

/// [`compile`] with `env` set for the kit's `bin/javac-client` (e.g. `KIT_CLIENT=grpc`).
pub fn compile_with(kit: &Path, dir: &str, env: &[(&str, &str)]) -> PathBuf {
    let sources_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&sources_dir)
        .unwrap_or_else(|error| panic!("{}: {error}", sources_dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "java"))
        .collect();
    sources.sort();
    let digest = {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        hasher.update(kit.as_os_str().as_encoded_bytes());
        for (key, value) in env {
            hasher.update(format!("{key}={value};"));
        }
        for source in &sources {
            hasher.update(source.file_name().unwrap().as_encoded_bytes());
            hasher.update(std::fs::read(source).unwrap());
        }
        hasher.finalize()
    };
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("java-classes");
    let done = root.join(&name);
    if done.is_dir() {
        return done;
    }
    std::fs::create_dir_all(&root).unwrap();
    let work = root.join(format!("{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let output = Command::new("bash")
        .arg(kit.join("bin/javac-client"))
        .envs(env.iter().copied())
        .arg(&work)
        .args(&sources)
        .output()
        .expect("run javac-client");
    assert!(
        output.status.success(),
        "javac failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // Another process may have finished first; its classes are the same.
    if std::fs::rename(&work, &done).is_err() {
        let _ = std::fs::remove_dir_all(&work);
        assert!(done.is_dir(), "compiled classes at {}", done.display());
    }
    done
}

/// What a Java program printed, and how it ended.
#[derive(Debug)]
pub struct JavaOutput {
    /// Exit status (a killed program has none).
    pub status: Option<ExitStatus>,
    /// Its standard output and error, interleaved as written.
    pub text: String,
    /// Its `RESULT key=value` lines.
    pub results: BTreeMap<String, String>,
    /// Whether it was killed for overrunning its time.
    pub timed_out: bool,
    /// Its `user.home`: client log and offsets (removed with the output; a failure report
    /// carries the log's tail).
    pub home: PathBuf,
    _home_dir: TempDir,
}

impl JavaOutput {
    /// Panics with the output (and the client log's tail) unless the program exited 0.
    pub fn assert_passed(&self, what: &str) -> &Self {
        let passed = !self.timed_out && self.status.is_some_and(|s| s.success());
        if !passed {
            let log = self.home.join("logs/rocketmqlogs/rocketmq_client.log");
            let log_text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = log_text.lines().rev().take(60).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "{what}: {}\n--- output ---\n{}\n--- client log tail ({}) ---\n{}",
                if self.timed_out {
                    "timed out".to_owned()
                } else {
                    format!("exit {:?}", self.status)
                },
                self.text,
                log.display(),
                tail.join("\n")
            );
        }
        self
    }

    /// A `RESULT` figure as a number.
    pub fn figure(&self, key: &str) -> f64 {
        self.results
            .get(key)
            .unwrap_or_else(|| panic!("no RESULT {key} in:\n{}", self.text))
            .parse()
            .unwrap_or_else(|_| panic!("RESULT {key} is not a number:\n{}", self.text))
    }
}

/// Runs `main` of the compiled `tests/java/` classes with `args`, in `serialize`, for at
/// most `timeout`.
pub fn run_java(main: &str, args: &[&str], serialize: Serialize, timeout: Duration) -> JavaOutput {
    run_java_with(main, args, serialize, "", timeout)
}

/// [`run_java`] with `jvm_extra` after the serialization flags (e.g. `-Dtls.enable=true`).
pub fn run_java_with(
    main: &str,
    args: &[&str],
    serialize: Serialize,
    jvm_extra: &str,
    timeout: Duration,
) -> JavaOutput {
    run_java_on(
        &kit(),
        &classes(),
        main,
        args,
        serialize,
        jvm_extra,
        timeout,
    )
}

/// [`run_java_with`] on `kit` with `classes` (e.g. [`kit5`] and [`classes5`]).
pub fn run_java_on(
    kit: &Path,
    classes: &Path,
    main: &str,
    args: &[&str],
    serialize: Serialize,
    jvm_extra: &str,
    timeout: Duration,
) -> JavaOutput {
    let jvm_flags = format!("{} {jvm_extra}", serialize.jvm_flags());
    java_run(
        kit,
        classes,
        main,
        args,
        &[("JVM_EXTRA", &jvm_flags)],
        timeout,
    )
}

/// Runs `main` of `classes` (from [`classes5_grpc`]) on the 5.x kit's gRPC client, for at
/// most `timeout`.
pub fn run_grpc_java(classes: &Path, main: &str, args: &[&str], timeout: Duration) -> JavaOutput {
    java_run(
        &kit5(),
        classes,
        main,
        args,
        &[("KIT_CLIENT", "grpc")],
        timeout,
    )
}

fn java_run(
    kit: &Path,
    classes: &Path,
    main: &str,
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> JavaOutput {
    let home = TempDir::on_disk("java-home");
    let home_path = home.path().to_path_buf();
    let out_file = home_path.join("out.txt");
    let out = std::fs::File::create(&out_file).unwrap();
    let mut command = Command::new("bash");
    command
        .arg(kit.join("bin/java-run"))
        .arg(classes)
        .arg(main)
        .args(args)
        .env("RMQ_LOGDIR", &home_path)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    let child = command.spawn().expect("spawn java-run");
    finish(child, &out_file, home, timeout)
}

/// Runs a kit command (`bin/<tool> args`) with `RMQ_LOGDIR` in a fresh directory.
pub fn run_kit(tool: &str, args: &[&str], serialize: Serialize, timeout: Duration) -> JavaOutput {
    run_kit_with(tool, args, serialize, "", timeout)
}

/// [`run_kit`] with `jvm_extra` after the serialization flags (e.g. `-Drocketmq.home.dir=D`,
/// which wins over the kit's own).
pub fn run_kit_with(
    tool: &str,
    args: &[&str],
    serialize: Serialize,
    jvm_extra: &str,
    timeout: Duration,
) -> JavaOutput {
    require_kit();
    let jvm_flags = format!("{} {jvm_extra}", serialize.jvm_flags());
    run_tool(&kit(), tool, args, &jvm_flags, timeout)
}

/// [`run_kit`] of `kit` (e.g. [`kit5`]), in the default serialization.
pub fn run_kit_on(kit: &Path, tool: &str, args: &[&str], timeout: Duration) -> JavaOutput {
    require(kit);
    run_tool(kit, tool, args, Serialize::Json.jvm_flags(), timeout)
}

fn run_tool(
    kit: &Path,
    tool: &str,
    args: &[&str],
    jvm_flags: &str,
    timeout: Duration,
) -> JavaOutput {
    let home = TempDir::on_disk("kit-home");
    let home_path = home.path().to_path_buf();
    let out_file = home_path.join("out.txt");
    let out = std::fs::File::create(&out_file).unwrap();
    let child = Command::new("bash")
        .arg(kit.join("bin").join(tool))
        .args(args)
        .env("RMQ_LOGDIR", &home_path)
        .env("JVM_EXTRA", jvm_flags)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("spawn a kit tool");
    finish(child, &out_file, home, timeout)
}

fn finish(mut child: Child, out_file: &Path, home: TempDir, timeout: Duration) -> JavaOutput {
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            timed_out = true;
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(out_file).unwrap_or_default();
    let results = text
        .lines()
        .filter_map(|line| line.strip_prefix("RESULT "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    JavaOutput {
        status,
        text,
        results,
        timed_out,
        home: home.path().to_path_buf(),
        _home_dir: home,
    }
}

/// `ferromq standalone` on ephemeral loopback ports over a fresh data directory; killed on
/// drop.
pub struct Standalone {
    /// The process.
    pub child: Child,
    /// Name server address, as clients are given it.
    pub namesrv: SocketAddr,
    /// The broker's address.
    pub broker: SocketAddr,
    /// The data directory (`store/` under it).
    pub data: PathBuf,
    /// Its log lines, after start-up.
    pub log: mpsc::Receiver<String>,
    /// Holds `data` (removed on drop); taken by [`Standalone::stop`].
    dir: Option<TempDir>,
    /// Whether its config says `tls.server.mode=enforcing` (so tests must speak TLS).
    pub tls_only: bool,
}

impl Standalone {
    /// Starts with the default config plus `config` lines (Java broker.conf keys).
    pub fn start(config: &str) -> Standalone {
        let dir = TempDir::on_disk("java-standalone");
        let data = dir.path().join("data");
        Self::start_in(dir, data, config)
    }

    /// Starts over an existing `data` directory inside `dir`.
    pub fn start_in(dir: TempDir, data: PathBuf, config: &str) -> Standalone {
        Self::start_in_on(dir, data, config, 0)
    }

    /// [`Standalone::start`] with the broker on `broker_port` (its HA port is the next one).
    pub fn start_on(config: &str, broker_port: u16) -> Standalone {
        let dir = TempDir::on_disk("java-standalone");
        let data = dir.path().join("data");
        Self::start_in_on(dir, data, config, broker_port)
    }

    /// [`Standalone::start_in`] with the broker on `broker_port` (0: any).
    pub fn start_in_on(dir: TempDir, data: PathBuf, config: &str, broker_port: u16) -> Standalone {
        std::fs::create_dir_all(&data).unwrap();
        let broker_listen = format!("127.0.0.1:{broker_port}");
        let conf = dir.path().join("broker.conf");
        std::fs::write(&conf, format!("{config}\n")).unwrap();
        let args = [
            "--data",
            data.to_str().unwrap(),
            "-c",
            conf.to_str().unwrap(),
            "--namesrv-listen",
            "127.0.0.1:0",
            "--broker-listen",
            &broker_listen,
        ];
        let (mut child, namesrv, log, early) = spawn_server("standalone", &args);
        let ready = early
            .iter()
            .find(|line| line.contains("standalone ready"))
            .cloned()
            .or_else(|| {
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    let left = deadline.checked_duration_since(Instant::now())?;
                    match log.recv_timeout(left) {
                        Ok(line) if line.contains("standalone ready") => return Some(line),
                        Ok(_) => {}
                        Err(_) => return None,
                    }
                }
            });
        let Some(ready) = ready else {
            super::kill(&mut child);
            panic!("ferromq standalone did not report ready");
        };
        let field = |name: &str| -> SocketAddr {
            ready
                .split_whitespace()
                .find_map(|word| word.strip_prefix(&format!("{name}=")))
                .unwrap_or_else(|| panic!("no {name}= in {ready}"))
                .parse()
                .unwrap()
        };
        let broker = field("broker");
        assert_eq!(field("namesrv").port(), namesrv.port());
        let standalone = Standalone {
            child,
            namesrv,
            broker,
            data,
            log,
            dir: Some(dir),
            tls_only: config.contains("tls.server.mode=enforcing"),
        };
        standalone.wait_registered();
        standalone
    }

    /// `127.0.0.1:port` of the name server.
    pub fn namesrv_addr(&self) -> String {
        format!("127.0.0.1:{}", self.namesrv.port())
    }

    /// `127.0.0.1:port` of the broker.
    pub fn broker_addr(&self) -> String {
        format!("127.0.0.1:{}", self.broker.port())
    }

    /// Waits (bounded) until the name server routes `TBW102` to the broker, so a client
    /// started now finds it.
    fn wait_registered(&self) {
        let tls = self
            .tls_only
            .then(ferromq::client::tls::TlsClient::insecure);
        wait_topic_route(self.namesrv, "TBW102", tls, Duration::from_secs(30));
    }

    /// Stops with SIGTERM and waits for a clean exit; returns the data directory and the
    /// temporary directory that holds it (the data goes when that is dropped).
    pub fn stop(mut self) -> (TempDir, PathBuf) {
        let status = super::terminate(&mut self.child, Duration::from_secs(30));
        assert!(status.success(), "standalone exited {status:?}");
        let dir = self.dir.take().expect("a standalone's directory");
        (dir, self.data.clone())
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        super::kill(&mut self.child);
    }
}

/// A free loopback port (bound and released; a short race remains).
///
/// Taken below the kernel's ephemeral range (`ip_local_port_range`), from which every
/// outgoing connection gets its local port: a port from that range can go to another test's
/// client between this check and the server's bind (a test that opens 10,000 connections
/// made a Java broker fail with "Address already in use"). The start is random per call, so
/// test processes that ask at once rarely probe the same ports.
pub fn free_port() -> u16 {
    const SPAN: u64 = 12_000;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(32_768);
    let low = ephemeral_low.saturating_sub(SPAN).max(1_100);
    let span = ephemeral_low.saturating_sub(low).max(1);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let start = (u64::from(seed) ^ u64::from(std::process::id()).wrapping_mul(7_919)) % span;
    for step in 0..span {
        let port = u16::try_from(low + (start + step) % span).unwrap();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {low}..{ephemeral_low}");
}

/// Waits (at most `timeout`) until the name server at `namesrv` has a route for `topic`:
/// for `TBW102`, until a broker that creates topics on demand has registered, so a client
/// started now finds it. `tls`: how to reach a TLS-only name server.
pub fn wait_topic_route(
    namesrv: SocketAddr,
    topic: &str,
    tls: Option<ferromq::client::tls::TlsClient>,
    timeout: Duration,
) {
    let deadline = Instant::now() + timeout;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use ferromq::remoting::headers::GetRouteInfoRequestHeader;
        use ferromq::remoting::{RemotingCommand, RequestCode};
        let config = ferromq::remoting::client::ClientConfig {
            tls,
            ..Default::default()
        };
        let (client, _) = ferromq::remoting::client::connect_tokio(namesrv, config)
            .await
            .expect("connect to the name server");
        loop {
            let request = RemotingCommand::request_with_header(
                RequestCode::GET_ROUTEINFO_BY_TOPIC,
                &GetRouteInfoRequestHeader {
                    topic: topic.into(),
                    accept_standard_json_only: None,
                },
            );
            if client.request(request).await.is_ok_and(|r| r.code == 0) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no route for {topic} at {namesrv} after {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// A Java broker `listenPort` P with its VIP (P-2) and HA (P+1) ports free too.
pub fn java_broker_port() -> u16 {
    loop {
        let p = free_port();
        let free = |q: u16| TcpListener::bind(("127.0.0.1", q)).is_ok();
        if p > 1026 && p < u16::MAX && free(p - 2) && free(p + 1) {
            return p;
        }
    }
}

/// A kit JVM server (name server or broker); SIGTERM (a clean stop) on drop.
pub struct JavaServer {
    /// The JVM.
    pub child: Child,
    /// Its `user.home` (`logs/rocketmqlogs/`).
    pub home: PathBuf,
    /// Its port.
    pub port: u16,
}

impl JavaServer {
    /// The kit's name server on a free port.
    pub fn namesrv(dir: &Path) -> JavaServer {
        Self::namesrv_on(&kit(), dir)
    }

    /// [`JavaServer::namesrv`] of `kit` (e.g. [`kit5`]).
    pub fn namesrv_on(kit: &Path, dir: &Path) -> JavaServer {
        let port = free_port();
        let home = dir.join(format!("java-ns-{port}"));
        let out = home.with_extension("out");
        let child = start_kit_server(
            kit,
            "namesrv",
            &[&port.to_string(), home.to_str().unwrap()],
            &out,
        );
        JavaServer { child, home, port }
    }

    /// The kit's broker with `conf` (broker.conf lines; `listenPort` and `namesrvAddr` are
    /// added), its store at `store`.
    pub fn broker(dir: &Path, namesrv_port: u16, store: &Path, conf: &str) -> JavaServer {
        Self::broker_with_jvm(dir, namesrv_port, store, conf, "")
    }

    /// [`JavaServer::broker`] with `jvm_extra` appended to the JVM's command line (the kit's
    /// `JVM_EXTRA`, in place of the test's own when not empty), e.g. 4.9's disk-full
    /// threshold, a system property (`-Drocketmq.broker.diskSpaceWarningLevelRatio=0.99`).
    pub fn broker_with_jvm(
        dir: &Path,
        namesrv_port: u16,
        store: &Path,
        conf: &str,
        jvm_extra: &str,
    ) -> JavaServer {
        Self::try_broker_with_jvm(dir, namesrv_port, store, conf, jvm_extra)
            .unwrap_or_else(|text| panic!("{text}"))
    }

    /// [`JavaServer::broker_with_jvm`], or, if the broker exits before its boot line, what
    /// it printed and the tails of its logs.
    ///
    /// # Errors
    /// That text.
    pub fn try_broker_with_jvm(
        dir: &Path,
        namesrv_port: u16,
        store: &Path,
        conf: &str,
        jvm_extra: &str,
    ) -> Result<JavaServer, String> {
        Self::try_broker_on(&kit(), dir, namesrv_port, store, conf, jvm_extra)
    }

    /// [`JavaServer::try_broker_with_jvm`] of `kit` (e.g. [`kit5`]).
    ///
    /// # Errors
    /// What the broker printed, and its logs' tails, when it exits before its boot line.
    pub fn try_broker_on(
        kit: &Path,
        dir: &Path,
        namesrv_port: u16,
        store: &Path,
        conf: &str,
        jvm_extra: &str,
    ) -> Result<JavaServer, String> {
        let port = java_broker_port();
        let home = dir.join(format!("java-broker-{port}"));
        std::fs::create_dir_all(&home).unwrap();
        let file = home.join("broker.conf");
        std::fs::write(
            &file,
            format!(
                "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\n\
                 brokerRole=ASYNC_MASTER\nnamesrvAddr=127.0.0.1:{namesrv_port}\n\
                 listenPort={port}\nstorePathRootDir={}\n{conf}\n",
                store.display()
            ),
        )
        .unwrap();
        let out = home.with_extension("out");
        let env: &[(&str, &str)] = if jvm_extra.is_empty() {
            &[]
        } else {
            &[("JVM_EXTRA", jvm_extra)]
        };
        let child = try_start_kit_server_with(
            kit,
            "broker",
            &[file.to_str().unwrap(), home.to_str().unwrap()],
            &out,
            env,
        )?;
        Ok(JavaServer { child, home, port })
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops with SIGTERM and waits (bounded).
    pub fn stop(mut self) {
        term_and_wait(&mut self.child);
    }
}

/// A kit's name server and one broker registered with it, the usual Java reference of a
/// test. The broker is dropped (stopped) before its name server.
pub struct JavaCluster {
    /// The broker.
    pub broker: JavaServer,
    /// Its name server.
    pub namesrv: JavaServer,
}

impl JavaCluster {
    /// Starts `kit`'s name server and a broker with `conf` and `jvm_extra` (as
    /// [`JavaServer::try_broker_on`] takes them), its store at `dir/store`, and returns once
    /// the name server routes `TBW102` (the broker has registered). Panics with the broker's
    /// output when it does not start.
    pub fn start(kit: &Path, dir: &Path, conf: &str, jvm_extra: &str) -> JavaCluster {
        let namesrv = JavaServer::namesrv_on(kit, dir);
        let store = dir.join("store");
        let broker = JavaServer::try_broker_on(kit, dir, namesrv.port, &store, conf, jvm_extra)
            .unwrap_or_else(|text| panic!("{text}"));
        let cluster = JavaCluster { broker, namesrv };
        wait_topic_route(
            cluster.namesrv_socket(),
            "TBW102",
            None,
            Duration::from_secs(60),
        );
        cluster
    }

    /// The name server's address.
    pub fn namesrv_socket(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.namesrv.port).into()
    }

    /// The name server's address as clients are given it.
    pub fn namesrv_addr(&self) -> String {
        self.namesrv_socket().to_string()
    }

    /// Stops both with SIGKILL, for a test that reads nothing of theirs after: their clean
    /// stop takes half a minute.
    pub fn stop_now(mut self) {
        for server in [&mut self.broker, &mut self.namesrv] {
            let _ = server.child.kill();
            let _ = server.child.wait();
        }
    }
}

impl Drop for JavaServer {
    fn drop(&mut self) {
        term_and_wait(&mut self.child);
    }
}

fn term_and_wait(child: &mut Child) {
    if child.try_wait().ok().flatten().is_some() {
        return;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    if super::wait_exit(child, Duration::from_secs(30)).is_none() {
        super::kill(child);
    }
}

fn start_kit_server(kit: &Path, cmd: &str, args: &[&str], out: &Path) -> Child {
    try_start_kit_server_with(kit, cmd, args, out, &[]).unwrap_or_else(|text| panic!("{text}"))
}

/// Starts `kit`'s server command `cmd` (`bin/<cmd> args`, `env` set for it), its output in
/// `out`, and waits (bounded) for its boot line.
pub fn start_kit_server_on(
    kit: &Path,
    cmd: &str,
    args: &[&str],
    out: &Path,
    env: &[(&str, &str)],
) -> Child {
    try_start_kit_server_with(kit, cmd, args, out, env).unwrap_or_else(|text| panic!("{text}"))
}

/// [`start_kit_server_on`]; a server that exits first is an `Err` of what it printed and
/// the tails of its logs.
fn try_start_kit_server_with(
    kit: &Path,
    cmd: &str,
    args: &[&str],
    out: &Path,
    env: &[(&str, &str)],
) -> Result<Child, String> {
    require(kit);
    let file = std::fs::File::create(out).unwrap();
    let mut child = Command::new("bash")
        .arg(kit.join("bin").join(cmd))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("spawn a kit server");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        // The name server and broker print "... boot success ..."; the 5.x proxy prints
        // "rocketmq-proxy startup successfully".
        if text.contains("boot success") || text.contains("startup successfully") {
            return Ok(child);
        }
        if let Some(status) = child.try_wait().unwrap() {
            // The servers print little; why they stopped is in the logs of their home
            // (`<home>.out` is beside `<home>`).
            let logs = out.with_extension("").join("logs/rocketmqlogs");
            let tails: Vec<String> = ["store.log", "broker.log", "namesrv.log"]
                .iter()
                .filter_map(|name| {
                    let text = std::fs::read_to_string(logs.join(name)).ok()?;
                    let lines: Vec<&str> = text.lines().collect();
                    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
                    Some(format!("--- {name} ---\n{tail}"))
                })
                .collect();
            return Err(format!(
                "kit {cmd} exited ({status}):\n{text}\n{}",
                tails.join("\n")
            ));
        }
        if Instant::now() > deadline {
            super::kill(&mut child);
            panic!("kit {cmd}: no 'boot success' after 120 s:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Java program of `tests/java/` or a kit tool running in the background
/// ([`spawn_java`], [`spawn_kit`]), for tests that act while it runs; killed on drop. A
/// program that waits for a stop signal watches for the file [`Background::stop_file`]
/// (`<user.home>/stop`).
pub struct Background {
    child: Option<Child>,
    out_file: PathBuf,
    /// Its `user.home`: logs, offsets, the stop file.
    pub home: PathBuf,
    home_dir: Option<TempDir>,
}

impl Background {
    /// What it printed so far.
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.out_file).unwrap_or_default()
    }

    /// The file whose appearance tells the program to finish.
    pub fn stop_file(&self) -> PathBuf {
        self.home.join("stop")
    }

    /// Waits (at most `timeout`) for a line containing `needle` and returns it; panics with
    /// the output if the program exits first or the time passes.
    pub fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.text();
            // Whole lines only: the program may be halfway through writing one.
            let found = text
                .split_inclusive('\n')
                .find(|line| line.ends_with('\n') && line.contains(needle));
            if let Some(line) = found {
                return line.trim_end().to_owned();
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            assert!(
                exited.is_none(),
                "exited ({exited:?}) before printing {needle:?}:\n{text}"
            );
            assert!(
                Instant::now() < deadline,
                "no {needle:?} after {timeout:?}:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Creates the stop file and waits (at most `timeout`) for the program to exit.
    pub fn finish(mut self, timeout: Duration) -> JavaOutput {
        std::fs::write(self.stop_file(), b"").unwrap();
        let child = self.child.take().expect("running");
        let home = self.home_dir.take().expect("once");
        finish(child, &self.out_file, home, timeout)
    }

    /// Stops it with SIGTERM (a JVM runs its shutdown hooks) and waits (at most `timeout`,
    /// then SIGKILL) for its exit.
    pub fn terminate(mut self, timeout: Duration) -> JavaOutput {
        let child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let home = self.home_dir.take().expect("once");
        finish(child, &self.out_file, home, timeout)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            super::kill(child);
        }
    }
}

/// Starts `main` of the compiled `tests/java/` classes with `args`, in `serialize`, in the
/// background.
pub fn spawn_java(main: &str, args: &[&str], serialize: Serialize) -> Background {
    let classes = classes();
    let mut command = Command::new("bash");
    command
        .arg(kit().join("bin/java-run"))
        .arg(&classes)
        .arg(main)
        .args(args);
    spawn_background(command, "java-home", serialize.jvm_flags().to_owned())
}

/// Starts a kit tool (`bin/<tool> args`) in the background; `jvm_extra` is appended to its
/// JVM flags (a smaller heap for the benchmark tools, say).
pub fn spawn_kit(tool: &str, args: &[&str], serialize: Serialize, jvm_extra: &str) -> Background {
    require_kit();
    let mut command = Command::new("bash");
    command.arg(kit().join("bin").join(tool)).args(args);
    spawn_background(
        command,
        "kit-home",
        format!("{} {jvm_extra}", serialize.jvm_flags()),
    )
}

fn spawn_background(mut command: Command, name: &str, jvm_flags: String) -> Background {
    let home = TempDir::on_disk(name);
    let home_path = home.path().to_path_buf();
    let out_file = home_path.join("out.txt");
    let out = std::fs::File::create(&out_file).unwrap();
    let child = command
        .env("RMQ_LOGDIR", &home_path)
        .env("JVM_EXTRA", jvm_flags)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("spawn a background JVM");
    Background {
        child: Some(child),
        out_file,
        home: home_path,
        home_dir: Some(home),
    }
}

/// The kit's proxy (cluster mode) for the name server at `namesrv`, its gRPC port as the
/// server's port.
pub fn start_proxy(kit: &Path, dir: &Path, namesrv: &str) -> JavaServer {
    let grpc_port = free_port();
    let remoting_port = free_port();
    let home = dir.join(format!("java-proxy-{grpc_port}"));
    std::fs::create_dir_all(&home).unwrap();
    let conf = home.join("rmq-proxy.json");
    std::fs::write(
        &conf,
        format!(
            "{{\"rocketMQClusterName\":\"DefaultCluster\",\"namesrvAddr\":\"{namesrv}\",\
             \"grpcServerPort\":{grpc_port},\"remotingListenPort\":{remoting_port},\
             \"proxyMode\":\"cluster\"}}"
        ),
    )
    .unwrap();
    let child = start_kit_server_on(
        kit,
        "proxy",
        &[conf.to_str().unwrap(), home.to_str().unwrap()],
        &home.with_extension("out"),
        &[],
    );
    JavaServer {
        child,
        home,
        port: grpc_port,
    }
}
