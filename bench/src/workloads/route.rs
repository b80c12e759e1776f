//! `route`: closed-loop GET_ROUTEINFO_BY_TOPIC against a name server.
//!
//! Each connection keeps one request in flight and sends the next as soon as the answer
//! arrives (closed loop: the latency of a request includes no queueing in the load
//! generator). For every connection count in `--connections` the run lasts `--duration`
//! after a short warm-up, and reports lookups per second, latency percentiles up to p99.99
//! and max, and (in the JSON) the latency per 100 ms (`workloads::timeline`).
//!
//! Without `--namesrv`, the `ferromq` binary next to this one is started as a name server on
//! loopback, with one stand-in broker registered that serves the topic; with it, the topic
//! must already have a route on that server (or pass --register-broker).

use super::timeline::{LocalWindow, Series, WindowClock, Windows};
use anyhow::{bail, Context};
use ferromq::remoting::body::{RegisterBrokerBody, TopicConfig};
use ferromq::remoting::client::{connect_tokio, ClientConfig, RemotingClient};
use ferromq::remoting::headers::{GetRouteInfoRequestHeader, RegisterBrokerRequestHeader};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use hdrhistogram::Histogram;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Options of the `route` workload.
#[derive(Debug, clap::Args)]
pub struct RouteArgs {
    /// Name server to measure; default: start a ferromq name server in this process.
    #[arg(long, value_name = "ADDR")]
    namesrv: Option<SocketAddr>,
    /// Comma-separated connection counts, each measured in turn.
    #[arg(long, value_delimiter = ',', default_value = "1,16,256")]
    connections: Vec<usize>,
    /// Measured time per connection count, in seconds.
    #[arg(long, default_value_t = 5)]
    duration_secs: u64,
    /// Warm-up time per connection count, in seconds (not measured).
    #[arg(long, default_value_t = 1)]
    warmup_secs: u64,
    /// Topic to look up.
    #[arg(long, default_value = "BenchRouteTopic")]
    topic: String,
    /// Request version: below 401 asks for the legacy JSON flavour.
    #[arg(long, default_value_t = 479)]
    request_version: i32,
    /// Header serialization of the requests: json or rocketmq.
    #[arg(long, default_value = "json")]
    serialize: String,
    /// Register a stand-in broker serving the topic first (always done for the embedded
    /// name server; with --namesrv, only when asked, since it adds a broker to that server).
    #[arg(long)]
    register_broker: bool,
    /// Load generator threads (the server shares the machine).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Shards of the embedded name server (ignored with --namesrv).
    #[arg(long)]
    shards: Option<String>,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
}

/// Time limit of one lookup.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The outcome of one connection count.
#[derive(Debug)]
struct Round {
    connections: usize,
    lookups: u64,
    errors: u64,
    elapsed: Duration,
    latency_us: Histogram<u64>,
    timeline: Series,
}

/// Runs the workload.
///
/// # Errors
/// Setup failures (cannot connect, topic has no route).
pub fn run(args: &RouteArgs) -> anyhow::Result<()> {
    let serialize_type = match args.serialize.as_str() {
        "json" => SerializeType::Json,
        "rocketmq" => SerializeType::RocketMq,
        other => bail!("--serialize must be json or rocketmq, not {other}"),
    };
    let mut embedded = None;
    let addr = match args.namesrv {
        Some(addr) => addr,
        None => {
            let server = EmbeddedNamesrv::start(args.shards.as_deref())?;
            let addr = server.addr;
            embedded = Some(server);
            addr
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()?;
    let rounds = runtime.block_on(async {
        let config = ClientConfig {
            serialize_type,
            ..ClientConfig::default()
        };
        let (setup, _) = connect_tokio(addr, config.clone()).await?;
        if embedded.is_some() || args.register_broker {
            register_bench_broker(&setup, &args.topic).await?;
        }
        let probe = setup
            .request_timeout(route_request(args), Duration::from_secs(5))
            .await?;
        if probe.response_code() != ResponseCode::SUCCESS {
            bail!(
                "topic {} has no route on {addr}: {:?}",
                args.topic,
                probe.remark
            );
        }
        println!(
            "route lookups against {addr} ({}, topic {}, {} body bytes, {} client thread(s))",
            if embedded.is_some() {
                "embedded ferromq namesrv"
            } else {
                "external name server"
            },
            args.topic,
            probe.body.len(),
            args.threads
        );
        let mut rounds = Vec::new();
        for &connections in &args.connections {
            rounds.push(measure(addr, &config, args, connections).await?);
        }
        anyhow::Ok(rounds)
    })?;
    print_report(&rounds);
    if let Some(path) = &args.json {
        write_json(path, args, &rounds)?;
    }
    drop(embedded);
    Ok(())
}

/// A `ferromq namesrv` child process on an ephemeral loopback port, stopped on drop.
///
/// A separate process rather than shards in this one: the measurement is of the binary users
/// run, and the load generator's threads do not share an address space with the server's.
struct EmbeddedNamesrv {
    child: std::process::Child,
    addr: SocketAddr,
    dir: std::path::PathBuf,
}

impl EmbeddedNamesrv {
    fn start(shards: Option<&str>) -> anyhow::Result<EmbeddedNamesrv> {
        use std::io::BufRead;
        let exe = std::env::current_exe()?;
        let binary = exe.with_file_name("ferromq");
        if !binary.is_file() {
            bail!(
                "{} not found: build it (cargo build --release) or pass --namesrv",
                binary.display()
            );
        }
        let dir = std::env::temp_dir().join(format!("ferromq-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let config = dir.join("namesrv.conf");
        std::fs::write(
            &config,
            format!("kvConfigPath={}\n", dir.join("kvConfig.json").display()),
        )?;
        let mut command = std::process::Command::new(&binary);
        command
            .args(["namesrv", "--listen", "127.0.0.1:0", "--log", "info", "-c"])
            .arg(&config);
        if let Some(spec) = shards {
            command.args(["--shards", spec]);
        }
        let mut child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stderr = child.stderr.take().context("child stderr")?;
        let mut lines = std::io::BufReader::new(stderr).lines();
        let addr = loop {
            let Some(line) = lines.next() else {
                bail!("ferromq namesrv exited before listening");
            };
            let line = line?;
            if let (true, Some(rest)) = (line.contains("listening"), line.split("addr=").nth(1)) {
                break rest.split_whitespace().next().context("address")?.parse()?;
            }
        };
        // Keep draining the log so the child never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(EmbeddedNamesrv { child, addr, dir })
    }
}

impl Drop for EmbeddedNamesrv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn route_request(args: &RouteArgs) -> RemotingCommand {
    let header = GetRouteInfoRequestHeader {
        topic: args.topic.clone(),
        accept_standard_json_only: None,
    };
    let mut request =
        RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
    request.version = args.request_version;
    request
}

async fn register_bench_broker(client: &RemotingClient, topic: &str) -> anyhow::Result<()> {
    let mut body = RegisterBrokerBody::default();
    body.topic_config_serialize_wrapper
        .insert(TopicConfig::named(topic));
    let header = RegisterBrokerRequestHeader {
        broker_name: "bench-broker".into(),
        broker_addr: "127.0.0.1:10911".into(),
        cluster_name: "BenchCluster".into(),
        ha_server_addr: "127.0.0.1:10912".into(),
        broker_id: 0,
        ..RegisterBrokerRequestHeader::default()
    };
    let request = RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header)
        .with_body(serde_json::to_vec(&body)?);
    let response = client
        .request_timeout(request, Duration::from_secs(5))
        .await?;
    if response.response_code() != ResponseCode::SUCCESS {
        bail!("registering the bench broker failed: {:?}", response.remark);
    }
    Ok(())
}

async fn measure(
    addr: SocketAddr,
    config: &ClientConfig,
    args: &RouteArgs,
    connections: usize,
) -> anyhow::Result<Round> {
    let mut clients = Vec::with_capacity(connections);
    for _ in 0..connections {
        clients.push(connect_tokio(addr, config.clone()).await?.0);
    }
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let lookups = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let histogram = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(
        1, 60_000_000, 3,
    )?));
    // The last answers come at most a request's time limit after the end.
    let span = Duration::from_secs(args.warmup_secs + args.duration_secs) + REQUEST_TIMEOUT;
    let clock = WindowClock::new(Instant::now(), span);
    let windows = Arc::new(Mutex::new(Windows::new(clock)));
    let mut tasks = Vec::new();
    for client in clients {
        let request = route_request(args);
        let (measuring, stop, lookups, errors, histogram, windows) = (
            measuring.clone(),
            stop.clone(),
            lookups.clone(),
            errors.clone(),
            histogram.clone(),
            windows.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut local = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
            let mut window = LocalWindow::new();
            let hand_over = |index, samples: &_| {
                let mut windows = windows.lock().expect("no panics while held");
                windows.add(index, samples);
            };
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let outcome = client
                    .request_timeout(request.clone(), REQUEST_TIMEOUT)
                    .await;
                let ok = matches!(&outcome, Ok(r) if r.response_code() == ResponseCode::SUCCESS);
                if !measuring.load(Ordering::Relaxed) {
                    continue;
                }
                if ok {
                    let answered = Instant::now();
                    let micros =
                        u64::try_from((answered - started).as_micros()).unwrap_or(u64::MAX);
                    local.saturating_record(micros.max(1));
                    window.record(clock.index(answered), micros, hand_over);
                    lookups.fetch_add(1, Ordering::Relaxed);
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            window.finish(hand_over);
            histogram
                .lock()
                .expect("no panics while held")
                .add(&local)
                .expect("same bounds");
        }));
    }
    tokio::time::sleep(Duration::from_secs(args.warmup_secs)).await;
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    let mut last = 0;
    for second in 1..=args.duration_secs {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = lookups.load(Ordering::Relaxed);
        eprintln!(
            "  [{connections:>4} conn] {second:>3}s  {:>9} lookups/s  errors {}",
            now - last,
            errors.load(Ordering::Relaxed)
        );
        last = now;
    }
    let elapsed = started.elapsed();
    measuring.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await?;
    }
    let latency_us = Arc::try_unwrap(histogram)
        .map_err(|_| anyhow::anyhow!("histogram still shared"))?
        .into_inner()
        .map_err(|_| anyhow::anyhow!("histogram lock poisoned"))?;
    let timeline = windows
        .lock()
        .map_err(|_| anyhow::anyhow!("windows lock poisoned"))?
        .series(started, started + elapsed);
    Ok(Round {
        connections,
        lookups: lookups.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        elapsed,
        latency_us,
        timeline,
    })
}

fn per_second(round: &Round) -> f64 {
    round.lookups as f64 / round.elapsed.as_secs_f64()
}

fn print_report(rounds: &[Round]) {
    println!(
        "{:>11} {:>14} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>7}",
        "connections",
        "lookups/s",
        "p50 us",
        "p90 us",
        "p99 us",
        "p99.9 us",
        "p99.99 us",
        "max us",
        "errors"
    );
    for round in rounds {
        let h = &round.latency_us;
        println!(
            "{:>11} {:>14.0} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>7}",
            round.connections,
            per_second(round),
            h.value_at_quantile(0.50),
            h.value_at_quantile(0.90),
            h.value_at_quantile(0.99),
            h.value_at_quantile(0.999),
            h.value_at_quantile(0.9999),
            h.max(),
            round.errors
        );
    }
}

fn write_json(path: &std::path::Path, args: &RouteArgs, rounds: &[Round]) -> anyhow::Result<()> {
    let results: Vec<serde_json::Value> = rounds
        .iter()
        .map(|round| {
            let h = &round.latency_us;
            serde_json::json!({
                "connections": round.connections,
                "lookups": round.lookups,
                "errors": round.errors,
                "elapsed_secs": round.elapsed.as_secs_f64(),
                "lookups_per_sec": per_second(round),
                "latency_us": super::latency_json(h),
                "latency_samples": h.len(),
                "timeline": round.timeline.json(),
            })
        })
        .collect();
    let report = serde_json::json!({
        "workload": "route",
        "namesrv": args.namesrv.map(|a| a.to_string()),
        "topic": args.topic,
        "request_version": args.request_version,
        "serialize": args.serialize,
        "threads": args.threads,
        "results": results,
    });
    std::fs::write(path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))
}
