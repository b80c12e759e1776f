//! The timer's progress: what GET_BROKER_RUNTIME_INFO shows (5.x's `timerReadBehind`,
//! `timerOffsetBehind`, `timerCongestNum` and the rates) and the periodic progress line.

use super::Timer;
use crate::broker::state::now_ms;
use crate::broker::state::timer::{TimerProgress, TimerReport};
use crate::store::timer::TIMER_TOPIC;

impl Timer {
    /// Publishes the progress GET_BROKER_RUNTIME_INFO shows, with the enqueue and dequeue
    /// rates `tps`.
    pub(super) fn publish(&self, progress: &TimerProgress, tps: (f32, f32)) {
        // Debug builds (the tests) prove the running count against the wheel itself.
        debug_assert_eq!(
            self.pending_units,
            self.wheel.all_num(self.curr_read_time_ms),
            "the running count of pending timer units drifted from the wheel"
        );
        progress.publish(&TimerReport {
            read_time_ms: self.curr_read_time_ms,
            queue_offset: self.curr_queue_offset,
            pending: self.pending_units,
            enqueue_tps: tps.0,
            dequeue_tps: tps.1,
        });
    }

    pub(super) fn log_progress(&self) {
        let max = self.reader.max_offset_in_queue(TIMER_TOPIC, 0);
        tracing::info!(
            commit_read_time_ms = self.commit_read_time_ms,
            curr_read_time_ms = self.curr_read_time_ms,
            curr_write_time_ms = self.curr_write_time_ms,
            read_behind_ms = now_ms() - self.curr_read_time_ms,
            queue_offset = self.curr_queue_offset,
            offset_behind = max - self.curr_queue_offset,
            pending = self.pending_units,
            "timer progress"
        );
    }
}
