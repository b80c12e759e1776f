//! Start-up: the recovery decision table (`reference/store-format.md` §2.2, §5) and the walk
//! over CommitLog records that finds the valid end.
//!
//! - no CommitLog segment: a fresh store, nothing to walk or re-dispatch;
//! - no `abort` file (clean stop): walk from the third-to-last segment; re-dispatch from the
//!   queues' max CommitLog end (normally nothing);
//! - `abort` and a checkpoint time: walk from the newest segment whose first record is
//!   stored at or before the checkpoint's min time less 3 s; re-dispatch from there;
//! - `abort` and no usable checkpoint time: walk and re-dispatch from the first segment;
//!
//! and in every case: records are checked by magic, size and (`checkCRCOnRecover`) body CRC;
//! the first that fails ends the valid data; the stale bytes after it are zeroed and later
//! segments deleted; ConsumeQueue units pointing past the valid end are cut; IndexFiles newer
//! than the checkpoint (after an unclean stop) or indexing a record at or past the valid end
//! are dropped, with every later one; what the queues and the index miss is dispatched again
//! before the store takes puts — from the row's offset, or from the end of the IndexFiles kept
//! if that is lower. The per-queue next offsets come from the recovered queues.

use super::config::StoreConfig;
use super::dispatch::RecordMeta;
use super::message::{decode_record, Record, RecordError, FLAG_BORN_HOST_V6};
use super::segment::{parse_segment_name, segment_start, DmaDirectory, SegmentOpener};
use super::segment_writer::StoreError;
use ferromq_uring::file::SegmentFile;
use ferromq_uring::IoError;
use std::path::Path;

/// Which row of the decision table applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryMode {
    /// No CommitLog yet.
    Fresh,
    /// The last stop was clean (no `abort` file).
    Normal,
    /// The last run did not stop cleanly; the walk started from the checkpoint.
    Abnormal,
    /// The last run did not stop cleanly and the checkpoint gave no usable time.
    AbnormalFromFirst,
}

/// Bytes read at a time while walking records.
const WALK_CHUNK: usize = 4 << 20;

/// What a walk does with the valid records it passes.
pub trait WalkVisitor {
    /// A valid message record.
    fn visit(&mut self, meta: RecordMeta<'_>);
    /// A chunk of the segment is done (a point to act on what was visited, in bounded memory).
    fn chunk_done(&mut self) -> impl std::future::Future<Output = ()>;
}

/// The visitor that only finds the valid end.
#[derive(Debug)]
pub struct FindEnd;

impl WalkVisitor for FindEnd {
    fn visit(&mut self, _meta: RecordMeta<'_>) {}
    async fn chunk_done(&mut self) {}
}

/// The segments of a CommitLog directory, sorted, each checked to be `segment_size` long.
///
/// # Errors
/// [`StoreError::Io`] listing the directory; [`StoreError::Layout`] for a segment of the wrong
/// size or a gap between segments.
pub fn list_segments(dir: &Path, segment_size: u64) -> Result<Vec<u64>, StoreError> {
    let io = |op| IoError::on(op, dir);
    let mut starts = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io("list"))? {
        let entry = entry.map_err(io("list"))?;
        let Some(start) = entry.file_name().to_str().and_then(parse_segment_name) else {
            continue;
        };
        let len = entry.metadata().map_err(io("stat"))?.len();
        if len != segment_size {
            return Err(StoreError::Layout(format!(
                "CommitLog segment {} is {len} bytes, but mappedFileSizeCommitLog is \
                 {segment_size}",
                entry.path().display()
            )));
        }
        if start % segment_size != 0 {
            return Err(StoreError::Layout(format!(
                "CommitLog segment {} does not start at a multiple of \
                 mappedFileSizeCommitLog {segment_size}",
                entry.path().display()
            )));
        }
        starts.push(start);
    }
    starts.sort_unstable();
    if let Some(gap) = starts.windows(2).find(|w| w[1] != w[0] + segment_size) {
        return Err(StoreError::Layout(format!(
            "CommitLog segments {} and {} are not adjacent",
            gap[0], gap[1]
        )));
    }
    Ok(starts)
}

/// Store time of the first record of `bytes` (a segment's start), without checking the rest
/// of the record; `None` if it is not a message.
#[must_use]
pub fn peek_store_timestamp(bytes: &[u8]) -> Option<i64> {
    let i32_at = |at: usize| Some(i32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    let magic = i32_at(4)?;
    if magic != super::message::MAGIC_CODE_V1 && magic != super::message::MAGIC_CODE_V2 {
        return None;
    }
    let sys_flag = i32_at(36)?;
    let born_host = if sys_flag & FLAG_BORN_HOST_V6 != 0 {
        20
    } else {
        8
    };
    let at = 48 + born_host;
    Some(i64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// Chooses where the walk starts (the table's second column): an index into `segments`.
///
/// # Errors
/// The I/O error of reading a segment's first block.
pub async fn walk_start<O: SegmentOpener>(
    opener: &O,
    segment_size: u64,
    segments: &[u64],
    clean: bool,
    min_timestamp: Option<i64>,
) -> Result<(usize, RecoveryMode), IoError> {
    if segments.is_empty() {
        return Ok((0, RecoveryMode::Fresh));
    }
    if clean {
        return Ok((segments.len().saturating_sub(3), RecoveryMode::Normal));
    }
    let Some(min_timestamp) = min_timestamp.filter(|t| *t > 0) else {
        return Ok((0, RecoveryMode::AbnormalFromFirst));
    };
    for (index, &start) in segments.iter().enumerate().rev() {
        let file = opener.open(start, segment_size).await?;
        let head = file.read_at(0, 4096).await?;
        if peek_store_timestamp(&head).is_some_and(|t| t != 0 && t <= min_timestamp) {
            return Ok((index, RecoveryMode::Abnormal));
        }
    }
    Ok((0, RecoveryMode::AbnormalFromFirst))
}

/// Walks records from segment `segments[from]` and returns the end of valid data, calling
/// the visitor for each valid message record at or after `visit_from`.
///
/// # Errors
/// The I/O error of reading a segment.
pub async fn walk<O: SegmentOpener>(
    opener: &O,
    segment_size: u64,
    segments: &[u64],
    from: usize,
    verify_crc: bool,
    visit_from: u64,
    visitor: &mut impl WalkVisitor,
) -> Result<u64, IoError> {
    let Some(&first) = segments.get(from) else {
        return Ok(segments.first().copied().unwrap_or(0));
    };
    let segment_len = usize::try_from(segment_size).expect("segment fits usize");
    let mut valid_end = first;
    for &start in &segments[from..] {
        if start != valid_end {
            break;
        }
        tracing::info!(segment = start, "checking CommitLog records");
        let file = opener.open(start, segment_size).await?;
        let mut at = 0usize;
        let mut rolled = false;
        let mut chunk_start = 0usize;
        let mut chunk = Vec::new();
        'segment: while at < segment_len {
            if at >= chunk_start + chunk.len() || at < chunk_start {
                visitor.chunk_done().await;
                chunk_start = at;
                chunk = file
                    .read_at(at as u64, WALK_CHUNK.min(segment_len - at))
                    .await?;
            }
            loop {
                let local = &chunk[at - chunk_start..];
                match decode_record(local, verify_crc) {
                    Ok(Record::Message { record, size }) => {
                        let expected = start + at as u64;
                        if u64::try_from(record.physical_offset).ok() != Some(expected) {
                            break 'segment;
                        }
                        if expected >= visit_from {
                            visitor.visit(RecordMeta::of(&record, size));
                        }
                        at += size;
                        if at >= chunk_start + chunk.len() {
                            continue 'segment;
                        }
                    }
                    Ok(Record::Blank { remaining }) if at + remaining == segment_len => {
                        at = segment_len;
                        rolled = true;
                        break 'segment;
                    }
                    Err(RecordError::Truncated { needed, .. })
                        if chunk_start + chunk.len() < segment_len
                            && needed <= segment_len - at =>
                    {
                        // The record runs past this chunk: read from its start, big enough.
                        visitor.chunk_done().await;
                        chunk_start = at;
                        chunk = file
                            .read_at(at as u64, needed.max(WALK_CHUNK).min(segment_len - at))
                            .await?;
                        if chunk.len() < needed {
                            break 'segment;
                        }
                    }
                    Ok(Record::Blank { .. }) | Err(_) => break 'segment,
                }
            }
        }
        visitor.chunk_done().await;
        valid_end = start + at as u64;
        if !rolled {
            break;
        }
    }
    Ok(valid_end)
}

/// Prepares the CommitLog for appends at `valid_end`: zeroes stale bytes after it in its
/// segment (up to the first run of 1 MiB that is already zero, so a later walk never meets
/// an old record behind new ones) and deletes segments after it. Returns the segments kept.
///
/// # Errors
/// The I/O error of reading, writing or deleting.
pub async fn cut_tail(
    config: &StoreConfig,
    segments: &[u64],
    valid_end: u64,
) -> Result<Vec<u64>, StoreError> {
    let size = config.mapped_file_size_commit_log;
    let dir = config.commit_log_dir();
    let opener = DmaDirectory { dir: dir.clone() };
    let current = segment_start(valid_end, size);
    let mut kept = Vec::new();
    for &start in segments {
        if start > current {
            let path = dir.join(super::segment::segment_name(start));
            tracing::warn!(
                segment = %path.display(),
                "deleting CommitLog segment past the valid end"
            );
            std::fs::remove_file(&path).map_err(IoError::on("delete", &path))?;
        } else {
            kept.push(start);
        }
    }
    if !kept.contains(&current) {
        return Ok(kept);
    }
    let file = opener.open(current, size).await?;
    let alignment = file.alignment();
    let mut position = (valid_end - current) / alignment * alignment;
    const ZERO_RUN: u64 = 1 << 20;
    let mut wrote = false;
    while position < size {
        let len = ZERO_RUN.min(size - position);
        let mut bytes = file
            .read_at(position, usize::try_from(len).expect("fits"))
            .await?;
        // `position` is within the segment; `valid_end` is a CommitLog offset.
        let keep =
            usize::try_from((valid_end - current).saturating_sub(position).min(len)).expect("fits");
        if bytes[keep.min(bytes.len())..].iter().all(|b| *b == 0) {
            break;
        }
        bytes.resize(usize::try_from(len).expect("fits"), 0);
        bytes[keep..].fill(0);
        file.write_at(position, &bytes).await?;
        wrote = true;
        position += len;
    }
    if wrote {
        file.sync().await?;
    }
    Ok(kept)
}
