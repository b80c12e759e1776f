//! `TimerWheel` (Java `store/.../timer/TimerWheel.java`, `Slot.java`): the `timerwheel`
//! file under the store root, `slotsTotal × 2` slots of 32 bytes, `slotsTotal` being
//! seven days of seconds (604,800) whatever the precision. A time `t` has the slot
//! `t / timerPrecisionMs % (slotsTotal × 2)`; a slot holds, big-endian:
//!
//! | at | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | the slot's time divided by the precision (a slot is stale when it differs) |
//! | 8 | 8 | firstPos: the slot's first timerlog unit |
//! | 16 | 8 | lastPos: its last unit, the head of the chain walked backwards |
//! | 24 | 4 | num: units in the slot (deletes count -1) |
//! | 28 | 4 | magic, unused (0) |
//!
//! Java keeps a copy in memory and writes changed bytes back every flush; ferromq writes
//! the mapping in place, so a kill -9 keeps every change (the page cache has them).

use super::{TimerError, SLOTS_TOTAL};
use ferromq_uring::mapped::MappedFile;
use ferromq_uring::IoError;
use std::path::Path;

/// `Slot.SIZE`.
pub const SLOT_SIZE: usize = 32;
/// `TimerWheel.IGNORE`: a position [`TimerWheel::revise_slot`] leaves as it is.
pub const IGNORE: i64 = -2;

/// One slot (`Slot`); `time_ms` -1 means empty or stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The slot's time, ms.
    pub time_ms: i64,
    /// First unit's timerlog position.
    pub first_pos: i64,
    /// Last unit's timerlog position.
    pub last_pos: i64,
    /// Units in it.
    pub num: i32,
    /// Unused.
    pub magic: i32,
}

impl Slot {
    /// The empty slot (`new Slot(-1, -1, -1)`).
    pub const EMPTY: Slot = Slot {
        time_ms: -1,
        first_pos: -1,
        last_pos: -1,
        num: 0,
        magic: 0,
    };
}

/// The wheel file, mapped.
#[derive(Debug)]
pub struct TimerWheel {
    file: MappedFile,
    precision_ms: i64,
}

impl TimerWheel {
    /// The file's length (`wheelLength`).
    pub const LENGTH: u64 = SLOTS_TOTAL as u64 * 2 * SLOT_SIZE as u64;

    /// Opens `path`, making it (zeros) if absent.
    ///
    /// # Errors
    /// [`TimerError::Layout`] when the file has another non-zero length, as Java refuses
    /// it; [`TimerError::Io`].
    pub fn open(path: &Path, precision_ms: i64) -> Result<TimerWheel, TimerError> {
        assert!(precision_ms > 0, "timerPrecisionMs is positive");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(IoError::on("mkdir", dir))?;
        }
        match std::fs::metadata(path) {
            Ok(meta) if meta.len() != 0 && meta.len() != Self::LENGTH => {
                return Err(TimerError::Layout {
                    path: path.to_owned(),
                    reason: format!(
                        "Timer wheel length:{} != expected:{}",
                        meta.len(),
                        Self::LENGTH
                    ),
                });
            }
            _ => {}
        }
        Ok(TimerWheel {
            file: MappedFile::open(path, Self::LENGTH)?,
            precision_ms,
        })
    }

    /// `getSlotIndex`.
    #[must_use]
    pub fn slot_index(&self, time_ms: i64) -> usize {
        let index = (time_ms / self.precision_ms).rem_euclid(SLOTS_TOTAL * 2);
        usize::try_from(index).expect("an index of the wheel")
    }

    /// The slot of `time_ms` as stored (`getRawSlot`).
    #[must_use]
    pub fn raw_slot(&self, time_ms: i64) -> Slot {
        let at = self.slot_index(time_ms) * SLOT_SIZE;
        let bytes = &self.file.as_ref()[at..at + SLOT_SIZE];
        let i64_at = |i: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[i..i + 8]);
            i64::from_be_bytes(word)
        };
        let i32_at =
            |i: usize| i32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        Slot {
            time_ms: i64_at(0).wrapping_mul(self.precision_ms),
            first_pos: i64_at(8),
            last_pos: i64_at(16),
            num: i32_at(24),
            magic: i32_at(28),
        }
    }

    /// The slot of `time_ms`, or [`Slot::EMPTY`] when it holds another time (`getSlot`).
    #[must_use]
    pub fn slot(&self, time_ms: i64) -> Slot {
        let slot = self.raw_slot(time_ms);
        if slot.time_ms == time_ms / self.precision_ms * self.precision_ms {
            slot
        } else {
            Slot::EMPTY
        }
    }

    /// Writes a whole slot (`putSlot` with num and magic).
    pub fn put_slot(&mut self, time_ms: i64, first_pos: i64, last_pos: i64, num: i32, magic: i32) {
        let at = self.slot_index(time_ms) * SLOT_SIZE;
        let bytes = &mut self.file.as_mut()[at..at + SLOT_SIZE];
        bytes[0..8].copy_from_slice(&(time_ms / self.precision_ms).to_be_bytes());
        bytes[8..16].copy_from_slice(&first_pos.to_be_bytes());
        bytes[16..24].copy_from_slice(&last_pos.to_be_bytes());
        bytes[24..28].copy_from_slice(&num.to_be_bytes());
        bytes[28..32].copy_from_slice(&magic.to_be_bytes());
    }

    /// Writes a slot's time and positions, its num and magic left (`putSlot`, three
    /// arguments).
    fn put_slot_positions(&mut self, time_ms: i64, first_pos: i64, last_pos: i64) {
        let at = self.slot_index(time_ms) * SLOT_SIZE;
        let bytes = &mut self.file.as_mut()[at..at + SLOT_SIZE];
        bytes[0..8].copy_from_slice(&(time_ms / self.precision_ms).to_be_bytes());
        bytes[8..16].copy_from_slice(&first_pos.to_be_bytes());
        bytes[16..24].copy_from_slice(&last_pos.to_be_bytes());
    }

    /// Recovery's correction of a slot (`reviseSlot`): a slot of this time gets the
    /// positions that are not [`IGNORE`]; a stale slot is taken over when `force`.
    pub fn revise_slot(&mut self, time_ms: i64, first_pos: i64, last_pos: i64, force: bool) {
        let at = self.slot_index(time_ms) * SLOT_SIZE;
        let stored = {
            let mut word = [0u8; 8];
            word.copy_from_slice(&self.file.as_ref()[at..at + 8]);
            i64::from_be_bytes(word)
        };
        if time_ms / self.precision_ms != stored {
            if force {
                let first = if first_pos == IGNORE {
                    last_pos
                } else {
                    first_pos
                };
                self.put_slot_positions(time_ms, first, last_pos);
            }
            return;
        }
        let bytes = &mut self.file.as_mut()[at..at + SLOT_SIZE];
        if first_pos != IGNORE {
            bytes[8..16].copy_from_slice(&first_pos.to_be_bytes());
        }
        if last_pos != IGNORE {
            bytes[16..24].copy_from_slice(&last_pos.to_be_bytes());
        }
    }

    /// The smallest firstPos of the slots from `time_start_ms` on, over a whole turn, whose
    /// lastPos is past `max_offset` (`checkPhyPos`): `i64::MAX` when none.
    #[must_use]
    pub fn check_phy_pos(&self, time_start_ms: i64, max_offset: i64) -> i64 {
        let mut min_first = i64::MAX;
        self.each_live(time_start_ms, |slot| {
            if slot.last_pos > max_offset && slot.first_pos < min_first {
                min_first = slot.first_pos;
            }
        });
        min_first
    }

    /// Units in the slots from `time_start_ms` on, over a whole turn (`getAllNum`).
    #[must_use]
    pub fn all_num(&self, time_start_ms: i64) -> i64 {
        let mut all = 0i64;
        self.each_live(time_start_ms, |slot| all += i64::from(slot.num));
        all
    }

    /// Syncs the file.
    ///
    /// # Errors
    /// [`TimerError::Io`].
    pub async fn flush(&self) -> Result<(), TimerError> {
        Ok(self.file.flush_off_executor().await?)
    }

    fn each_live(&self, time_start_ms: i64, mut each: impl FnMut(&Slot)) {
        let turn = SLOTS_TOTAL * 2;
        for i in 0..turn {
            let time = time_start_ms + i * self.precision_ms;
            let slot = self.raw_slot(time);
            if slot.time_ms / self.precision_ms == time / self.precision_ms {
                each(&slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wheel_file_has_javas_length_and_slot_bytes() {
        assert_eq!(TimerWheel::LENGTH, 38_707_200);
        let dir = super::super::ScratchDir::new("wheel-wheel_len");
        let path = dir.path().join("timerwheel");
        let mut wheel = TimerWheel::open(&path, 1000).unwrap();
        let time = 1_700_000_123_456;
        wheel.put_slot(time, 52, 104, 2, 0);
        drop(wheel);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, TimerWheel::LENGTH);
        let index = (1_700_000_123_i64 % 1_209_600) as usize;
        let slot = &bytes[index * 32..index * 32 + 32];
        let mut expected = Vec::new();
        expected.extend_from_slice(&1_700_000_123_i64.to_be_bytes());
        expected.extend_from_slice(&52i64.to_be_bytes());
        expected.extend_from_slice(&104i64.to_be_bytes());
        expected.extend_from_slice(&2i32.to_be_bytes());
        expected.extend_from_slice(&0i32.to_be_bytes());
        assert_eq!(slot, expected.as_slice());

        let wheel = TimerWheel::open(&path, 1000).unwrap();
        let slot = wheel.slot(1_700_000_123_000);
        assert_eq!(
            (slot.time_ms, slot.first_pos, slot.last_pos, slot.num),
            (1_700_000_123_000, 52, 104, 2)
        );
        // The same index a turn later is another time: empty.
        assert_eq!(wheel.slot(time + 1_209_600_000), Slot::EMPTY);
        assert_eq!(wheel.all_num(1_700_000_000_000), 2);
        assert_eq!(wheel.check_phy_pos(1_700_000_000_000, 100), 52);
        assert_eq!(wheel.check_phy_pos(1_700_000_000_000, 104), i64::MAX);
    }

    #[test]
    fn revise_takes_over_a_stale_slot_only_when_forced() {
        let dir = super::super::ScratchDir::new("wheel-revise");
        let mut wheel = TimerWheel::open(&dir.path().join("timerwheel"), 1000).unwrap();
        wheel.revise_slot(5_000, IGNORE, 52, false);
        assert_eq!(wheel.slot(5_000), Slot::EMPTY);
        wheel.revise_slot(5_000, IGNORE, 52, true);
        assert_eq!(
            (wheel.slot(5_000).first_pos, wheel.slot(5_000).last_pos),
            (52, 52)
        );
        wheel.revise_slot(5_000, IGNORE, 104, true);
        assert_eq!(
            (wheel.slot(5_000).first_pos, wheel.slot(5_000).last_pos),
            (52, 104)
        );
    }

    #[test]
    fn a_wheel_of_another_length_is_refused() {
        let dir = super::super::ScratchDir::new("wheel-other_len");
        let path = dir.path().join("timerwheel");
        std::fs::write(&path, [1u8; 64]).unwrap();
        let error = TimerWheel::open(&path, 1000).unwrap_err();
        assert!(
            error.to_string().contains("Timer wheel length:64"),
            "{error}"
        );
    }
}
