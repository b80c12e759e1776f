//! `ferromq-uring`: the only crate of ferromq that touches the kernel I/O API.
//!
//! Everything else reaches sockets and files through the types re-exported or defined here,
//! so that the io_uring requirements live in one place:
//!
//! - Linux 5.8 or newer with io_uring enabled (not blocked by a seccomp profile);
//! - `RLIMIT_MEMLOCK` of at least 512 KiB per shard for glommio's registered buffers
//!   (`ulimit -l`); root or a raised limit satisfies it.
//!
//! Modules: [`disk`] (filesystem use, `statvfs`),
//! [`net`] (listeners and streams on glommio's io_uring reactor; `split`, whose halves lend
//! the socket's descriptor for gathering sends and shutdown), [`file`]
//! (`SegmentFile`, and `DmaSegment`: O_DIRECT segment files preallocated with fallocate),
//! [`mapped`] (`MappedFile`: a writable shared mapping, for the IndexFile's in-place updates),
//! [`sim`] (`SimSegment`: the twin that loses unsynced writes on a simulated crash, tears a
//! write at sector granularity and fails the Nth operation), [`error`].
//!
//! Architecture Invariant: this crate knows nothing about shards or RocketMQ.

#![warn(missing_docs)]

pub mod disk;
pub mod error;
pub mod file;
pub mod mapped;
pub mod net;
pub mod sim;
pub mod workers;

pub use error::IoError;
