//! `SegmentWriter`: appends bytes to a chain of fixed-size segment files with direct I/O —
//! the mechanics shared by the CommitLog and the ConsumeQueues (the `MappedFileQueue` role,
//! without mmap).
//!
//! The writer keeps the unwritten tail of the current segment in memory, starting at an
//! aligned offset, in a buffer of the file's (aligned, registered with the ring): records are
//! encoded straight into it and a job writes from it as it is, with no copy. Appending and
//! rolling to the next segment touch memory only (and open the next file). Writing is a
//! [`WriteJob`]: [`SegmentWriter::start_write`] hands the unwritten tails to a job that owns
//! them, and lets appends go on while the job writes and, if asked, syncs every file written
//! since the last sync; [`SegmentWriter::finish_write`] takes the outcome back. This is what
//! lets the group commit encode the next batch while the disk takes the previous one.
//! [`SegmentWriter::write_out`] and [`SegmentWriter::flush`] do both steps at once.
//!
//! A job writes either [`JobExtent::Everything`] appended, the last partial block padded
//! with zeros to the alignment, or [`JobExtent::WholeBlocks`] up to a size, leaving the rest
//! (at least the partial block) for a later job. Several jobs may be in flight, but no two
//! writes of one block (they could land in either order): a job that wrote the partial block
//! padded holds it, and the next job's first write, which begins with that block, starts
//! only once the holder's writes end (its other writes at once). Whole-block jobs hold
//! nothing, so under load the disk gets several writes at once.
//!
//! Invariants:
//! - `flushed_offset <= written_offset <= write_offset`; below `flushed_offset` is durable,
//!   below `written_offset` is in the files;
//! - the tail holds exactly `[tail_start, write_offset)` of the current segment, with
//!   `tail_start` aligned within the segment file; tails of segments rolled away from wait in
//!   `sealed` for the next job;
//! - no two writes of one block are in flight at once, and jobs finish in the order they
//!   started: what a job made written (or durable) counts only once every earlier job is
//!   finished;
//! - after a failed write or sync the writer is poisoned and refuses everything until
//!   restart: a failed fsync cannot be retried safely. A torn rewrite of the last partial
//!   block cannot damage older bytes: they are rewritten with the same content.

use super::segment::segment_start;
pub use super::segment::SegmentOpener;
use ferromq_uring::file::SegmentFile;
use ferromq_uring::IoError;
use futures::channel::oneshot;
use futures::future::join;
use std::rc::Rc;

/// Why an append, write or flush failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A write or sync failed earlier; the store refuses puts until restart.
    #[error("the store is not writable after an I/O failure; restart the broker")]
    NotWritable,
    /// Disk use is above `diskSpaceWarningLevelRatio`; puts resume when space returns.
    #[error("the broker's disk is full ({used_percent}% used); puts resume when space returns")]
    DiskFull {
        /// Percent of the disk in use at the last probe.
        used_percent: u32,
    },
    /// The files on disk are not laid out as the configuration says.
    #[error("{0}")]
    Layout(String),
    /// The store is shutting down.
    #[error("the message store is shutting down")]
    ShuttingDown,
    /// The broker is a slave: it takes no puts, only its master's bytes.
    #[error("the store is a slave's: puts go to the master")]
    Slave,
    /// Replicated bytes that do not continue this CommitLog: a slave whose log is not a
    /// copy of its master's.
    #[error("the CommitLog diverged from the master's: {0}")]
    Diverged(String),
    /// The record does not fit in one segment.
    #[error("message of {size} bytes does not fit a {segment_size}-byte CommitLog segment")]
    TooLarge {
        /// Record size.
        size: usize,
        /// Segment size.
        segment_size: u64,
    },
    /// The message cannot be laid out as a record: its topic or properties are longer than
    /// their length fields hold (`PutMessageStatus.MESSAGE_ILLEGAL` /
    /// `PROPERTIES_SIZE_EXCEEDED` in Java).
    #[error("the message cannot be stored: {0}")]
    Illegal(String),
    /// An I/O operation failed (the writer is now poisoned).
    #[error(transparent)]
    Io(#[from] IoError),
}

/// The biggest buffer a new tail starts with: a tail grown by a burst beyond it (it may hold
/// up to the group commit's 32 MiB) is not followed by another as big.
pub const TAIL_CAPACITY_MAX: usize = 8 << 20;

/// The file buffer type of an opener's segments.
type BufferOf<O> = <<O as SegmentOpener>::File as SegmentFile>::Buffer;

/// Syncs of a writer's files, taken by [`SegmentWriter::take_syncs`] to run apart from it.
#[derive(Debug)]
#[must_use = "the files are synced only when the syncs run"]
pub struct FileSyncs<F> {
    files: Vec<Rc<F>>,
    end: u64,
}

impl<F: SegmentFile> FileSyncs<F> {
    /// Runs the syncs side by side; returns the end they make durable.
    ///
    /// # Errors
    /// The first sync's I/O error.
    pub async fn run(self) -> Result<u64, IoError> {
        let synced = futures::future::join_all(self.files.iter().map(|file| file.sync())).await;
        synced.into_iter().collect::<Result<Vec<()>, IoError>>()?;
        Ok(self.end)
    }
}

/// Appends to rolling segments.
#[derive(Debug)]
pub struct SegmentWriter<O: SegmentOpener> {
    opener: O,
    segment_size: u64,
    current: Rc<O::File>,
    current_start: u64,
    /// Tails of segments rolled away from, not yet written.
    sealed: Vec<TailWrite<O::File>>,
    /// Files other than `current` written since the last sync, each with its end (the log
    /// offset it ends at): kept until a sync covers that end, so that a file whose last
    /// write is still in flight when syncs are taken is synced again once it lands.
    unsynced: Vec<(u64, Rc<O::File>)>,
    tail: Tail<BufferOf<O>>,
    tail_start: u64,
    write_offset: u64,
    written_offset: u64,
    flushed_offset: u64,
    /// End of what the jobs started so far write.
    issued_offset: u64,
    /// Jobs started and not finished.
    in_flight: usize,
    /// Set while a job in flight writes the block the next job begins with (padded): ends
    /// when that job's writes are done, and the next job writes that block only then.
    held_block: Option<oneshot::Receiver<()>>,
    poisoned: bool,
}

/// How much of what is appended a job writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobExtent {
    /// Everything, the last partial block padded: the job holds that block.
    Everything,
    /// Only whole blocks of the current segment, at most `most` bytes of them (at least one
    /// block, if there is one), and the tails of segments rolled away from; the rest waits
    /// for a later job, which may start while this one runs.
    WholeBlocks {
        /// The most bytes of the current segment's tail the job takes.
        most: usize,
    },
}

/// Bytes appended and not yet handed to a job: the first `len` bytes of `buffer`, which is
/// as long as the tail may grow before it moves to a bigger one.
#[derive(Debug)]
struct Tail<B> {
    buffer: B,
    len: usize,
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Tail<B> {
    /// An empty tail in a buffer of `file`'s, at least `capacity` bytes rounded up to the
    /// file's alignment (so that a write of the tail padded fits the buffer).
    fn new<F: SegmentFile<Buffer = B>>(file: &F, capacity: usize) -> Tail<B> {
        let alignment = usize::try_from(file.alignment()).expect("alignment fits usize");
        let capacity = capacity.max(1).div_ceil(alignment) * alignment;
        Tail {
            buffer: file.alloc_buffer(capacity),
            len: 0,
        }
    }

    /// A tail in a buffer of `file`'s of at least `capacity` bytes, holding `bytes`.
    fn holding<F: SegmentFile<Buffer = B>>(file: &F, capacity: usize, bytes: &[u8]) -> Tail<B> {
        let mut tail = Tail::new(file, capacity.max(bytes.len()));
        tail.buffer.as_mut()[..bytes.len()].copy_from_slice(bytes);
        tail.len = bytes.len();
        tail
    }

    fn capacity(&self) -> usize {
        self.buffer.as_ref().len()
    }

    fn bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.len]
    }
}

/// One aligned write of a job.
#[derive(Debug)]
struct TailWrite<F: SegmentFile> {
    file: Rc<F>,
    /// Position in the file, aligned.
    position: u64,
    /// What to write: `len` bytes of the buffer, padded with zeros to the alignment when the
    /// job is made.
    buffer: F::Buffer,
    len: usize,
}

impl<F: SegmentFile> TailWrite<F> {
    async fn run(self) -> Result<(), IoError> {
        self.file
            .write_buffer_at(self.position, self.buffer, self.len)
            .await
    }
}

/// Writes (and syncs) handed out by [`SegmentWriter::start_write`]; owns everything it needs,
/// so appends go on while it runs.
#[derive(Debug)]
#[must_use = "a started write must be run and finished"]
pub struct WriteJob<F: SegmentFile> {
    writes: Vec<TailWrite<F>>,
    /// The block an earlier job in flight also writes: written once that job's writes end.
    after_holder: Option<(TailWrite<F>, oneshot::Receiver<()>)>,
    /// Dropped when this job's writes end, if it holds its last block.
    release: Option<oneshot::Sender<()>>,
    syncs: Vec<Rc<F>>,
    end: u64,
    sync: bool,
}

/// What a [`WriteJob`] did, for [`SegmentWriter::finish_write`].
#[derive(Debug)]
pub struct WriteOutcome {
    result: Result<(), IoError>,
    end: u64,
    sync: bool,
}

impl WriteOutcome {
    /// Whether the job synced (or tried to).
    #[must_use]
    pub fn syncs(&self) -> bool {
        self.sync
    }
}

impl<F: SegmentFile> WriteJob<F> {
    /// Writes, in order (and, beside them, the write that begins with the block an earlier
    /// job holds, once that job's writes end), then syncs the files if asked.
    pub async fn run(self) -> WriteOutcome {
        let in_order = async {
            let mut result = Ok(());
            for write in self.writes {
                if result.is_ok() {
                    result = write.run().await;
                }
            }
            result
        };
        let after_holder = async {
            let Some((write, holder_done)) = self.after_holder else {
                return Ok(());
            };
            // Ends when the holder's writes end, or it is dropped: either way none of its
            // writes is in flight any more.
            let _ = holder_done.await;
            write.run().await
        };
        let (in_order, after_holder) = join(in_order, after_holder).await;
        let mut result = in_order.and(after_holder);
        drop(self.release);
        if result.is_ok() {
            for file in &self.syncs {
                result = file.sync().await;
                if result.is_err() {
                    break;
                }
            }
        }
        WriteOutcome {
            result,
            end: self.end,
            sync: self.sync,
        }
    }
}

impl<O: SegmentOpener> SegmentWriter<O> {
    /// A writer continuing at `write_offset`; the partial block before it is read back.
    ///
    /// # Errors
    /// [`StoreError::Io`] if the segment cannot be opened or read.
    pub async fn open(
        opener: O,
        segment_size: u64,
        write_offset: u64,
    ) -> Result<SegmentWriter<O>, StoreError> {
        let current_start = segment_start(write_offset, segment_size);
        let current = opener.open(current_start, segment_size).await?;
        // Alignment is of positions within the file: a segment size need not be a multiple
        // of the block size (ConsumeQueue files are 6,000,000 bytes).
        let alignment = current.alignment();
        let tail_start = current_start + align_down(write_offset - current_start, alignment);
        let partial = usize::try_from(write_offset - tail_start).expect("below the alignment");
        let mut read = current.read_at(tail_start - current_start, partial).await?;
        read.resize(partial, 0);
        let tail = Tail::holding(&current, partial, &read);
        Ok(SegmentWriter {
            opener,
            segment_size,
            current: Rc::new(current),
            current_start,
            sealed: Vec::new(),
            unsynced: Vec::new(),
            tail,
            tail_start,
            write_offset,
            written_offset: write_offset,
            flushed_offset: write_offset,
            issued_offset: write_offset,
            in_flight: 0,
            held_block: None,
            poisoned: false,
        })
    }

    /// Segment size in bytes.
    #[must_use]
    pub fn segment_size(&self) -> u64 {
        self.segment_size
    }

    /// Bytes left in the current segment.
    #[must_use]
    pub fn remaining(&self) -> u64 {
        self.current_start + self.segment_size - self.write_offset
    }

    /// Appends `len` bytes, which `fill` writes, all of them, into the slice it is given: the
    /// tail's own memory, so that they are encoded where the write takes them from. They
    /// must fit in [`SegmentWriter::remaining`].
    ///
    /// # Errors
    /// [`StoreError::NotWritable`] once poisoned.
    pub fn append_with(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), StoreError> {
        if self.poisoned {
            return Err(StoreError::NotWritable);
        }
        let end = self.write_offset + u64::try_from(len).expect("fits u64");
        assert!(
            end <= self.current_start + self.segment_size,
            "append fits the segment"
        );
        let start = self.tail.len;
        if start + len > self.tail.capacity() {
            // Doubling, as a Vec grows: each byte is copied a bounded number of times.
            let capacity = (start + len).max(2 * self.tail.capacity());
            self.tail = Tail::holding(&*self.current, capacity, self.tail.bytes());
        }
        fill(&mut self.tail.buffer.as_mut()[start..start + len]);
        self.tail.len += len;
        self.write_offset = end;
        Ok(())
    }

    /// Appends `bytes`; as [`SegmentWriter::append_with`].
    ///
    /// # Errors
    /// [`StoreError::NotWritable`] once poisoned.
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        self.append_with(bytes.len(), |tail| tail.copy_from_slice(bytes))
    }

    /// Moves an empty writer (nothing ever appended, nothing in flight) to `start`, a
    /// segment's start: the segment it was at is deleted. A slave that starts empty takes
    /// its master's CommitLog from the master's last segment on, as Java's does.
    ///
    /// # Errors
    /// [`StoreError::Diverged`] if anything was appended or `start` is not a segment's
    /// start; the I/O error of opening the new segment (the writer is then poisoned) or of
    /// deleting the old one.
    pub async fn restart_empty_at(&mut self, start: u64) -> Result<(), StoreError> {
        if self.poisoned {
            return Err(StoreError::NotWritable);
        }
        let empty = self.write_offset == 0 && self.issued_offset == 0 && self.in_flight == 0;
        if !empty || !self.sealed.is_empty() || !start.is_multiple_of(self.segment_size) {
            return Err(StoreError::Diverged(format!(
                "cannot start an empty CommitLog at {start}: it holds {} bytes, and \
                 segments start at multiples of {}",
                self.write_offset, self.segment_size
            )));
        }
        let next = match self.opener.open(start, self.segment_size).await {
            Ok(next) => next,
            Err(error) => {
                self.poisoned = true;
                return Err(error.into());
            }
        };
        let previous = self.current_start;
        self.tail = Tail::new(&next, self.tail.capacity());
        self.current = Rc::new(next);
        self.unsynced.clear();
        self.current_start = start;
        self.tail_start = start;
        self.write_offset = start;
        self.written_offset = start;
        self.flushed_offset = start;
        self.issued_offset = start;
        self.held_block = None;
        self.opener.discard(previous).await?;
        Ok(())
    }

    /// Bytes the tail holds before it moves to a bigger buffer.
    #[must_use]
    pub fn tail_capacity(&self) -> usize {
        self.tail.capacity()
    }

    /// Moves to the next segment; the caller has filled (or closed with a blank record) the
    /// rest of this one, whose tail the next job writes.
    ///
    /// # Errors
    /// The I/O error of opening the next segment; the writer is then poisoned.
    pub async fn roll(&mut self) -> Result<(), StoreError> {
        if self.poisoned {
            return Err(StoreError::NotWritable);
        }
        let next_start = self.current_start + self.segment_size;
        let next = match self.opener.open(next_start, self.segment_size).await {
            Ok(next) => next,
            Err(error) => {
                self.poisoned = true;
                return Err(error.into());
            }
        };
        self.write_offset = next_start;
        let next_tail = Tail::new(&next, self.next_tail_capacity());
        let previous = std::mem::replace(&mut self.current, Rc::new(next));
        let sealed = std::mem::replace(&mut self.tail, next_tail);
        if sealed.len > 0 {
            self.sealed.push(TailWrite {
                file: Rc::clone(&previous),
                position: self.tail_start - self.current_start,
                buffer: sealed.buffer,
                len: sealed.len,
            });
        }
        self.unsynced.push((next_start, previous));
        self.current_start = next_start;
        self.tail_start = next_start;
        Ok(())
    }

    /// The size of a new tail's buffer: as big as the tail it follows (at most
    /// [`TAIL_CAPACITY_MAX`]), so that under a steady load tails do not regrow, a copy at
    /// each step.
    fn next_tail_capacity(&self) -> usize {
        self.tail.capacity().min(TAIL_CAPACITY_MAX)
    }

    /// Bytes appended that no job has taken yet (after a roll, with the unused end of the
    /// segment rolled away from).
    #[must_use]
    pub fn unissued_bytes(&self) -> u64 {
        self.write_offset.saturating_sub(self.issued_offset)
    }

    /// Whether appended bytes wait for a job.
    #[must_use]
    pub fn has_unwritten(&self) -> bool {
        self.issued_offset < self.write_offset || !self.sealed.is_empty()
    }

    /// Hands `extent` of what is appended to a job, which also syncs if `sync`; `None` if
    /// there is nothing to write (or, with `sync`, nothing to write or sync). Appends may go
    /// on while it runs; jobs are finished with [`SegmentWriter::finish_write`] in the order
    /// they started.
    ///
    /// If a job in flight writes the block this one begins with, this one writes that block
    /// only once the other's writes end (two writes of one block in flight at once could
    /// land in either order); the rest of its writes start at once.
    ///
    /// # Errors
    /// [`StoreError::NotWritable`] once poisoned.
    pub fn start_write(
        &mut self,
        sync: bool,
        extent: JobExtent,
    ) -> Result<Option<WriteJob<O::File>>, StoreError> {
        if self.poisoned {
            return Err(StoreError::NotWritable);
        }
        let alignment = self.current.alignment();
        let cut = match extent {
            JobExtent::Everything => self.tail.len,
            JobExtent::WholeBlocks { most } => {
                let whole = align_down(self.tail.len as u64, alignment);
                let most = align_down(most as u64, alignment).max(alignment);
                whole.min(most) as usize // below the tail length
            }
        };
        let unwritten = self.issued_offset < self.tail_start + cut as u64;
        let unsynced = self.flushed_offset < self.issued_offset || !self.unsynced.is_empty();
        if !unwritten && self.sealed.is_empty() && !(sync && unsynced) {
            return Ok(None);
        }
        let mut writes: Vec<TailWrite<O::File>> = self.sealed.drain(..).collect();
        let mut end = self.tail_start + cut as u64;
        let mut holds_last_block = false;
        if unwritten {
            // Keep what the job does not write whole: the partial block, which a later job
            // writes again with what follows, and for a job of at most so many bytes, what
            // lies beyond them (copied: the caller keeps that below about the job's size).
            let keep_from = align_down(cut as u64, alignment) as usize; // at most `cut`
            let kept = &self.tail.bytes()[keep_from..];
            let next_tail = Tail::holding(&*self.current, self.next_tail_capacity(), kept);
            let taken = std::mem::replace(&mut self.tail, next_tail);
            writes.push(TailWrite {
                file: Rc::clone(&self.current),
                position: self.tail_start - self.current_start,
                buffer: taken.buffer,
                len: cut,
            });
            self.tail_start += keep_from as u64;
            holds_last_block = keep_from < cut;
        } else if writes.is_empty() {
            end = self.issued_offset; // A sync only.
        }
        let mut bytes = 0u64;
        let alignment = usize::try_from(alignment).expect("alignment fits usize");
        for write in &mut writes {
            // Tail buffers are a multiple of the alignment long: the padding fits.
            let padded = write.len.div_ceil(alignment) * alignment;
            write.buffer.as_mut()[write.len..padded].fill(0);
            write.len = padded;
            bytes += padded as u64;
        }
        self.opener.writing(bytes);
        // The first write begins with the block a job in flight may hold (after a roll, the
        // sealed tail does): it waits for the holder. Under load jobs are of whole blocks
        // and hold nothing; splitting the block off would cost a copy of the rest.
        let after_holder = match self.held_block.take() {
            Some(holder_done) if !writes.is_empty() => Some((writes.remove(0), holder_done)),
            held => {
                self.held_block = held;
                None
            }
        };
        let release = holds_last_block.then(|| {
            let (release, holder_done) = oneshot::channel();
            self.held_block = Some(holder_done);
            release
        });
        let syncs = if sync {
            // The job syncs after its writes, which include every sealed tail.
            let mut files: Vec<Rc<O::File>> = self.unsynced.drain(..).map(|(_, f)| f).collect();
            files.push(Rc::clone(&self.current));
            files.retain(|file| !file.writes_are_durable());
            files
        } else {
            Vec::new()
        };
        self.issued_offset = self.issued_offset.max(end);
        self.in_flight += 1;
        Ok(Some(WriteJob {
            writes,
            after_holder,
            release,
            syncs,
            end,
            sync,
        }))
    }

    /// Takes back what a job did; returns the written (with `sync`, durable) end.
    ///
    /// # Errors
    /// The I/O error; the writer is then poisoned.
    pub fn finish_write(&mut self, outcome: WriteOutcome) -> Result<u64, StoreError> {
        self.in_flight -= 1;
        if self.in_flight == 0 {
            self.held_block = None;
        }
        if let Err(error) = outcome.result {
            self.poisoned = true;
            tracing::error!(%error, "segment write or sync failed; refusing puts until restart");
            return Err(error.into());
        }
        if self.poisoned {
            // An earlier job failed: what this one wrote lies beyond a hole.
            return Err(StoreError::NotWritable);
        }
        self.written_offset = self.written_offset.max(outcome.end);
        if outcome.sync {
            self.flushed_offset = self.flushed_offset.max(outcome.end);
        }
        Ok(outcome.end)
    }

    /// The syncs that make everything written so far durable, to run apart from the writer
    /// while it goes on: a sync covers at least what was written when it starts. `None` if
    /// what is written is durable already. Report their end to [`SegmentWriter::synced`]
    /// once they all succeeded.
    ///
    /// # Errors
    /// [`StoreError::NotWritable`] once poisoned.
    pub fn take_syncs(&mut self) -> Result<Option<FileSyncs<O::File>>, StoreError> {
        if self.poisoned {
            return Err(StoreError::NotWritable);
        }
        if self.flushed_offset >= self.written_offset && self.unsynced.is_empty() {
            return Ok(None);
        }
        let mut files: Vec<Rc<O::File>> = self.unsynced.iter().map(|(_, f)| Rc::clone(f)).collect();
        files.push(Rc::clone(&self.current));
        files.retain(|file| !file.writes_are_durable());
        Ok(Some(FileSyncs {
            files,
            end: self.written_offset,
        }))
    }

    /// The syncs of [`SegmentWriter::take_syncs`] that ended at `end` succeeded: the files
    /// that end by `end` are durable whole.
    pub fn synced(&mut self, end: u64) {
        self.flushed_offset = self.flushed_offset.max(end);
        self.unsynced.retain(|(file_end, _)| *file_end > end);
    }

    /// The syncs of [`SegmentWriter::take_syncs`] failed: what was written may not be on the
    /// device, so nothing more is accepted (the writer is poisoned).
    pub fn sync_failed(&mut self) {
        self.poisoned = true;
    }

    /// Writes everything appended so far to the files, without syncing: the data then
    /// survives a crash of the process but not of the machine. Returns the written end.
    ///
    /// # Errors
    /// The I/O error; the writer is then poisoned.
    pub async fn write_out(&mut self) -> Result<u64, StoreError> {
        self.write_now(false).await
    }

    /// Writes everything appended so far and syncs it; returns the durable end.
    ///
    /// # Errors
    /// The I/O error; the writer is then poisoned.
    pub async fn flush(&mut self) -> Result<u64, StoreError> {
        self.write_now(true).await
    }

    async fn write_now(&mut self, sync: bool) -> Result<u64, StoreError> {
        assert!(self.in_flight == 0, "no job in flight");
        match self.start_write(sync, JobExtent::Everything)? {
            Some(job) => {
                let outcome = job.run().await;
                self.finish_write(outcome)
            }
            None if sync => Ok(self.flushed_offset),
            None => Ok(self.written_offset),
        }
    }

    /// End of appended data.
    #[must_use]
    pub fn write_offset(&self) -> u64 {
        self.write_offset
    }

    /// End of durable data.
    #[must_use]
    pub fn flushed_offset(&self) -> u64 {
        self.flushed_offset
    }

    /// Whether an I/O failure has made the writer refuse everything.
    #[must_use]
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }
}

fn align_down(position: u64, alignment: u64) -> u64 {
    position - position % alignment
}
