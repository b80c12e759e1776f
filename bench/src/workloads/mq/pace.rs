//! The open-loop schedule of `--rate`: a thread of its own hands each sender the intended
//! send times of its requests, on time to within the kernel's sleep slack (tens of µs).
//!
//! Senders used to sleep on tokio's timer, which fires on a 1 ms wheel: each request left up
//! to a millisecond after its intended time, and since latency counts from that time (see
//! the module above), every figure carried the wait. At 1,000 msg/s against a standalone
//! broker the send p50 read 1.07–1.63 ms where the same requests took 0.31 ms from their
//! actual send. A thread sleeping with `nanosleep` until each time wakes 50–100 µs late at
//! worst; when the times are closer together than that, it hands over every one that is due
//! at once, each still stamped with its own intended time.
//!
//! Request `k` (of `batch` messages) is due at `start + k * batch / rate` and goes to sender
//! `k % senders`: each sender's requests are `senders * batch / rate` apart, and sender `i`
//! starts `i * batch / rate` after the first. A sender holds at most [`AHEAD`] times not yet
//! taken; when a stalled sender's are all waiting, the thread waits for it, and catches up
//! after with every time still its own, so the stall shows in the percentiles and memory
//! stays bounded.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{channel, Receiver, Sender};

/// Intended times a sender may hold before the thread waits for it.
pub const AHEAD: usize = 1024;

/// The longest the thread sleeps before it looks whether its senders are gone.
const WAKE_TO_CHECK: Duration = Duration::from_millis(50);

/// Starts the schedule: `rate` messages per second in requests of `batch`, over `senders`
/// senders, from `start` until `deadline`. Returns the thread and each sender's receiver of
/// intended send times; a receiver ends when the schedule does. A sender that stops
/// receiving is skipped; the thread ends when all have, or at `deadline`.
///
/// # Errors
/// The thread could not be started.
pub fn start(
    rate: f64,
    batch: usize,
    senders: usize,
    start: Instant,
    deadline: Instant,
) -> std::io::Result<(JoinHandle<()>, Vec<Receiver<Instant>>)> {
    let (transmitters, receivers): (Vec<_>, Vec<_>) =
        (0..senders.max(1)).map(|_| channel(AHEAD)).unzip();
    let step_ns = Duration::from_secs_f64(batch.max(1) as f64 / rate).as_nanos();
    let thread = std::thread::Builder::new()
        .name("bench-pacer".into())
        .spawn(move || {
            let mut open = transmitters.len();
            let mut transmitters: Vec<_> = transmitters.into_iter().map(Some).collect();
            let mut request: u64 = 0;
            while open > 0 {
                let offset = u64::try_from(step_ns * u128::from(request)).unwrap_or(u64::MAX);
                let Some(due) = start.checked_add(Duration::from_nanos(offset)) else {
                    break;
                };
                if due >= deadline {
                    break;
                }
                // In slices, so that at a low rate the thread still ends soon after its
                // senders do.
                while let Some(wait) = due.checked_duration_since(Instant::now()) {
                    if transmitters.iter().flatten().all(Sender::is_closed) {
                        return;
                    }
                    std::thread::sleep(wait.min(WAKE_TO_CHECK));
                }
                let slot = usize::try_from(request).unwrap_or(0) % transmitters.len();
                if let Some(transmitter) = &transmitters[slot] {
                    if transmitter.blocking_send(due).is_err() {
                        transmitters[slot] = None;
                        open -= 1;
                    }
                }
                request += 1;
            }
        })?;
    Ok((thread, receivers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn senders_get_their_share_of_the_schedule_in_order_and_on_time() {
        let begin = Instant::now() + Duration::from_millis(5);
        let deadline = begin + Duration::from_millis(200);
        // 1,000 msg/s in batches of 2 over 4 senders: a request every 2 ms, each sender's
        // 8 ms apart.
        let (thread, mut receivers) = start(1000.0, 2, 4, begin, deadline).unwrap();
        thread.join().unwrap();
        let mut all = Vec::new();
        for (index, receiver) in receivers.iter_mut().enumerate() {
            let mut times = Vec::new();
            while let Ok(due) = receiver.try_recv() {
                times.push(due);
            }
            assert_eq!(times.len(), 25, "sender {index}");
            assert_eq!(times[0] - begin, Duration::from_millis(2) * index as u32);
            for pair in times.windows(2) {
                assert_eq!(pair[1] - pair[0], Duration::from_millis(8));
            }
            all.extend(times);
        }
        assert_eq!(all.len(), 100);
        assert!(all.iter().all(|due| *due < deadline));
    }

    #[test]
    fn a_sender_that_takes_nothing_holds_at_most_its_share_ahead() {
        let begin = Instant::now();
        let deadline = begin + Duration::from_secs(3600);
        let (thread, mut receivers) = start(1_000_000.0, 1, 2, begin, deadline).unwrap();
        // Sender 0 takes nothing for a while: the thread waits for it once it holds AHEAD.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(receivers[0].len(), AHEAD);
        assert!(receivers[1].len() <= AHEAD);
        // Taking one lets the thread on, with the times still in order.
        let first = receivers[0].try_recv().unwrap();
        let second = receivers[0].try_recv().unwrap();
        assert_eq!(second - first, Duration::from_micros(2));
        drop(receivers);
        thread.join().unwrap();
    }

    #[test]
    fn the_schedule_ends_when_every_sender_is_gone() {
        let begin = Instant::now();
        // Far from its deadline: only the senders going away can end it.
        let deadline = begin + Duration::from_secs(3600);
        let (thread, receivers) = start(1_000_000.0, 1, 2, begin, deadline).unwrap();
        drop(receivers);
        thread.join().unwrap();
        // Also while it sleeps toward a first request an hour away.
        let later = Instant::now() + Duration::from_secs(3600);
        let (thread, receivers) =
            start(1.0, 1, 1, later, later + deadline.duration_since(begin)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        drop(receivers);
        thread.join().unwrap();
    }
}
