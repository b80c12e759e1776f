//! Unit tests of the raft store (openraft's own storage suite, then a snapshot taken on one
//! store and installed on another, and a store reopened) and of the peers list.

use super::store::{self, LogStore, StateMachine};
use super::*;
use crate::controller::replicas_info::Event;
use futures::StreamExt;
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{EntryPayload, LogId, RaftSnapshotBuilder};
use std::path::PathBuf;

/// A directory removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("ferromq-raft-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Builder;

impl openraft::testing::StoreBuilder<TypeConfig, LogStore, StateMachine, Dir> for Builder {
    async fn build(&self) -> Result<(Dir, LogStore, StateMachine), openraft::StorageError<u64>> {
        let dir = Dir::new("suite");
        let db = store::open(&dir.0).expect("open a new store");
        let (sender, mut applied) = futures::channel::mpsc::channel(4);
        tokio::spawn(async move { while applied.next().await.is_some() {} });
        let machine = StateMachine::open(db.clone(), sender, false)
            .await
            .expect("open");
        Ok((dir, LogStore::new(db), machine))
    }
}

#[test]
fn redb_store_passes_the_openraft_storage_suite() {
    openraft::testing::Suite::test_all(Builder).unwrap();
}

fn entry(index: u64, events: Vec<Event>) -> openraft::Entry<TypeConfig> {
    openraft::Entry {
        log_id: LogId::new(openraft::CommittedLeaderId::new(1, 0), index),
        payload: EntryPayload::Normal(Proposal {
            origin: 7,
            seq: index,
            events,
        }),
    }
}

fn apply_id(id: i64) -> Event {
    Event::ApplyBrokerId {
        cluster_name: "c".to_owned(),
        broker_name: "broker-a".to_owned(),
        broker_address: format!("127.0.0.1:{}", 30_000 + id),
        broker_id: id,
        register_check_code: format!("127.0.0.1:{};1", 30_000 + id),
    }
}

#[test]
fn snapshot_moves_the_state_to_another_store_and_survives_reopening() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (one, two) = (Dir::new("one"), Dir::new("two"));
        let (sender, mut applied) = futures::channel::mpsc::channel(16);
        let db = store::open(&one.0).unwrap();
        let mut machine = StateMachine::open(db, sender, false).await.unwrap();
        machine
            .apply([entry(1, vec![apply_id(1)]), entry(2, vec![apply_id(2)])])
            .await
            .unwrap();
        for index in [1, 2] {
            let Some(Applied::Entry {
                index: got,
                proposal,
            }) = applied.next().await
            else {
                panic!("no entry {index} forwarded");
            };
            assert_eq!(got, index);
            assert_eq!(
                proposal.unwrap().events,
                vec![apply_id(i64::try_from(index).unwrap())]
            );
        }
        let expected = machine.inner.lock().await.state.clone();
        assert_eq!(expected.next_broker_id("broker-a"), 3);
        let snapshot = machine
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();

        let (sender, mut installed) = futures::channel::mpsc::channel(16);
        let db = store::open(&two.0).unwrap();
        let mut other = StateMachine::open(db.clone(), sender, false).await.unwrap();
        other
            .install_snapshot(&snapshot.meta, snapshot.snapshot)
            .await
            .unwrap();
        let Some(Applied::Reset { index, state }) = installed.next().await else {
            panic!("the installed snapshot was not forwarded");
        };
        assert_eq!((index, &state), (2, &expected));
        let (last, _) = other.applied_state().await.unwrap();
        assert_eq!(last.map(|id| id.index), Some(2));
        drop(other);

        // Reopened, the store starts from its snapshot and tells the shard first.
        let (sender, mut reopened) = futures::channel::mpsc::channel(16);
        let _machine = StateMachine::open(db.clone(), sender, false).await.unwrap();
        let Some(Applied::Reset { index, state }) = reopened.next().await else {
            panic!("the stored snapshot was not forwarded");
        };
        assert_eq!((index, state), (2, expected));
        let mut log = LogStore::new(db);
        assert_eq!(log.read_vote().await.unwrap(), None);
    });
}

#[test]
fn parse_peers_reads_java_format_and_refuses_bad_entries() {
    let peers = parse_peers("n0-127.0.0.1:9878;n1-127.0.0.1:9868; n2-127.0.0.1:9858;").unwrap();
    let names: Vec<_> = peers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["n0", "n1", "n2"]);
    assert_eq!(peers[2].addr, "127.0.0.1:9858");
    assert!(parse_peers("n0:127.0.0.1:9878").is_err());
    assert!(parse_peers("n0-127.0.0.1:1;n0-127.0.0.1:2").is_err());
    assert!(parse_peers("").unwrap().is_empty());
}
