//! `SimSegment`: the crash-simulating, fault-injecting twin of `DmaSegment`.
//!
//! It keeps two images of the file: the *volatile* one (what reads see: every completed
//! write) and the *durable* one (what survives a crash: the volatile image as of the last
//! sync). Writes since the last sync are remembered in order, so a simulated crash can keep
//! none of them, or a prefix of them with the last one torn at a sector boundary — what a
//! power loss does to a disk that reorders nothing within a file but writes sector by sector.
//! A failure can be injected on the Nth operation, and a sync can be made to take a number
//! of scheduler turns, as a real one takes time, so that callers can be seen working while
//! it runs.
//!
//! Single-threaded by design (it lives on one shard in tests): `Rc<RefCell<..>>` inside, and
//! clones share the same file.

use crate::file::{check_aligned, SegmentFile};
use crate::IoError;
use std::cell::RefCell;
use std::rc::Rc;

/// Sector size of the simulated disk: the granularity at which writes tear.
pub const SECTOR_SIZE: usize = 512;

/// What a new buffer of a [`SimSegment`] holds.
pub const UNSET_BUFFER_BYTE: u8 = 0xA5;

/// What a simulated crash keeps of the writes made since the last sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashKeep {
    /// Nothing: the durable image is the last synced one.
    Nothing,
    /// The first `writes` unsynced writes whole, then the first `sectors` sectors of the next.
    Prefix {
        /// Whole writes kept.
        writes: usize,
        /// Sectors kept of the write after them.
        sectors: usize,
    },
}

/// A simulated segment file. Clones share the file.
#[derive(Clone, Debug)]
pub struct SimSegment {
    state: Rc<RefCell<SimState>>,
}

#[derive(Debug)]
struct SimState {
    volatile: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<(u64, Vec<u8>)>,
    /// Unsynced writes gone from the front of `unsynced` (synced, or lost in a crash): the
    /// durable image holds every write counted here, so a sync that covers no more (it ends
    /// after a later-called one) must not take it back to an older image.
    unsynced_gone: u64,
    operations: u64,
    fail_at_operation: Option<u64>,
    sync_turns: usize,
    syncs_running: usize,
    write_turns: usize,
    /// Byte ranges of the writes in flight (only seen with [`SimSegment::set_write_turns`]).
    writes_running: Vec<(u64, u64)>,
    most_writes_running: usize,
    durable_writes: bool,
    sync_calls: u64,
}

impl SimSegment {
    /// A zero-filled file of `size` bytes.
    #[must_use]
    pub fn new(size: usize) -> SimSegment {
        SimSegment {
            state: Rc::new(RefCell::new(SimState {
                volatile: vec![0; size],
                durable: vec![0; size],
                unsynced: Vec::new(),
                unsynced_gone: 0,
                operations: 0,
                fail_at_operation: None,
                sync_turns: 0,
                syncs_running: 0,
                write_turns: 0,
                writes_running: Vec::new(),
                most_writes_running: 0,
                durable_writes: false,
                sync_calls: 0,
            })),
        }
    }

    /// Makes operation number `n` (counting from 1, from now) fail with
    /// [`IoError::Injected`]; the failed operation has no effect.
    pub fn fail_operation(&self, n: u64) {
        let mut state = self.state.borrow_mut();
        state.fail_at_operation = Some(state.operations + n);
    }

    /// Simulates a crash: the file becomes its durable image plus what `keep` says of the
    /// unsynced writes, and that is now both what reads see and what is durable.
    pub fn crash(&self, keep: CrashKeep) {
        let mut state = self.state.borrow_mut();
        let mut image = state.durable.clone();
        if let CrashKeep::Prefix { writes, sectors } = keep {
            for (index, (offset, data)) in state.unsynced.iter().enumerate() {
                let kept = match index.cmp(&writes) {
                    std::cmp::Ordering::Less => data.len(),
                    std::cmp::Ordering::Equal => (sectors * SECTOR_SIZE).min(data.len()),
                    std::cmp::Ordering::Greater => break,
                };
                let at = usize::try_from(*offset).expect("offset within the file");
                image[at..at + kept].copy_from_slice(&data[..kept]);
            }
        }
        state.volatile.clone_from(&image);
        state.durable = image;
        state.unsynced_gone += state.unsynced.len() as u64;
        state.unsynced.clear();
    }

    /// Makes every later sync yield to the scheduler `turns` times before it takes effect.
    pub fn set_sync_turns(&self, turns: usize) {
        self.state.borrow_mut().sync_turns = turns;
    }

    /// Makes every later write yield to the scheduler `turns` times before it lands, as a
    /// real one takes time. Two writes in flight at once that share a sector fail: a real
    /// disk may land them in either order.
    pub fn set_write_turns(&self, turns: usize) {
        self.state.borrow_mut().write_turns = turns;
    }

    /// The most writes that were in flight at once (only seen with
    /// [`SimSegment::set_write_turns`]).
    #[must_use]
    pub fn most_writes_in_flight(&self) -> usize {
        self.state.borrow().most_writes_running
    }

    /// `len` bytes at `offset` of the durable image: what a crash now would leave.
    #[must_use]
    pub fn durable_bytes(&self, offset: usize, len: usize) -> Vec<u8> {
        let state = self.state.borrow();
        let start = offset.min(state.durable.len());
        let end = offset.saturating_add(len).min(state.durable.len());
        state.durable[start..end].to_vec()
    }

    /// Makes every later write durable when it completes, as with `O_DSYNC`.
    pub fn set_durable_writes(&self) {
        self.state.borrow_mut().durable_writes = true;
    }

    /// How many syncs were called.
    #[must_use]
    pub fn sync_calls(&self) -> u64 {
        self.state.borrow().sync_calls
    }

    /// Whether a sync is running (only seen with [`SimSegment::set_sync_turns`]).
    #[must_use]
    pub fn is_syncing(&self) -> bool {
        self.state.borrow().syncs_running > 0
    }

    /// How many writes are not yet synced.
    #[must_use]
    pub fn unsynced_writes(&self) -> usize {
        self.state.borrow().unsynced.len()
    }

    fn begin(&self, op: &'static str) -> Result<(), IoError> {
        let mut state = self.state.borrow_mut();
        state.operations += 1;
        if state.fail_at_operation == Some(state.operations) {
            state.fail_at_operation = None;
            return Err(IoError::Injected { op });
        }
        Ok(())
    }
}

/// A refused write at `offset` of a simulated file.
fn write_error(offset: u64, source: std::io::Error) -> IoError {
    IoError::File {
        op: "write",
        path: "<sim>".into(),
        offset,
        source,
    }
}

impl SegmentFile for SimSegment {
    type Buffer = Vec<u8>;

    fn alignment(&self) -> u64 {
        SECTOR_SIZE as u64
    }

    /// Filled with a byte no caller should rely on (a real buffer holds whatever its memory
    /// held), so that tests see bytes a caller forgot to set.
    fn alloc_buffer(&self, len: usize) -> Vec<u8> {
        vec![UNSET_BUFFER_BYTE; len]
    }

    async fn write_buffer_at(
        &self,
        offset: u64,
        buffer: Vec<u8>,
        len: usize,
    ) -> Result<(), IoError> {
        assert!(len <= buffer.len(), "a write stays within its buffer");
        self.write_at(offset, &buffer[..len]).await
    }

    fn writes_are_durable(&self) -> bool {
        self.state.borrow().durable_writes
    }

    async fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), IoError> {
        check_aligned("write", offset, data.len(), self.alignment())?;
        self.begin("write")?;
        let turns = self.state.borrow().write_turns;
        if turns > 0 {
            let range = (offset, offset + data.len() as u64);
            {
                let mut state = self.state.borrow_mut();
                if let Some(&other) = state
                    .writes_running
                    .iter()
                    .find(|(start, end)| *start < range.1 && range.0 < *end)
                {
                    let overlap = std::io::Error::other(format!(
                        "writes of {range:?} and {other:?} are in flight at once"
                    ));
                    return Err(write_error(offset, overlap));
                }
                state.writes_running.push(range);
                state.most_writes_running =
                    state.most_writes_running.max(state.writes_running.len());
            }
            for _ in 0..turns {
                futures_lite::future::yield_now().await;
            }
            self.state
                .borrow_mut()
                .writes_running
                .retain(|running| *running != range);
        }
        let mut state = self.state.borrow_mut();
        let at = usize::try_from(offset).map_err(|_| IoError::Misaligned {
            op: "write",
            offset,
            len: data.len(),
            alignment: SECTOR_SIZE as u64,
        })?;
        // A file whose size is not a multiple of the alignment gets its last block written
        // padded; like `DmaSegment`, the file keeps its size and the padding is dropped.
        let file_len = state.volatile.len();
        if at >= file_len && !data.is_empty() {
            let error =
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "past end of segment");
            return Err(write_error(offset, error));
        }
        let kept = data.len().min(file_len - at);
        state.volatile[at..at + kept].copy_from_slice(&data[..kept]);
        if state.durable_writes {
            state.durable[at..at + kept].copy_from_slice(&data[..kept]);
        } else {
            state.unsynced.push((offset, data[..kept].to_vec()));
        }
        Ok(())
    }

    async fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, IoError> {
        self.begin("read")?;
        let state = self.state.borrow();
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(state.volatile.len());
        let end = start.saturating_add(len).min(state.volatile.len());
        Ok(state.volatile[start..end].to_vec())
    }

    async fn sync(&self) -> Result<(), IoError> {
        // Like fdatasync, it makes durable what was written when it was called, not what
        // is written while it runs; an injected failure shows at its end, as a real one
        // does.
        let (image, covers, turns) = {
            let mut state = self.state.borrow_mut();
            state.syncs_running += 1;
            state.sync_calls += 1;
            (
                state.volatile.clone(),
                state.unsynced_gone + state.unsynced.len() as u64,
                state.sync_turns,
            )
        };
        for _ in 0..turns {
            futures_lite::future::yield_now().await;
        }
        self.state.borrow_mut().syncs_running -= 1;
        self.begin("fdatasync")?;
        let mut state = self.state.borrow_mut();
        if covers > state.unsynced_gone {
            state.durable = image;
            let synced = usize::try_from(covers - state.unsynced_gone)
                .unwrap_or(usize::MAX)
                .min(state.unsynced.len());
            state.unsynced.drain(..synced);
            state.unsynced_gone += synced as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(byte: u8, sectors: usize) -> Vec<u8> {
        vec![byte; sectors * SECTOR_SIZE]
    }

    fn run<F: std::future::Future>(future: F) -> F::Output {
        futures_lite::future::block_on(future)
    }

    #[test]
    fn crash_drops_unsynced_writes() {
        run(async {
            let file = SimSegment::new(8 * SECTOR_SIZE);
            file.write_at(0, &block(1, 1)).await.unwrap();
            file.sync().await.unwrap();
            file.write_at(512, &block(2, 1)).await.unwrap();
            assert_eq!(file.read_at(512, 1).await.unwrap(), [2]);
            file.crash(CrashKeep::Nothing);
            assert_eq!(file.read_at(0, 1).await.unwrap(), [1]);
            assert_eq!(file.read_at(512, 1).await.unwrap(), [0]);
        });
    }

    #[test]
    fn crash_tears_a_write_at_a_sector_boundary() {
        run(async {
            let file = SimSegment::new(8 * SECTOR_SIZE);
            file.write_at(0, &block(1, 2)).await.unwrap();
            file.write_at(1024, &block(2, 3)).await.unwrap();
            file.crash(CrashKeep::Prefix {
                writes: 1,
                sectors: 2,
            });
            let image = file.read_at(0, 8 * SECTOR_SIZE).await.unwrap();
            assert!(image[..1024].iter().all(|b| *b == 1));
            assert!(
                image[1024..2048].iter().all(|b| *b == 2),
                "two sectors of the torn write"
            );
            assert!(image[2048..].iter().all(|b| *b == 0));
            assert_eq!(file.unsynced_writes(), 0);
        });
    }

    #[test]
    fn injected_failure_hits_the_nth_operation_only() {
        run(async {
            let file = SimSegment::new(4 * SECTOR_SIZE);
            file.fail_operation(2);
            file.write_at(0, &block(1, 1)).await.unwrap();
            assert!(matches!(
                file.sync().await,
                Err(IoError::Injected { op: "fdatasync" })
            ));
            file.sync().await.unwrap();
            file.crash(CrashKeep::Nothing);
            assert_eq!(
                file.read_at(0, 1).await.unwrap(),
                [1],
                "the retried sync made it durable"
            );
        });
    }

    #[test]
    fn misaligned_write_is_refused() {
        run(async {
            let file = SimSegment::new(4 * SECTOR_SIZE);
            let refused = file.write_at(10, &block(1, 1)).await;
            assert!(matches!(refused, Err(IoError::Misaligned { .. })));
            let short = file.write_at(0, &[1, 2, 3]).await;
            assert!(matches!(short, Err(IoError::Misaligned { .. })));
        });
    }
}
