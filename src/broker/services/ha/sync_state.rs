//! The master's view of which slaves are in sync, in controller mode (RocketMQ 5.x
//! `AutoSwitchHAService.maybeShrinkSyncStateSet` / `maybeExpandInSyncStateSet` and
//! `AutoSwitchHAConnection.maybeExpandInSyncStateSet`). Logic only: the HA connections feed
//! it acks, the controller-mode loop asks it every `checkSyncStateSetPeriod` for the set to
//! propose with CONTROLLER_ALTER_SYNC_STATE_SET.
//!
//! Rules, as Java's:
//! - A slave "caught up" at the time its ack reached the master's CommitLog end (or, when the
//!   master wrote more meanwhile, at the time the master last sent it data that ended where
//!   the ack is).
//! - A slave joins the set when its ack reaches the confirm offset and the start of the
//!   master's current epoch; an async learner never joins.
//! - A member leaves when it has not caught up for `haMaxTimeSlaveNotCatchup`, or has no
//!   connection. The master itself is always a member.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// The in-sync bookkeeping of one master epoch.
#[derive(Debug)]
pub struct SyncStateTracker {
    local_broker_id: i64,
    /// The set as the controller last confirmed it, or as proposed since.
    set: BTreeSet<i64>,
    /// Per connected slave: when it last caught up.
    caught_up: HashMap<i64, Instant>,
}

/// One slave acknowledgement, with what the master knew when it arrived.
#[derive(Debug, Clone, Copy)]
pub struct SlaveAck {
    /// The slave's broker id.
    pub broker_id: i64,
    /// The slave's CommitLog end.
    pub slave_max_offset: i64,
    /// The master's CommitLog end now.
    pub master_max_offset: i64,
    /// The master's end when it last sent this slave data, and when that was.
    pub last_transfer: (i64, Instant),
    /// The offset every member of the set has (Java's confirm offset).
    pub confirm_offset: i64,
    /// Where the master's current epoch starts.
    pub epoch_start_offset: i64,
    /// The slave said it is an async learner.
    pub async_learner: bool,
}

impl SyncStateTracker {
    /// A master's tracker, starting from the set the controller gave.
    #[must_use]
    pub fn new(local_broker_id: i64, set: &BTreeSet<i64>) -> SyncStateTracker {
        let mut set = set.clone();
        set.insert(local_broker_id);
        SyncStateTracker {
            local_broker_id,
            set,
            caught_up: HashMap::new(),
        }
    }

    /// The set now.
    #[must_use]
    pub fn set(&self) -> &BTreeSet<i64> {
        &self.set
    }

    /// The controller confirmed (or imposed) `set`.
    pub fn confirmed(&mut self, set: &BTreeSet<i64>) {
        self.set = set.clone();
        self.set.insert(self.local_broker_id);
    }

    /// A slave acked; returns the grown set when it joins.
    pub fn ack(&mut self, ack: SlaveAck, now: Instant) -> Option<BTreeSet<i64>> {
        let (sent_end, sent_at) = ack.last_transfer;
        if ack.async_learner || ack.slave_max_offset < sent_end {
            return None;
        }
        let at = if ack.slave_max_offset == ack.master_max_offset {
            now
        } else {
            sent_at
        };
        let entry = self.caught_up.entry(ack.broker_id).or_insert(at);
        *entry = (*entry).max(at);
        if self.set.contains(&ack.broker_id)
            || ack.slave_max_offset < ack.confirm_offset
            || ack.slave_max_offset < ack.epoch_start_offset
        {
            return None;
        }
        self.set.insert(ack.broker_id);
        Some(self.set.clone())
    }

    /// A slave's connection closed.
    pub fn disconnected(&mut self, broker_id: i64) {
        self.caught_up.remove(&broker_id);
    }

    /// The set without the members that fell behind or left; `None` when nobody did.
    pub fn shrink(&mut self, now: Instant, not_caught_up_max: Duration) -> Option<BTreeSet<i64>> {
        let local = self.local_broker_id;
        let before = self.set.len();
        let caught_up = &self.caught_up;
        self.set.retain(|id| {
            *id == local
                || caught_up
                    .get(id)
                    .is_some_and(|at| now.saturating_duration_since(*at) <= not_caught_up_max)
        });
        (self.set.len() != before).then(|| self.set.clone())
    }
}

/// The offset every member of `set` has: the least ack among them, the master counting with
/// its own CommitLog end (Java's `computeConfirmOffset`); a member with no ack counts as 0.
#[must_use]
pub fn confirm_offset(
    set: &BTreeSet<i64>,
    local: i64,
    master: i64,
    acks: &HashMap<i64, i64>,
) -> i64 {
    set.iter()
        .filter(|id| **id != local)
        .map(|id| acks.get(id).copied().unwrap_or(0))
        .fold(master, i64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(broker_id: i64, slave: i64, master: i64, at: Instant) -> SlaveAck {
        SlaveAck {
            broker_id,
            slave_max_offset: slave,
            master_max_offset: master,
            last_transfer: (slave, at),
            confirm_offset: 0,
            epoch_start_offset: 0,
            async_learner: false,
        }
    }

    #[test]
    fn slave_caught_up_joins_then_leaves_when_silent() {
        let start = Instant::now();
        let mut tracker = SyncStateTracker::new(1, &BTreeSet::new());
        assert_eq!(tracker.set(), &BTreeSet::from([1]));
        assert_eq!(
            tracker.ack(ack(2, 100, 100, start), start),
            Some(BTreeSet::from([1, 2]))
        );
        assert_eq!(tracker.ack(ack(2, 100, 100, start), start), None);
        let max = Duration::from_secs(15);
        assert_eq!(tracker.shrink(start + max, max), None);
        assert_eq!(
            tracker.shrink(start + max * 2, max),
            Some(BTreeSet::from([1]))
        );
    }

    #[test]
    fn behind_slave_or_learner_does_not_join() {
        let start = Instant::now();
        let mut tracker = SyncStateTracker::new(1, &BTreeSet::new());
        let mut behind = ack(2, 50, 100, start);
        behind.confirm_offset = 80;
        assert_eq!(tracker.ack(behind, start), None);
        let mut old_epoch = ack(2, 50, 100, start);
        old_epoch.epoch_start_offset = 60;
        assert_eq!(tracker.ack(old_epoch, start), None);
        let mut learner = ack(3, 100, 100, start);
        learner.async_learner = true;
        assert_eq!(tracker.ack(learner, start), None);
    }

    #[test]
    fn disconnected_member_leaves_and_confirm_offset_is_least_ack() {
        let start = Instant::now();
        let mut tracker = SyncStateTracker::new(1, &BTreeSet::from([1, 2, 3]));
        tracker.ack(ack(2, 100, 100, start), start);
        assert_eq!(
            tracker.shrink(start, Duration::from_secs(15)),
            Some(BTreeSet::from([1, 2]))
        );
        let acks = HashMap::from([(2, 70), (3, 40)]);
        assert_eq!(confirm_offset(&BTreeSet::from([1, 2]), 1, 100, &acks), 70);
        assert_eq!(
            confirm_offset(&BTreeSet::from([1, 2, 3]), 1, 100, &acks),
            40
        );
        assert_eq!(confirm_offset(&BTreeSet::from([1]), 1, 100, &acks), 100);
    }
}
