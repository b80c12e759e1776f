//! `TimerCheckpoint` (Java `store/.../timer/TimerCheckpoint.java`): `config/timercheck`,
//! a file of one page (4096 bytes, Java maps `OS_PAGE_SIZE`) whose first 56 bytes are seven
//! big-endian longs:
//!
//! | at | field |
//! | --- | --- |
//! | 0 | lastReadTimeMs: every slot before it was delivered |
//! | 8 | lastTimerLogFlushPos: the timerlog's end at the last flush |
//! | 16 | lastTimerQueueOffset: the timer topic's queue offset enqueued up to |
//! | 24 | masterTimerQueueOffset: a master's own, a slave's its master's |
//! | 32 | dataVersion.stateVersion |
//! | 40 | dataVersion.timestamp |
//! | 48 | dataVersion.counter |

use super::TimerError;
use ferromq_uring::mapped::MappedFile;
use ferromq_uring::IoError;
use std::path::Path;

/// The file's size (Java's `OS_PAGE_SIZE` mapping).
pub const TIMER_CHECKPOINT_FILE_SIZE: u64 = 4096;

/// The checkpoint's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerCheckpointData {
    /// `lastReadTimeMs`.
    pub last_read_time_ms: i64,
    /// `lastTimerLogFlushPos`.
    pub last_timer_log_flush_pos: i64,
    /// `lastTimerQueueOffset`.
    pub last_timer_queue_offset: i64,
    /// `masterTimerQueueOffset`.
    pub master_timer_queue_offset: i64,
    /// `dataVersion.stateVersion`.
    pub state_version: i64,
    /// `dataVersion.timestamp`.
    pub timestamp: i64,
    /// `dataVersion.counter`.
    pub counter: i64,
}

impl TimerCheckpointData {
    /// The 56 bytes (`TimerCheckpoint.encode`).
    #[must_use]
    pub fn encode(&self) -> [u8; 56] {
        let mut out = [0u8; 56];
        let words = [
            self.last_read_time_ms,
            self.last_timer_log_flush_pos,
            self.last_timer_queue_offset,
            self.master_timer_queue_offset,
            self.state_version,
            self.timestamp,
            self.counter,
        ];
        for (i, word) in words.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&word.to_be_bytes());
        }
        out
    }

    /// Reads the 56 bytes back.
    #[must_use]
    pub fn decode(bytes: &[u8; 56]) -> TimerCheckpointData {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            i64::from_be_bytes(w)
        };
        TimerCheckpointData {
            last_read_time_ms: word(0),
            last_timer_log_flush_pos: word(1),
            last_timer_queue_offset: word(2),
            master_timer_queue_offset: word(3),
            state_version: word(4),
            timestamp: word(5),
            counter: word(6),
        }
    }

    /// `DataVersion.nextVersion(stateVersion)`.
    pub fn next_version(&mut self, state_version: i64, now_ms: i64) {
        self.timestamp = now_ms;
        self.state_version = state_version;
        self.counter += 1;
    }
}

/// The mapped checkpoint file.
#[derive(Debug)]
pub struct TimerCheckpoint {
    file: MappedFile,
}

impl TimerCheckpoint {
    /// Opens `path`, making a zero page if absent; answers the values it holds (zeros for a
    /// new file, as Java's).
    ///
    /// # Errors
    /// [`TimerError::Layout`] for a file shorter than its fields; [`TimerError::Io`].
    pub fn open(path: &Path) -> Result<(TimerCheckpoint, TimerCheckpointData), TimerError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(IoError::on("mkdir", dir))?;
        }
        let len = match std::fs::metadata(path) {
            Ok(meta) => meta.len(),
            Err(_) => TIMER_CHECKPOINT_FILE_SIZE,
        };
        // Java maps one page, growing a shorter file; a longer one keeps its length.
        let file = MappedFile::open(path, len.max(TIMER_CHECKPOINT_FILE_SIZE))?;
        let mut head = [0u8; 56];
        head.copy_from_slice(&file.as_ref()[..56]);
        Ok((TimerCheckpoint { file }, TimerCheckpointData::decode(&head)))
    }

    /// Writes `data` into the mapping and syncs it (`flush`).
    ///
    /// # Errors
    /// [`TimerError::Io`].
    pub async fn flush(&mut self, data: &TimerCheckpointData) -> Result<(), TimerError> {
        self.file.as_mut()[..56].copy_from_slice(&data.encode());
        Ok(self.file.flush_off_executor().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoint_is_seven_big_endian_longs_in_a_page() {
        let data = TimerCheckpointData {
            last_read_time_ms: 1_700_000_000_000,
            last_timer_log_flush_pos: 5200,
            last_timer_queue_offset: 100,
            master_timer_queue_offset: 100,
            state_version: 0,
            timestamp: 1_700_000_000_123,
            counter: 7,
        };
        let bytes = data.encode();
        assert_eq!(&bytes[0..8], &1_700_000_000_000_i64.to_be_bytes());
        assert_eq!(&bytes[8..16], &[0, 0, 0, 0, 0, 0, 0x14, 0x50]);
        assert_eq!(&bytes[16..24], &[0, 0, 0, 0, 0, 0, 0, 100]);
        assert_eq!(&bytes[48..56], &[0, 0, 0, 0, 0, 0, 0, 7]);
        assert_eq!(TimerCheckpointData::decode(&bytes), data);
    }

    #[test]
    fn a_checkpoint_survives_reopening() {
        let dir = super::super::ScratchDir::new("checkpoint-reopen");
        let path = dir.path().join("config").join("timercheck");
        let data = TimerCheckpointData {
            last_read_time_ms: 42_000,
            counter: 1,
            ..TimerCheckpointData::default()
        };
        let (read, zero) = ferromq_shards::testing::run_local(async move {
            let (mut checkpoint, zero) = TimerCheckpoint::open(&path).unwrap();
            checkpoint.flush(&data).await.unwrap();
            drop(checkpoint);
            (TimerCheckpoint::open(&path).unwrap().1, zero)
        });
        assert_eq!(zero, TimerCheckpointData::default());
        assert_eq!(read, data);
        assert_eq!(
            std::fs::metadata(dir.path().join("config/timercheck"))
                .unwrap()
                .len(),
            4096
        );
    }
}
