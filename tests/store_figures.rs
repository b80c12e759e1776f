//! The store's "behind" figures that GET_BROKER_RUNTIME_INFO reports (`dispatchBehindBytes`,
//! `remainHowManyDataToFlush`), measured on a real store whose dispatch or flush is held
//! back, and compared with the bytes the puts appended.
//!
//! Method: the writer and dispatch run by hand on one executor. Dispatch is held back by not
//! starting it until the puts are answered; the flush by `ASYNC_FLUSH` with an interval no
//! test outlives, so that only the final sync at shutdown reaches the device.

mod common;

use common::store::{DispatchHeld, RunningStore};
use common::{small_store_config, store_message, TempDir};
use ferromq::store::message_store::StoreLock;
use ferromq::store::shared::StoreShared;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait for dispatch to catch up once it runs.
const CATCH_UP_MAX: Duration = Duration::from_secs(10);

async fn wait_dispatched(shared: &StoreShared) {
    let deadline = Instant::now() + CATCH_UP_MAX;
    while shared.dispatch_behind_bytes() > 0 {
        assert!(
            Instant::now() < deadline,
            "dispatch still {} bytes behind",
            shared.dispatch_behind_bytes()
        );
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
}

/// Puts `count` messages one by one; the sum of their record sizes.
async fn put_messages(handle: &ferromq::store::message_store::StoreHandle, count: usize) -> u64 {
    let mut bytes = 0;
    for i in 0..count {
        let body = format!("figure-{i}").into_bytes();
        let queue = i32::try_from(i % 4).unwrap();
        let appended = handle
            .put(store_message("F", queue, &body, Some("t"), None))
            .await
            .unwrap();
        bytes += appended.size as u64;
    }
    bytes
}

#[test]
fn dispatch_held_back_is_behind_by_the_bytes_committed() {
    let dir = TempDir::on_disk("figures-dispatch");
    let config = small_store_config(dir.path());
    let _lock = StoreLock::acquire(dir.path()).unwrap();
    ferromq_shards::testing::run_local(async move {
        let store = DispatchHeld::start(config).await;
        let shared = Arc::clone(&store.shared);
        assert_eq!(shared.dispatch_behind_bytes(), 0, "an empty store");
        // SYNC_FLUSH, dispatch not started: each answered put is committed, none dispatched.
        let bytes = put_messages(&store.handle, 25).await;
        assert_eq!(shared.committed_end(), bytes);
        assert_eq!(shared.dispatch_behind_bytes(), bytes);
        assert_eq!(
            shared.remain_to_flush_bytes(),
            0,
            "SYNC_FLUSH answers once synced"
        );
        let store = store.release();
        wait_dispatched(&shared).await;
        assert_eq!(shared.dispatched_end(), bytes);
        assert_eq!(store.stop().await.0, 25);
    });
}

#[test]
fn async_flush_not_yet_due_leaves_the_bytes_written_to_flush() {
    let dir = TempDir::on_disk("figures-flush");
    let mut config = small_store_config(dir.path());
    // No periodic sync within the test: only the one at shutdown.
    config.flush_disk_type = ferromq::store::flush::FlushDiskType::AsyncFlush {
        interval: Duration::from_secs(3600),
    };
    let _lock = StoreLock::acquire(dir.path()).unwrap();
    ferromq_shards::testing::run_local(async move {
        let store = RunningStore::start(config).await;
        let shared = Arc::clone(&store.shared);
        let bytes = put_messages(&store.handle, 40).await;
        assert_eq!(shared.committed_end(), bytes);
        assert_eq!(shared.flushed_end(), 0);
        assert_eq!(shared.remain_to_flush_bytes(), bytes);
        wait_dispatched(&shared).await;
        // The stop syncs what was written: nothing is left to flush.
        assert_eq!(store.stop().await.0, 40);
        assert_eq!(shared.flushed_end(), bytes);
        assert_eq!(shared.remain_to_flush_bytes(), 0);
    });
}
