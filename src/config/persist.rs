//! Writing config files so a crash never leaves a half-written one (`ConfigManager.persist`
//! in Java 4.9.x): write `<name>.tmp` and fsync it, keep the current file as `<name>.bak`,
//! rename the temporary file over `<name>`, fsync the directory. Loading falls back to the
//! `.bak` copy when the file is missing, empty or unreadable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Config writes of the process, one at a time, with the newest snapshot version written of
/// each path ([`write_snapshot`]). One at a time: a periodic write still running on a blocking
/// thread when shutdown writes the same file would otherwise share its `.tmp` (one truncating
/// what the other renames into place). Config writes are rare and small.
static WRITES: Mutex<BTreeMap<PathBuf, u64>> = Mutex::new(BTreeMap::new());

/// The next version for [`write_snapshot`]: take it while holding what the snapshot reads,
/// so that a later snapshot always has a higher version.
pub fn next_snapshot_version() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn writes() -> std::sync::MutexGuard<'static, BTreeMap<PathBuf, u64>> {
    WRITES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes `bytes` to `path` atomically, keeping the previous content as `path.bak`.
///
/// # Errors
/// The I/O error.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let _one_at_a_time = writes();
    write_now(path, bytes)
}

/// [`write_atomically`] for a snapshot of state that keeps changing (consumer offsets, delay
/// offsets), `version` from [`next_snapshot_version`]: a snapshot older than one already
/// written to `path` is not written, so the file ends with the newest whatever order the
/// writes run in (two blocking threads, or a periodic write still running at shutdown).
/// Returns whether it wrote.
///
/// # Errors
/// The I/O error.
pub fn write_snapshot(path: &Path, version: u64, bytes: &[u8]) -> std::io::Result<bool> {
    let mut newest = writes();
    if newest.get(path).is_some_and(|written| *written >= version) {
        return Ok(false);
    }
    write_now(path, bytes)?;
    newest.insert(path.to_owned(), version);
    Ok(true)
}

/// [`write_snapshot`] on the executor's blocking thread (see [`write_atomically_off_shard`]).
///
/// # Errors
/// The I/O error.
pub async fn write_snapshot_off_shard(
    path: PathBuf,
    version: u64,
    bytes: Vec<u8>,
) -> std::io::Result<bool> {
    glommio::executor()
        .spawn_blocking(move || write_snapshot(&path, version, &bytes))
        .await
}

fn write_now(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        std::fs::create_dir_all(parent)?;
    }
    let temp = sibling(path, "tmp");
    let mut file = std::fs::File::create(&temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    if path.exists() {
        std::fs::copy(path, sibling(path, "bak"))?;
    }
    std::fs::rename(&temp, path)?;
    if let Some(parent) = parent {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// [`write_atomically`] on the executor's blocking thread, for a shard that must not wait
/// for the disk: the two syncs each wait for a device-cache flush (0.3 ms and more), and
/// every task of the shard (on two cores, the CommitLog writer's and a net shard's) would
/// stop meanwhile. Call from inside a glommio executor.
///
/// # Errors
/// The I/O error.
pub async fn write_atomically_off_shard(path: PathBuf, bytes: Vec<u8>) -> std::io::Result<()> {
    glommio::executor()
        .spawn_blocking(move || write_atomically(&path, &bytes))
        .await
}

/// Reads `path`, or `path.bak` when `path` is missing, empty, or rejected by `accept`.
/// `None` when neither is usable.
///
/// # Errors
/// An I/O error other than "not found".
pub fn read_with_backup(
    path: &Path,
    accept: impl Fn(&[u8]) -> bool,
) -> std::io::Result<Option<Vec<u8>>> {
    for candidate in [path.to_owned(), sibling(path, "bak")] {
        match std::fs::read(&candidate) {
            Ok(bytes) if !bytes.is_empty() && accept(&bytes) => return Ok(Some(bytes)),
            Ok(_) => {
                tracing::warn!(path = %candidate.display(), "config file empty or unreadable");
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(None)
}

fn sibling(path: &Path, extension: &str) -> PathBuf {
    let mut name = path
        .file_name()
        .map(std::ffi::OsStr::to_os_string)
        .unwrap_or_default();
    name.push(".");
    name.push(extension);
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_keeps_backup_and_read_falls_back_to_it() {
        let dir = std::env::temp_dir().join(format!("ferromq-persist-{}", std::process::id()));
        let path = dir.join("topics.json");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read(dir.join("topics.json.bak")).unwrap(), b"one");
        std::fs::write(&path, b"").unwrap();
        assert_eq!(
            read_with_backup(&path, |_| true).unwrap(),
            Some(b"one".to_vec())
        );
        std::fs::write(&path, b"garbage").unwrap();
        let parsed = read_with_backup(&path, |bytes| bytes != b"garbage").unwrap();
        assert_eq!(parsed, Some(b"one".to_vec()));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_older_snapshot_written_after_a_newer_one_is_skipped() {
        let dir = std::env::temp_dir().join(format!("ferromq-snapshot-{}", std::process::id()));
        let path = dir.join("consumerOffset.json");
        let older = next_snapshot_version();
        let newer = next_snapshot_version();
        assert!(write_snapshot(&path, newer, b"newer").unwrap());
        // The older one runs last (a periodic write finishing after shutdown's).
        assert!(!write_snapshot(&path, older, b"older").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"newer");
        let newest = next_snapshot_version();
        assert!(write_snapshot(&path, newest, b"newest").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"newest");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
