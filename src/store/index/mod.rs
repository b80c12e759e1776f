//! IndexFile: hash index from `topic#key` to CommitLog offsets (`ST/index/`,
//! `reference/store-format.md` §4). [`index_file`] holds the layout and its reader.

pub mod index_file;

pub use index_file::{index_key_hash, IndexFileBuilder, IndexFileView, IndexHeader};
