//! The process-level crash drill: a store under load is killed with SIGKILL again and again,
//! and after every kill each acknowledged put is still there and every queue is consistent.
//!
//! The story, once per flush mode (`SYNC_FLUSH`, then `ASYNC_FLUSH`):
//! 1. The test re-executes its own binary as a child that runs only [`drill_child`]. The
//!    child opens the store in one directory (recovering whatever the previous child left),
//!    prints `DRILL READY` with its recovery report, and runs eight producers that put to two
//!    topics of four queues each. After each put is answered `Ok` it prints one line
//!    `ACK <topic> <queue> <queue offset> <physical offset> <body id>`, written and flushed
//!    whole, so a line the parent reads is a put the store acknowledged.
//! 2. The parent waits 150–600 ms after `DRILL READY` (derived from the iteration number, so
//!    a failing iteration can be replayed) and sends SIGKILL: the kill lands mid-batch,
//!    mid-write, mid-fdatasync, and with 64 KiB CommitLog segments often mid-roll.
//! 3. The parent checks the store as the kill left it. It opens the store in-process (which
//!    recovers it), pulls a sample through `get_message` (each queue's tail, where the kill
//!    landed, and every sixteenth batch before it; CRC checked), looks a sample of keys up
//!    through the IndexFile, and shuts the store down. It then reads the CommitLog and the
//!    ConsumeQueue files whole and asserts: every put acknowledged in any iteration so far
//!    is stored at its `(topic, queue, queue offset)` with the same physical offset and body
//!    id; each queue's units are dense from 0 to its max offset and each points to the record
//!    of that slot; the CommitLog holds no record outside the queues and no queue offset
//!    twice, and ends where recovery said; and a record never acknowledged is only ever the
//!    one put each producer had in flight at a kill.
//!    The files are read whole because reading every record through `get_message` costs one
//!    direct read per record (no page cache), seconds per iteration in a debug build.
//!
//! Where the parent checks matters for what the next child recovers from. A check in place
//! ends with a clean shutdown, so the next child would see a clean stop (`Normal`
//! recovery). Most iterations therefore check a copy of the directory and leave the
//! original as the kill left it, so the next child itself recovers from an unclean stop
//! (`Abnormal`); every third iteration (and the last) checks in place, so the children also
//! restart from a clean stop after a killed run. The copy is taken after the child has
//! exited, so it is exactly what a restarted broker would find.
//!
//! What a kill -9 can and cannot tell apart: the CommitLog is written with O_DIRECT, so a
//! write that completed is on the device whether or not it was synced; a process crash loses
//! only what was never written. So both modes must lose nothing acknowledged here, and the
//! difference between them (an unsynced write lost with the power) is the business of the
//! simulated-crash tests on `uring::sim`, not of this drill.

mod common;

use common::{small_store_config, store_message, TempDir};
use ferromq::store::config::StoreConfig;
use ferromq::store::consume_queue::{CqUnit, UNIT_SIZE};
use ferromq::store::flush::FlushDiskType;
use ferromq::store::message::{decode_record, Record};
use ferromq::store::message_store::{LocalStore, RecoveryReport};
use ferromq::store::reader::{FoundMessage, GetMessageStatus, PullFilter, StoreReader};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The child's store directory; without it [`drill_child`] does nothing.
const ENV_DIR: &str = "FERROMQ_DRILL_DIR";
/// `sync` or `async`.
const ENV_FLUSH: &str = "FERROMQ_DRILL_FLUSH";
/// The iteration number, part of every body id.
const ENV_RUN: &str = "FERROMQ_DRILL_RUN";

const TOPICS: [&str; 2] = ["DrillA", "DrillB"];
const QUEUE_COUNT: i32 = 4;
const PRODUCER_COUNT: usize = 8;
/// Puts per child at most, so a child that is never killed still stops.
const PUTS_PER_CHILD_MAX: usize = 200_000;
/// How long a child that reached its cap waits to be killed before it exits on its own.
const CHILD_IDLE_MAX: Duration = Duration::from_secs(30);
const ITERATIONS: u32 = 8;
/// From spawn to `DRILL READY`: process start plus recovery.
const READY_TIMEOUT: Duration = Duration::from_secs(5);
const KILL_DELAY_MIN_MS: u64 = 150;
const KILL_DELAY_SPAN_MS: u64 = 450;
/// Every `INDEX_SAMPLE_EVERY`-th keyed put is looked up by key, besides the last keyed put of
/// each producer in each run (the ones nearest the kill).
const INDEX_SAMPLE_EVERY: u64 = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flush {
    Sync,
    Async,
}

impl Flush {
    fn name(self) -> &'static str {
        match self {
            Flush::Sync => "sync",
            Flush::Async => "async",
        }
    }

    fn parse(text: &str) -> Flush {
        match text {
            "sync" => Flush::Sync,
            "async" => Flush::Async,
            other => panic!("{ENV_FLUSH}={other}: expected sync or async"),
        }
    }
}

#[test]
fn sync_flush_survives_kill_9_loop() {
    drill(Flush::Sync);
}

#[test]
fn async_flush_survives_kill_9_loop() {
    drill(Flush::Async);
}

/// The child process: does nothing unless [`ENV_DIR`] is set (it is ignored so the normal
/// suite skips it, and guarded so `--include-ignored` runs stay harmless).
#[test]
#[ignore = "the crash drill's child process; runs only when re-executed by the drill"]
fn drill_child() {
    let Some(dir) = std::env::var_os(ENV_DIR) else {
        return;
    };
    let flush = Flush::parse(&std::env::var(ENV_FLUSH).expect("the drill sets the flush mode"));
    let run: u32 = std::env::var(ENV_RUN)
        .expect("the drill sets the run number")
        .parse()
        .expect("the run number is an integer");
    let config = drill_config(Path::new(&dir), flush);
    ferromq_shards::testing::run_local(async move {
        let started = Instant::now();
        let store = LocalStore::open(config)
            .await
            .expect("the child opens the store");
        let report = store.recovery().clone();
        print_line(&format!(
            "DRILL READY run={run} mode={:?} walk_start={} valid_end={} redispatch_from={} \
             redispatched={} queues={} open_ms={}",
            report.mode,
            report.walk_start,
            report.valid_end,
            report.redispatch_from,
            report.redispatched,
            report.queues,
            started.elapsed().as_millis()
        ));
        let per_producer = PUTS_PER_CHILD_MAX / PRODUCER_COUNT;
        let mut producers = Vec::new();
        for producer in 0..PRODUCER_COUNT {
            let handle = store.handle().clone();
            producers.push(glommio::spawn_local(async move {
                for seq in 0..per_producer {
                    let put = drill_put(run, producer, seq);
                    let message = store_message(
                        put.topic,
                        put.queue_id,
                        put.body.as_bytes(),
                        Some(&format!("p{producer}")),
                        put.keyed.then_some(put.id.as_str()),
                    );
                    match handle.put(message).await {
                        Ok(appended) => print_line(&format!(
                            "ACK {} {} {} {} {}",
                            put.topic,
                            put.queue_id,
                            appended.queue_offset,
                            appended.physical_offset,
                            put.id
                        )),
                        Err(error) => {
                            print_line(&format!("DRILL ERROR put {}: {error}", put.id));
                            panic!("put {} failed: {error}", put.id);
                        }
                    }
                }
            }));
        }
        for producer in producers {
            producer.await;
        }
        print_line("DRILL DONE");
        // Wait for the kill; a run that is never killed still ends.
        glommio::timer::sleep(CHILD_IDLE_MAX).await;
        store.shutdown().await.expect("clean shutdown");
    });
}

/// One line to stdout, written and flushed whole before the next put of this producer.
fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    out.write_all(&bytes).expect("stdout is the parent's pipe");
    out.flush().expect("stdout is the parent's pipe");
}

/// The store settings of both the child and the parent's checks.
fn drill_config(dir: &Path, flush: Flush) -> StoreConfig {
    let mut config = small_store_config(dir);
    config.flush_disk_type = match flush {
        Flush::Sync => FlushDiskType::SyncFlush,
        // Java's default `flushIntervalCommitLog`: most kills land on unsynced writes.
        Flush::Async => FlushDiskType::AsyncFlush {
            interval: Duration::from_millis(500),
        },
    };
    // Keys are indexed: IndexFiles of 256 entries would mean hundreds of files per run.
    config.max_hash_slot_num = 1024;
    config.max_index_num = 8192;
    config
}

/// What producer `producer` puts as its `seq`-th message in run `run`.
struct DrillPut {
    topic: &'static str,
    queue_id: i32,
    id: String,
    body: String,
    keyed: bool,
}

fn drill_put(run: u32, producer: usize, seq: usize) -> DrillPut {
    let id = format!("{run}-{producer}-{seq}");
    // Varying sizes, now and then a large one, so segment ends fall anywhere in a record.
    let padding = if seq % 50 == 49 {
        3000 + seq % 700
    } else {
        (seq * 37 + producer * 11) % 400
    };
    let body = format!("{id}|{}", "x".repeat(padding));
    let queue_id = (i32::try_from(seq + producer / 2).expect("small")) % QUEUE_COUNT;
    DrillPut {
        topic: TOPICS[producer % TOPICS.len()],
        queue_id,
        id,
        body,
        keyed: seq.is_multiple_of(4),
    }
}

/// A put the child acknowledged.
#[derive(Clone, Debug)]
struct Ack {
    physical_offset: i64,
    id: String,
}

/// `(topic, queue id, queue offset)`.
type Slot = (String, i32, i64);

/// What one child printed.
#[derive(Debug, Default)]
struct ChildOutput {
    ready: Option<String>,
    acks: Vec<(Slot, Ack)>,
    errors: Vec<String>,
    done: bool,
}

/// A line of the child's stdout, parsed.
enum ChildLine {
    Ready(String),
    Ack(Slot, Ack),
    Error(String),
    Done,
    Other,
}

/// Parses a line; libtest's own lines are `Other` (with `--nocapture` its `test drill_child
/// ...` may share a line with `DRILL READY`, hence the search instead of a prefix).
fn parse_line(line: &str) -> ChildLine {
    if let Some(at) = line.find("DRILL READY") {
        return ChildLine::Ready(line[at..].to_owned());
    }
    if line.contains("DRILL DONE") {
        return ChildLine::Done;
    }
    if line.contains("DRILL ERROR") {
        return ChildLine::Error(line.to_owned());
    }
    if let Some(rest) = line.strip_prefix("ACK ") {
        let fields: Vec<&str> = rest.split(' ').collect();
        let parsed = match fields.as_slice() {
            [topic, queue, queue_offset, physical_offset, id] => {
                match (queue.parse(), queue_offset.parse(), physical_offset.parse()) {
                    (Ok(queue), Ok(queue_offset), Ok(physical_offset)) => Some(ChildLine::Ack(
                        ((*topic).to_owned(), queue, queue_offset),
                        Ack {
                            physical_offset,
                            id: (*id).to_owned(),
                        },
                    )),
                    _ => None,
                }
            }
            _ => None,
        };
        return parsed.unwrap_or_else(|| ChildLine::Error(format!("unparsable: {line}")));
    }
    if line.contains("ACK") {
        return ChildLine::Error(format!("unparsable: {line}"));
    }
    ChildLine::Other
}

/// Runs one child, kills it `delay` after it is ready, and returns what it printed.
fn run_child(dir: &Path, flush: Flush, run: u32, delay: Duration) -> ChildOutput {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new(exe)
        .args(["--exact", "drill_child", "--nocapture", "--include-ignored"])
        .env(ENV_DIR, dir)
        .env(ENV_FLUSH, flush.name())
        .env(ENV_RUN, run.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the drill child");
    let stdout = child.stdout.take().expect("piped stdout");
    let (lines_tx, lines_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        loop {
            line.clear();
            match stdout.read_line(&mut line) {
                // A last line without its newline was cut by the kill: not an acknowledgement.
                Ok(0) | Err(_) => break,
                Ok(_) if !line.ends_with('\n') => break,
                Ok(_) => {
                    if lines_tx.send(parse_line(line.trim_end())).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let mut output = ChildOutput::default();
    let deadline = Instant::now() + READY_TIMEOUT;
    while output.ready.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines_rx.recv_timeout(left) {
            Ok(ChildLine::Ready(line)) => output.ready = Some(line),
            Ok(ChildLine::Error(line)) => output.errors.push(line),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    if output.ready.is_some() {
        // The kill time is the drill's input, not a wait for some state.
        std::thread::sleep(delay);
    }
    let early_exit = child.try_wait().expect("poll the child");
    let _ = child.kill();
    let status = child.wait().expect("reap the child");
    reader.join().expect("the stdout reader does not panic");
    for line in lines_rx.try_iter() {
        match line {
            ChildLine::Ready(line) => output.ready = Some(line),
            ChildLine::Ack(slot, ack) => output.acks.push((slot, ack)),
            ChildLine::Error(line) => output.errors.push(line),
            ChildLine::Done => output.done = true,
            ChildLine::Other => {}
        }
    }
    assert!(
        output.ready.is_some(),
        "[{}] run {run}: the child never printed DRILL READY within {READY_TIMEOUT:?} \
         (exit status {status:?}); see its stderr above (a store that does not open, or \
         `--exact drill_child` matching no test)",
        flush.name()
    );
    if let Some(status) = early_exit {
        output
            .errors
            .push(format!("the child exited before the kill: {status:?}"));
    } else if status.signal() != Some(9) {
        output
            .errors
            .push(format!("the child was not killed by SIGKILL: {status:?}"));
    }
    output
}

/// Kill delay of iteration `run`: spread over 150–600 ms, fixed per iteration.
fn kill_delay(flush: Flush, run: u32) -> Duration {
    let salt = match flush {
        Flush::Sync => 0,
        Flush::Async => 5,
    };
    let step = (u64::from(run) + salt) * 7919 % KILL_DELAY_SPAN_MS;
    Duration::from_millis(KILL_DELAY_MIN_MS + step)
}

/// Where the parent checks the store after iteration `run` (see the module doc).
fn checks_in_place(run: u32) -> bool {
    run % 3 == 2 || run + 1 == ITERATIONS
}

/// One drill: [`ITERATIONS`] children killed on one store directory, each kill followed by
/// a check; panics with the first problems found.
fn drill(flush: Flush) {
    let started = Instant::now();
    let name = flush.name();
    let dir = TempDir::on_disk(&format!("crash-drill-{name}"));
    let scratch = TempDir::on_disk(&format!("crash-drill-{name}-copy"));
    let mut acked: HashMap<Slot, Ack> = HashMap::new();
    let mut problems: Vec<String> = Vec::new();
    let mut child_modes = Vec::new();
    let mut check_modes = Vec::new();
    for run in 0..ITERATIONS {
        let delay = kill_delay(flush, run);
        let child_started = Instant::now();
        let output = run_child(dir.path(), flush, run, delay);
        let child_ms = child_started.elapsed().as_millis();
        let ready = output.ready.clone().unwrap_or_default();
        child_modes.push(field(&ready, "mode").to_owned());
        for error in &output.errors {
            problems.push(format!("run {run}: {error}"));
        }
        let acked_this_run = output.acks.len();
        for (slot, ack) in output.acks {
            if let Some(earlier) = acked.insert(slot.clone(), ack.clone()) {
                problems.push(format!(
                    "run {run}: queue offset {slot:?} acknowledged twice: {} at {} and {} at {}",
                    earlier.id, earlier.physical_offset, ack.id, ack.physical_offset
                ));
            }
        }
        let check_started = Instant::now();
        let in_place = checks_in_place(run);
        let check_dir = if in_place {
            dir.path().to_owned()
        } else {
            let copy = scratch.path().join(format!("run-{run}"));
            copy_tree(dir.path(), &copy);
            copy
        };
        let checked = check_store(&check_dir, flush, &acked);
        if !in_place {
            std::fs::remove_dir_all(&check_dir).expect("remove the checked copy");
        }
        let checked = match checked {
            Ok(checked) => checked,
            Err(problem) => {
                problems.push(format!(
                    "run {run} (killed {} ms after ready): {problem}",
                    delay.as_millis()
                ));
                break;
            }
        };
        check_modes.push(format!("{:?}", checked.report.mode));
        eprintln!(
            "[{name}] run {run}: killed {} ms after ready{}, child {child_ms} ms: {ready}; \
             acked {acked_this_run} (total {}); check {} in {} ms: {:?} valid_end {} \
             redispatched {}; {} records stored, {} never acknowledged, {} pulled, {} keys",
            delay.as_millis(),
            if output.done {
                " (the child had finished)"
            } else {
                ""
            },
            acked.len(),
            if in_place { "in place" } else { "on a copy" },
            check_started.elapsed().as_millis(),
            checked.report.mode,
            checked.report.valid_end,
            checked.report.redispatched,
            checked.stored,
            checked.stored.saturating_sub(acked.len()),
            checked.pulled,
            checked.keys_looked_up,
        );
        problems.extend(
            checked
                .problems
                .into_iter()
                .map(|p| format!("run {run}: {p}")),
        );
        if !problems.is_empty() {
            break;
        }
    }
    eprintln!(
        "[{name}] {} acknowledged puts, all kept: {}; child recoveries {child_modes:?}; \
         check recoveries {check_modes:?}; {:.1} s",
        acked.len(),
        problems.is_empty(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        problems.is_empty(),
        "[{name}] {} problems, the first ones:\n{}",
        problems.len(),
        problems
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        child_modes.iter().any(|m| m == "Normal")
            && child_modes.iter().any(|m| m.starts_with("Abnormal")),
        "[{name}] the children recovered from clean and unclean stops: {child_modes:?}"
    );
    assert!(
        acked.len() >= usize::try_from(ITERATIONS).expect("small") * PRODUCER_COUNT,
        "[{name}] the children acknowledged puts at all: {}",
        acked.len()
    );
}

/// `key=value` in a `DRILL READY` line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split(' ')
        .find_map(|part| part.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or("?")
}

/// A record as the check found it.
#[derive(Clone, Debug)]
struct Stored {
    physical_offset: i64,
    size: usize,
    id: String,
}

/// What a check of the store found.
struct Checked {
    report: RecoveryReport,
    /// Records in the CommitLog (each one unit of its queue).
    stored: usize,
    /// Records read back through `get_message`.
    pulled: usize,
    keys_looked_up: usize,
    problems: Vec<String>,
}

/// `(topic, queue id)`.
type QueueKey = (String, i32);

/// Opens (recovers) the store in `dir` and reads a sample through the public read path,
/// shuts it down cleanly, then reads the CommitLog and the ConsumeQueues whole from their
/// files and checks them against each other and against `acked`.
///
/// Reading every record through `get_message` would cost one direct read per record (no page
/// cache, and a queue's records are not adjacent); the files read whole show the same bytes
/// in a fraction of the time, so the read path gets a sample: the tail of each queue, where
/// the kill landed, and every so many batches before it.
///
/// # Errors
/// The store does not open.
fn check_store(dir: &Path, flush: Flush, acked: &HashMap<Slot, Ack>) -> Result<Checked, String> {
    let config = drill_config(dir, flush);
    let units_per_file = config.consume_queue_units_per_file;
    let keys = index_sample(acked);
    let keys_looked_up = keys.len();
    let opened = ferromq_shards::testing::run_local(async move {
        let store = match LocalStore::open(config).await {
            Ok(store) => store,
            Err(error) => return Err(format!("the store does not open after the kill: {error}")),
        };
        let report = store.recovery().clone();
        let reader = store.handle().reader();
        let mut problems = Vec::new();
        let mut maxes: HashMap<QueueKey, i64> = HashMap::new();
        let mut pulled: HashMap<Slot, Stored> = HashMap::new();
        for topic in TOPICS {
            for queue_id in 0..QUEUE_COUNT {
                let max = reader.max_offset_in_queue(topic, queue_id);
                let min = reader.min_offset_in_queue(topic, queue_id);
                if min != 0 {
                    problems.push(format!("{topic}/{queue_id}: min offset {min}, expected 0"));
                }
                maxes.insert((topic.to_owned(), queue_id), max);
                pull_sample(&reader, topic, queue_id, max, &mut pulled, &mut problems).await;
            }
        }
        check_keys(&reader, &keys, &mut problems).await;
        drop(reader);
        store
            .shutdown()
            .await
            .expect("a clean shutdown after the check");
        Ok((report, maxes, pulled, problems))
    });
    let (report, maxes, pulled, mut problems) = opened?;
    let walked = walk_commit_log(dir, &report, &mut problems);
    let queues = read_consume_queues(dir, units_per_file, &mut problems);
    compare(&walked, &queues, &maxes, &pulled, acked, &mut problems);
    Ok(Checked {
        report,
        stored: walked.len(),
        pulled: pulled.len(),
        keys_looked_up,
        problems,
    })
}

/// Records pulled per `get_message`.
const PULL_BATCH: i64 = 32;
/// The last units of each queue are all pulled.
const PULL_TAIL_UNITS: i64 = 128;
/// Before the tail, one batch in this many is pulled.
const PULL_BATCH_STRIDE: i64 = 16;

/// Pulls the sample of one queue and checks each record against its unit (CRC checked).
async fn pull_sample(
    reader: &StoreReader,
    topic: &str,
    queue_id: i32,
    max: i64,
    pulled: &mut HashMap<Slot, Stored>,
    problems: &mut Vec<String>,
) {
    let filter = PullFilter::ALL;
    let batches = (max + PULL_BATCH - 1) / PULL_BATCH;
    for batch in 0..batches {
        let offset = batch * PULL_BATCH;
        if batch % PULL_BATCH_STRIDE != 0 && offset + PULL_BATCH <= max - PULL_TAIL_UNITS {
            continue;
        }
        let end = (offset + PULL_BATCH).min(max);
        let mut at = offset;
        // A pull stops at the end of a ConsumeQueue file, so a batch may take several.
        while at < end {
            let count = usize::try_from(end - at).expect("small");
            let result = reader
                .get_message(topic, queue_id, at, count, &filter)
                .await
                .expect("pull reads the files");
            if result.status != GetMessageStatus::Found || result.messages.is_empty() {
                problems.push(format!(
                    "{topic}/{queue_id}: pull at {at} (max {max}) gave {:?}, next {}",
                    result.status, result.next_begin_offset
                ));
                break;
            }
            for found in &result.messages {
                check_pulled(
                    topic,
                    queue_id,
                    at,
                    found,
                    result.record(found),
                    pulled,
                    problems,
                );
                at += 1;
            }
        }
    }
}

/// Checks one pulled record against its unit (CRC checked) and keeps it.
fn check_pulled(
    topic: &str,
    queue_id: i32,
    queue_offset: i64,
    found: &FoundMessage,
    bytes: &[u8],
    pulled: &mut HashMap<Slot, Stored>,
    problems: &mut Vec<String>,
) {
    let slot = (topic.to_owned(), queue_id, queue_offset);
    if found.queue_offset != queue_offset {
        problems.push(format!(
            "{slot:?}: the pull gave offset {} instead",
            found.queue_offset
        ));
        return;
    }
    match decode_record(bytes, true) {
        Ok(Record::Message { record, size }) => {
            let consistent = size == found.size
                && record.topic == topic
                && record.queue_id == queue_id
                && record.queue_offset == found.queue_offset
                && record.physical_offset == found.physical_offset;
            if !consistent {
                problems.push(format!(
                    "{slot:?}: the unit says physical {} size {}, the record is {}/{} offset \
                     {} physical {} size {size}",
                    found.physical_offset,
                    found.size,
                    record.topic,
                    record.queue_id,
                    record.queue_offset,
                    record.physical_offset
                ));
            }
            pulled.insert(
                slot,
                Stored {
                    physical_offset: record.physical_offset,
                    size,
                    id: body_id(record.body),
                },
            );
        }
        other => problems.push(format!(
            "{slot:?}: no valid record at physical {}: {other:?}",
            found.physical_offset
        )),
    }
}

/// A key to look up: `(topic, body id, physical offset)`.
type KeySample = (String, String, i64);

/// The keyed acknowledged puts to look up through the IndexFile: the last of each producer in
/// each run (the ones nearest a kill) and every so many others.
fn index_sample(acked: &HashMap<Slot, Ack>) -> Vec<KeySample> {
    let mut last: BTreeMap<(u64, u64), (u64, KeySample)> = BTreeMap::new();
    let mut sample = Vec::new();
    for (slot, ack) in acked {
        let (run, producer, seq) = parse_id(&ack.id);
        if !seq.is_multiple_of(4) {
            continue;
        }
        let key = (slot.0.clone(), ack.id.clone(), ack.physical_offset);
        if seq.is_multiple_of(4 * INDEX_SAMPLE_EVERY) {
            sample.push(key.clone());
        }
        let entry = last.entry((run, producer)).or_insert((seq, key.clone()));
        if seq > entry.0 {
            *entry = (seq, key);
        }
    }
    sample.extend(last.into_values().map(|(_, key)| key));
    sample
}

/// Looks up each sampled key and expects its record among the answers.
async fn check_keys(reader: &StoreReader, keys: &[KeySample], problems: &mut Vec<String>) {
    for (topic, id, physical_offset) in keys {
        let records = reader
            .query_by_key(topic, id, 32, 0, i64::MAX)
            .await
            .expect("query reads the files");
        let found = records.iter().any(|bytes| {
            matches!(
                decode_record(bytes, true),
                Ok(Record::Message { record, .. })
                    if body_id(record.body) == *id && record.physical_offset == *physical_offset
            )
        });
        if !found {
            problems.push(format!(
                "key {id} of {topic} (physical {physical_offset}) not found through the \
                 IndexFile ({} candidates)",
                records.len()
            ));
        }
    }
}

/// Walks every CommitLog record with plain reads (the store is shut down), CRC checked, and
/// returns them by slot; no slot may appear twice and the data must end at `valid_end`.
fn walk_commit_log(
    dir: &Path,
    report: &RecoveryReport,
    problems: &mut Vec<String>,
) -> HashMap<Slot, Stored> {
    let segment_dir = dir.join("commitlog");
    let mut segments: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&segment_dir)
        .expect("list the CommitLog")
        .map(|entry| entry.expect("a directory entry").path())
        .filter_map(|path| {
            let start = path.file_name()?.to_str()?.parse().ok()?;
            Some((start, path))
        })
        .collect();
    segments.sort();
    let mut walked: HashMap<Slot, Stored> = HashMap::new();
    let mut end = 0u64;
    for (index, (start, path)) in segments.iter().enumerate() {
        if *start != end {
            problems.push(format!(
                "CommitLog segment {start} follows data ending at {end}"
            ));
            break;
        }
        let bytes = std::fs::read(path).expect("read a CommitLog segment");
        let mut at = 0usize;
        let rolled = loop {
            if at >= bytes.len() {
                break true;
            }
            match decode_record(&bytes[at..], true) {
                Ok(Record::Message { record, size }) => {
                    let physical = start + at as u64;
                    if u64::try_from(record.physical_offset).ok() != Some(physical) {
                        problems.push(format!(
                            "record at {physical} says physical offset {}",
                            record.physical_offset
                        ));
                    }
                    let slot = (
                        record.topic.to_owned(),
                        record.queue_id,
                        record.queue_offset,
                    );
                    let stored = Stored {
                        physical_offset: record.physical_offset,
                        size,
                        id: body_id(record.body),
                    };
                    if let Some(other) = walked.insert(slot.clone(), stored) {
                        problems.push(format!(
                            "queue offset {slot:?} stored twice: {} at {} and {} at {}",
                            other.id,
                            other.physical_offset,
                            body_id(record.body),
                            record.physical_offset
                        ));
                    }
                    at += size;
                }
                Ok(Record::Blank { remaining }) if at + remaining == bytes.len() => {
                    at = bytes.len();
                    break true;
                }
                _ => break false,
            }
        };
        end = start + at as u64;
        let last = index + 1 == segments.len();
        if !rolled && !last {
            problems.push(format!(
                "CommitLog data ends at {end}, inside segment {start}, but {} segments follow",
                segments.len() - index - 1
            ));
        }
        if !rolled || last {
            break;
        }
    }
    if end != report.valid_end {
        problems.push(format!(
            "the CommitLog walk ends at {end}, recovery said {}",
            report.valid_end
        ));
    }
    walked
}

/// Reads every queue's ConsumeQueue files (plain reads): the written units, in order. Files
/// must follow each other, all full but the last, and nothing may follow the first unwritten
/// unit.
fn read_consume_queues(
    dir: &Path,
    units_per_file: usize,
    problems: &mut Vec<String>,
) -> HashMap<QueueKey, Vec<CqUnit>> {
    let file_bytes = units_per_file * UNIT_SIZE;
    let mut queues = HashMap::new();
    for topic in TOPICS {
        for queue_id in 0..QUEUE_COUNT {
            let queue_dir = dir
                .join("consumequeue")
                .join(topic)
                .join(queue_id.to_string());
            let mut files: Vec<(u64, std::path::PathBuf)> = match std::fs::read_dir(&queue_dir) {
                Ok(entries) => entries
                    .map(|entry| entry.expect("a directory entry").path())
                    .filter_map(|path| {
                        let start = path.file_name()?.to_str()?.parse().ok()?;
                        Some((start, path))
                    })
                    .collect(),
                Err(_) => Vec::new(),
            };
            files.sort();
            let mut units = Vec::new();
            let mut ended = false;
            for (index, (start, path)) in files.iter().enumerate() {
                let expected_start = (index * file_bytes) as u64;
                if *start != expected_start {
                    problems.push(format!(
                        "{topic}/{queue_id}: ConsumeQueue file {start}, expected {expected_start}"
                    ));
                    break;
                }
                let bytes = std::fs::read(path).expect("read a ConsumeQueue file");
                for chunk in bytes[..file_bytes.min(bytes.len())].chunks_exact(UNIT_SIZE) {
                    let unit = CqUnit::decode(chunk).expect("a whole unit");
                    if !unit.is_written() {
                        ended = true;
                    } else if ended {
                        problems.push(format!(
                            "{topic}/{queue_id}: a written unit after the end, in file {start}"
                        ));
                    } else {
                        units.push(unit);
                    }
                }
            }
            queues.insert((topic.to_owned(), queue_id), units);
        }
    }
    queues
}

/// The CommitLog, the ConsumeQueues, the read path and the acknowledgements must agree.
fn compare(
    walked: &HashMap<Slot, Stored>,
    queues: &HashMap<QueueKey, Vec<CqUnit>>,
    maxes: &HashMap<QueueKey, i64>,
    pulled: &HashMap<Slot, Stored>,
    acked: &HashMap<Slot, Ack>,
    problems: &mut Vec<String>,
) {
    let mut units_total = 0;
    for ((topic, queue_id), units) in queues {
        units_total += units.len();
        let max = maxes[&(topic.clone(), *queue_id)];
        if i64::try_from(units.len()).ok() != Some(max) {
            problems.push(format!(
                "{topic}/{queue_id}: {} units in the files, max offset {max}",
                units.len()
            ));
        }
        for (unit, queue_offset) in units.iter().zip(0..) {
            let slot = (topic.clone(), *queue_id, queue_offset);
            match walked.get(&slot) {
                Some(stored)
                    if stored.physical_offset == unit.physical_offset
                        && i32::try_from(stored.size).ok() == Some(unit.size) => {}
                Some(stored) => problems.push(format!(
                    "{slot:?}: the unit points to {} ({} bytes), the CommitLog has it at {} \
                     ({} bytes)",
                    unit.physical_offset, unit.size, stored.physical_offset, stored.size
                )),
                None => problems.push(format!(
                    "{slot:?}: the unit points to {}, no such record in the CommitLog",
                    unit.physical_offset
                )),
            }
        }
    }
    if walked.len() != units_total {
        let orphans: Vec<&Slot> = walked
            .keys()
            .filter(|(topic, queue_id, queue_offset)| {
                queues
                    .get(&(topic.clone(), *queue_id))
                    .is_none_or(|units| usize::try_from(*queue_offset).unwrap_or(0) >= units.len())
            })
            .take(5)
            .collect();
        problems.push(format!(
            "{} records in the CommitLog, {units_total} units in the queues; not in a queue: \
             {orphans:?}",
            walked.len()
        ));
    }
    for (slot, found) in pulled {
        match walked.get(slot) {
            Some(stored) if stored.physical_offset == found.physical_offset => {}
            other => problems.push(format!(
                "{slot:?}: pulled {} at {}, the CommitLog has {other:?}",
                found.id, found.physical_offset
            )),
        }
    }
    for (slot, ack) in acked {
        match walked.get(slot) {
            Some(stored)
                if stored.id == ack.id && stored.physical_offset == ack.physical_offset => {}
            other => problems.push(format!(
                "acknowledged put {} at {slot:?} (physical {}) is lost; the store has {other:?}",
                ack.id, ack.physical_offset
            )),
        }
    }
    check_unacknowledged(walked, acked, problems);
}

/// A record stored but never acknowledged can only be the one put each producer had in
/// flight when its child was killed: the next of its sequence, at most one per producer and
/// run. Anything else (an older record brought back, a put stored twice) is a problem.
fn check_unacknowledged(
    walked: &HashMap<Slot, Stored>,
    acked: &HashMap<Slot, Ack>,
    problems: &mut Vec<String>,
) {
    let mut acked_per_producer: HashMap<(u64, u64), u64> = HashMap::new();
    for ack in acked.values() {
        let (run, producer, _) = parse_id(&ack.id);
        *acked_per_producer.entry((run, producer)).or_default() += 1;
    }
    let mut in_flight: HashMap<(u64, u64), &Slot> = HashMap::new();
    for (slot, stored) in walked {
        if acked.contains_key(slot) {
            continue;
        }
        let (run, producer, seq) = parse_id(&stored.id);
        let next = acked_per_producer
            .get(&(run, producer))
            .copied()
            .unwrap_or(0);
        if seq != next {
            problems.push(format!(
                "{slot:?} holds {} at {}, never acknowledged and not the put in flight at the \
                 kill (seq {next})",
                stored.id, stored.physical_offset
            ));
        } else if let Some(other) = in_flight.insert((run, producer), slot) {
            problems.push(format!(
                "{} stored twice without acknowledgement: {other:?} and {slot:?}",
                stored.id
            ));
        }
    }
}

/// `(run, producer, seq)` of a body id.
fn parse_id(id: &str) -> (u64, u64, u64) {
    let mut parts = id.split('-').map(|p| p.parse::<u64>().ok());
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(Some(run)), Some(Some(producer)), Some(Some(seq)), None) => (run, producer, seq),
        _ => panic!("body id {id} is run-producer-seq"),
    }
}

/// The id a drill body starts with.
fn body_id(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    text.split('|').next().unwrap_or_default().to_owned()
}

/// Copies a store directory (files and subdirectories) to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("list the store") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a store file");
        }
    }
}
