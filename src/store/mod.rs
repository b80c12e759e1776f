//! Message storage with RocketMQ 4.9's on-disk layout (`reference/store-format.md`).
//!
//! So far: the CommitLog record codec ([`message`]). The segment files, writer shard, group
//! commit, ConsumeQueue, IndexFile, recovery and retention follow.
//!
//! Architecture Invariant: `store` imports neither `remoting` nor `broker`; its public API is
//! the seam.

pub mod message;
