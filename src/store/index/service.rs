//! The IndexFiles of a store on disk (`IndexService.java`): the newest file takes keys until
//! it is full, then a new one named by the wall-clock time continues from its end.
//!
//! Owned by the dispatch shard; queries come to it. Files are mapped ([`MappedFile`]): an
//! insert touches a slot and an item at random positions, which the page cache absorbs;
//! [`IndexService::start_flush`] syncs them on a blocking thread while indexing goes on.

use super::index_file::{index_file_size, IndexFileBuilder};
use crate::calendar::civil_from_days;
use ferromq_uring::file::remove_file_off_executor;
use ferromq_uring::mapped::MappedFile;
use ferromq_uring::IoError;
use futures::future::LocalBoxFuture;
use std::path::{Path, PathBuf};

/// One file and its name.
#[derive(Debug)]
struct IndexFileEntry {
    name: String,
    file: IndexFileBuilder<MappedFile>,
}

/// The IndexFiles of one store.
#[derive(Debug)]
pub struct IndexService {
    dir: PathBuf,
    slot_num: usize,
    item_num: usize,
    files: Vec<IndexFileEntry>,
    /// Whether [`IndexService::load`] dropped files: their keys must be indexed again.
    dropped: bool,
    /// Syncs the next flush runs besides the newest file's: the last entries of a file
    /// rolled away from, and the directory after a file was made in it. A roll leaves them
    /// to the flush (as Java's `FlushIndexFileThread` does), so indexing does not wait.
    pending_syncs: PendingSyncs,
}

/// Syncs not yet run, shown by their count.
#[derive(Default)]
struct PendingSyncs(Vec<LocalBoxFuture<'static, Result<(), IoError>>>);

impl std::fmt::Debug for PendingSyncs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} syncs", self.0.len())
    }
}

impl IndexService {
    /// Loads the files of `dir`, oldest first. After an unclean stop (`clean == false`) a file
    /// whose end time is past `index_checkpoint_ms` may hold entries of records recovery cut,
    /// so it is deleted, as Java does; so is a file, and every file after it, that indexes a
    /// record at or past `valid_end` (the CommitLog was cut below its entries: offsets there
    /// will be reused, and [`IndexService::put`] would skip them). Re-dispatch from
    /// [`IndexService::rebuild_from`] indexes their records again.
    ///
    /// # Errors
    /// [`IoError`] from listing, mapping or deleting files.
    pub fn load(
        dir: &Path,
        slot_num: usize,
        item_num: usize,
        clean: bool,
        index_checkpoint_ms: i64,
        valid_end: u64,
    ) -> Result<IndexService, IoError> {
        let io = IoError::on;
        ferromq_uring::disk::create_dir_durably(dir).map_err(io("create directory", dir))?;
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map_err(io("list", dir))?
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| name.len() == 17 && name.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        names.sort();
        let size = u64::try_from(index_file_size(slot_num, item_num)).expect("fits u64");
        let valid_end = i64::try_from(valid_end).unwrap_or(i64::MAX);
        let mut files = Vec::new();
        let mut dropped = false;
        for name in names {
            let path = dir.join(&name);
            let map = MappedFile::open(&path, size)?;
            let file = IndexFileBuilder::open(map, slot_num, item_num);
            let keep = !dropped
                && file.as_ref().is_some_and(|file| {
                    let header = file.header();
                    let indexes_cut = header.index_count > 1 && header.end_phy_offset >= valid_end;
                    (clean || header.end_timestamp <= index_checkpoint_ms) && !indexes_cut
                });
            dropped |= !keep;
            match file {
                Some(file) if keep => files.push(IndexFileEntry { name, file }),
                _ => {
                    tracing::warn!(
                        file = %path.display(),
                        "deleting IndexFile past the checkpoint; re-dispatch rebuilds it"
                    );
                    std::fs::remove_file(&path).map_err(io("delete", &path))?;
                }
            }
        }
        Ok(IndexService {
            dir: dir.to_owned(),
            slot_num,
            item_num,
            files,
            dropped,
            pending_syncs: PendingSyncs::default(),
        })
    }

    /// Where re-dispatch must start for the index to be whole: the end of the files kept (0
    /// if none), when [`IndexService::load`] dropped any; `None` when it dropped nothing.
    #[must_use]
    pub fn rebuild_from(&self) -> Option<i64> {
        self.dropped.then(|| self.end_phy_offset())
    }

    /// CommitLog offset of the newest indexed record (0 when empty): re-dispatch below it
    /// adds nothing.
    #[must_use]
    pub fn end_phy_offset(&self) -> i64 {
        self.files
            .last()
            .map_or(0, |entry| entry.file.header().end_phy_offset)
    }

    /// Store time of the newest indexed record (the checkpoint's `indexMsgTimestamp`).
    #[must_use]
    pub fn end_timestamp(&self) -> i64 {
        self.files
            .last()
            .map_or(0, |entry| entry.file.header().end_timestamp)
    }

    /// Indexes `keys` of the record at `phy_offset` in `topic`. Records below the newest
    /// file's end are already indexed (re-dispatch after recovery) and are skipped.
    ///
    /// # Errors
    /// [`IoError`] from creating a new file.
    pub fn put(
        &mut self,
        topic: &str,
        keys: &[String],
        phy_offset: i64,
        store_timestamp: i64,
        wall_clock_ms: i64,
    ) -> Result<(), IoError> {
        if keys.is_empty() || (!self.files.is_empty() && phy_offset < self.end_phy_offset()) {
            return Ok(());
        }
        // The newest indexed record may be indexed in part (a file filled up between its
        // keys and recovery dropped the next file); re-dispatch brings it again, and only the
        // keys not there yet go in.
        let at_end = !self.files.is_empty() && phy_offset == self.end_phy_offset();
        for key in keys {
            if at_end && self.holds(topic, key, phy_offset) {
                continue;
            }
            let put = match self.files.last_mut() {
                Some(entry) => entry.file.put_key(topic, key, phy_offset, store_timestamp),
                None => false,
            };
            if !put {
                self.roll(wall_clock_ms)?;
                let entry = self.files.last_mut().expect("just rolled");
                if !entry.file.put_key(topic, key, phy_offset, store_timestamp) {
                    tracing::error!(
                        topic,
                        key,
                        "a new IndexFile refused a key; index disabled for it"
                    );
                }
            }
        }
        Ok(())
    }

    /// Record offsets stored under `topic#key` in `[begin_ms, end_ms]`, newest file first,
    /// at most `max` (`queryOffset`). Hash collisions are possible: callers check the record.
    #[must_use]
    pub fn query(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> Vec<i64> {
        let mut found = Vec::new();
        for entry in self.files.iter().rev() {
            let header = entry.file.header();
            let overlaps = header.begin_timestamp <= end_ms && header.end_timestamp >= begin_ms;
            if overlaps {
                let left = max - found.len();
                found.extend(entry.file.view().lookup(topic, key, begin_ms, end_ms, left));
            }
            if found.len() >= max || header.begin_timestamp < begin_ms {
                break;
            }
        }
        found
    }

    /// The newest file's end time now, and the syncs that make every file durable up to it
    /// (`None` without files): the newest file's, and those rolls left (the last entries of
    /// each file rolled away from, the directory). They run while indexing goes on: they hold
    /// the files, not the service, and cover every entry put before they are first polled.
    pub fn start_flush(
        &mut self,
    ) -> (
        i64,
        Option<impl std::future::Future<Output = Result<(), IoError>>>,
    ) {
        let newest = self
            .files
            .last()
            .map(|entry| entry.file.storage().flush_off_executor());
        let pending = std::mem::take(&mut self.pending_syncs.0);
        let sync = (newest.is_some() || !pending.is_empty()).then_some(async move {
            let newest = async {
                match newest {
                    Some(sync) => sync.await,
                    None => Ok(()),
                }
            };
            let (pending, newest) =
                futures::future::join(futures::future::try_join_all(pending), newest).await;
            pending.and(newest).map(|_| ())
        });
        (self.end_timestamp(), sync)
    }

    /// Deletes files whose every entry points below `min_phy_offset` (retention), never the
    /// newest; returns how many went.
    ///
    /// # Errors
    /// [`IoError`] from deleting.
    pub async fn delete_below(&mut self, min_phy_offset: i64) -> Result<usize, IoError> {
        let mut deleted = 0;
        while self.files.len() > 1 && self.files[0].file.header().end_phy_offset < min_phy_offset {
            let entry = self.files.remove(0);
            let path = entry.file.storage().path().to_owned();
            drop(entry);
            remove_file_off_executor(&path).await?;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// Whether `topic#key` → `phy_offset` is in a file that ends with that record.
    fn holds(&self, topic: &str, key: &str, phy_offset: i64) -> bool {
        self.files
            .iter()
            .rev()
            .take_while(|entry| entry.file.header().end_phy_offset == phy_offset)
            .any(|entry| {
                // Nothing was indexed after this record: its entry is the newest match.
                let newest = entry.file.view().lookup(topic, key, i64::MIN, i64::MAX, 1);
                newest.first() == Some(&phy_offset)
            })
    }

    /// Names of the files, oldest first.
    #[must_use]
    pub fn file_names(&self) -> Vec<String> {
        self.files.iter().map(|entry| entry.name.clone()).collect()
    }

    fn roll(&mut self, wall_clock_ms: i64) -> Result<(), IoError> {
        if let Some(entry) = self.files.last() {
            // It takes no entries any more: a sync whenever it runs covers them all.
            let last_entries = entry.file.storage().flush_off_executor();
            self.pending_syncs.0.push(Box::pin(last_entries));
        }
        let (end_phy, end_time) = (self.end_phy_offset(), self.end_timestamp());
        let mut name = file_name_for(wall_clock_ms);
        // Names must sort after the newest file: two files in one millisecond (tiny test
        // indexes), or a store taken over from a Java broker that named files in local time
        // ahead of UTC. Then the newest name plus one.
        if let Some(last) = self.files.last().filter(|entry| entry.name >= name) {
            let next = last.name.parse::<u64>().unwrap_or(0) + 1;
            name = format!("{next:017}");
        }
        let size = u64::try_from(index_file_size(self.slot_num, self.item_num)).expect("fits");
        let map = MappedFile::open(&self.dir.join(&name), size)?;
        let file = IndexFileBuilder::create(map, self.slot_num, self.item_num, end_phy, end_time);
        self.files.push(IndexFileEntry { name, file });
        // Its name is durable once the directory is synced.
        let dir = ferromq_uring::file::sync_dir_off_executor(&self.dir);
        self.pending_syncs.0.push(Box::pin(dir));
        Ok(())
    }
}

/// Java names an IndexFile by its creation time, `yyyyMMddHHmmssSSS` (UTC here).
#[must_use]
pub fn file_name_for(unix_ms: i64) -> String {
    let millis = unix_ms.rem_euclid(1000);
    let secs = unix_ms.div_euclid(1000);
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}{month:02}{day:02}{:02}{:02}{:02}{millis:03}",
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_java_timestamps() {
        assert_eq!(file_name_for(0), "19700101000000000");
        // 2026-11-29 17:51:49.123 UTC
        assert_eq!(file_name_for(1_795_974_709_123), "20261129175149123");
        assert_eq!(file_name_for(951_782_400_000), "20000229000000000");
    }
}
