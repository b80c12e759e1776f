//! Message storage with RocketMQ 4.9's on-disk layout (`reference/store-format.md`).
//!
//! So far the byte layouts, each checked against a store the Java broker wrote: the CommitLog
//! record ([`message`]), ConsumeQueue units ([`consume_queue`]), IndexFile ([`index`]) and
//! `checkpoint` ([`checkpoint`]). The segment files, writer shard, group commit, dispatch,
//! recovery and retention follow.
//!
//! Architecture Invariant: `store` imports neither `remoting` nor `broker`; its public API is
//! the seam.

pub mod checkpoint;
pub mod consume_queue;
pub mod index;
pub mod message;
