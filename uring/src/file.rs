//! Segment files: fixed-size files written at aligned offsets and synced with fdatasync.
//!
//! [`SegmentFile`] is the seam between the store and the kernel. [`DmaSegment`] is the real
//! one: `O_DIRECT` through glommio's io_uring `DmaFile`, preallocated with `fallocate` so that
//! fdatasync never has metadata to write. `crate::sim::SimSegment` is the twin that simulates
//! crashes, torn writes and failures for tests.
//!
//! Invariant: writes are aligned — offset and length multiples of [`SegmentFile::alignment`] —
//! because direct I/O requires it; callers pad the tail block. A misaligned write is refused
//! before it reaches the kernel.

use crate::IoError;
use glommio::channels::local_channel::LocalReceiver;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};
use std::future::Future;
use std::path::{Path, PathBuf};

/// Bytes written at the start of a new segment so that glommio's polled-I/O probe reaches
/// the device (see [`DmaSegment::open`]).
const PROBE_BLOCK_SIZE: usize = 4096;

/// A fixed-size file written with direct I/O.
pub trait SegmentFile {
    /// Memory the file writes from as it is, with no copy: for direct I/O, aligned memory
    /// (registered with the ring where there is room). The slice is the whole buffer.
    type Buffer: AsRef<[u8]> + AsMut<[u8]> + std::fmt::Debug;

    /// The alignment writes must respect, in bytes.
    fn alignment(&self) -> u64;

    /// A buffer of `len` bytes to fill and hand to [`SegmentFile::write_buffer_at`]; what
    /// it holds at first is unspecified.
    fn alloc_buffer(&self, len: usize) -> Self::Buffer;

    /// Writes the first `len` bytes of `buffer` at `offset`, from the buffer's own memory;
    /// `offset` and `len` must be aligned.
    fn write_buffer_at(
        &self,
        offset: u64,
        buffer: Self::Buffer,
        len: usize,
    ) -> impl Future<Output = Result<(), IoError>>;

    /// Writes `data` at `offset`; both must be aligned. The bytes are copied into a buffer
    /// of the file's first.
    fn write_at(&self, offset: u64, data: &[u8]) -> impl Future<Output = Result<(), IoError>> {
        let mut buffer = self.alloc_buffer(data.len());
        buffer.as_mut().copy_from_slice(data);
        self.write_buffer_at(offset, buffer, data.len())
    }

    /// Reads `len` bytes at `offset` (any alignment); fewer at the end of the file.
    fn read_at(&self, offset: u64, len: usize) -> impl Future<Output = Result<Vec<u8>, IoError>>;

    /// Makes every completed write durable (fdatasync).
    fn sync(&self) -> impl Future<Output = Result<(), IoError>>;

    /// Whether a completed write is already durable (the file is open with `O_DSYNC`), so
    /// that it needs no sync.
    fn writes_are_durable(&self) -> bool {
        false
    }
}

/// Checks the direct-I/O alignment rule.
///
/// # Errors
/// [`IoError::Misaligned`].
pub fn check_aligned(
    op: &'static str,
    offset: u64,
    len: usize,
    alignment: u64,
) -> Result<(), IoError> {
    let len_u64 = u64::try_from(len).unwrap_or(u64::MAX);
    if offset.is_multiple_of(alignment) && len_u64 % alignment == 0 {
        Ok(())
    } else {
        Err(IoError::Misaligned {
            op,
            offset,
            len,
            alignment,
        })
    }
}

/// The writes of a [`DmaSegment`] whose size is not a multiple of the direct-I/O alignment,
/// from the start of its last page on: buffered, at their exact length. A direct write of the
/// last block, padded to the alignment, would make the file longer than its size until it
/// was cut back, and a kill -9 in between would leave it so; the Java broker refuses to load
/// a ConsumeQueue file of any other size than its configured one (6,144 bytes instead of
/// 6,000: "length not matched message store config value"). Whole pages keep the direct
/// writes and the buffered ones off each other's page-cache pages. A direct read of the tail
/// sees what a buffered write left (the kernel writes dirty pages of the range back before
/// a direct read), and fdatasync, on either descriptor, covers both.
#[derive(Debug)]
struct TailWrites {
    file: glommio::io::BufferedFile,
    /// Start of the page holding the file's end; a multiple of the alignment.
    start: u64,
}

impl TailWrites {
    /// The page size, the granule of the page cache.
    const PAGE_SIZE: u64 = 4096;

    /// Opens `path` buffered if `size` is not a multiple of `alignment`.
    async fn open_if_needed(
        path: &Path,
        size: u64,
        alignment: u64,
        dsync: bool,
    ) -> Result<Option<TailWrites>, IoError> {
        if size.is_multiple_of(alignment) {
            return Ok(None);
        }
        let unit = alignment.max(Self::PAGE_SIZE);
        let flags = if dsync {
            i32::try_from(rustix::fs::OFlags::DSYNC.bits()).expect("O_DSYNC fits i32")
        } else {
            0
        };
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(flags)
            .buffered_open(path)
            .await
            .map_err(glommio_error("open buffered", path, 0))?;
        Ok(Some(TailWrites {
            file,
            start: size - size % unit,
        }))
    }

    async fn write_at(&self, bytes: Vec<u8>, offset: u64, path: &Path) -> Result<(), IoError> {
        let len = bytes.len();
        let written = self
            .file
            .write_at(bytes, offset)
            .await
            .map_err(glommio_error("write", path, offset))?;
        if written == len {
            Ok(())
        } else {
            Err(IoError::File {
                op: "write",
                path: path.to_owned(),
                offset,
                source: std::io::Error::new(std::io::ErrorKind::WriteZero, "short write"),
            })
        }
    }
}

/// How [`DmaSegment::open_or_make`] makes a new file.
enum Making {
    /// With its syncs, on a blocking thread ([`create_with_first_block`]).
    Synced,
    /// Without syncs, on the executor; these directories are synced with the file's first
    /// sync ([`DmaSegment::create_unsynced`]).
    Unsynced(Vec<PathBuf>),
}

/// A segment file on disk, `O_DIRECT` through io_uring.
#[derive(Debug)]
pub struct DmaSegment {
    file: DmaFile,
    path: PathBuf,
    size: u64,
    dsync: bool,
    /// For a size that is not a multiple of the alignment (a ConsumeQueue file of 6,000
    /// bytes), the file opened again with buffered I/O, and where its last page starts:
    /// bytes from there on are written through it, at their exact length ([`TailWrites`]).
    tail: Option<TailWrites>,
    /// Directories the next sync also syncs: with them the file's name, and the names of
    /// directories made for it, are durable ([`DmaSegment::create_unsynced`]).
    unsynced_dirs: std::cell::RefCell<Vec<PathBuf>>,
}

impl DmaSegment {
    /// Opens `path`, creating it and preallocating `size` bytes if it is new.
    ///
    /// # Errors
    /// [`IoError::File`] naming the path and the step that failed.
    pub async fn open(path: &Path, size: u64) -> Result<DmaSegment, IoError> {
        Self::open_with(path, size, false).await
    }

    /// [`DmaSegment::open`], with `O_DSYNC` if `dsync`: each write is durable when it
    /// completes (the kernel flushes the device cache after it), with no sync to issue.
    ///
    /// # Errors
    /// [`IoError::File`] naming the path and the step that failed.
    pub async fn open_with(path: &Path, size: u64, dsync: bool) -> Result<DmaSegment, IoError> {
        Self::open_or_make(path, size, dsync, Making::Synced).await
    }

    /// Opens `path` as [`DmaSegment::open`] does, but makes a new file without waiting for a
    /// sync, right here on the executor (a create, a buffered write of the first block and a
    /// rename: no blocking thread, no device-cache flush). Its first [`SegmentFile::sync`]
    /// makes it durable: the file's data, then its directory and `new_dirs` (directories
    /// made for it that are not durable yet, see [`crate::disk::create_dir_all_unsynced`]).
    ///
    /// Until then a power cut may leave the file absent, empty or whole, never short: a
    /// reader of the directory after a crash must take an empty file for one never made.
    ///
    /// # Errors
    /// [`IoError::File`] naming the path and the step that failed.
    pub async fn create_unsynced(
        path: &Path,
        size: u64,
        new_dirs: Vec<PathBuf>,
    ) -> Result<DmaSegment, IoError> {
        // Its directory is synced even for a file that exists: an earlier process may have
        // made it and died before its sync, leaving the name in the page cache only.
        let mut dirs = new_dirs;
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            dirs.push(dir.to_owned());
        }
        Self::open_or_make(path, size, false, Making::Unsynced(dirs)).await
    }

    /// Opens `path`, making it first, as `making` says, if it is absent or short.
    async fn open_or_make(
        path: &Path,
        size: u64,
        dsync: bool,
        making: Making,
    ) -> Result<DmaSegment, IoError> {
        // Give a new file its length and a written first block before glommio opens it:
        // glommio probes whether the device supports polled I/O by reading the first block,
        // and on an empty or sparse file that read succeeds without reaching the device, so
        // it would wrongly enable the poll ring and every later read would fail with
        // EOPNOTSUPP.
        let is_new = std::fs::metadata(path).map_or(true, |meta| meta.len() < size);
        let unsynced_dirs = match making {
            Making::Synced => {
                if is_new {
                    create_off_executor(path, size).await?;
                }
                Vec::new()
            }
            Making::Unsynced(dirs) => {
                if is_new {
                    make_with_first_block(path, size, false)
                        .map_err(IoError::on("create", path))?;
                }
                dirs
            }
        };
        let file = open_read_write(path, dsync).await?;
        if is_new {
            // Allocate every block now so that fdatasync after a write has no metadata to
            // write.
            file.pre_allocate(size, false)
                .await
                .map_err(glommio_error("preallocate", path, 0))?;
        }
        let tail = TailWrites::open_if_needed(path, size, file.alignment(), dsync).await?;
        Ok(DmaSegment {
            file,
            path: path.to_owned(),
            size,
            dsync,
            tail,
            unsynced_dirs: std::cell::RefCell::new(unsynced_dirs),
        })
    }

    /// Opens an existing segment for reading (and writing), never creating one: readers on
    /// any shard use this, so a deleted segment is an error, not a new empty file.
    ///
    /// # Errors
    /// [`IoError::File`], e.g. not found.
    pub async fn open_existing(path: &Path) -> Result<DmaSegment, IoError> {
        let size = std::fs::metadata(path)
            .map_err(IoError::on("stat", path))?
            .len();
        let file = OpenOptions::new()
            .read(true)
            .dma_open(path)
            .await
            .map_err(glommio_error("open", path, 0))?;
        Ok(DmaSegment {
            file,
            path: path.to_owned(),
            size,
            dsync: false,
            tail: None,
            unsynced_dirs: std::cell::RefCell::default(),
        })
    }

    /// Whether the file's name (and those of directories made for it) is durable: false for a
    /// file of [`DmaSegment::create_unsynced`] until its first sync.
    #[must_use]
    pub fn is_durably_named(&self) -> bool {
        self.unsynced_dirs.borrow().is_empty()
    }

    /// The file's size as opened.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, op: &'static str, offset: u64, e: glommio::GlommioError<()>) -> IoError {
        glommio_error(op, &self.path, offset)(e)
    }
}

/// Bytes written per zero-fill write in [`zero_fill`].
const ZERO_FILL_CHUNK_BYTES: usize = 1 << 20;

/// How [`zero_fill`] goes: when to stop, how long to pause after each chunk, when to hold.
#[derive(Debug)]
pub struct ZeroFillPace<'a, H: Fn() -> bool> {
    /// The fill ends when this channel's sender is dropped: at once during a pause or a hold,
    /// after the write in flight otherwise.
    pub stop: &'a LocalReceiver<()>,
    /// Pause after each chunk, so that a writer syncing another file on the same disk keeps
    /// most of it.
    pub pause: std::time::Duration,
    /// While it says so, no chunk is written (the file is made and preallocated first).
    pub hold: H,
    /// How often `hold` is asked again while it holds.
    pub hold_check: std::time::Duration,
}

/// Makes `path` a new file of `size` bytes, preallocated, and writes its blocks with zeros,
/// from the start, one [`ZERO_FILL_CHUNK_BYTES`] chunk at a time as `pace` says, until the
/// file is full or `pace.stop` says to stop; then syncs it. Returns the bytes of zeros
/// written (none if it held throughout: the file is then as a new segment would be).
///
/// Why: a direct write into blocks that `fallocate` reserved but nobody wrote turns their
/// extent from unwritten to written, and the fdatasync after it must then write that
/// metadata and wait for it (a journal commit on a journaled ext4, the inode's block without
/// a journal); into blocks already written, fdatasync is only a flush of the device cache,
/// about half the time on ext4. A file stopped part way is still whole: blocks not
/// written read as zeros.
///
/// # Errors
/// [`IoError::File`] naming the path and the step that failed (e.g. `ENOSPC` preallocating).
pub async fn zero_fill<H: Fn() -> bool>(
    path: &Path,
    size: u64,
    pace: &ZeroFillPace<'_, H>,
) -> Result<u64, IoError> {
    // Made even while the fill holds: whoever takes the file over then finds it made, so
    // its creation (two syncs and a directory sync) is not on that caller's path.
    create_off_executor(path, size).await?;
    let file = open_read_write(path, false).await?;
    let filled = match file.pre_allocate(size, false).await {
        Ok(()) => fill_zeros(&file, path, size, pace).await,
        Err(error) => Err(glommio_error("preallocate", path, 0)(error)),
    };
    let synced = match &filled {
        Ok(_) => file
            .fdatasync()
            .await
            .map_err(glommio_error("fdatasync", path, 0)),
        Err(_) => Ok(()),
    };
    let closed = file.close().await.map_err(glommio_error("close", path, 0));
    let written = filled?;
    synced?;
    closed?;
    Ok(written)
}

async fn fill_zeros<H: Fn() -> bool>(
    file: &DmaFile,
    path: &Path,
    size: u64,
    pace: &ZeroFillPace<'_, H>,
) -> Result<u64, IoError> {
    let chunk = u64::try_from(ZERO_FILL_CHUNK_BYTES).expect("chunk fits u64");
    let mut zeros = file.alloc_dma_buffer(ZERO_FILL_CHUNK_BYTES);
    zeros.as_bytes_mut().fill(0);
    let zeros = std::rc::Rc::new(zeros);
    // Whole aligned chunks only: a last partial block stays as fallocate left it.
    let end = size - size % file.alignment();
    let mut offset = 0u64;
    let mut stopped = false;
    while offset < end && !stopped {
        if (pace.hold)() {
            stopped = pause_or_stop(pace.hold_check, pace.stop).await;
            continue;
        }
        let len = chunk.min(end - offset);
        let written = if len == chunk {
            file.write_rc_at(zeros.clone(), offset).await
        } else {
            let mut last = file.alloc_dma_buffer(usize::try_from(len).expect("below a chunk"));
            last.as_bytes_mut().fill(0);
            file.write_at(last, offset).await
        }
        .map_err(glommio_error("write", path, offset))?;
        if u64::try_from(written).unwrap_or(0) != len {
            let short = std::io::Error::new(std::io::ErrorKind::WriteZero, "short zero-fill");
            return Err(IoError::file("write", path, short));
        }
        offset += len;
        stopped = pause_or_stop(pace.pause, pace.stop).await;
    }
    Ok(offset)
}

/// Sleeps for `duration` unless `stop`'s sender goes first; returns whether it did.
async fn pause_or_stop(duration: std::time::Duration, stop: &LocalReceiver<()>) -> bool {
    let slept = async {
        glommio::timer::sleep(duration).await;
        false
    };
    let stopped = async {
        // Nothing is ever sent: `recv` ends when the sender is dropped.
        let _ = stop.recv().await;
        true
    };
    futures_lite::future::or(stopped, slept).await
}

/// Opens `path` for direct reads and writes.
async fn open_read_write(path: &Path, dsync: bool) -> Result<DmaFile, IoError> {
    let flags = if dsync {
        i32::try_from(rustix::fs::OFlags::DSYNC.bits()).expect("O_DSYNC fits i32")
    } else {
        0
    };
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(flags)
        .dma_open(path)
        .await
        .map_err(glommio_error("open", path, 0))
}

/// Turns a glommio error of `op` at `offset` of `path` into an [`IoError::File`].
fn glommio_error<'a>(
    op: &'static str,
    path: &'a Path,
    offset: u64,
) -> impl FnOnce(glommio::GlommioError<()>) -> IoError + 'a {
    move |e| IoError::File {
        op,
        path: path.to_owned(),
        offset,
        source: e.into(),
    }
}

/// Removes `path` on a thread of its own, while the executor goes on: freeing a big file's
/// blocks takes long (180 ms for a written 1 GiB segment on the development disk, whose ext4
/// is mounted `discard` and discards what it frees; 0.7 ms for one only preallocated), and
/// a retention pass deletes up to ten at a time. Not on the executor's blocking thread
/// either: the writer's next segment is created there, and would wait behind them.
///
/// # Errors
/// [`IoError::File`] naming the path (also if the thread cannot be started).
pub async fn remove_file_off_executor(path: &Path) -> Result<(), IoError> {
    let (done, removed) = futures::channel::oneshot::channel();
    let owned = path.to_owned();
    std::thread::Builder::new()
        .name("ferromq-delete".to_owned())
        .spawn(move || {
            let _ = done.send(std::fs::remove_file(owned));
        })
        .map_err(IoError::on("delete", path))?;
    let result = removed.await.unwrap_or_else(|_canceled| {
        Err(std::io::Error::other(
            "the deleting thread ended without an answer",
        ))
    });
    result.map_err(IoError::on("delete", path))
}

/// Deletes directory `dir` and everything in it, on a thread of its own (as
/// [`remove_file_off_executor`]); waits for it.
///
/// # Errors
/// [`IoError::File`] naming the directory (also if the thread cannot be started).
pub async fn remove_dir_all_off_executor(dir: &Path) -> Result<(), IoError> {
    let (done, removed) = futures::channel::oneshot::channel();
    let owned = dir.to_owned();
    std::thread::Builder::new()
        .name("ferromq-delete".to_owned())
        .spawn(move || {
            let _ = done.send(std::fs::remove_dir_all(owned));
        })
        .map_err(IoError::on("delete directory", dir))?;
    let result = removed.await.unwrap_or_else(|_canceled| {
        Err(std::io::Error::other(
            "the deleting thread ended without an answer",
        ))
    });
    result.map_err(IoError::on("delete directory", dir))
}

/// Syncs directory `dir` on the executor's blocking thread, so that the names of files made
/// in it survive a power cut. Starts when first polled. Call from inside a glommio executor.
///
/// # Errors
/// [`IoError::File`].
pub fn sync_dir_off_executor(dir: &Path) -> impl Future<Output = Result<(), IoError>> {
    let owned = dir.to_owned();
    async move {
        let path = owned.clone();
        glommio::executor()
            .spawn_blocking(move || std::fs::File::open(&path)?.sync_all())
            .await
            .map_err(IoError::on("sync directory", &owned))
    }
}

/// [`create_with_first_block`] on the executor's blocking thread, while the executor goes
/// on: its two syncs (the file's, then the directory's) each wait for a device-cache flush,
/// and on the writer's shard that wait stopped every put and every write completion for
/// about a millisecond at each segment roll.
async fn create_off_executor(path: &Path, size: u64) -> Result<(), IoError> {
    let owned = path.to_owned();
    glommio::executor()
        .spawn_blocking(move || create_with_first_block(&owned, size))
        .await
        .map_err(IoError::on("create", path))
}

/// Makes `path` a file of length `size` whose first block is written and synced, so that
/// glommio's poll probe on open reaches the device (see [`DmaSegment::open`]). For anything
/// else that opens a new file with direct I/O, like the benchmark's raw baseline.
///
/// A new (or empty) file is built without a name (`O_TMPFILE` in its directory), then linked
/// under `path` whole, then the directory is synced: a crash at any point leaves either no
/// file or a whole one, never a short segment that recovery would refuse, and the directory
/// never holds any other name, even for an instant. That matters to a Java broker taking the
/// store over: it loads every file of a CommitLog or ConsumeQueue directory as a segment and
/// refuses to start on a name that is not an offset (`NumberFormatException` on
/// `<segment>.tmp`, left by a kill -9 in the middle of a build under a temporary name). Where
/// the filesystem has no `O_TMPFILE` (or `/proc` is missing to link it), the file is built
/// under `<path>.tmp` and renamed. An existing shorter file is only extended.
///
/// # Errors
/// The I/O error.
pub fn create_with_first_block(path: &Path, size: u64) -> std::io::Result<()> {
    make_with_first_block(path, size, true)
}

/// [`create_with_first_block`], with its syncs only if `sync`.
fn make_with_first_block(path: &Path, size: u64, sync: bool) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    if std::fs::metadata(path).is_ok_and(|meta| meta.len() > 0) {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        file.set_len(size)?;
        return if sync { file.sync_all() } else { Ok(()) };
    }
    let fill = |file: &std::fs::File| -> std::io::Result<()> {
        file.set_len(size)?;
        let first = usize::try_from(size).map_or(PROBE_BLOCK_SIZE, |s| s.min(PROBE_BLOCK_SIZE));
        file.write_all_at(&vec![0; first], 0)?;
        if sync {
            file.sync_all()?;
        }
        Ok(())
    };
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !make_unnamed_then_link(dir, path, fill)? {
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&temporary)?;
        fill(&file)?;
        std::fs::rename(&temporary, path)?;
    }
    if sync {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Builds a file with no name in `dir` (`O_TMPFILE`), runs `fill` on it and links it as
/// `path`. `Ok(false)`, with nothing made, where the filesystem or the system cannot.
fn make_unnamed_then_link(
    dir: &Path,
    path: &Path,
    fill: impl FnOnce(&std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<bool> {
    use rustix::fs::{linkat, AtFlags, CWD};
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let unsupported = |error: &std::io::Error| {
        // Kernels and filesystems without O_TMPFILE answer EOPNOTSUPP, or EISDIR when they
        // take it for O_DIRECTORY; EINVAL for a flag combination they refuse.
        matches!(
            error.raw_os_error(),
            Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
        )
    };
    let file = match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
    {
        Ok(file) => file,
        Err(error) if unsupported(&error) => return Ok(false),
        Err(error) => return Err(error),
    };
    fill(&file)?;
    // An empty file under the name is one a crash left before its first sync: never made.
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    // Through /proc (no privilege needed), else by descriptor (CAP_DAC_READ_SEARCH).
    let by_proc = format!("/proc/self/fd/{}", file.as_raw_fd());
    let linked = linkat(CWD, by_proc.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW)
        .or_else(|_| linkat(&file, "", CWD, path, AtFlags::EMPTY_PATH));
    match linked {
        Ok(()) => Ok(true),
        Err(error) if error == rustix::io::Errno::EXIST => Err(error.into()),
        // Neither works here: the caller builds the file under a temporary name instead.
        Err(_) => Ok(false),
    }
}

impl SegmentFile for DmaSegment {
    type Buffer = DmaBuffer;

    fn alignment(&self) -> u64 {
        self.file.alignment()
    }

    fn alloc_buffer(&self, len: usize) -> DmaBuffer {
        self.file.alloc_dma_buffer(len)
    }

    async fn write_buffer_at(
        &self,
        offset: u64,
        mut buffer: DmaBuffer,
        len: usize,
    ) -> Result<(), IoError> {
        check_aligned("write", offset, len, self.alignment())?;
        assert!(len <= buffer.len(), "a write stays within its buffer");
        let end = offset + u64::try_from(len).unwrap_or(u64::MAX);
        let len = match &self.tail {
            Some(tail) if end > tail.start => {
                // The part in the last page goes through the page cache, cut at the file's
                // size; the part before it, if any, is written direct.
                let from = offset.max(tail.start);
                let to = end.min(self.size);
                if to > from {
                    let skip = usize::try_from(from - offset).unwrap_or(usize::MAX);
                    let count = usize::try_from(to - from).unwrap_or(usize::MAX);
                    let bytes = buffer.as_ref()[skip..skip + count].to_vec();
                    tail.write_at(bytes, from, &self.path).await?;
                }
                usize::try_from(tail.start.saturating_sub(offset)).unwrap_or(0)
            }
            _ => len,
        };
        if len == 0 {
            return Ok(());
        }
        buffer.trim_to_size(len);
        let written = self
            .file
            .write_at(buffer, offset)
            .await
            .map_err(|e| self.error("write", offset, e))?;
        if written != len {
            let short = std::io::Error::new(std::io::ErrorKind::WriteZero, "short direct write");
            return Err(IoError::File {
                op: "write",
                path: self.path.clone(),
                offset,
                source: short,
            });
        }
        Ok(())
    }

    async fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, IoError> {
        let read = self
            .file
            .read_at(offset, len)
            .await
            .map_err(|e| self.error("read", offset, e))?;
        Ok(read.to_vec())
    }

    fn writes_are_durable(&self) -> bool {
        self.dsync
    }

    async fn sync(&self) -> Result<(), IoError> {
        self.file
            .fdatasync()
            .await
            .map_err(|e| self.error("fdatasync", 0, e))?;
        let dirs = self.unsynced_dirs.take();
        if dirs.is_empty() {
            return Ok(());
        }
        glommio::executor()
            .spawn_blocking(move || {
                for dir in &dirs {
                    std::fs::File::open(dir)
                        .and_then(|dir| dir.sync_all())
                        .map_err(|source| IoError::file("sync directory", dir, source))?;
                }
                Ok(())
            })
            .await
    }
}

/// A CommitLog segment written into the page cache through a shared mapping of the file, as
/// Java's `MappedFile` writes: a write is a copy into the mapping, done when the call
/// returns, after which a crash of the process loses nothing (the kernel owns the pages) and
/// a power cut loses what no sync has covered yet. Syncs are fdatasyncs of the file, which
/// write back the pages dirtied through the mapping too.
///
/// The file is made, preallocated and opened exactly as a [`DmaSegment`] (which it keeps for
/// its syncs and its aligned buffers), so the directory invariants hold the same; only the
/// writes take another way. A segment of any size is written at its exact length: a padded
/// tail block is cut at the size.
///
/// Readers of such a segment must read through the page cache ([`PageCacheFile`]): a direct
/// read of a range holding dirty pages makes the kernel write them back first, and a
/// consumer reading the tail would wait for the device on every pull.
///
/// A write that touches a page not yet in memory takes a page fault on the calling thread
/// (a fresh page of a preallocated file: no device read, zeros). Java's writer pays the same.
#[derive(Debug)]
pub struct MappedSegment {
    direct: DmaSegment,
    map: std::cell::RefCell<memmap2::MmapMut>,
}

impl MappedSegment {
    /// Opens `path`, making and preallocating it first as [`DmaSegment::open`] does, and
    /// maps its `size` bytes shared.
    ///
    /// # Errors
    /// [`IoError::File`] naming the path and the step that failed.
    pub async fn open(path: &Path, size: u64) -> Result<MappedSegment, IoError> {
        Self::map(DmaSegment::open(path, size).await?)
    }

    /// Maps a segment made and opened as a [`DmaSegment`] (for instance by
    /// [`DmaSegment::create_unsynced`], whose first sync then syncs its directories too).
    ///
    /// # Errors
    /// [`IoError::File`] if the mapping fails.
    pub fn map(direct: DmaSegment) -> Result<MappedSegment, IoError> {
        use std::os::fd::AsRawFd;
        let size = direct.size();
        let path = direct.path().to_owned();
        let path = path.as_path();
        let len = usize::try_from(size).map_err(|_| {
            IoError::file(
                "mmap",
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "segment too big to map"),
            )
        })?;
        // The mapping is sound while no one truncates the file or writes it elsewhere: it
        // was preallocated to `size` bytes, the store owns its directory (the `lock` file
        // keeps a second broker out) and never truncates a segment, and only this value's
        // owner writes into it. Readers pread through the same, coherent, page cache.
        // SAFETY: see above; the fd is open for as long as `direct`, which lives beside it.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .len(len)
                .map_mut(direct.file.as_raw_fd())
        }
        .map_err(IoError::on("mmap", path))?;
        Ok(MappedSegment {
            direct,
            map: std::cell::RefCell::new(map),
        })
    }

    /// The file's size as opened.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.direct.size()
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.direct.path()
    }

    /// Copies `data` into the mapping at `offset`, cut at the file's size.
    fn copy_in(&self, offset: u64, data: &[u8]) -> Result<(), IoError> {
        let size = self.size();
        let end = offset.saturating_add(u64::try_from(data.len()).unwrap_or(u64::MAX));
        if offset > size {
            return Err(IoError::file(
                "write",
                self.path(),
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "write past the segment"),
            ));
        }
        let kept = usize::try_from(end.min(size) - offset).unwrap_or(0);
        let at = usize::try_from(offset).unwrap_or(usize::MAX);
        self.map.borrow_mut()[at..at + kept].copy_from_slice(&data[..kept]);
        Ok(())
    }
}

impl SegmentFile for MappedSegment {
    type Buffer = DmaBuffer;

    fn alignment(&self) -> u64 {
        self.direct.alignment()
    }

    fn alloc_buffer(&self, len: usize) -> DmaBuffer {
        self.direct.alloc_buffer(len)
    }

    fn write_buffer_at(
        &self,
        offset: u64,
        buffer: DmaBuffer,
        len: usize,
    ) -> impl Future<Output = Result<(), IoError>> {
        // The copy happens here, at the call, so writes land in the order they are made.
        let done = check_aligned("write", offset, len, self.alignment()).and_then(|()| {
            let data = buffer.as_ref().get(..len).ok_or_else(|| {
                IoError::file(
                    "write",
                    self.path(),
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, "write past its buffer"),
                )
            })?;
            self.copy_in(offset, data)
        });
        std::future::ready(done)
    }

    async fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, IoError> {
        let map = self.map.borrow();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(map.len());
        let end = start.saturating_add(len).min(map.len());
        Ok(map[start..end].to_vec())
    }

    async fn sync(&self) -> Result<(), IoError> {
        self.direct.sync().await
    }
}

/// A segment read through the page cache (buffered reads on io_uring): for a file another
/// shard writes through a mapping ([`MappedSegment`]); recent data is read from memory.
#[derive(Debug)]
pub struct PageCacheFile {
    file: glommio::io::BufferedFile,
    path: PathBuf,
}

impl PageCacheFile {
    /// Opens an existing file for reading, never creating one.
    ///
    /// # Errors
    /// [`IoError::File`], e.g. not found.
    pub async fn open_existing(path: &Path) -> Result<PageCacheFile, IoError> {
        let file = OpenOptions::new()
            .read(true)
            .buffered_open(path)
            .await
            .map_err(glommio_error("open buffered", path, 0))?;
        Ok(PageCacheFile {
            file,
            path: path.to_owned(),
        })
    }

    /// Reads `len` bytes at `offset`; fewer at the end of the file.
    ///
    /// # Errors
    /// [`IoError::File`].
    pub async fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, IoError> {
        let read = self
            .file
            .read_at(offset, len)
            .await
            .map_err(glommio_error("read", &self.path, offset))?;
        Ok(read.to_vec())
    }
}
