//! The transactions ended lately, so that a transaction whose producer answers two checks
//! is committed once (see [`EndedTransactions`]).

/// The transactions ended lately, each by the queue offset of its first half (a half
/// checked is stored again, a copy naming the first in `TRAN_PREPARED_QUEUE_OFFSET`), so
/// that a transaction is committed once even when its producer answers two checks: one
/// answer came later than `transactionTimeOut`, the half was checked again, and both answers
/// arrive. Java commits such a transaction twice. Only the last [`Self::REMEMBERED`] are kept,
/// and none across a restart: past them a repeat is still possible (at least once).
#[derive(Debug, Default)]
pub struct EndedTransactions {
    ended: std::sync::Mutex<(
        std::collections::HashSet<i64>,
        std::collections::VecDeque<i64>,
    )>,
}

impl EndedTransactions {
    /// How many ended transactions are remembered.
    pub const REMEMBERED: usize = 65_536;

    /// Marks the transaction of first half `first` ended; false if it already was.
    pub(crate) fn end(&self, first: i64) -> bool {
        let mut guard = self
            .ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (set, order) = &mut *guard;
        if !set.insert(first) {
            return false;
        }
        order.push_back(first);
        if order.len() > Self::REMEMBERED {
            if let Some(oldest) = order.pop_front() {
                set.remove(&oldest);
            }
        }
        true
    }

    /// Forgets that `first` ended (its commit could not be stored: a later check retries).
    pub(crate) fn forget(&self, first: i64) {
        let mut guard = self
            .ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (set, order) = &mut *guard;
        set.remove(&first);
        order.retain(|offset| *offset != first);
    }
}
