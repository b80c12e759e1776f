//! The read path (`DefaultMessageStore.getMessage` and friends): pulls by queue offset with
//! Java's statuses and batch limits, lookups by CommitLog offset, by key and by time.
//!
//! A reader belongs to one shard and opens its own handles on the segment files it reads
//! (io_uring reads on that shard). It sees only what dispatch published: a unit below a
//! queue's max offset is in the ConsumeQueue file, and its record in the CommitLog file.
//! The bytes it returns are the stored records, back to back — a pull response body as is.
//!
//! Retention may unlink a segment while a reader holds it open; the open handle keeps the
//! data readable until the reader drops it, so a read in flight never fails for that. The
//! reader drops its handles of deleted files when it sees the CommitLog's minimum move.

use super::chunks::ChunkCache;
use super::consume_queue::{CqUnit, UNIT_SIZE};
use super::handle::StoreHandle;
use super::message::{decode_record, parse_properties, Record, MAGIC_CODE_V1, MAGIC_CODE_V2};
use super::segment::{segment_name, segment_start};
use super::shared::StoreShared;
use crate::store::message::PROPERTY_UNIQ_KEY;
use bytes::Bytes;
use ferromq_uring::file::PageCacheFile;
use ferromq_uring::mapped::ReadWindow;
use ferromq_uring::IoError;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Outcome of a pull (`GetMessageStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GetMessageStatus {
    /// Messages found.
    Found,
    /// Units were read but none passed the filter.
    NoMatchedMessage,
    /// The records were deleted by retention.
    MessageWasRemoving,
    /// The unit's file was not found.
    OffsetFoundNull,
    /// The offset is past the max offset + 1.
    OffsetOverflowBadly,
    /// The offset equals the max offset: nothing new yet.
    OffsetOverflowOne,
    /// The offset is below the queue's min offset.
    OffsetTooSmall,
    /// No such queue.
    NoMatchedLogicQueue,
    /// The queue holds nothing.
    NoMessageInQueue,
}

impl GetMessageStatus {
    /// Java's enum constant name.
    #[must_use]
    pub fn java_name(self) -> &'static str {
        match self {
            GetMessageStatus::Found => "FOUND",
            GetMessageStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            GetMessageStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            GetMessageStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
            GetMessageStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            GetMessageStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            GetMessageStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
            GetMessageStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            GetMessageStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

/// One message of a pull result: where its record sits in [`GetMessageResult::parts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoundMessage {
    /// Queue offset.
    pub queue_offset: i64,
    /// CommitLog offset.
    pub physical_offset: i64,
    /// The part it is in.
    pub part: usize,
    /// Start in that part.
    pub start: usize,
    /// Record size.
    pub size: usize,
}

/// Result of [`StoreReader::get_message`] (`GetMessageResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetMessageResult {
    /// Outcome.
    pub status: GetMessageStatus,
    /// Offset to pull next.
    pub next_begin_offset: i64,
    /// Queue min offset.
    pub min_offset: i64,
    /// Queue max offset.
    pub max_offset: i64,
    /// The records found, back to back as stored, in parts: records next to each other in
    /// the CommitLog share one. Slices of mapped CommitLog windows or of a buffer read.
    pub parts: Vec<Bytes>,
    /// Each record in `parts`.
    pub messages: Vec<FoundMessage>,
    /// Whether the consumer is far enough behind to be sent to a slave.
    pub suggest_pulling_from_slave: bool,
}

impl GetMessageResult {
    /// The stored record of `found`, one of [`GetMessageResult::messages`].
    #[must_use]
    pub fn record(&self, found: &FoundMessage) -> &[u8] {
        &self.parts[found.part][found.start..found.start + found.size]
    }

    /// All records back to back in one buffer (a copy).
    #[must_use]
    pub fn body_to_vec(&self) -> Vec<u8> {
        self.parts.concat()
    }
}

/// What a pull may take (Java's `MessageFilter`): by the tags code of the ConsumeQueue unit
/// (`isMatchedByConsumeQueue`), then by the stored record (`isMatchedByCommitLog`, an SQL92
/// selector over its properties).
pub struct PullFilter<'a> {
    /// Tags codes to accept; `None` accepts everything.
    pub tags_codes: Option<&'a dyn Fn(i64) -> bool>,
    /// Records to accept, given each whole stored record; `None` accepts everything. A pull
    /// with it reads the records its tags code accepts and keeps reading, within the scan
    /// window, until `maxMsgNums` of them pass.
    pub records: Option<RecordFilter<'a>>,
}

/// Whether a pull takes a stored record, given the whole record.
pub type RecordFilter<'a> = &'a dyn Fn(&[u8]) -> bool;

impl PullFilter<'_> {
    /// Accepts every message.
    pub const ALL: PullFilter<'static> = PullFilter {
        tags_codes: None,
        records: None,
    };
}

impl std::fmt::Debug for PullFilter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullFilter")
            .field("tags_codes", &self.tags_codes.is_some())
            .field("records", &self.records.is_some())
            .finish()
    }
}

/// Largest run of other queues' bytes a pull reads through rather than issuing a second
/// device read: at 64 KiB a read of the gap costs less than the extra round trip.
const READ_GAP_MAX: u64 = 64 * 1024;

/// Largest span one pull read covers (keeps the buffer of a sparse pull bounded).
const READ_SPAN_MAX: u64 = 1024 * 1024;

/// Most bytes of units read to find `maxMsgNums` matches (`maxFilterMessageCount`).
const FILTER_SCAN_BYTES_MIN: usize = 16_000;
/// Open segment handles kept per reader before the cache is cleared.
const OPEN_FILES_MAX: usize = 1024;

/// How often a wait for dispatch looks again ([`StoreReader::dispatched_to_committed`]).
const DISPATCH_POLL: Duration = Duration::from_micros(200);

/// A shard's reader.
#[derive(Debug)]
pub struct StoreReader {
    shared: Arc<StoreShared>,
    handle: StoreHandle,
    files: RefCell<HashMap<PathBuf, Rc<PageCacheFile>>>,
    queue_maps: RefCell<HashMap<PathBuf, Rc<ReadWindow>>>,
    chunks: ChunkCache,
    seen_min: std::cell::Cell<u64>,
}

impl StoreReader {
    /// A reader over `shared`; key lookups go through `handle`.
    #[must_use]
    pub fn new(shared: Arc<StoreShared>, handle: StoreHandle) -> StoreReader {
        StoreReader {
            chunks: ChunkCache::new(Arc::clone(&shared)),
            shared,
            handle,
            files: RefCell::new(HashMap::new()),
            queue_maps: RefCell::new(HashMap::new()),
            seen_min: std::cell::Cell::new(0),
        }
    }

    /// Waits until dispatch has published everything committed when it was called, at most
    /// `wait_max`; whether it got there. Offsets read after it count every put answered
    /// before the call (read-your-writes: Java's dispatch follows a put within a
    /// millisecond, ours writes the ConsumeQueue out first).
    pub async fn dispatched_to_committed(&self, wait_max: Duration) -> bool {
        let target = self.shared.committed_end();
        if self.shared.dispatched_end() >= target {
            return true;
        }
        let deadline = Instant::now() + wait_max;
        while self.shared.dispatched_end() < target {
            if Instant::now() >= deadline {
                return false;
            }
            glommio::timer::sleep(DISPATCH_POLL).await;
        }
        true
    }

    /// CommitLog windows this reader holds mapped ([`super::chunks`]).
    #[must_use]
    pub fn mapped_windows(&self) -> usize {
        self.chunks.len()
    }

    /// The queue's max offset (0 if unknown).
    #[must_use]
    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.shared
            .queue(topic, queue_id)
            .map_or(0, |q| q.max_offset())
    }

    /// The queue's min offset (0 if unknown).
    #[must_use]
    pub fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.shared
            .queue(topic, queue_id)
            .map_or(0, |q| q.min_offset())
    }

    /// Pulls up to `max_msg_nums` messages of a queue from `offset` (`getMessage`).
    ///
    /// # Errors
    /// [`IoError`] reading a file that should be there.
    pub async fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: usize,
        filter: &PullFilter<'_>,
    ) -> Result<GetMessageResult, IoError> {
        let (min_offset, max_offset) = self
            .shared
            .queue(topic, queue_id)
            .map_or((0, 0), |q| (q.min_offset(), q.max_offset()));
        let mut result = GetMessageResult {
            status: GetMessageStatus::NoMessageInQueue,
            next_begin_offset: 0,
            min_offset,
            max_offset,
            parts: Vec::new(),
            messages: Vec::new(),
            suggest_pulling_from_slave: false,
        };
        if max_offset == 0 {
            result.status = GetMessageStatus::NoMessageInQueue;
            result.next_begin_offset = 0;
        } else if offset < min_offset {
            result.status = GetMessageStatus::OffsetTooSmall;
            result.next_begin_offset = min_offset;
        } else if offset == max_offset {
            result.status = GetMessageStatus::OffsetOverflowOne;
            result.next_begin_offset = offset;
        } else if offset > max_offset {
            result.status = GetMessageStatus::OffsetOverflowBadly;
            result.next_begin_offset = if min_offset == 0 {
                min_offset
            } else {
                max_offset
            };
        } else {
            self.read_queue(topic, queue_id, offset, max_msg_nums, filter, &mut result)
                .await?;
        }
        Ok(result)
    }

    async fn read_queue(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: usize,
        filter: &PullFilter<'_>,
        result: &mut GetMessageResult,
    ) -> Result<(), IoError> {
        let config = &self.shared.config;
        let units_per_file = i64::try_from(config.consume_queue_units_per_file).expect("fits");
        let slot = self.queue_slot(topic, queue_id, offset);
        let in_file_end = (slot.file_first + units_per_file).min(result.max_offset);
        let scan_units = (FILTER_SCAN_BYTES_MIN / UNIT_SIZE).max(max_msg_nums);
        let units_wanted = usize::try_from(in_file_end - offset)
            .unwrap_or(0)
            .min(scan_units);
        let Some(bytes) = self
            .read_queue_file(slot.path, slot.position, units_wanted * UNIT_SIZE)
            .await?
        else {
            result.status = GetMessageStatus::OffsetFoundNull;
            result.next_begin_offset = slot.file_first + units_per_file;
            return Ok(());
        };
        let max_physical = self.shared.committed_end();
        let min_physical = self.shared.min_physical_offset();
        let memory = memory_budget(config.access_message_in_memory_max_ratio);
        let mut chosen: Vec<(i64, CqUnit)> = Vec::new();
        let mut total = 0usize;
        let mut examined = 0usize;
        let mut max_physical_pulling = 0u64;
        result.status = GetMessageStatus::NoMatchedMessage;
        for chunk in bytes.chunks_exact(UNIT_SIZE) {
            let Some(unit) = CqUnit::decode(chunk) else {
                break;
            };
            let (Ok(physical), Ok(size)) = (
                u64::try_from(unit.physical_offset),
                usize::try_from(unit.size),
            ) else {
                examined += 1;
                continue;
            };
            max_physical_pulling = physical;
            let in_disk = max_physical.saturating_sub(physical) > memory;
            let count = result.messages.len() + chosen.len();
            if batch_full(config, size, max_msg_nums, total, count, in_disk) {
                break;
            }
            examined += 1;
            if physical < min_physical {
                if count == 0 {
                    result.status = GetMessageStatus::MessageWasRemoving;
                }
                continue;
            }
            if let Some(accepts) = filter.tags_codes {
                if !accepts(unit.tags_code) {
                    continue;
                }
            }
            let queue_offset = offset + i64::try_from(examined - 1).expect("fits");
            chosen.push((queue_offset, unit));
            total += size;
            // With a record filter, what is chosen is read and filtered once it would fill
            // the batch, and the scan goes on for the rest.
            if filter.records.is_some() && count + 1 >= max_msg_nums {
                self.read_records(&chosen, filter, result).await?;
                chosen.clear();
                total = result.messages.iter().map(|m| m.size).sum();
            }
        }
        result.next_begin_offset = offset + i64::try_from(examined).expect("fits");
        result.suggest_pulling_from_slave =
            max_physical.saturating_sub(max_physical_pulling) > memory;
        if !chosen.is_empty() {
            self.read_records(&chosen, filter, result).await?;
        }
        if !result.messages.is_empty() {
            result.status = GetMessageStatus::Found;
        }
        Ok(())
    }

    /// Reads the chosen records into the result, back to back, leaving out those
    /// `filter.records` refuses.
    ///
    /// Records of one queue sit between other queues' records in the CommitLog. Reading each
    /// on its own costs a device read per record (there is no page cache under O_DIRECT), so
    /// records close together in one segment are read as one span — gaps up to
    /// [`READ_GAP_MAX`], spans up to [`READ_SPAN_MAX`] — and cut out of it.
    async fn read_records(
        &self,
        chosen: &[(i64, CqUnit)],
        filter: &PullFilter<'_>,
        result: &mut GetMessageResult,
    ) -> Result<(), IoError> {
        let segment_size = self.shared.config.mapped_file_size_commit_log;
        let mut run_start = 0;
        while run_start < chosen.len() {
            let first = chosen[run_start].1;
            let first_offset = u64::try_from(first.physical_offset).expect("checked");
            let segment = segment_start(first_offset, segment_size);
            let mut run_end = run_start + 1;
            let mut end = first_offset + u64::try_from(first.size).expect("checked");
            while run_end < chosen.len() {
                let next = chosen[run_end].1;
                let next_offset = u64::try_from(next.physical_offset).expect("checked");
                let next_end = next_offset + u64::try_from(next.size).expect("checked");
                if next_offset < end
                    || next_offset - end > READ_GAP_MAX
                    || next_end - first_offset > READ_SPAN_MAX
                    || segment_start(next_offset, segment_size) != segment
                {
                    break;
                }
                end = next_end;
                run_end += 1;
            }
            let len = usize::try_from(end - first_offset).expect("fits");
            let span = self.commit_log_bytes(first_offset, len).await?;
            // Records of the run that touch go out as one part.
            let mut part: Option<std::ops::Range<usize>> = None;
            for (queue_offset, unit) in &chosen[run_start..run_end] {
                let size = usize::try_from(unit.size).expect("checked");
                let from = usize::try_from(
                    u64::try_from(unit.physical_offset).expect("checked") - first_offset,
                )
                .expect("fits");
                if from + size > span.len() {
                    // The segment ends before a committed record does: a damaged store.
                    let path = self
                        .shared
                        .config
                        .commit_log_dir()
                        .join(segment_name(segment));
                    return Err(IoError::file(
                        "read a record",
                        &path,
                        std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            format!("record at {} ends past the segment", unit.physical_offset),
                        ),
                    ));
                }
                if let Some(accepts) = filter.records {
                    if !accepts(&span[from..from + size]) {
                        continue;
                    }
                }
                let start = match &mut part {
                    Some(range) if range.end == from => {
                        let start = range.len();
                        range.end = from + size;
                        start
                    }
                    _ => {
                        if let Some(range) = part.replace(from..from + size) {
                            result.parts.push(span.slice(range));
                        }
                        0
                    }
                };
                result.messages.push(FoundMessage {
                    queue_offset: *queue_offset,
                    physical_offset: unit.physical_offset,
                    part: result.parts.len(),
                    start,
                    size,
                });
            }
            if let Some(range) = part {
                result.parts.push(span.slice(range));
            }
            run_start = run_end;
        }
        Ok(())
    }

    /// The record stored at `physical_offset` (`lookMessageByOffset`), `None` if there is
    /// none (below the minimum, past the committed end, or not a record).
    ///
    /// # Errors
    /// [`IoError`] reading the segment.
    pub async fn record_at(&self, physical_offset: i64) -> Result<Option<Vec<u8>>, IoError> {
        let Ok(offset) = u64::try_from(physical_offset) else {
            return Ok(None);
        };
        if offset < self.shared.min_physical_offset() || offset + 8 > self.shared.committed_end() {
            return Ok(None);
        }
        // Size and magic code first: an offset that is not a record's start (a client's)
        // must not make the whole size it reads there be read into memory.
        let head = self.read_commit_log(offset, 8).await?;
        let word = |at: usize| {
            head.get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map(i32::from_be_bytes)
        };
        if !matches!(word(4), Some(MAGIC_CODE_V1 | MAGIC_CODE_V2)) {
            return Ok(None);
        }
        let Some(size) = word(0).and_then(|s| u64::try_from(s).ok()) else {
            return Ok(None);
        };
        if size < 8 || offset + size > self.shared.committed_end() {
            return Ok(None);
        }
        let bytes = self
            .read_commit_log(offset, usize::try_from(size).expect("fits"))
            .await?;
        Ok(matches!(decode_record(&bytes, false), Ok(Record::Message { .. })).then_some(bytes))
    }

    /// Records of `topic` whose `KEYS` or `UNIQ_KEY` is `key`, stored in
    /// `[begin_ms, end_ms]`, newest first, at most `max` (`queryMessage`). Unlike Java 4.9,
    /// hash collisions are filtered out here.
    ///
    /// # Errors
    /// [`IoError`] reading a record.
    pub async fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<Vec<u8>>, IoError> {
        let offsets = self
            .handle
            .query_offsets_by_key(topic, key, max, begin_ms, end_ms)
            .await;
        let mut found = Vec::new();
        for offset in offsets {
            let Some(bytes) = self.record_at(offset).await? else {
                continue;
            };
            let Ok(Record::Message { record, .. }) = decode_record(&bytes, false) else {
                continue;
            };
            let properties = parse_properties(record.properties);
            let matches = record.topic == topic
                && properties.iter().any(|(name, value)| {
                    (name == PROPERTY_UNIQ_KEY && value == key)
                        || (name == "KEYS" && value.split(' ').any(|k| k == key))
                });
            if matches {
                found.push(bytes);
            }
        }
        Ok(found)
    }

    /// Store time of the message at `queue_offset` of a queue, `None` if it is not readable.
    ///
    /// # Errors
    /// [`IoError`].
    pub async fn store_time_at(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
    ) -> Result<Option<i64>, IoError> {
        let Some(unit) = self.unit_at(topic, queue_id, queue_offset).await? else {
            return Ok(None);
        };
        let Some(bytes) = self.record_at(unit.physical_offset).await? else {
            return Ok(None);
        };
        Ok(match decode_record(&bytes, false) {
            Ok(Record::Message { record, .. }) => Some(record.store_timestamp),
            _ => None,
        })
    }

    /// Store time of the oldest message of a queue (`getEarliestMessageTime`).
    ///
    /// # Errors
    /// [`IoError`].
    pub async fn earliest_message_time(
        &self,
        topic: &str,
        queue_id: i32,
    ) -> Result<Option<i64>, IoError> {
        let min = self.min_offset_in_queue(topic, queue_id);
        self.store_time_at(topic, queue_id, min).await
    }

    /// The ConsumeQueue unit at `queue_offset` of a queue, `None` past its end or before its
    /// start (QUERY_CONSUME_QUEUE reads units so).
    ///
    /// # Errors
    /// [`IoError`].
    pub async fn unit_at(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
    ) -> Result<Option<CqUnit>, IoError> {
        if queue_offset < self.min_offset_in_queue(topic, queue_id)
            || queue_offset >= self.max_offset_in_queue(topic, queue_id)
        {
            return Ok(None);
        }
        let slot = self.queue_slot(topic, queue_id, queue_offset);
        let Some(bytes) = self
            .read_queue_file(slot.path, slot.position, UNIT_SIZE)
            .await?
        else {
            return Ok(None);
        };
        Ok(CqUnit::decode(&bytes).filter(CqUnit::is_written))
    }

    /// Where the unit at logical `offset` (non-negative) of a queue lives.
    fn queue_slot(&self, topic: &str, queue_id: i32, offset: i64) -> QueueSlot {
        let config = &self.shared.config;
        let units_per_file = i64::try_from(config.consume_queue_units_per_file).expect("fits");
        let file_first = offset - offset % units_per_file;
        let byte = |units: i64| u64::try_from(units).expect("non-negative") * UNIT_SIZE as u64;
        QueueSlot {
            file_first,
            path: config
                .queue_dir(topic, queue_id)
                .join(segment_name(byte(file_first))),
            position: byte(offset - file_first),
        }
    }

    /// `len` CommitLog bytes from `offset` (below the committed end, inside one segment), as
    /// a pull reads them: a slice of a mapped window, else read into a buffer; fewer at the
    /// segment's end.
    ///
    /// # Errors
    /// [`IoError`] reading the segment.
    pub async fn commit_log_bytes(&self, offset: u64, len: usize) -> Result<Bytes, IoError> {
        self.forget_deleted_files();
        match self.chunks.span(offset, len).await? {
            Some(span) => Ok(span),
            None => Ok(Bytes::from(self.read_commit_log(offset, len).await?)),
        }
    }

    async fn read_commit_log(&self, offset: u64, len: usize) -> Result<Vec<u8>, IoError> {
        let size = self.shared.config.mapped_file_size_commit_log;
        let start = segment_start(offset, size);
        let path = self
            .shared
            .config
            .commit_log_dir()
            .join(segment_name(start));
        let file = self.file(path).await?;
        file.read_at(offset - start, len).await
    }

    /// `len` bytes of a ConsumeQueue file at `position` (fewer at its end); `None` when the
    /// file cannot be opened. The units come straight from a read-only mapping of the file
    /// when its pages are in the page cache (dispatch wrote them through its own mapping): no
    /// I/O, no wait on the ring; else, or with `pullMappedMemoryMax=0`, they are read.
    ///
    /// # Errors
    /// [`IoError`] reading a file that opened.
    async fn read_queue_file(
        &self,
        path: PathBuf,
        position: u64,
        len: usize,
    ) -> Result<Option<Vec<u8>>, IoError> {
        if self.shared.config.pull_mapped_memory_max > 0 {
            if let Some(map) = self.queue_map(&path) {
                let bytes: &[u8] = map.as_ref().as_ref();
                let start = usize::try_from(position)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                let end = start.saturating_add(len);
                // A mapping shorter than asked (a file that grew) falls back to the read.
                if end <= bytes.len() && map.is_resident(start..end) {
                    return Ok(Some(bytes[start..end].to_vec()));
                }
            }
        }
        let Ok(file) = self.file(path).await else {
            return Ok(None);
        };
        file.read_at(position, len).await.map(Some)
    }

    /// A read-only mapping of a whole ConsumeQueue file, `None` if it cannot be mapped.
    fn queue_map(&self, path: &PathBuf) -> Option<Rc<ReadWindow>> {
        self.forget_deleted_files();
        if let Some(map) = self.queue_maps.borrow().get(path) {
            return Some(Rc::clone(map));
        }
        let map = Rc::new(ReadWindow::open(path, 0, usize::MAX).ok()?);
        let mut maps = self.queue_maps.borrow_mut();
        if maps.len() >= OPEN_FILES_MAX {
            maps.clear();
        }
        maps.insert(path.clone(), Rc::clone(&map));
        Some(map)
    }

    /// A CommitLog or ConsumeQueue file, read through the page cache.
    ///
    /// Where the writer writes into the page cache (every ConsumeQueue; the CommitLog under
    /// ASYNC_FLUSH) a direct read would make the kernel write back the dirty pages it covers
    /// first. Where it writes direct (the CommitLog under SYNC_FLUSH) the kernel drops the
    /// cached pages a direct write covers, before and after it, so a read never sees stale
    /// bytes below the committed end, and a consumer catching up gets the kernel's read-ahead
    /// instead of a device read per pull.
    async fn file(&self, path: PathBuf) -> Result<Rc<PageCacheFile>, IoError> {
        self.forget_deleted_files();
        if let Some(file) = self.files.borrow().get(&path) {
            return Ok(Rc::clone(file));
        }
        let file = Rc::new(PageCacheFile::open_existing(&path).await?);
        let mut files = self.files.borrow_mut();
        if files.len() >= OPEN_FILES_MAX {
            files.clear();
        }
        files.insert(path, Rc::clone(&file));
        Ok(file)
    }

    /// Closes the handles of files retention deleted, once per move of the CommitLog's
    /// minimum: an open handle keeps a deleted segment's blocks allocated, and a reader that
    /// kept them all would stop retention from giving space back.
    fn forget_deleted_files(&self) {
        let min = self.shared.min_physical_offset();
        if min == self.seen_min.get() {
            return;
        }
        self.seen_min.set(min);
        self.files.borrow_mut().retain(|path, _| path.exists());
        self.queue_maps.borrow_mut().retain(|path, _| path.exists());
        self.chunks.forget_below(min);
    }
}

// The handle makes readers here, beside them: a reader holds a handle, so the handle's own
// module stays below this one and knows nothing of reading.
impl StoreHandle {
    /// A reader for the calling shard.
    #[must_use]
    pub fn reader(&self) -> StoreReader {
        StoreReader::new(Arc::clone(self.shared()), self.clone())
    }
}

/// A ConsumeQueue unit's place: its file (by first logical offset and path) and position.
struct QueueSlot {
    file_first: i64,
    path: PathBuf,
    position: u64,
}

/// Whether the batch is full before taking a record of `size` (`isTheBatchFull`).
fn batch_full(
    config: &super::config::StoreConfig,
    size: usize,
    max_msg_nums: usize,
    total: usize,
    count: usize,
    in_disk: bool,
) -> bool {
    if total == 0 || count == 0 {
        return false;
    }
    if max_msg_nums <= count {
        return true;
    }
    let (max_bytes, max_count) = if in_disk {
        (
            config.max_transfer_bytes_on_message_in_disk,
            config.max_transfer_count_on_message_in_disk,
        )
    } else {
        (
            config.max_transfer_bytes_on_message_in_memory,
            config.max_transfer_count_on_message_in_memory,
        )
    };
    total + size > max_bytes || count > max_count - 1
}

/// Bytes behind the CommitLog end that count as "in memory": `ratio` percent of RAM.
fn memory_budget(ratio: u64) -> u64 {
    static TOTAL: OnceLock<u64> = OnceLock::new();
    let total = *TOTAL.get_or_init(|| {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                Some(kib * 1024)
            })
            .unwrap_or(8 << 30)
    });
    total / 100 * ratio
}
