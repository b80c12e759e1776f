//! Mapped windows of the CommitLog that pull answers point at, instead of copies.
//!
//! A reader maps the CommitLog in windows of [`WINDOW_SIZE`] bytes that start every
//! [`CHUNK_SIZE`] bytes of a segment, so that any span of up to `CHUNK_SIZE` bytes lies whole
//! in the window of the chunk it starts in. A window is shared and read-only: its pages are
//! the page cache's, the very pages the writer copied the records into (ASYNC_FLUSH with
//! `commitLogPageCacheWrites`), so a pull of recent data reads the writer's memory, and the
//! answer's body is slices of the window ([`Bytes`], reference-counted), written to the
//! socket by a gathering send. A window is unmapped when the reader has let go of it and the
//! last answer that points into it has been sent.
//!
//! Rules:
//! - Budget: every mapped window counts against `pullMappedMemoryMax`, on all shards at
//!   once, answers in flight included ([`StoreShared::mapped_bytes`]). Each reader keeps at
//!   most its share (the budget over the readers alive), letting go of its oldest windows
//!   first, and lets go of a window it has not used for [`WINDOW_IDLE`]; when the budget is
//!   spent all the same (answers in flight) the pull reads into a buffer instead.
//! - No executor waits for the device: a span whose pages are not all in the page cache
//!   (older data, after a restart) is read in on the blocking thread first (`readahead(2)`,
//!   with [`READ_AHEAD`] more for a consumer catching up).
//! - A window the writer may still write with direct I/O (SYNC_FLUSH, or
//!   `commitLogPageCacheWrites=false`) is not mapped until the committed end has passed it:
//!   pages cached under a direct write would have to be invalidated by the kernel, which
//!   cannot promise it for mapped pages.

use super::segment::{segment_name, segment_start};
use super::shared::StoreShared;
use bytes::Bytes;
use ferromq_uring::mapped::ReadWindow;
use ferromq_uring::IoError;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Step between window starts in a segment.
pub const CHUNK_SIZE: u64 = 4 << 20;
/// Length of a window: a chunk and the largest span that may start at its end.
pub const WINDOW_SIZE: u64 = 2 * CHUNK_SIZE;
/// The writer's direct-write block: a job starts at the block the committed end is in.
const DIRECT_BLOCK: u64 = 4096;
/// A window a reader has not used for this long is let go.
pub const WINDOW_IDLE: Duration = Duration::from_secs(2);
/// Bytes read in past a span that was not in the page cache.
pub const READ_AHEAD: usize = 4 << 20;

/// A mapped window and the budget it holds.
struct Window {
    map: ReadWindow,
    shared: Arc<StoreShared>,
    reserved: u64,
}

impl Drop for Window {
    fn drop(&mut self) {
        self.shared.release_mapped(self.reserved);
    }
}

/// One shard's mapped windows, by the CommitLog offset they start at.
pub struct ChunkCache {
    shared: Arc<StoreShared>,
    windows: RefCell<BTreeMap<u64, Entry>>,
    /// Bytes of the windows in `windows`.
    held: Cell<u64>,
    /// When idle windows were last let go.
    swept: Cell<Instant>,
}

/// A window as the cache keeps it: the mapping (to ask about residency) and all of its
/// bytes (answers hold slices); the budget goes back when both are dropped.
#[derive(Clone)]
struct Entry {
    window: Arc<Window>,
    bytes: Bytes,
    used: Cell<Instant>,
}

/// The owner a window's [`Bytes`] keep alive.
struct Owner(Arc<Window>);

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        self.0.map.as_ref()
    }
}

impl std::fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCache")
            .field("windows", &self.windows.borrow().len())
            .finish()
    }
}

impl ChunkCache {
    /// No windows yet.
    #[must_use]
    pub fn new(shared: Arc<StoreShared>) -> ChunkCache {
        shared.mapping_readers().fetch_add(1, Ordering::AcqRel);
        ChunkCache {
            shared,
            windows: RefCell::new(BTreeMap::new()),
            held: Cell::new(0),
            swept: Cell::new(Instant::now()),
        }
    }

    /// The `len` bytes at CommitLog `offset` (below the committed end) as a slice of a mapped
    /// window, in the page cache; `None` when they are not to come from one (mapping off or
    /// over budget, a span longer than a chunk, a window the writer may still write direct),
    /// and the caller reads them into a buffer.
    ///
    /// # Errors
    /// [`IoError`] mapping the segment or reading it in.
    pub async fn span(&self, offset: u64, len: usize) -> Result<Option<Bytes>, IoError> {
        let config = &self.shared.config;
        let segment_size = config.mapped_file_size_commit_log;
        if config.pull_mapped_memory_max == 0 || len as u64 > CHUNK_SIZE || len == 0 {
            return Ok(None);
        }
        let segment = segment_start(offset, segment_size);
        let chunk = segment + (offset - segment) / CHUNK_SIZE * CHUNK_SIZE;
        let window_end = (chunk + WINDOW_SIZE).min(segment + segment_size);
        if offset + len as u64 > window_end {
            return Ok(None);
        }
        if !config.commit_log_in_page_cache() {
            // The writer's last direct write may rewrite the block the committed end is in.
            if window_end + DIRECT_BLOCK > self.shared.committed_end() {
                return Ok(None);
            }
        }
        let Some(entry) = self.window(segment, chunk, window_end)? else {
            return Ok(None);
        };
        let from = usize::try_from(offset - chunk).expect("inside a window");
        let range = from..from + len;
        if range.end > entry.bytes.len() {
            // The file ends before the span does: the caller's read names the damage.
            return Ok(None);
        }
        let map = &entry.window.map;
        if !map.is_resident(range.clone()) {
            map.read_ahead_off_executor(range.start..range.end + READ_AHEAD)
                .await?;
        }
        Ok(Some(entry.bytes.slice(range)))
    }

    /// Lets go of the windows of segments below `min` (retention deleted them).
    pub fn forget_below(&self, min: u64) {
        let kept = self.windows.borrow_mut().split_off(&min);
        let gone = std::mem::replace(&mut *self.windows.borrow_mut(), kept);
        for entry in gone.values() {
            self.held.set(self.held.get() - entry.window.reserved);
        }
    }

    /// Windows this shard holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.windows.borrow().len()
    }

    /// Whether this shard holds no window.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The window that starts at `chunk`, mapped now if it is not yet and the budget allows.
    fn window(&self, segment: u64, chunk: u64, end: u64) -> Result<Option<Entry>, IoError> {
        let now = Instant::now();
        self.let_go_of_idle(now);
        if let Some(entry) = self.windows.borrow().get(&chunk) {
            entry.used.set(now);
            return Ok(Some(entry.clone()));
        }
        let len = end - chunk;
        let readers = self.shared.mapping_readers().load(Ordering::Acquire).max(1);
        let share = (self.shared.config.pull_mapped_memory_max / readers).max(len);
        while self.held.get() + len > share {
            if !self.let_go_of_oldest() {
                break;
            }
        }
        while !self.shared.reserve_mapped(len) {
            // Answers in flight may still hold the windows let go of a little longer.
            if !self.let_go_of_oldest() {
                return Ok(None);
            }
        }
        let path = self
            .shared
            .config
            .commit_log_dir()
            .join(segment_name(segment));
        let size = usize::try_from(len).expect("a window fits");
        let map = match ReadWindow::open(&path, chunk - segment, size) {
            Ok(map) => map,
            Err(error) => {
                self.shared.release_mapped(len);
                return Err(error);
            }
        };
        let window = Arc::new(Window {
            map,
            shared: Arc::clone(&self.shared),
            reserved: len,
        });
        let entry = Entry {
            bytes: Bytes::from_owner(Owner(Arc::clone(&window))),
            window,
            used: Cell::new(now),
        };
        self.windows.borrow_mut().insert(chunk, entry.clone());
        self.held.set(self.held.get() + len);
        Ok(Some(entry))
    }

    /// Lets go of the window at the lowest offset; whether there was one.
    fn let_go_of_oldest(&self) -> bool {
        let Some((_, entry)) = self.windows.borrow_mut().pop_first() else {
            return false;
        };
        self.held.set(self.held.get() - entry.window.reserved);
        true
    }

    /// Lets go of the windows not used for [`WINDOW_IDLE`] (looked at once per that time).
    fn let_go_of_idle(&self, now: Instant) {
        if now.duration_since(self.swept.get()) < WINDOW_IDLE {
            return;
        }
        self.swept.set(now);
        let mut released = 0;
        self.windows.borrow_mut().retain(|_, entry| {
            let keep = now.duration_since(entry.used.get()) < WINDOW_IDLE;
            if !keep {
                released += entry.window.reserved;
            }
            keep
        });
        self.held.set(self.held.get() - released);
    }
}

impl Drop for ChunkCache {
    fn drop(&mut self) {
        self.shared.mapping_readers().fetch_sub(1, Ordering::AcqRel);
    }
}
