//! `MappedFile`: a file mapped read-write into memory, for the one store structure that is
//! written at random positions (the IndexFile's hash slots and chained items).
//!
//! Appends go through [`crate::file::DmaSegment`]; a hash index is updated in place, key by
//! key, which direct I/O would turn into a read-modify-write of a block per key. The page
//! cache is the right tool there, as in Java's `IndexFile`.

use crate::IoError;
use memmap2::MmapMut;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file of fixed size mapped shared and writable.
#[derive(Debug)]
pub struct MappedFile {
    map: MmapMut,
    /// The mapped file, for syncs on another thread.
    file: Arc<std::fs::File>,
    path: PathBuf,
}

impl MappedFile {
    /// Opens `path` (creating it, `size` bytes of zeros, if it is absent) and maps it.
    ///
    /// # Errors
    /// [`IoError::File`] naming the step that failed.
    pub fn open(path: &Path, size: u64) -> Result<MappedFile, IoError> {
        let error = |op| IoError::on(op, path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(error("open"))?;
        if file.metadata().map_err(error("stat"))?.len() != size {
            file.set_len(size).map_err(error("set_len"))?;
        }
        // SAFETY: the mapping is only sound while no one else resizes or writes the file.
        // The store owns its directory (the `lock` file keeps a second broker out), never
        // truncates a mapped file, and only this value's owner reaches the mapping.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(error("mmap"))?;
        Ok(MappedFile {
            map,
            file: Arc::new(file),
            path: path.to_owned(),
        })
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the dirty pages back and waits for them, on the executor's blocking thread,
    /// while the executor goes on: an fdatasync of the file, which writes back the pages
    /// dirtied through the mapping too (they are the file's page cache; Linux's
    /// `msync(MS_SYNC)` is that same sync). With
    /// every message indexed by its `UNIQ_KEY`, a second's dirty pages of an IndexFile took
    /// 5-10 ms to write back at 90k messages/s, during which the shard that owns it ran
    /// nothing else. Call from inside a glommio executor.
    ///
    /// The returned future holds the file, not `self`: it may run while the mapping is
    /// written on, and covers every write made through it before it is first polled.
    ///
    /// # Errors
    /// [`IoError::File`].
    pub fn flush_off_executor(&self) -> impl std::future::Future<Output = Result<(), IoError>> {
        let file = Arc::clone(&self.file);
        let path = self.path.clone();
        async move {
            glommio::executor()
                .spawn_blocking(move || file.sync_data())
                .await
                .map_err(IoError::on("fdatasync", &path))
        }
    }
}

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

impl AsMut<[u8]> for MappedFile {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }
}

/// A window of a file mapped shared and read-only: the page cache's pages of that range,
/// read in place. Whoever writes the file (through its own mapping or with writes) writes
/// those same pages, so a byte the writer has put there is a byte read here.
///
/// Touching a page that is not in the page cache makes the thread wait for the device, so
/// an executor asks [`ReadWindow::is_resident`] first and, when it is not, has the range
/// read in off the executor with [`ReadWindow::read_ahead_off_executor`].
#[derive(Debug)]
pub struct ReadWindow {
    map: memmap2::Mmap,
    file: Arc<std::fs::File>,
    /// The window's first byte in the file.
    offset: u64,
    path: PathBuf,
}

impl ReadWindow {
    /// Maps `len` bytes of `path` from `offset` (a multiple of the page size); a window past
    /// the file's end is cut at it.
    ///
    /// # Errors
    /// [`IoError::File`]: the file cannot be opened or mapped, or the window holds nothing.
    pub fn open(path: &Path, offset: u64, len: usize) -> Result<ReadWindow, IoError> {
        let error = |op| IoError::on(op, path);
        let file = std::fs::File::open(path).map_err(error("open"))?;
        let size = file.metadata().map_err(error("stat"))?.len();
        let len = usize::try_from(size.saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(len);
        if len == 0 {
            return Err(IoError::file(
                "mmap",
                path,
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "window past the end"),
            ));
        }
        // Store files are never truncated while the store runs: retention unlinks whole files
        // (a mapped inode lives on) and recovery cuts a torn tail before any reader starts.
        // SAFETY: read-only, and sound while the file is not truncated under it (see above).
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(offset)
                .len(len)
                .map(&file)
        }
        .map_err(error("mmap"))?;
        Ok(ReadWindow {
            map,
            file: Arc::new(file),
            offset,
            path: path.to_owned(),
        })
    }

    /// The window's first byte in the file.
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether every page of `range` (window-relative) is in the page cache, so that reading
    /// it cannot wait for the device. A range outside the window is not.
    #[must_use]
    pub fn is_resident(&self, range: std::ops::Range<usize>) -> bool {
        let page = page_size();
        if range.end > self.map.len() || range.start >= range.end {
            return range.start == range.end && range.end <= self.map.len();
        }
        let first = range.start / page * page;
        let pages = (range.end - first).div_ceil(page);
        let mut vector = vec![0u8; pages];
        // SAFETY: `first` is page-aligned inside the mapping, the length stays inside it, and
        // `vector` has one byte per page of that length, as mincore(2) requires.
        let status = unsafe {
            libc::mincore(
                self.map.as_ptr().add(first).cast_mut().cast(),
                range.end - first,
                vector.as_mut_ptr(),
            )
        };
        status == 0 && vector.iter().all(|v| v & 1 == 1)
    }

    /// Reads `range` (window-relative, cut at the window) into the page cache on the
    /// executor's blocking thread (`readahead(2)`), while the executor goes on. Call from
    /// inside a glommio executor.
    ///
    /// # Errors
    /// [`IoError::File`].
    pub async fn read_ahead_off_executor(
        &self,
        range: std::ops::Range<usize>,
    ) -> Result<(), IoError> {
        let end = range.end.min(self.map.len());
        if range.start >= end {
            return Ok(());
        }
        let file = Arc::clone(&self.file);
        let offset = self.offset + range.start as u64;
        let len = end - range.start;
        glommio::executor()
            .spawn_blocking(move || {
                use std::os::fd::AsRawFd;
                let offset = libc::off64_t::try_from(offset).map_err(std::io::Error::other)?;
                // SAFETY: readahead(2) only reads the descriptor's file into the page cache;
                // the descriptor is open for the call's length (the Arc holds it).
                let status = unsafe { libc::readahead(file.as_raw_fd(), offset, len) };
                if status == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
            .await
            .map_err(IoError::on("readahead", &self.path))
    }
}

impl AsRef<[u8]> for ReadWindow {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

/// The system page size.
#[must_use]
pub fn page_size() -> usize {
    rustix::param::page_size()
}
