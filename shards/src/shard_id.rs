//! `ShardId`, the index of one shard, and the limit on how many shards a process may run.
//!
//! Invariant: the shards of a [`Placement`](crate::Placement) are numbered densely from
//! `shard-00`, so a `ShardId` doubles as an index into per-shard tables such as the mesh.

use std::fmt;

/// Most shards one process may run.
///
/// The mesh holds one bounded channel per ordered pair of shards, so its memory grows with the
/// square of the shard count; 256 shards already means 65,280 channels.
pub const SHARD_COUNT_MAX: usize = 256;

/// Index of one shard (one executor thread) in its [`Placement`](crate::Placement).
///
/// Displays as `shard-NN` with at least two digits, which is also the executor thread's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(pub u16);

impl ShardId {
    /// Builds the id for the shard at `index` in its placement.
    ///
    /// # Panics
    ///
    /// Panics if `index` is not below [`SHARD_COUNT_MAX`]: placements are validated against that
    /// limit, so a larger index is a programming error.
    pub fn new(index: usize) -> ShardId {
        assert!(
            index < SHARD_COUNT_MAX,
            "shard index {index} exceeds {SHARD_COUNT_MAX}"
        );
        ShardId(u16::try_from(index).expect("invariant: SHARD_COUNT_MAX fits in u16"))
    }

    /// The position of this shard in its placement, for indexing per-shard tables.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard-{:02}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_single_digit_is_zero_padded() {
        assert_eq!(ShardId(0).to_string(), "shard-00");
        assert_eq!(ShardId(7).to_string(), "shard-07");
    }

    #[test]
    fn display_three_digits_is_not_truncated() {
        assert_eq!(ShardId(42).to_string(), "shard-42");
        assert_eq!(ShardId(123).to_string(), "shard-123");
    }

    #[test]
    fn new_index_round_trips() {
        for index in [0, 1, 17, SHARD_COUNT_MAX - 1] {
            assert_eq!(ShardId::new(index).index(), index);
        }
    }

    #[test]
    fn ordering_follows_index() {
        assert!(ShardId(1) < ShardId(2));
        assert_eq!(ShardId::new(3), ShardId(3));
    }
}
