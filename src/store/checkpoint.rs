//! `checkpoint`: the store's flush marks (`ST/StoreCheckpoint.java`,
//! `reference/store-format.md` §5.1).
//!
//! ```text
//! offset  size  field
//! 0       8     physicMsgTimestamp   store time of the last CommitLog data flushed
//! 8       8     logicsMsgTimestamp   store time of the last message flushed to ConsumeQueues
//! 16      8     indexMsgTimestamp    end time of the last flushed IndexFile
//! 24      8     masterFlushedOffset  (5.x)
//! 32      8     confirmPhyOffset     (5.x)
//! 40..4096      zeros
//! ```

/// Size of the file: one OS page.
pub const CHECKPOINT_FILE_SIZE: usize = 4096;

/// The flush marks (`StoreCheckpoint`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreCheckpoint {
    /// Store time of the last CommitLog data flushed, ms.
    pub physic_msg_timestamp: i64,
    /// Store time of the last message flushed into ConsumeQueues, ms.
    pub logics_msg_timestamp: i64,
    /// End time of the last flushed IndexFile, ms.
    pub index_msg_timestamp: i64,
    /// 5.x: flushed offset reported by the master.
    pub master_flushed_offset: i64,
    /// 5.x: confirmed physical offset.
    pub confirm_phy_offset: i64,
}

impl StoreCheckpoint {
    /// Reads the marks; a file shorter than 24 bytes (never written) reads as zeros.
    #[must_use]
    pub fn decode(bytes: &[u8]) -> StoreCheckpoint {
        let field = |at: usize| {
            bytes
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, i64::from_be_bytes)
        };
        StoreCheckpoint {
            physic_msg_timestamp: field(0),
            logics_msg_timestamp: field(8),
            index_msg_timestamp: field(16),
            master_flushed_offset: field(24),
            confirm_phy_offset: field(32),
        }
    }

    /// The whole file.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![0u8; CHECKPOINT_FILE_SIZE];
        let fields = [
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ];
        for (index, value) in fields.iter().enumerate() {
            bytes[index * 8..index * 8 + 8].copy_from_slice(&value.to_be_bytes());
        }
        bytes
    }

    /// Where abnormal recovery may start looking: the older of the CommitLog and
    /// ConsumeQueue marks, less 3 s, and never below 0 (`getMinTimestamp`).
    #[must_use]
    pub fn min_timestamp(&self) -> i64 {
        (self.physic_msg_timestamp.min(self.logics_msg_timestamp) - 3000).max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_round_trips_and_short_file_is_zero() {
        let checkpoint = StoreCheckpoint {
            physic_msg_timestamp: 5000,
            logics_msg_timestamp: 4000,
            index_msg_timestamp: 3,
            ..StoreCheckpoint::default()
        };
        let bytes = checkpoint.encode();
        assert_eq!(bytes.len(), CHECKPOINT_FILE_SIZE);
        assert_eq!(StoreCheckpoint::decode(&bytes), checkpoint);
        assert_eq!(checkpoint.min_timestamp(), 1000);
        assert_eq!(StoreCheckpoint::decode(&[]), StoreCheckpoint::default());
    }
}
