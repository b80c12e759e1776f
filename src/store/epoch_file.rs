//! The epoch file of controller mode: which master epoch wrote which CommitLog range (Java's
//! `store/ha/autoswitch/EpochFileCache` over `common/utils/CheckpointFile`, file
//! `<storePathRootDir>/epochFileCheckpoint`, Java's `storePathEpochFile`).
//!
//! A broker that becomes master appends `(newEpoch, its CommitLog end)`; a slave compares its
//! list with the master's ([`EpochFileCache::find_consistent_point`]) to learn how much of its
//! log both share, and cuts the rest.
//!
//! File format (text, `\n` line ends, as Java writes it on Linux):
//!
//! ```text
//! <entry count>
//! <crc32 of the entry lines, masked with 0x7FFF_FFFF, decimal; 0 = not checked>
//! <epoch>-<startOffset>
//! ...
//! ```
//!
//! Before each write the previous content is copied to `epochFileCheckpoint.bak`; a reader
//! that finds the file unreadable, inconsistent or empty falls back to the `.bak` (Java's
//! `CheckpointFile.read`). Unlike Java we write the new file through a temporary file, fsync
//! and rename, so a crash leaves the old or the new content, never a torn one.
//!
//! Invariant: entries are sorted by epoch and by start offset, both strictly increasing; each
//! entry's end offset is the next entry's start, the last one's `i64::MAX` until set.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The file name under `storePathRootDir` (Java's `StorePathConfigHelper.getEpochStorePath`).
pub const EPOCH_FILE_NAME: &str = "epochFileCheckpoint";

/// One master epoch and the CommitLog range it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The master epoch the controller gave.
    pub epoch: i32,
    /// The CommitLog offset at which this epoch's master started writing.
    pub start_offset: i64,
    /// Where the next epoch started (`i64::MAX` for the last entry, unless set).
    pub end_offset: i64,
}

impl EpochEntry {
    /// An entry with an open end.
    #[must_use]
    pub fn new(epoch: i32, start_offset: i64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
            end_offset: i64::MAX,
        }
    }
}

/// Why the epoch file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum EpochFileError {
    /// The file system refused.
    #[error("epoch file {op} {path}: {source}; check the store directory's permissions")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The text is not what Java's `CheckpointFile` writes.
    #[error("epoch file {path}: {what}; the .bak copy was tried too")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

/// The epoch entries of this broker, and the file that keeps them.
/// Java: `org.apache.rocketmq.store.ha.autoswitch.EpochFileCache`.
#[derive(Debug, Default)]
pub struct EpochFileCache {
    entries: Vec<EpochEntry>,
    /// `None`: in memory only (a master's list received in a handshake).
    path: Option<PathBuf>,
}

impl EpochFileCache {
    /// A cache of received entries, not backed by a file (Java's `initCacheFromEntries` on a
    /// file-less cache).
    #[must_use]
    pub fn from_entries(entries: &[(i32, i64)]) -> EpochFileCache {
        let mut cache = EpochFileCache::default();
        cache.init(
            entries
                .iter()
                .map(|&(e, s)| EpochEntry::new(e, s))
                .collect(),
        );
        cache
    }

    /// Loads `<root>/epochFileCheckpoint` (or its `.bak`); a missing file is an empty list.
    ///
    /// # Errors
    /// Both the file and its `.bak` unreadable or corrupt.
    pub fn load(root: &Path) -> Result<EpochFileCache, EpochFileError> {
        let path = root.join(EPOCH_FILE_NAME);
        let entries = match read_one(&path) {
            Ok(entries) if !entries.is_empty() => entries,
            Ok(_) => read_one(&backup_path(&path))?,
            Err(err) => match read_one(&backup_path(&path)) {
                Ok(entries) if !entries.is_empty() => {
                    tracing::warn!(%err, "epoch file unreadable, using its .bak");
                    entries
                }
                _ => return Err(err),
            },
        };
        let mut cache = EpochFileCache {
            entries: Vec::new(),
            path: Some(path),
        };
        cache.init(entries);
        Ok(cache)
    }

    /// All entries, oldest first.
    #[must_use]
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest entry.
    #[must_use]
    pub fn last_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The newest epoch, -1 when there is none (Java's `lastEpoch`).
    #[must_use]
    pub fn last_epoch(&self) -> i32 {
        self.entries.last().map_or(-1, |e| e.epoch)
    }

    /// The entry of `epoch`.
    #[must_use]
    pub fn entry(&self, epoch: i32) -> Option<EpochEntry> {
        self.entries.iter().find(|e| e.epoch == epoch).copied()
    }

    /// The entry whose range holds `offset`.
    #[must_use]
    pub fn entry_by_offset(&self, offset: i64) -> Option<EpochEntry> {
        self.entries
            .iter()
            .find(|e| e.start_offset <= offset && offset < e.end_offset)
            .copied()
    }

    /// The first entry after `epoch` (Java's `nextEntry`).
    #[must_use]
    pub fn next_entry(&self, epoch: i32) -> Option<EpochEntry> {
        self.entries.iter().find(|e| e.epoch > epoch).copied()
    }

    /// Appends a new epoch starting at `start_offset` and persists; refused (false) unless both
    /// are greater than the last entry's (Java's `appendEntry`).
    ///
    /// # Errors
    /// The file could not be written.
    pub fn append(&mut self, epoch: i32, start_offset: i64) -> Result<bool, EpochFileError> {
        if let Some(last) = self.entries.last_mut() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                // Java refuses equal start offsets too: an epoch that wrote nothing is replaced
                // by nothing, the next master's entry starts at the same offset.
                return Ok(false);
            }
            last.end_offset = start_offset;
        }
        self.entries.push(EpochEntry::new(epoch, start_offset));
        self.flush()?;
        Ok(true)
    }

    /// What a broker that becomes master of `epoch` with its CommitLog ending at `end_offset`
    /// writes (Java's `AutoSwitchHAService.changeToMaster`): entries of `epoch` or newer go,
    /// then `(epoch, end_offset)` is appended. False when the append was refused (the last
    /// entry already starts at `end_offset`: the previous master wrote nothing).
    ///
    /// # Errors
    /// The file could not be written.
    pub fn become_master(&mut self, epoch: i32, end_offset: i64) -> Result<bool, EpochFileError> {
        if self.last_epoch() >= epoch {
            self.truncate_suffix_by_epoch(epoch)?;
        }
        self.append(epoch, end_offset)
    }

    /// Sets the last entry's end (the local CommitLog end), unless it lies before its start.
    pub fn set_last_end_offset(&mut self, end_offset: i64) {
        if let Some(last) = self.entries.last_mut() {
            if last.start_offset <= end_offset {
                last.end_offset = end_offset;
            }
        }
    }

    /// The offset up to which this log and `other` agree: the end (the smaller of the two) of
    /// the newest epoch both have with the same start; -1 when they share none (Java's
    /// `findConsistentPoint`).
    #[must_use]
    pub fn find_consistent_point(&self, other: &EpochFileCache) -> i64 {
        for local in self.entries.iter().rev() {
            if let Some(remote) = other.entry(local.epoch) {
                if remote.start_offset == local.start_offset {
                    return local.end_offset.min(remote.end_offset);
                }
            }
        }
        -1
    }

    /// Drops entries of epoch `>= epoch` and persists.
    ///
    /// # Errors
    /// The file could not be written.
    pub fn truncate_suffix_by_epoch(&mut self, epoch: i32) -> Result<(), EpochFileError> {
        self.truncate_suffix(|e| e.epoch >= epoch)
    }

    /// Drops entries starting at or after `offset` and persists (after a CommitLog cut).
    ///
    /// # Errors
    /// The file could not be written.
    pub fn truncate_suffix_by_offset(&mut self, offset: i64) -> Result<(), EpochFileError> {
        self.truncate_suffix(|e| e.start_offset >= offset)
    }

    /// Drops entries ending at or before `offset` and persists (after old segments expired).
    ///
    /// # Errors
    /// The file could not be written.
    pub fn truncate_prefix_by_offset(&mut self, offset: i64) -> Result<(), EpochFileError> {
        self.entries.retain(|e| e.end_offset > offset);
        self.flush()
    }

    /// The file text Java's `CheckpointFile.write` would produce.
    #[must_use]
    pub fn encode(&self) -> String {
        let body: String = self
            .entries
            .iter()
            .map(|e| format!("{}-{}\n", e.epoch, e.start_offset))
            .collect();
        format!(
            "{}\n{}\n{body}",
            self.entries.len(),
            crc32_masked(body.as_bytes())
        )
    }

    fn truncate_suffix(
        &mut self,
        drop: impl Fn(&EpochEntry) -> bool,
    ) -> Result<(), EpochFileError> {
        self.entries.retain(|e| !drop(e));
        if let Some(last) = self.entries.last_mut() {
            last.end_offset = i64::MAX;
        }
        self.flush()
    }

    fn init(&mut self, mut entries: Vec<EpochEntry>) {
        entries.sort_by_key(|e| e.epoch);
        for i in 1..entries.len() {
            entries[i - 1].end_offset = entries[i].start_offset;
        }
        if let Some(last) = entries.last_mut() {
            last.end_offset = i64::MAX;
        }
        self.entries = entries;
    }

    /// Java writes nothing for an empty list, so neither do we: the last file stays.
    fn flush(&self) -> Result<(), EpochFileError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if self.entries.is_empty() {
            return Ok(());
        }
        let io = |op: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| EpochFileError::Io { op, path, source }
        };
        if let Ok(previous) = std::fs::read(path) {
            let bak = backup_path(path);
            write_synced(&bak, &previous).map_err(io("write", &bak))?;
        }
        let tmp = path.with_extension("tmp");
        write_synced(&tmp, self.encode().as_bytes()).map_err(io("write", &tmp))?;
        std::fs::rename(&tmp, path).map_err(io("rename", path))?;
        Ok(())
    }
}

/// What a broker does to its epoch file on becoming master of `epoch` with its CommitLog
/// ending at `end_offset`: load `<root>/epochFileCheckpoint`, [`EpochFileCache::become_master`],
/// log the outcome. A failure is logged, not returned: the role change goes on, as Java's
/// (whose `appendEntry` only logs), and the next election writes the file again.
pub fn record_master_epoch(root: &Path, epoch: i32, end_offset: i64) {
    match EpochFileCache::load(root).and_then(|mut cache| cache.become_master(epoch, end_offset)) {
        Ok(true) => tracing::info!(epoch, end_offset, "epoch file: new master epoch recorded"),
        Ok(false) => tracing::warn!(
            epoch,
            end_offset,
            "epoch file: new epoch not recorded, the last one starts at the same offset"
        ),
        Err(err) => tracing::error!(%err, epoch, "epoch file: new master epoch not recorded"),
    }
}

/// Parses the text of an epoch file (Java's `CheckpointFile.read` of one file): lines that are
/// not `epoch-startOffset` are skipped, as Java's serializer does.
///
/// # Errors
/// A bad count or CRC line, a count or CRC that does not match.
pub fn parse(text: &str) -> Result<Vec<EpochEntry>, String> {
    let mut lines = text.lines();
    let count: usize = parse_line(lines.next(), "entry count")?;
    let crc: i32 = parse_line(lines.next(), "crc32")?;
    let mut body = String::new();
    let mut entries = Vec::new();
    for line in lines {
        body.push_str(line);
        body.push('\n');
        if let Some((epoch, start)) = line.split_once('-') {
            if let (Ok(epoch), Ok(start)) = (epoch.parse::<i32>(), start.parse::<i64>()) {
                entries.push(EpochEntry::new(epoch, start));
            }
        }
    }
    if entries.len() != count {
        return Err(format!("expected {count} entries, found {}", entries.len()));
    }
    let truth = crc32_masked(body.as_bytes());
    if crc != 0 && crc != truth {
        return Err(format!("crc32 {crc} does not match the entries' {truth}"));
    }
    Ok(entries)
}

fn parse_line<T: std::str::FromStr>(line: Option<&str>, what: &str) -> Result<T, String> {
    let line = line.ok_or_else(|| format!("no {what} line"))?;
    line.trim()
        .parse()
        .map_err(|_| format!("bad {what} line {line:?}"))
}

fn read_one(path: &Path) -> Result<Vec<EpochEntry>, EpochFileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(EpochFileError::Io {
                op: "read",
                path: path.to_path_buf(),
                source,
            })
        }
    };
    parse(&text).map_err(|what| EpochFileError::Corrupt {
        path: path.to_path_buf(),
        what,
    })
}

fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    PathBuf::from(name)
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Java's `UtilAll.crc32`: CRC-32 with the sign bit cleared.
fn crc32_masked(bytes: &[u8]) -> i32 {
    i32::try_from(crc32fast::hash(bytes) & 0x7FFF_FFFF).expect("masked to 31 bits")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_text_as_java_writes_it() {
        // Java's `CheckpointFile.write` of [(1, 0), (2, 4096)] on Linux, byte for byte.
        let text = "2\n1694929738\n1-0\n2-4096\n";
        let entries = parse(text).expect("valid");
        assert_eq!(
            entries,
            vec![EpochEntry::new(1, 0), EpochEntry::new(2, 4096)]
        );
        let cache = EpochFileCache::from_entries(&[(1, 0), (2, 4096)]);
        assert_eq!(cache.encode(), text);
        assert_eq!(cache.entries()[0].end_offset, 4096);
        assert_eq!(cache.last_epoch(), 2);
    }

    #[test]
    fn parse_zero_crc_is_not_checked_and_bad_crc_is_refused() {
        assert_eq!(
            parse("1\n0\n3-100\n").expect("unchecked"),
            vec![EpochEntry::new(3, 100)]
        );
        assert!(parse("1\n12345\n3-100\n").is_err());
        assert!(parse("2\n0\n3-100\n").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn append_refuses_older_epoch_or_offset() {
        let mut cache = EpochFileCache::default();
        assert!(cache.append(1, 0).expect("memory"));
        assert!(!cache.append(1, 10).expect("memory"));
        assert!(!cache.append(2, 0).expect("memory"));
        assert!(cache.append(2, 10).expect("memory"));
        assert_eq!(cache.entries()[0].end_offset, 10);
        assert_eq!(cache.entry_by_offset(9).map(|e| e.epoch), Some(1));
        assert_eq!(cache.entry_by_offset(10).map(|e| e.epoch), Some(2));
        assert_eq!(cache.next_entry(1).map(|e| e.epoch), Some(2));
        // A master re-elected for an epoch it already has starts that epoch again.
        assert!(cache.become_master(2, 20).expect("memory"));
        assert_eq!(cache.last_entry(), Some(EpochEntry::new(2, 20)));
        assert!(cache.become_master(3, 40).expect("memory"));
        assert_eq!(cache.entries().len(), 3);
    }

    #[test]
    fn consistent_point_is_end_of_newest_shared_epoch() {
        // The old master wrote epoch 2 up to 300 but the new master (epoch 3) took over at 200.
        let mut old = EpochFileCache::from_entries(&[(1, 0), (2, 100)]);
        old.set_last_end_offset(300);
        let mut new = EpochFileCache::from_entries(&[(1, 0), (2, 100), (3, 200)]);
        new.set_last_end_offset(500);
        assert_eq!(old.find_consistent_point(&new), 200);
        // Same epochs, different start: nothing of epoch 2 is shared, epoch 1 is.
        let other = EpochFileCache::from_entries(&[(1, 0), (2, 150)]);
        assert_eq!(old.find_consistent_point(&other), 100);
        let stranger = EpochFileCache::from_entries(&[(5, 0)]);
        assert_eq!(old.find_consistent_point(&stranger), -1);
    }

    #[test]
    fn truncate_suffix_reopens_last_entry() {
        let mut cache = EpochFileCache::from_entries(&[(1, 0), (2, 100), (3, 200)]);
        cache.truncate_suffix_by_offset(150).expect("memory");
        assert_eq!(cache.entries().len(), 2);
        assert_eq!(cache.last_entry().map(|e| e.end_offset), Some(i64::MAX));
        cache.truncate_suffix_by_epoch(2).expect("memory");
        assert_eq!(cache.last_epoch(), 1);
        cache.truncate_prefix_by_offset(i64::MAX).expect("memory");
        assert_eq!(cache.last_epoch(), -1);
    }

    #[test]
    fn load_falls_back_to_bak_when_file_is_corrupt() {
        let dir = std::env::temp_dir().join(format!("ferromq-epoch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut cache = EpochFileCache::load(dir.as_path()).expect("missing is empty");
        assert!(cache.entries().is_empty());
        cache.append(1, 0).expect("write");
        cache.append(2, 64).expect("write");
        let path = dir.as_path().join(EPOCH_FILE_NAME);
        let bak = std::fs::read_to_string(backup_path(&path)).expect("bak written");
        assert_eq!(parse(&bak).expect("bak valid"), vec![EpochEntry::new(1, 0)]);
        let reloaded = EpochFileCache::load(dir.as_path()).expect("load");
        assert_eq!(reloaded.entries(), cache.entries());
        std::fs::write(&path, "2\n1\n1-0\n").expect("corrupt");
        let fallback = EpochFileCache::load(dir.as_path()).expect("from bak");
        assert_eq!(fallback.last_epoch(), 1);
        record_master_epoch(&dir, 4, 128);
        let recorded = EpochFileCache::load(&dir).expect("load");
        assert_eq!(recorded.last_entry(), Some(EpochEntry::new(4, 128)));
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
