//! Disk space: how full the filesystem under a path is (`statvfs`), for the store's
//! retention and its refusal of puts on a full disk; directories made durably; and the
//! record lock a Java broker takes on its store's `lock` file.

use crate::IoError;
use std::path::{Path, PathBuf};

/// Space of the filesystem holding a path, in bytes (`statvfs`): Java's `File`
/// `getTotalSpace`, `getFreeSpace` and `getUsableSpace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskSpace {
    /// All blocks.
    pub total: u64,
    /// Free blocks, those reserved for root included.
    pub free: u64,
    /// Free blocks an unprivileged process may use.
    pub usable: u64,
}

impl DiskSpace {
    /// Fraction (0.0–1.0) in use, counted as Java 4.9's
    /// `UtilAll.getDiskPartitionSpaceUsedPercent` does: the used blocks over the used and
    /// the usable ones, rounded up to whole percent. Blocks reserved for root count as
    /// neither, so a disk whose reserve is large reads as fuller than `used / total`.
    #[must_use]
    pub fn used_ratio(self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let used = self.total.saturating_sub(self.free);
        let entire = used.saturating_add(self.usable);
        if entire == 0 {
            return 0.0;
        }
        let hundredths = used.saturating_mul(100);
        let percent = hundredths / entire + u64::from(!hundredths.is_multiple_of(entire));
        #[allow(clippy::cast_precision_loss)] // a percentage
        let ratio = percent as f64 / 100.0;
        ratio
    }
}

/// The space of the filesystem holding `path`.
///
/// # Errors
/// [`IoError::File`] if `statvfs` fails.
pub fn space(path: &Path) -> Result<DiskSpace, IoError> {
    let stat =
        rustix::fs::statvfs(path).map_err(|errno| IoError::file("statvfs", path, errno.into()))?;
    Ok(DiskSpace {
        total: stat.f_blocks.saturating_mul(stat.f_frsize),
        free: stat.f_bfree.saturating_mul(stat.f_frsize),
        usable: stat.f_bavail.saturating_mul(stat.f_frsize),
    })
}

/// Fraction (0.0–1.0) of the filesystem holding `path` that is in use, as Java counts it
/// ([`DiskSpace::used_ratio`]).
///
/// # Errors
/// [`IoError::File`] if `statvfs` fails.
pub fn used_ratio(path: &Path) -> Result<f64, IoError> {
    space(path).map(DiskSpace::used_ratio)
}

/// Takes an exclusive record lock on the first byte of `file`, without waiting: `Ok(false)`
/// if another holds a lock on it.
///
/// It is the lock a Java broker takes on its store's `lock` file (`FileChannel.tryLock(0, 1,
/// false)`: `fcntl(F_SETLK)`), so that each refuses to start on a store the other runs on; a
/// `flock` does not exclude it (Linux keeps the two kinds apart). Taken as an open file
/// description lock (`F_OFD_SETLK`, Linux 3.15): it conflicts with Java's record locks as a
/// classic one would, but belongs to this open file, not to the process, so a second open in
/// the same process is refused too and closing another descriptor of the file does not drop
/// it. Released when the file is closed. Kernels without it get the classic lock.
///
/// # Errors
/// The I/O error of `fcntl`.
pub fn try_lock_first_byte(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let lock = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 1,
        l_pid: 0,
    };
    let set = |command: libc::c_int| {
        // SAFETY: the descriptor is open for as long as `file` is borrowed, and `lock` is a
        // live, initialised `struct flock` that fcntl only reads.
        let result = unsafe { libc::fcntl(file.as_raw_fd(), command, &raw const lock) };
        if result == -1 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    let outcome = match set(libc::F_OFD_SETLK) {
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => set(libc::F_SETLK),
        other => other,
    };
    match outcome {
        Ok(()) => Ok(true),
        Err(error) if matches!(error.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => {
            Ok(false)
        }
        Err(error) => Err(error),
    }
}

/// Creates `dir` and whichever of its ancestors are missing, syncing the parent of each
/// directory it creates, so that after a power cut a file synced inside `dir` is still
/// reachable by name (ext4 without a journal orders nothing: an unsynced new directory can
/// vanish with everything in it). Returns the directories it synced, outermost first; none
/// if `dir` existed.
///
/// # Errors
/// The I/O error of a creation or a sync. A directory another process creates meanwhile
/// is no error.
pub fn create_dir_durably(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let parents = create_dir_all_unsynced(dir)?;
    for parent in &parents {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(parents)
}

/// Creates `dir` and whichever of its ancestors are missing, syncing nothing; returns the
/// parents of the directories it created, outermost first (none if `dir` existed): syncing
/// them makes the new directories durable.
///
/// # Errors
/// As [`create_dir_durably`].
pub fn create_dir_all_unsynced(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(path) = at {
        if path.as_os_str().is_empty() || path.is_dir() {
            break;
        }
        missing.push(path);
        at = path.parent();
    }
    let mut parents = Vec::new();
    for path in missing.into_iter().rev() {
        match std::fs::create_dir(path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => {}
            Err(error) => return Err(error),
        }
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        parents.push(parent.to_owned());
    }
    Ok(parents)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    #[test]
    fn a_new_directory_s_parents_are_synced_and_an_existing_one_needs_nothing() {
        let root = std::env::temp_dir().join(format!("ferromq-durable-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir(&root).unwrap();
        let queue = root.join("consumequeue").join("TopicA").join("3");
        let synced = super::create_dir_durably(&queue).unwrap();
        assert!(queue.is_dir());
        let topic = root.join("consumequeue").join("TopicA");
        assert_eq!(
            synced,
            vec![root.clone(), root.join("consumequeue"), topic.clone()]
        );
        assert_eq!(
            super::create_dir_durably(&queue).unwrap(),
            Vec::<PathBuf>::new()
        );
        let sibling = topic.join("4");
        assert_eq!(super::create_dir_durably(&sibling).unwrap(), vec![topic]);
        std::fs::write(root.join("file"), b"x").unwrap();
        assert!(super::create_dir_durably(&root.join("file").join("below")).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_first_byte_lock_excludes_a_second_open_and_outlives_other_descriptors() {
        let path = std::env::temp_dir().join(format!("ferromq-record-lock-{}", std::process::id()));
        std::fs::write(&path, b"lock").unwrap();
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap()
        };
        let first = open();
        assert!(super::try_lock_first_byte(&first).unwrap());
        // Refused to a second open even in this process, and the refused descriptor's close
        // (which drops a classic record lock of the process) leaves the lock held.
        let second = open();
        assert!(!super::try_lock_first_byte(&second).unwrap());
        drop(second);
        assert!(!super::try_lock_first_byte(&open()).unwrap());
        drop(first);
        assert!(super::try_lock_first_byte(&open()).unwrap());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn used_ratio_counts_as_java_used_over_used_and_usable_rounded_up() {
        use super::DiskSpace;
        // The reserve for root (free but not usable) counts as neither used nor usable.
        let reserved = DiskSpace {
            total: 270_553_174_016,
            free: 191_581_171_712,
            usable: 18_600_747_008,
        };
        assert!(
            (reserved.used_ratio() - 0.81).abs() < 1e-9,
            "{}",
            reserved.used_ratio()
        );
        let exact = DiskSpace {
            total: 100,
            free: 50,
            usable: 50,
        };
        assert!((exact.used_ratio() - 0.5).abs() < 1e-9);
        let rounded_up = DiskSpace {
            total: 1000,
            free: 999,
            usable: 999,
        };
        assert!((rounded_up.used_ratio() - 0.01).abs() < 1e-9);
        let empty = DiskSpace {
            total: 0,
            free: 0,
            usable: 0,
        };
        assert!(empty.used_ratio().abs() < f64::EPSILON);
    }

    #[test]
    fn used_ratio_of_the_current_directory_is_a_fraction() {
        let ratio = super::used_ratio(std::path::Path::new(".")).unwrap();
        assert!((0.0..=1.0).contains(&ratio), "{ratio}");
        assert!(super::used_ratio(std::path::Path::new("/no/such/dir")).is_err());
    }
}
