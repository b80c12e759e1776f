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
//!   `haSendHeartbeatInterval`); later ones once what a read of the socket brought is
//!   written, and every `haSendHeartbeatInterval` without one. A read's whole frames go to
//!   the writer together (one request per segment they touch) and are acknowledged by one
//!   report; reads written by the time a report goes share it. 4.9's slave reports after
//!   each frame; the master takes either alike. A report counts only written bytes, so what
//!   the master hears acknowledged survives a kill -9 of the slave.
//! - A frame whose offset is not this slave's end, or whose bytes do not continue its
//!   records (a record's magic, size, CRC or physical offset wrong where one starts), means
//!   the logs diverged: it is refused with an error line, nothing of it is appended, and the
//!   connection closes (Java's slave appends whatever comes at its end).
//! - Frames are read while earlier ones are written, at most
//!   [`REPLICA_IN_FLIGHT_BYTES_MAX`] bytes of them at once; when a connection ends, every
//!   frame handed to the writer is written before the next connection reports where it
//!   stands.
//! - A master silent for `haHousekeepingInterval` is dropped; a failed connect is tried
//!   again after [`RECONNECT_PAUSE`] (Java's 5 s).

mod record_cursor;

pub use record_cursor::RecordCursor;

use super::ha::{HaConfig, TRANSFER_HEADER_SIZE};
use crate::broker::state::{LinkState, MasterAddrs};
use crate::store::dispatch::DispatchEntry;
use crate::store::flush::PutResult;
use crate::store::message_store::StoreHandle;
use crate::store::segment::segment_start;
use crate::store::segment_writer::StoreError;
use ferromq_shards::Shutdown;
use ferromq_uring::net::{prepare_stream, TcpStream};
use futures::channel::{mpsc, oneshot};
use futures::future::{select, Either};
use futures::{SinkExt, StreamExt};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::sync::{Semaphore, StaticPermit};
use std::collections::VecDeque;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::time::Duration;

/// Bytes handed to the writer and not yet reported, at most: two full reads.
pub const REPLICA_IN_FLIGHT_BYTES_MAX: usize = 2 * READ_BUFFER;

/// Reads handed to the writer and not yet reported, at most (each holds a share of
/// [`REPLICA_IN_FLIGHT_BYTES_MAX`]).
const READS_IN_FLIGHT_MAX: usize = 64;

/// Wait after a failed connect (4.9's `HAClient` waits 5 s).
pub const RECONNECT_PAUSE: Duration = Duration::from_secs(5);

/// How long a connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Bytes read from the master at once (4.9's slave reads into 4 MiB).
const READ_BUFFER: usize = 4 << 20;

/// Slack over `maxMessageSize` for a record's other fields (topic, properties, header).
const RECORD_OVERHEAD_MAX: usize = 1 << 20;

// A read's frames, handed over whole, always fit what may be in flight.
const _: () = assert!(READ_BUFFER <= REPLICA_IN_FLIGHT_BYTES_MAX);

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
            counts: std::sync::Arc::clone(&learned),
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
    /// Where the frames taken and the reports sent are counted.
    counts: std::sync::Arc<MasterAddrs>,
}

/// What one read of the socket handed to the writer: the answers of its requests, in order,
/// and its share of the bytes in flight, given back once it is reported.
struct Handed {
    answers: VecDeque<oneshot::Receiver<PutResult>>,
    _permit: StaticPermit,
}

impl Handed {
    /// Waits until all of it is written; the end of what it wrote, unless all was taken
    /// before.
    async fn written(&mut self) -> Result<Option<u64>, LinkEnd> {
        let mut end = None;
        while let Some(answer) = self.answers.front_mut() {
            let answer = answer.await;
            self.answers.pop_front();
            end = Some(written_end(answer)?);
        }
        Ok(end)
    }

    /// Waits until all of it is written; keeps the first error of the writer in `fatal`.
    async fn settle(self, fatal: &mut Option<String>) {
        for answer in self.answers {
            if let Ok(Err(error)) = answer.await {
                fatal.get_or_insert(error.to_string());
            }
        }
    }

    /// Takes the answers already given, in order: the end of what they wrote, if any.
    fn written_so_far(&mut self) -> Result<Option<u64>, LinkEnd> {
        let mut end = None;
        while let Some(answer) = self.answers.front_mut() {
            let Some(answer) = answer.try_recv().transpose() else {
                break;
            };
            self.answers.pop_front();
            end = Some(written_end(answer)?);
        }
        Ok(end)
    }

    /// Whether every answer was taken.
    fn done(&self) -> bool {
        self.answers.is_empty()
    }
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
        let (written_tx, mut written_rx) = mpsc::channel(READS_IN_FLIGHT_MAX);
        let in_flight = Rc::new(Semaphore::new(REPLICA_IN_FLIGHT_BYTES_MAX as u64));
        // The read side runs until the connection fails, and is always awaited: it never
        // drops a frame between handing it to the writer and queueing its answer.
        let reading = glommio::spawn_local({
            let store = self.store.clone();
            let spare = cursor.detached();
            let mut cursor = std::mem::replace(cursor, spare);
            let frames = Frames {
                store,
                counts: std::sync::Arc::clone(&self.counts),
                in_flight,
            };
            async move {
                let end = frames.read(&mut rx, &mut cursor, start, written_tx).await;
                (end, cursor)
            }
        });
        let mut pending = None;
        let reported = self
            .report(&mut tx, start, &mut written_rx, &mut pending)
            .await;
        // Whatever ended the reports, the read side must end too, then every frame handed
        // to the writer is waited for.
        let _ = ferromq_uring::net::shutdown_both(std::os::fd::AsFd::as_fd(&tx));
        // Answers are taken while the read side ends: it may be waiting for room to queue
        // one. The queue closes when the read side ends.
        let mut fatal = None;
        let drain = async {
            if let Some(handed) = pending.take() {
                handed.settle(&mut fatal).await;
            }
            while let Some(handed) = written_rx.next().await {
                handed.settle(&mut fatal).await;
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

    /// Reports the slave's end at once, once each read's frames are written (with the reads
    /// written by then), and every heartbeat interval; returns `Ok` once the read side ended
    /// (its answers all taken). A read handed over and not all written yet is left in
    /// `pending`.
    async fn report<W: futures_lite::AsyncWrite + Unpin>(
        &self,
        tx: &mut W,
        start: u64,
        written: &mut mpsc::Receiver<Handed>,
        pending: &mut Option<Handed>,
    ) -> Result<(), LinkEnd> {
        let mut end = start;
        self.send_report(tx, end).await?;
        loop {
            let handed = match pending {
                Some(handed) => handed,
                None => {
                    let next = select(
                        written.next(),
                        Box::pin(glommio::timer::sleep(self.config.heartbeat_interval)),
                    )
                    .await;
                    match next {
                        Either::Left((None, _)) => return Ok(()),
                        Either::Left((Some(handed), _)) => pending.insert(handed),
                        Either::Right(((), _)) => {
                            self.send_report(tx, end).await?;
                            continue;
                        }
                    }
                }
            };
            if let Some(written_end) = handed.written().await? {
                end = written_end;
            }
            *pending = None;
            // Reads written meanwhile go in the same report; one not all written yet waits
            // for the next, which goes as soon as it is.
            while let Ok(later) = written.try_recv() {
                let later = pending.insert(later);
                if let Some(written_end) = later.written_so_far()? {
                    end = written_end;
                }
                if !later.done() {
                    break;
                }
                *pending = None;
            }
            self.send_report(tx, end).await?;
        }
    }

    async fn send_report<W: futures_lite::AsyncWrite + Unpin>(
        &self,
        tx: &mut W,
        end: u64,
    ) -> Result<(), LinkEnd> {
        let report = i64::try_from(end).unwrap_or(i64::MAX).to_be_bytes();
        let sent = async {
            tx.write_all(&report).await?;
            tx.flush().await
        };
        sent.await
            .map_err(|e| LinkEnd::Closed(format!("report failed: {e}")))?;
        self.counts.sent_report();
        Ok(())
    }
}

fn written_end(answer: Result<PutResult, oneshot::Canceled>) -> Result<u64, LinkEnd> {
    match answer {
        Ok(Ok(appended)) => Ok(appended.physical_offset + appended.size as u64),
        Ok(Err(error)) => Err(LinkEnd::Fatal(error.to_string())),
        Err(_) => Err(LinkEnd::Fatal(StoreError::ShuttingDown.to_string())),
    }
}

/// The read side of a connection: takes the whole frames of each read of the socket and
/// hands them to the writer together.
struct Frames {
    store: StoreHandle,
    counts: std::sync::Arc<MasterAddrs>,
    /// Shares of [`REPLICA_IN_FLIGHT_BYTES_MAX`], given back as reads are reported.
    in_flight: Rc<Semaphore>,
}

impl Frames {
    /// Reads frames from `start` on and hands each read's to the writer, until the
    /// connection ends or a frame is refused; queues what each read handed over on
    /// `written`.
    async fn read<R: futures_lite::AsyncRead + Unpin>(
        self,
        rx: &mut R,
        cursor: &mut RecordCursor,
        start: u64,
        mut written: mpsc::Sender<Handed>,
    ) -> LinkEnd {
        let segment_size = self.store.shared().config.mapped_file_size_commit_log;
        let mut buffer = vec![0u8; READ_BUFFER];
        let mut filled = 0usize;
        let mut end = start;
        loop {
            let mut taken = Taken::default();
            let (at, refused) = take_frames(
                &buffer[..filled],
                &mut end,
                cursor,
                segment_size,
                &mut taken,
            );
            // What the cursor took goes to the writer even when a later frame is refused:
            // the cursor and the log must end at the same place.
            if let Err(end) = self.hand_over(taken, &mut written).await {
                return end;
            }
            if let Some(refused) = refused {
                return refused;
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

    /// Hands `taken` to the writer, one request per run, and queues their answers together.
    async fn hand_over(
        &self,
        taken: Taken,
        written: &mut mpsc::Sender<Handed>,
    ) -> Result<(), LinkEnd> {
        self.counts.took_frames(taken.frames);
        if taken.runs.is_empty() {
            return Ok(());
        }
        let bytes = u64::try_from(taken.bytes).expect("a read fits u64");
        let Ok(permit) = self.in_flight.acquire_static_permit(bytes).await else {
            return Err(LinkEnd::Closed("the reports ended".to_owned()));
        };
        let mut answers = VecDeque::with_capacity(taken.runs.len());
        for run in taken.runs {
            match self
                .store
                .replicate(run.offset, run.bytes, run.entries)
                .await
            {
                Ok(answer) => answers.push_back(answer),
                Err(error) => return Err(LinkEnd::Fatal(error.to_string())),
            }
        }
        let handed = Handed {
            answers,
            _permit: permit,
        };
        written
            .send(handed)
            .await
            .map_err(|_| LinkEnd::Closed("the reports ended".to_owned()))
    }
}

/// The frames of one read, as the writer takes them.
#[derive(Debug, Default)]
struct Taken {
    /// Contiguous bytes within one segment each, in order.
    runs: Vec<Run>,
    /// Bytes of all runs.
    bytes: usize,
    /// Frames taken, heartbeats too.
    frames: u64,
}

/// Bytes for one request to the writer: frames that follow each other within a segment.
#[derive(Debug)]
struct Run {
    offset: u64,
    bytes: Vec<u8>,
    entries: Vec<DispatchEntry>,
}

impl Taken {
    fn push(&mut self, offset: u64, body: &[u8], entries: Vec<DispatchEntry>, segment_size: u64) {
        self.bytes += body.len();
        match self.runs.last_mut() {
            Some(run)
                if run.offset + run.bytes.len() as u64 == offset
                    && segment_start(run.offset, segment_size)
                        == segment_start(offset, segment_size) =>
            {
                run.bytes.extend_from_slice(body);
                run.entries.extend(entries);
            }
            _ => self.runs.push(Run {
                offset,
                bytes: body.to_vec(),
                entries,
            }),
        }
    }
}

/// Takes the whole frames at the start of `buffer` into `taken`, checked against `end`
/// (this slave's end, moved past each) and `cursor`; returns how many bytes they span and,
/// if a frame was refused, why the connection ends.
fn take_frames(
    buffer: &[u8],
    end: &mut u64,
    cursor: &mut RecordCursor,
    segment_size: u64,
    taken: &mut Taken,
) -> (usize, Option<LinkEnd>) {
    let mut at = 0usize;
    while buffer.len() - at >= TRANSFER_HEADER_SIZE {
        let header = &buffer[at..at + TRANSFER_HEADER_SIZE];
        let offset = i64::from_be_bytes(header[..8].try_into().expect("8 bytes"));
        let size = i32::from_be_bytes(header[8..].try_into().expect("4 bytes"));
        let (Ok(offset), Ok(size)) = (u64::try_from(offset), usize::try_from(size)) else {
            let reason = format!("bad frame header: offset {offset}, size {size}");
            return (at, Some(LinkEnd::Closed(reason)));
        };
        if size > READ_BUFFER - TRANSFER_HEADER_SIZE {
            let reason = format!("a frame of {size} bytes, more than taken");
            return (at, Some(LinkEnd::Closed(reason)));
        }
        // Java's rule: an empty slave takes what comes; else a frame starts at its end.
        if *end != 0 && offset != *end {
            let reason = diverged(format!(
                "the master sent offset {offset}, but this slave's CommitLog ends at {end}"
            ));
            return (at, Some(LinkEnd::Closed(reason)));
        }
        if buffer.len() - at < TRANSFER_HEADER_SIZE + size {
            break;
        }
        let body = &buffer[at + TRANSFER_HEADER_SIZE..at + TRANSFER_HEADER_SIZE + size];
        at += TRANSFER_HEADER_SIZE + size;
        taken.frames += 1;
        if size == 0 {
            continue; // A heartbeat.
        }
        match cursor.feed(offset, body) {
            Ok(entries) => taken.push(offset, body, entries, segment_size),
            Err(reason) => return (at, Some(LinkEnd::Closed(diverged(reason)))),
        }
        *end = offset + size as u64;
    }
    (at, None)
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

#[cfg(test)]
mod tests {
    use super::record_cursor::tests::{cursor, log};
    use super::*;

    fn frame(log: &[u8], from: usize, to: usize) -> Vec<u8> {
        let mut frame = crate::broker::ha::frame_header(from as u64, to - from).to_vec();
        frame.extend_from_slice(&log[from..to]);
        frame
    }

    /// One read holding frames of two segments, a heartbeat and the start of a frame: the
    /// whole frames become one request per segment, the partial one waits for more bytes.
    #[test]
    fn a_reads_whole_frames_become_one_request_per_segment() {
        let (log, records) = log();
        let mut read = Vec::new();
        for (from, to) in [(0, 1000), (1000, 2500), (2500, 4096), (4096, log.len())] {
            read.extend(frame(&log, from, to));
        }
        read.extend(crate::broker::ha::frame_header(log.len() as u64, 0));
        let whole = read.len();
        read.extend(&crate::broker::ha::frame_header(log.len() as u64, 500)[..7]);
        let mut c = cursor();
        let (mut end, mut taken) = (0, Taken::default());
        let (at, refused) = take_frames(&read, &mut end, &mut c, 4096, &mut taken);
        assert!(refused.is_none());
        assert_eq!((at, end, taken.frames), (whole, log.len() as u64, 5));
        let runs: Vec<(u64, usize)> = taken
            .runs
            .iter()
            .map(|r| (r.offset, r.bytes.len()))
            .collect();
        assert_eq!(runs, [(0, 4096), (4096, log.len() - 4096)]);
        assert_eq!(taken.runs[0].bytes, log[..4096]);
        let entries: usize = taken.runs.iter().map(|r| r.entries.len()).sum();
        assert_eq!(entries, records);
        assert_eq!(taken.bytes, log.len());
    }

    /// A frame that does not start at the slave's end ends the connection, but the frames
    /// before it in the same read, which the cursor took, are still handed over.
    #[test]
    fn frames_before_a_refused_one_are_kept() {
        let (log, _) = log();
        let mut read = frame(&log, 0, 1000);
        read.extend(frame(&log, 1200, 2000));
        let mut c = cursor();
        let (mut end, mut taken) = (0, Taken::default());
        let (_, refused) = take_frames(&read, &mut end, &mut c, 4096, &mut taken);
        assert!(matches!(refused, Some(LinkEnd::Closed(reason)) if reason.contains("diverged")));
        assert_eq!(end, 1000);
        assert_eq!(taken.runs.len(), 1);
        assert_eq!(taken.runs[0].bytes, log[..1000]);
    }
}
