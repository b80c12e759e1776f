//! Segment naming and placement: fixed-size files named by the 20-digit offset of their first
//! byte (the `MappedFileQueue` role in Java, `reference/store-format.md` §2).
//!
//! A CommitLog of 1 GiB segments holds offset `o` in the file named
//! `format!("{:020}", o - o % size)` at position `o % size`. A [`SegmentOpener`] opens a
//! segment by its start offset: [`DmaDirectory`] and [`QueueDirectory`] are the real ones.

use ferromq_uring::file::SegmentFile;
use ferromq_uring::IoError;
use std::future::Future;

/// The file name of the segment starting at `start`.
#[doc(alias = "MappedFile")]
#[must_use]
pub fn segment_name(start: u64) -> String {
    format!("{start:020}")
}

/// The start offset a segment file name encodes, if it is one.
#[must_use]
pub fn parse_segment_name(name: &str) -> Option<u64> {
    (name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit()))
        .then(|| name.parse().ok())
        .flatten()
}

/// Deletes the `<segment>.tmp` files of `dir`: segments whose making a crash cut short, left
/// where the filesystem has no `O_TMPFILE` (see `ferromq_uring::file::create_with_first_block`)
/// or by an older ferromq. Nothing reads them, and a Java broker refuses to load a CommitLog
/// or ConsumeQueue directory that holds one (it takes every file there for a segment).
/// Returns the files deleted.
///
/// # Errors
/// The I/O error of listing `dir` or deleting a file.
pub fn remove_unfinished_segments(
    dir: &std::path::Path,
) -> Result<Vec<std::path::PathBuf>, ferromq_uring::IoError> {
    let list = || ferromq_uring::IoError::on("list", dir);
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(list())? {
        let entry = entry.map_err(list())?;
        let name = entry.file_name();
        let unfinished = name
            .to_str()
            .and_then(|name| name.strip_suffix(".tmp"))
            .and_then(parse_segment_name)
            .is_some();
        if unfinished {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(ferromq_uring::IoError::on("delete", &path))?;
            removed.push(path);
        }
    }
    Ok(removed)
}

/// Start of the segment holding `offset`.
#[must_use]
pub fn segment_start(offset: u64, segment_size: u64) -> u64 {
    offset - offset % segment_size
}

/// Opens segment files by start offset (a directory of segments).
pub trait SegmentOpener {
    /// The file type.
    type File: SegmentFile + std::fmt::Debug + 'static;
    /// Opens (creating if needed) the segment starting at `start`, `size` bytes long.
    fn open(&self, start: u64, size: u64) -> impl Future<Output = Result<Self::File, IoError>>;

    /// The writer starts a job of `bytes`: a hint of the load for whoever prepares segments
    /// ahead of it.
    fn writing(&self, _bytes: u64) {}

    /// Deletes the segment starting at `start`, which holds nothing: a slave's empty log
    /// that starts where its master's last segment does instead. Openers whose files are
    /// not named by offset (tests) need not do anything.
    fn discard(&self, _start: u64) -> impl Future<Output = Result<(), IoError>> {
        std::future::ready(Ok(()))
    }
}

/// A directory of direct-I/O segment files named by [`segment_name`].
#[derive(Clone, Debug)]
pub struct DmaDirectory {
    /// The directory (e.g. `<storePathRootDir>/commitlog`).
    pub dir: std::path::PathBuf,
}

impl SegmentOpener for DmaDirectory {
    type File = ferromq_uring::file::DmaSegment;

    async fn open(
        &self,
        start: u64,
        size: u64,
    ) -> Result<ferromq_uring::file::DmaSegment, ferromq_uring::IoError> {
        ferromq_uring::file::DmaSegment::open(&self.dir.join(segment_name(start)), size).await
    }
}

/// The directory of one queue's ConsumeQueue files, which dispatch makes without waiting for
/// a sync ([`ferromq_uring::file::DmaSegment::create_unsynced`]): a queue's first message,
/// and the first after each roll, would otherwise wait for two device-cache flushes. The
/// periodic flush syncs every file written before the checkpoint moves, and a new file's
/// first sync also syncs its directory and the directories made for the queue, so the
/// checkpoint never covers a unit a power cut could take away.
#[derive(Debug)]
pub struct QueueDirectory {
    dir: std::path::PathBuf,
    /// Parents of the directories made for this queue, for the next file's first sync.
    new_dirs: std::cell::RefCell<Vec<std::path::PathBuf>>,
}

impl QueueDirectory {
    /// Makes `dir` and its missing ancestors (syncing nothing) for a queue's files.
    ///
    /// # Errors
    /// The I/O error of making a directory.
    pub fn make(dir: std::path::PathBuf) -> Result<QueueDirectory, ferromq_uring::IoError> {
        let new_dirs = ferromq_uring::disk::create_dir_all_unsynced(&dir)
            .map_err(ferromq_uring::IoError::on("create directory", &dir))?;
        Ok(QueueDirectory {
            dir,
            new_dirs: std::cell::RefCell::new(new_dirs),
        })
    }
}

/// A queue's files are written into the page cache through a mapping, as Java's: every
/// pull reads units just dispatched, and reads them from memory instead of the device
/// (`StoreReader` reads them through the page cache).
impl SegmentOpener for QueueDirectory {
    type File = ferromq_uring::file::MappedSegment;

    async fn open(
        &self,
        start: u64,
        size: u64,
    ) -> Result<ferromq_uring::file::MappedSegment, ferromq_uring::IoError> {
        let path = self.dir.join(segment_name(start));
        let made =
            ferromq_uring::file::DmaSegment::create_unsynced(&path, size, self.new_dirs.take())
                .await?;
        ferromq_uring::file::MappedSegment::map(made)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unfinished_segments_are_removed_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("unfinished-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let names = [
            "00000000000001048576.tmp",
            "00000000000001048576",
            "topics.json.tmp",
            "1048576.tmp",
        ];
        for name in names {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        let removed = remove_unfinished_segments(&dir).unwrap();
        assert_eq!(removed, [dir.join(names[0])]);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["00000000000001048576", "1048576.tmp", "topics.json.tmp"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_are_20_digit_start_offsets() {
        assert_eq!(segment_name(1_048_576), "00000000000001048576");
        assert_eq!(parse_segment_name("00000000000001048576"), Some(1_048_576));
        assert_eq!(parse_segment_name("1048576"), None);
        assert_eq!(parse_segment_name("0000000000000104857x"), None);
        assert_eq!(segment_start(2_097_151, 1_048_576), 1_048_576);
    }
}
