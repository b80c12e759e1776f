//! The writer loop's ledger of puts appended and not yet answered: which puts a finished
//! write job answers (for many puts handed over together, the part its end covers), where the
//! committed end falls (whole records only), and how big the next job should be, from the
//! bytes lately awaiting answers.
//!
//! Bookkeeping only, no I/O: the loop in `flush` appends, starts jobs and takes their
//! outcomes, and asks the ledger whom to answer and when the next job is due.

use super::{
    BatchPutResult, ManyPutAnswers, PutResult, BATCH_BYTES_MAX, BATCH_PUTS_MAX, JOB_BYTES_MAX,
    JOB_START_BYTES_MAX, JOB_START_BYTES_MIN,
};
use crate::store::commit_log::Appended;
use crate::store::segment_writer::StoreError;
use futures::channel::oneshot;
use std::collections::VecDeque;

/// Where the answer to a put goes.
pub(super) enum Reply {
    One(oneshot::Sender<PutResult>),
    /// With where each record landed.
    Batch(oneshot::Sender<BatchPutResult>, Vec<Appended>),
    /// With the outcomes not sent yet, in order: where each landed, or why it was refused.
    Many(ManyPutAnswers, VecDeque<PutResult>),
}

impl Reply {
    /// Puts this answers: a batch is one, many puts are each one.
    fn puts(&self) -> u64 {
        match self {
            Reply::One(_) | Reply::Batch(..) => 1,
            Reply::Many(_, outcomes) => outcomes.len() as u64,
        }
    }

    /// Answers "stored at" the put's place (for a batch, at its records; for many puts, at
    /// each one's, and the refusals as they were).
    fn stored(self, appended: Appended) {
        // A put whose caller went away needs no answer.
        match self {
            Reply::One(reply) => {
                let _ = reply.send(Ok(appended));
            }
            Reply::Batch(reply, records) => {
                let _ = reply.send(Ok(records));
            }
            Reply::Many(reply, outcomes) => {
                let _ = reply.unbounded_send(outcomes.into());
            }
        }
    }

    /// Answers that the put will never be written: an I/O failure poisoned the CommitLog.
    fn unwritable(self) {
        match self {
            Reply::One(reply) => {
                let _ = reply.send(Err(StoreError::NotWritable));
            }
            Reply::Batch(reply, _) => {
                let _ = reply.send(Err(StoreError::NotWritable));
            }
            Reply::Many(reply, outcomes) => {
                let refused = outcomes
                    .into_iter()
                    .map(|outcome| outcome.and(Err(StoreError::NotWritable)))
                    .collect();
                let _ = reply.unbounded_send(refused);
            }
        }
    }
}

/// Puts appended and not yet answered, in CommitLog order, what was appended since the last
/// job started, and how big the next job should be.
#[derive(Default)]
pub(super) struct Pending {
    waiting: VecDeque<Waiting>,
    /// Record bytes of the puts in `waiting`.
    waiting_bytes: usize,
    /// The most bytes awaiting answers when a job started, lately: raised to the current
    /// figure at each job start, and otherwise decaying by an eighth per job.
    load_bytes: usize,
    /// Puts appended since the last job started.
    pub(super) job_puts: usize,
    /// Record bytes appended that no job has taken yet.
    job_bytes: usize,
}

/// A put appended and not answered yet.
struct Waiting {
    /// Where its records landed, all of them (one, or a whole batch).
    appended: Appended,
    /// Its store time.
    stored: i64,
    reply: Reply,
}

impl Waiting {
    /// End offset of its record.
    fn end(&self) -> u64 {
        self.appended.physical_offset + self.appended.size as u64
    }

    /// For many puts handed over together and ending beyond `end`: answers those whose
    /// records end at or below it (with the refusals among them), and moves the start of what
    /// waits to the first record left. Returns how many puts that answered and how many bytes
    /// it took off the span; `None` if none or this is not many puts.
    fn answer_part_below(&mut self, end: u64) -> Option<(u64, usize)> {
        let Reply::Many(reply, outcomes) = &mut self.reply else {
            return None;
        };
        let below = outcomes
            .iter()
            .take_while(|outcome| match outcome {
                Ok(record) => record.physical_offset + record.size as u64 <= end,
                Err(_) => true,
            })
            .count();
        if below == 0 {
            return None;
        }
        // The span ends beyond `end`, so a record is left.
        let next_start = outcomes
            .iter()
            .skip(below)
            .find_map(|outcome| outcome.as_ref().ok().map(|record| record.physical_offset))?;
        let part: Vec<PutResult> = outcomes.drain(..below).collect();
        let answered = part.len() as u64;
        let _ = reply.unbounded_send(part);
        let done_bytes = usize::try_from(next_start - self.appended.physical_offset)
            .expect("within the span of the puts");
        self.appended.size -= done_bytes;
        self.appended.physical_offset = next_start;
        Some((answered, done_bytes))
    }
}

impl Pending {
    pub(super) fn appended(&mut self, reply: Reply, appended: Appended, stored: i64) {
        self.waiting.push_back(Waiting {
            appended,
            stored,
            reply,
        });
        self.job_puts += 1;
        self.job_bytes += appended.size;
        self.waiting_bytes += appended.size;
    }

    /// A job started; it left `left` bytes appended for later jobs.
    pub(super) fn job_started(&mut self, left: usize) {
        self.load_bytes = (self.load_bytes - self.load_bytes / 8).max(self.waiting_bytes);
        self.job_puts = 0;
        self.job_bytes = left;
    }

    /// Record bytes at which the next job starts: three eighths of the recent load, so that
    /// with two jobs in flight and producers waiting on them, the bytes arriving while one
    /// job writes make the next, and a job waits for most of them.
    ///
    /// Why not a quarter, as before: each `O_DSYNC` write into new extents pays a
    /// synchronous metadata write before the cache flush, so the disk takes 2.1 GB/s in
    /// writes of 512 KiB two at a time, 2.8 in writes of 1 MiB (`ferromq-bench commitlog
    /// --raw-sync-kib`). With 2 MiB awaiting
    /// answers (64 producers of 1 KiB, 32 in flight each), jobs that start at a quarter
    /// carry 0.75 MB, at three eighths 1.1 MB, and the CommitLog bench put about 5% more
    /// through (1.77M/s -> 1.86M/s, the quiet runs of five rotated sittings; a half did no
    /// better than a quarter: the disk's second slot then idles). With 1 MiB awaiting (16
    /// in flight) jobs carry half of it either way, and three eighths did about 2% worse,
    /// within the noise of that host.
    fn job_start_bytes(&self) -> usize {
        (self.load_bytes * 3 / 8).clamp(JOB_START_BYTES_MIN, JOB_START_BYTES_MAX)
    }

    /// Whether enough is appended for a job (if the disk may take one).
    pub(super) fn job_ready(&self) -> bool {
        self.job_bytes >= self.job_start_bytes()
    }

    /// The most bytes a job of whole blocks takes: half the load (the recent one, or the
    /// bytes awaiting answers now if more). The bytes that producers wait on then go out as
    /// two jobs at once, and what arrives while one writes makes the next, instead of one
    /// job taking everything while the disk's second slot stays empty. What a job leaves is
    /// at most about its own size.
    pub(super) fn job_bytes_most(&self) -> usize {
        (self.load_bytes.max(self.waiting_bytes) / 2).clamp(JOB_START_BYTES_MIN, JOB_BYTES_MAX)
    }

    /// Whether no more puts may be appended before a job in flight ends.
    pub(super) fn is_full(&self) -> bool {
        self.job_puts >= BATCH_PUTS_MAX || self.job_bytes >= BATCH_BYTES_MAX
    }

    /// Answers "stored" every put whose record ends at or below `end`; returns how many,
    /// and the store time of the newest.
    pub(super) fn answer_below(&mut self, end: u64) -> (u64, Option<i64>) {
        let covered = self.waiting.partition_point(|put| put.end() <= end);
        let mut answered = 0;
        let mut newest = None;
        for put in self.waiting.drain(..covered) {
            newest = Some(put.stored);
            self.waiting_bytes -= put.appended.size;
            answered += put.reply.puts();
            put.reply.stored(put.appended);
        }
        // Many puts handed over together may end beyond `end`: those below are answered now,
        // not after the next write.
        if let Some(put) = self.waiting.front_mut() {
            if let Some((part, done_bytes)) = put.answer_part_below(end) {
                answered += part;
                newest = Some(put.stored);
                self.waiting_bytes -= done_bytes;
            }
        }
        (answered, newest)
    }

    /// What [`Pending::record_boundary`] answers once [`Pending::answer_below`]`(end)` has
    /// run, computed before it.
    pub(super) fn boundary_once_answered(&self, end: u64) -> u64 {
        let covered = self.waiting.partition_point(|put| put.end() <= end);
        let Some(first) = self.waiting.get(covered) else {
            return end;
        };
        let start = match &first.reply {
            // A part answered below `end` leaves the first record that ends beyond it.
            Reply::Many(_, outcomes) => outcomes
                .iter()
                .filter_map(|outcome| outcome.as_ref().ok())
                .find(|record| record.physical_offset + record.size as u64 > end)
                .map_or(first.appended.physical_offset, |record| {
                    record.physical_offset
                }),
            _ => first.appended.physical_offset,
        };
        start.min(end)
    }

    /// `end` if it is the end of a record, else the start of the record it falls in (always a
    /// put not answered yet: only records of puts are appended outside a roll).
    pub(super) fn record_boundary(&self, end: u64) -> u64 {
        match self.waiting.front() {
            Some(first) => first.appended.physical_offset.min(end),
            None => end,
        }
    }

    /// Refuses every put not answered yet: after an I/O failure they will never be written.
    pub(super) fn refuse_all(&mut self) -> u64 {
        let mut count = 0;
        for put in self.waiting.drain(..) {
            count += put.reply.puts();
            put.reply.unwritable();
        }
        self.waiting_bytes = 0;
        self.job_started(0);
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc::{self, TryRecvError};

    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;

    /// Appends `count` puts of 1 KiB from `offset` on; returns the offset after them and their
    /// answers.
    fn append_puts(
        pending: &mut Pending,
        mut offset: u64,
        count: usize,
    ) -> (u64, Vec<oneshot::Receiver<PutResult>>) {
        let mut answers = Vec::with_capacity(count);
        for _ in 0..count {
            let (reply, answer) = oneshot::channel();
            let appended = Appended {
                physical_offset: offset,
                size: KIB,
                queue_offset: 0,
            };
            pending.appended(Reply::One(reply), appended, 0);
            offset += KIB as u64;
            answers.push(answer);
        }
        (offset, answers)
    }

    #[test]
    fn puts_handed_over_together_are_answered_in_parts_as_writes_cover_them() {
        let mut pending = Pending::default();
        let (before, mut first_answer) = append_puts(&mut pending, 0, 1);
        // Three records of 1 KiB after it, the second refused (it took no room).
        let record = |index: u64| Appended {
            physical_offset: before + index * KIB as u64,
            size: KIB,
            queue_offset: 0,
        };
        let outcomes = VecDeque::from([
            Ok(record(0)),
            Err(StoreError::ShuttingDown),
            Ok(record(1)),
            Ok(record(2)),
        ]);
        let (reply, mut parts) = mpsc::unbounded();
        let span = Appended {
            size: 3 * KIB,
            ..record(0)
        };
        pending.appended(Reply::Many(reply, outcomes), span, 7);
        assert_eq!(pending.waiting_bytes, 4 * KIB);

        // A write ends inside the last record: the put before and the first three answers
        // of the many go now, the refusal with them (it is final).
        let (answered, newest) = pending.answer_below(before + 2 * KIB as u64 + 100);
        assert_eq!((answered, newest), (4, Some(7)));
        assert!(matches!(first_answer[0].try_recv(), Ok(Some(Ok(_)))));
        let part = parts.try_recv().unwrap();
        assert_eq!(part.len(), 3);
        assert_eq!(part[0].as_ref().unwrap().physical_offset, before);
        assert!(matches!(part[1], Err(StoreError::ShuttingDown)));
        assert_eq!(
            part[2].as_ref().unwrap().physical_offset,
            before + KIB as u64
        );
        assert_eq!(pending.waiting_bytes, KIB, "the last record waits");
        assert_eq!(
            pending.record_boundary(before + 2 * KIB as u64 + 100),
            before + 2 * KIB as u64,
            "committed up to the start of the record the write ended in"
        );

        // The next write covers the rest: the last part, then the end of the answers.
        let (answered, _) = pending.answer_below(before + 3 * KIB as u64);
        assert_eq!(answered, 1);
        let part = parts.try_recv().unwrap();
        assert_eq!(part.len(), 1);
        assert_eq!(
            part[0].as_ref().unwrap().physical_offset,
            before + 2 * KIB as u64
        );
        assert!(
            matches!(parts.try_recv(), Err(TryRecvError::Closed)),
            "no more parts"
        );
        assert_eq!(pending.waiting_bytes, 0);
    }

    #[test]
    fn after_a_failure_puts_handed_over_together_keep_their_refusals_and_the_rest_fail() {
        let mut pending = Pending::default();
        let record = Appended {
            physical_offset: 0,
            size: KIB,
            queue_offset: 0,
        };
        let (reply, mut parts) = mpsc::unbounded();
        let outcomes = VecDeque::from([Ok(record), Err(StoreError::ShuttingDown)]);
        pending.appended(Reply::Many(reply, outcomes), record, 0);
        assert_eq!(pending.refuse_all(), 2);
        let part = parts.try_recv().unwrap();
        assert!(matches!(part[0], Err(StoreError::NotWritable)));
        assert!(matches!(part[1], Err(StoreError::ShuttingDown)));
    }

    #[test]
    fn jobs_start_at_three_eighths_of_the_recent_load_within_the_bounds() {
        let mut pending = Pending::default();
        assert_eq!(
            pending.job_start_bytes(),
            JOB_START_BYTES_MIN,
            "no load yet"
        );

        // 4 MiB awaiting answers when a job starts: the next starts at 1 MiB, not before.
        assert_eq!(pending.job_bytes_most(), JOB_START_BYTES_MIN, "no load yet");
        let (end, _answers) = append_puts(&mut pending, 0, 4 * MIB / KIB);
        assert_eq!(
            pending.job_bytes_most(),
            2 * MIB,
            "half of what awaits answers"
        );
        pending.job_started(0);
        assert_eq!(pending.job_start_bytes(), MIB);
        assert_eq!(
            pending.job_bytes_most(),
            2 * MIB,
            "half the load: two jobs carry it"
        );
        let (end, _more) = append_puts(&mut pending, end, MIB / KIB - 1);
        assert!(!pending.job_ready(), "1 MiB less one put is not a job yet");
        let (end, _last) = append_puts(&mut pending, end, 1);
        assert!(pending.job_ready());

        // Everything is answered; from now on 512 KiB await answers at each job start. The
        // load decays by an eighth per job, and jobs come back down to the least size.
        assert_eq!(pending.answer_below(end).0, (5 * MIB / KIB) as u64);
        assert_eq!(pending.waiting_bytes, 0);
        let mut answered = end;
        let (mut end, _answers) = append_puts(&mut pending, end, 512);
        let mut sizes = Vec::new();
        for _ in 0..16 {
            pending.job_started(0);
            sizes.push(pending.job_start_bytes());
            answered += 256 * KIB as u64;
            assert_eq!(pending.answer_below(answered).0, 256);
            (end, _) = append_puts(&mut pending, end, 256);
        }
        assert_eq!(pending.waiting_bytes, 512 * KIB);
        // The load after `jobs` job starts: an eighth off at each.
        let load_after = |jobs: usize| (0..jobs).fold(4 * MIB, |load, _| load - load / 8);
        assert_eq!(
            sizes[0], JOB_START_BYTES_MAX,
            "three eighths of 3.5 MiB is over the most"
        );
        assert_eq!(sizes[3], load_after(4) * 3 / 8, "{sizes:?}");
        assert!(sizes.windows(2).all(|pair| pair[1] <= pair[0]), "{sizes:?}");
        assert_eq!(sizes[15], JOB_START_BYTES_MIN, "{sizes:?}");
    }

    #[test]
    fn bytes_a_job_leaves_count_toward_the_next() {
        let mut pending = Pending::default();
        let (_, _answers) = append_puts(&mut pending, 0, 4 * MIB / KIB);
        // A job of at most 2 MiB took half; the other half is a job's worth at once.
        pending.job_started(2 * MIB);
        assert!(pending.job_ready());
        pending.job_started(0);
        assert!(!pending.job_ready());
    }

    #[test]
    fn refused_puts_leave_no_load_behind() {
        let mut pending = Pending::default();
        let (_, answers) = append_puts(&mut pending, 0, 8);
        assert_eq!(pending.waiting_bytes, 8 * KIB);
        assert_eq!(pending.refuse_all(), 8);
        assert_eq!(pending.waiting_bytes, 0);
        assert_eq!(pending.job_bytes, 0);
        for mut answer in answers {
            assert!(matches!(
                answer.try_recv(),
                Ok(Some(Err(StoreError::NotWritable)))
            ));
        }
    }
}
