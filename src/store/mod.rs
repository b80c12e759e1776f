//! Message storage with RocketMQ 4.9's on-disk layout (`reference/store-format.md`).
//!
//! So far the byte layouts, each checked against a store the Java broker wrote: the CommitLog
//! record ([`message`]), ConsumeQueue units ([`consume_queue`]), IndexFile ([`index`]) and
//! `checkpoint` ([`checkpoint`]); segment naming ([`segment`]); and the CommitLog writer with
//! its recovery walk ([`commit_log`]) over `ferromq_uring`'s segment files. The writer shard,
//! group commit across puts, dispatch, the recovery decision table and retention follow.
//!
//! Architecture Invariant: `store` imports neither `remoting` nor `broker`; its public API is
//! the seam.

pub mod checkpoint;
pub mod chunks;
pub mod commit_log;
pub mod config;
pub mod config_files;
pub mod consume_queue;
pub mod dispatch;
pub mod epoch_file;
pub mod flush;
pub mod handle;
pub mod index;
pub use ferromq_protocol::message;
pub mod message_store;
pub mod prefill;
pub mod put_coalescer;
pub mod queue_retention;
pub mod reader;
pub mod recovery;
pub mod reput;
pub mod retention;
pub mod segment;
pub mod segment_writer;
pub mod shared;
pub mod time_search;
pub mod timer;
