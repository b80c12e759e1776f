//! The slave half of classic HA (4.9's `HAClient`, `reference/ha.md` §2.3): a SLAVE connects
//! to its master's HA address, reports the CommitLog offset it needs as 8 bytes, and appends
//! the bytes of every frame it is sent at that frame's offset, through the writer, as a
//! master appends its puts: the slave's CommitLog is a copy of the master's, byte for byte,
//! and its ConsumeQueues, IndexFiles and recovery are those of any store.
//!
//! Rules:
//! - The master's HA address is `haMasterAddress` if configured, else the one the name
//!   server answered REGISTER_BROKER with (4.9's `updateMasterHAServerAddrPeriodically`).
//! - The first report goes at once on connecting (4.9's waits up to
//!   `haSendHeartbeatInterval`); later ones after each frame is written, and every
//!   `haSendHeartbeatInterval` without one. A report counts only written bytes, so what the
//!   master hears acknowledged survives a kill -9 of the slave.
//! - A frame whose offset is not this slave's end, or whose bytes do not continue its
//!   records (a record's magic, size, CRC or physical offset wrong where one starts), means
//!   the logs diverged: it is refused with an error line, nothing of it is appended, and the
//!   connection closes (Java's slave appends whatever comes at its end).
//! - Frames are read while earlier ones are written, at most [`FRAMES_IN_FLIGHT_MAX`] at
//!   once; when a connection ends, every frame handed to the writer is written before the
//!   next connection reports where it stands.
//! - A master silent for `haHousekeepingInterval` is dropped; a failed connect is tried
//!   again after [`RECONNECT_PAUSE`] (Java's 5 s).

use super::ha::{HaConfig, TRANSFER_HEADER_SIZE};
use crate::broker::state::{LinkState, MasterAddrs};
use crate::store::dispatch::{dispatch_entry, DelayLevels, DispatchEntry, RecordMeta};
use crate::store::flush::PutResult;
use crate::store::message::{decode_record, Record, RecordError};
use crate::store::message_store::StoreHandle;
use crate::store::segment::segment_start;
use crate::store::segment_writer::StoreError;
use ferromq_shards::Shutdown;
use ferromq_uring::net::{prepare_stream, TcpStream};
use futures::channel::{mpsc, oneshot};
use futures::future::{select, Either};
use futures::{SinkExt, StreamExt};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// Frames handed to the writer and not yet written, at most: 2 MiB of 32 KiB frames.
pub const FRAMES_IN_FLIGHT_MAX: usize = 64;

/// Wait after a failed connect (4.9's `HAClient` waits 5 s).
pub const RECONNECT_PAUSE: Duration = Duration::from_secs(5);

/// How long a connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Bytes read from the master at once (4.9's slave reads into 4 MiB).
const READ_BUFFER: usize = 4 << 20;

/// Slack over `maxMessageSize` for a record's other fields (topic, properties, header).
const RECORD_OVERHEAD_MAX: usize = 1 << 20;

/// Why a connection to the master ended.
enum LinkEnd {
    /// Connect again.
    Closed(String),
    /// The store refused what was replicated: following stops until a restart.
    Fatal(String),
}

/// Follows the master until `shutdown`: connects, takes its CommitLog, reconnects.
pub async fn follow(
    store: StoreHandle,
    config: HaConfig,
    configured: Option<String>,
    learned: std::sync::Arc<MasterAddrs>,
    shutdown: Shutdown,
) {
    let shared = std::sync::Arc::clone(store.shared());
    let mut cursor = RecordCursor::new(
        shared.config.mapped_file_size_commit_log,
        shared.config.max_message_size + RECORD_OVERHEAD_MAX,
        shared.config.message_delay_level.clone(),
    );
    let mut waiting_logged = false;
    while !shutdown.is_triggered() {
        let Some(target) = learned.ha_target(configured.as_deref()) else {
            if !waiting_logged {
                tracing::info!("slave: waiting for the name server to tell the master's address");
                waiting_logged = true;
            }
            pause(Duration::from_millis(200), &shutdown).await;
            continue;
        };
        let addr = match resolve(&target) {
            Ok(addr) => addr,
            Err(reason) => {
                tracing::warn!(master = %target, %reason, "slave: bad master HA address");
                pause(RECONNECT_PAUSE, &shutdown).await;
                continue;
            }
        };
        let stream = match ferromq_uring::net::connect(addr, CONNECT_TIMEOUT).await {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!(master = %addr, %error, "slave: cannot reach the master's HA port");
                learned.set_link(LinkState::Down(Some(format!("connect failed: {error}"))));
                pause(RECONNECT_PAUSE, &shutdown).await;
                continue;
            }
        };
        let link = Link {
            store: &store,
            config,
            master: addr,
        };
        learned.set_link(LinkState::Up(addr));
        let outcome = match select(
            Box::pin(link.run(stream, &mut cursor)),
            Box::pin(shutdown.wait()),
        )
        .await
        {
            Either::Left((end, _)) => Either::Left(end),
            Either::Right(((), _)) => Either::Right(()),
        };
        match outcome {
            Either::Left(LinkEnd::Closed(reason)) => {
                learned.set_link(LinkState::Down(Some(reason.clone())));
                tracing::info!(master = %addr, %reason, "slave: HA connection closed");
                // Not at once: a master that refuses what this slave holds would be asked
                // again in a loop.
                pause(Duration::from_secs(1), &shutdown).await;
            }
            Either::Left(LinkEnd::Fatal(reason)) => {
                tracing::error!(
                    master = %addr,
                    %reason,
                    "slave: the store refused replicated bytes; replication stops until restart"
                );
                learned.set_link(LinkState::Stopped(reason));
                return;
            }
            Either::Right(()) => return,
        }
    }
}

async fn pause(time: Duration, shutdown: &Shutdown) {
    let _ = select(
        Box::pin(glommio::timer::sleep(time)),
        Box::pin(shutdown.wait()),
    )
    .await;
}

fn resolve(target: &str) -> Result<SocketAddr, String> {
    target
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or_else(|| "resolves to nothing".to_owned())
}

/// One connection to the master.
struct Link<'a> {
    store: &'a StoreHandle,
    config: HaConfig,
    master: SocketAddr,
}

impl Link<'_> {
    async fn run(&self, stream: TcpStream, cursor: &mut RecordCursor) -> LinkEnd {
        if let Err(error) = prepare_stream(&stream, Some(self.config.housekeeping_interval)) {
            return LinkEnd::Closed(error.to_string());
        }
        if let Err(error) = stream.set_write_timeout(Some(self.config.housekeeping_interval)) {
            return LinkEnd::Closed(error.to_string());
        }
        let (mut rx, mut tx) = ferromq_uring::net::split(stream);
        // Everything handed to the writer before is written: its end is this slave's end.
        let start = self.store.shared().committed_end();
        if let Err(reason) = cursor.resume_at(start) {
            return LinkEnd::Fatal(reason);
        }
        tracing::info!(master = %self.master, offset = start, "slave: connected, reporting");
        let (written_tx, mut written_rx) = mpsc::channel(FRAMES_IN_FLIGHT_MAX);
        // The read side runs until the connection fails, and is always awaited: it never
        // drops a frame between handing it to the writer and queueing its answer.
        let reading = glommio::spawn_local({
            let store = self.store.clone();
            let spare = cursor.detached();
            let mut cursor = std::mem::replace(cursor, spare);
            async move {
                let end = read_frames(&mut rx, &store, &mut cursor, start, written_tx).await;
                (end, cursor)
            }
        });
        let reported = self.report(&mut tx, start, &mut written_rx).await;
        // Whatever ended the reports, the read side must end too, then every frame handed
        // to the writer is waited for.
        let _ = ferromq_uring::net::shutdown_both(std::os::fd::AsFd::as_fd(&tx));
        // Answers are taken while the read side ends: it may be waiting for room to queue
        // one. The queue closes when the read side ends.
        let mut fatal = None;
        let drain = async {
            while let Some(answer) = written_rx.next().await {
                if let Ok(Err(error)) = answer.await {
                    fatal.get_or_insert(error.to_string());
                }
            }
        };
        let ((read_end, read_cursor), ()) = futures::future::join(reading, drain).await;
        *cursor = read_cursor;
        match (fatal, reported) {
            (Some(reason), _) | (None, Err(LinkEnd::Fatal(reason))) => LinkEnd::Fatal(reason),
            (None, Err(closed)) => closed,
            (None, Ok(())) => read_end,
        }
    }

    /// Reports the slave's end at once, after each frame written, and every heartbeat
    /// interval; returns `Ok` once the read side ended (its answers all taken).
    async fn report<W: futures_lite::AsyncWrite + Unpin>(
        &self,
        tx: &mut W,
        start: u64,
        written: &mut mpsc::Receiver<oneshot::Receiver<PutResult>>,
    ) -> Result<(), LinkEnd> {
        let mut end = start;
        send_report(tx, end).await?;
        loop {
            let next = select(
                written.next(),
                Box::pin(glommio::timer::sleep(self.config.heartbeat_interval)),
            )
            .await;
            match next {
                Either::Left((None, _)) => return Ok(()),
                Either::Left((Some(answer), _)) => {
                    end = written_end(answer.await)?;
                    // Frames written meanwhile go in the same report.
                    while let Ok(answer) = written.try_recv() {
                        end = written_end(answer.await)?;
                    }
                    send_report(tx, end).await?;
                }
                Either::Right(((), _)) => send_report(tx, end).await?,
            }
        }
    }
}

fn written_end(answer: Result<PutResult, oneshot::Canceled>) -> Result<u64, LinkEnd> {
    match answer {
        Ok(Ok(appended)) => Ok(appended.physical_offset + appended.size as u64),
        Ok(Err(error)) => Err(LinkEnd::Fatal(error.to_string())),
        Err(_) => Err(LinkEnd::Fatal(StoreError::ShuttingDown.to_string())),
    }
}

async fn send_report<W: futures_lite::AsyncWrite + Unpin>(
    tx: &mut W,
    end: u64,
) -> Result<(), LinkEnd> {
    let report = i64::try_from(end).unwrap_or(i64::MAX).to_be_bytes();
    let sent = async {
        tx.write_all(&report).await?;
        tx.flush().await
    };
    sent.await
        .map_err(|e| LinkEnd::Closed(format!("report failed: {e}")))
}

/// Reads frames and hands each one's bytes to the writer, until the connection ends or a
/// frame is refused; queues each answer on `written`.
async fn read_frames<R: futures_lite::AsyncRead + Unpin>(
    rx: &mut R,
    store: &StoreHandle,
    cursor: &mut RecordCursor,
    start: u64,
    mut written: mpsc::Sender<oneshot::Receiver<PutResult>>,
) -> LinkEnd {
    let mut buffer = vec![0u8; READ_BUFFER];
    let mut filled = 0usize;
    let mut end = start;
    loop {
        // Frames whole in the buffer.
        let mut at = 0usize;
        while filled - at >= TRANSFER_HEADER_SIZE {
            let header = &buffer[at..at + TRANSFER_HEADER_SIZE];
            let offset = i64::from_be_bytes(header[..8].try_into().expect("8 bytes"));
            let size = i32::from_be_bytes(header[8..].try_into().expect("4 bytes"));
            let (Ok(offset), Ok(size)) = (u64::try_from(offset), usize::try_from(size)) else {
                return LinkEnd::Closed(format!("bad frame header: offset {offset}, size {size}"));
            };
            if size > READ_BUFFER - TRANSFER_HEADER_SIZE {
                return LinkEnd::Closed(format!("a frame of {size} bytes, more than taken"));
            }
            // Java's rule: an empty slave takes what comes; else a frame starts at its end.
            if end != 0 && offset != end {
                return LinkEnd::Closed(diverged(format!(
                    "the master sent offset {offset}, but this slave's CommitLog ends at {end}"
                )));
            }
            if filled - at < TRANSFER_HEADER_SIZE + size {
                break;
            }
            let body = &buffer[at + TRANSFER_HEADER_SIZE..at + TRANSFER_HEADER_SIZE + size];
            at += TRANSFER_HEADER_SIZE + size;
            if size == 0 {
                continue; // A heartbeat.
            }
            let entries = match cursor.feed(offset, body) {
                Ok(entries) => entries,
                Err(reason) => return LinkEnd::Closed(diverged(reason)),
            };
            let answer = match store.replicate(offset, body.to_vec(), entries).await {
                Ok(answer) => answer,
                Err(error) => return LinkEnd::Fatal(error.to_string()),
            };
            if written.send(answer).await.is_err() {
                return LinkEnd::Closed("the reports ended".to_owned());
            }
            end = offset + size as u64;
        }
        buffer.copy_within(at..filled, 0);
        filled -= at;
        match rx.read(&mut buffer[filled..]).await {
            Ok(0) => return LinkEnd::Closed("the master closed the connection".to_owned()),
            Ok(n) => filled += n,
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
                return LinkEnd::Closed("nothing read for haHousekeepingInterval".to_owned());
            }
            Err(error) => return LinkEnd::Closed(format!("read failed: {error}")),
        }
    }
}

/// Logs that the logs diverged, once per refusal; the reason the connection closes.
fn diverged(reason: String) -> String {
    tracing::error!(
        %reason,
        "slave: this CommitLog is not a copy of the master's; refusing the master's bytes \
         (nothing appended). Give the slave an empty store, or the master the store it had"
    );
    format!("diverged: {reason}")
}

/// Finds the records in the replicated bytes: where each starts, checked (magic, size, body
/// CRC, its physical offset field), and the dispatch entry of each one whole. Public for the
/// fuzz target of the HA stream.
#[derive(Debug)]
pub struct RecordCursor {
    segment_size: u64,
    record_max: usize,
    delay_levels: DelayLevels,
    /// CommitLog offset of `carry[0]`.
    start: u64,
    /// Bytes of a record not whole yet.
    carry: Vec<u8>,
    /// Bytes left of a blank record's segment end, to step over.
    skip: u64,
    /// Whether `start` is known: set by the first frame, or a resume.
    placed: bool,
}

impl RecordCursor {
    /// A cursor over an empty log of `segment_size` segments, taking records up to
    /// `record_max` bytes.
    #[must_use]
    pub fn new(segment_size: u64, record_max: usize, delay_levels: DelayLevels) -> RecordCursor {
        RecordCursor {
            segment_size,
            record_max,
            delay_levels,
            start: 0,
            carry: Vec::new(),
            skip: 0,
            placed: false,
        }
    }

    /// An empty cursor of the same settings, left behind while this one is lent out.
    fn detached(&self) -> RecordCursor {
        RecordCursor::new(
            self.segment_size,
            self.record_max,
            self.delay_levels.clone(),
        )
    }

    /// Where the log ends (after recovery, a record's end; 0 when empty). What the cursor
    /// has seen on an earlier connection must end there (a record not whole yet is kept).
    fn resume_at(&mut self, end: u64) -> Result<(), String> {
        if !self.placed {
            self.start = end;
            self.placed = end != 0;
            return Ok(());
        }
        let seen_end = self.start + self.carry.len() as u64;
        if seen_end != end {
            return Err(format!(
                "the replicated records end at {seen_end}, but the CommitLog at {end}"
            ));
        }
        Ok(())
    }

    /// Takes `bytes` at `offset` (the end of what it has seen); returns the entries of the
    /// records they complete, or why they do not continue the log. On an error it is as
    /// before the call.
    ///
    /// # Errors
    /// Bytes that do not continue the log, with why.
    pub fn feed(&mut self, offset: u64, bytes: &[u8]) -> Result<Vec<DispatchEntry>, String> {
        let saved = (self.placed, self.start, self.carry.len(), self.skip);
        if !self.placed {
            if !offset.is_multiple_of(self.segment_size) {
                return Err(format!(
                    "an empty slave is sent offset {offset}, not a segment's start"
                ));
            }
            self.start = offset;
            self.placed = true;
        }
        let result = self.feed_placed(bytes);
        if result.is_err() {
            (self.placed, self.start) = (saved.0, saved.1);
            self.carry.truncate(saved.2);
            self.skip = saved.3;
        }
        result
    }

    fn feed_placed(&mut self, bytes: &[u8]) -> Result<Vec<DispatchEntry>, String> {
        let mut bytes = bytes;
        if self.skip > 0 {
            let step = usize::try_from(self.skip)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            bytes = &bytes[step..];
            self.skip -= step as u64;
            self.start += step as u64;
        }
        self.carry.extend_from_slice(bytes);
        let mut entries = Vec::new();
        let mut at = 0usize;
        while at < self.carry.len() {
            let offset = self.start + at as u64;
            let segment_end = segment_start(offset, self.segment_size) + self.segment_size;
            match decode_record(&self.carry[at..], true) {
                Ok(Record::Message { record, size }) => {
                    if u64::try_from(record.physical_offset).ok() != Some(offset) {
                        return Err(format!(
                            "the record at {offset} says it is at {}",
                            record.physical_offset
                        ));
                    }
                    if offset + size as u64 > segment_end {
                        return Err(format!("the record at {offset} runs past its segment"));
                    }
                    let meta = RecordMeta::of(&record, size);
                    entries.push(dispatch_entry(&meta, &self.delay_levels));
                    at += size;
                }
                Ok(Record::Blank { remaining }) => {
                    if offset + remaining as u64 != segment_end {
                        return Err(format!(
                            "the blank record at {offset} does not end its segment"
                        ));
                    }
                    let here = (self.carry.len() - at).min(remaining);
                    self.skip = (remaining - here) as u64;
                    at += here;
                }
                Err(RecordError::Truncated { needed, .. }) => {
                    if needed > self.record_max || offset + needed as u64 > segment_end {
                        return Err(format!("the record at {offset} claims {needed} bytes"));
                    }
                    break;
                }
                Err(error) => return Err(format!("at {offset}: {error}")),
            }
        }
        self.carry.drain(..at);
        self.start += at as u64;
        // While a blank's segment end is stepped over, nothing else is carried.
        debug_assert!(self.skip == 0 || self.carry.is_empty());
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::message::{blank_record, MessageRecord};

    fn record(offset: u64, queue_offset: i64, body: &[u8]) -> Vec<u8> {
        let host: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        MessageRecord {
            queue_offset,
            physical_offset: i64::try_from(offset).expect("offset"),
            born_timestamp: 1,
            born_host: host,
            store_timestamp: 2,
            store_host: host,
            ..MessageRecord::new("T", body, b"")
        }
        .to_bytes()
    }

    /// A segment of 4 KiB: records, then a blank to its end; then a record in the next.
    fn log() -> (Vec<u8>, usize) {
        let mut log = Vec::new();
        let mut count = 0;
        while log.len() + 300 < 4096 {
            let r = record(log.len() as u64, count, &[7u8; 100]);
            log.extend_from_slice(&r);
            count += 1;
        }
        let remaining = 4096 - log.len();
        log.extend_from_slice(&blank_record(remaining));
        log.resize(4096, 0);
        let next = record(4096, count, b"next");
        log.extend_from_slice(&next);
        (log, usize::try_from(count).expect("count") + 1)
    }

    fn cursor() -> RecordCursor {
        RecordCursor::new(4096, 1 << 20, DelayLevels::default())
    }

    #[test]
    fn records_cut_anywhere_come_out_whole_once_each() {
        let (log, records) = log();
        for cut in [1usize, 7, 100, 333, 4096, 5000] {
            let mut c = cursor();
            let mut entries = Vec::new();
            let mut at = 0;
            while at < log.len() {
                // Frames never cross a segment.
                let segment_end = (at / 4096 + 1) * 4096;
                let end = (at + cut).min(log.len()).min(segment_end);
                entries.extend(c.feed(at as u64, &log[at..end]).expect("continues"));
                at = end;
            }
            assert_eq!(entries.len(), records, "cut {cut}");
            let offsets: Vec<i64> = entries.iter().map(|e| e.physical_offset).collect();
            assert!(offsets.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(*offsets.last().expect("one"), 4096);
            assert!(c.carry.is_empty());
        }
    }

    #[test]
    fn bytes_that_do_not_continue_the_log_are_refused_and_change_nothing() {
        let (log, _) = log();
        let mut c = cursor();
        c.feed(0, &log[..150]).expect("a start");
        // The next bytes from elsewhere: the record's middle is replaced by another's start.
        let foreign = record(999, 0, b"x");
        let mut wrong = log[150..400].to_vec();
        wrong[..foreign.len().min(250)].copy_from_slice(&foreign[..foreign.len().min(250)]);
        assert!(c.feed(150, &wrong).is_err());
        // As before: the right bytes still go on.
        let entries = c.feed(150, &log[150..400]).expect("continues");
        assert_eq!(entries.len(), 2);
        // A log that starts mid-record is refused.
        let mut fresh = cursor();
        assert!(fresh.resume_at(150).is_ok());
        assert!(fresh.feed(150, &log[150..400]).is_err());
    }

    #[test]
    fn an_empty_slave_takes_a_segment_start_only() {
        let (log, _) = log();
        let mut c = cursor();
        c.resume_at(0).expect("empty");
        assert!(c.feed(100, &log[100..200]).is_err());
        let entries = c.feed(4096, &log[4096..]).expect("a segment's start");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].physical_offset, 4096);
    }
}
