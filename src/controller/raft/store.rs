//! The raft log, vote and snapshot of a replicated controller in one redb file
//! (`controllerStorePath/raft.redb`; DLedger keeps its log in mapped files under the same
//! key's directory), and the state machine that applies committed entries to a
//! [`ReplicasInfoManager`].
//!
//! Tables:
//!
//! | table  | key                                     | value                              |
//! | ------ | --------------------------------------- | ---------------------------------- |
//! | `logs` | log index (u64)                         | the openraft entry, JSON           |
//! | `meta` | `vote`, `committed`, `purged`, `snapshot` | JSON of the vote, log ids, snapshot |
//!
//! Durability: every write is one redb transaction committed with redb's default
//! (`Durability::Immediate`: fsync before `commit` returns), so openraft is told a log write,
//! a vote or a snapshot is done only once it survives a crash. The state machine itself lives
//! in memory: at start it is the stored snapshot, and openraft re-applies the committed
//! entries after it (`committed` is saved for that).
//!
//! Every applied entry is also sent, in order, to the controller's shard ([`Applied`]), which
//! keeps its own copy of the state for deciding and answering; a snapshot installed from the
//! leader, or a resynchronisation the shard asks for, is sent as a whole state.

use super::{Applied, Proposal, TypeConfig};
use crate::controller::replicas_info::ReplicasInfoManager;
use futures::SinkExt;
use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, LogState, RaftLogReader, RaftSnapshotBuilder,
    Snapshot, SnapshotMeta, StorageError, StorageIOError, StoredMembership, Vote,
};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

const LOGS: TableDefinition<u64, &[u8]> = TableDefinition::new("logs");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

type StoreResult<T> = Result<T, StorageError<u64>>;

/// Opens (creating when new) the raft file in `dir`.
///
/// # Errors
/// The directory cannot be created or the file cannot be opened as a redb database.
pub fn open(dir: &Path) -> Result<Arc<Database>, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create controllerStorePath {}: {e}", dir.display()))?;
    let path = dir.join("raft.redb");
    let db = Database::create(&path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let created = (|| -> Result<(), redb::Error> {
        let txn = db.begin_write()?;
        txn.open_table(LOGS)?;
        txn.open_table(META)?;
        txn.commit()?;
        Ok(())
    })();
    created.map_err(|e| format!("cannot create the tables of {}: {e}", path.display()))?;
    Ok(Arc::new(db))
}

/// The raft log and vote (`RaftLogStorage`); clones share the file.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Database>,
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogStore")
    }
}

impl LogStore {
    /// The log store of `db`.
    #[must_use]
    pub fn new(db: Arc<Database>) -> LogStore {
        LogStore { db }
    }
}

fn any<E: std::error::Error + 'static>(error: &E) -> AnyError {
    AnyError::new(error)
}

fn read_meta<T: for<'de> Deserialize<'de>>(
    db: &Database,
    key: &str,
) -> Result<Option<T>, AnyError> {
    let txn = db.begin_read().map_err(|e| any(&e))?;
    let table = txn.open_table(META).map_err(|e| any(&e))?;
    let Some(value) = table.get(key).map_err(|e| any(&e))? else {
        return Ok(None);
    };
    serde_json::from_slice(value.value())
        .map(Some)
        .map_err(|e| any(&e))
}

fn write_meta<T: Serialize>(db: &Database, key: &str, value: &T) -> Result<(), AnyError> {
    let bytes = serde_json::to_vec(value).map_err(|e| any(&e))?;
    let txn = db.begin_write().map_err(|e| any(&e))?;
    {
        let mut table = txn.open_table(META).map_err(|e| any(&e))?;
        table.insert(key, bytes.as_slice()).map_err(|e| any(&e))?;
    }
    txn.commit().map_err(|e| any(&e))
}

/// Removes the entries of `range` in one transaction.
fn remove_logs(db: &Database, range: (Bound<u64>, Bound<u64>)) -> Result<(), AnyError> {
    let txn = db.begin_write().map_err(|e| any(&e))?;
    {
        let mut table = txn.open_table(LOGS).map_err(|e| any(&e))?;
        table.retain_in(range, |_, _| false).map_err(|e| any(&e))?;
    }
    txn.commit().map_err(|e| any(&e))
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> StoreResult<Vec<Entry<TypeConfig>>> {
        let bounds = (range.start_bound().cloned(), range.end_bound().cloned());
        let read = || -> Result<Vec<Entry<TypeConfig>>, AnyError> {
            let txn = self.db.begin_read().map_err(|e| any(&e))?;
            let table = txn.open_table(LOGS).map_err(|e| any(&e))?;
            let mut entries = Vec::new();
            for row in table.range(bounds).map_err(|e| any(&e))? {
                let (_, value) = row.map_err(|e| any(&e))?;
                entries.push(serde_json::from_slice(value.value()).map_err(|e| any(&e))?);
            }
            Ok(entries)
        };
        read().map_err(|e| StorageIOError::read_logs(e).into())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StoreResult<LogState<TypeConfig>> {
        let read = || -> Result<LogState<TypeConfig>, AnyError> {
            let purged: Option<LogId<u64>> = read_meta(&self.db, "purged")?;
            let txn = self.db.begin_read().map_err(|e| any(&e))?;
            let table = txn.open_table(LOGS).map_err(|e| any(&e))?;
            let last = match table.last().map_err(|e| any(&e))? {
                Some((_, value)) => {
                    let entry: Entry<TypeConfig> =
                        serde_json::from_slice(value.value()).map_err(|e| any(&e))?;
                    Some(entry.log_id)
                }
                None => purged,
            };
            Ok(LogState {
                last_purged_log_id: purged,
                last_log_id: last,
            })
        };
        read().map_err(|e| StorageIOError::read_logs(e).into())
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> StoreResult<()> {
        write_meta(&self.db, "vote", vote).map_err(|e| StorageIOError::write_vote(e).into())
    }

    async fn read_vote(&mut self) -> StoreResult<Option<Vote<u64>>> {
        read_meta(&self.db, "vote").map_err(|e| StorageIOError::read_vote(e).into())
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> StoreResult<()> {
        write_meta(&self.db, "committed", &committed).map_err(|e| StorageIOError::write(e).into())
    }

    async fn read_committed(&mut self) -> StoreResult<Option<LogId<u64>>> {
        let committed: Option<Option<LogId<u64>>> =
            read_meta(&self.db, "committed").map_err(StorageIOError::read)?;
        Ok(committed.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StoreResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let write = || -> Result<(), AnyError> {
            let txn = self.db.begin_write().map_err(|e| any(&e))?;
            {
                let mut table = txn.open_table(LOGS).map_err(|e| any(&e))?;
                for entry in entries {
                    let bytes = serde_json::to_vec(&entry).map_err(|e| any(&e))?;
                    let index = entry.log_id.index;
                    table.insert(index, bytes.as_slice()).map_err(|e| any(&e))?;
                }
            }
            txn.commit().map_err(|e| any(&e))
        };
        match write() {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(error) => {
                let io = std::io::Error::other(error.to_string());
                callback.log_io_completed(Err(io));
                Err(StorageIOError::write_logs(error).into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> StoreResult<()> {
        let range = (Bound::Included(log_id.index), Bound::Unbounded);
        remove_logs(&self.db, range).map_err(|e| StorageIOError::write_logs(e).into())
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> StoreResult<()> {
        write_meta(&self.db, "purged", &log_id).map_err(StorageIOError::write_logs)?;
        let range = (Bound::Unbounded, Bound::Included(log_id.index));
        remove_logs(&self.db, range).map_err(|e| StorageIOError::write_logs(e).into())
    }
}

/// A snapshot as stored and as sent to followers.
#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<u64, BasicNode>,
    /// [`SnapshotState`], JSON.
    data: Vec<u8>,
}

/// What a snapshot holds: the state machine after `last_applied`.
#[derive(Serialize, Deserialize)]
struct SnapshotState {
    state: ReplicasInfoManager,
}

/// The state machine's content, shared by its snapshot builder and the resync path.
#[derive(Debug)]
pub struct MachineState {
    /// The controller's state after `last_applied`.
    pub state: ReplicasInfoManager,
    /// The last applied log id.
    pub last_applied: Option<LogId<u64>>,
    /// The last applied membership.
    pub membership: StoredMembership<u64, BasicNode>,
}

/// The state machine (`RaftStateMachine`): applies proposals to [`ReplicasInfoManager`] and
/// forwards them to the controller's shard.
#[derive(Clone)]
pub struct StateMachine {
    db: Arc<Database>,
    /// Shared with the resync path, which reads it while nothing is applied.
    pub inner: Arc<tokio::sync::Mutex<MachineState>>,
    applied: futures::channel::mpsc::Sender<Applied>,
    snapshot_seq: Arc<std::sync::atomic::AtomicU64>,
}

impl Debug for StateMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateMachine")
    }
}

impl StateMachine {
    /// The state machine of `db`, at its stored snapshot (empty when none), sending what it
    /// applies to `applied`, where the snapshot's state goes first.
    ///
    /// # Errors
    /// The stored snapshot cannot be read.
    pub async fn open(
        db: Arc<Database>,
        mut applied: futures::channel::mpsc::Sender<Applied>,
        enable_elect_unclean_master: bool,
    ) -> Result<StateMachine, String> {
        let stored: Option<StoredSnapshot> =
            read_meta(&db, "snapshot").map_err(|e| format!("cannot read the snapshot: {e}"))?;
        let mut machine = MachineState {
            state: ReplicasInfoManager::new(enable_elect_unclean_master),
            last_applied: None,
            membership: StoredMembership::default(),
        };
        if let Some(stored) = stored {
            let snapshot: SnapshotState = serde_json::from_slice(&stored.data)
                .map_err(|e| format!("cannot decode the stored snapshot: {e}"))?;
            machine.state = snapshot.state;
            machine.state.enable_elect_unclean_master = enable_elect_unclean_master;
            machine.last_applied = stored.meta.last_log_id;
            machine.membership = stored.meta.last_membership;
            let reset = Applied::Reset {
                index: machine.last_applied.map_or(0, |id| id.index),
                state: machine.state.clone(),
            };
            applied
                .send(reset)
                .await
                .map_err(|_| "the controller's shard is gone".to_owned())?;
        }
        Ok(StateMachine {
            db,
            inner: Arc::new(tokio::sync::Mutex::new(machine)),
            applied,
            snapshot_seq: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        })
    }

    /// Sends the whole state to the shard, in order with the entries applied around it.
    pub async fn resync(&mut self) {
        let machine = self.inner.lock().await;
        let reset = Applied::Reset {
            index: machine.last_applied.map_or(0, |id| id.index),
            state: machine.state.clone(),
        };
        if self.applied.send(reset).await.is_err() {
            tracing::debug!("controller resync dropped: the shard is gone");
        }
    }

    fn stored_snapshot(&self) -> Result<Option<StoredSnapshot>, AnyError> {
        read_meta(&self.db, "snapshot")
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> StoreResult<Snapshot<TypeConfig>> {
        let machine = self.inner.lock().await;
        let data = serde_json::to_vec(&SnapshotState {
            state: machine.state.clone(),
        })
        .map_err(|e| StorageIOError::read_state_machine(any(&e)))?;
        let seq = self
            .snapshot_seq
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let last = machine.last_applied;
        let snapshot_id = match last {
            Some(id) => format!("{}-{}-{seq}", id.leader_id.term, id.index),
            None => format!("none-{seq}"),
        };
        let meta = SnapshotMeta {
            last_log_id: last,
            last_membership: machine.membership.clone(),
            snapshot_id,
        };
        drop(machine);
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        };
        write_meta(&self.db, "snapshot", &stored)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), e))?;
        tracing::info!(snapshot = %meta.snapshot_id, "controller raft snapshot built");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(
        &mut self,
    ) -> StoreResult<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>)> {
        let machine = self.inner.lock().await;
        Ok((machine.last_applied, machine.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StoreResult<Vec<()>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut machine = self.inner.lock().await;
        let mut replies = Vec::new();
        for entry in entries {
            machine.last_applied = Some(entry.log_id);
            let mut proposal = None;
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(p) => proposal = Some(p),
                EntryPayload::Membership(membership) => {
                    machine.membership = StoredMembership::new(Some(entry.log_id), membership);
                }
            }
            if let Some(Proposal { events, .. }) = &proposal {
                for event in events {
                    machine.state.apply(event);
                }
            }
            let applied = Applied::Entry {
                index: entry.log_id.index,
                proposal,
            };
            // The shard drains this channel continuously; waiting here only slows raft.
            if self.applied.send(applied).await.is_err() {
                tracing::debug!("controller entry not forwarded: the shard is gone");
            }
            replies.push(());
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> StoreResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StoreResult<()> {
        let data = snapshot.into_inner();
        let decoded: SnapshotState = serde_json::from_slice(&data)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), any(&e)))?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        write_meta(&self.db, "snapshot", &stored)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), e))?;
        let mut machine = self.inner.lock().await;
        let unclean = machine.state.enable_elect_unclean_master;
        machine.state = decoded.state;
        machine.state.enable_elect_unclean_master = unclean;
        machine.last_applied = meta.last_log_id;
        machine.membership = meta.last_membership.clone();
        let reset = Applied::Reset {
            index: meta.last_log_id.map_or(0, |id| id.index),
            state: machine.state.clone(),
        };
        if self.applied.send(reset).await.is_err() {
            tracing::debug!("controller snapshot not forwarded: the shard is gone");
        }
        tracing::info!(snapshot = %meta.snapshot_id, "controller raft snapshot installed");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StoreResult<Option<Snapshot<TypeConfig>>> {
        let stored = self
            .stored_snapshot()
            .map_err(|e| StorageIOError::read_snapshot(None, e))?;
        Ok(stored.map(|stored| Snapshot {
            meta: stored.meta,
            snapshot: Box::new(Cursor::new(stored.data)),
        }))
    }
}
