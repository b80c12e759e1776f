//! Where the kernel runs the calling thread's blocking io_uring work.
//!
//! An io_uring operation that cannot complete without blocking (a direct write into
//! preallocated but never written extents, which ext4 must convert, or an `O_DSYNC` write)
//! is handed to the thread's io-wq: kernel worker threads that inherit the submitting
//! thread's CPU affinity. A shard pinned to one core would then share that core with its
//! own I/O workers: every blocking write waits for the shard to yield, and the shard loses
//! the CPU time the workers spend submitting. [`set_io_worker_cpus`] moves them.

use std::io;

/// Lets the io-wq workers of the calling thread (all its rings share them) run on `cpus`
/// only (`IORING_REGISTER_IOWQ_AFF`); workers that exist move, later ones start there.
///
/// # Errors
/// `cpus` is empty or names a CPU beyond `CPU_SETSIZE`, or the kernel refuses (older than
/// 5.14, or none of `cpus` is allowed to this process).
pub fn set_io_worker_cpus(cpus: &[usize]) -> io::Result<()> {
    let setsize = usize::try_from(libc::CPU_SETSIZE).unwrap_or(0);
    if cpus.is_empty() || cpus.iter().any(|&cpu| cpu >= setsize) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("io worker CPUs {cpus:?} are empty or beyond {setsize}"),
        ));
    }
    // SAFETY: `cpu_set_t` is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: `cpu` is below CPU_SETSIZE (checked above), so it indexes inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // The affinity belongs to the thread's io-wq, which exists once the thread has
    // submitted to any ring: a no-op on a ring of our own makes sure of that.
    let ring = submit_nop(io_uring::squeue::Flags::empty())?;
    ring.submitter().register_iowq_aff(&set)
}

/// Submits a no-op with `flags` on a new ring of the calling thread and waits for it.
fn submit_nop(flags: io_uring::squeue::Flags) -> io::Result<io_uring::IoUring> {
    let mut ring = io_uring::IoUring::new(2)?;
    let nop = io_uring::opcode::Nop::new().build().flags(flags);
    // SAFETY: a no-op references no memory.
    unsafe { ring.submission().push(&nop) }
        .map_err(|_| io::Error::other("the submission queue of a new ring is full"))?;
    ring.submit_and_wait(1)?;
    Ok(ring)
}

/// Moves the calling thread's io-wq workers off `own_cpu`, onto every other CPU the process
/// may use; does nothing when there is no other. For a shard pinned to `own_cpu`.
///
/// # Errors
/// As [`set_io_worker_cpus`], or reading the process's CPU affinity failed.
pub fn keep_io_workers_off(own_cpu: usize) -> io::Result<()> {
    let allowed = rustix::thread::sched_getaffinity(Some(rustix::process::getpid()))?;
    let others: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&cpu| cpu != own_cpu && allowed.is_set(cpu))
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    set_io_worker_cpus(&others)
}

/// Hands a no-op to the calling thread's io-wq, which starts a worker if none is idle: a
/// diagnostic, to see with [`io_worker_cpus`] where workers run.
///
/// # Errors
/// The kernel's error.
pub fn start_io_worker() -> io::Result<()> {
    submit_nop(io_uring::squeue::Flags::ASYNC).map(drop)
}

/// The CPUs each io-wq worker the calling thread started may run on (the workers are named
/// `iou-wrk-<tid>`).
///
/// # Errors
/// Reading `/proc/self/task` failed.
pub fn io_worker_cpus() -> io::Result<Vec<rustix::thread::CpuSet>> {
    let name = format!("iou-wrk-{}", rustix::thread::gettid().as_raw_nonzero());
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task")? {
        let path = task?.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let tid = path.file_name().and_then(|tid| tid.to_str()?.parse().ok());
        if comm.trim() != name {
            continue;
        }
        if let Some(worker) = tid.and_then(rustix::process::Pid::from_raw) {
            found.push(rustix::thread::sched_getaffinity(Some(worker))?);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_s_io_workers_run_on_the_other_cpus() {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        if cpus < 2 {
            eprintln!("skipped: needs two CPUs");
            return;
        }
        let workers = std::thread::spawn(|| {
            let mut own = rustix::thread::CpuSet::new();
            own.set(0);
            rustix::thread::sched_setaffinity(None, &own).unwrap();
            keep_io_workers_off(0).unwrap();
            start_io_worker().unwrap();
            io_worker_cpus().unwrap()
        })
        .join()
        .unwrap();
        assert!(!workers.is_empty(), "no io-wq worker started");
        assert!(
            workers.iter().all(|cpus| !cpus.is_set(0)),
            "an io-wq worker of the thread pinned to CPU 0 may run on it: {workers:?}"
        );
    }
}
