//! `commitlog`: puts per second through the CommitLog writer's group commit on a real disk.
//!
//! For each producer count, that many tasks on one shard put messages one at a time and wait
//! for each answer, for `--duration-secs`; the writer loop batches whatever is waiting into
//! one write and (under SYNC_FLUSH) one fdatasync. The report shows puts/s, MB/s, latency
//! percentiles and puts per sync, which is the group commit at work.

use anyhow::Context;
use ferromq::store::commit_log::{CommitLog, PutMessage};
use ferromq::store::flush::{run_group_commit, FlushDiskType, PutRequest};
use ferromq::store::segment::DmaDirectory;
use futures::channel::{mpsc, oneshot};
use futures::SinkExt;
use hdrhistogram::Histogram;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Options of the `commitlog` workload.
#[derive(Debug, clap::Args)]
pub struct CommitLogArgs {
    /// Directory on the disk to measure (segments are created and removed there).
    #[arg(long, default_value = "target/bench-commitlog")]
    dir: std::path::PathBuf,
    /// Comma-separated producer counts, each measured in turn.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    producers: Vec<usize>,
    /// Body size in bytes.
    #[arg(long, default_value_t = 1024)]
    body_size: usize,
    /// `sync` (SYNC_FLUSH) or `async` (ASYNC_FLUSH, 500 ms interval).
    #[arg(long, default_value = "sync")]
    flush: String,
    /// Measured seconds per producer count.
    #[arg(long, default_value_t = 3)]
    duration_secs: u64,
    /// Segment size in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    segment_size: u64,
}

/// Runs the workload.
///
/// # Errors
/// Setup failures.
pub fn run(args: &CommitLogArgs) -> anyhow::Result<()> {
    let mode = match args.flush.as_str() {
        "sync" => FlushDiskType::SyncFlush,
        "async" => FlushDiskType::AsyncFlush {
            interval: Duration::from_millis(500),
        },
        other => anyhow::bail!("--flush must be sync or async, not {other}"),
    };
    println!(
        "commitlog puts on {} ({} B bodies, {}):",
        args.dir.display(),
        args.body_size,
        args.flush
    );
    println!(
        "{:>9} {:>10} {:>8} {:>8} {:>8} {:>9} {:>10}",
        "producers", "puts/s", "MB/s", "p50 us", "p99 us", "p99.9 us", "puts/sync"
    );
    for &producers in &args.producers {
        let dir = args.dir.join(format!("run-{producers}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let (puts, syncs, elapsed, histogram) = measure(
            dir.clone(),
            producers,
            args.body_size,
            mode,
            args.duration_secs,
            args.segment_size,
        )?;
        let _ = std::fs::remove_dir_all(&dir);
        let rate = puts as f64 / elapsed.as_secs_f64();
        println!(
            "{:>9} {:>10.0} {:>8.1} {:>8} {:>8} {:>9} {:>10.1}",
            producers,
            rate,
            rate * args.body_size as f64 / 1e6,
            histogram.value_at_quantile(0.5),
            histogram.value_at_quantile(0.99),
            histogram.value_at_quantile(0.999),
            puts as f64 / syncs.max(1) as f64,
        );
    }
    Ok(())
}

fn measure(
    dir: std::path::PathBuf,
    producers: usize,
    body_size: usize,
    mode: FlushDiskType,
    duration_secs: u64,
    segment_size: u64,
) -> anyhow::Result<(u64, u64, Duration, Histogram<u64>)> {
    let outcome = glommio::LocalExecutorBuilder::default()
        .name("bench-writer")
        .spawn(move || async move {
            let opener = DmaDirectory { dir };
            let log = CommitLog::open(opener, segment_size, 0, HashMap::new()).await?;
            let (sender, receiver) = mpsc::channel::<PutRequest>(4096);
            let clock = || {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                i64::try_from(now.unwrap_or_default().as_millis()).unwrap_or(i64::MAX)
            };
            let writer = glommio::spawn_local(run_group_commit(log, receiver, mode, clock));
            let histogram = Rc::new(RefCell::new(Histogram::<u64>::new_with_bounds(
                1, 60_000_000, 3,
            )?));
            let deadline = Instant::now() + Duration::from_secs(duration_secs);
            let started = Instant::now();
            let mut tasks = Vec::new();
            for producer in 0..producers {
                let mut sender = sender.clone();
                let histogram = histogram.clone();
                tasks.push(glommio::spawn_local(async move {
                    let mut puts = 0u64;
                    while Instant::now() < deadline {
                        let message = PutMessage {
                            topic: "BenchTopic".into(),
                            queue_id: i32::try_from(producer % 8).unwrap_or(0),
                            flag: 0,
                            sys_flag: 0,
                            born_timestamp: 0,
                            born_host: "127.0.0.1:5000".parse().expect("literal address"),
                            store_host: "127.0.0.1:10911".parse().expect("literal address"),
                            reconsume_times: 0,
                            prepared_transaction_offset: 0,
                            body: vec![b'x'; body_size],
                            properties: Vec::new(),
                        };
                        let (reply, answer) = oneshot::channel();
                        let sent = Instant::now();
                        if sender.send(PutRequest { message, reply }).await.is_err() {
                            break;
                        }
                        match answer.await {
                            Ok(Ok(_)) => {
                                let micros =
                                    u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                                histogram.borrow_mut().saturating_record(micros.max(1));
                                puts += 1;
                            }
                            _ => break,
                        }
                    }
                    puts
                }));
            }
            drop(sender);
            let mut puts = 0;
            for task in tasks {
                puts += task.await;
            }
            let elapsed = started.elapsed();
            let (_log, stats) = writer.await;
            let histogram = histogram.borrow().clone();
            anyhow::Ok((puts, stats.syncs, elapsed, histogram))
        })
        .map_err(|e| anyhow::anyhow!("starting the writer shard (io_uring): {e}"))?
        .join()
        .map_err(|e| anyhow::anyhow!("writer shard failed: {e:?}"))?;
    outcome
}
