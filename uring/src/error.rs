//! I/O errors that carry the operation and its target, in the spirit of glommio's
//! `EnhancedIoError`: a log line must say what failed, on what, and what to do.

use std::net::SocketAddr;

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
}
