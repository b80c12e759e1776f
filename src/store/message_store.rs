//! `MessageStore`: the store assembled — recovery, the writer, dispatch and the handle the
//! rest of the broker uses (`DefaultMessageStore`).
//!
//! Placement: [`recover_store`] and [`run_reput`] run on the dispatch shard (they own the
//! ConsumeQueues, IndexFiles and checkpoint); [`run_writer`] on the writer shard (it owns the
//! CommitLog). Everything between them is `Send` plain data or channels, so each side opens
//! its own files on its own shard. [`LocalStore`] runs all of it on one executor (tests, tools,
//! and the single-core layout). [`StoreHandle`] is what any shard holds: puts, lookups by
//! key, and [`StoreReader`](super::reader::StoreReader)s for the read path.

use super::checkpoint::StoreCheckpoint;
use super::commit_log::{Appended, CommitLog, PutMessage};
use super::config::StoreConfig;
use super::consume_queue::{recover_queue, UNIT_SIZE};
use super::dispatch::{dispatch_entry, DispatchEntry, RecordMeta, TopicDrop};
use super::flush::{run_group_commit_with, CommitObserver, GroupCommitStats, PutRequest};
pub use super::handle::{StoreChannels, StoreHandle, BATCH_QUEUE_CAPACITY, PUT_QUEUE_CAPACITY};
use super::index::index_file::index_file_size;
use super::index::IndexService;
use super::prefill::{CommitLogDirectory, SegmentOptions};
use super::recovery::{
    cut_tail, list_segments, walk, walk_start, FindEnd, RecoveryMode, WalkVisitor,
};
use super::reput::{run_reput, wall_clock_ms, CommittedBatch, Reput};
use super::segment::{parse_segment_name, remove_unfinished_segments, segment_start, DmaDirectory};
use super::segment_writer::StoreError;
use super::shared::{QueueKey, StoreShared};
use ferromq_uring::IoError;
use futures::channel::mpsc;
use futures::SinkExt;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// What recovery did, for the start-up log and for tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The decision-table row.
    pub mode: RecoveryMode,
    /// CommitLog offset the record walk started at.
    pub walk_start: u64,
    /// End of valid CommitLog data.
    pub valid_end: u64,
    /// CommitLog offset re-dispatch started at.
    pub redispatch_from: u64,
    /// Records dispatched again.
    pub redispatched: u64,
    /// Queues found.
    pub queues: usize,
}

/// What the writer needs to continue the CommitLog (plain data: it crosses shards).
#[derive(Clone, Debug)]
pub struct WriterStart {
    /// Where the next record goes.
    pub valid_end: u64,
    /// Next queue offset of every queue.
    pub queue_offsets: HashMap<QueueKey, i64>,
}

/// The exclusive lock on `<root>/lock` that keeps a second process off the store: a `flock`
/// (what earlier ferromq versions take) and the record lock on the first byte that a Java
/// broker takes (`ferromq_uring::disk::try_lock_first_byte`), so that neither starts on a
/// store the other runs on.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

impl StoreLock {
    /// Takes the lock, writing `lock` into the file as Java does.
    ///
    /// # Errors
    /// [`StoreError::Layout`] if another process holds it; [`StoreError::Io`] otherwise.
    pub fn acquire(root: &Path) -> Result<StoreLock, StoreError> {
        let path = root.join("lock");
        let io = |op| IoError::on(op, &path);
        ferromq_uring::disk::create_dir_durably(root).map_err(io("create directory"))?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io("open"))?;
        let locked = file.try_lock().is_ok()
            && ferromq_uring::disk::try_lock_first_byte(&file).map_err(io("lock"))?;
        if !locked {
            return Err(StoreError::Layout(format!(
                "{} is locked by another process: is a broker already running on this store?",
                path.display()
            )));
        }
        file.write_all(b"lock").map_err(io("write"))?;
        Ok(StoreLock { _file: file })
    }
}

/// Recovers the store under `shared.config` (the decision table of [`super::recovery`]) and
/// returns its dispatch side, what the writer needs, and what was done. Runs on the dispatch
/// shard. The caller holds the [`StoreLock`] and creates the `abort` file afterwards.
///
/// # Errors
/// [`StoreError`] for unreadable files or a layout that does not match the configuration.
pub async fn recover_store(
    shared: Arc<StoreShared>,
) -> Result<(Reput, WriterStart, RecoveryReport), StoreError> {
    let config = &shared.config;
    for dir in [
        config.commit_log_dir(),
        config.consume_queue_dir(),
        config.index_dir(),
        config.config_dir(),
    ] {
        create_dir(&dir)?;
    }
    let clean = !config.root_file("abort").exists();
    let checkpoint = match std::fs::read(config.root_file("checkpoint")) {
        Ok(bytes) => StoreCheckpoint::decode(&bytes),
        Err(_) => StoreCheckpoint::default(),
    };
    let min_timestamp = {
        let mut oldest = checkpoint
            .physic_msg_timestamp
            .min(checkpoint.logics_msg_timestamp);
        if config.message_index_enable && checkpoint.index_msg_timestamp > 0 {
            oldest = oldest.min(checkpoint.index_msg_timestamp);
        }
        oldest - 3000
    };
    let size = config.mapped_file_size_commit_log;
    let opener = DmaDirectory {
        dir: config.commit_log_dir(),
    };
    warn_removed(remove_unfinished_segments(&opener.dir)?);
    let segments = list_segments(&opener.dir, size)?;
    let (from, mode) = walk_start(&opener, size, &segments, clean, Some(min_timestamp)).await?;
    let verify = config.check_crc_on_recover;
    let valid_end = walk(
        &opener,
        size,
        &segments,
        from,
        verify,
        u64::MAX,
        &mut FindEnd,
    )
    .await?;
    let walk_start_offset = segments.get(from).copied().unwrap_or(0);
    let segments = if segments.is_empty() {
        segments
    } else {
        cut_tail(config, &segments, valid_end).await?
    };
    let min_physical = segments.first().copied().unwrap_or(valid_end);
    shared.set_committed_end(valid_end);
    // Recovery read it back from the files: nothing of it waits for a flush of this run.
    shared.set_flushed_end(valid_end);
    shared.set_min_physical_offset(min_physical);
    // What the last run synced stays synced: the checkpoint written at the end of recovery
    // (and before the first put's sync) must not claim less, or a crash right after this
    // start would walk and re-dispatch the whole CommitLog.
    shared.set_synced_store_timestamp(checkpoint.physic_msg_timestamp);

    let queues = recover_queues(&shared, valid_end, min_physical).await?;
    let index = if config.message_index_enable {
        check_index_file_sizes(config)?;
        Some(IndexService::load(
            &config.index_dir(),
            config.max_hash_slot_num,
            config.max_index_num,
            clean,
            checkpoint.index_msg_timestamp,
            valid_end,
        )?)
    } else {
        None
    };
    // Files the index dropped may have begun long before the walk's start: re-dispatch from
    // the end of what it kept, so that every key is indexed again.
    let index_rebuild_from = index
        .as_ref()
        .and_then(IndexService::rebuild_from)
        .map(|end| u64::try_from(end).unwrap_or(0).max(min_physical));
    let mut reput = Reput::new(Arc::clone(&shared), index, checkpoint).await?;
    let table_redispatch_from = match mode {
        RecoveryMode::Fresh => valid_end,
        // A clean stop synced the queues and the index: only records after the queues' end
        // (e.g. trailing transaction records, which enter no queue) are looked at again.
        RecoveryMode::Normal => queues
            .values()
            .copied()
            .max()
            .unwrap_or(0)
            .max(min_physical)
            .min(valid_end),
        RecoveryMode::Abnormal | RecoveryMode::AbnormalFromFirst => walk_start_offset,
    };
    let redispatch_from = index_rebuild_from.map_or(table_redispatch_from, |index_end| {
        table_redispatch_from.min(index_end)
    });
    let mut redispatch = Redispatch {
        reput: &mut reput,
        pending: Vec::new(),
        count: 0,
    };
    if redispatch_from < valid_end {
        let start_segment = segment_start(redispatch_from, size);
        let index = segments
            .iter()
            .position(|s| *s == start_segment)
            .unwrap_or(0);
        walk(
            &opener,
            size,
            &segments,
            index,
            verify,
            redispatch_from,
            &mut redispatch,
        )
        .await?;
    }
    let redispatched = redispatch.count;
    reput.dispatched_to(valid_end);
    reput.publish().await;
    reput.flush().await?;
    let queue_offsets = shared
        .queues()
        .into_iter()
        .map(|(key, state)| (key, state.max_offset()))
        .collect();
    let report = RecoveryReport {
        mode,
        walk_start: walk_start_offset,
        valid_end,
        redispatch_from,
        redispatched,
        queues: queues.len(),
    };
    tracing::info!(?report, "store recovered");
    Ok((
        reput,
        WriterStart {
            valid_end,
            queue_offsets,
        },
        report,
    ))
}

/// Re-dispatch during recovery: entries gathered per chunk, applied at each chunk's end.
struct Redispatch<'a> {
    reput: &'a mut Reput,
    pending: Vec<DispatchEntry>,
    count: u64,
}

impl WalkVisitor for Redispatch<'_> {
    fn visit(&mut self, meta: RecordMeta<'_>) {
        let levels = &self.reput.shared().config.message_delay_level;
        self.pending.push(dispatch_entry(&meta, levels));
    }

    async fn chunk_done(&mut self) {
        for entry in self.pending.drain(..) {
            self.count += 1;
            if let Err(error) = self.reput.apply(&entry).await {
                tracing::error!(%error, offset = entry.physical_offset, "re-dispatch failed");
            }
        }
    }
}

/// Recovers every queue under `consumequeue/`; returns each queue's CommitLog end.
async fn recover_queues(
    shared: &Arc<StoreShared>,
    valid_end: u64,
    min_physical: u64,
) -> Result<HashMap<QueueKey, u64>, StoreError> {
    let config = &shared.config;
    let units = config.consume_queue_units_per_file;
    let mut ends = HashMap::new();
    for topic_entry in read_dir(&config.consume_queue_dir())? {
        let Ok(topic) = topic_entry.file_name().into_string() else {
            continue;
        };
        for queue_entry in read_dir(&topic_entry.path())? {
            let Some(queue_id) = queue_entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let dir = queue_entry.path();
            warn_removed(remove_unfinished_segments(&dir)?);
            let files = read_dir(&dir)?;
            let mut starts = Vec::with_capacity(files.len());
            for file in &files {
                let Some(start) = file.file_name().to_str().and_then(parse_segment_name) else {
                    continue;
                };
                let path = file.path();
                if file_len(&path)? == 0 {
                    // Made by dispatch and cut short by a crash before its first sync: the
                    // checkpoint covers none of its units (`QueueDirectory`).
                    tracing::warn!(file = %path.display(), "deleting empty ConsumeQueue file");
                    std::fs::remove_file(&path).map_err(IoError::on("delete", &path))?;
                    continue;
                }
                check_queue_file_size(file, units)?;
                cut_to_size(&path, u64::try_from(units * UNIT_SIZE).expect("fits u64"))?;
                starts.push(start);
            }
            starts.sort_unstable();
            let opener = DmaDirectory { dir: dir.clone() };
            let (recovered, beyond) =
                recover_queue(&opener, units, &starts, valid_end, min_physical).await?;
            for start in beyond {
                let path = dir.join(super::segment::segment_name(start));
                std::fs::remove_file(&path).map_err(IoError::on("delete", &path))?;
            }
            let state = shared.queue_or_insert(&topic, queue_id);
            state.set_max_offset(recovered.max_offset);
            state.set_min_offset(recovered.min_offset);
            ends.insert((topic.clone(), queue_id), recovered.max_physical_end);
        }
    }
    Ok(ends)
}

/// Refuses a ConsumeQueue file whose size says it was written with another
/// `mappedFileSizeConsumeQueue`: read with ours, it would be misread, extended (its first
/// block zeroed) or, as a "gap", deleted. One block more is a crash between the padded write
/// of the last block and the cut back to size.
fn check_queue_file_size(file: &std::fs::DirEntry, units: usize) -> Result<(), StoreError> {
    let size = u64::try_from(units * UNIT_SIZE).expect("fits u64");
    let len = file_len(&file.path())?;
    if len < size || len > size.next_multiple_of(4096) {
        return Err(StoreError::Layout(format!(
            "ConsumeQueue file {} is {len} bytes, but mappedFileSizeConsumeQueue is {size}",
            file.path().display()
        )));
    }
    Ok(())
}

/// Cuts a ConsumeQueue file back to its size: an older ferromq wrote its last block padded
/// and cut the file back after, and a crash in between left it longer, which the Java broker
/// refuses to load ("length not matched"). What is cut is padding.
fn cut_to_size(path: &Path, size: u64) -> Result<(), StoreError> {
    if file_len(path)? > size {
        tracing::warn!(file = %path.display(), size, "cutting a ConsumeQueue file to its size");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(IoError::on("open", path))?;
        file.set_len(size).map_err(IoError::on("truncate", path))?;
        file.sync_all().map_err(IoError::on("sync", path))?;
    }
    Ok(())
}

/// Refuses IndexFiles of another layout than `maxHashSlotNum` and `maxIndexNum` give: mapped
/// with ours, they would be resized and their slots misread and overwritten. An empty file
/// is a crash between creating a file and sizing it, not another layout: it holds nothing,
/// and loading the index drops it (no valid header) and re-dispatch rebuilds what it lacks.
fn check_index_file_sizes(config: &StoreConfig) -> Result<(), StoreError> {
    let (slots, items) = (config.max_hash_slot_num, config.max_index_num);
    let size = u64::try_from(index_file_size(slots, items)).expect("fits u64");
    for file in read_dir(&config.index_dir())? {
        let is_index = file
            .file_name()
            .to_str()
            .is_some_and(|n| n.len() == 17 && n.bytes().all(|b| b.is_ascii_digit()));
        let len = file_len(&file.path())?;
        if is_index && len != size && len != 0 {
            return Err(StoreError::Layout(format!(
                "IndexFile {} is {len} bytes, but maxHashSlotNum {slots} and maxIndexNum \
                 {items} make {size}",
                file.path().display()
            )));
        }
    }
    Ok(())
}

/// Logs each unfinished segment [`remove_unfinished_segments`] deleted.
fn warn_removed(removed: Vec<std::path::PathBuf>) {
    for path in removed {
        tracing::warn!(file = %path.display(), "deleted a segment whose making a crash cut short");
    }
}

fn file_len(path: &Path) -> Result<u64, StoreError> {
    let metadata = std::fs::metadata(path).map_err(IoError::on("stat", path))?;
    Ok(metadata.len())
}

fn read_dir(dir: &Path) -> Result<Vec<std::fs::DirEntry>, StoreError> {
    let entries = std::fs::read_dir(dir).map_err(IoError::on("list", dir))?;
    let mut all: Vec<_> = entries.filter_map(Result::ok).collect();
    all.sort_by_key(std::fs::DirEntry::file_name);
    Ok(all)
}

fn create_dir(dir: &Path) -> Result<(), StoreError> {
    ferromq_uring::disk::create_dir_durably(dir)
        .map_err(|source| IoError::file("create directory", dir, source))?;
    Ok(())
}

/// The writer side's view of commits: the disk gate, the dispatch entries, the hand-over.
struct StoreObserver {
    shared: Arc<StoreShared>,
    pending: Vec<DispatchEntry>,
    /// Topics deleted, with the CommitLog offset their drop comes at, for dispatch.
    drops: Vec<TopicDrop>,
    batches: mpsc::Sender<CommittedBatch>,
}

impl CommitObserver for StoreObserver {
    fn admit(&mut self, _message: &PutMessage) -> Result<(), StoreError> {
        if self.shared.is_slave() {
            return Err(StoreError::Slave);
        }
        match self.shared.disk_full() {
            Some(used_percent) => Err(StoreError::DiskFull { used_percent }),
            None => Ok(()),
        }
    }

    fn appended(&mut self, message: &PutMessage, appended: &Appended, store_timestamp: i64) {
        let meta = RecordMeta {
            topic: &message.topic,
            queue_id: message.queue_id,
            queue_offset: appended.queue_offset,
            physical_offset: i64::try_from(appended.physical_offset).unwrap_or(i64::MAX),
            size: appended.size,
            sys_flag: message.sys_flag,
            store_timestamp,
            properties: &message.properties,
        };
        let entry = dispatch_entry(&meta, &self.shared.config.message_delay_level);
        self.pending.push(entry);
    }

    fn replicated(&mut self, moved_to: Option<u64>, entries: Vec<DispatchEntry>) {
        if let Some(start) = moved_to {
            // An empty slave's log moved to its master's last segment: it begins there.
            self.shared.set_min_physical_offset(start);
            self.shared.set_committed_end(start);
            self.shared.set_flushed_end(start);
        }
        self.pending.extend(entries);
    }

    fn committing(&mut self, end: u64) {
        self.shared.set_committed_end(end);
    }

    async fn committed(&mut self, end: u64) {
        self.shared.set_committed_end(end);
        // Entries are in CommitLog order; those past `end` were appended while the write
        // ran and belong to the next one. (A replica's end may fall inside a record, whose
        // entry waits for the commit that covers its end.)
        let end_offset = i64::try_from(end).unwrap_or(i64::MAX);
        let committed = self
            .pending
            .partition_point(|entry| entry.end() <= end_offset);
        let dropped = self.drops.partition_point(|drop| drop.at <= end);
        let batch = CommittedBatch {
            entries: self.pending.drain(..committed).collect(),
            end,
            drops: self.drops.drain(..dropped).collect(),
        };
        // Dispatch gone means the store is stopping; recovery re-dispatches what it missed.
        let _ = self.batches.send(batch).await;
    }

    async fn topic_dropped(&mut self, drop: TopicDrop) {
        self.drops.push(drop);
        if self.pending.is_empty() {
            // Every record appended is committed and handed over: the drop goes now, after
            // them, instead of with the next commit.
            let batch = CommittedBatch {
                entries: Vec::new(),
                end: self.shared.committed_end(),
                drops: std::mem::take(&mut self.drops),
            };
            let _ = self.batches.send(batch).await;
        }
    }

    fn abandoned(&mut self) {
        self.pending.clear();
    }

    fn synced(&mut self, store_timestamp: i64) {
        self.shared.set_synced_store_timestamp(store_timestamp);
    }

    fn flushed_to(&mut self, end: u64) {
        self.shared.set_flushed_end(end);
    }
}

/// Runs the CommitLog writer (on the writer shard) until the put channel closes.
///
/// # Errors
/// [`StoreError`] if the CommitLog cannot be opened at the recovered end.
pub async fn run_writer(
    shared: Arc<StoreShared>,
    start: WriterStart,
    requests: mpsc::Receiver<PutRequest>,
    batches: mpsc::Sender<CommittedBatch>,
) -> Result<GroupCommitStats, StoreError> {
    let config = &shared.config;
    let opener =
        CommitLogDirectory::new(config.commit_log_dir(), SegmentOptions::for_store(config));
    let log = CommitLog::open(
        opener,
        config.mapped_file_size_commit_log,
        start.valid_end,
        start.queue_offsets,
    )
    .await?;
    let mode = config.flush_disk_type;
    let mut observer = StoreObserver {
        shared: Arc::clone(&shared),
        pending: Vec::new(),
        drops: Vec::new(),
        batches,
    };
    let (_log, stats) =
        run_group_commit_with(log, requests, mode, wall_clock_ms, &mut observer).await;
    Ok(stats)
}

/// Marks the store "running" (the `abort` file, removed on a clean stop).
///
/// # Errors
/// [`StoreError::Io`].
pub fn create_abort_file(config: &StoreConfig) -> Result<(), StoreError> {
    let path = config.root_file("abort");
    let file = File::create(&path).and_then(|f| f.sync_all());
    file.map_err(IoError::on("create", &path))?;
    Ok(())
}

/// A store whose writer and dispatch run on the current executor.
#[derive(Debug)]
pub struct LocalStore {
    handle: StoreHandle,
    report: RecoveryReport,
    writer: glommio::task::JoinHandle<Result<GroupCommitStats, StoreError>>,
    reput: glommio::task::JoinHandle<Reput>,
    lock: StoreLock,
}

impl LocalStore {
    /// Locks, recovers and starts the store under `config` on this executor.
    ///
    /// # Errors
    /// [`StoreError`] from the lock, recovery or opening the CommitLog.
    pub async fn open(config: StoreConfig) -> Result<LocalStore, StoreError> {
        let started = Instant::now();
        let lock = StoreLock::acquire(&config.store_path_root_dir)?;
        let shared = Arc::new(StoreShared::new(config));
        let (reput, start, report) = recover_store(Arc::clone(&shared)).await?;
        create_abort_file(&shared.config)?;
        let channels = StoreChannels::new(Arc::clone(&shared));
        let writer = glommio::spawn_local(run_writer(
            Arc::clone(&shared),
            start,
            channels.puts,
            channels.batches_tx,
        ))
        .detach();
        let reput = glommio::spawn_local(run_reput(
            reput,
            channels.batches_rx,
            channels.queries,
            channels.control,
        ))
        .detach();
        tracing::info!(elapsed_ms = started.elapsed().as_millis(), "store open");
        Ok(LocalStore {
            handle: channels.handle,
            report,
            writer,
            reput,
            lock,
        })
    }

    /// The handle.
    #[must_use]
    pub fn handle(&self) -> &StoreHandle {
        &self.handle
    }

    /// What recovery did at open.
    #[must_use]
    pub fn recovery(&self) -> &RecoveryReport {
        &self.report
    }

    /// Stops cleanly: refuses new puts, finishes the writer's and dispatch's work, syncs,
    /// writes the checkpoint and removes the `abort` file.
    ///
    /// # Errors
    /// [`StoreError`] if the writer failed or the `abort` file cannot be removed.
    pub async fn shutdown(self) -> Result<GroupCommitStats, StoreError> {
        self.handle.close();
        let LocalStore {
            handle,
            writer,
            reput,
            lock,
            ..
        } = self;
        let stats = writer.await.ok_or(StoreError::ShuttingDown)??;
        let _reput = reput.await;
        let abort = handle.shared().config.root_file("abort");
        std::fs::remove_file(&abort).map_err(IoError::on("delete", &abort))?;
        drop(lock);
        Ok(stats)
    }
}
