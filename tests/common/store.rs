//! A store run by hand for store tests: recovered as `LocalStore::open` recovers it (the
//! `abort` file made), its writer and dispatch each a task on the test's executor, so that a
//! test can hold dispatch back, move a part to another executor, or read the shared figures.

use ferromq::store::flush::GroupCommitStats;
use ferromq::store::message_store::{
    create_abort_file, recover_store, run_writer, StoreChannels, StoreHandle, WriterStart,
};
use ferromq::store::reput::{run_reput, Reput};
use ferromq::store::segment_writer::StoreError;
use ferromq::store::shared::StoreShared;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The store `config` describes, recovered, with its `abort` file made and nothing running:
/// its shared state, the dispatch side, the writer's start and the channels between them.
pub async fn recovered_parts(
    config: ferromq::store::config::StoreConfig,
) -> (Arc<StoreShared>, Reput, WriterStart, StoreChannels) {
    let shared = Arc::new(StoreShared::new(config));
    let (reput, start, _report) = recover_store(Arc::clone(&shared)).await.unwrap();
    create_abort_file(&shared.config).unwrap();
    let channels = StoreChannels::new(Arc::clone(&shared));
    (shared, reput, start, channels)
}

/// A store's writer and dispatch run by hand, each a task on this executor.
pub struct RunningStore {
    pub shared: Arc<StoreShared>,
    pub handle: StoreHandle,
    pub writer: glommio::Task<Result<GroupCommitStats, StoreError>>,
    pub dispatch: glommio::Task<Reput>,
}

impl RunningStore {
    /// Recovers the store `config` describes and starts its writer and dispatch.
    pub async fn start(config: ferromq::store::config::StoreConfig) -> RunningStore {
        DispatchHeld::start(config).await.release()
    }

    /// Closes the store (drop its readers first) and waits for both; returns the puts the
    /// writer answered and the dispatch side.
    pub async fn stop(self) -> (u64, Reput) {
        self.handle.close();
        drop(self.handle);
        let puts = self.writer.await.unwrap().puts;
        (puts, self.dispatch.await)
    }
}

/// A recovered store whose writer runs and whose dispatch waits for
/// [`DispatchHeld::release`]: what a put commits stays undispatched until then.
pub struct DispatchHeld {
    pub shared: Arc<StoreShared>,
    pub handle: StoreHandle,
    writer: glommio::Task<Result<GroupCommitStats, StoreError>>,
    /// `run_reput` with its receivers, not polled yet.
    dispatch: Pin<Box<dyn Future<Output = Reput>>>,
}

impl DispatchHeld {
    /// Recovers the store `config` describes and starts its writer only.
    pub async fn start(config: ferromq::store::config::StoreConfig) -> DispatchHeld {
        let (shared, reput, start, channels) = recovered_parts(config).await;
        let writer = glommio::spawn_local(run_writer(
            Arc::clone(&shared),
            start,
            channels.puts,
            channels.batches_tx,
        ));
        let dispatch = Box::pin(run_reput(
            reput,
            channels.batches_rx,
            channels.queries,
            channels.control,
        ));
        DispatchHeld {
            shared,
            handle: channels.handle,
            writer,
            dispatch,
        }
    }

    /// Starts dispatch.
    pub fn release(self) -> RunningStore {
        RunningStore {
            shared: self.shared,
            handle: self.handle,
            writer: self.writer,
            dispatch: glommio::spawn_local(self.dispatch),
        }
    }
}
