//! `ferromq-bench`: load generators for RocketMQ-protocol servers, with honest percentiles.
//!
//! Workloads (one subcommand each):
//! - `produce`, `consume`, `e2e`: load against any RocketMQ-protocol broker (by name server
//!   or broker address) at the protocol level, open or closed loop, with a report whose counts
//!   are checked against what the broker stored (`workloads::mq`).
//! - `route`: GET_ROUTEINFO_BY_TOPIC lookups against a name server, closed loop, for several
//!   connection counts in one run.
//! - `commitlog`: appends through the CommitLog writer's group commit on a real disk, for
//!   several flush modes, body sizes and producer counts in one run, next to the raw
//!   direct-I/O write bandwidth of the same disk measured in the same run.
//!
//! Each shows progress on stderr and prints a table; latencies come from hdrhistogram, so
//! tail percentiles (p50 to p99.99, and max) are exact to 3 significant digits. Each also
//! keeps its latency over time, count, p50, p99 and max per 100 ms (`workloads::timeline`),
//! for its JSON report and SVG chart, so that a stall shows at its time.

mod workloads;

/// The broker's allocator (see the `ferromq` binary), so that in-process store benchmarks
/// allocate as the broker does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use std::io::IsTerminal;

/// Benchmarks for ferromq and any other RocketMQ-protocol server.
#[derive(Debug, Parser)]
#[command(name = "ferromq-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    workload: Workload,
}

#[derive(Debug, Subcommand)]
enum Workload {
    /// Send messages to a topic and report throughput and send latency.
    Produce(workloads::mq::MqArgs),
    /// Pull every queue of a topic and report throughput.
    Consume(workloads::mq::MqArgs),
    /// Produce and consume together; report end-to-end latency.
    E2e(workloads::mq::MqArgs),
    /// Route lookups per second against a name server, for each connection count.
    Route(workloads::route::RouteArgs),
    /// Appends per second through the CommitLog's group commit on a real disk, against the
    /// disk's raw direct-I/O write bandwidth.
    Commitlog(workloads::commitlog::CommitLogArgs),
}

fn main() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match Cli::parse().workload {
        Workload::Produce(args) => workloads::mq::run(workloads::mq::Workload::Produce, &args),
        Workload::Consume(args) => workloads::mq::run(workloads::mq::Workload::Consume, &args),
        Workload::E2e(args) => workloads::mq::run(workloads::mq::Workload::E2e, &args),
        Workload::Route(args) => workloads::route::run(&args),
        Workload::Commitlog(args) => workloads::commitlog::run(&args),
    }
}
