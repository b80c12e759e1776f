//! Starts two shards and panics on `shard-01`, for the abort test in `tests/runtime.rs`.
//!
//! The runtime must abort the whole process (SIGABRT) rather than let `shard-00` wait forever
//! for a peer whose state has no owner any more.

use ferromq_shards::{run_shards, Placement, RuntimeConfig, Shutdown};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let placement = Placement::parse("*:writer,net,control;*:dispatch,net")?;
    run_shards::<(), _, _, _>(
        placement,
        RuntimeConfig::default(),
        Shutdown::new(),
        |ctx| {
            async move {
                if ctx.id.index() == 1 {
                    panic!("deliberate panic on {}", ctx.id);
                }
                // Without the abort this shard would never return.
                ctx.shutdown.wait().await;
            }
        },
    )?;
    Ok(())
}
