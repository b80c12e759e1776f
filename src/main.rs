//! The `ferromq` command: parses flags, sets up logging and runs a server until it is told to
//! stop. All behaviour lives in the library.

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferromq::config::namesrv::NamesrvConfig;
use ferromq::config::properties;
use ferromq_shards::Shutdown;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;

/// ferromq: a RocketMQ-compatible message broker.
#[derive(Debug, Parser)]
#[command(name = "ferromq", version, about, long_about = None)]
struct Cli {
    /// Log filter in RUST_LOG syntax, e.g. `info` or `ferromq=debug,warn`. Overrides the
    /// RUST_LOG environment variable; the default is `info`.
    #[arg(long, global = true, value_name = "FILTER")]
    log: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a name server: brokers register with it and clients look up topic routes.
    ///
    /// Stops cleanly on SIGINT (Ctrl-C) or SIGTERM.
    Namesrv(NamesrvArgs),
}

#[derive(Debug, clap::Args)]
struct NamesrvArgs {
    /// Name server config file in Java properties format (`namesrv.conf` keys such as
    /// `listenPort`, `kvConfigPath`, `orderMessageEnable`, `scanNotActiveBrokerInterval`,
    /// `brokerExpiredTimeoutMillis`, `shards`).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Address to listen on, e.g. `0.0.0.0:9876` or `127.0.0.1:0` for any free port.
    /// Overrides `bindAddress` and `listenPort` from the config file.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// Shard placement: a core count (`2`) or `CPU:role,role;...` with roles net and control.
    /// Overrides `shards` from the config file; the default is one shard per core.
    #[arg(long, value_name = "SPEC")]
    shards: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log.as_deref());
    match cli.command {
        Command::Namesrv(args) => run_namesrv(args),
    }
}

fn init_tracing(filter: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match filter {
        Some(text) => EnvFilter::new(text),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn run_namesrv(args: NamesrvArgs) -> anyhow::Result<()> {
    let mut config = NamesrvConfig::default();
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let origin = path.display().to_string();
        let unknown = config.apply(&origin, &properties::parse(&text))?;
        for key in unknown {
            tracing::warn!(file = %origin, %key, "unknown name server config key ignored");
        }
    }
    if let Some(addr) = args.listen {
        config.bind_address = addr.ip();
        config.listen_port = addr.port();
    }
    if let Some(spec) = &args.shards {
        config.shards = Some(
            spec.parse()
                .with_context(|| format!("bad --shards `{spec}`"))?,
        );
    }
    let shutdown = Shutdown::new();
    shutdown
        .install_signal_handlers()
        .context("cannot install signal handlers")?;
    let namesrv = ferromq::namesrv::start(config, shutdown)?;
    namesrv.wait()?;
    tracing::info!("name server stopped");
    Ok(())
}
