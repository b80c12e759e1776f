//! IndexFile: hash index from `topic#key` to CommitLog offsets (`ST/index/`,
//! `reference/store-format.md` §4). [`index_file`] holds the layout, its reader
//! and writer; [`service`] the files of a store.

pub mod index_file;
pub mod service;

pub use index_file::{index_key_hash, IndexFileBuilder, IndexFileView, IndexHeader};
pub use service::IndexService;
