//! Finds the records in the CommitLog bytes a master replicated (`RecordCursor`): a slave
//! checks each record where one starts (magic, size, body CRC, its physical offset field)
//! and makes the dispatch entry of each one whole, as its master's writer did. Bytes that do
//! not continue the log are refused and change nothing.

use crate::store::dispatch::{dispatch_entry, DelayLevels, DispatchEntry, RecordMeta};
use crate::store::message::{decode_record, Record, RecordError};
use crate::store::segment::segment_start;

/// Finds the records in the replicated bytes: where each starts, checked (magic, size, body
/// CRC, its physical offset field), and the dispatch entry of each one whole. Public for the
/// fuzz target of the HA stream.
#[derive(Debug)]
pub struct RecordCursor {
    segment_size: u64,
    record_max: usize,
    delay_levels: DelayLevels,
    /// CommitLog offset of `carry[0]`.
    start: u64,
    /// Bytes of a record not whole yet.
    carry: Vec<u8>,
    /// Bytes left of a blank record's segment end, to step over.
    skip: u64,
    /// Whether `start` is known: set by the first frame, or a resume.
    placed: bool,
}

impl RecordCursor {
    /// A cursor over an empty log of `segment_size` segments, taking records up to
    /// `record_max` bytes.
    #[must_use]
    pub fn new(segment_size: u64, record_max: usize, delay_levels: DelayLevels) -> RecordCursor {
        RecordCursor {
            segment_size,
            record_max,
            delay_levels,
            start: 0,
            carry: Vec::new(),
            skip: 0,
            placed: false,
        }
    }

    /// An empty cursor of the same settings, left behind while this one is lent out.
    pub(super) fn detached(&self) -> RecordCursor {
        RecordCursor::new(
            self.segment_size,
            self.record_max,
            self.delay_levels.clone(),
        )
    }

    /// Where the log ends (after recovery, a record's end; 0 when empty). What the cursor
    /// has seen on an earlier connection must end there (a record not whole yet is kept).
    pub(super) fn resume_at(&mut self, end: u64) -> Result<(), String> {
        if !self.placed {
            self.start = end;
            self.placed = end != 0;
            return Ok(());
        }
        let seen_end = self.start + self.carry.len() as u64;
        if seen_end != end {
            return Err(format!(
                "the replicated records end at {seen_end}, but the CommitLog at {end}"
            ));
        }
        Ok(())
    }

    /// Takes `bytes` at `offset` (the end of what it has seen); returns the entries of the
    /// records they complete, or why they do not continue the log. On an error it is as
    /// before the call.
    ///
    /// # Errors
    /// Bytes that do not continue the log, with why.
    pub fn feed(&mut self, offset: u64, bytes: &[u8]) -> Result<Vec<DispatchEntry>, String> {
        let saved = (self.placed, self.start, self.carry.len(), self.skip);
        if !self.placed {
            if !offset.is_multiple_of(self.segment_size) {
                return Err(format!(
                    "an empty slave is sent offset {offset}, not a segment's start"
                ));
            }
            self.start = offset;
            self.placed = true;
        }
        let result = self.feed_placed(bytes);
        if result.is_err() {
            (self.placed, self.start) = (saved.0, saved.1);
            self.carry.truncate(saved.2);
            self.skip = saved.3;
        }
        result
    }

    fn feed_placed(&mut self, bytes: &[u8]) -> Result<Vec<DispatchEntry>, String> {
        let mut bytes = bytes;
        if self.skip > 0 {
            let step = usize::try_from(self.skip)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            bytes = &bytes[step..];
            self.skip -= step as u64;
            self.start += step as u64;
        }
        self.carry.extend_from_slice(bytes);
        let mut entries = Vec::new();
        let mut at = 0usize;
        while at < self.carry.len() {
            let offset = self.start + at as u64;
            let segment_end = segment_start(offset, self.segment_size) + self.segment_size;
            match decode_record(&self.carry[at..], true) {
                Ok(Record::Message { record, size }) => {
                    if u64::try_from(record.physical_offset).ok() != Some(offset) {
                        return Err(format!(
                            "the record at {offset} says it is at {}",
                            record.physical_offset
                        ));
                    }
                    if offset + size as u64 > segment_end {
                        return Err(format!("the record at {offset} runs past its segment"));
                    }
                    let meta = RecordMeta::of(&record, size);
                    entries.push(dispatch_entry(&meta, &self.delay_levels));
                    at += size;
                }
                Ok(Record::Blank { remaining }) => {
                    if offset + remaining as u64 != segment_end {
                        return Err(format!(
                            "the blank record at {offset} does not end its segment"
                        ));
                    }
                    let here = (self.carry.len() - at).min(remaining);
                    self.skip = (remaining - here) as u64;
                    at += here;
                }
                Err(RecordError::Truncated { needed, .. }) => {
                    if needed > self.record_max || offset + needed as u64 > segment_end {
                        return Err(format!("the record at {offset} claims {needed} bytes"));
                    }
                    break;
                }
                Err(error) => return Err(format!("at {offset}: {error}")),
            }
        }
        self.carry.drain(..at);
        self.start += at as u64;
        // While a blank's segment end is stepped over, nothing else is carried.
        debug_assert!(self.skip == 0 || self.carry.is_empty());
        Ok(entries)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::message::{blank_record, MessageRecord};
    use std::net::SocketAddr;

    pub(crate) fn record(offset: u64, queue_offset: i64, body: &[u8]) -> Vec<u8> {
        let host: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        MessageRecord {
            queue_offset,
            physical_offset: i64::try_from(offset).expect("offset"),
            born_timestamp: 1,
            born_host: host,
            store_timestamp: 2,
            store_host: host,
            ..MessageRecord::new("T", body, b"")
        }
        .to_bytes()
    }

    /// A segment of 4 KiB: records, then a blank to its end; then a record in the next.
    pub(crate) fn log() -> (Vec<u8>, usize) {
        let mut log = Vec::new();
        let mut count = 0;
        while log.len() + 300 < 4096 {
            let r = record(log.len() as u64, count, &[7u8; 100]);
            log.extend_from_slice(&r);
            count += 1;
        }
        let remaining = 4096 - log.len();
        log.extend_from_slice(&blank_record(remaining));
        log.resize(4096, 0);
        let next = record(4096, count, b"next");
        log.extend_from_slice(&next);
        (log, usize::try_from(count).expect("count") + 1)
    }

    pub(crate) fn cursor() -> RecordCursor {
        RecordCursor::new(4096, 1 << 20, DelayLevels::default())
    }

    #[test]
    fn records_cut_anywhere_come_out_whole_once_each() {
        let (log, records) = log();
        for cut in [1usize, 7, 100, 333, 4096, 5000] {
            let mut c = cursor();
            let mut entries = Vec::new();
            let mut at = 0;
            while at < log.len() {
                // Frames never cross a segment.
                let segment_end = (at / 4096 + 1) * 4096;
                let end = (at + cut).min(log.len()).min(segment_end);
                entries.extend(c.feed(at as u64, &log[at..end]).expect("continues"));
                at = end;
            }
            assert_eq!(entries.len(), records, "cut {cut}");
            let offsets: Vec<i64> = entries.iter().map(|e| e.physical_offset).collect();
            assert!(offsets.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(*offsets.last().expect("one"), 4096);
            assert!(c.carry.is_empty());
        }
    }

    #[test]
    fn bytes_that_do_not_continue_the_log_are_refused_and_change_nothing() {
        let (log, _) = log();
        let mut c = cursor();
        c.feed(0, &log[..150]).expect("a start");
        // The next bytes from elsewhere: the record's middle is replaced by another's start.
        let foreign = record(999, 0, b"x");
        let mut wrong = log[150..400].to_vec();
        wrong[..foreign.len().min(250)].copy_from_slice(&foreign[..foreign.len().min(250)]);
        assert!(c.feed(150, &wrong).is_err());
        // As before: the right bytes still go on.
        let entries = c.feed(150, &log[150..400]).expect("continues");
        assert_eq!(entries.len(), 2);
        // A log that starts mid-record is refused.
        let mut fresh = cursor();
        assert!(fresh.resume_at(150).is_ok());
        assert!(fresh.feed(150, &log[150..400]).is_err());
    }

    #[test]
    fn an_empty_slave_takes_a_segment_start_only() {
        let (log, _) = log();
        let mut c = cursor();
        c.resume_at(0).expect("empty");
        assert!(c.feed(100, &log[100..200]).is_err());
        let entries = c.feed(4096, &log[4096..]).expect("a segment's start");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].physical_offset, 4096);
    }
}
