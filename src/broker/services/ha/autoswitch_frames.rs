//! The frames of the controller-mode ("auto-switch") HA link, RocketMQ 5.x
//! `store/ha/autoswitch/AutoSwitchHAClient` and `AutoSwitchHAConnection`
//! (`reference/ha.md` §5). Codecs only, no I/O; all integers big-endian.
//!
//! Slave → master:
//!
//! | message | layout | size |
//! | --- | --- | --- |
//! | handshake | state i32 (1) · syncFromLastFile i16 · asyncLearner i16 · brokerId i64 | 16 |
//! | transfer report | state i32 (2) · slave max offset i64 | 12 |
//!
//! Master → slave:
//!
//! | message | layout | size |
//! | --- | --- | --- |
//! | handshake header | state i32 · body size i32 · max offset i64 · last epoch i32 | 20 |
//! | handshake body | n × (epoch i32 · start offset i64) | 12·n |
//! | transfer hdr | state i32 · size i32 · offset i64 · epoch i32 · start i64 · confirm i64 | 36 |
//! | transfer body | raw CommitLog bytes from `offset` | body size |
//!
//! Both master headers put state, body size, offset and epoch at the same places (0, 4, 8,
//! 16): Java's client reads those four from the first 20 bytes whatever the state.
//! "Not enough bytes yet" is `Ok(None)`; a state that is not the one expected is an error,
//! as Java's reader closes the connection on a state mismatch.

/// A connection's state, by Java ordinal (`store/ha/HAConnectionState`).
#[doc(alias = "HAConnectionState")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaConnectionState {
    /// Not connected.
    Ready = 0,
    /// Exchanging handshakes.
    Handshake = 1,
    /// Replicating.
    Transfer = 2,
    /// Paused.
    Suspend = 3,
    /// Stopped.
    Shutdown = 4,
}

/// Size of the slave's handshake.
pub const SLAVE_HANDSHAKE_SIZE: usize = 16;
/// Size of the slave's transfer report.
pub const SLAVE_REPORT_SIZE: usize = 12;
/// Size of the master's handshake header (`AutoSwitchHAConnection.HANDSHAKE_HEADER_SIZE`).
pub const HANDSHAKE_HEADER_SIZE: usize = 20;
/// Size of the master's transfer header (`AutoSwitchHAConnection.TRANSFER_HEADER_SIZE`).
pub const TRANSFER_HEADER_SIZE: usize = 36;
/// Size of one epoch entry in the handshake body (`EPOCH_ENTRY_SIZE`).
pub const EPOCH_ENTRY_SIZE: usize = 12;
/// Most epoch entries a handshake may carry; a longer list is refused as corrupt.
pub const EPOCH_ENTRIES_MAX: usize = 1 << 16;

/// The slave's first message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlaveHandshake {
    /// `syncFromLastFile`: an empty slave starts at the master's last segment.
    pub sync_from_last_file: bool,
    /// `asyncLearner`: the slave never joins the SyncStateSet.
    pub async_learner: bool,
    /// The broker id the controller gave the slave.
    pub broker_id: i64,
}

/// What the slave sends: its handshake, or a report of its CommitLog end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlaveMessage {
    /// State HANDSHAKE.
    Handshake(SlaveHandshake),
    /// State TRANSFER: the slave's max physical offset (its acknowledgement).
    Report(i64),
}

/// The master's handshake answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterHandshake {
    /// The master's CommitLog end.
    pub max_offset: i64,
    /// The master's last epoch.
    pub last_epoch: i32,
    /// All the master's epoch entries, (epoch, start offset), oldest first.
    pub entries: Vec<(i32, i64)>,
}

/// The header of one master transfer frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferHeader {
    /// Body size in bytes (0: heartbeat).
    pub body_size: u32,
    /// CommitLog offset of the first body byte.
    pub offset: i64,
    /// The epoch that wrote these bytes.
    pub epoch: i32,
    /// Where that epoch starts.
    pub epoch_start_offset: i64,
    /// The master's confirm offset (acked by the whole SyncStateSet).
    pub confirm_offset: i64,
}

/// A frame the peer sent that breaks the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A state other than the one this side is in.
    #[error("peer sent state {got} while in state {expected:?}; closing the HA connection")]
    StateMismatch {
        /// The state this side is in.
        expected: HaConnectionState,
        /// The ordinal received.
        got: i32,
    },
    /// A body size that is negative, not whole entries, or too large.
    #[error("peer sent a bad body size {0}; closing the HA connection")]
    BadBodySize(i32),
}

/// Encodes the slave's handshake.
#[must_use]
pub fn encode_slave_handshake(handshake: SlaveHandshake) -> [u8; SLAVE_HANDSHAKE_SIZE] {
    let mut out = [0u8; SLAVE_HANDSHAKE_SIZE];
    out[0..4].copy_from_slice(&(HaConnectionState::Handshake as i32).to_be_bytes());
    out[4..6].copy_from_slice(&i16::from(handshake.sync_from_last_file).to_be_bytes());
    out[6..8].copy_from_slice(&i16::from(handshake.async_learner).to_be_bytes());
    out[8..16].copy_from_slice(&handshake.broker_id.to_be_bytes());
    out
}

/// Encodes the slave's transfer report of its max offset.
#[must_use]
pub fn encode_slave_report(max_offset: i64) -> [u8; SLAVE_REPORT_SIZE] {
    let mut out = [0u8; SLAVE_REPORT_SIZE];
    out[0..4].copy_from_slice(&(HaConnectionState::Transfer as i32).to_be_bytes());
    out[4..12].copy_from_slice(&max_offset.to_be_bytes());
    out
}

/// Decodes one slave message from the front of `buf`, in the master's `state`; returns it and
/// the bytes it took.
///
/// # Errors
/// The slave's state is not the master's (Java's `AutoSwitchHAConnection` reader refuses it).
pub fn decode_slave(
    buf: &[u8],
    state: HaConnectionState,
) -> Result<Option<(SlaveMessage, usize)>, FrameError> {
    let Some(got) = be_i32(buf, 0) else {
        return Ok(None);
    };
    if got != state as i32 {
        return Err(FrameError::StateMismatch {
            expected: state,
            got,
        });
    }
    match state {
        HaConnectionState::Handshake => {
            let (Some(sync), Some(learner), Some(broker_id)) =
                (be_i16(buf, 4), be_i16(buf, 6), be_i64(buf, 8))
            else {
                return Ok(None);
            };
            let handshake = SlaveHandshake {
                sync_from_last_file: sync == 1,
                async_learner: learner == 1,
                broker_id,
            };
            Ok(Some((
                SlaveMessage::Handshake(handshake),
                SLAVE_HANDSHAKE_SIZE,
            )))
        }
        _ => Ok(be_i64(buf, 4).map(|offset| (SlaveMessage::Report(offset), SLAVE_REPORT_SIZE))),
    }
}

/// Encodes the master's handshake answer.
#[must_use]
pub fn encode_master_handshake(handshake: &MasterHandshake) -> Vec<u8> {
    let body = handshake.entries.len() * EPOCH_ENTRY_SIZE;
    let mut out = Vec::with_capacity(HANDSHAKE_HEADER_SIZE + body);
    out.extend_from_slice(&(HaConnectionState::Handshake as i32).to_be_bytes());
    out.extend_from_slice(&i32::try_from(body).expect("entries bounded").to_be_bytes());
    out.extend_from_slice(&handshake.max_offset.to_be_bytes());
    out.extend_from_slice(&handshake.last_epoch.to_be_bytes());
    for &(epoch, start) in &handshake.entries {
        out.extend_from_slice(&epoch.to_be_bytes());
        out.extend_from_slice(&start.to_be_bytes());
    }
    out
}

/// Encodes the header of a transfer frame.
#[must_use]
pub fn encode_transfer_header(header: TransferHeader) -> [u8; TRANSFER_HEADER_SIZE] {
    let mut out = [0u8; TRANSFER_HEADER_SIZE];
    out[0..4].copy_from_slice(&(HaConnectionState::Transfer as i32).to_be_bytes());
    out[4..8].copy_from_slice(&header.body_size.to_be_bytes());
    out[8..16].copy_from_slice(&header.offset.to_be_bytes());
    out[16..20].copy_from_slice(&header.epoch.to_be_bytes());
    out[20..28].copy_from_slice(&header.epoch_start_offset.to_be_bytes());
    out[28..36].copy_from_slice(&header.confirm_offset.to_be_bytes());
    out
}

/// Decodes the master's handshake answer from the front of `buf`; returns it and the bytes
/// it took.
///
/// # Errors
/// A state other than HANDSHAKE, or a body that is not whole entries.
pub fn decode_master_handshake(buf: &[u8]) -> Result<Option<(MasterHandshake, usize)>, FrameError> {
    let (Some(state), Some(size), Some(max_offset), Some(last_epoch)) = (
        be_i32(buf, 0),
        be_i32(buf, 4),
        be_i64(buf, 8),
        be_i32(buf, 16),
    ) else {
        return Ok(None);
    };
    if state != HaConnectionState::Handshake as i32 {
        return Err(FrameError::StateMismatch {
            expected: HaConnectionState::Handshake,
            got: state,
        });
    }
    let body = usize::try_from(size).map_err(|_| FrameError::BadBodySize(size))?;
    if body % EPOCH_ENTRY_SIZE != 0 || body / EPOCH_ENTRY_SIZE > EPOCH_ENTRIES_MAX {
        return Err(FrameError::BadBodySize(size));
    }
    let Some(body_bytes) = buf.get(HANDSHAKE_HEADER_SIZE..HANDSHAKE_HEADER_SIZE + body) else {
        return Ok(None);
    };
    let entries = body_bytes
        .chunks_exact(EPOCH_ENTRY_SIZE)
        .filter_map(|entry| Some((be_i32(entry, 0)?, be_i64(entry, 4)?)))
        .collect();
    let handshake = MasterHandshake {
        max_offset,
        last_epoch,
        entries,
    };
    Ok(Some((handshake, HANDSHAKE_HEADER_SIZE + body)))
}

/// Decodes a transfer header from the front of `buf` (the body follows it).
///
/// # Errors
/// A state other than TRANSFER, or a body larger than `body_size_max`.
pub fn decode_transfer_header(
    buf: &[u8],
    body_size_max: usize,
) -> Result<Option<TransferHeader>, FrameError> {
    let Some(state) = be_i32(buf, 0) else {
        return Ok(None);
    };
    if state != HaConnectionState::Transfer as i32 {
        return Err(FrameError::StateMismatch {
            expected: HaConnectionState::Transfer,
            got: state,
        });
    }
    let (Some(size), Some(offset), Some(epoch), Some(epoch_start_offset), Some(confirm_offset)) = (
        be_i32(buf, 4),
        be_i64(buf, 8),
        be_i32(buf, 16),
        be_i64(buf, 20),
        be_i64(buf, 28),
    ) else {
        return Ok(None);
    };
    let body_size = u32::try_from(size).map_err(|_| FrameError::BadBodySize(size))?;
    if usize::try_from(body_size).map_or(true, |body| body > body_size_max) {
        return Err(FrameError::BadBodySize(size));
    }
    Ok(Some(TransferHeader {
        body_size,
        offset,
        epoch,
        epoch_start_offset,
        confirm_offset,
    }))
}

fn be_i16(buf: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_be_bytes(buf.get(at..at + 2)?.try_into().ok()?))
}

fn be_i32(buf: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

fn be_i64(buf: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_be_bytes(buf.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slave_handshake_bytes_are_javas() {
        let handshake = SlaveHandshake {
            sync_from_last_file: false,
            async_learner: true,
            broker_id: 2,
        };
        let bytes = encode_slave_handshake(handshake);
        assert_eq!(bytes, [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]);
        let decoded = decode_slave(&bytes, HaConnectionState::Handshake).expect("valid");
        assert_eq!(decoded, Some((SlaveMessage::Handshake(handshake), 16)));
        for len in 0..bytes.len() {
            let prefix = decode_slave(&bytes[..len], HaConnectionState::Handshake);
            assert_eq!(prefix, Ok(None));
        }
    }

    #[test]
    fn slave_report_in_wrong_state_is_refused() {
        let bytes = encode_slave_report(0x0102);
        assert_eq!(bytes, [0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 2]);
        let decoded = decode_slave(&bytes, HaConnectionState::Transfer).expect("valid");
        assert_eq!(decoded, Some((SlaveMessage::Report(0x0102), 12)));
        let wrong = decode_slave(&bytes, HaConnectionState::Handshake);
        assert_eq!(
            wrong,
            Err(FrameError::StateMismatch {
                expected: HaConnectionState::Handshake,
                got: 2
            })
        );
    }

    #[test]
    fn master_handshake_round_trips_and_prefixes_are_incomplete() {
        let handshake = MasterHandshake {
            max_offset: 300,
            last_epoch: 2,
            entries: vec![(1, 0), (2, 100)],
        };
        let bytes = encode_master_handshake(&handshake);
        assert_eq!(bytes.len(), 44);
        assert_eq!(
            &bytes[..20],
            &[0, 0, 0, 1, 0, 0, 0, 24, 0, 0, 0, 0, 0, 0, 1, 44, 0, 0, 0, 2]
        );
        assert_eq!(&bytes[20..32], &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        let decoded = decode_master_handshake(&bytes).expect("valid");
        assert_eq!(decoded, Some((handshake, 44)));
        for len in 0..bytes.len() {
            assert_eq!(decode_master_handshake(&bytes[..len]), Ok(None));
        }
    }

    #[test]
    fn transfer_header_bytes_are_javas() {
        let header = TransferHeader {
            body_size: 7,
            offset: 4096,
            epoch: 3,
            epoch_start_offset: 1024,
            confirm_offset: 2048,
        };
        let bytes = encode_transfer_header(header);
        assert_eq!(
            bytes,
            [
                0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 4,
                0, 0, 0, 0, 0, 0, 0, 8, 0
            ]
        );
        assert_eq!(decode_transfer_header(&bytes, 32 << 10), Ok(Some(header)));
        assert_eq!(
            decode_transfer_header(&bytes, 6),
            Err(FrameError::BadBodySize(7))
        );
        assert_eq!(decode_transfer_header(&bytes[..35], 1 << 10), Ok(None));
        let handshake = encode_master_handshake(&MasterHandshake {
            max_offset: 0,
            last_epoch: -1,
            entries: Vec::new(),
        });
        assert!(decode_transfer_header(&handshake, 1 << 10).is_err());
    }
}
