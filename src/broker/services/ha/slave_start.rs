//! Where a controller-mode slave starts after the master's handshake answer (RocketMQ 5.x
//! `AutoSwitchHAClient.doTruncate`): its epoch list against the master's decides how much of
//! its CommitLog both share. Logic only.
//!
//! Decision table:
//!
//! | local epochs | consistent point p | local end e | start |
//! | --- | --- | --- | --- |
//! | none | - | - | `FromScratch`: a new replica, it reports its end and is sent from there |
//! | some | p < 0 | - | `Diverged`: no shared epoch, the slave must not follow |
//! | some | p = e | e | `Continue(e)` |
//! | some | p < e | e | `CutTo(p)`: the tail after p was written by a deposed master |
//! | some | p > e | e | `Continue(e)` (the slave is behind, nothing to cut) |

use super::autoswitch_frames::MasterHandshake;
use crate::store::epoch_file::EpochFileCache;

/// How the slave's CommitLog relates to the master's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlaveStart {
    /// The slave has no epochs: it keeps what it has and asks from its end.
    FromScratch,
    /// The slave's log is a prefix of the master's: replicate from this offset.
    Continue(i64),
    /// The slave's log diverged after this offset: cut it there, then replicate.
    CutTo(i64),
    /// No epoch in common: following would mix two histories.
    Diverged,
}

/// Decides where a slave with `local` epochs and a CommitLog ending at `local_end` starts,
/// given the master's `answer`.
#[must_use]
pub fn slave_start(local: &EpochFileCache, local_end: i64, answer: &MasterHandshake) -> SlaveStart {
    if local.entries().is_empty() {
        return SlaveStart::FromScratch;
    }
    let mut master = EpochFileCache::from_entries(&answer.entries);
    master.set_last_end_offset(answer.max_offset);
    let pairs: Vec<(i32, i64)> = local
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    let mut mine = EpochFileCache::from_entries(&pairs);
    mine.set_last_end_offset(local_end);
    match mine.find_consistent_point(&master) {
        point if point < 0 => SlaveStart::Diverged,
        point if point < local_end => SlaveStart::CutTo(point),
        _ => SlaveStart::Continue(local_end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(max_offset: i64, entries: &[(i32, i64)]) -> MasterHandshake {
        let last_epoch = entries.last().map_or(-1, |e| e.0);
        MasterHandshake {
            max_offset,
            last_epoch,
            entries: entries.to_vec(),
        }
    }

    #[test]
    fn slave_start_follows_the_decision_table() {
        let none = EpochFileCache::default();
        assert_eq!(
            slave_start(&none, 500, &answer(900, &[(1, 0)])),
            SlaveStart::FromScratch
        );
        let local = EpochFileCache::from_entries(&[(1, 0), (2, 100)]);
        // Same history, slave behind.
        let same = answer(900, &[(1, 0), (2, 100)]);
        assert_eq!(slave_start(&local, 300, &same), SlaveStart::Continue(300));
        // The old master of epoch 2 wrote to 300; the new master took over at 200.
        let newer = answer(900, &[(1, 0), (2, 100), (3, 200)]);
        assert_eq!(slave_start(&local, 300, &newer), SlaveStart::CutTo(200));
        assert_eq!(slave_start(&local, 150, &newer), SlaveStart::Continue(150));
        let stranger = answer(900, &[(7, 0)]);
        assert_eq!(slave_start(&local, 300, &stranger), SlaveStart::Diverged);
    }
}
