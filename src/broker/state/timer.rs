//! The timer service's progress, as GET_BROKER_RUNTIME_INFO reports it.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};

/// The timer's progress as GET_BROKER_RUNTIME_INFO reports it (5.x's `timerReadBehind`,
/// `timerOffsetBehind`, `timerCongestNum`, `timerEnqueueTps`, `timerDequeueTps`): written by
/// the timer service about once a second, read by any shard without a lock.
#[derive(Debug, Default)]
pub struct TimerProgress {
    /// Whether a timer service runs here (a master with `timerWheelEnable`).
    running: AtomicBool,
    /// The wheel's read time (`currReadTimeMs`).
    read_time_ms: AtomicI64,
    /// The next offset of the timer topic's queue to enqueue (`currQueueOffset`).
    queue_offset: AtomicI64,
    /// Messages in the wheel from the read time on (`getAllCongestNum`).
    pending: AtomicI64,
    /// Units enqueued and messages delivered over the last second, as `f32` bits.
    enqueue_tps: AtomicU32,
    dequeue_tps: AtomicU32,
}

/// One report of [`TimerProgress`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimerReport {
    /// The wheel's read time.
    pub read_time_ms: i64,
    /// The next timer-queue offset to enqueue.
    pub queue_offset: i64,
    /// Messages waiting in the wheel.
    pub pending: i64,
    /// Units enqueued per second over the last second.
    pub enqueue_tps: f32,
    /// Messages delivered per second over the last second.
    pub dequeue_tps: f32,
}

impl TimerProgress {
    /// Publishes the service's figures.
    pub fn publish(&self, report: &TimerReport) {
        self.read_time_ms
            .store(report.read_time_ms, Ordering::Relaxed);
        self.queue_offset
            .store(report.queue_offset, Ordering::Relaxed);
        self.pending.store(report.pending, Ordering::Relaxed);
        self.enqueue_tps
            .store(report.enqueue_tps.to_bits(), Ordering::Relaxed);
        self.dequeue_tps
            .store(report.dequeue_tps.to_bits(), Ordering::Relaxed);
        self.running.store(true, Ordering::Release);
    }

    /// The last figures published, `None` while no timer service runs here.
    #[must_use]
    pub fn report(&self) -> Option<TimerReport> {
        if !self.running.load(Ordering::Acquire) {
            return None;
        }
        Some(TimerReport {
            read_time_ms: self.read_time_ms.load(Ordering::Relaxed),
            queue_offset: self.queue_offset.load(Ordering::Relaxed),
            pending: self.pending.load(Ordering::Relaxed),
            enqueue_tps: f32::from_bits(self.enqueue_tps.load(Ordering::Relaxed)),
            dequeue_tps: f32::from_bits(self.dequeue_tps.load(Ordering::Relaxed)),
        })
    }
}
