//! Committed consumer offsets (`consumerOffset.json`, Java's `ConsumerOffsetManager`): by
//! `topic@group`, then by queue id.
//!
//! Every pull that commits and every UPDATE_CONSUMER_OFFSET writes here, and every
//! QUERY_CONSUMER_OFFSET reads, so the table is a [`DashMap`] sharded by `topic@group`:
//! a commit locks only its key's shard, for one map insert, and commits of keys in other
//! shards never wait for it (Java: a `ConcurrentHashMap` of `ConcurrentHashMap`s).
//!
//! Invariants: the file lists keys, and each key's queues, in ascending order (the table is
//! sorted when it is written, as the `BTreeMap` it used to be wrote it); a snapshot with a
//! higher version read every key after one with a lower version did, so that the file
//! written last ([`write_snapshot`] keeps the highest version) is never older. The
//! `snapshots` lock that orders them is taken only by snapshots (every
//! `flushConsumerOffsetInterval`, at shutdown, a slave's sync), never by a commit.

use super::lock;
use crate::config::persist::{
    next_snapshot_version, read_with_backup, write_snapshot, write_snapshot_off_shard,
};
use crate::store::config_files::ConsumerOffsetTable;
use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// The committed offsets of every consumer group.
#[doc(alias = "ConsumerOffsetManager")]
#[derive(Debug)]
pub(super) struct ConsumerOffsets {
    path: PathBuf,
    /// `topic@group` → queue id → committed offset.
    table: DashMap<String, BTreeMap<i32, i64>>,
    /// Orders snapshots (see the module doc).
    snapshots: Mutex<()>,
}

impl ConsumerOffsets {
    /// Reads `path` (or its `.bak`); empty when neither exists.
    ///
    /// # Errors
    /// A file that exists but is not valid (named in the message).
    pub(super) fn load(path: PathBuf) -> Result<ConsumerOffsets, String> {
        let accept = |bytes: &[u8]| ConsumerOffsetTable::parse(bytes).is_ok();
        let file = match read_with_backup(&path, accept) {
            Ok(Some(bytes)) => ConsumerOffsetTable::parse(&bytes)
                .map_err(|e| format!("{}: {e}", path.display()))?,
            Ok(None) => ConsumerOffsetTable::default(),
            Err(error) => return Err(format!("{}: {error}", path.display())),
        };
        let table = file
            .offset_table
            .into_iter()
            .map(|(key, queues)| (key, queues.into_iter().collect()))
            .collect();
        Ok(ConsumerOffsets {
            path,
            table,
            snapshots: Mutex::new(()),
        })
    }

    /// The committed offset of `group` in a queue.
    pub(super) fn committed(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.table
            .get(&offset_key(topic, group))?
            .get(&queue_id)
            .copied()
    }

    /// Commits `offset` for `group` in a queue, whatever offset was committed before (a
    /// reset moves it back).
    pub(super) fn commit(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        self.table
            .entry(offset_key(topic, group))
            .or_default()
            .insert(queue_id, offset);
    }

    /// Copies `src`'s committed offsets in `topic` to `dest`, replacing what `dest` had there
    /// (`cloneOffset`); whether `src` had any.
    pub(super) fn clone_offsets(&self, src: &str, dest: &str, topic: &str) -> bool {
        let Some(queues) = self.table.get(&offset_key(topic, src)).map(|q| q.clone()) else {
            return false;
        };
        self.table.insert(offset_key(topic, dest), queues);
        true
    }

    /// Merges a master's table in (a GET_ALL_CONSUMER_OFFSET body): each of its keys takes
    /// the master's queues whole, keys the master lacks stay. Whether anything changed.
    ///
    /// # Errors
    /// Why the body is not such a table.
    pub(super) fn merge_masters(&self, body: &[u8]) -> Result<bool, String> {
        let incoming = ConsumerOffsetTable::parse(body).map_err(|e| e.to_string())?;
        let mut moved = false;
        for (key, queues) in incoming.offset_table {
            let queues: BTreeMap<i32, i64> = queues.into_iter().collect();
            match self.table.entry(key) {
                Entry::Occupied(mut mine) => {
                    if *mine.get() != queues {
                        mine.insert(queues);
                        moved = true;
                    }
                }
                Entry::Vacant(mine) => {
                    mine.insert(queues);
                    moved = true;
                }
            }
        }
        Ok(moved)
    }

    /// Topics `group` has committed offsets in (`whichTopicByConsumer`), in the file's order.
    pub(super) fn topics_of_group(&self, group: &str) -> Vec<String> {
        let suffix = format!("@{group}");
        let mut keys: Vec<String> = self
            .table
            .iter()
            .filter(|entry| entry.key().ends_with(&suffix))
            .map(|entry| entry.key().clone())
            .collect();
        keys.sort_unstable();
        keys.into_iter()
            .filter_map(|key| key.strip_suffix(&suffix).map(str::to_owned))
            .collect()
    }

    /// Groups that committed offsets in `topic`.
    pub(super) fn groups_of_topic(&self, topic: &str) -> Vec<String> {
        // Keys are `topic@group`; topic names cannot hold an `@`.
        self.table
            .iter()
            .filter_map(|entry| {
                let (key_topic, group) = entry.key().split_once('@')?;
                (key_topic == topic).then(|| group.to_owned())
            })
            .collect()
    }

    /// `consumerOffset.json` as Java writes it.
    pub(super) fn to_json(&self) -> String {
        self.sorted().to_json()
    }

    /// Writes `consumerOffset.json` here, blocking (unless a newer snapshot is written
    /// already).
    ///
    /// # Errors
    /// The I/O error.
    pub(super) fn persist(&self) -> std::io::Result<()> {
        let (version, json) = self.snapshot();
        write_snapshot(&self.path, version, json.as_bytes()).map(|_| ())
    }

    /// Writes `consumerOffset.json` on the executor's blocking threads (unless a newer
    /// snapshot is written already).
    ///
    /// # Errors
    /// The I/O error.
    pub(super) async fn persist_off_shard(&self) -> std::io::Result<()> {
        let (version, json) = self.snapshot();
        write_snapshot_off_shard(self.path.clone(), version, json.into_bytes())
            .await
            .map(|_| ())
    }

    /// The file's JSON and its snapshot version, taken in order with other snapshots.
    fn snapshot(&self) -> (u64, String) {
        let in_order = lock(&self.snapshots);
        let version = next_snapshot_version();
        let table = self.sorted();
        drop(in_order);
        (version, table.to_json())
    }

    /// The table as the file lays it out: keys and queues ascending.
    fn sorted(&self) -> ConsumerOffsetTable {
        let sorted: BTreeMap<String, Vec<(i32, i64)>> = self
            .table
            .iter()
            .map(|entry| {
                let queues = entry.value().iter().map(|(q, o)| (*q, *o)).collect();
                (entry.key().clone(), queues)
            })
            .collect();
        ConsumerOffsetTable {
            offset_table: sorted.into_iter().collect(),
        }
    }
}

/// The table's key of a group's offsets in a topic.
fn offset_key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty(dir: &std::path::Path) -> ConsumerOffsets {
        ConsumerOffsets::load(dir.join("consumerOffset.json")).unwrap()
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ferromq-offsets-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn commit_then_committed_reads_it_back_and_a_reset_moves_it_back() {
        let dir = temp_dir("commit");
        let offsets = empty(&dir);
        assert_eq!(offsets.committed("g", "t", 0), None);
        offsets.commit("g", "t", 0, 10);
        offsets.commit("g", "t", 0, 4);
        assert_eq!(offsets.committed("g", "t", 0), Some(4));
        assert_eq!(offsets.committed("g", "t", 1), None);
        assert_eq!(offsets.committed("h", "t", 0), None);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn file_lists_keys_and_queues_ascending_whatever_the_commit_order() {
        let dir = temp_dir("order");
        let offsets = empty(&dir);
        for (group, topic, queue) in [("b", "t", 3), ("a", "u", 1), ("a", "t", 2), ("a", "t", 0)] {
            offsets.commit(group, topic, queue, i64::from(queue) * 10);
        }
        let keys: Vec<(String, Vec<(i32, i64)>)> = offsets.sorted().offset_table;
        let expected = vec![
            ("t@a".to_owned(), vec![(0, 0), (2, 20)]),
            ("t@b".to_owned(), vec![(3, 30)]),
            ("u@a".to_owned(), vec![(1, 10)]),
        ];
        assert_eq!(keys, expected);
        offsets.persist().unwrap();
        let reloaded = empty(&dir);
        assert_eq!(reloaded.to_json(), offsets.to_json());
        assert_eq!(reloaded.topics_of_group("a"), vec!["t", "u"]);
        let mut groups = reloaded.groups_of_topic("t");
        groups.sort();
        assert_eq!(groups, vec!["a", "b"]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn merge_masters_replaces_keys_it_has_and_keeps_the_others() {
        let dir = temp_dir("merge");
        let offsets = empty(&dir);
        offsets.commit("a", "t", 0, 5);
        offsets.commit("a", "t", 1, 6);
        offsets.commit("b", "t", 0, 7);
        let master = ConsumerOffsetTable {
            offset_table: vec![("t@a".to_owned(), vec![(0, 9)])],
        };
        assert_eq!(offsets.merge_masters(master.to_json().as_bytes()), Ok(true));
        assert_eq!(offsets.committed("a", "t", 0), Some(9));
        assert_eq!(offsets.committed("a", "t", 1), None);
        assert_eq!(offsets.committed("b", "t", 0), Some(7));
        assert_eq!(
            offsets.merge_masters(master.to_json().as_bytes()),
            Ok(false)
        );
        assert!(offsets.merge_masters(b"not json").is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
