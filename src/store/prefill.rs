//! The CommitLog's segment directory with the next segment made ready ahead of the writer
//! (the `AllocateMappedFileService` role in Java, with `warmMapedFileEnable` on under
//! SYNC_FLUSH).
//!
//! Under SYNC_FLUSH, while the writer fills segment `n`, a background task on the writer's
//! shard builds segment `n + 1` in `<commitlog>.prefill/` and writes it with zeros
//! ([`zero_fill`]): into blocks already written, the writer's fdatasync is a device-cache
//! flush only, instead of a synchronous metadata write for the extents its write converted
//! first (a journal commit on a journaled ext4; on the development VM, whose ext4 has no
//! journal, a write of the inode's block, seen as `WSM` in `block:block_rq_issue`). On the
//! development disk (ext4 on virtio) a 64 KiB write + fdatasync takes 143 µs into written
//! blocks against 312 µs into fresh ones.
//!
//! The fill is free only while the disk has bandwidth to spare: when the writer moves big
//! jobs (over [`BIG_JOB_BYTES`], a bandwidth-bound load), zeros would halve what it gets, and
//! the metadata write each sync pays is small next to its write. So the fill holds while big
//! jobs have been seen in the last [`HOLD_AFTER_BIG_JOB`], and resumes when the load turns
//! latency-bound again; the segment is then only partly filled, which is still correct. The
//! file itself is made at once, holding or not (created, first block written and synced,
//! preallocated): at the roll the writer only moves it into place, instead of making the
//! segment on its own path (a create, two syncs, a directory sync and a preallocation,
//! against a rename and a directory sync). Stopping it waits at most for that making, or
//! for the one zero write in flight.
//!
//! Under SYNC_FLUSH the segments are also opened with `O_DSYNC`: a write is durable when it
//! completes, the kernel flushing the device cache right after it, so a write job is one
//! io_uring operation instead of a write, a wake-up of the writer and an fdatasync. Measured
//! with 64 one-at-a-time producers of 1 KiB: 15–24% more puts/s, p50 −15%; neutral with 16
//! puts in flight per producer.
//!
//! When the writer rolls, it stops the fill where it is (a partly filled file is still a
//! correct segment: what was not written reads as zeros), moves the file into the CommitLog
//! directory (rename, then a sync of the directory) and opens it. The task then starts on the
//! segment after.
//!
//! Invariants:
//! - the CommitLog directory only ever holds segments the writer reached, so recovery,
//!   retention ("never the newest") and a Java broker taking the store back see what they
//!   would without the fill; the fill directory is a sibling, on the same filesystem;
//! - at most one fill runs, always for the segment after the writer's; a file left in the
//!   fill directory by a crash is replaced, never trusted for its content;
//! - a failed fill (no space, a move across filesystems) only costs speed: the writer then
//!   creates the segment itself, as without the fill.

use super::config::FlushDiskType;
use super::segment::{segment_name, SegmentOpener};
use ferromq_uring::file::{zero_fill, DmaSegment, MappedSegment, SegmentFile, ZeroFillPace};
use ferromq_uring::IoError;
use futures::future::Either;
use glommio::channels::local_channel::{self, LocalSender};
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Pause after each 1 MiB zero-fill write, so that the fill takes at most about 0.6 GB/s of
/// the disk and the writer's syncs are not queued behind it. Measured on the development disk:
/// with no pause a 64 KiB write + fdatasync beside the fill takes 339 µs, with 1 ms 160 µs.
const FILL_PAUSE: Duration = Duration::from_millis(1);

/// A write job at least this big means the load is bandwidth-bound: the fill holds.
pub const BIG_JOB_BYTES: u64 = 256 << 10;

/// How long after the last big job the fill holds.
const HOLD_AFTER_BIG_JOB: Duration = Duration::from_millis(50);

/// The CommitLog's segments, the next one prefilled in the background.
#[doc(alias = "AllocateMappedFileService")]
#[derive(Debug)]
pub struct CommitLogDirectory {
    dir: PathBuf,
    fill_dir: PathBuf,
    options: SegmentOptions,
    fill: RefCell<Option<Fill>>,
    /// When the writer last started a job of [`BIG_JOB_BYTES`] or more.
    last_big_job: Rc<Cell<Option<Instant>>>,
}

/// How the CommitLog's segments are prepared and opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentOptions {
    /// Make the next segment ahead of the writer in `<dir>.prefill` (created, preallocated,
    /// synced), so that a roll only moves it into place; without, segments are created when
    /// the writer reaches them, on its path.
    pub prefill: bool,
    /// Also write the segment made ahead with zeros (see the module docs), pausing while
    /// the writer moves big jobs.
    pub zero_fill: bool,
    /// Open segments with `O_DSYNC`: writes are durable when they complete.
    pub dsync: bool,
    /// Write into the page cache through a shared mapping ([`MappedSegment`]) instead of
    /// with direct I/O: a write is done when it is in memory the kernel owns, which is what
    /// ASYNC_FLUSH promises (a crash of the process loses nothing).
    pub page_cache: bool,
}

impl SegmentOptions {
    /// What the broker does: the next segment made ahead in every mode (a roll that makes
    /// its segment holds up every put behind it), filled with zeros and opened `O_DSYNC`
    /// under SYNC_FLUSH, where every put waits for durability; under ASYNC_FLUSH neither
    /// (zeros would only compete with the writes) and writes into the page cache, so that
    /// no put waits for the device.
    #[must_use]
    pub fn for_flush(flush: FlushDiskType) -> SegmentOptions {
        let sync = flush == FlushDiskType::SyncFlush;
        SegmentOptions {
            prefill: true,
            zero_fill: sync,
            dsync: sync,
            page_cache: !sync,
        }
    }

    /// What a store with `config` opens: [`SegmentOptions::for_flush`], with the page cache
    /// as `commitLogPageCacheWrites` says (`StoreConfig::commit_log_in_page_cache`, which the
    /// readers follow too).
    #[must_use]
    pub fn for_store(config: &crate::store::config::StoreConfig) -> SegmentOptions {
        SegmentOptions {
            page_cache: config.commit_log_in_page_cache(),
            ..SegmentOptions::for_flush(config.flush_disk_type)
        }
    }
}

/// A CommitLog segment as [`SegmentOptions`] opened it: written with direct I/O, or into the
/// page cache through a mapping.
#[derive(Debug)]
pub enum CommitLogSegment {
    /// `O_DIRECT` writes (`O_DSYNC` under SYNC_FLUSH).
    Direct(DmaSegment),
    /// Copies into a shared mapping of the file.
    Mapped(MappedSegment),
}

impl SegmentFile for CommitLogSegment {
    type Buffer = glommio::io::DmaBuffer;

    fn alignment(&self) -> u64 {
        match self {
            CommitLogSegment::Direct(file) => file.alignment(),
            CommitLogSegment::Mapped(file) => file.alignment(),
        }
    }

    fn alloc_buffer(&self, len: usize) -> Self::Buffer {
        match self {
            CommitLogSegment::Direct(file) => file.alloc_buffer(len),
            CommitLogSegment::Mapped(file) => file.alloc_buffer(len),
        }
    }

    fn write_buffer_at(
        &self,
        offset: u64,
        buffer: Self::Buffer,
        len: usize,
    ) -> impl std::future::Future<Output = Result<(), IoError>> {
        // Called now, not when polled: a mapped write is made at the call.
        match self {
            CommitLogSegment::Direct(file) => {
                Either::Left(file.write_buffer_at(offset, buffer, len))
            }
            CommitLogSegment::Mapped(file) => {
                Either::Right(file.write_buffer_at(offset, buffer, len))
            }
        }
    }

    async fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, IoError> {
        match self {
            CommitLogSegment::Direct(file) => file.read_at(offset, len).await,
            CommitLogSegment::Mapped(file) => file.read_at(offset, len).await,
        }
    }

    async fn sync(&self) -> Result<(), IoError> {
        match self {
            CommitLogSegment::Direct(file) => file.sync().await,
            CommitLogSegment::Mapped(file) => file.sync().await,
        }
    }

    fn writes_are_durable(&self) -> bool {
        match self {
            CommitLogSegment::Direct(file) => file.writes_are_durable(),
            CommitLogSegment::Mapped(file) => file.writes_are_durable(),
        }
    }
}

/// The fill in progress; dropping `stop` ends it.
struct Fill {
    start: u64,
    stop: LocalSender<()>,
    task: glommio::task::JoinHandle<Result<u64, IoError>>,
}

impl std::fmt::Debug for Fill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fill")
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

impl CommitLogDirectory {
    /// The segments of `dir`, opened as `options` say.
    #[must_use]
    pub fn new(dir: PathBuf, options: SegmentOptions) -> CommitLogDirectory {
        let fill_dir = fill_dir_of(&dir);
        CommitLogDirectory {
            dir,
            fill_dir,
            options,
            fill: RefCell::new(None),
            last_big_job: Rc::new(Cell::new(None)),
        }
    }

    /// Stops the fill in progress, if any, and waits for it; returns the start of the segment
    /// it was filling if it left a usable file.
    async fn stop_fill(&self) -> Option<u64> {
        let Fill { start, stop, task } = self.fill.borrow_mut().take()?;
        drop(stop);
        match task.await {
            Some(Ok(filled)) => {
                tracing::debug!(start, filled, "prefill stopped");
                Some(start)
            }
            Some(Err(error)) => {
                tracing::warn!(%error, start, "prefilling a CommitLog segment failed");
                None
            }
            None => None,
        }
    }

    /// Moves the filled segment starting at `start` into the CommitLog directory, unless a
    /// segment is already there. A failure leaves the writer to create the segment itself.
    /// The rename and the directory's sync run on the executor's blocking thread: the sync
    /// waits for a device-cache flush, which would stop the writer's shard meanwhile.
    async fn adopt(&self, start: u64, size: u64) {
        let name = segment_name(start);
        let target = self.dir.join(&name);
        let filled = self.fill_dir.join(&name);
        let dir = self.dir.clone();
        let moved = glommio::executor()
            .spawn_blocking(move || {
                if target.exists() || !std::fs::metadata(&filled).is_ok_and(|m| m.len() == size) {
                    return Ok(());
                }
                std::fs::rename(&filled, &target)
                    .and_then(|()| std::fs::File::open(&dir)?.sync_all())
                    .map_err(|error| (error, target))
            })
            .await;
        if let Err((error, target)) = moved {
            tracing::warn!(
                %error,
                segment = %target.display(),
                "could not move a prefilled segment into place"
            );
        }
    }

    /// Starts filling the segment at `start`, after removing whatever an earlier run left in
    /// the fill directory.
    fn start_fill(&self, start: u64, size: u64) {
        if let Err(error) = reset_dir(&self.fill_dir) {
            tracing::warn!(
                %error,
                dir = %self.fill_dir.display(),
                "not prefilling CommitLog segments"
            );
            return;
        }
        let path = self.fill_dir.join(segment_name(start));
        let (stop, stopped) = local_channel::new_bounded(1);
        let last_big_job = Rc::clone(&self.last_big_job);
        let zeros = self.options.zero_fill;
        // Without zeros the fill holds throughout: the file is only made.
        let hold = move || {
            !zeros
                || last_big_job
                    .get()
                    .is_some_and(|at| at.elapsed() < HOLD_AFTER_BIG_JOB)
        };
        let task = glommio::spawn_local({
            async move {
                let pace = ZeroFillPace {
                    stop: &stopped,
                    pause: FILL_PAUSE,
                    hold_check: HOLD_AFTER_BIG_JOB,
                    hold,
                };
                zero_fill(&path, size, &pace).await
            }
        })
        .detach();
        *self.fill.borrow_mut() = Some(Fill { start, stop, task });
    }
}

impl SegmentOpener for CommitLogDirectory {
    type File = CommitLogSegment;

    async fn open(&self, start: u64, size: u64) -> Result<CommitLogSegment, IoError> {
        if self.stop_fill().await == Some(start) {
            self.adopt(start, size).await;
        }
        let path = self.dir.join(segment_name(start));
        let segment = if self.options.page_cache {
            CommitLogSegment::Mapped(MappedSegment::open(&path, size).await?)
        } else {
            CommitLogSegment::Direct(DmaSegment::open_with(&path, size, self.options.dsync).await?)
        };
        if self.options.prefill {
            self.start_fill(start + size, size);
        }
        Ok(segment)
    }

    fn writing(&self, bytes: u64) {
        if bytes >= BIG_JOB_BYTES {
            self.last_big_job.set(Some(Instant::now()));
        }
    }

    async fn discard(&self, start: u64) -> Result<(), IoError> {
        let path = self.dir.join(segment_name(start));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(IoError::file("delete", &path, error)),
        }
        ferromq_uring::file::sync_dir_off_executor(&self.dir).await
    }
}

/// `<dir>.prefill`, beside the CommitLog directory.
#[must_use]
pub fn fill_dir_of(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push(".prefill");
    PathBuf::from(name)
}

/// Creates `dir` if needed and removes every file in it.
fn reset_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir(dir)? {
        std::fs::remove_file(entry?.path())?;
    }
    Ok(())
}
