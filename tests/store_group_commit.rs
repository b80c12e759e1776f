//! Group commit on a shard: many concurrent puts, few writes and syncs, every answer honest.
//!
//! Method: the writer loop (`run_group_commit`) runs on a glommio executor over the simulated
//! disk; 64 producer tasks each put 20 messages one after another, waiting for each answer.
//! Under SYNC_FLUSH every answered put must be recovered after a power loss that drops
//! everything unsynced, and the loop must have needed far fewer syncs than puts. Under
//! ASYNC_FLUSH the answers come after the write and a timer syncs. A failed sync makes the
//! puts of its batch and every later put fail.

mod common;

use common::SimDirectory;
use ferromq::store::commit_log::Appended;
use ferromq::store::commit_log::{recover, CommitLog, JobExtent, StoreError};
use ferromq::store::flush::{
    run_group_commit, run_group_commit_with, BatchPutResult, CommitObserver, FlushDiskType,
    GroupCommitStats, PutMessage, PutRequest, PutResult,
};
use ferromq::store::message::{decode_record, Record};
use ferromq::store::segment_writer::{SegmentWriter, WriteJob};
use ferromq_uring::sim::{CrashKeep, SimSegment};
use futures::channel::{mpsc, oneshot};
use futures::SinkExt;
use std::collections::HashMap;
use std::time::Duration;

const SEGMENT_SIZE: u64 = 64 * 1024;
const PRODUCERS: usize = 64;
const PUTS_EACH: usize = 20;

/// Opens a CommitLog of `segment_size` segments on `directory` and runs the loop on it (the
/// clock fixed at 42), taking puts from a channel of `capacity`.
async fn start_writer(
    directory: SimDirectory,
    segment_size: u64,
    capacity: usize,
    mode: FlushDiskType,
) -> (
    mpsc::Sender<PutRequest>,
    glommio::Task<(CommitLog<SimDirectory>, GroupCommitStats)>,
) {
    let log = CommitLog::open(directory, segment_size, 0, HashMap::new())
        .await
        .unwrap();
    let (sender, receiver) = mpsc::channel::<PutRequest>(capacity);
    let writer = glommio::spawn_local(run_group_commit(log, receiver, mode, || 42));
    (sender, writer)
}

/// As [`start_writer`], the loop reporting to `observer`, which its task hands back with the
/// loop's statistics.
async fn start_observed_writer<W: CommitObserver + 'static>(
    directory: SimDirectory,
    segment_size: u64,
    capacity: usize,
    mode: FlushDiskType,
    mut observer: W,
) -> (
    mpsc::Sender<PutRequest>,
    glommio::Task<(GroupCommitStats, W)>,
) {
    let log = CommitLog::open(directory, segment_size, 0, HashMap::new())
        .await
        .unwrap();
    let (sender, receiver) = mpsc::channel::<PutRequest>(capacity);
    let writer = glommio::spawn_local(async move {
        let (_, stats) = run_group_commit_with(log, receiver, mode, || 42, &mut observer).await;
        (stats, observer)
    });
    (sender, writer)
}

/// Sends `message` to the loop; its answer comes on the receiver returned.
async fn send_put(
    sender: &mut mpsc::Sender<PutRequest>,
    message: PutMessage,
) -> oneshot::Receiver<PutResult> {
    let (reply, answer) = oneshot::channel();
    sender
        .send(PutRequest::One { message, reply })
        .await
        .unwrap();
    answer
}

/// Sends `messages` to the loop as one batch put; its answer comes on the receiver returned.
async fn send_batch(
    sender: &mut mpsc::Sender<PutRequest>,
    messages: Vec<PutMessage>,
) -> oneshot::Receiver<BatchPutResult> {
    let (reply, answer) = oneshot::channel();
    sender
        .send(PutRequest::batch(messages, reply))
        .await
        .unwrap();
    answer
}

/// Many puts and batches carry their bodies' CRCs, computed on the shard that made them: the
/// writer stores those as given. Without one per message, it computes them itself.
#[test]
fn many_and_batch_puts_are_stored_with_the_body_crcs_they_carry() {
    use ferromq::store::message::body_crc32;
    use futures::StreamExt;
    let directory = SimDirectory::default();
    let files = directory.clone();
    let records = ferromq_shards::testing::run_local(async move {
        let (mut sender, writer) =
            start_writer(directory, SEGMENT_SIZE, 16, FlushDiskType::SyncFlush).await;
        let mut stored = Vec::new();
        // Marked CRCs (not the bodies'), to see that the writer takes them; then none.
        for body_crcs in [vec![11, 22, 33], Vec::new()] {
            let messages: Vec<PutMessage> = (0..3).map(|seq| message(0, seq)).collect();
            let (reply, mut answers) = mpsc::unbounded();
            let request = PutRequest::Many {
                messages,
                body_crcs,
                reply,
            };
            sender.send(request).await.unwrap();
            while let Some(part) = answers.next().await {
                stored.extend(part.into_iter().map(Result::unwrap));
            }
        }
        for body_crcs in [vec![44, 55, 66], vec![1]] {
            let messages: Vec<PutMessage> = (0..3).map(|seq| message(0, seq)).collect();
            let (reply, answer) = oneshot::channel();
            let request = PutRequest::Batch {
                messages,
                body_crcs,
                reply,
            };
            sender.send(request).await.unwrap();
            stored.extend(answer.await.unwrap().unwrap());
        }
        drop(sender);
        writer.await;
        stored
    });
    let crcs: Vec<i32> = records
        .iter()
        .map(|appended| {
            let at = usize::try_from(appended.physical_offset).unwrap();
            let bytes = files.0.borrow()[&0].durable_bytes(at, appended.size);
            match decode_record(&bytes, false) {
                Ok(Record::Message { record, .. }) => record.body_crc,
                other => panic!("no record at {at}: {other:?}"),
            }
        })
        .collect();
    let computed: Vec<i32> = (0..3)
        .map(|seq| body_crc32(&message(0, seq).body))
        .collect();
    assert_eq!(crcs[..3], [11, 22, 33]);
    assert_eq!(crcs[3..6], computed[..]);
    assert_eq!(crcs[6..9], [44, 55, 66]);
    assert_eq!(crcs[9..], computed[..], "not one per message: all computed");
}

fn message(producer: usize, seq: usize) -> PutMessage {
    let queue_id = i32::try_from(producer % 4).unwrap();
    common::put_message(queue_id, format!("p{producer}-m{seq}").as_bytes())
}

/// Runs the loop with `PRODUCERS` concurrent producers; returns per-put outcomes and stats.
fn drive(directory: SimDirectory, mode: FlushDiskType) -> (Vec<bool>, GroupCommitStats) {
    ferromq_shards::testing::run_local(async move {
        let (sender, writer) = start_writer(directory, SEGMENT_SIZE, 1024, mode).await;
        let mut producers = Vec::new();
        for producer in 0..PRODUCERS {
            let mut sender = sender.clone();
            producers.push(glommio::spawn_local(async move {
                let mut outcomes = Vec::new();
                for seq in 0..PUTS_EACH {
                    let answer = send_put(&mut sender, message(producer, seq)).await;
                    outcomes.push(answer.await.unwrap().is_ok());
                }
                outcomes
            }));
        }
        drop(sender);
        let mut outcomes = Vec::new();
        for producer in producers {
            outcomes.extend(producer.await);
        }
        let (_log, stats) = writer.await;
        (outcomes, stats)
    })
}

/// The directory's first segment (made if needed), to set up faults before the loop runs.
fn first_segment(directory: &SimDirectory) -> ferromq_uring::sim::SimSegment {
    use ferromq::store::commit_log::SegmentOpener;
    futures_lite::future::block_on(directory.open(0, SEGMENT_SIZE)).unwrap()
}

fn recovered_bodies(directory: &SimDirectory) -> usize {
    futures_lite::future::block_on(async {
        let starts: Vec<u64> = directory.0.borrow().keys().copied().collect();
        let (_end, queue_offsets) = recover(directory, SEGMENT_SIZE, &starts).await.unwrap();
        usize::try_from(queue_offsets.values().sum::<i64>()).unwrap()
    })
}

#[test]
fn sync_flush_batches_puts_and_every_answered_put_survives_power_loss() {
    let directory = SimDirectory::default();
    let (outcomes, stats) = drive(directory.clone(), FlushDiskType::SyncFlush);
    assert!(outcomes.iter().all(|ok| *ok));
    assert_eq!(stats.puts as usize, PRODUCERS * PUTS_EACH);
    assert!(
        stats.syncs * 4 < stats.puts,
        "group commit should batch: {} syncs for {} puts",
        stats.syncs,
        stats.puts
    );
    for file in directory.0.borrow().values() {
        file.crash(CrashKeep::Nothing);
    }
    assert_eq!(recovered_bodies(&directory), PRODUCERS * PUTS_EACH);
}

#[test]
fn async_flush_answers_after_the_write_and_syncs_on_a_timer() {
    let directory = SimDirectory::default();
    let mode = FlushDiskType::AsyncFlush {
        interval: Duration::from_millis(20),
    };
    let (outcomes, stats) = drive(directory.clone(), mode);
    assert!(outcomes.iter().all(|ok| *ok));
    assert!(stats.syncs >= 1, "the loop syncs before it ends");
    for file in directory.0.borrow().values() {
        file.crash(CrashKeep::Nothing);
    }
    assert_eq!(recovered_bodies(&directory), PRODUCERS * PUTS_EACH);
}

#[test]
fn failed_sync_fails_its_batch_and_every_later_put() {
    let directory = SimDirectory::default();
    // Opening the first segment reads its tail (operation 1); the first batch's write is
    // operation 2 and its sync operation 3.
    first_segment(&directory).fail_operation(3);
    let (outcomes, _stats) = drive(directory, FlushDiskType::SyncFlush);
    let first_failure = outcomes.iter().position(|ok| !ok);
    assert!(
        first_failure.is_some(),
        "the injected failure reached a put"
    );
    let failed = outcomes.iter().filter(|ok| !**ok).count();
    assert!(
        failed >= PRODUCERS * PUTS_EACH - PRODUCERS,
        "puts after the failure are refused"
    );
}

#[test]
fn async_flush_syncs_on_schedule_under_continuous_load() {
    // One producer never lets the channel go quiet for a whole interval; the periodic sync
    // must happen anyway, not only when the loop ends.
    let directory = SimDirectory::default();
    let stats = ferromq_shards::testing::run_local(async move {
        let mode = FlushDiskType::AsyncFlush {
            interval: Duration::from_millis(10),
        };
        let (mut sender, writer) = start_writer(directory, SEGMENT_SIZE, 16, mode).await;
        let deadline = std::time::Instant::now() + Duration::from_millis(200);
        let mut seq = 0;
        while std::time::Instant::now() < deadline {
            let answer = send_put(&mut sender, message(0, seq)).await;
            assert!(answer.await.unwrap().is_ok());
            seq += 1;
        }
        drop(sender);
        writer.await.1
    });
    assert!(
        stats.syncs >= 5,
        "only {} syncs in 200 ms at a 10 ms interval",
        stats.syncs
    );
}

#[test]
fn puts_arriving_during_a_sync_are_encoded_meanwhile_and_answered_after_their_own_sync() {
    // The disk's sync takes 64 scheduler turns. Put A starts a write job; puts B1..B8 arrive
    // while its sync runs: they are appended at once (the loop does not wait for the disk),
    // then written and synced together by the next job. Every answer must find its record
    // in the durable image at the moment it arrives, and the B's must come after A's.
    let directory = SimDirectory::default();
    let (stats, answers) = ferromq_shards::testing::run_local({
        let directory = directory.clone();
        async move {
            use ferromq::store::commit_log::SegmentOpener;
            let segment = directory.open(0, SEGMENT_SIZE).await.unwrap();
            segment.set_sync_turns(64);
            let log = CommitLog::open(directory, SEGMENT_SIZE, 0, HashMap::new())
                .await
                .unwrap();
            let (mut sender, receiver) = mpsc::channel::<PutRequest>(64);
            // The loop reads the clock once per group of puts it takes: note whether the
            // disk was syncing then.
            let taken_while_syncing = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let clock = {
                let taken = taken_while_syncing.clone();
                let segment = segment.clone();
                move || {
                    taken.borrow_mut().push(segment.is_syncing());
                    42
                }
            };
            let writer = glommio::spawn_local(run_group_commit(
                log,
                receiver,
                FlushDiskType::SyncFlush,
                clock,
            ));
            let mut pending = Vec::new();
            for seq in 0..9 {
                let answer = send_put(&mut sender, message(0, seq)).await;
                pending.push(glommio::spawn_local({
                    let segment = segment.clone();
                    async move {
                        let appended = answer.await.unwrap().unwrap();
                        let at = usize::try_from(appended.physical_offset).unwrap();
                        let durable = segment.durable_bytes(at, appended.size);
                        let decoded = ferromq::store::message::decode_record(&durable, true);
                        let Ok(ferromq::store::message::Record::Message { record, .. }) = decoded
                        else {
                            panic!("put {seq} answered before its record was durable");
                        };
                        assert_eq!(record.body, format!("p0-m{seq}").as_bytes());
                        (seq, std::time::Instant::now())
                    }
                }));
                if seq == 0 {
                    // Let the writer take A and start its job.
                    for _ in 0..4 {
                        futures_lite::future::yield_now().await;
                    }
                }
            }
            let mut answers = Vec::new();
            for answer in pending {
                answers.push(answer.await);
            }
            drop(sender);
            let stats = writer.await.1;
            assert!(
                taken_while_syncing.borrow().iter().any(|syncing| *syncing),
                "puts were taken only while the disk was idle: {:?}",
                taken_while_syncing.borrow()
            );
            (stats, answers)
        }
    });
    assert_eq!(stats.puts, 9);
    assert_eq!(
        (stats.batches, stats.syncs),
        (2, 2),
        "A alone, then the eight that arrived during its sync"
    );
    let a_answered = answers[0].1;
    assert!(answers[1..].iter().all(|(_, at)| *at >= a_answered));
}

/// Store times the loop reports synced, as it reports them.
#[derive(Clone, Default)]
struct SyncedTimes(std::rc::Rc<std::cell::RefCell<Vec<i64>>>);

impl CommitObserver for SyncedTimes {
    fn synced(&mut self, store_timestamp: i64) {
        self.0.borrow_mut().push(store_timestamp);
    }
}

#[test]
fn async_flush_answers_puts_while_the_periodic_sync_runs() {
    // ASYNC_FLUSH, a sync every millisecond, and a disk whose sync takes 200,000 scheduler
    // turns. Put A is written and answered; the periodic sync starts. Twenty puts sent
    // while it runs must each be written and answered before it ends (a put never waits
    // for a sync it did not ask for), and the sync must claim only A's store time: the
    // others were written after it started. At the end every put survives a power loss.
    const TURNS: usize = 200_000;
    let directory = SimDirectory::default();
    let (synced, answered_while_syncing) = ferromq_shards::testing::run_local({
        let directory = directory.clone();
        async move {
            use ferromq::store::commit_log::SegmentOpener;
            let segment = directory.open(0, SEGMENT_SIZE).await.unwrap();
            segment.set_sync_turns(TURNS);
            let log = CommitLog::open(directory, SEGMENT_SIZE, 0, HashMap::new())
                .await
                .unwrap();
            let (mut sender, receiver) = mpsc::channel::<PutRequest>(64);
            let clock = std::cell::Cell::new(0);
            let mode = FlushDiskType::AsyncFlush {
                interval: Duration::from_millis(1),
            };
            let observer = SyncedTimes::default();
            let writer = glommio::spawn_local({
                let mut observer = observer.clone();
                async move {
                    let now = || {
                        clock.set(clock.get() + 1);
                        clock.get()
                    };
                    run_group_commit_with(log, receiver, mode, now, &mut observer)
                        .await
                        .1
                }
            });
            let first = send_put(&mut sender, message(0, 0)).await;
            assert!(first.await.unwrap().is_ok());
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !segment.is_syncing() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "no periodic sync began"
                );
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
            let mut answered_while_syncing = 0;
            for seq in 1..=20 {
                let answer = send_put(&mut sender, message(0, seq)).await;
                assert!(answer.await.unwrap().is_ok(), "put {seq}");
                answered_while_syncing += usize::from(segment.is_syncing());
            }
            let synced_during = observer.0.borrow().clone();
            assert!(
                synced_during.is_empty(),
                "the sync claimed {synced_during:?} before it ended"
            );
            while segment.is_syncing() {
                assert!(std::time::Instant::now() < deadline, "the sync never ended");
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
            drop(sender);
            let stats = writer.await;
            assert_eq!(stats.puts, 21);
            let synced = observer.0.borrow().clone();
            (synced, answered_while_syncing)
        }
    });
    assert_eq!(
        answered_while_syncing, 20,
        "every put answered during the sync"
    );
    assert_eq!(
        synced.first(),
        Some(&1),
        "the first sync covers put A's store time only: {synced:?}"
    );
    assert!(synced.windows(2).all(|w| w[0] < w[1]), "{synced:?}");
    for file in directory.0.borrow().values() {
        file.crash(CrashKeep::Nothing);
    }
    assert_eq!(recovered_bodies(&directory), 21);
}

#[test]
fn puts_waiting_for_the_next_job_are_bounded_in_bytes() {
    // 72 puts of 1 MiB arrive at once, and each sync takes a while. While two jobs are in
    // flight the loop appends what waits, but no more than `BATCH_BYTES_MAX` that no job has
    // taken, so the tail held in memory stays bounded: at any time, what is appended and not
    // committed is that, the two jobs in flight, the put that crossed the bound and the one
    // a job's end cut in two (committed only once whole).
    const BIG_SEGMENT: u64 = 128 << 20;
    const PUTS: usize = 72;
    let directory = SimDirectory::default();
    {
        use ferromq::store::commit_log::SegmentOpener;
        let first = futures_lite::future::block_on(directory.open(0, BIG_SEGMENT)).unwrap();
        first.set_sync_turns(64);
    }
    let (stats, held) = ferromq_shards::testing::run_local(async move {
        let mode = FlushDiskType::SyncFlush;
        let held = HeldBytes::default();
        let (mut sender, writer) =
            start_observed_writer(directory, BIG_SEGMENT, PUTS, mode, held).await;
        let body = vec![b'b'; 1 << 20];
        let mut answers = Vec::new();
        for _ in 0..PUTS {
            let answer = send_put(&mut sender, common::put_message(0, &body)).await;
            answers.push(answer);
        }
        for answer in answers {
            let a = answer.await.unwrap();
            assert!(a.is_ok(), "{a:?}");
        }
        drop(sender);
        writer.await
    });
    use ferromq::store::flush::{BATCH_BYTES_MAX, JOBS_IN_FLIGHT_MAX, JOB_BYTES_MAX};
    let put = (1 << 20) + 200;
    let bound = BATCH_BYTES_MAX + JOBS_IN_FLIGHT_MAX * JOB_BYTES_MAX + 2 * put;
    let most_held = held.most;
    assert_eq!(stats.puts as usize, PUTS);
    assert!(PUTS * put > bound, "the puts are more than the bound");
    assert!(most_held <= bound, "{most_held} held, bound {bound}");
    assert!(
        most_held > BATCH_BYTES_MAX,
        "{most_held}: the test reached the bound"
    );
}

/// The most bytes appended and not yet committed, at any time.
#[derive(Default)]
struct HeldBytes {
    appended_end: u64,
    committed_end: u64,
    most: usize,
}

impl CommitObserver for HeldBytes {
    fn appended(&mut self, _message: &PutMessage, appended: &Appended, _stored: i64) {
        self.appended_end = appended.physical_offset + appended.size as u64;
        let held = usize::try_from(self.appended_end - self.committed_end).unwrap();
        self.most = self.most.max(held);
    }

    async fn committed(&mut self, end: u64) {
        self.committed_end = end;
    }
}

#[test]
fn a_failed_sync_fails_the_puts_encoded_while_it_ran() {
    // Put A's job fails in its sync, which takes 64 turns; B1..B8 were appended meanwhile.
    // None of them may be answered "stored": A's sync failed, and the B's can never be
    // written (the log is poisoned). Later puts are refused too.
    let directory = SimDirectory::default();
    let outcomes = ferromq_shards::testing::run_local({
        let directory = directory.clone();
        async move {
            use ferromq::store::commit_log::SegmentOpener;
            let segment = directory.open(0, SEGMENT_SIZE).await.unwrap();
            segment.set_sync_turns(64);
            // Operation 1 reads the tail at open, 2 is A's write, 3 its sync.
            segment.fail_operation(3);
            let mode = FlushDiskType::SyncFlush;
            let (mut sender, writer) = start_writer(directory, SEGMENT_SIZE, 64, mode).await;
            let mut answers = Vec::new();
            for seq in 0..10 {
                let answer = send_put(&mut sender, message(0, seq)).await;
                answers.push(answer);
                if seq == 0 {
                    for _ in 0..4 {
                        futures_lite::future::yield_now().await;
                    }
                }
            }
            let mut outcomes = Vec::new();
            for answer in answers {
                outcomes.push(answer.await.unwrap().map(|_| ()).map_err(|e| e.to_string()));
            }
            drop(sender);
            let stats = writer.await.1;
            assert_eq!(stats.batches, 1, "only A's job ran: the B's waited for it");
            outcomes
        }
    });
    assert!(
        outcomes.iter().all(Result::is_err),
        "no put may be answered stored: {outcomes:?}"
    );
    for file in directory.0.borrow().values() {
        file.crash(CrashKeep::Nothing);
    }
    assert_eq!(recovered_bodies(&directory), 0);
}

#[test]
fn with_writes_durable_on_completion_sync_flush_issues_no_sync_and_loses_nothing() {
    // Segments opened with O_DSYNC (simulated): a SYNC_FLUSH job is its write alone, and
    // every answered put is still there after a power loss.
    let directory = SimDirectory::default();
    first_segment(&directory).set_durable_writes();
    let (outcomes, stats) = drive(directory.clone(), FlushDiskType::SyncFlush);
    assert!(outcomes.iter().all(|ok| *ok));
    assert!(stats.batches > 1);
    // Only the first segment is O_DSYNC (the sim opens the others plain, and syncs them).
    assert!(directory.0.borrow().len() > 1, "the puts rolled a segment");
    assert_eq!(
        directory.0.borrow()[&0].sync_calls(),
        0,
        "the O_DSYNC segment was never synced"
    );
    assert!(directory.0.borrow()[&SEGMENT_SIZE].sync_calls() > 0);
    for file in directory.0.borrow().values() {
        file.crash(CrashKeep::Nothing);
    }
    assert_eq!(recovered_bodies(&directory), PRODUCERS * PUTS_EACH);
}

#[test]
fn after_a_failed_async_write_the_loop_neither_spins_nor_hangs_at_shutdown() {
    // ASYNC_FLUSH: the first put is written, the second put's write fails. The data of the
    // first is unsynced and can never be synced now; the loop must answer, then end when
    // the channel closes, instead of retrying the sync for ever. The executor runs on its
    // own thread so that a loop that never yields fails this test instead of hanging it.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let directory = SimDirectory::default();
        // Operation 1 reads the tail at open, 2 is the first write, 3 the second.
        first_segment(&directory).fail_operation(3);
        let puts = ferromq_shards::testing::run_local(async move {
            let mode = FlushDiskType::AsyncFlush {
                interval: Duration::from_millis(5),
            };
            let (mut sender, writer) = start_writer(directory, SEGMENT_SIZE, 4, mode).await;
            for (seq, stored) in [(0, true), (1, false)] {
                let answer = send_put(&mut sender, message(0, seq)).await;
                assert_eq!(answer.await.unwrap().is_ok(), stored, "put {seq}");
            }
            // Past a sync interval, then close.
            glommio::timer::sleep(Duration::from_millis(20)).await;
            drop(sender);
            writer.await.1.puts
        });
        let _ = done.send(puts);
    });
    let puts = finished
        .recv_timeout(Duration::from_secs(10))
        .expect("the loop did not end after the channel closed");
    assert_eq!(puts, 2);
}

#[test]
fn under_load_two_jobs_write_disjoint_blocks_at_once_and_answers_wait_for_durability() {
    // 16 producers each put 40 messages of 20-90 KiB, waiting for each answer, while every
    // write and sync takes scheduler turns: several jobs' worth wait at any time. The loop
    // keeps two jobs of whole blocks in flight, across segment rolls; the sim fails two
    // writes in flight that share a sector. A put is answered only once its whole record
    // is in the durable image, even when it straddles the end of a job's blocks, and what
    // the loop reports committed (for dispatch) always ends at a record's end.
    const SEGMENT: u64 = 8 << 20;
    const SEGMENTS: u64 = 6;
    const PRODUCERS: usize = 16;
    const PUTS_EACH: usize = 40;
    let directory = SimDirectory::default();
    for start in (0..SEGMENTS).map(|index| index * SEGMENT) {
        use ferromq::store::commit_log::SegmentOpener;
        let file = futures_lite::future::block_on(directory.open(start, SEGMENT)).unwrap();
        file.set_write_turns(8);
        file.set_sync_turns(8);
    }
    let files = directory.clone();
    let checked = directory.clone();
    let answered = ferromq_shards::testing::run_local(async move {
        let mode = FlushDiskType::SyncFlush;
        let observer = RecordEnds::default();
        let (sender, writer) =
            start_observed_writer(directory, SEGMENT, 1024, mode, observer).await;
        let mut producers = Vec::new();
        for producer in 0..PRODUCERS {
            let mut sender = sender.clone();
            let files = files.clone();
            producers.push(glommio::spawn_local(async move {
                let mut answered = 0;
                for seq in 0..PUTS_EACH {
                    let size = 20_000 + (producer * 7919 + seq * 104_729) % 70_000;
                    let body = vec![u8::try_from(seq % 251).unwrap(); size];
                    let answer = send_put(&mut sender, common::put_message(0, &body)).await;
                    let appended = answer.await.unwrap().unwrap();
                    let start = appended.physical_offset - appended.physical_offset % SEGMENT;
                    let at = usize::try_from(appended.physical_offset - start).unwrap();
                    let durable = files.0.borrow()[&start].durable_bytes(at, appended.size);
                    match decode_record(&durable, true) {
                        Ok(Record::Message { record, .. }) => assert_eq!(record.body, &body[..]),
                        other => panic!("answered put not durable: {other:?}"),
                    }
                    answered += 1;
                }
                answered
            }));
        }
        drop(sender);
        let mut answered = 0;
        for producer in producers {
            answered += producer.await;
        }
        assert!(writer.await.1.commits > 1);
        answered
    });
    assert_eq!(answered, PRODUCERS * PUTS_EACH);
    let most = checked
        .0
        .borrow()
        .values()
        .map(|f| f.most_writes_in_flight())
        .max();
    assert_eq!(most, Some(ferromq::store::flush::JOBS_IN_FLIGHT_MAX));
}

/// Checks that every committed end is the end of a record (or of a segment) appended.
#[derive(Default)]
struct RecordEnds {
    ends: std::collections::HashSet<u64>,
    commits: usize,
}

impl CommitObserver for RecordEnds {
    fn appended(&mut self, _message: &PutMessage, appended: &Appended, _stored: i64) {
        self.ends.insert(appended.physical_offset);
        self.ends
            .insert(appended.physical_offset + appended.size as u64);
    }

    async fn committed(&mut self, end: u64) {
        assert!(
            self.ends.contains(&end),
            "committed end {end} is inside a record"
        );
        self.commits += 1;
    }
}

/// Java stores a batch (SEND_BATCH_MESSAGE) as one put: whole, in one segment, with
/// consecutive queue offsets. Here batches of 10 records of 1 KiB race single puts into one
/// queue on 64 KiB segments, so several batches meet a segment's end and must roll whole.
#[test]
fn a_batch_is_stored_whole_in_one_segment_with_consecutive_queue_offsets() {
    const BATCHES: usize = 4;
    const ROUNDS: usize = 6;
    const BATCH_LEN: usize = 10;
    let directory = SimDirectory::default();
    let for_writer = directory.clone();
    let (batches, singles) = ferromq_shards::testing::run_local(async move {
        let (sender, writer) =
            start_writer(for_writer, SEGMENT_SIZE, 64, FlushDiskType::SyncFlush).await;
        let mut tasks = Vec::new();
        for producer in 0..BATCHES {
            let mut sender = sender.clone();
            tasks.push(glommio::spawn_local(async move {
                let mut answers = Vec::new();
                for round in 0..ROUNDS {
                    let messages = (0..BATCH_LEN)
                        .map(|i| {
                            let body = format!("b{producer}-r{round}-m{i}-").repeat(64);
                            common::put_message(0, body.as_bytes())
                        })
                        .collect();
                    let answer = send_batch(&mut sender, messages).await;
                    answers.push(answer.await.unwrap().unwrap());
                }
                answers
            }));
        }
        // The last sender: the loop ends when the singles are done and it drops.
        let mut sender = sender;
        let singles = glommio::spawn_local(async move {
            let mut answers = Vec::new();
            for seq in 0..BATCHES * ROUNDS * 3 {
                let answer = send_put(&mut sender, message(0, seq)).await;
                answers.push(answer.await.unwrap().unwrap());
            }
            answers
        });
        let mut batches = Vec::new();
        for task in tasks {
            batches.extend(task.await);
        }
        let singles = singles.await;
        let (_log, _stats) = writer.await;
        (batches, singles)
    });
    let mut queue_offsets: Vec<i64> = singles.iter().map(|put| put.queue_offset).collect();
    let mut rolled = 0;
    for batch in &batches {
        assert_eq!(batch.len(), BATCH_LEN);
        let first = batch[0];
        for (i, record) in batch.iter().enumerate() {
            let i = i64::try_from(i).unwrap();
            assert_eq!(record.queue_offset, first.queue_offset + i, "{batch:?}");
            queue_offsets.push(record.queue_offset);
        }
        for pair in batch.windows(2) {
            let end = pair[0].physical_offset + pair[0].size as u64;
            assert_eq!(
                pair[1].physical_offset, end,
                "records back to back: {batch:?}"
            );
        }
        let last = batch[BATCH_LEN - 1];
        let end = last.physical_offset + last.size as u64;
        assert_eq!(
            first.physical_offset / SEGMENT_SIZE,
            (end - 1) / SEGMENT_SIZE,
            "a batch lies in one segment: {batch:?}"
        );
        if first.physical_offset % SEGMENT_SIZE == 0 && first.physical_offset > 0 {
            rolled += 1;
        }
    }
    assert!(rolled > 0, "some batch should have started a segment");
    queue_offsets.sort_unstable();
    let expected: Vec<i64> = (0..i64::try_from(queue_offsets.len()).unwrap()).collect();
    assert_eq!(queue_offsets, expected, "every queue offset once, no gap");
    // Answered under SYNC_FLUSH: all of it survives a power loss.
    for file in directory.0.borrow().values() {
        file.crash(CrashKeep::Nothing);
    }
    assert_eq!(
        recovered_bodies(&directory),
        BATCHES * ROUNDS * (BATCH_LEN + 3)
    );
}

/// A batch that cannot fit one segment is refused whole (Java's MESSAGE_ILLEGAL for a
/// message over the size), and the next put lands where the batch would have.
#[test]
fn a_batch_larger_than_a_segment_is_refused_and_leaves_no_trace() {
    let directory = SimDirectory::default();
    let (refused, empty, next) = ferromq_shards::testing::run_local(async move {
        let (mut sender, writer) =
            start_writer(directory, SEGMENT_SIZE, 64, FlushDiskType::SyncFlush).await;
        let too_many = (0..70)
            .map(|i| common::put_message(1, &[b'x'; 1024][..1000 + i % 3]))
            .collect();
        let refused = send_batch(&mut sender, too_many).await.await.unwrap();
        let empty = send_batch(&mut sender, Vec::new()).await.await.unwrap();
        let next = send_put(&mut sender, message(1, 0)).await.await.unwrap();
        drop(sender);
        let (log, _stats) = writer.await;
        assert_eq!(log.flushed_offset(), log.write_offset());
        (refused, empty, next)
    });
    assert!(
        matches!(refused, Err(StoreError::TooLarge { segment_size, .. }) if segment_size == SEGMENT_SIZE),
        "{refused:?}"
    );
    assert_eq!(empty.unwrap(), Vec::new());
    let next = next.unwrap();
    assert_eq!((next.physical_offset, next.queue_offset), (0, 0));
}

/// A job of whole blocks takes at most the size it is given (at least one block); the next
/// takes what follows and may be in flight with it. A job of everything holds its padded last
/// block; a job started while it runs writes what begins with that block only after it.
/// All four run at once (the sim fails two writes of one sector in flight together) and land
/// every byte where it was appended.
#[test]
fn a_job_of_whole_blocks_takes_at_most_its_size_and_the_next_starts_at_once() {
    use ferromq_uring::sim::SECTOR_SIZE;
    const FIRST: usize = 10_000;
    const MORE: usize = 3_000;
    let directory = SimDirectory::default();
    {
        use ferromq::store::commit_log::SegmentOpener;
        let file = futures_lite::future::block_on(directory.open(0, SEGMENT_SIZE)).unwrap();
        // Each write takes scheduler turns, so that writes started together overlap.
        file.set_write_turns(4);
    }
    let files = directory.clone();
    let bytes: Vec<u8> = (0..FIRST + MORE).map(|i| (i % 251) as u8).collect();
    let appended = bytes.clone();
    ferromq_shards::testing::run_local(async move {
        let mut writer = SegmentWriter::open(directory, SEGMENT_SIZE, 0)
            .await
            .unwrap();
        writer.append(&appended[..FIRST]).unwrap();
        let unissued = |writer: &SegmentWriter<SimDirectory>| {
            usize::try_from(writer.unissued_bytes()).unwrap()
        };

        let most = 3 * SECTOR_SIZE + 100;
        let first = writer.start_write(true, JobExtent::WholeBlocks { most });
        let first = first.unwrap().expect("a job");
        assert_eq!(unissued(&writer), FIRST - 3 * SECTOR_SIZE, "3 whole blocks");

        let second = writer.start_write(true, JobExtent::WholeBlocks { most: 0 });
        let second = second.unwrap().expect("a job");
        assert_eq!(
            unissued(&writer),
            FIRST - 4 * SECTOR_SIZE,
            "one block at least"
        );

        // Ends inside a block, which it writes padded and holds.
        let third = writer.start_write(true, JobExtent::Everything);
        let third = third.unwrap().expect("a job");
        assert_eq!(unissued(&writer), 0);

        // Begins with the block the third holds.
        writer.append(&appended[FIRST..]).unwrap();
        let fourth = writer.start_write(true, JobExtent::WholeBlocks { most: 1 << 20 });
        let fourth = fourth.unwrap().expect("a job");
        assert!(unissued(&writer) < SECTOR_SIZE, "all whole blocks taken");

        let (first, second, third, fourth) =
            futures::future::join4(first.run(), second.run(), third.run(), fourth.run()).await;
        assert_eq!(writer.finish_write(first).unwrap(), 3 * SECTOR_SIZE as u64);
        assert_eq!(writer.finish_write(second).unwrap(), 4 * SECTOR_SIZE as u64);
        assert_eq!(writer.finish_write(third).unwrap(), FIRST as u64);
        let whole = (FIRST + MORE) / SECTOR_SIZE * SECTOR_SIZE;
        assert_eq!(writer.finish_write(fourth).unwrap(), whole as u64);
        assert_eq!(writer.flush().await.unwrap(), (FIRST + MORE) as u64);
    });
    let file = files.0.borrow()[&0].clone();
    assert_eq!(file.durable_bytes(0, FIRST + MORE), bytes);
    let padding = (FIRST + MORE).next_multiple_of(SECTOR_SIZE) - (FIRST + MORE);
    assert!(
        file.durable_bytes(FIRST + MORE, padding)
            .iter()
            .all(|&b| b == 0),
        "the last block is padded with zeros"
    );
    assert!(file.most_writes_in_flight() >= 3, "the jobs wrote at once");
}

/// Appends `len` bytes to `writer`'s tail.
fn append_bytes(writer: &mut SegmentWriter<SimDirectory>, len: usize) {
    writer.append(&vec![7u8; len]).unwrap();
}

/// Starts a job that writes and syncs everything appended.
fn start_everything(writer: &mut SegmentWriter<SimDirectory>) -> WriteJob<SimSegment> {
    writer
        .start_write(true, JobExtent::Everything)
        .unwrap()
        .unwrap()
}

/// The tail grows to hold what is appended, and the tail after a job starts, and after a roll,
/// is as big as the tail before it: under a steady load tails do not regrow.
#[test]
fn a_new_tail_is_as_big_as_the_one_before_it() {
    use ferromq_uring::sim::SECTOR_SIZE;
    const BIG: usize = 32 * 1024;
    const SEGMENT: u64 = 1 << 20;
    let directory = SimDirectory::default();
    ferromq_shards::testing::run_local(async move {
        let mut writer = SegmentWriter::open(directory, SEGMENT, 0).await.unwrap();
        assert!(
            writer.tail_capacity() < BIG,
            "a new writer's tail starts small"
        );
        append_bytes(&mut writer, SECTOR_SIZE);
        let outcome = start_everything(&mut writer).run().await;
        writer.finish_write(outcome).unwrap();
        append_bytes(&mut writer, BIG);
        let job = start_everything(&mut writer);
        let capacity = writer.tail_capacity();
        assert!(capacity >= BIG, "the tail after a job has {capacity} bytes");
        // Fill the segment to its end, then roll while that job is still in flight.
        let rest = usize::try_from(writer.remaining()).unwrap();
        append_bytes(&mut writer, rest);
        let before = writer.tail_capacity();
        writer.roll().await.unwrap();
        let after = writer.tail_capacity();
        assert!(
            after >= before.min(ferromq::store::segment_writer::TAIL_CAPACITY_MAX),
            "the tail after a roll has {after} bytes"
        );
        let outcome = job.run().await;
        writer.finish_write(outcome).unwrap();
        let outcome = start_everything(&mut writer).run().await;
        writer.finish_write(outcome).unwrap();
        assert_eq!(writer.flushed_offset(), SEGMENT);
    });
}

/// Runs `PRODUCERS` tasks each making `PUTS_EACH` puts one after another through one
/// `PutCoalescer`, with a task between it and the loop noting how many puts each request
/// carries. Returns each producer's answers, those counts and the loop's statistics; the loop
/// must end once the producers are done (the coalescer, dropped, lets go of the channel).
fn drive_coalesced(
    directory: SimDirectory,
    mode: FlushDiskType,
) -> (Vec<Vec<PutResult>>, Vec<usize>, GroupCommitStats) {
    use ferromq::store::put_coalescer::PutCoalescer;
    use futures::StreamExt;
    use std::rc::Rc;
    ferromq_shards::testing::run_local(async move {
        let (mut to_writer, writer) = start_writer(directory, SEGMENT_SIZE, 16, mode).await;
        let (sender, mut requests) = mpsc::channel::<PutRequest>(16);
        let forward = glommio::spawn_local(async move {
            let mut carried = Vec::new();
            while let Some(request) = requests.next().await {
                match &request {
                    PutRequest::Many { messages, .. } => carried.push(messages.len()),
                    _ => panic!("the coalescer sends only many puts"),
                }
                to_writer.send(request).await.unwrap();
            }
            carried
        });
        let coalescer = Rc::new(PutCoalescer::new(sender));
        let mut producers = Vec::new();
        for producer in 0..PRODUCERS {
            let coalescer = Rc::clone(&coalescer);
            producers.push(glommio::spawn_local(async move {
                let mut answers = Vec::new();
                for seq in 0..PUTS_EACH {
                    answers.push(coalescer.put(message(producer, seq)).await);
                }
                answers
            }));
        }
        drop(coalescer);
        let mut answers = Vec::new();
        for producer in producers {
            answers.push(producer.await);
        }
        let stopped = futures::future::select(
            Box::pin(async move { (forward.await, writer.await) }),
            Box::pin(glommio::timer::sleep(Duration::from_secs(20))),
        )
        .await;
        let futures::future::Either::Left(((carried, (_log, stats)), _)) = stopped else {
            panic!("the loop did not end after the coalescer was dropped");
        };
        (answers, carried, stats)
    })
}

#[test]
fn puts_coalesced_on_a_shard_cross_in_few_requests_and_each_is_stored_on_its_own() {
    let directory = SimDirectory::default();
    let (answers, carried, stats) = drive_coalesced(directory.clone(), FlushDiskType::SyncFlush);
    let total = PRODUCERS * PUTS_EACH;
    assert_eq!(
        carried.iter().sum::<usize>(),
        total,
        "every put crossed once"
    );
    assert!(
        carried.len() * 8 < total,
        "puts of one turn go together: {} requests for {total} puts",
        carried.len()
    );
    assert_eq!(
        stats.puts as usize, total,
        "the loop counts puts, not requests"
    );
    // Each producer's puts landed in the order it made them, and each queue's offsets run
    // without a gap or a repeat: every put was appended on its own.
    let mut queue_offsets: HashMap<i32, Vec<i64>> = HashMap::new();
    for (producer, answers) in answers.iter().enumerate() {
        let places: Vec<Appended> = answers.iter().map(|a| *a.as_ref().unwrap()).collect();
        assert!(places
            .windows(2)
            .all(|pair| pair[0].physical_offset < pair[1].physical_offset));
        let queue_id = message(producer, 0).queue_id;
        let offsets = queue_offsets.entry(queue_id).or_default();
        offsets.extend(places.iter().map(|place| place.queue_offset));
    }
    for offsets in queue_offsets.values_mut() {
        offsets.sort_unstable();
        assert!(offsets.iter().copied().eq(0..offsets.len() as i64));
    }
    for file in directory.0.borrow().values() {
        file.crash(CrashKeep::Nothing);
    }
    assert_eq!(recovered_bodies(&directory), total, "answered means synced");
}

#[test]
fn among_coalesced_puts_a_refused_one_is_refused_alone() {
    use ferromq::store::put_coalescer::PutCoalescer;
    let directory = SimDirectory::default();
    let answers = ferromq_shards::testing::run_local(async move {
        let (sender, writer) =
            start_writer(directory, SEGMENT_SIZE, 16, FlushDiskType::SyncFlush).await;
        let coalescer = std::rc::Rc::new(PutCoalescer::new(sender));
        let too_large = vec![b'x'; SEGMENT_SIZE as usize];
        let bodies = [b"before".to_vec(), too_large, b"after".to_vec()];
        // Made in one turn: they cross in one request.
        let puts: Vec<_> = bodies
            .into_iter()
            .map(|body| {
                let coalescer = std::rc::Rc::clone(&coalescer);
                glommio::spawn_local(
                    async move { coalescer.put(common::put_message(2, &body)).await },
                )
            })
            .collect();
        drop(coalescer);
        let mut answers = Vec::new();
        for put in puts {
            answers.push(put.await);
        }
        writer.await;
        answers
    });
    let placed: Vec<_> = answers
        .iter()
        .map(|a| a.as_ref().ok().map(|p| p.queue_offset))
        .collect();
    assert_eq!(placed, [Some(0), None, Some(1)], "{answers:?}");
    assert!(matches!(answers[1], Err(StoreError::TooLarge { .. })));
}

#[test]
fn after_a_failed_sync_every_coalesced_put_is_refused() {
    let directory = SimDirectory::default();
    // As in `failed_sync_fails_its_batch_and_every_later_put`: the first sync fails.
    first_segment(&directory).fail_operation(3);
    let (answers, _carried, _stats) = drive_coalesced(directory.clone(), FlushDiskType::SyncFlush);
    let outcomes: Vec<&PutResult> = answers.iter().flatten().collect();
    let stored = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
    assert!(
        outcomes
            .iter()
            .any(|outcome| matches!(outcome, Err(StoreError::NotWritable))),
        "the failure reached the puts"
    );
    assert_eq!(stored, 0, "nothing is stored after the first sync failed");
}

#[test]
fn a_batch_made_among_coalesced_puts_keeps_its_place() {
    use ferromq::store::put_coalescer::PutCoalescer;
    let directory = SimDirectory::default();
    let (singles, batch) = ferromq_shards::testing::run_local(async move {
        let (sender, writer) =
            start_writer(directory, SEGMENT_SIZE, 16, FlushDiskType::SyncFlush).await;
        let coalescer = std::rc::Rc::new(PutCoalescer::new(sender));
        // Made in one turn, in this order: a put, a batch of two, a put.
        let put = |body: &'static [u8]| {
            let coalescer = std::rc::Rc::clone(&coalescer);
            glommio::spawn_local(async move { coalescer.put(common::put_message(3, body)).await })
        };
        let before = put(b"before");
        let batch = {
            let coalescer = std::rc::Rc::clone(&coalescer);
            glommio::spawn_local(async move {
                let messages = vec![common::put_message(3, b"b1"), common::put_message(3, b"b2")];
                coalescer.put_batch(messages).await
            })
        };
        let after = put(b"after");
        drop(coalescer);
        let singles = [before.await.unwrap(), after.await.unwrap()];
        let batch = batch.await.unwrap();
        writer.await;
        (singles, batch)
    });
    let queue_offsets =
        |places: &[Appended]| places.iter().map(|p| p.queue_offset).collect::<Vec<_>>();
    assert_eq!(queue_offsets(&singles), [0, 3]);
    assert_eq!(queue_offsets(&batch), [1, 2]);
}

/// Puts made in one turn go in requests of at most `COALESCED_PUTS_MAX` puts and
/// `COALESCED_BODY_BYTES_MAX` body bytes (a bigger body alone), in the order made, each
/// carrying the body CRC of every message.
#[test]
fn coalesced_requests_keep_within_their_limits_and_carry_each_body_crc() {
    use ferromq::store::message::body_crc32;
    use ferromq::store::put_coalescer::{
        PutCoalescer, COALESCED_BODY_BYTES_MAX, COALESCED_PUTS_MAX,
    };
    use futures::StreamExt;
    let small = COALESCED_PUTS_MAX + 10;
    let big_body = COALESCED_BODY_BYTES_MAX / 2 + 1;
    let requests = ferromq_shards::testing::run_local(async move {
        let (sender, mut requests) = mpsc::channel::<PutRequest>(16);
        let coalescer = PutCoalescer::new(sender);
        // Made in one turn: small puts, then three bodies of which no two fit together.
        let mut answers = Vec::new();
        for seq in 0..small {
            answers.push(coalescer.put(common::put_message(1, seq.to_string().as_bytes())));
        }
        for fill in [b'a', b'b', b'c'] {
            answers.push(coalescer.put(common::put_message(1, &vec![fill; big_body])));
        }
        let mut seen = Vec::new();
        while seen
            .iter()
            .map(|(bodies, _): &(Vec<Vec<u8>>, _)| bodies.len())
            .sum::<usize>()
            < small + 3
        {
            match requests.next().await {
                Some(PutRequest::Many {
                    messages,
                    body_crcs,
                    ..
                }) => {
                    let bodies: Vec<Vec<u8>> = messages.into_iter().map(|m| m.body).collect();
                    seen.push((bodies, body_crcs));
                }
                other => panic!("expected many puts, got {other:?}"),
            }
        }
        drop(answers);
        seen
    });
    let sizes: Vec<usize> = requests.iter().map(|(bodies, _)| bodies.len()).collect();
    assert_eq!(sizes, [COALESCED_PUTS_MAX, 10 + 1, 1, 1], "{sizes:?}");
    let bodies: Vec<&Vec<u8>> = requests.iter().flat_map(|(bodies, _)| bodies).collect();
    assert_eq!(bodies[0], b"0");
    assert_eq!(bodies[small - 1], (small - 1).to_string().as_bytes());
    assert_eq!(bodies[small + 2][0], b'c', "in the order made");
    for (bodies, crcs) in &requests {
        let expected: Vec<i32> = bodies.iter().map(|body| body_crc32(body)).collect();
        assert_eq!(crcs, &expected);
    }
}
