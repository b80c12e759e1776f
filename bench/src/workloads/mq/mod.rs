//! `produce`, `consume` and `e2e`: load against any RocketMQ-protocol broker, at the protocol
//! level (the numbers measure the broker, not a client library).
//!
//! The target is a name server (`-n`; the topic's route names the master brokers and their
//! writable queues) or one broker (`--broker`; `--queues` queues). Senders are closed loops
//! (the next request leaves when the previous answer arrived, or when one of `--in-flight`
//! slots frees in async mode) unless `--rate` is given: then each sender's requests leave at
//! fixed intervals, handed out by a pacer thread (`pace`), and latency counts from the
//! intended send time, so a stalled broker shows in the percentiles instead of silently
//! lowering the offered load (coordinated omission).
//!
//! Every body starts with the send time in nanoseconds (8 bytes, big-endian, wall clock of
//! the producing process, the intended time under `--rate`): `e2e` takes its end-to-end
//! latency from it; bodies shorter than 8 bytes fall back to the millisecond born timestamp.
//!
//! After a produce run, the brokers' max offsets are summed again and compared with the
//! acknowledged count (for oneway sends: with the sent count), so the report says whether
//! the broker stored what it acknowledged.
//!
//! Each side's report (text, `--json`, `--plot`) gives its latency percentiles up to p99.99
//! and max, and its latency over time: count, p50, p99 and max per 100 ms window from the end
//! of the warm-up (`workloads::timeline`), so that a stall shows at its time.

mod consume;
mod idle;
mod pace;
mod produce;
mod report;
mod stats;
mod target;

use super::timeline::WindowClock;
use anyhow::{bail, Context};
use ferromq::protocol::acl::Credentials;
use ferromq::remoting::client::{ClientConfig, RemotingClient};
use ferromq::remoting::SerializeType;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use target::{Broker, BrokerInfo};

/// How a sender waits for answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// One request at a time per sender.
    Sync,
    /// Up to `--in-flight` outstanding requests per sender.
    Async,
    /// No answers; the stored count is checked at the end.
    Oneway,
}

/// The flush setting the run expects of the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Flush {
    /// `SYNC_FLUSH`.
    Sync,
    /// `ASYNC_FLUSH`.
    Async,
}

/// Where consumption starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum From {
    /// Each queue's min offset.
    First,
    /// Each queue's max offset at the start.
    Last,
}

/// Options of `produce`, `consume` and `e2e`.
#[derive(Debug, Clone, clap::Args)]
pub struct MqArgs {
    /// Name server address; the topic's route gives the brokers.
    #[arg(short = 'n', long = "namesrv", value_name = "ADDR")]
    pub namesrv: Option<SocketAddr>,
    /// A broker address, used directly with `--queues` queues (instead of `-n`).
    #[arg(long, value_name = "ADDR", conflicts_with = "namesrv")]
    pub broker: Option<SocketAddr>,
    /// Topic.
    #[arg(long, default_value = "BenchmarkTest")]
    pub topic: String,
    /// Queue count for `--create-topic` and for `--broker`.
    #[arg(long, default_value_t = 8)]
    pub queues: i32,
    /// Create (or update) the topic with UPDATE_AND_CREATE_TOPIC on each master first.
    #[arg(long)]
    pub create_topic: bool,
    /// TCP connections per broker (senders share them round robin).
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Concurrent senders.
    #[arg(long, visible_alias = "concurrency", default_value_t = 1)]
    pub threads: usize,
    /// Tokio worker threads of the load generator (it shares the machine with the broker).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Message body bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Messages per request; above 1, SEND_BATCH_MESSAGE.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Send mode.
    #[arg(long, value_enum, default_value = "sync")]
    pub mode: Mode,
    /// Outstanding requests per sender in async mode.
    #[arg(long, default_value_t = 16)]
    pub in_flight: usize,
    /// Send messages without the `UNIQ_KEY` property (the client-side message id) that every
    /// RocketMQ client sets on each message, and that the broker indexes.
    #[arg(long)]
    pub no_uniq_key: bool,
    /// produce: each message a timer message (5.x's `TIMER_DELIVER_MS`) due this many ms
    /// after its send, spread over `--deliver-window` (single sends only: a broker does not
    /// look at the properties of a batch's messages).
    #[arg(long, value_name = "MS")]
    pub deliver_after: Option<u64>,
    /// produce: with `--deliver-after`, the due times spread evenly over this many ms more.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 0,
        requires = "deliver_after"
    )]
    pub deliver_window: u64,
    /// Expected broker flush mode; checked against GET_BROKER_CONFIG's flushDiskType.
    #[arg(long, value_enum)]
    pub flush: Option<Flush>,
    /// Run time in seconds (the warm-up included).
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Stop after this many messages (sent, or consumed), whichever of this and
    /// `--duration` comes first.
    #[arg(long)]
    pub messages: Option<u64>,
    /// Target send rate in messages per second over all senders (open loop).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Seconds at the start excluded from rates and percentiles.
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Consume from each queue's first or last offset.
    #[arg(long, value_enum, default_value = "first")]
    pub from: From,
    /// Consumer group named in the pulls.
    #[arg(long, default_value = "BenchmarkConsumer")]
    pub group: String,
    /// produce: one message in N gets the tag `hit` and the property `hit=1`, the others the
    /// tag `miss` and `hit=0` (what `--subscription hit` and `--sql "hit = 1"` select).
    #[arg(long, value_name = "N")]
    pub hit_one_in: Option<u64>,
    /// consume: the tag expression the pulls carry.
    #[arg(long, default_value = "*", conflicts_with = "sql")]
    pub subscription: String,
    /// consume: an SQL92 selector the pulls carry instead of a tag expression (the broker
    /// needs `enablePropertyFilter=true`).
    #[arg(long, value_name = "EXPRESSION")]
    pub sql: Option<String>,
    /// consume: stop once every queue is read up to its max offset at the start.
    #[arg(long)]
    pub drain: bool,
    /// Messages per pull.
    #[arg(long, default_value_t = 32)]
    pub pull_batch: i32,
    /// Each pull also commits the group's offset of its queue (the commit bit and
    /// `commitOffset` of PULL_MESSAGE, as Java's push consumer sends them).
    #[arg(long)]
    pub commit_offsets: bool,
    /// e2e: seconds the consumer may take to catch up after the producer stopped.
    #[arg(long, default_value_t = 10.0)]
    pub catch_up: f64,
    /// Request time limit in milliseconds.
    #[arg(long, default_value_t = 3000)]
    pub timeout_ms: u64,
    /// Header serialization: json or rocketmq.
    #[arg(long, default_value = "json")]
    pub serialize: String,
    /// Access key that signs every request, for brokers with `aclEnable=true`.
    #[arg(long, value_name = "KEY", requires = "secret_key")]
    pub access_key: Option<String>,
    /// Secret key of `--access-key`.
    #[arg(long, value_name = "KEY", requires = "access_key")]
    pub secret_key: Option<String>,
    /// Connections opened before the run and held idle through it, each answering one
    /// request before and one after (a connection-load test, with `--threads` senders over
    /// `--connections`).
    #[arg(long, default_value_t = 0)]
    pub idle_connections: usize,
    /// The server's process id, to report its resident memory around `--idle-connections`
    /// (this machine only).
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Speak TLS to name servers and brokers (Java's `-Dtls.enable=true`), checking no
    /// certificate, as Java's client by default.
    #[arg(long)]
    pub tls: bool,
    /// Write the report and run metadata as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the latency percentile curves and the latency over time (p50, p99 and max per
    /// 100 ms) as SVG to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// Which workload runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Send only.
    Produce,
    /// Pull only.
    Consume,
    /// Both, with end-to-end latency.
    E2e,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Produce => "produce",
            Workload::Consume => "consume",
            Workload::E2e => "e2e",
        }
    }
}

/// Wall-clock nanoseconds of an `Instant`, anchored once per process so that intended send
/// times (in the future or past) map too.
pub fn wall_ns(at: Instant) -> u64 {
    static ANCHOR: OnceLock<(Instant, u64)> = OnceLock::new();
    let (instant, wall) = *ANCHOR.get_or_init(|| {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        (Instant::now(), wall)
    });
    if at >= instant {
        wall.saturating_add(u64::try_from((at - instant).as_nanos()).unwrap_or(u64::MAX))
    } else {
        wall.saturating_sub(u64::try_from((instant - at).as_nanos()).unwrap_or(u64::MAX))
    }
}

/// A broker of the run: its place in the route, its connections and what it said about
/// itself.
#[derive(Debug)]
pub struct Target {
    /// Name, address and queue counts.
    pub broker: Broker,
    /// `--connections` connections for the load.
    pub connections: Vec<RemotingClient>,
    /// One more for administrative requests.
    pub admin: RemotingClient,
    /// GET_BROKER_CONFIG's answer.
    pub info: BrokerInfo,
}

/// Runs a workload.
///
/// # Errors
/// Setup failures: bad options, no route, cannot connect, cannot write the output files.
pub fn run(workload: Workload, args: &MqArgs) -> anyhow::Result<()> {
    check_args(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers.max(1))
        .enable_all()
        .build()?;
    let started_wall = SystemTime::now();
    let outcome = runtime.block_on(run_async(workload, args))?;
    let text = report::text(workload, args, &outcome);
    print!("{text}");
    if let Some(path) = &args.json {
        let json = report::json(workload, args, &outcome, started_wall);
        let pretty = serde_json::to_string_pretty(&json)?;
        std::fs::write(path, pretty + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        std::fs::write(path, report::plot(workload, args, &outcome))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn check_args(args: &MqArgs) -> anyhow::Result<()> {
    if args.namesrv.is_none() && args.broker.is_none() {
        bail!("give a name server (-n ADDR) or a broker (--broker ADDR)");
    }
    if args.connections == 0 || args.threads == 0 || args.batch == 0 || args.in_flight == 0 {
        bail!("--connections, --threads, --batch and --in-flight must be at least 1");
    }
    if args.queues <= 0 || args.pull_batch <= 0 {
        bail!("--queues and --pull-batch must be at least 1");
    }
    if !(args.duration > 0.0 && args.duration.is_finite()) {
        bail!("--duration must be a positive number of seconds");
    }
    if !(args.warmup >= 0.0 && args.warmup < args.duration) {
        bail!("--warmup must be at least 0 and below --duration");
    }
    if args.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        bail!("--rate must be positive");
    }
    if args.catch_up < 0.0 || !args.catch_up.is_finite() {
        bail!("--catch-up must be at least 0");
    }
    Ok(())
}

/// Everything the report needs.
#[derive(Debug)]
pub struct Outcome {
    /// The brokers of the run.
    pub targets: Vec<(Broker, BrokerInfo)>,
    /// Produce side, if it ran.
    pub produce: Option<stats::Summary>,
    /// Consume side, if it ran.
    pub consume: Option<stats::Summary>,
    /// Messages the brokers stored during the run (max offset sums after − before).
    pub stored: Option<i64>,
    /// Warnings to repeat in the report.
    pub warnings: Vec<String>,
    /// What `--idle-connections` saw.
    pub idle: Option<idle::IdleReport>,
}

async fn run_async(workload: Workload, args: &MqArgs) -> anyhow::Result<Outcome> {
    if args.idle_connections > 0 {
        ferromq_uring::net::raise_open_files_limit();
    }
    let serialize_type = match args.serialize.as_str() {
        "json" => SerializeType::Json,
        "rocketmq" => SerializeType::RocketMq,
        other => bail!("--serialize must be json or rocketmq, not {other}"),
    };
    let credentials = match (&args.access_key, &args.secret_key) {
        (Some(access_key), Some(secret_key)) => Some(Credentials::new(access_key, secret_key)),
        _ => None,
    };
    let config = ClientConfig {
        serialize_type,
        credentials,
        tls: args.tls.then(ferromq::client::tls::TlsClient::insecure),
        ..ClientConfig::default()
    };
    let brokers = resolve_brokers(args, &config).await?;
    let mut targets = Vec::new();
    let mut warnings = Vec::new();
    for broker in brokers {
        let admin = target::connect(broker.addr, &config).await?;
        let info = target::broker_info(&admin).await;
        if let (Some(expected), Some(actual)) = (args.flush, info.flush_disk_type.as_deref()) {
            let expected_name = match expected {
                Flush::Sync => "SYNC_FLUSH",
                Flush::Async => "ASYNC_FLUSH",
            };
            if actual != expected_name {
                let warning = format!(
                    "broker {} ({}) runs {actual}, the run expects {expected_name}",
                    broker.name, broker.addr
                );
                eprintln!("warning: {warning}");
                warnings.push(warning);
            }
        }
        let mut connections = Vec::new();
        for _ in 0..args.connections {
            connections.push(target::connect(broker.addr, &config).await?);
        }
        targets.push(Target {
            broker,
            connections,
            admin,
            info,
        });
    }
    let idle = match args.idle_connections {
        0 => None,
        count => {
            let opened = idle::open(&targets, count, &config, &args.topic, args.server_pid);
            Some(opened.await?)
        }
    };
    let targets = Arc::new(targets);
    let admin_view: Vec<(Broker, RemotingClient)> = targets
        .iter()
        .map(|t| (t.broker.clone(), t.admin.clone()))
        .collect();
    let before = if workload == Workload::Consume {
        None
    } else {
        Some(target::total_max_offset(&admin_view, &args.topic).await?)
    };

    let start = Instant::now();
    let measure_from = start + Duration::from_secs_f64(args.warmup);
    let deadline = start + Duration::from_secs_f64(args.duration);
    let clock = WindowClock::new(start, run_span(args));
    let stop_progress = Arc::new(tokio::sync::Notify::new());
    let produce_side = (workload != Workload::Consume).then(|| {
        let latency_of = if args.mode == Mode::Oneway {
            stats::ONEWAY
        } else {
            "send → answer, per request"
        };
        stats::Side::new("produce", latency_of, measure_from, clock)
    });
    let consume_side = (workload != Workload::Produce).then(|| {
        let latency_of = if workload == Workload::E2e {
            "end to end: body send time (ns) → received, per message"
        } else {
            "pull request → answer with messages, per pull"
        };
        stats::Side::new("consume", latency_of, measure_from, clock)
    });
    let sides: Vec<_> = produce_side.iter().chain(&consume_side).cloned().collect();
    let progress = tokio::spawn(stats::progress(sides, start, stop_progress.clone()));

    let (stop_consume, stop_rx) = tokio::sync::watch::channel(false);
    let consumer = match &consume_side {
        Some(side) => {
            let plan = consume::plan(&targets, args, workload).await?;
            let consume_deadline = if workload == Workload::E2e {
                // The producer's end decides; the catch-up time bounds it.
                deadline + Duration::from_secs_f64(args.catch_up)
            } else {
                deadline
            };
            Some(tokio::spawn(consume::run(
                targets.clone(),
                args.clone(),
                plan,
                side.clone(),
                consume_deadline,
                stop_rx,
                workload == Workload::E2e,
            )))
        }
        None => None,
    };
    if let Some(side) = &produce_side {
        produce::run(targets.clone(), args, side.clone(), start, deadline).await;
    }
    if let (Some(consumer), Some(consume_side)) = (consumer, &consume_side) {
        if let Some(produce_side) = &produce_side {
            // e2e: wait (bounded) for the consumer to catch up with what was produced.
            let expected = if args.mode == Mode::Oneway {
                produce_side.lock().sent_total
            } else {
                produce_side.lock().messages_total
            };
            let limit = Instant::now() + Duration::from_secs_f64(args.catch_up);
            while consume_side.lock().messages_total < expected && Instant::now() < limit {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let _ = stop_consume.send(true);
        }
        consumer.await.context("consumer task")?;
    }
    let end = Instant::now();
    stop_progress.notify_one();
    let idle = match idle {
        Some(idle) => Some(idle.check(&args.topic).await),
        None => None,
    };
    let _ = progress.await;

    let stored = match (before, &produce_side) {
        (Some(before), Some(side)) => {
            let expected = if args.mode == Mode::Oneway {
                side.lock().sent_total
            } else {
                side.lock().messages_total
            };
            Some(stored_since(&admin_view, &args.topic, before, expected).await?)
        }
        _ => None,
    };
    Ok(Outcome {
        targets: targets
            .iter()
            .map(|t| (t.broker.clone(), t.info.clone()))
            .collect(),
        produce: produce_side.map(|s| s.summary(end)),
        consume: consume_side.map(|s| s.summary(end)),
        stored,
        warnings,
        idle,
    })
}

/// The longest a run's samples may come after its start: the senders stop at `--duration`,
/// their last answers come within `--timeout-ms`, and an e2e consumer catches up for at most
/// `--catch-up` after that. A second more for the steps between.
fn run_span(args: &MqArgs) -> Duration {
    Duration::from_secs_f64(args.duration + args.catch_up)
        + Duration::from_millis(args.timeout_ms)
        + Duration::from_secs(1)
}

/// Messages stored since `before`, polled until `expected` is reached or the sum stops
/// growing for a second (oneway sends may still be in the broker's socket buffers).
async fn stored_since(
    brokers: &[(Broker, RemotingClient)],
    topic: &str,
    before: i64,
    expected: u64,
) -> anyhow::Result<i64> {
    let limit = Instant::now() + Duration::from_secs(10);
    let mut last = -1;
    let mut last_change = Instant::now();
    loop {
        let stored = target::total_max_offset(brokers, topic).await? - before;
        if u64::try_from(stored).is_ok_and(|s| s >= expected) || Instant::now() > limit {
            return Ok(stored);
        }
        if stored != last {
            last = stored;
            last_change = Instant::now();
        } else if last_change.elapsed() > Duration::from_secs(1) {
            return Ok(stored);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn resolve_brokers(args: &MqArgs, config: &ClientConfig) -> anyhow::Result<Vec<Broker>> {
    if let Some(addr) = args.broker {
        let client = target::connect(addr, config).await?;
        if args.create_topic {
            target::create_topic(&client, &args.topic, args.queues).await?;
        }
        let info = target::broker_info(&client).await;
        return Ok(vec![Broker {
            name: info.broker_name.unwrap_or_else(|| addr.to_string()),
            addr,
            write_queues: args.queues,
            read_queues: args.queues,
        }]);
    }
    let Some(namesrv_addr) = args.namesrv else {
        bail!("give a name server (-n ADDR) or a broker (--broker ADDR)");
    };
    let namesrv = target::connect(namesrv_addr, config).await?;
    if args.create_topic {
        // A broker that just started may not have registered yet: wait for one (bounded).
        let limit = Instant::now() + Duration::from_secs(30);
        let masters = loop {
            let masters = target::cluster_masters(&namesrv).await?;
            if !masters.is_empty() {
                break masters;
            }
            if Instant::now() > limit {
                bail!("the name server at {namesrv_addr} knows no master broker after 30 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // The queues just created, without waiting for the brokers' next registration
        // to reach the name server's route.
        let mut brokers = Vec::new();
        for (name, addr) in masters {
            let client = target::connect(addr, config).await?;
            target::create_topic(&client, &args.topic, args.queues)
                .await
                .with_context(|| format!("creating {} on {addr}", args.topic))?;
            brokers.push(Broker {
                name,
                addr,
                write_queues: args.queues,
                read_queues: args.queues,
            });
        }
        return Ok(brokers);
    }
    match target::route(&namesrv, &args.topic).await? {
        Some(route) => target::masters(&route),
        None => bail!(
            "topic {} has no route on {namesrv_addr}; pass --create-topic",
            args.topic
        ),
    }
}
