//! The timer's files in RocketMQ 5.x's layout (`store/.../timer/` of the Java broker,
//! RIP-43; `reference/v5.md` §4): the `timerlog/` of 52-byte units ([`log`]), the
//! `timerwheel` of slots ([`wheel`]), `config/timercheck` ([`checkpoint`]) and
//! `config/timermetrics` ([`metrics`]). Each file is byte for byte what Java's
//! `TimerLog`, `TimerWheel`, `TimerCheckpoint` and `TimerMetrics` write, so that a store
//! moves between ferromq and a Java 5.x broker with its timers pending.
//!
//! The files are written in place through shared mappings (`ferromq_uring::mapped`), as
//! Java's `MappedFile`s are: a write is in the page cache when the copy returns, so a
//! kill -9 loses none of it; syncs happen every `timerFlushIntervalMs`. The service that
//! fills and walks them is `broker::services::timer`.
//!
//! Architecture Invariant: nothing here holds a per-message structure in memory; the
//! pending messages are units on disk, chained per slot.

pub mod checkpoint;
pub mod log;
pub mod metrics;
pub mod wheel;

use ferromq_uring::IoError;
use std::path::PathBuf;

/// `TimerMessageStore.TIMER_TOPIC`: where admitted timer messages wait, queue 0.
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";

/// `TimerMessageStore.MAGIC_DEFAULT`: a unit to deliver.
pub const MAGIC_DEFAULT: i32 = 1;
/// `TimerMessageStore.MAGIC_ROLL`: a unit parked at the end of the roll window, put back
/// into the timer topic when its slot comes.
pub const MAGIC_ROLL: i32 = 1 << 1;
/// `TimerMessageStore.MAGIC_DELETE`: a unit that cancels the message its
/// `TIMER_DEL_UNIQKEY` names, in the same slot.
pub const MAGIC_DELETE: i32 = 1 << 2;

/// `TimerMessageStore.TIMER_WHEEL_TTL_DAY`: the wheel covers seven days of slots.
pub const TIMER_WHEEL_TTL_DAY: i64 = 7;
/// `TimerMessageStore.DAY_SECS`.
pub const DAY_SECS: i64 = 24 * 3600;
/// `TimerMessageStore.TIMER_BLANK_SLOTS`: slots kept free between the read time after a
/// restart and the wheel's far end.
pub const TIMER_BLANK_SLOTS: i64 = 60;
/// Slots of the wheel (`slotsTotal`): fixed, whatever `timerPrecisionMs` is, as Java's
/// constructor makes it; the file holds twice as many.
pub const SLOTS_TOTAL: i64 = TIMER_WHEEL_TTL_DAY * DAY_SECS;

/// Whether a unit's magic is one Java writes (`isMagicOK`: only the low four bits).
#[must_use]
pub fn is_magic_ok(magic: i32) -> bool {
    (magic | 0xF) == 0xF
}

/// Whether a unit is parked for a roll (`needRoll`).
#[must_use]
pub fn needs_roll(magic: i32) -> bool {
    magic & MAGIC_ROLL != 0
}

/// Whether a unit cancels another (`needDelete`).
#[must_use]
pub fn needs_delete(magic: i32) -> bool {
    magic & MAGIC_DELETE != 0
}

/// The roll window in slots (`timerRollWindowSlots`): `timerRollWindowSlot`, or the whole
/// wheel less its blank slots when the key is out of `2..=slotsTotal - 60`, as Java's
/// constructor corrects it.
#[must_use]
pub fn roll_window_slots(timer_roll_window_slot: i64) -> i64 {
    if !(2..=SLOTS_TOTAL - TIMER_BLANK_SLOTS).contains(&timer_roll_window_slot) {
        SLOTS_TOTAL - TIMER_BLANK_SLOTS
    } else {
        timer_roll_window_slot
    }
}

/// An error of the timer's files.
#[derive(Debug, thiserror::Error)]
pub enum TimerError {
    /// Reading, writing or syncing a file failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A file is not laid out as Java's: the timer cannot start on it.
    #[error(
        "{path}: {reason}; move the timer files aside (timerlog/, timerwheel, \
         config/timercheck) to start the timer empty"
    )]
    Layout {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roll_window_is_corrected_as_java_does() {
        assert_eq!(SLOTS_TOTAL, 604_800);
        assert_eq!(roll_window_slots(172_800), 172_800);
        assert_eq!(roll_window_slots(1), SLOTS_TOTAL - 60);
        assert_eq!(roll_window_slots(SLOTS_TOTAL), SLOTS_TOTAL - 60);
        assert_eq!(roll_window_slots(2), 2);
    }

    #[test]
    fn magics_are_checked_on_their_low_bits() {
        assert!(is_magic_ok(MAGIC_DEFAULT | MAGIC_ROLL | MAGIC_DELETE));
        assert!(is_magic_ok(0));
        assert!(!is_magic_ok(0x10));
        assert!(needs_roll(3) && !needs_roll(5) && needs_delete(5));
    }
}

/// A directory under the system's temp dir for one test, removed when dropped.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct ScratchDir(PathBuf);

#[cfg(test)]
impl ScratchDir {
    pub(crate) fn new(name: &str) -> ScratchDir {
        let dir = std::env::temp_dir().join(format!("ferromq-timer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch dir");
        ScratchDir(dir)
    }

    pub(crate) fn path(&self) -> &std::path::Path {
        &self.0
    }
}

#[cfg(test)]
impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
