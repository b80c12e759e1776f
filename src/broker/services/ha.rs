//! The master half of classic HA (4.9's `HAService` and `HAConnection`, `reference/ha.md`
//! §2): a slave connects to `listenPort + 1`, reports the CommitLog offset it needs as 8
//! bytes, and is sent the CommitLog's bytes from there in frames of an 8-byte offset, a
//! 4-byte size and that many bytes: at most `haTransferBatchSize` bytes, never across two
//! segments, a frame of size 0 when nothing was sent for `haSendHeartbeatInterval`.
//!
//! Rules:
//! - A slave that reports 0 (it is empty) starts at the beginning of the master's last
//!   segment, as Java's; nothing is sent before the first report.
//! - Only committed bytes go out (below the writer's committed end); they are read as a
//!   pull reads them, from mapped windows or the page cache, on the net shard that serves
//!   the slave, never on the writer.
//! - What is committed goes out at once, up to [`FRAMES_PER_WRITE_MAX`] frames in one
//!   socket write (Java writes one frame per turn of its loop; the frames are the same).
//! - A slave's later reports are its acknowledgements: the last whole 8-byte group read
//!   counts (Java reads into a buffer and takes the last group at a multiple of 8). One
//!   acknowledgement answers every SYNC_MASTER put it covers (`SlaveProgress::ack`).
//! - Either side silent for `haHousekeepingInterval` closes the connection; so does a
//!   negative offset.

pub mod autoswitch_frames;
pub mod slave_start;
pub mod sync_state;

use crate::broker::state::{SlaveLink, SlaveProgress};
use crate::store::reader::StoreReader;
use crate::store::segment::segment_start;
use crate::store::shared::StoreShared;
use ferromq_shards::Shutdown;
use ferromq_uring::net::{prepare_stream, TcpListener, TcpStream};
use futures::future::{select, Either};
use futures_lite::AsyncReadExt;
use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Header of a data frame: offset (8) and body size (4) (`TRANSFER_HEADER_SIZE`).
pub const TRANSFER_HEADER_SIZE: usize = 12;

/// Frames sent in one socket write, at most: 8 of the default 32 KiB.
pub const FRAMES_PER_WRITE_MAX: usize = 8;

/// Longest the sender waits for new data before it looks again (Java's transfer thread
/// waits 100 ms when a put does not wake it).
const IDLE_LOOK: Duration = Duration::from_millis(100);

/// The HA keys (`haSendHeartbeatInterval`, `haHousekeepingInterval`, `haTransferBatchSize`,
/// `slaveTimeout`, `haSlaveFallbehindMax`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HaConfig {
    /// `haSendHeartbeatInterval` (5 s): an empty frame after this long without one.
    pub heartbeat_interval: Duration,
    /// `haHousekeepingInterval` (20 s): a connection silent this long is closed.
    pub housekeeping_interval: Duration,
    /// `haTransferBatchSize` (32 KiB): most bytes in one frame.
    pub transfer_batch_size: usize,
    /// `slaveTimeout` (3 s): how long a SYNC_MASTER put waits for a slave (4.9.8 waits this
    /// long, not `syncFlushTimeout`).
    pub slave_timeout: Duration,
    /// `haSlaveFallbehindMax` (256 MiB): a slave this far behind a put does not count.
    pub slave_fall_behind_max: i64,
}

impl Default for HaConfig {
    fn default() -> Self {
        HaConfig {
            heartbeat_interval: Duration::from_secs(5),
            housekeeping_interval: Duration::from_secs(20),
            transfer_batch_size: 32 * 1024,
            slave_timeout: Duration::from_secs(3),
            slave_fall_behind_max: 256 << 20,
        }
    }
}

/// Accepts slaves on `listener` until `shutdown`, serving each on its own task.
pub async fn serve(
    listener: TcpListener,
    reader: Rc<StoreReader>,
    shared: Arc<StoreShared>,
    config: HaConfig,
    progress: Arc<SlaveProgress>,
    shutdown: Shutdown,
) {
    while let Some(stream) = crate::remoting::server::accept(&listener, &shutdown).await {
        let Ok(peer) = stream.peer_addr() else {
            continue;
        };
        tracing::info!(%peer, "slave connected");
        let slave = Slave {
            reader: Rc::clone(&reader),
            shared: Arc::clone(&shared),
            config,
            link: progress.link_opened(peer),
            progress: Arc::clone(&progress),
            peer,
        };
        let shutdown = shutdown.clone();
        glommio::spawn_local(async move {
            let outcome = select(Box::pin(slave.run(stream)), Box::pin(shutdown.wait())).await;
            slave.progress.link_closed(slave.peer);
            if let Either::Left((Err(reason), _)) = outcome {
                tracing::info!(peer = %slave.peer, %reason, "slave connection closed");
            }
        })
        .detach();
    }
}

/// One slave's connection.
struct Slave {
    reader: Rc<StoreReader>,
    shared: Arc<StoreShared>,
    config: HaConfig,
    progress: Arc<SlaveProgress>,
    /// This connection's entry in `progress`.
    link: Arc<SlaveLink>,
    peer: SocketAddr,
}

/// What the read side tells the sender: the first report (where to start) and, once the
/// connection ended, why.
#[derive(Default)]
struct Reports {
    first: Cell<Option<i64>>,
    closed: Cell<Option<String>>,
}

impl Slave {
    async fn run(&self, stream: TcpStream) -> Result<(), String> {
        prepare_stream(&stream, Some(self.config.housekeeping_interval))
            .map_err(|e| e.to_string())?;
        // A slave that stops reading is a silent one too.
        stream
            .set_write_timeout(Some(self.config.housekeeping_interval))
            .map_err(|e| e.to_string())?;
        let (mut rx, mut tx) = ferromq_uring::net::split(stream);
        let reports = Rc::new(Reports::default());
        let reading = {
            let reports = Rc::clone(&reports);
            let progress = Arc::clone(&self.progress);
            let link = Arc::clone(&self.link);
            glommio::spawn_local(async move {
                let reason = read_reports(&mut rx, &reports, &progress, &link).await;
                reports.closed.set(Some(reason));
            })
        };
        let outcome = self.send(&mut tx, &reports).await;
        drop(reading);
        outcome
    }

    /// Sends frames from the slave's first report on, until the connection fails or the
    /// read side closed it.
    async fn send(
        &self,
        tx: &mut ferromq_uring::net::WriteHalf,
        reports: &Reports,
    ) -> Result<(), String> {
        let segment_size = self.shared.config.mapped_file_size_commit_log;
        let commits = self.shared.watch_commits();
        let first = loop {
            if let Some(reason) = reports.closed.take() {
                return Err(reason);
            }
            if let Some(first) = reports.first.get() {
                break u64::try_from(first).unwrap_or(0);
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
        };
        let end = self.shared.committed_end();
        if first > end {
            // A slave that holds more than this master cannot be a copy of it (this master
            // lost data, or the slave followed another): nothing sent would be right.
            tracing::error!(
                peer = %self.peer,
                slave_offset = first,
                master_offset = end,
                "slave ahead of this master: its CommitLog diverged; not serving it"
            );
            return Err(format!(
                "the slave is at {first}, past this master's end {end}"
            ));
        }
        let mut next = if first == 0 {
            let max = self.shared.committed_end();
            segment_start(max, segment_size)
        } else {
            first
        };
        tracing::info!(peer = %self.peer, reported = first, from = next, "slave transfer starts");
        let mut last_sent = Instant::now();
        loop {
            if let Some(reason) = reports.closed.take() {
                return Err(reason);
            }
            let end = self.shared.committed_end();
            if next < end {
                next = self.send_frames(tx, next, end).await?;
                last_sent = Instant::now();
                continue;
            }
            if last_sent.elapsed() >= self.config.heartbeat_interval {
                let header = frame_header(next, 0);
                ferromq_uring::net::write_all_gathered(tx, &[&header])
                    .await
                    .map_err(|e| e.to_string())?;
                self.link.sent_frames(1);
                last_sent = Instant::now();
            }
            let until_heartbeat = self
                .config
                .heartbeat_interval
                .saturating_sub(last_sent.elapsed());
            let _ = select(
                Box::pin(commits.moved_from(end)),
                Box::pin(glommio::timer::sleep(until_heartbeat.min(IDLE_LOOK))),
            )
            .await;
        }
    }
}

impl Slave {
    /// Sends the committed bytes from `next` towards `end` in frames of at most
    /// `haTransferBatchSize` bytes, never across a segment, up to [`FRAMES_PER_WRITE_MAX`]
    /// of them in one write; returns where the next frame starts.
    async fn send_frames(
        &self,
        tx: &mut ferromq_uring::net::WriteHalf,
        next: u64,
        end: u64,
    ) -> Result<u64, String> {
        let segment_size = self.shared.config.mapped_file_size_commit_log;
        let segment_end = segment_start(next, segment_size) + segment_size;
        let batch = self.config.transfer_batch_size;
        assert!(batch > 0, "haTransferBatchSize is positive");
        let most = (batch * FRAMES_PER_WRITE_MAX) as u64;
        let span_end = end.min(next + most).min(segment_end);
        let len = usize::try_from(span_end - next).expect("a write's frames fit memory");
        let body = self
            .reader
            .commit_log_bytes(next, len)
            .await
            .map_err(|e| e.to_string())?;
        if body.len() != len {
            return Err(format!(
                "the CommitLog at {next} holds {} bytes, not {len}",
                body.len()
            ));
        }
        let headers: Vec<[u8; TRANSFER_HEADER_SIZE]> = body
            .chunks(batch)
            .scan(next, |offset, chunk| {
                let header = frame_header(*offset, chunk.len());
                *offset += chunk.len() as u64;
                Some(header)
            })
            .collect();
        let parts: Vec<&[u8]> = headers
            .iter()
            .zip(body.chunks(batch))
            .flat_map(|(header, chunk)| [header.as_slice(), chunk])
            .collect();
        ferromq_uring::net::write_all_gathered(tx, &parts)
            .await
            .map_err(|e| e.to_string())?;
        self.link.sent_frames(headers.len() as u64);
        Ok(span_end)
    }
}

/// A data frame's header: the offset of its first byte and its size.
#[must_use]
pub fn frame_header(offset: u64, size: usize) -> [u8; TRANSFER_HEADER_SIZE] {
    let mut header = [0u8; TRANSFER_HEADER_SIZE];
    header[..8].copy_from_slice(&offset.to_be_bytes());
    let size = i32::try_from(size).expect("a batch fits an int");
    header[8..].copy_from_slice(&size.to_be_bytes());
    header
}

/// Reads a slave's 8-byte reports until the connection ends; why it ended.
async fn read_reports<R: futures_lite::AsyncRead + Unpin>(
    rx: &mut R,
    reports: &Reports,
    progress: &SlaveProgress,
    link: &SlaveLink,
) -> String {
    let mut buffer = vec![0u8; 64 * 1024];
    // Bytes of a report not complete yet (fewer than 8).
    let mut carry: Vec<u8> = Vec::with_capacity(16);
    loop {
        let n = match rx.read(&mut buffer).await {
            Ok(0) => return "the slave closed the connection".to_owned(),
            Ok(n) => n,
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
                return "nothing read for haHousekeepingInterval".to_owned();
            }
            Err(error) => return format!("read failed: {error}"),
        };
        carry.extend_from_slice(&buffer[..n]);
        let whole = carry.len() / 8 * 8;
        if whole == 0 {
            continue;
        }
        let last: [u8; 8] = carry[whole - 8..whole].try_into().expect("8 bytes");
        carry.drain(..whole);
        let offset = i64::from_be_bytes(last);
        if offset < 0 {
            return format!("the slave reported offset {offset}");
        }
        if reports.first.get().is_none() {
            reports.first.set(Some(offset));
        }
        progress.ack(link, offset, (whole / 8) as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
        std::net::Ipv4Addr::LOCALHOST,
        4321,
    ));

    /// Gives its chunks one read at a time, then the end.
    struct Chunks(Vec<Vec<u8>>);

    impl futures_lite::AsyncRead for Chunks {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut [u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            if self.0.is_empty() {
                return std::task::Poll::Ready(Ok(0));
            }
            let chunk = self.0.remove(0);
            buf[..chunk.len()].copy_from_slice(&chunk);
            std::task::Poll::Ready(Ok(chunk.len()))
        }
    }

    #[test]
    fn reports_count_whole_eight_byte_groups_the_last_one_winning() {
        let report = |v: i64| v.to_be_bytes().to_vec();
        let stream = [report(100), report(200), report(300), report(400)].concat();
        // Cut across reports: 5 | 3+8+2 | 6+8.
        let chunks = vec![
            stream[..5].to_vec(),
            stream[5..18].to_vec(),
            stream[18..].to_vec(),
        ];
        let reports = Reports::default();
        let progress = SlaveProgress::default();
        let link = progress.link_opened(PEER);
        let mut rx = Chunks(chunks);
        let end = futures_lite::future::block_on(read_reports(&mut rx, &reports, &progress, &link));
        assert_eq!(end, "the slave closed the connection");
        // The first whole group read (after the second chunk: 100 and 200, the last is 200).
        assert_eq!(reports.first.get(), Some(200));
        assert_eq!(progress.acked(), 400);
        let links = progress.links();
        assert_eq!(links.len(), 1);
        assert_eq!((links[0].addr, links[0].acked), (PEER, 400));
        // Every 8-byte group counts as a report, though only the last of a read is taken.
        assert_eq!(links[0].reports, 4);
    }

    #[test]
    fn a_negative_report_ends_the_connection() {
        let reports = Reports::default();
        let progress = SlaveProgress::default();
        let link = progress.link_opened(PEER);
        let mut rx = Chunks(vec![(-1i64).to_be_bytes().to_vec()]);
        let end = futures_lite::future::block_on(read_reports(&mut rx, &reports, &progress, &link));
        assert!(end.contains("-1"), "{end}");
        assert_eq!(reports.first.get(), None);
    }

    #[test]
    fn a_frame_header_is_offset_then_size_big_endian() {
        assert_eq!(
            frame_header(0x0102_0304_0506_0708, 0x1122),
            [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0x11, 0x22]
        );
    }
}
