//! One IndexFile: header, hash slots, and items chained per slot (`IndexFile.java`,
//! `IndexHeader.java`).
//!
//! ```text
//! region   offset                     size
//! header   0                          40
//! slots    40                         slotNum * 4     i32: newest item index in the bucket
//! items    40 + slotNum*4             itemNum * 20    item n at 40 + slotNum*4 + n*20
//!
//! header:  beginTimestamp i64, endTimestamp i64, beginPhyOffset i64, endPhyOffset i64,
//!          hashSlotCount i32, indexCount i32 (starts at 1: item 0 is never used)
//! item:    keyHash i32, phyOffset i64, timeDiff i32 (seconds since beginTimestamp),
//!          prevIndex i32 (0 ends the chain)
//! ```
//!
//! Defaults: 5,000,000 slots and 20,000,000 items (`maxHashSlotNum`, `maxIndexNum`).

/// Header size in bytes.
pub const HEADER_SIZE: usize = 40;
/// Slot size in bytes.
pub const SLOT_SIZE: usize = 4;
/// Item size in bytes.
pub const ITEM_SIZE: usize = 20;

/// The 40-byte header (`IndexHeader`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexHeader {
    /// Store time of the first indexed message, ms.
    pub begin_timestamp: i64,
    /// Store time of the last, ms.
    pub end_timestamp: i64,
    /// CommitLog offset of the first.
    pub begin_phy_offset: i64,
    /// CommitLog offset of the last.
    pub end_phy_offset: i64,
    /// Slots in use.
    pub hash_slot_count: i32,
    /// Next item index (items used + 1).
    pub index_count: i32,
}

impl IndexHeader {
    /// Decodes the header at the start of `bytes`.
    #[must_use]
    pub fn decode(bytes: &[u8]) -> Option<IndexHeader> {
        let i64_at = |at: usize| Some(i64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?));
        let i32_at = |at: usize| Some(i32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
        Some(IndexHeader {
            begin_timestamp: i64_at(0)?,
            end_timestamp: i64_at(8)?,
            begin_phy_offset: i64_at(16)?,
            end_phy_offset: i64_at(24)?,
            hash_slot_count: i32_at(32)?,
            index_count: i32_at(36)?,
        })
    }

    /// The 40 header bytes.
    #[must_use]
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut bytes = [0u8; HEADER_SIZE];
        bytes[0..8].copy_from_slice(&self.begin_timestamp.to_be_bytes());
        bytes[8..16].copy_from_slice(&self.end_timestamp.to_be_bytes());
        bytes[16..24].copy_from_slice(&self.begin_phy_offset.to_be_bytes());
        bytes[24..32].copy_from_slice(&self.end_phy_offset.to_be_bytes());
        bytes[32..36].copy_from_slice(&self.hash_slot_count.to_be_bytes());
        bytes[36..40].copy_from_slice(&self.index_count.to_be_bytes());
        bytes
    }
}

/// The hash of an index key `topic#key`: Java's string hash made non-negative, with
/// `Integer.MIN_VALUE` mapped to 0 (`IndexFile.indexKeyHashMethod`).
#[must_use]
pub fn index_key_hash(topic: &str, key: &str) -> i32 {
    // Java hashes the joined string; the same fold over the parts, without building it
    // (one allocation and copy per indexed key on the dispatch shard).
    let hash = [topic, "#", key]
        .iter()
        .flat_map(|part| part.encode_utf16())
        .fold(0i32, |hash, unit| {
            hash.wrapping_mul(31).wrapping_add(i32::from(unit))
        });
    hash.checked_abs().unwrap_or(0)
}

/// A read-only view of one IndexFile's bytes.
#[derive(Debug)]
pub struct IndexFileView<'a> {
    bytes: &'a [u8],
    slot_num: usize,
    /// The header.
    pub header: IndexHeader,
}

impl<'a> IndexFileView<'a> {
    /// A view of `bytes` laid out with `slot_num` slots; `None` if the header is cut.
    #[must_use]
    pub fn new(bytes: &'a [u8], slot_num: usize) -> Option<IndexFileView<'a>> {
        let header = IndexHeader::decode(bytes)?;
        Some(IndexFileView {
            bytes,
            slot_num,
            header,
        })
    }

    /// CommitLog offsets of items whose key hash equals that of `topic#key` and whose store
    /// time lies in `[begin_ms, end_ms]`, newest first, at most `max` (`selectPhyOffset`).
    /// Hash collisions are possible: callers re-check the record's topic and keys.
    #[must_use]
    pub fn lookup(
        &self,
        topic: &str,
        key: &str,
        begin_ms: i64,
        end_ms: i64,
        max: usize,
    ) -> Vec<i64> {
        let hash = index_key_hash(topic, key);
        let slot = usize::try_from(hash).expect("non-negative") % self.slot_num.max(1);
        let mut found = Vec::new();
        let index_count = self.header.index_count;
        let Some(mut current) = self.i32_at(HEADER_SIZE + slot * SLOT_SIZE) else {
            return found;
        };
        // A chain never visits more items than the file has; the bound also stops a cycle
        // in a corrupt file.
        for _ in 0..index_count.max(0) {
            if current <= 0 || current > index_count || found.len() >= max {
                break;
            }
            let Some(item) = self.item(current) else {
                break;
            };
            let store_ms = self.header.begin_timestamp + i64::from(item.time_diff_secs) * 1000;
            if item.key_hash == hash && (begin_ms..=end_ms).contains(&store_ms) {
                found.push(item.phy_offset);
            }
            if store_ms < begin_ms || item.prev_index == current {
                break;
            }
            current = item.prev_index;
        }
        found
    }

    fn item(&self, index: i32) -> Option<IndexItem> {
        let index = usize::try_from(index).ok()?;
        let at = HEADER_SIZE + self.slot_num * SLOT_SIZE + index * ITEM_SIZE;
        let bytes = self.bytes.get(at..at + ITEM_SIZE)?;
        Some(IndexItem {
            key_hash: i32::from_be_bytes(bytes[0..4].try_into().ok()?),
            phy_offset: i64::from_be_bytes(bytes[4..12].try_into().ok()?),
            time_diff_secs: i32::from_be_bytes(bytes[12..16].try_into().ok()?),
            prev_index: i32::from_be_bytes(bytes[16..20].try_into().ok()?),
        })
    }

    fn i32_at(&self, at: usize) -> Option<i32> {
        Some(i32::from_be_bytes(
            self.bytes.get(at..at + 4)?.try_into().ok()?,
        ))
    }
}

/// Writes one IndexFile, inserting keys exactly as Java's `IndexFile.putKey` does, so the
/// bytes match a Java-written file. The storage is a `Vec<u8>` for a file built in memory or a
/// mapped file on disk; the header is kept in step with every insert.
#[derive(Debug)]
pub struct IndexFileBuilder<B = Vec<u8>> {
    bytes: B,
    slot_num: usize,
    item_num: usize,
    header: IndexHeader,
}

/// Bytes an IndexFile of `slot_num` slots and `item_num` items takes.
#[must_use]
pub fn index_file_size(slot_num: usize, item_num: usize) -> usize {
    HEADER_SIZE + slot_num * SLOT_SIZE + item_num * ITEM_SIZE
}

impl IndexFileBuilder<Vec<u8>> {
    /// An empty file of `slot_num` slots and `item_num` items whose header starts from the
    /// previous file's end (`begin_phy_offset`, `begin_timestamp`), as Java's constructor does.
    #[must_use]
    pub fn new(slot_num: usize, item_num: usize, end_phy_offset: i64, end_timestamp: i64) -> Self {
        let bytes = vec![0; index_file_size(slot_num, item_num)];
        IndexFileBuilder::create(bytes, slot_num, item_num, end_phy_offset, end_timestamp)
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> IndexFileBuilder<B> {
    /// A new file in zeroed `bytes` (at least [`index_file_size`] long), its header starting
    /// from the previous file's end.
    #[must_use]
    pub fn create(
        bytes: B,
        slot_num: usize,
        item_num: usize,
        end_phy_offset: i64,
        end_timestamp: i64,
    ) -> Self {
        let header = IndexHeader {
            begin_timestamp: end_timestamp,
            end_timestamp,
            begin_phy_offset: end_phy_offset,
            end_phy_offset,
            hash_slot_count: 0,
            index_count: 1,
        };
        let mut file = IndexFileBuilder {
            bytes,
            slot_num,
            item_num,
            header,
        };
        file.write_header();
        file
    }

    /// An existing file; `None` if `bytes` is shorter than the layout or its header is not
    /// one (an index count outside `1..=item_num`).
    #[must_use]
    pub fn open(bytes: B, slot_num: usize, item_num: usize) -> Option<Self> {
        if bytes.as_ref().len() < index_file_size(slot_num, item_num) {
            return None;
        }
        let header = IndexHeader::decode(bytes.as_ref())?;
        let count = usize::try_from(header.index_count).ok()?;
        if count == 0 || count > item_num {
            return None;
        }
        Some(IndexFileBuilder {
            bytes,
            slot_num,
            item_num,
            header,
        })
    }

    /// Whether no more keys fit.
    #[must_use]
    pub fn is_full(&self) -> bool {
        usize::try_from(self.header.index_count).unwrap_or(usize::MAX) >= self.item_num
    }

    /// The header as it stands.
    #[must_use]
    pub fn header(&self) -> IndexHeader {
        self.header
    }

    /// A reader over the file as it stands.
    #[must_use]
    pub fn view(&self) -> IndexFileView<'_> {
        IndexFileView {
            bytes: self.bytes.as_ref(),
            slot_num: self.slot_num,
            header: self.header,
        }
    }

    /// The storage.
    #[must_use]
    pub fn storage(&self) -> &B {
        &self.bytes
    }

    /// Adds `topic#key` → `phy_offset` stored at `store_timestamp`; `false` when full.
    pub fn put_key(
        &mut self,
        topic: &str,
        key: &str,
        phy_offset: i64,
        store_timestamp: i64,
    ) -> bool {
        if self.is_full() {
            return false;
        }
        let hash = index_key_hash(topic, key);
        let slot = usize::try_from(hash).expect("non-negative") % self.slot_num;
        let slot_at = HEADER_SIZE + slot * SLOT_SIZE;
        let index_count = self.header.index_count;
        let bytes = self.bytes.as_mut();
        let mut previous = i32::from_be_bytes(bytes[slot_at..slot_at + 4].try_into().expect("4"));
        if previous <= 0 || previous > index_count {
            previous = 0;
        }
        let time_diff = if self.header.begin_timestamp <= 0 {
            0
        } else {
            ((store_timestamp - self.header.begin_timestamp) / 1000).clamp(0, i64::from(i32::MAX))
        };
        let item = usize::try_from(index_count).expect("positive");
        let item_at = HEADER_SIZE + self.slot_num * SLOT_SIZE + item * ITEM_SIZE;
        bytes[item_at..item_at + 4].copy_from_slice(&hash.to_be_bytes());
        bytes[item_at + 4..item_at + 12].copy_from_slice(&phy_offset.to_be_bytes());
        let time_diff = i32::try_from(time_diff).expect("clamped to i32");
        bytes[item_at + 12..item_at + 16].copy_from_slice(&time_diff.to_be_bytes());
        bytes[item_at + 16..item_at + 20].copy_from_slice(&previous.to_be_bytes());
        bytes[slot_at..slot_at + 4].copy_from_slice(&index_count.to_be_bytes());
        if index_count <= 1 {
            self.header.begin_phy_offset = phy_offset;
            self.header.begin_timestamp = store_timestamp;
        }
        if previous == 0 {
            self.header.hash_slot_count += 1;
        }
        self.header.index_count += 1;
        self.header.end_phy_offset = phy_offset;
        self.header.end_timestamp = store_timestamp;
        self.write_header();
        true
    }

    /// The whole file.
    #[must_use]
    pub fn into_bytes(self) -> B {
        self.bytes
    }

    fn write_header(&mut self) {
        self.bytes.as_mut()[..HEADER_SIZE].copy_from_slice(&self.header.encode());
    }
}

struct IndexItem {
    key_hash: i32,
    phy_offset: i64,
    time_diff_secs: i32,
    prev_index: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let header = IndexHeader {
            begin_timestamp: 1,
            end_timestamp: 2,
            begin_phy_offset: 3,
            end_phy_offset: 4,
            hash_slot_count: 5,
            index_count: 6,
        };
        assert_eq!(IndexHeader::decode(&header.encode()), Some(header));
        assert_eq!(IndexHeader::decode(&[0; 39]), None);
    }

    #[test]
    fn key_hash_is_non_negative() {
        use crate::store::message::java_string_hash;
        assert!(index_key_hash("T", "k") >= 0);
        assert_eq!(index_key_hash("T", "k"), java_string_hash("T#k").abs());
        // Java hashes UTF-16 units: the joined string's hash, outside the BMP too.
        let (topic, key) = ("主题-𝄞", "键#AC110002");
        assert_eq!(
            index_key_hash(topic, key),
            java_string_hash(&format!("{topic}#{key}"))
                .checked_abs()
                .unwrap_or(0)
        );
    }
}
