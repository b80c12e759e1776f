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
