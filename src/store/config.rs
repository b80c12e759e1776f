//! `StoreConfig`: the store's settings, named and defaulted as Java's `MessageStoreConfig`
//! (`reference/store-format.md` §1–§2), and the paths derived from `storePathRootDir`.

use super::dispatch::DelayLevels;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Store settings. Field names are Java's keys in snake case.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// `storePathRootDir`.
    pub store_path_root_dir: PathBuf,
    /// `storePathCommitLog` (default `<root>/commitlog`).
    pub store_path_commit_log: Option<PathBuf>,
    /// `mappedFileSizeCommitLog`: CommitLog segment size (1 GiB).
    pub mapped_file_size_commit_log: u64,
    /// `mappedFileSizeConsumeQueue` in units (Java's key is in bytes: 300,000 × 20).
    pub consume_queue_units_per_file: usize,
    /// `flushDiskType`, with `flushIntervalCommitLog` (500 ms) for `ASYNC_FLUSH`.
    pub flush_disk_type: FlushDiskType,
    /// `flushIntervalConsumeQueue` (1 s): how often ConsumeQueues, IndexFiles and the
    /// checkpoint are synced.
    pub flush_interval_consume_queue: Duration,
    /// `checkCRCOnRecover`.
    pub check_crc_on_recover: bool,
    /// `maxMessageSize` (4 MiB).
    pub max_message_size: usize,
    /// `maxTransferBytesOnMessageInMemory` (256 KiB).
    pub max_transfer_bytes_on_message_in_memory: usize,
    /// `maxTransferCountOnMessageInMemory` (32).
    pub max_transfer_count_on_message_in_memory: usize,
    /// `maxTransferBytesOnMessageInDisk` (64 KiB).
    pub max_transfer_bytes_on_message_in_disk: usize,
    /// `maxTransferCountOnMessageInDisk` (8).
    pub max_transfer_count_on_message_in_disk: usize,
    /// `accessMessageInMemoryMaxRatio` (40): percent of RAM behind the CommitLog end that
    /// counts as "in memory".
    pub access_message_in_memory_max_ratio: u64,
    /// `messageIndexEnable`.
    pub message_index_enable: bool,
    /// `maxHashSlotNum` (5,000,000).
    pub max_hash_slot_num: usize,
    /// `maxIndexNum` (20,000,000).
    pub max_index_num: usize,
    /// `defaultQueryMaxNum` (32).
    pub default_query_max_num: usize,
    /// `messageDelayLevel`.
    pub message_delay_level: DelayLevels,
    /// `fileReservedTime` in hours (72).
    pub file_reserved_time_hours: u64,
    /// `deleteWhen`: hours of the day (`;`-separated, two digits) when expired files go.
    pub delete_when: String,
    /// `cleanResourceInterval` (10 s): how often retention and the disk probe run.
    pub clean_resource_interval: Duration,
    /// `diskMaxUsedSpaceRatio` (75 %): above it, expired files go at any hour.
    pub disk_max_used_space_ratio: f64,
    /// `diskSpaceCleanForciblyRatio` (0.85): above it, the oldest files go even if young.
    pub disk_space_clean_forcibly_ratio: f64,
    /// `diskSpaceWarningLevelRatio` (0.90): above it, puts are refused.
    pub disk_space_warning_level_ratio: f64,
    /// `cleanFileForciblyEnable`.
    pub clean_file_forcibly_enable: bool,
    /// `deleteCommitLogFilesInterval` (100 ms): pause between two deleted segments.
    pub delete_commit_log_files_interval: Duration,
    /// `commitLogPageCacheWrites` (ferromq's own key, default true): under ASYNC_FLUSH the
    /// writer copies records into the page cache through a shared mapping of the segment, as
    /// Java's `MappedFile`, and a put is answered without waiting for the device; false
    /// writes with O_DIRECT and answers after the device write. SYNC_FLUSH always writes
    /// direct (`O_DSYNC`).
    pub commit_log_page_cache_writes: bool,
    /// `pullMappedMemoryMax` (ferromq's own key, default 512 MiB): the most bytes of
    /// CommitLog windows the readers keep mapped at once, whose pages pull answers are sent
    /// from without a copy; 0 reads every pull into a buffer (Java's `transferMsgByHeap`).
    pub pull_mapped_memory_max: u64,
    /// `mappedFileSizeTimerLog` (100 MiB): the size of each `timerlog/` file.
    pub mapped_file_size_timer_log: u64,
    /// `timerPrecisionMs` (1000): a timer message's delivery time is rounded down to it,
    /// and the wheel turns one slot per precision.
    pub timer_precision_ms: i64,
    /// `timerRollWindowSlot` (172,800 slots, two days at 1 s): messages further away are
    /// parked at the window's end and rolled.
    pub timer_roll_window_slot: i64,
    /// `timerFlushIntervalMs` (1000): how often the timer's files and checkpoint are synced.
    pub timer_flush_interval: Duration,
    /// `timerMaxDelaySec` (259,200, three days): longer delays are refused.
    pub timer_max_delay_sec: i64,
    /// `timerWheelEnable` (true): false refuses timer messages.
    pub timer_wheel_enable: bool,
    /// `timerStopEnqueue` (false): stops moving timer messages into the wheel.
    pub timer_stop_enqueue: bool,
    /// `timerStopDequeue` (false): stops delivering from the wheel.
    pub timer_stop_dequeue: bool,
    /// `timerSkipUnknownError` (false): an enqueue or delivery that fails for an unknown
    /// reason is skipped instead of retried.
    pub timer_skip_unknown_error: bool,
    /// `timerEnableRetryUntilSuccess` (false): a delivery whose put keeps failing is retried
    /// until it succeeds, instead of three times.
    pub timer_enable_retry_until_success: bool,
    /// `timerProgressLogIntervalMs` (10 s): how often the timer logs its progress.
    pub timer_progress_log_interval: Duration,
    /// Whether the broker is a slave (`brokerRole=SLAVE`): the store refuses puts and
    /// takes only the bytes its master replicates (Java's `checkStoreStatus`).
    pub slave: bool,
}

impl StoreConfig {
    /// Java's defaults with the store under `root`.
    #[must_use]
    pub fn new(root: impl Into<PathBuf>) -> StoreConfig {
        StoreConfig {
            store_path_root_dir: root.into(),
            store_path_commit_log: None,
            mapped_file_size_commit_log: 1 << 30,
            consume_queue_units_per_file: 300_000,
            flush_disk_type: FlushDiskType::AsyncFlush {
                interval: Duration::from_millis(500),
            },
            flush_interval_consume_queue: Duration::from_secs(1),
            check_crc_on_recover: true,
            max_message_size: 4 << 20,
            max_transfer_bytes_on_message_in_memory: 256 << 10,
            max_transfer_count_on_message_in_memory: 32,
            max_transfer_bytes_on_message_in_disk: 64 << 10,
            max_transfer_count_on_message_in_disk: 8,
            access_message_in_memory_max_ratio: 40,
            message_index_enable: true,
            max_hash_slot_num: 5_000_000,
            max_index_num: 20_000_000,
            default_query_max_num: 32,
            message_delay_level: DelayLevels::default(),
            file_reserved_time_hours: 72,
            delete_when: "04".to_owned(),
            clean_resource_interval: Duration::from_secs(10),
            disk_max_used_space_ratio: 0.75,
            disk_space_clean_forcibly_ratio: 0.85,
            disk_space_warning_level_ratio: 0.90,
            clean_file_forcibly_enable: true,
            delete_commit_log_files_interval: Duration::from_millis(100),
            commit_log_page_cache_writes: true,
            pull_mapped_memory_max: 512 << 20,
            mapped_file_size_timer_log: 100 << 20,
            timer_precision_ms: 1000,
            timer_roll_window_slot: 3600 * 24 * 2,
            timer_flush_interval: Duration::from_millis(1000),
            timer_max_delay_sec: 3600 * 24 * 3,
            timer_wheel_enable: true,
            timer_stop_enqueue: false,
            timer_stop_dequeue: false,
            timer_skip_unknown_error: false,
            timer_enable_retry_until_success: false,
            timer_progress_log_interval: Duration::from_secs(10),
            slave: false,
        }
    }

    /// `<root>/commitlog` unless `storePathCommitLog` says otherwise.
    #[must_use]
    pub fn commit_log_dir(&self) -> PathBuf {
        self.store_path_commit_log
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join("commitlog"))
    }

    /// Whether the CommitLog is written into the page cache (ASYNC_FLUSH with
    /// `commitLogPageCacheWrites`), so that its readers must read through it too.
    #[must_use]
    pub fn commit_log_in_page_cache(&self) -> bool {
        self.commit_log_page_cache_writes && self.flush_disk_type != FlushDiskType::SyncFlush
    }

    /// `<root>/consumequeue`.
    #[must_use]
    pub fn consume_queue_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("consumequeue")
    }

    /// The directory of one queue's files: `<root>/consumequeue/<topic>/<queueId>`.
    #[must_use]
    pub fn queue_dir(&self, topic: &str, queue_id: i32) -> PathBuf {
        self.consume_queue_dir()
            .join(topic)
            .join(queue_id.to_string())
    }

    /// `<root>/index`.
    #[must_use]
    pub fn index_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("index")
    }

    /// `<root>/timerlog`.
    #[must_use]
    pub fn timer_log_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("timerlog")
    }

    /// `<root>/config`.
    #[must_use]
    pub fn config_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("config")
    }

    /// A file directly under the root (`checkpoint`, `abort`, `lock`).
    #[must_use]
    pub fn root_file(&self, name: &str) -> PathBuf {
        self.store_path_root_dir.join(name)
    }

    /// The root directory.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.store_path_root_dir
    }

    /// Whether `hour` (0–23) is one of `deleteWhen`'s hours.
    #[must_use]
    pub fn is_delete_hour(&self, hour: u32) -> bool {
        self.delete_when
            .split(';')
            .filter_map(|h| h.trim().parse::<u32>().ok())
            .any(|h| h == hour)
    }
}

/// `flushDiskType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushDiskType {
    /// Answer after the fdatasync that covers the put.
    SyncFlush,
    /// Answer after the write; fdatasync every interval.
    AsyncFlush {
        /// `flushIntervalCommitLog` (500 ms in Java).
        interval: Duration,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_derive_from_the_root_and_delete_hours_parse() {
        let mut config = StoreConfig::new("/s");
        assert_eq!(config.commit_log_dir(), Path::new("/s/commitlog"));
        assert_eq!(config.queue_dir("T", 3), Path::new("/s/consumequeue/T/3"));
        assert!(config.is_delete_hour(4) && !config.is_delete_hour(5));
        config.delete_when = "01;04; 23".to_owned();
        assert!(config.is_delete_hour(23) && config.is_delete_hour(1));
        config.store_path_commit_log = Some("/fast/cl".into());
        assert_eq!(config.commit_log_dir(), Path::new("/fast/cl"));
    }
}
