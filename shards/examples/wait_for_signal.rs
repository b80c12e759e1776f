//! Starts two shards that wait for the stop signal, for the signal tests in `tests/runtime.rs`.
//!
//! Protocol on stdout, one line each: `ready` once the signal handlers are installed and both
//! shards run; `stopping` once a shard saw the shutdown. Exits 0 after the shards return.
//! With `--hold-after-shutdown` the shards never return, so only a second signal (exit code
//! 130) ends the process.

use std::sync::mpsc;

use ferromq_shards::{run_shards, Placement, RuntimeConfig, Shutdown};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hold = std::env::args().any(|arg| arg == "--hold-after-shutdown");
    let shutdown = Shutdown::new();
    shutdown.install_signal_handlers()?;

    let (started_tx, started_rx) = mpsc::channel();
    let placement = Placement::parse("*:writer,net,control;*:dispatch,net")?;
    let count = placement.len();
    let announcer = std::thread::spawn(move || {
        // Each shard reports once it runs; `ready` means all of them do.
        if started_rx.iter().take(count).count() == count {
            println!("ready");
        }
    });
    run_shards::<(), _, _, _>(placement, RuntimeConfig::default(), shutdown, move |ctx| {
        let started = started_tx.clone();
        async move {
            started
                .send(())
                .expect("the announcer waits for every shard");
            ctx.shutdown.wait().await;
            if ctx.id.index() == 0 {
                println!("stopping");
            }
            if hold {
                std::future::pending::<()>().await;
            }
        }
    })?;
    announcer
        .join()
        .map_err(|_| "the announcer thread panicked")?;
    Ok(())
}
