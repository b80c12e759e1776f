//! I/O errors that carry the operation and its target, in the spirit of glommio's
//! `EnhancedIoError`: a log line must say what failed, on what, and what to do.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// An I/O operation failed.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// Binding a listener failed.
    #[error("cannot listen on {addr}: {source} (is another process using the port?)")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Setting a socket option failed.
    #[error("cannot set {option} on a socket: {source}")]
    SocketOption {
        /// The option's name.
        option: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file operation failed.
    #[error("{op} of {path} at offset {offset} failed: {source}")]
    File {
        /// What was attempted (`open`, `write`, `read`, `fdatasync`, `preallocate`).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// Byte offset, 0 where it does not apply.
        offset: u64,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A direct-I/O write was not aligned; the caller must pad to the alignment.
    #[error("{op} at offset {offset} of {len} bytes is not aligned to {alignment} bytes")]
    Misaligned {
        /// The operation.
        op: &'static str,
        /// Byte offset.
        offset: u64,
        /// Length.
        len: usize,
        /// Required alignment.
        alignment: u64,
    },
    /// A fault injected by the simulated backend.
    #[error("injected fault in {op} (simulated backend)")]
    Injected {
        /// The operation that failed.
        op: &'static str,
    },
}

impl IoError {
    /// `op` on `path` failed with `source` (no offset applies).
    #[must_use]
    pub fn file(op: &'static str, path: &Path, source: std::io::Error) -> IoError {
        IoError::File {
            op,
            path: path.to_owned(),
            offset: 0,
            source,
        }
    }

    /// The error mapper for `op` on `path`, for `map_err`:
    /// `std::fs::remove_file(p).map_err(IoError::on("delete", p))`.
    pub fn on<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> IoError + 'a {
        move |source| IoError::file(op, path, source)
    }

    /// Whether the file or directory was not there.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        let kind = match self {
            IoError::File { source, .. } => source.kind(),
            _ => return false,
        };
        kind == std::io::ErrorKind::NotFound
    }
}
