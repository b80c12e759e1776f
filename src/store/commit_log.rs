//! `CommitLog`: the single append-only log of every message, owned by the writer shard.
//!
//! Mirrors `ST/CommitLog.java` with RocketMQ's layout and rules (`reference/store-format.md`
//! §2, `message.rs` for the record): fixed-size segments named by start offset; a record goes
//! into the current segment only if it leaves room for the 8-byte blank record, otherwise the
//! segment is closed with a blank record and the record starts the next one.
//!
//! Mechanics are ferromq's own: there is no mmap. The writer keeps the unflushed tail of the
//! current segment in memory, starting at an aligned offset; [`CommitLog::flush`] writes that
//! tail with direct I/O (padded to the alignment) and syncs every file written since the last
//! flush. The writer assigns physical offsets, queue offsets and store timestamps.
//!
//! Invariants:
//! - `flushed_offset <= written_offset <= write_offset`; everything below `flushed_offset`
//!   is durable, everything below `written_offset` is in the files;
//! - the tail buffer holds exactly the bytes `[tail_start, write_offset)` of the current
//!   segment, with `tail_start` aligned and `tail_start <= flushed_offset` when not rolling;
//! - after a failed write or sync the log is poisoned and refuses appends until restart: a
//!   failed fsync cannot be retried safely.

use super::message::{
    blank_record, body_crc32, decode_record, encode_record_into, enters_consume_queue, record_size,
    record_size_of, with_host_flags, MessageRecord, MessageVersion, Record, BLANK_RECORD_SIZE,
    PROPERTIES_SIZE_MAX, TOPIC_SIZE_MAX,
};

/// Longest topic the store takes: its name is a directory's, which may be 255 bytes long
/// (`NAME_MAX`); within the record's 16-bit length.
const TOPIC_NAME_SIZE_MAX: usize = 255;
const _: () = assert!(TOPIC_NAME_SIZE_MAX <= TOPIC_SIZE_MAX);
pub use super::segment_writer::JobExtent;
use super::segment_writer::{FileSyncs, SegmentWriter, WriteJob, WriteOutcome};
use ferromq_uring::file::SegmentFile;
use ferromq_uring::IoError;
use std::collections::HashMap;
use std::net::SocketAddr;

pub use super::segment::SegmentOpener;
pub use super::segment_writer::StoreError;

/// A message to store, as the writer receives it (`MessageExtBrokerInner` in Java).
#[derive(Clone, Debug)]
pub struct PutMessage {
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: i32,
    /// Producer flag.
    pub flag: i32,
    /// System flags.
    pub sys_flag: i32,
    /// Producer time, ms.
    pub born_timestamp: i64,
    /// Producer address.
    pub born_host: SocketAddr,
    /// Broker address.
    pub store_host: SocketAddr,
    /// Retry count.
    pub reconsume_times: i32,
    /// Half message offset for committed transactions.
    pub prepared_transaction_offset: i64,
    /// Body as stored.
    pub body: Vec<u8>,
    /// Properties as stored.
    pub properties: Vec<u8>,
}

impl PutMessage {
    /// A stored record put again under `topic`/`queue_id` (schedule delivery, send-back,
    /// transaction commit): flags, times, hosts, retry count and body as stored; no
    /// properties and no prepared offset — the caller sets what changes.
    #[must_use]
    pub fn from_record(record: &MessageRecord<'_>, topic: String, queue_id: i32) -> PutMessage {
        PutMessage {
            topic,
            queue_id,
            flag: record.flag,
            sys_flag: record.sys_flag,
            born_timestamp: record.born_timestamp,
            born_host: record.born_host,
            store_host: record.store_host,
            reconsume_times: record.reconsume_times,
            prepared_transaction_offset: 0,
            body: record.body.to_vec(),
            properties: Vec::new(),
        }
    }
}

/// Where an append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// CommitLog offset of the record.
    pub physical_offset: u64,
    /// Record size.
    pub size: usize,
    /// Queue offset assigned (0 for prepared and rolled-back transaction records).
    pub queue_offset: i64,
}

/// The CommitLog writer.
#[derive(Debug)]
pub struct CommitLog<O: SegmentOpener> {
    writer: SegmentWriter<O>,
    queue_offsets: QueueOffsets,
}

/// The next queue offset of every queue, keyed by topic then queue id, so that a put looks
/// its queue up by `&str` without building an owned key. ahash: topics come from clients.
#[derive(Debug, Default)]
struct QueueOffsets(hashbrown::HashMap<String, ahash::AHashMap<i32, i64>, ahash::RandomState>);

impl QueueOffsets {
    /// The next queue offset of `topic`/`queue_id` (0 for a new queue), to read and advance
    /// in place: one lookup of the topic per put on the writer's hot path (the topic is
    /// copied only for a new one).
    fn next_mut(&mut self, topic: &str, queue_id: i32) -> &mut i64 {
        let queues = self.0.entry_ref(topic).or_default();
        queues.entry(queue_id).or_insert(0)
    }
}

/// The record `input` is stored as, with its body CRC and the fields the writer assigns.
fn stored_record(
    input: &PutMessage,
    body_crc: i32,
    queue_offset: i64,
    physical_offset: u64,
    store_timestamp: i64,
) -> MessageRecord<'_> {
    MessageRecord {
        version: MessageVersion::for_topic(&input.topic),
        body_crc,
        queue_id: input.queue_id,
        flag: input.flag,
        queue_offset,
        physical_offset: i64::try_from(physical_offset).expect("offset below 2^63"),
        sys_flag: with_host_flags(input.sys_flag, input.born_host, input.store_host),
        born_timestamp: input.born_timestamp,
        born_host: input.born_host,
        store_timestamp,
        store_host: input.store_host,
        reconsume_times: input.reconsume_times,
        prepared_transaction_offset: input.prepared_transaction_offset,
        body: &input.body,
        topic: &input.topic,
        properties: &input.properties,
    }
}

/// Why `input` cannot be stored, if it cannot: its topic must name a directory of the
/// store, and the topic and properties lengths are 16-bit fields. Puts are checked before
/// anything is appended, so that no client input reaches the encoder's assertions or a path
/// outside the store.
fn layout_problem(input: &PutMessage) -> Option<StoreError> {
    // The topic names a directory (`consumequeue/<topic>/`): never one outside the store.
    // The topic names a directory (`consumequeue/<topic>/`): never one outside the store,
    // nor one longer than a file name may be (so it is within the record's length too).
    let topic = input.topic.as_str();
    let unsafe_name = topic.is_empty() || topic == "." || topic == "..";
    if unsafe_name || topic.contains(['/', '\\', '\0']) || topic.len() > TOPIC_NAME_SIZE_MAX {
        let shown: String = topic.chars().take(64).collect();
        return Some(StoreError::Illegal(format!(
            "topic {shown:?} ({} bytes) cannot name a directory",
            topic.len()
        )));
    }
    if input.properties.len() > PROPERTIES_SIZE_MAX {
        let len = input.properties.len();
        return Some(StoreError::Illegal(format!(
            "properties of {len} bytes, longer than {PROPERTIES_SIZE_MAX}"
        )));
    }
    None
}

/// The size of the record `input` is stored as.
fn stored_size(input: &PutMessage) -> usize {
    record_size_of(
        MessageVersion::for_topic(&input.topic),
        with_host_flags(input.sys_flag, input.born_host, input.store_host),
        input.body.len(),
        input.topic.len(),
        input.properties.len(),
    )
}

impl<O: SegmentOpener> CommitLog<O> {
    /// A writer that continues at `write_offset` (0 for a new store, the recovered valid end
    /// otherwise) with the given next queue offsets.
    ///
    /// # Errors
    /// [`StoreError::Io`] if the current segment cannot be opened or read.
    pub async fn open(
        opener: O,
        segment_size: u64,
        write_offset: u64,
        queue_offsets: HashMap<(String, i32), i64>,
    ) -> Result<CommitLog<O>, StoreError> {
        let writer = SegmentWriter::open(opener, segment_size, write_offset).await?;
        let mut offsets = QueueOffsets::default();
        for ((topic, queue_id), next) in queue_offsets {
            *offsets.next_mut(&topic, queue_id) = next;
        }
        Ok(CommitLog {
            writer,
            queue_offsets: offsets,
        })
    }

    /// Appends one message at `store_timestamp`; it is durable after the next
    /// [`CommitLog::flush`] that returns an offset beyond it.
    ///
    /// # Errors
    /// [`StoreError::NotWritable`] once poisoned, [`StoreError::TooLarge`],
    /// [`StoreError::Illegal`] for a topic or properties too long for the layout, or the I/O
    /// error of opening the next segment.
    pub async fn append(
        &mut self,
        input: &PutMessage,
        store_timestamp: i64,
    ) -> Result<Appended, StoreError> {
        self.append_with_body_crc(input, body_crc32(&input.body), store_timestamp)
            .await
    }

    /// [`CommitLog::append`] of a message whose body CRC (`body_crc32`) the caller computed,
    /// on its own core.
    ///
    /// # Errors
    /// As [`CommitLog::append`].
    pub async fn append_with_body_crc(
        &mut self,
        input: &PutMessage,
        body_crc: i32,
        store_timestamp: i64,
    ) -> Result<Appended, StoreError> {
        if let Some(problem) = layout_problem(input) {
            return Err(problem);
        }
        self.make_room(stored_size(input)).await?;
        self.append_record(input, body_crc, store_timestamp)
    }

    /// Appends `inputs` back to back at `store_timestamp`, whole or not at all, as Java's
    /// `putMessages` stores a batch: in one segment (rolling first if it does not fit the
    /// rest of this one), with consecutive queue offsets. `body_crcs` are the inputs' body
    /// CRCs if the caller computed them, on its own core: one per input, in order (any it
    /// lacks, or all if it is empty, are computed here). Calls `each` with every record's
    /// place, in order.
    ///
    /// # Errors
    /// As [`CommitLog::append`]; [`StoreError::TooLarge`] if the batch does not fit one
    /// segment. Nothing is appended then.
    pub async fn append_each(
        &mut self,
        inputs: &[PutMessage],
        body_crcs: &[i32],
        store_timestamp: i64,
        mut each: impl FnMut(Appended),
    ) -> Result<(), StoreError> {
        if let Some(problem) = inputs.iter().find_map(layout_problem) {
            return Err(problem);
        }
        let size: usize = inputs.iter().map(stored_size).sum();
        self.make_room(size).await?;
        for (index, input) in inputs.iter().enumerate() {
            let body_crc = body_crcs
                .get(index)
                .copied()
                .unwrap_or_else(|| body_crc32(&input.body));
            each(self.append_record(input, body_crc, store_timestamp)?);
        }
        Ok(())
    }

    /// Appends bytes a master replicated (a slave's CommitLog is a copy of its master's, cut
    /// anywhere, even inside a record), which must start where this log ends: an empty log
    /// first moves to `offset`, a segment's start, as Java's slave starts from its master's
    /// last segment. A log that ends at a segment's end rolls first. Queue offsets are counted
    /// apart, from the records' entries ([`CommitLog::note_replicated`]).
    ///
    /// # Errors
    /// [`StoreError::Diverged`] if the bytes do not continue this log or run past the
    /// segment's end; [`StoreError::NotWritable`] once poisoned; the I/O error of opening a
    /// segment.
    pub async fn append_replica(
        &mut self,
        offset: u64,
        bytes: &[u8],
    ) -> Result<Appended, StoreError> {
        if self.writer.is_poisoned() {
            return Err(StoreError::NotWritable);
        }
        if self.writer.write_offset() == 0 && offset != 0 {
            self.writer.restart_empty_at(offset).await?;
        }
        let end = self.writer.write_offset();
        if offset != end {
            return Err(StoreError::Diverged(format!(
                "{} bytes sent for offset {offset}, but this CommitLog ends at {end}",
                bytes.len()
            )));
        }
        if self.writer.remaining() == 0 {
            self.writer.roll().await?;
        }
        let len = u64::try_from(bytes.len()).expect("fits u64");
        if len > self.writer.remaining() {
            return Err(StoreError::Diverged(format!(
                "{len} bytes sent for offset {offset} run past the segment's end at {}",
                offset + self.writer.remaining()
            )));
        }
        self.writer.append(bytes)?;
        Ok(Appended {
            physical_offset: offset,
            size: bytes.len(),
            queue_offset: 0,
        })
    }

    /// Counts the queue offsets of replicated records (their dispatch entries), so that a
    /// slave that becomes master in controller mode goes on from its master's queue offsets
    /// without a restart.
    pub fn note_replicated(&mut self, entries: &[crate::store::dispatch::DispatchEntry]) {
        for request in entries.iter().filter_map(|entry| entry.queue.as_ref()) {
            let next = self
                .queue_offsets
                .next_mut(&request.topic, request.queue_id);
            *next = (*next).max(request.queue_offset + 1);
        }
    }

    /// Makes sure `size` bytes of records fit the current segment: if they do not, closes
    /// it with a blank record and rolls to the next.
    ///
    /// # Errors
    /// [`StoreError::NotWritable`] once poisoned, [`StoreError::TooLarge`] if they would not
    /// fit even a new segment, or the I/O error of opening the next segment.
    async fn make_room(&mut self, size: usize) -> Result<(), StoreError> {
        if self.writer.is_poisoned() {
            return Err(StoreError::NotWritable);
        }
        let size_u64 = u64::try_from(size).expect("record size fits u64");
        let segment_size = self.writer.segment_size();
        if size_u64 + BLANK_RECORD_SIZE as u64 > segment_size {
            return Err(StoreError::TooLarge { size, segment_size });
        }
        let remaining = self.writer.remaining();
        if size_u64 + BLANK_RECORD_SIZE as u64 > remaining {
            // Close the segment with a blank record; the messages start the next one.
            let blank = usize::try_from(remaining).expect("segment fits usize");
            self.writer.append(&blank_record(blank))?;
            self.writer.roll().await?;
        }
        Ok(())
    }

    /// Encodes `input` at the end of the log (where [`CommitLog::make_room`] made room for
    /// it), with its queue offset, and returns where it landed.
    fn append_record(
        &mut self,
        input: &PutMessage,
        body_crc: i32,
        store_timestamp: i64,
    ) -> Result<Appended, StoreError> {
        let queue_offset = if enters_consume_queue(input.sys_flag) {
            let next = self.queue_offsets.next_mut(&input.topic, input.queue_id);
            *next += 1;
            *next - 1
        } else {
            0
        };
        let physical_offset = self.writer.write_offset();
        let record = stored_record(
            input,
            body_crc,
            queue_offset,
            physical_offset,
            store_timestamp,
        );
        let size = record_size(&record);
        self.writer
            .append_with(size, |tail| encode_record_into(&record, tail))?;
        Ok(Appended {
            physical_offset,
            size,
            queue_offset,
        })
    }

    /// Hands `extent` of what is appended to a write job (see
    /// [`SegmentWriter::start_write`]); appends may go on while it runs.
    ///
    /// # Errors
    /// [`StoreError::NotWritable`] once poisoned.
    pub fn start_write(
        &mut self,
        sync: bool,
        extent: JobExtent,
    ) -> Result<Option<WriteJob<O::File>>, StoreError> {
        self.writer.start_write(sync, extent)
    }

    /// Whether appended bytes wait for a write job.
    #[must_use]
    pub fn has_unwritten(&self) -> bool {
        self.writer.has_unwritten()
    }

    /// Bytes appended that no write job has taken yet (see
    /// [`SegmentWriter::unissued_bytes`]).
    #[must_use]
    pub fn unissued_bytes(&self) -> u64 {
        self.writer.unissued_bytes()
    }

    /// Takes back what a write job did; returns the written (with sync, durable) end.
    ///
    /// # Errors
    /// The job's I/O error; the log is then poisoned.
    pub fn finish_write(&mut self, outcome: WriteOutcome) -> Result<u64, StoreError> {
        self.writer.finish_write(outcome)
    }

    /// The syncs that make everything written so far durable, to run while writes go on
    /// (see [`SegmentWriter::take_syncs`]); `None` if it is durable already.
    ///
    /// # Errors
    /// [`StoreError::NotWritable`] once poisoned.
    pub fn take_syncs(&mut self) -> Result<Option<FileSyncs<O::File>>, StoreError> {
        self.writer.take_syncs()
    }

    /// The syncs taken by [`CommitLog::take_syncs`] made the log durable up to `end`.
    pub fn synced(&mut self, end: u64) {
        self.writer.synced(end);
    }

    /// The syncs taken by [`CommitLog::take_syncs`] failed: the log refuses appends from now.
    pub fn sync_failed(&mut self) {
        self.writer.sync_failed();
    }

    /// Writes everything appended so far, without syncing; returns the written end.
    ///
    /// # Errors
    /// The I/O error; the log is then poisoned.
    pub async fn write_out(&mut self) -> Result<u64, StoreError> {
        self.writer.write_out().await
    }

    /// Writes everything appended so far and syncs it; returns the durable end.
    ///
    /// # Errors
    /// The I/O error; the log is then poisoned.
    pub async fn flush(&mut self) -> Result<u64, StoreError> {
        self.writer.flush().await
    }

    /// Forgets the next queue offsets of `topic`'s queues: its next put starts them at 0
    /// (Java's `removeQueueFromTopicQueueTable` when a topic is deleted).
    pub fn drop_topic(&mut self, topic: &str) {
        self.queue_offsets.0.remove(topic);
    }

    /// End of appended data.
    #[must_use]
    pub fn write_offset(&self) -> u64 {
        self.writer.write_offset()
    }

    /// End of durable data.
    #[must_use]
    pub fn flushed_offset(&self) -> u64 {
        self.writer.flushed_offset()
    }

    /// Whether an I/O failure has made the log refuse appends.
    #[must_use]
    pub fn is_poisoned(&self) -> bool {
        self.writer.is_poisoned()
    }
}

/// Finds the end of valid data by walking records from the first segment, checking magic,
/// size and body CRC, and stopping at the first record that is not whole and consistent
/// (`recoverAbnormally`). Returns the valid end and the next queue offset of every queue.
///
/// # Errors
/// The I/O error of reading a segment.
pub async fn recover<O: SegmentOpener>(
    opener: &O,
    segment_size: u64,
    segment_starts: &[u64],
) -> Result<(u64, HashMap<(String, i32), i64>), IoError> {
    let mut queue_offsets = HashMap::new();
    let mut valid_end = segment_starts.first().copied().unwrap_or(0);
    for &start in segment_starts {
        if start != valid_end {
            break; // A gap: what follows cannot be trusted.
        }
        let file = opener.open(start, segment_size).await?;
        let bytes = file
            .read_at(0, usize::try_from(segment_size).expect("fits usize"))
            .await?;
        let mut at = 0usize;
        let mut rolled = false;
        while at < bytes.len() {
            match decode_record(&bytes[at..], true) {
                Ok(Record::Message { record, size }) => {
                    let expected = start + u64::try_from(at).expect("fits u64");
                    if record.physical_offset != i64::try_from(expected).unwrap_or(-1) {
                        break;
                    }
                    if enters_consume_queue(record.sys_flag) {
                        let key = (record.topic.to_owned(), record.queue_id);
                        queue_offsets.insert(key, record.queue_offset + 1);
                    }
                    at += size;
                }
                Ok(Record::Blank { remaining }) if at + remaining == bytes.len() => {
                    at = bytes.len();
                    rolled = true;
                }
                Ok(Record::Blank { .. }) | Err(_) => break,
            }
        }
        valid_end = start + u64::try_from(at).expect("fits u64");
        if !rolled {
            break;
        }
    }
    Ok((valid_end, queue_offsets))
}
