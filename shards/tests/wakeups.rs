//! Guard against lost cross-shard wake-ups.
//!
//! Goal: shards that exchange many messages over small mesh channels never stall. With some
//! glommio settings (see `task_queues`), an executor can fall asleep while a wake-up for it is
//! pending; then every shard waits on another forever.
//!
//! Method: three shards repeatedly send to each other over channels of capacity 4, so senders
//! block and are woken across threads thousands of times per run. The test thread watches a
//! progress counter and fails, naming the run, if it stops moving for `STALL_LIMIT` before the
//! shards finish. Waiting is `recv_timeout` on the join result, never a sleep.

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use ferromq_shards::{spawn_shards, Placement, RuntimeConfig, Shutdown};

const RUNS: usize = 30;
const PER_PEER: u32 = 2_000;
/// No progress for this long means a lost wake-up; a healthy run finishes well within it.
const STALL_LIMIT: Duration = Duration::from_secs(10);

#[test]
fn mesh_exchange_repeated_never_stalls() {
    for run in 0..RUNS {
        let progress = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&progress);
        let placement =
            Placement::parse("*:control,net;*:writer,net;*:dispatch,net").expect("valid");
        let config = RuntimeConfig {
            mesh_capacity: 4,
            ..RuntimeConfig::default()
        };
        let handle = spawn_shards::<u32, _, _, _>(placement, config, Shutdown::new(), move |ctx| {
            let counter = Arc::clone(&counter);
            async move {
                let mesh = Rc::new(ctx.mesh);
                let peers = mesh.len() - 1;
                let receiver = Rc::clone(&mesh);
                let receive_counter = Arc::clone(&counter);
                let receiving = ctx.task_queues.spawn_foreground(async move {
                    let mut received = 0_u32;
                    while received < PER_PEER * u32::try_from(peers).expect("few shards") {
                        receiver.recv().await.expect("peers send before closing");
                        received += 1;
                        receive_counter.fetch_add(1, Ordering::Relaxed);
                    }
                    received
                });
                for seq in 0..PER_PEER {
                    for to in mesh.shards().filter(|to| *to != mesh.me()) {
                        mesh.send_to(to, seq).await.expect("peer is alive");
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                }
                receiving.await
            }
        })
        .expect("shards started");

        let (joined_tx, joined_rx) = mpsc::channel();
        std::thread::spawn(move || joined_tx.send(handle.join()));
        let mut seen = progress.load(Ordering::Relaxed);
        let received = loop {
            match joined_rx.recv_timeout(STALL_LIMIT) {
                Ok(joined) => break joined.expect("shards joined"),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let now = progress.load(Ordering::Relaxed);
                    assert_ne!(now, seen, "run {run}: shards stalled after {now} steps");
                    seen = now;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the join thread died"),
            }
        };
        assert_eq!(received, [PER_PEER * 2; 3], "run {run}");
    }
}
