//! `TimerLog` (Java `store/.../timer/TimerLog.java`): `<root>/timerlog/`, files of
//! `mappedFileSizeTimerLog` bytes (100 MiB) named by their 20-digit start offset, holding
//! 52-byte units back to back. A unit's position (its absolute offset) is what the wheel's
//! slots and the units' `prevPos` point at, so a slot's units form a chain backwards.
//!
//! A unit (big-endian):
//!
//! | at | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | size, always 52 |
//! | 4 | 8 | prevPos: the slot's unit before this one, -1 for the first |
//! | 12 | 4 | magic: DEFAULT 1, ROLL 2, DELETE 4 (or-ed) |
//! | 16 | 8 | currWriteTime: the write time of the timer when it was appended |
//! | 24 | 4 | delayed time, minus currWriteTime |
//! | 28 | 8 | CommitLog offset of the message |
//! | 36 | 4 | its size |
//! | 40 | 4 | Java's `String.hashCode` of its real topic |
//! | 44 | 8 | reserved, 0 |
//!
//! When fewer than 52 + 16 bytes are left in a file, a blank of 16 bytes ends it: the
//! bytes left (4), 0 (8), [`BLANK_MAGIC_CODE`] (4); the next unit opens the next file.
//! A file whose bytes past the written end are zeros reads as ending there (size 0).

use super::TimerError;
use crate::store::segment::{parse_segment_name, segment_name};
use ferromq_uring::mapped::MappedFile;
use ferromq_uring::IoError;
use std::path::{Path, PathBuf};

/// `TimerLog.UNIT_SIZE`.
pub const UNIT_SIZE: usize = 52;
/// `TimerLog.UNIT_PRE_SIZE_FOR_MSG`: where a unit's CommitLog offset starts.
pub const UNIT_PRE_SIZE_FOR_MSG: usize = 28;
/// `TimerLog.MIN_BLANK_LEN`.
pub const MIN_BLANK_LEN: usize = 4 + 8 + 4;
/// `TimerLog.BLANK_MAGIC_CODE`: `0xBBCCDDEE ^ 1880681586 + 8`, Java's precedence (the sum
/// first).
#[allow(clippy::cast_possible_wrap)]
pub const BLANK_MAGIC_CODE: i32 = (0xBBCC_DDEE_u32 as i32) ^ (1_880_681_586 + 8);

/// One timerlog unit, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerUnit {
    /// The slot's previous unit, -1 for none.
    pub prev_pos: i64,
    /// DEFAULT, ROLL, DELETE bits.
    pub magic: i32,
    /// The timer's write time when the unit was appended (`currWriteTime`).
    pub enqueue_time_ms: i64,
    /// The slot time, as the delta from `enqueue_time_ms`.
    pub delay_delta_ms: i32,
    /// The message's CommitLog offset.
    pub offset_py: i64,
    /// The message's record size.
    pub size_py: i32,
    /// `String.hashCode` of the real topic.
    pub topic_hash: i32,
}

impl TimerUnit {
    /// The slot time the unit was put in (`currWriteTime + delayed`), with Java's int
    /// arithmetic.
    #[must_use]
    pub fn delayed_time_ms(&self) -> i64 {
        self.enqueue_time_ms
            .wrapping_add(i64::from(self.delay_delta_ms))
    }

    /// The unit's 52 bytes.
    #[must_use]
    pub fn encode(&self) -> [u8; UNIT_SIZE] {
        let mut out = [0u8; UNIT_SIZE];
        out[0..4].copy_from_slice(&52i32.to_be_bytes());
        out[4..12].copy_from_slice(&self.prev_pos.to_be_bytes());
        out[12..16].copy_from_slice(&self.magic.to_be_bytes());
        out[16..24].copy_from_slice(&self.enqueue_time_ms.to_be_bytes());
        out[24..28].copy_from_slice(&self.delay_delta_ms.to_be_bytes());
        out[28..36].copy_from_slice(&self.offset_py.to_be_bytes());
        out[36..40].copy_from_slice(&self.size_py.to_be_bytes());
        out[40..44].copy_from_slice(&self.topic_hash.to_be_bytes());
        // 44..52: reserved, zero.
        out
    }

    /// Decodes a unit, whatever its size and magic say (the caller checks them).
    #[must_use]
    pub fn decode(bytes: &[u8; UNIT_SIZE]) -> (i32, TimerUnit) {
        let i32_at = |at: usize| {
            i32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let i64_at = |at: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[at..at + 8]);
            i64::from_be_bytes(word)
        };
        (
            i32_at(0),
            TimerUnit {
                prev_pos: i64_at(4),
                magic: i32_at(12),
                enqueue_time_ms: i64_at(16),
                delay_delta_ms: i32_at(24),
                offset_py: i64_at(28),
                size_py: i32_at(36),
                topic_hash: i32_at(40),
            },
        )
    }
}

/// The timerlog's files, all mapped (pages come and go with the page cache), and the
/// written end.
#[derive(Debug)]
pub struct TimerLog {
    dir: PathBuf,
    file_size: u64,
    /// By start offset, ascending, contiguous.
    files: Vec<(u64, MappedFile)>,
    /// Absolute offset of the next unit.
    end: u64,
}

impl TimerLog {
    /// Opens `dir` (made if absent) and maps every file in it; the written end is the end of
    /// the last file until [`TimerLog::truncate_dirty`] sets it, as Java's `load`.
    ///
    /// # Errors
    /// [`TimerError::Layout`] for a file of another size or a gap between files;
    /// [`TimerError::Io`].
    pub fn open(dir: &Path, file_size: u64) -> Result<TimerLog, TimerError> {
        assert!(
            file_size >= (UNIT_SIZE + MIN_BLANK_LEN) as u64,
            "timerlog file too small"
        );
        std::fs::create_dir_all(dir).map_err(IoError::on("mkdir", dir))?;
        let mut starts = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(IoError::on("readdir", dir))? {
            let entry = entry.map_err(IoError::on("readdir", dir))?;
            let name = entry.file_name();
            let Some(start) = name.to_str().and_then(parse_segment_name) else {
                continue;
            };
            let path = entry.path();
            let len = entry.metadata().map_err(IoError::on("stat", &path))?.len();
            if len != file_size {
                return Err(TimerError::Layout {
                    path,
                    reason: format!("{len} bytes, mappedFileSizeTimerLog is {file_size}"),
                });
            }
            starts.push(start);
        }
        starts.sort_unstable();
        let mut files = Vec::with_capacity(starts.len());
        for (index, start) in starts.iter().enumerate() {
            if *start % file_size != 0 || (index > 0 && starts[index - 1] + file_size != *start) {
                return Err(TimerError::Layout {
                    path: dir.join(segment_name(*start)),
                    reason: "not where the file before it ends".to_owned(),
                });
            }
            let path = dir.join(segment_name(*start));
            files.push((*start, MappedFile::open(&path, file_size)?));
        }
        let end = files.last().map_or(0, |(start, _)| start + file_size);
        Ok(TimerLog {
            dir: dir.to_owned(),
            file_size,
            files,
            end,
        })
    }

    /// The file size (`mappedFileSizeTimerLog`).
    #[must_use]
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// The offset the next unit goes to.
    #[must_use]
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Start offsets of the files.
    pub fn file_starts(&self) -> impl Iterator<Item = u64> + '_ {
        self.files.iter().map(|(start, _)| *start)
    }

    /// Appends one unit (`TimerLog.append`) and answers its position: a blank ends the file
    /// first when the unit and a blank would not both fit.
    ///
    /// # Errors
    /// [`TimerError::Io`] making the next file.
    pub fn append(&mut self, unit: &[u8; UNIT_SIZE]) -> Result<u64, TimerError> {
        if self.files.is_empty() || self.end == self.last_start() + self.file_size {
            self.add_file()?;
        }
        let in_file = self.end - self.last_start();
        let left = self.file_size - in_file;
        if (UNIT_SIZE + MIN_BLANK_LEN) as u64 > left {
            let mut blank = [0u8; MIN_BLANK_LEN];
            let left_i32 = i32::try_from(left).expect("left in a file fits an int");
            blank[0..4].copy_from_slice(&left_i32.to_be_bytes());
            blank[12..16].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
            self.write_at(self.end, &blank);
            self.end = self.last_start() + self.file_size;
            self.add_file()?;
        }
        let position = self.end;
        self.write_at(position, unit);
        self.end += UNIT_SIZE as u64;
        Ok(position)
    }

    /// The 52 bytes at `position`, `None` when no file holds them whole.
    #[must_use]
    pub fn read_unit(&self, position: u64) -> Option<[u8; UNIT_SIZE]> {
        let (start, file) = self.file_of(position)?;
        let at = usize::try_from(position - start).ok()?;
        let bytes = file.as_ref().get(at..at + UNIT_SIZE)?;
        let mut unit = [0u8; UNIT_SIZE];
        unit.copy_from_slice(bytes);
        Some(unit)
    }

    /// Walks the units from the start of the file holding `begin` (`recoverAndRevise`):
    /// each whole unit with a good magic goes to `each` with its position. With `check`,
    /// the walk stops at the first unit whose size or magic is wrong (a zero unit: the
    /// written end) and reads files to their size; without, it reads to the written end.
    /// A blank ends a file. Answers where the walk stopped (`checkOffset`).
    pub fn walk(&self, begin: u64, check: bool, mut each: impl FnMut(u64, &TimerUnit)) -> u64 {
        if self.files.is_empty() {
            return 0;
        }
        // A begin before the first file (deleted ones) walks from the first, as Java's.
        let mut index = self
            .files
            .iter()
            .rposition(|(start, _)| begin >= *start)
            .unwrap_or(0);
        let mut check_offset = self.files[index].0;
        while index < self.files.len() {
            let (start, file) = &self.files[index];
            let bytes = file.as_ref();
            let limit = if check {
                bytes.len()
            } else {
                usize::try_from(self.end.saturating_sub(*start))
                    .unwrap_or(usize::MAX)
                    .min(bytes.len())
            };
            let mut position = 0;
            let mut stop = false;
            while position < limit {
                // Size, prevPos and magic first, as Java reads them: a blank is 16 bytes.
                let blank = bytes
                    .get(position + 12..position + 16)
                    .is_some_and(|magic| magic == BLANK_MAGIC_CODE.to_be_bytes());
                if blank {
                    break;
                }
                let Some(unit_bytes) = bytes.get(position..position + UNIT_SIZE) else {
                    // Java's read past the buffer throws and stops the check.
                    stop = true;
                    break;
                };
                let mut unit = [0u8; UNIT_SIZE];
                unit.copy_from_slice(unit_bytes);
                let (size, decoded) = TimerUnit::decode(&unit);
                let whole = size == UNIT_SIZE as i32 && super::is_magic_ok(decoded.magic);
                if check && !whole {
                    stop = true;
                    break;
                }
                if whole {
                    each(start + position as u64, &decoded);
                }
                position += UNIT_SIZE;
            }
            check_offset = start + position as u64;
            if stop {
                break;
            }
            index += 1;
        }
        check_offset
    }

    /// Makes `offset` the written end (`truncateDirtyFiles`): files wholly past it are
    /// deleted, and the bytes after it in its file are zeroed up to the first unit that is
    /// already zero, so that no stale unit past the end reads as written at a later walk.
    ///
    /// # Errors
    /// [`TimerError::Io`] deleting a file.
    pub fn truncate_dirty(&mut self, offset: u64) -> Result<(), TimerError> {
        while self.files.last().is_some_and(|(start, _)| *start > offset) {
            let (start, file) = self.files.pop().expect("a last file");
            let path = file.path().to_owned();
            drop(file);
            let path_text = path.display().to_string();
            tracing::warn!(
                path = path_text,
                start,
                offset,
                "timerlog file past its end deleted"
            );
            std::fs::remove_file(&path).map_err(IoError::on("unlink", &path))?;
        }
        if let Some((start, file)) = self.files.iter_mut().rev().find(|(s, _)| *s <= offset) {
            let from = usize::try_from(offset - *start).unwrap_or(usize::MAX);
            let bytes = file.as_mut();
            let mut at = from.min(bytes.len());
            while at < bytes.len() {
                let end = (at + UNIT_SIZE).min(bytes.len());
                if bytes[at..end].iter().all(|b| *b == 0) {
                    break;
                }
                bytes[at..end].fill(0);
                at = end;
            }
        }
        self.end = offset;
        Ok(())
    }

    /// Deletes the files, all but the last, whose last unit names a CommitLog offset below
    /// `min_offset_py` (`deleteExpiredFileByOffsetForTimerLog`, Java's rule: the unit at
    /// `getOffsetForLastUnit`); answers how many went. Chains into a deleted file end there.
    ///
    /// # Errors
    /// [`TimerError::Io`] deleting a file.
    pub fn delete_expired(&mut self, min_offset_py: i64) -> Result<usize, TimerError> {
        let check = self.offset_for_last_unit();
        let mut deleted = 0;
        while self.files.len() > 1 {
            let (start, file) = &self.files[0];
            let Some(bytes) = file.as_ref().get(check..check + UNIT_SIZE) else {
                break;
            };
            let mut unit = [0u8; UNIT_SIZE];
            unit.copy_from_slice(bytes);
            let (size, decoded) = TimerUnit::decode(&unit);
            let whole = size == UNIT_SIZE as i32 && super::is_magic_ok(decoded.magic);
            if !whole {
                tracing::warn!(start, check, "timerlog file without a last unit; kept");
                break;
            }
            if decoded.offset_py >= min_offset_py {
                break;
            }
            let (start, file) = self.files.remove(0);
            let path = file.path().to_owned();
            drop(file);
            tracing::info!(
                start,
                min_offset_py,
                "timerlog file below the CommitLog deleted"
            );
            std::fs::remove_file(&path).map_err(IoError::on("unlink", &path))?;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// `getOffsetForLastUnit`: where the last unit of a full file sits.
    fn offset_for_last_unit(&self) -> usize {
        let size = usize::try_from(self.file_size).expect("a mapped file's size fits");
        size - (size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE
    }

    /// Syncs every file written since the last sync (the last two are all that can be).
    ///
    /// # Errors
    /// [`TimerError::Io`].
    pub async fn flush(&self) -> Result<(), TimerError> {
        for (_, file) in self.files.iter().rev().take(2) {
            file.flush_off_executor().await?;
        }
        Ok(())
    }

    fn last_start(&self) -> u64 {
        self.files.last().map_or(0, |(start, _)| *start)
    }

    fn add_file(&mut self) -> Result<(), TimerError> {
        let start = if self.files.is_empty() {
            self.end - self.end % self.file_size
        } else {
            self.last_start() + self.file_size
        };
        let path = self.dir.join(segment_name(start));
        self.files
            .push((start, MappedFile::open(&path, self.file_size)?));
        self.end = start;
        Ok(())
    }

    fn file_of(&self, position: u64) -> Option<(u64, &MappedFile)> {
        let index = self
            .files
            .iter()
            .rposition(|(start, _)| position >= *start)?;
        let (start, file) = &self.files[index];
        (position < start + self.file_size).then_some((*start, file))
    }

    fn write_at(&mut self, position: u64, data: &[u8]) {
        let index = self
            .files
            .iter()
            .rposition(|(start, _)| position >= *start)
            .expect("a write lands in a file");
        let (start, file) = &mut self.files[index];
        let at = usize::try_from(position - *start).expect("in a file");
        file.as_mut()[at..at + data.len()].copy_from_slice(data);
    }
}

pub use crate::store::message::java_string_hash;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_magic_and_last_unit_offset_are_javas() {
        assert_eq!(BLANK_MAGIC_CODE, -875_286_124);
        // `getOffsetForLastUnit` for 100 MiB files.
        let file_size: u64 = 100 << 20;
        let last = file_size - (file_size - 16) % 52 - 16 - 52;
        assert_eq!(last, 104_857_532);
    }

    #[test]
    fn a_unit_encodes_as_timerlog_writes_it() {
        let unit = TimerUnit {
            prev_pos: -1,
            magic: MAGIC,
            enqueue_time_ms: 0x0102_0304_0506_0708,
            delay_delta_ms: 1000,
            offset_py: 0x1122,
            size_py: 300,
            topic_hash: java_string_hash("TopicTest"),
        };
        let bytes = unit.encode();
        let mut expected = Vec::new();
        expected.extend_from_slice(&[0, 0, 0, 52]);
        expected.extend_from_slice(&[0xff; 8]);
        expected.extend_from_slice(&[0, 0, 0, 3]);
        expected.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        expected.extend_from_slice(&[0, 0, 0x03, 0xe8]);
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x11, 0x22]);
        expected.extend_from_slice(&[0, 0, 0x01, 0x2c]);
        expected.extend_from_slice(&java_string_hash("TopicTest").to_be_bytes());
        expected.extend_from_slice(&[0; 8]);
        assert_eq!(bytes.as_slice(), expected.as_slice());
        assert_eq!(TimerUnit::decode(&bytes), (52, unit));
        assert_eq!(unit.delayed_time_ms(), 0x0102_0304_0506_0708 + 1000);
    }

    const MAGIC: i32 = super::super::MAGIC_DEFAULT | super::super::MAGIC_ROLL;

    #[test]
    fn java_string_hash_matches_javas() {
        // "TopicTest".hashCode() in Java.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("TopicTest"), -1_902_610_879);
    }

    fn unit(offset_py: i64) -> [u8; UNIT_SIZE] {
        TimerUnit {
            prev_pos: -1,
            magic: 1,
            enqueue_time_ms: 1000,
            delay_delta_ms: 1000,
            offset_py,
            size_py: 10,
            topic_hash: 0,
        }
        .encode()
    }

    #[test]
    fn appends_end_a_file_with_a_blank_and_walk_back_after_reopen() {
        let dir = super::super::ScratchDir::new("log-appends");
        let path = dir.path().join("timerlog");
        // Room for three units and a blank of 16 bytes' worth, then a blank.
        let file_size = 52 * 3 + 16 + 10;
        let mut log = TimerLog::open(&path, file_size).unwrap();
        let positions: Vec<u64> = (0..5).map(|i| log.append(&unit(i)).unwrap()).collect();
        assert_eq!(positions, [0, 52, 104, file_size, file_size + 52]);
        let first = std::fs::read(path.join(segment_name(0))).unwrap();
        assert_eq!(&first[156..160], &26i32.to_be_bytes());
        assert_eq!(&first[168..172], &BLANK_MAGIC_CODE.to_be_bytes());
        drop(log);

        let mut log = TimerLog::open(&path, file_size).unwrap();
        let mut seen = Vec::new();
        let end = log.walk(0, true, |pos, unit| seen.push((pos, unit.offset_py)));
        assert_eq!(end, file_size + 104);
        assert_eq!(seen.len(), 5);
        assert_eq!(seen[3], (file_size, 3));
        log.truncate_dirty(end).unwrap();
        assert_eq!(log.append(&unit(5)).unwrap(), file_size + 104);
        assert_eq!(
            TimerUnit::decode(&log.read_unit(file_size + 52).unwrap())
                .1
                .offset_py,
            4
        );
    }

    #[test]
    fn a_torn_unit_ends_the_log_and_is_cleared() {
        let dir = super::super::ScratchDir::new("log-torn");
        let path = dir.path().join("timerlog");
        let mut log = TimerLog::open(&path, 1024).unwrap();
        for i in 0..3 {
            log.append(&unit(i)).unwrap();
        }
        drop(log);
        // Tear the third unit's magic.
        let file = path.join(segment_name(0));
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[104 + 12..104 + 16].copy_from_slice(&0x70i32.to_be_bytes());
        std::fs::write(&file, &bytes).unwrap();
        let mut log = TimerLog::open(&path, 1024).unwrap();
        let end = log.walk(0, true, |_, _| {});
        assert_eq!(end, 104);
        log.truncate_dirty(end).unwrap();
        assert!(log.read_unit(104).unwrap().iter().all(|b| *b == 0));
        assert_eq!(log.end(), 104);
    }

    #[test]
    fn files_whose_last_unit_is_below_the_commit_log_go() {
        let dir = super::super::ScratchDir::new("log-expired");
        let path = dir.path().join("timerlog");
        let file_size = 52 * 3 + 16 + 10;
        let mut log = TimerLog::open(&path, file_size).unwrap();
        // Files of units 0..3, 3..6, 6..7 (CommitLog offsets as the units' numbers).
        for i in 0..7 {
            log.append(&unit(i * 100)).unwrap();
        }
        assert_eq!(log.offset_for_last_unit(), 104);
        assert_eq!(
            log.delete_expired(200).unwrap(),
            0,
            "the last unit of file 0 is 200"
        );
        assert_eq!(log.delete_expired(201).unwrap(), 1);
        assert_eq!(
            log.delete_expired(100_000).unwrap(),
            1,
            "the last file stays"
        );
        assert_eq!(log.file_starts().collect::<Vec<_>>(), [2 * file_size]);
        drop(log);
        let log = TimerLog::open(&path, file_size).unwrap();
        let mut seen = Vec::new();
        log.walk(0, true, |_, unit| seen.push(unit.offset_py));
        assert_eq!(seen, [600]);
    }

    #[test]
    fn a_file_of_another_size_is_refused() {
        let dir = super::super::ScratchDir::new("log-size");
        std::fs::write(dir.path().join(segment_name(0)), [0u8; 10]).unwrap();
        let error = TimerLog::open(dir.path(), 1024).unwrap_err();
        assert!(
            error.to_string().contains("mappedFileSizeTimerLog"),
            "{error}"
        );
    }
}
