//! `SegmentWriter`: appends bytes to a chain of fixed-size segment files with direct I/O —
//! the mechanics shared by the CommitLog and the ConsumeQueues (the `MappedFileQueue` role,
//! without mmap).
//!
//! The writer keeps the unwritten tail of the current segment in memory, starting at an
//! aligned offset. [`SegmentWriter::write_out`] writes that tail (padded with zeros to the
//! alignment) and keeps only its last partial block; [`SegmentWriter::flush`] also syncs every
//! file written since the last sync. Callers decide what goes where and when to roll.
//!
//! Invariants:
//! - `flushed_offset <= written_offset <= write_offset`; below `flushed_offset` is durable,
//!   below `written_offset` is in the files;
//! - the tail holds exactly `[tail_start, write_offset)` of the current segment, with
//!   `tail_start` aligned within the segment file;
//! - after a failed write or sync the writer is poisoned and refuses everything until
//!   restart: a failed fsync cannot be retried safely. A torn rewrite of the last partial
//!   block cannot damage older bytes: they are rewritten with the same content.

use super::segment::segment_start;
use ferromq_uring::file::SegmentFile;
use ferromq_uring::IoError;
use std::future::Future;

/// Opens segment files by start offset (a directory of segments).
pub trait SegmentOpener {
    /// The file type.
    type File: SegmentFile + std::fmt::Debug;
    /// Opens (creating if needed) the segment starting at `start`, `size` bytes long.
    fn open(&self, start: u64, size: u64) -> impl Future<Output = Result<Self::File, IoError>>;
}

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
    /// The record does not fit in one segment.
    #[error("message of {size} bytes does not fit a {segment_size}-byte CommitLog segment")]
    TooLarge {
        /// Record size.
        size: usize,
        /// Segment size.
        segment_size: u64,
    },
    /// An I/O operation failed (the writer is now poisoned).
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Appends to rolling segments.
#[derive(Debug)]
pub struct SegmentWriter<O: SegmentOpener> {
    opener: O,
    segment_size: u64,
    current: O::File,
    current_start: u64,
    unsynced_previous: Vec<O::File>,
    tail: Vec<u8>,
    tail_start: u64,
    write_offset: u64,
    written_offset: u64,
    flushed_offset: u64,
    poisoned: bool,
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
        let mut tail = current.read_at(tail_start - current_start, partial).await?;
        tail.resize(partial, 0);
        Ok(SegmentWriter {
            opener,
            segment_size,
            current,
            current_start,
            unsynced_previous: Vec::new(),
            tail,
            tail_start,
            write_offset,
            written_offset: write_offset,
            flushed_offset: write_offset,
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

    /// The tail buffer, to encode the next bytes straight into it; they must fit in
    /// [`SegmentWriter::remaining`] and be committed with [`SegmentWriter::advance`].
    ///
    /// # Errors
    /// [`StoreError::NotWritable`] once poisoned.
    pub fn tail_mut(&mut self) -> Result<&mut Vec<u8>, StoreError> {
        if self.poisoned {
            return Err(StoreError::NotWritable);
        }
        Ok(&mut self.tail)
    }

    /// Accounts for bytes the caller appended to the tail.
    pub fn advance(&mut self) {
        let end = self.tail_start + u64::try_from(self.tail.len()).expect("fits u64");
        assert!(
            end <= self.current_start + self.segment_size,
            "append fits the segment"
        );
        assert!(
            end >= self.write_offset,
            "the tail only grows between writes"
        );
        self.write_offset = end;
    }

    /// Writes out the current segment and moves to the next one; the caller has filled (or
    /// closed with a blank record) the rest of this one.
    ///
    /// # Errors
    /// The I/O error; the writer is then poisoned.
    pub async fn roll(&mut self) -> Result<(), StoreError> {
        self.write_offset = self.current_start + self.segment_size;
        if let Err(error) = self.write_tail().await {
            self.poisoned = true;
            return Err(error.into());
        }
        let next_start = self.current_start + self.segment_size;
        let next = match self.opener.open(next_start, self.segment_size).await {
            Ok(next) => next,
            Err(error) => {
                self.poisoned = true;
                return Err(error.into());
            }
        };
        let previous = std::mem::replace(&mut self.current, next);
        self.unsynced_previous.push(previous);
        self.current_start = next_start;
        self.tail.clear();
        self.tail_start = next_start;
        Ok(())
    }

    /// Writes everything appended so far to the files, without syncing: the data then
    /// survives a crash of the process but not of the machine. Returns the written end.
    ///
    /// # Errors
    /// The I/O error; the writer is then poisoned.
    pub async fn write_out(&mut self) -> Result<u64, StoreError> {
        if self.poisoned {
            return Err(StoreError::NotWritable);
        }
        if self.written_offset == self.write_offset {
            return Ok(self.written_offset);
        }
        if let Err(error) = self.write_tail().await {
            self.poisoned = true;
            tracing::error!(%error, "segment write failed; refusing puts until restart");
            return Err(error.into());
        }
        self.written_offset = self.write_offset;
        // Keep only the last partial block: it is rewritten, with what follows, next time.
        let alignment = self.current.alignment();
        let keep_from =
            self.current_start + align_down(self.write_offset - self.current_start, alignment);
        let drop = usize::try_from(keep_from - self.tail_start).expect("within the tail");
        self.tail.drain(..drop);
        self.tail_start = keep_from;
        Ok(self.written_offset)
    }

    /// Writes everything appended so far and syncs it; returns the durable end.
    ///
    /// # Errors
    /// The I/O error; the writer is then poisoned.
    pub async fn flush(&mut self) -> Result<u64, StoreError> {
        self.write_out().await?;
        if self.flushed_offset == self.written_offset && self.unsynced_previous.is_empty() {
            return Ok(self.flushed_offset);
        }
        if let Err(error) = self.sync_files().await {
            self.poisoned = true;
            tracing::error!(%error, "segment sync failed; refusing puts until restart");
            return Err(error.into());
        }
        self.flushed_offset = self.written_offset;
        Ok(self.flushed_offset)
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

    async fn sync_files(&mut self) -> Result<(), IoError> {
        for previous in self.unsynced_previous.drain(..) {
            previous.sync().await?;
        }
        self.current.sync().await
    }

    /// Writes the tail buffer, padded with zeros to the alignment, where it belongs.
    async fn write_tail(&mut self) -> Result<(), IoError> {
        if self.tail.is_empty() {
            return Ok(());
        }
        let alignment = usize::try_from(self.current.alignment()).expect("alignment fits usize");
        let len = self.tail.len();
        let padded = len.div_ceil(alignment) * alignment;
        self.tail.resize(padded, 0);
        let written = self
            .current
            .write_at(self.tail_start - self.current_start, &self.tail)
            .await;
        self.tail.truncate(len);
        written
    }
}

fn align_down(position: u64, alignment: u64) -> u64 {
    position - position % alignment
}
