//! `commitlog`: appends per second through the CommitLog writer's group commit on a real disk,
//! set against the raw direct-I/O write bandwidth of the same disk, measured in the same run.
//!
//! First, two raw baselines on a fresh preallocated file in the store's directory:
//! - sequential: `--raw-block-kib` writes back to back (`--raw-depth` in flight), one
//!   fdatasync at the end, which is the most the disk takes;
//! - durable: `--raw-sync-kib` writes with `O_DSYNC`, `--raw-sync-depth` in flight, each
//!   durable when it completes, which is what a group commit under SYNC_FLUSH asks of the
//!   disk (the writer's jobs into new extents, two in flight, about half a MiB each under
//!   the judged load). It is the most the disk takes durably in that shape: the store's log
//!   MB/s is set against it too (`of durable`).
//!
//! Then, for every flush mode × body size × producer count, that many producers put messages,
//! each with `--in-flight` puts waiting for answers, for `--duration-secs`: on the writer's
//! shard, on a shard of their own, or half on each (`--producers-on`). As the broker's net
//! shards do, they hand their puts to the writer through a `PutCoalescer`: the puts of one
//! turn of their executor cross as one request (`--handoff each` sends each alone). The
//! writer loop (`run_group_commit`) batches whatever is waiting into one write and, under
//! SYNC_FLUSH, one fdatasync. Each case gets a new CommitLog in its own directory.
//!
//! With `--prefill on,off` each case also runs with the next segment created only when the
//! writer reaches it (no zero-fill ahead), and the on/off ratios close the table.
//!
//! The table shows appends/s, body MB/s (appends × body size, what producers get), log MB/s
//! (CommitLog bytes, record headers included), `ratio` = body MB/s ÷ raw sequential MB/s,
//! latency percentiles up to p99.99 and max, appends per fdatasync (the group commit at work)
//! and the CPU time of the writer's shard per append (`cpu us/app`; with `--producers-on
//! same` it includes the producers, as a net shard sharing the writer's core would, with
//! `both` half of them). MB is 10^6 bytes. Each raw baseline is the best of `--raw-repeat`
//! runs: the disk of a shared machine varies, and the best is the hardest figure to come
//! close to.
//!
//! Each case's latency over time (count, p50, p99 and max of the puts answered in each 100 ms,
//! `workloads::timeline`) goes into its JSON and, with `--plot`, into an SVG chart per case, so
//! that a put stalled behind a sync or a segment roll shows at its time.
//!
//! Every loop stops at a count and at a time limit. Data files live in a directory of this run
//! under `--dir` and are removed at the end, on error too.

use super::plot::Document;
use super::timeline::{Series, WindowClock, Windows};
use anyhow::{bail, ensure, Context};
use ferromq::store::commit_log::{CommitLog, PutMessage};
use ferromq::store::flush::{run_group_commit, FlushDiskType, PutRequest, JOBS_IN_FLIGHT_MAX};
use ferromq::store::prefill::{fill_dir_of, CommitLogDirectory, SegmentOptions};
use ferromq::store::put_coalescer::PutCoalescer;
use futures::channel::{mpsc, oneshot};
use futures::SinkExt;
use glommio::io::{DmaFile, OpenOptions};
use hdrhistogram::Histogram;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Options of the `commitlog` workload.
#[derive(Debug, clap::Args)]
pub struct CommitLogArgs {
    /// Directory on the disk to measure; not tmpfs, which has no O_DIRECT. A directory for
    /// this run is created inside it and removed at the end.
    #[arg(long, default_value = "target/bench-commitlog")]
    dir: PathBuf,
    /// Comma-separated producer counts (concurrent writers), each measured in turn.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    producers: Vec<usize>,
    /// Puts each producer keeps in flight (1: send and wait, like a synchronous producer;
    /// more: pipelined, like asynchronous sends on one connection).
    #[arg(long, default_value_t = 1)]
    in_flight: usize,
    /// Messages per put: 1 sends one message at a time; more sends batches, stored whole as
    /// Java stores SEND_BATCH_MESSAGE (appends/s counts messages, latency is per batch). The
    /// acceptance target is about single messages, so with batches it is reported, not judged.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Where the producers run: on the writer's executor (`same`, as the connections of the
    /// net shard that shares the writer's core) or on an executor of their own pinned to the
    /// last CPU (`other`: every put crosses shards).
    #[arg(long, value_enum, default_value = "same")]
    producers_on: ProducersOn,
    /// How single puts reach the writer: gathered per turn of the producers' executor into
    /// one request (`coalesced`: the store's `PutCoalescer`, as the broker's net shards send),
    /// or each as a request of its own (`each`). Batches (`--batch` above 1) always go as
    /// they are.
    #[arg(long, value_enum, default_value = "coalesced")]
    handoff: Handoff,
    /// Comma-separated body sizes in bytes, each measured in turn.
    #[arg(
        long = "sizes",
        alias = "body-size",
        value_delimiter = ',',
        default_value = "128,1024,16384"
    )]
    body_sizes: Vec<usize>,
    /// Comma-separated: `on` (under SYNC_FLUSH the next segment is zero-filled ahead of the
    /// writer, as the broker runs) and/or `off` (segments are created when the writer reaches
    /// them). With both, each case runs twice and the table ends with the on/off ratios.
    #[arg(long, value_delimiter = ',', default_value = "on")]
    prefill: Vec<Prefill>,
    /// Comma-separated flush modes: `sync` (SYNC_FLUSH) and/or `async` (ASYNC_FLUSH).
    #[arg(long, value_delimiter = ',', default_value = "sync,async")]
    flush: Vec<FlushMode>,
    /// `flushIntervalCommitLog` under ASYNC_FLUSH, in milliseconds.
    #[arg(long, default_value_t = 500)]
    flush_interval_ms: u64,
    /// Measured seconds per case; also the time limit of each raw baseline.
    #[arg(long, visible_alias = "seconds", default_value_t = 3)]
    duration_secs: u64,
    /// Most appends per case: the run of a case ends at this count or at its time limit.
    #[arg(long, default_value_t = 5_000_000)]
    appends_max: u64,
    /// CommitLog segment size in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    segment_size: u64,
    /// Size of each raw baseline's file in MiB, which bounds how much it writes.
    #[arg(long, default_value_t = 512)]
    raw_file_mib: u64,
    /// Write size of the sequential raw baseline, in KiB.
    #[arg(long, default_value_t = 1024)]
    raw_block_kib: u64,
    /// Writes in flight in the sequential raw baseline.
    #[arg(long, default_value_t = 1)]
    raw_depth: usize,
    /// Times each raw baseline is measured; the best is kept (the disk's speed varies from
    /// second to second on shared machines, and the best is the hardest to come close to).
    #[arg(long, default_value_t = 3)]
    raw_repeat: usize,
    /// Write size of the durable (`O_DSYNC`) raw baseline, in KiB.
    #[arg(long, default_value_t = 512)]
    raw_sync_kib: u64,
    /// Writes in flight in the durable raw baseline (the writer's jobs in flight, at most).
    #[arg(long, default_value_t = JOBS_IN_FLIGHT_MAX)]
    raw_sync_depth: usize,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write each case's latency over time (p50, p99 and max per 100 ms) as SVG to this file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

/// A `--producers-on` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ProducersOn {
    /// The writer's executor.
    Same,
    /// An executor of their own.
    Other,
    /// Half on the writer's executor and half on one of their own, as the broker's default
    /// layout on two cores puts a net shard on each core, the writer beside one of them.
    Both,
}

/// A `--handoff` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Handoff {
    /// One request per put.
    Each,
    /// The puts of one turn of the producers' executor in one request.
    Coalesced,
}

/// A `--prefill` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Prefill {
    /// Zero-fill the next segment ahead of the writer.
    On,
    /// Create each segment when the writer reaches it.
    Off,
}

impl Prefill {
    fn name(self) -> &'static str {
        match self {
            Prefill::On => "on",
            Prefill::Off => "off",
        }
    }
}

/// A `--flush` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum FlushMode {
    /// SYNC_FLUSH: a put is answered after the fdatasync that covers it.
    Sync,
    /// ASYNC_FLUSH: a put is answered after its write; fdatasync every interval.
    Async,
}

impl FlushMode {
    fn name(self) -> &'static str {
        match self {
            FlushMode::Sync => "sync",
            FlushMode::Async => "async",
        }
    }
}

/// The case the acceptance target is about, and the target.
const TARGET_FLUSH: FlushMode = FlushMode::Sync;
const TARGET_BODY_SIZE: usize = 1024;
const TARGET_PRODUCERS: usize = 64;
const TARGET_RATIO_MIN: f64 = 0.60;

/// Bytes per MiB and per KiB, for the flags given in those units.
const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

/// The longest a case's CommitLog may take to open before its producers start, and its last
/// answers may take after their time is up: with the time limit, the span of its windows.
const CASE_SETUP_MAX: Duration = Duration::from_secs(10);

/// Capacity of the put channel into the writer, as in the broker.
const PUT_CHANNEL_CAPACITY: usize = 4096;

/// How one raw baseline writes.
#[derive(Clone, Copy, Debug)]
enum RawPattern {
    /// Writes back to back, `depth` in flight, one fdatasync at the end.
    Sequential { block_bytes: u64, depth: usize },
    /// Writes with `O_DSYNC` (each durable when it completes), `depth` in flight.
    Durable { block_bytes: u64, depth: usize },
}

/// The outcome of one raw baseline.
#[derive(Debug)]
struct RawBandwidth {
    pattern: RawPattern,
    bytes: u64,
    syncs: u64,
    elapsed: Duration,
}

impl RawBandwidth {
    fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64() / 1e6
    }
}

/// What one case measures.
#[derive(Clone, Copy, Debug)]
struct CasePlan {
    prefill: Prefill,
    flush: FlushMode,
    body_size: usize,
    producers: usize,
}

/// The outcome of one case.
#[derive(Debug)]
struct Case {
    plan: CasePlan,
    appends: u64,
    log_bytes: u64,
    syncs: u64,
    elapsed: Duration,
    latency_us: Histogram<u64>,
    /// The latencies per 100 ms, from the start of the case.
    timeline: Series,
    /// CPU time of the writer's shard (with `--producers-on same`, the producers' too; with
    /// `both`, half of them).
    writer_cpu: Duration,
    /// CPU time of the producers' shard, when they have one.
    producer_cpu: Option<Duration>,
}

/// CPU time the calling thread has used.
fn thread_cpu_time() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

impl Case {
    /// CPU microseconds per append on the writer's shard.
    fn writer_cpu_us_per_append(&self) -> f64 {
        self.cpu_us_per_append(self.writer_cpu)
    }

    /// `cpu` in microseconds per append of this case.
    fn cpu_us_per_append(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() * 1e6 / self.appends.max(1) as f64
    }

    fn appends_per_sec(&self) -> f64 {
        self.appends as f64 / self.elapsed.as_secs_f64()
    }

    fn body_mb_per_sec(&self) -> f64 {
        self.appends_per_sec() * self.plan.body_size as f64 / 1e6
    }

    fn log_mb_per_sec(&self) -> f64 {
        self.log_bytes as f64 / self.elapsed.as_secs_f64() / 1e6
    }
}

/// Runs the workload.
///
/// # Errors
/// Bad flags, and setup or I/O failures (the directory is on tmpfs, io_uring is unavailable,
/// a write or fdatasync fails).
pub fn run(args: &CommitLogArgs) -> anyhow::Result<()> {
    check_args(args)?;
    let run_dir = RunDir::create(&args.dir)?;
    let time_limit = Duration::from_secs(args.duration_secs);
    let raw_file_bytes = args.raw_file_mib * MIB;
    println!(
        "commitlog appends on {} ({} MiB segments, {} s per case, {} in flight per producer, \
         {} messages per put, handoff {:?})",
        run_dir.path.display(),
        args.segment_size / MIB,
        args.duration_secs,
        args.in_flight,
        args.batch,
        args.handoff
    );

    let patterns = [
        RawPattern::Sequential {
            block_bytes: args.raw_block_kib * KIB,
            depth: args.raw_depth,
        },
        RawPattern::Durable {
            block_bytes: args.raw_sync_kib * KIB,
            depth: args.raw_sync_depth,
        },
    ];
    let mut raws = Vec::new();
    for pattern in patterns {
        let mut best: Option<RawBandwidth> = None;
        for attempt in 1..=args.raw_repeat {
            eprintln!(
                "raw {attempt}/{}: {} ...",
                args.raw_repeat,
                describe_raw(pattern, raw_file_bytes)
            );
            let raw = measure_raw(
                run_dir.path.join("raw-write"),
                raw_file_bytes,
                pattern,
                time_limit,
            )?;
            if best
                .as_ref()
                .is_none_or(|b| raw.mb_per_sec() > b.mb_per_sec())
            {
                best = Some(raw);
            }
        }
        let raw = best.context("--raw-repeat is positive")?;
        print_raw(&raw, raw_file_bytes, args.raw_repeat);
        raws.push(raw);
    }
    let raw_mb_per_sec = raws[0].mb_per_sec();

    let plans: Vec<CasePlan> = args
        .flush
        .iter()
        .flat_map(|&flush| {
            args.body_sizes.iter().flat_map(move |&body_size| {
                args.producers.iter().flat_map(move |&producers| {
                    args.prefill.iter().map(move |&prefill| CasePlan {
                        prefill,
                        flush,
                        body_size,
                        producers,
                    })
                })
            })
        })
        .collect();
    println!();
    print_case_header();
    let mut cases = Vec::new();
    for (index, &plan) in plans.iter().enumerate() {
        eprintln!(
            "case {}/{}: {} flush, {} B bodies, {} producers, prefill {} ...",
            index + 1,
            plans.len(),
            plan.flush.name(),
            plan.body_size,
            plan.producers,
            plan.prefill.name()
        );
        let dir = run_dir.path.join(format!(
            "{}-{}-{}-{}",
            plan.flush.name(),
            plan.body_size,
            plan.producers,
            plan.prefill.name()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let case = measure_case(dir.clone(), plan, args)?;
        for dir in [dir.clone(), fill_dir_of(&dir)] {
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("removing {}", dir.display()))?;
            }
        }
        print_case(&case, raw_mb_per_sec);
        cases.push(case);
    }
    print_prefill_ratios(&cases);
    println!();
    print_target(&cases, &raws, args.batch);
    if let Some(path) = &args.json {
        write_json(path, args, &raws, &cases)?;
    }
    if let Some(path) = &args.plot {
        std::fs::write(path, plot(&cases))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    run_dir.remove()
}

fn check_args(args: &CommitLogArgs) -> anyhow::Result<()> {
    ensure!(!args.flush.is_empty(), "--flush needs at least one mode");
    ensure!(
        !args.body_sizes.is_empty(),
        "--sizes needs at least one size"
    );
    ensure!(
        !args.producers.is_empty(),
        "--producers needs at least one count"
    );
    ensure!(
        args.producers.iter().all(|&p| p > 0) && args.in_flight > 0 && args.batch > 0,
        "--producers counts, --in-flight and --batch must be positive"
    );
    ensure!(args.duration_secs > 0, "--duration-secs must be positive");
    ensure!(
        args.raw_depth > 0 && args.raw_sync_depth > 0,
        "--raw-depth and --raw-sync-depth must be positive"
    );
    ensure!(args.raw_repeat > 0, "--raw-repeat must be positive");
    ensure!(
        args.flush_interval_ms > 0,
        "--flush-interval-ms must be positive"
    );
    for (flag, kib) in [
        ("--raw-block-kib", args.raw_block_kib),
        ("--raw-sync-kib", args.raw_sync_kib),
    ] {
        // Direct I/O wants writes aligned to the logical block size, at most 4 KiB.
        ensure!(
            kib > 0 && kib % 4 == 0,
            "{flag} must be a positive multiple of 4"
        );
        ensure!(
            kib * KIB <= args.raw_file_mib * MIB,
            "{flag} must not exceed --raw-file-mib"
        );
    }
    Ok(())
}

/// This run's directory under `--dir`, removed when dropped if [`RunDir::remove`] was not
/// reached (an error or a panic), so that no data files are left behind.
#[derive(Debug)]
struct RunDir {
    path: PathBuf,
    /// `--dir` itself, when this run created it.
    created_parent: Option<PathBuf>,
    removed: bool,
}

impl RunDir {
    fn create(parent: &Path) -> anyhow::Result<RunDir> {
        let created_parent = (!parent.exists()).then(|| parent.to_owned());
        let path = parent.join(format!("ferromq-bench-commitlog-{}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(RunDir {
            path,
            created_parent,
            removed: false,
        })
    }

    fn remove(mut self) -> anyhow::Result<()> {
        self.removed = true;
        std::fs::remove_dir_all(&self.path)
            .with_context(|| format!("removing {}", self.path.display()))?;
        if let Some(parent) = &self.created_parent {
            // Only if empty: something else may have been put there meanwhile.
            let _ = std::fs::remove_dir(parent);
        }
        Ok(())
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        if let Err(error) = std::fs::remove_dir_all(&self.path) {
            eprintln!("could not remove {}: {error}", self.path.display());
        }
        if let Some(parent) = &self.created_parent {
            // Only if empty: something else may have been put there meanwhile.
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// Measures one raw baseline on a new file at `path`, removed afterwards.
///
/// The file is set up as the store sets up a segment: created with its length and a written
/// first block, then opened with O_DIRECT and preallocated. It is written from offset 0 until
/// it is full or `time_limit` has passed; the time includes the final fdatasync.
fn measure_raw(
    path: PathBuf,
    file_size_bytes: u64,
    pattern: RawPattern,
    time_limit: Duration,
) -> anyhow::Result<RawBandwidth> {
    ferromq_uring::file::create_with_first_block(&path, file_size_bytes)
        .with_context(|| format!("creating {}", path.display()))?;
    let task_path = path.clone();
    let outcome = glommio::LocalExecutorBuilder::default()
        .name("bench-raw")
        .spawn(move || async move {
            let path = task_path;
            let flags = match pattern {
                RawPattern::Sequential { .. } => 0,
                RawPattern::Durable { .. } => {
                    i32::try_from(rustix::fs::OFlags::DSYNC.bits()).context("O_DSYNC fits i32")?
                }
            };
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(flags)
                .dma_open(&path)
                .await
                .map_err(std::io::Error::from)
                .with_context(|| format!("opening {} with O_DIRECT", path.display()))?;
            file.pre_allocate(file_size_bytes, false)
                .await
                .map_err(std::io::Error::from)
                .with_context(|| format!("preallocating {}", path.display()))?;
            let written = write_raw(&file, &path, file_size_bytes, pattern, time_limit).await;
            let closed = file
                .close()
                .await
                .map_err(std::io::Error::from)
                .with_context(|| format!("closing {}", path.display()));
            let raw = written?;
            closed?;
            Ok(raw)
        })
        .map_err(|e| anyhow::anyhow!("starting the raw-write shard (io_uring): {e}"))?
        .join()
        .map_err(|e| anyhow::anyhow!("raw-write shard failed: {e:?}"))?;
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    outcome
}

async fn write_raw(
    file: &DmaFile,
    path: &Path,
    file_size_bytes: u64,
    pattern: RawPattern,
    time_limit: Duration,
) -> anyhow::Result<RawBandwidth> {
    let (RawPattern::Sequential { block_bytes, depth }
    | RawPattern::Durable { block_bytes, depth }) = pattern;
    ensure!(
        block_bytes % file.alignment() == 0,
        "write size {block_bytes} is not a multiple of the O_DIRECT alignment {} of {}",
        file.alignment(),
        path.display()
    );
    let block_len = usize::try_from(block_bytes).context("write size fits memory")?;
    let mut buffer = file.alloc_dma_buffer(block_len);
    // The same bytes as the store's bodies, so a compressing device treats both alike.
    buffer.as_bytes_mut().fill(b'x');
    let buffer = Rc::new(buffer);
    let blocks = file_size_bytes / block_bytes;
    let next_block = Cell::new(0u64);
    let syncs = Cell::new(0u64);
    let started = Instant::now();
    let deadline = started + time_limit;
    // Each writer takes the next block until the file is full or time is up.
    let writer = || async {
        loop {
            let block = next_block.get();
            if block >= blocks || Instant::now() >= deadline {
                return anyhow::Ok(());
            }
            next_block.set(block + 1);
            let offset = block * block_bytes;
            let written = file
                .write_rc_at(buffer.clone(), offset)
                .await
                .map_err(std::io::Error::from)
                .with_context(|| format!("writing {} at {offset}", path.display()))?;
            ensure!(
                written == block_len,
                "short write to {} at {offset}: {written} of {block_len} bytes",
                path.display()
            );
        }
    };
    futures::future::try_join_all((0..depth).map(|_| writer())).await?;
    if let RawPattern::Sequential { .. } = pattern {
        sync_raw(file, path).await?;
        syncs.set(syncs.get() + 1);
    }
    Ok(RawBandwidth {
        pattern,
        bytes: next_block.get() * block_bytes,
        syncs: syncs.get(),
        elapsed: started.elapsed(),
    })
}

async fn sync_raw(file: &DmaFile, path: &Path) -> anyhow::Result<()> {
    file.fdatasync()
        .await
        .map_err(std::io::Error::from)
        .with_context(|| format!("fdatasync of {}", path.display()))
}

/// Runs one case on a new CommitLog in `dir`: the writer loop on an executor pinned to CPU 0
/// (the writer shard), the producers on the same executor or on one pinned to the last CPU.
fn measure_case(dir: PathBuf, plan: CasePlan, args: &CommitLogArgs) -> anyhow::Result<Case> {
    let mode = match plan.flush {
        FlushMode::Sync => FlushDiskType::SyncFlush,
        FlushMode::Async => FlushDiskType::AsyncFlush {
            interval: Duration::from_millis(args.flush_interval_ms),
        },
    };
    let segment_size = args.segment_size;
    let time_limit = Duration::from_secs(args.duration_secs);
    // Opening the CommitLog comes before the producers start, and the last answers after
    // their time is up.
    let clock = WindowClock::new(Instant::now(), time_limit + CASE_SETUP_MAX);
    let (sender, receiver) = mpsc::channel::<PutRequest>(PUT_CHANNEL_CAPACITY);
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let producer_args = ProducerArgs {
        handoff: args.handoff,
        time_limit,
        clock,
        appends_max: args.appends_max,
        in_flight: args.in_flight,
        batch: args.batch,
        first: 0,
        producers: plan.producers,
    };
    // Producers beside the writer, and on a shard of their own.
    let (local_producers, remote_producers) = match args.producers_on {
        ProducersOn::Same => (plan.producers, 0),
        ProducersOn::Other => (0, plan.producers),
        ProducersOn::Both => (plan.producers.div_ceil(2), plan.producers / 2),
    };
    let local_args = producer_args.share(0, local_producers, plan.producers);
    let remote_args = producer_args.share(local_producers, remote_producers, plan.producers);
    let mut local_sender = Some(sender.clone()).filter(|_| local_producers > 0);
    let writer = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(0))
        .name("bench-writer")
        .spawn(move || async move {
            // As the runtime does for a pinned shard: the writes that block run on io-wq
            // workers on the other CPUs, not on the writer's.
            ferromq_uring::workers::keep_io_workers_off(0)
                .context("moving the writer's io-wq workers off CPU 0")?;
            let cpu_start = thread_cpu_time();
            // As the broker opens them; `--prefill off` turns the fill off.
            let mut options = SegmentOptions::for_flush(mode);
            options.prefill &= plan.prefill == Prefill::On;
            let opener = CommitLogDirectory::new(dir, options);
            let log = CommitLog::open(opener, segment_size, 0, HashMap::new())
                .await
                .context("opening the CommitLog")?;
            let clock = || {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                i64::try_from(now.unwrap_or_default().as_millis()).unwrap_or(i64::MAX)
            };
            let writer = glommio::spawn_local(run_group_commit(log, receiver, mode, clock));
            let produced = match local_sender.take() {
                Some(sender) => Some(run_producers(plan, local_args, sender).await),
                None => None,
            };
            let (log, stats) = writer.await;
            let cpu = thread_cpu_time().saturating_sub(cpu_start);
            anyhow::Ok((log.write_offset(), stats.syncs, produced, cpu))
        })
        .map_err(|e| anyhow::anyhow!("starting the writer shard (io_uring): {e}"))?;
    let remote = if remote_producers == 0 {
        drop(sender);
        None
    } else {
        let producers = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(cpus - 1))
            .name("bench-producers")
            .spawn(move || async move {
                let cpu_start = thread_cpu_time();
                let produced = run_producers(plan, remote_args, sender).await;
                (produced, thread_cpu_time().saturating_sub(cpu_start))
            })
            .map_err(|e| anyhow::anyhow!("starting the producer shard: {e}"))?;
        Some(
            producers
                .join()
                .map_err(|e| anyhow::anyhow!("producer shard failed: {e:?}"))?,
        )
    };
    let (log_bytes, syncs, local, writer_cpu) = writer
        .join()
        .map_err(|e| anyhow::anyhow!("writer shard failed: {e:?}"))??;
    let (produced, producer_cpu) = match (local, remote) {
        (Some(produced), None) => (produced, None),
        (None, Some((produced, cpu))) => (produced, Some(cpu)),
        (Some(local), Some((remote, cpu))) => {
            let both = local.and_then(|local| local.merge(remote?));
            (both, Some(cpu))
        }
        (None, None) => bail!("no producers ran"),
    };
    let Produced {
        appends,
        started,
        elapsed,
        latency_us,
        windows,
    } = produced?;
    Ok(Case {
        plan,
        appends,
        log_bytes,
        syncs,
        elapsed,
        latency_us,
        timeline: windows.series(started, started + elapsed),
        writer_cpu,
        producer_cpu,
    })
}

/// How the producers of a case run.
#[derive(Clone, Copy, Debug)]
struct ProducerArgs {
    handoff: Handoff,
    time_limit: Duration,
    /// The windows of the case's latency over time.
    clock: WindowClock,
    appends_max: u64,
    in_flight: usize,
    batch: usize,
    /// The first producer of this shard, and how many there are.
    first: usize,
    producers: usize,
}

impl ProducerArgs {
    /// The share of `count` producers from `first` on, of `total`: their part of the appends.
    fn share(self, first: usize, count: usize, total: usize) -> ProducerArgs {
        let part = |n: u64| n * count as u64 / total.max(1) as u64;
        ProducerArgs {
            appends_max: part(self.appends_max),
            first,
            producers: count,
            ..self
        }
    }
}

/// What the producers of a shard did.
struct Produced {
    appends: u64,
    /// When they started, and how long they took from then.
    started: Instant,
    elapsed: Duration,
    latency_us: Histogram<u64>,
    windows: Windows,
}

impl Produced {
    /// Both shards' producers, run at the same time.
    fn merge(mut self, other: Produced) -> anyhow::Result<Produced> {
        self.latency_us.add(&other.latency_us)?;
        self.windows.merge(&other.windows);
        let started = self.started.min(other.started);
        let ended = (self.started + self.elapsed).max(other.started + other.elapsed);
        Ok(Produced {
            appends: self.appends + other.appends,
            started,
            elapsed: ended - started,
            latency_us: self.latency_us,
            windows: self.windows,
        })
    }
}

/// Queues the producers write, producer `i` to queue `i % QUEUES`.
const QUEUES: i32 = 8;

/// Runs the producers of a case until the time or count limit; returns the appends, the
/// time they took and their latency histogram. Dropping `sender` at the end stops the writer.
async fn run_producers(
    plan: CasePlan,
    limits: ProducerArgs,
    sender: mpsc::Sender<PutRequest>,
) -> anyhow::Result<Produced> {
    let histogram = Rc::new(RefCell::new(Histogram::<u64>::new_with_bounds(
        1, 60_000_000, 3,
    )?));
    // One executor: its tasks record into the windows directly, with no lock.
    let windows = Rc::new(RefCell::new(Windows::new(limits.clock)));
    let coalescer =
        (limits.handoff == Handoff::Coalesced).then(|| Rc::new(PutCoalescer::new(sender.clone())));
    let template = |queue_id| PutMessage {
        topic: "BenchTopic".into(),
        queue_id,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 0,
        born_host: "127.0.0.1:5000".parse().expect("literal address"),
        store_host: "127.0.0.1:10911".parse().expect("literal address"),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: vec![b'x'; plan.body_size],
        properties: Vec::new(),
    };
    // One message to copy per queue, shared by the producers that write it: a put copies a
    // body that is in cache, as a net shard copies one just read from its socket. (One per
    // task would have each put read 1 KiB from a different place in megabytes of copies.)
    let templates: Rc<[PutMessage]> = (0..QUEUES).map(template).collect();
    // Appends started across producers, so that the case stops at `appends_max`.
    let started_appends = Rc::new(Cell::new(0u64));
    let failure: Rc<RefCell<Option<String>>> = Rc::new(RefCell::new(None));
    let started = Instant::now();
    let deadline = started + limits.time_limit;
    let mut tasks = Vec::new();
    // Each producer is `in_flight` tasks sharing its queue: that many puts pending.
    for task in 0..limits.producers * limits.in_flight {
        let producer = limits.first + task / limits.in_flight;
        let mut sender = sender.clone();
        let histogram = histogram.clone();
        let windows = windows.clone();
        let started_appends = started_appends.clone();
        let failure = failure.clone();
        let coalescer = coalescer.clone();
        let templates = templates.clone();
        tasks.push(glommio::spawn_local(async move {
            let batch = limits.batch as u64;
            let template = &templates[producer % templates.len()];
            let mut appends = 0u64;
            // One clock read per put: the time an answer came is the next put's send time,
            // and each is checked against the time limit.
            let mut sent = Instant::now();
            loop {
                if sent >= deadline || started_appends.get() >= limits.appends_max {
                    break;
                }
                started_appends.set(started_appends.get() + batch);
                let answer = if let Some(coalescer) = coalescer.as_ref().filter(|_| batch == 1) {
                    Ok(coalescer.put(template.clone()).await.map(|_| ()))
                } else if batch == 1 {
                    let (reply, answer) = oneshot::channel();
                    let message = template.clone();
                    if sender
                        .send(PutRequest::One { message, reply })
                        .await
                        .is_err()
                    {
                        break;
                    }
                    answer.await.map(|stored| stored.map(|_| ()))
                } else {
                    let (reply, answer) = oneshot::channel();
                    let messages = vec![template.clone(); limits.batch];
                    if sender
                        .send(PutRequest::batch(messages, reply))
                        .await
                        .is_err()
                    {
                        break;
                    }
                    answer.await.map(|stored| stored.map(|_| ()))
                };
                match answer {
                    Ok(Ok(())) => {
                        let answered = Instant::now();
                        let waited = answered.duration_since(sent);
                        sent = answered;
                        let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
                        histogram.borrow_mut().saturating_record(micros.max(1));
                        windows.borrow_mut().record(answered, micros);
                        appends += batch;
                    }
                    Ok(Err(error)) => {
                        failure.borrow_mut().get_or_insert(error.to_string());
                        break;
                    }
                    Err(_) => {
                        failure
                            .borrow_mut()
                            .get_or_insert("the writer dropped a put".to_owned());
                        break;
                    }
                }
            }
            appends
        }));
    }
    drop(sender);
    drop(coalescer);
    let mut appends = 0;
    for task in tasks {
        appends += task.await;
    }
    let elapsed = started.elapsed();
    if let Some(failure) = failure.borrow_mut().take() {
        bail!("a put failed: {failure}");
    }
    let latency_us = histogram.borrow().clone();
    Ok(Produced {
        appends,
        started,
        elapsed,
        latency_us,
        windows: windows.replace(Windows::new(limits.clock)),
    })
}

fn describe_raw(pattern: RawPattern, file_size_bytes: u64) -> String {
    match pattern {
        RawPattern::Sequential { block_bytes, depth } => format!(
            "raw O_DIRECT sequential write: {} KiB blocks, {depth} in flight, {} MiB, \
             fdatasync at end",
            block_bytes / KIB,
            file_size_bytes / MIB
        ),
        RawPattern::Durable { block_bytes, depth } => format!(
            "raw O_DIRECT|O_DSYNC write: {} KiB blocks, {depth} in flight, each durable \
             (the group commit's shape), up to {} MiB",
            block_bytes / KIB,
            file_size_bytes / MIB
        ),
    }
}

fn print_raw(raw: &RawBandwidth, file_size_bytes: u64, repeat: usize) {
    let durability = match raw.pattern {
        RawPattern::Sequential { .. } => format!("fdatasyncs: {}", raw.syncs),
        RawPattern::Durable { block_bytes, .. } => {
            format!("durable writes: {}", raw.bytes / block_bytes)
        }
    };
    println!(
        "{} ... {:.1} MB/s, best of {repeat} ({} MiB in {:.2} s, {durability})",
        describe_raw(raw.pattern, file_size_bytes),
        raw.mb_per_sec(),
        raw.bytes / MIB,
        raw.elapsed.as_secs_f64(),
    );
}

fn print_case_header() {
    println!(
        "{:<5} {:>7} {:>6} {:>9} {:>10} {:>8} {:>8} {:>7} {:>8} {:>8} {:>9} {:>10} {:>8} {:>12} \
         {:>11}",
        "flush",
        "prefill",
        "size",
        "producers",
        "appends/s",
        "MB/s",
        "log MB/s",
        "ratio",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "p99.99 us",
        "max us",
        "appends/sync",
        "cpu us/app"
    );
}

fn print_case(case: &Case, raw_mb_per_sec: f64) {
    let h = &case.latency_us;
    println!(
        "{:<5} {:>7} {:>6} {:>9} {:>10.0} {:>8.1} {:>8.1} {:>7.2} {:>8} {:>8} {:>9} {:>10} {:>8} \
         {:>12} {:>11.2}",
        case.plan.flush.name(),
        case.plan.prefill.name(),
        case.plan.body_size,
        case.plan.producers,
        case.appends_per_sec(),
        case.body_mb_per_sec(),
        case.log_mb_per_sec(),
        case.body_mb_per_sec() / raw_mb_per_sec,
        h.value_at_quantile(0.50),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.value_at_quantile(0.9999),
        h.max(),
        appends_per_sync(case).map_or_else(|| "-".to_owned(), |a| format!("{a:.1}")),
        case.writer_cpu_us_per_append(),
    );
}

/// For each case measured with the prefill on and off: appends/s on ÷ off, and p50 on ÷ off.
fn print_prefill_ratios(cases: &[Case]) {
    let pairs: Vec<(&Case, &Case)> = cases
        .iter()
        .filter(|on| on.plan.prefill == Prefill::On)
        .filter_map(|on| {
            let off = cases.iter().find(|off| {
                off.plan.prefill == Prefill::Off
                    && off.plan.flush == on.plan.flush
                    && off.plan.body_size == on.plan.body_size
                    && off.plan.producers == on.plan.producers
            })?;
            Some((on, off))
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    println!();
    println!(
        "{:<5} {:>6} {:>9} {:>22} {:>18}",
        "flush", "size", "producers", "appends/s on / off", "p50 on / off"
    );
    for (on, off) in pairs {
        println!(
            "{:<5} {:>6} {:>9} {:>22.2} {:>18.2}",
            on.plan.flush.name(),
            on.plan.body_size,
            on.plan.producers,
            on.appends_per_sec() / off.appends_per_sec(),
            on.latency_us.value_at_quantile(0.5) as f64
                / off.latency_us.value_at_quantile(0.5).max(1) as f64
        );
    }
}

/// Appends per fdatasync, if the case synced at all (a short ASYNC_FLUSH case may not have).
fn appends_per_sync(case: &Case) -> Option<f64> {
    (case.syncs > 0).then(|| case.appends as f64 / case.syncs as f64)
}

/// The judged figure against the sequential baseline, and the log's bytes against both.
fn print_target(cases: &[Case], raws: &[RawBandwidth], batch: usize) {
    let raw_mb_per_sec = raws.first().map_or(f64::NAN, RawBandwidth::mb_per_sec);
    let durable_mb_per_sec = durable_mb_per_sec(raws);
    let target = cases.iter().find(|case| {
        case.plan.prefill == Prefill::On
            && case.plan.flush == TARGET_FLUSH
            && case.plan.body_size == TARGET_BODY_SIZE
            && case.plan.producers == TARGET_PRODUCERS
    });
    let Some(case) = target else {
        println!(
            "target ({} flush, {TARGET_BODY_SIZE} B, {TARGET_PRODUCERS} producers, prefill on \
             >= {TARGET_RATIO_MIN:.2} of raw): not measured in this run",
            TARGET_FLUSH.name()
        );
        return;
    };
    let ratio = case.body_mb_per_sec() / raw_mb_per_sec;
    let verdict = if batch > 1 {
        format!("not judged: {batch} messages per put, the target is about single messages")
    } else if ratio >= TARGET_RATIO_MIN {
        "MET".to_owned()
    } else {
        "NOT MET".to_owned()
    };
    println!(
        "target: {} flush, {TARGET_BODY_SIZE} B, {TARGET_PRODUCERS} producers at >= \
         {TARGET_RATIO_MIN:.2} of raw: {:.1} MB/s / {raw_mb_per_sec:.1} MB/s = {ratio:.2} \
         (log bytes: {:.2}; log bytes of durable {durable_mb_per_sec:.1} MB/s: {:.2}) -> {verdict}",
        TARGET_FLUSH.name(),
        case.body_mb_per_sec(),
        case.log_mb_per_sec() / raw_mb_per_sec,
        case.log_mb_per_sec() / durable_mb_per_sec,
    );
    if let Some(RawPattern::Durable { block_bytes, depth }) =
        durable_raw(raws).map(|raw| raw.pattern)
    {
        let job_kib = case.log_bytes as f64 / case.syncs.max(1) as f64 / KIB as f64;
        println!(
            "durable bound: the disk's own durable writes of {} KiB, {depth} in flight, would \
             carry at most {:.2} of raw in this case's body bytes (its jobs averaged {job_kib:.0} \
             KiB)",
            block_bytes / KIB,
            durable_bound_ratio(case, raws),
        );
    }
}

/// The ratio to raw the case's body bytes would reach if its log went at the durable
/// baseline's speed: what the disk allows when every write is durable in that shape, before
/// any CPU is spent (NaN without both baselines).
fn durable_bound_ratio(case: &Case, raws: &[RawBandwidth]) -> f64 {
    let raw_mb_per_sec = raws.first().map_or(f64::NAN, RawBandwidth::mb_per_sec);
    let body_share = case.body_mb_per_sec() / case.log_mb_per_sec();
    durable_mb_per_sec(raws) * body_share / raw_mb_per_sec
}

/// The durable raw baseline, if it ran.
fn durable_raw(raws: &[RawBandwidth]) -> Option<&RawBandwidth> {
    raws.iter()
        .find(|raw| matches!(raw.pattern, RawPattern::Durable { .. }))
}

/// MB/s of the durable raw baseline (NaN if it did not run).
fn durable_mb_per_sec(raws: &[RawBandwidth]) -> f64 {
    durable_raw(raws).map_or(f64::NAN, RawBandwidth::mb_per_sec)
}

/// One chart of latency over time per case.
fn plot(cases: &[Case]) -> String {
    let mut document = Document::new();
    for case in cases {
        let title = format!(
            "commitlog: {} flush, {} B, {} producers, prefill {} — per 100 ms",
            case.plan.flush.name(),
            case.plan.body_size,
            case.plan.producers,
            case.plan.prefill.name()
        );
        document.timeline(&title, &case.timeline);
    }
    document.finish()
}

fn write_json(
    path: &Path,
    args: &CommitLogArgs,
    raws: &[RawBandwidth],
    cases: &[Case],
) -> anyhow::Result<()> {
    let raw_mb_per_sec = raws.first().map_or(f64::NAN, RawBandwidth::mb_per_sec);
    let durable_mb_per_sec = durable_mb_per_sec(raws);
    let raw: Vec<serde_json::Value> = raws
        .iter()
        .map(|raw| {
            let (pattern, block_bytes, depth) = match raw.pattern {
                RawPattern::Sequential { block_bytes, depth } => ("sequential", block_bytes, depth),
                RawPattern::Durable { block_bytes, depth } => ("durable_dsync", block_bytes, depth),
            };
            serde_json::json!({
                "pattern": pattern,
                "block_bytes": block_bytes,
                "depth": depth,
                "bytes": raw.bytes,
                "fdatasyncs": raw.syncs,
                "elapsed_secs": raw.elapsed.as_secs_f64(),
                "mb_per_sec": raw.mb_per_sec(),
            })
        })
        .collect();
    let results: Vec<serde_json::Value> = cases
        .iter()
        .map(|case| {
            let h = &case.latency_us;
            serde_json::json!({
                "prefill": case.plan.prefill.name(),
                "flush": case.plan.flush.name(),
                "body_size": case.plan.body_size,
                "producers": case.plan.producers,
                "appends": case.appends,
                "log_bytes": case.log_bytes,
                "fdatasyncs": case.syncs,
                "elapsed_secs": case.elapsed.as_secs_f64(),
                "appends_per_sec": case.appends_per_sec(),
                "body_mb_per_sec": case.body_mb_per_sec(),
                "log_mb_per_sec": case.log_mb_per_sec(),
                "ratio_to_raw": case.body_mb_per_sec() / raw_mb_per_sec,
                "log_ratio_to_durable": case.log_mb_per_sec() / durable_mb_per_sec,
                "durable_bound_ratio_to_raw": durable_bound_ratio(case, raws),
                "appends_per_sync": appends_per_sync(case),
                "writer_cpu_us_per_append": case.writer_cpu_us_per_append(),
                "producer_cpu_us_per_append":
                    case.producer_cpu.map(|cpu| case.cpu_us_per_append(cpu)),
                "latency_us": super::latency_json(h),
                "latency_samples": h.len(),
                "timeline": case.timeline.json(),
            })
        })
        .collect();
    let report = serde_json::json!({
        "workload": "commitlog",
        "dir": args.dir.display().to_string(),
        "segment_size": args.segment_size,
        "duration_secs": args.duration_secs,
        "appends_max": args.appends_max,
        "in_flight": args.in_flight,
        "messages_per_put": args.batch,
        "flush_interval_ms": args.flush_interval_ms,
        "raw_file_bytes": args.raw_file_mib * MIB,
        "raw_repeat": args.raw_repeat,
        "raw": raw,
        "results": results,
    });
    std::fs::write(path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))
}
