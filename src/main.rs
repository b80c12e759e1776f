//! The `ferromq` command: parses flags, sets up logging and runs a server until it is told to
//! stop. All behaviour lives in the library.

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferromq::config::broker::{split_addresses, BrokerConfig};
use ferromq::config::controller::ControllerConfig;
use ferromq::config::namesrv::NamesrvConfig;
use ferromq::config::properties;
use ferromq::config::ConfigError;
use ferromq::logging::{LogFormat, LogOptions, LOG_FILES_KEPT_DEFAULT, LOG_FILE_SIZE_DEFAULT};
use ferromq_shards::{Placement, Shutdown};

/// mimalloc: request bodies are allocated on network shards and freed on the writer shard;
/// glibc's malloc serialises such cross-thread frees on an arena lock (seen in the store
/// benchmark's profile), mimalloc hands them back to the owning thread without one.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
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

    /// Log line format: `text`, or `json` (one object per line).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,

    /// Log to FILE instead of stderr, rotated by size (`--log-file-size`); rotated files are
    /// kept gzipped as FILE.1.gz (newest) to FILE.N.gz (`--log-files-kept`).
    #[arg(long, global = true, value_name = "FILE")]
    log_file: Option<PathBuf>,

    /// Bytes after which the log file is rotated (logback's `maxFileSize` for broker.log).
    #[arg(long, global = true, value_name = "BYTES", default_value_t = LOG_FILE_SIZE_DEFAULT)]
    log_file_size: u64,

    /// Rotated log files kept (logback's `maxIndex` for broker.log).
    #[arg(long, global = true, value_name = "N", default_value_t = LOG_FILES_KEPT_DEFAULT)]
    log_files_kept: usize,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a name server: brokers register with it and clients look up topic routes.
    ///
    /// Stops cleanly on SIGINT (Ctrl-C) or SIGTERM.
    Namesrv(NamesrvArgs),
    /// Run a broker: stores messages and serves producers and consumers.
    ///
    /// Stops cleanly on SIGINT (Ctrl-C) or SIGTERM.
    Broker(BrokerArgs),
    /// Run a name server and a broker in one process, data under `./data` — the quickest way
    /// to a working RocketMQ endpoint (name server 9876, broker 10911).
    ///
    /// Stops cleanly on SIGINT (Ctrl-C) or SIGTERM.
    Standalone(StandaloneArgs),
    /// Run a controller (RocketMQ 5.x controller mode): brokers with
    /// `enableControllerMode=true` and `controllerAddr` pointing here get their ids, roles and
    /// SyncStateSets from it, and a new master when theirs dies. Alone, its state is kept in
    /// `controllerStorePath` (in memory when unset); with `controllerDLegerPeers` it is
    /// replicated over the peers with raft, in `controllerStorePath`, and only the leader
    /// decides (list every controller in the brokers' `controllerAddr`).
    ///
    /// Stops cleanly on SIGINT (Ctrl-C) or SIGTERM.
    Controller(ControllerArgs),
    /// Operator commands with mqadmin's names and flags: topics, groups, offsets, messages,
    /// brokers (`ferromq admin -n 127.0.0.1:9876 topicList`).
    Admin(ferromq::admin::AdminArgs),
}

#[derive(Debug, clap::Args)]
struct BrokerArgs {
    /// Broker config file in Java properties format (`broker.conf` keys such as
    /// `brokerClusterName`, `brokerName`, `namesrvAddr`, `listenPort`, `storePathRootDir`,
    /// `flushDiskType`, `deleteWhen`, `fileReservedTime`, `autoCreateTopicEnable`, `shards`).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Address to listen on, e.g. `0.0.0.0:10911` or `127.0.0.1:0` for any free port.
    /// Overrides `bindAddress` and `listenPort`.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// Name servers, `;`-separated `host:port`. Overrides `namesrvAddr`.
    #[arg(short = 'n', long = "namesrv", value_name = "ADDRS")]
    namesrv: Option<String>,

    /// Store directory. Overrides `storePathRootDir`.
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,

    /// Shard placement: a core count (`2`) or `CPU:role,role;...` with roles writer,
    /// dispatch, net and control. Overrides `shards`; the default fits the machine's cores.
    #[arg(long, value_name = "SPEC")]
    shards: Option<String>,
}

#[derive(Debug, clap::Args)]
struct StandaloneArgs {
    /// Directory for the store (`DIR/store`) and the name server's KV file
    /// (`DIR/namesrv/kvConfig.json`).
    #[arg(long, value_name = "DIR", default_value = "data")]
    data: PathBuf,

    /// Broker config file (`broker.conf` keys); the standalone defaults apply first, and
    /// the file's keys win over them.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Name server address (default `0.0.0.0:9876`).
    #[arg(long, value_name = "ADDR")]
    namesrv_listen: Option<SocketAddr>,

    /// Broker address. Overrides `bindAddress` and `listenPort` from the config file; without
    /// either, `0.0.0.0:10911`.
    #[arg(long, value_name = "ADDR")]
    broker_listen: Option<SocketAddr>,
}

#[derive(Debug, clap::Args)]
struct ControllerArgs {
    /// Controller config file in Java properties format (`controller.conf` keys such as
    /// `listenPort`, `controllerDLegerPeers`, `controllerDLegerSelfId`,
    /// `scanNotActiveBrokerInterval`, `enableElectUncleanMaster`, `notifyBrokerRoleChanged`).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Address to listen on, e.g. `0.0.0.0:9878` or `127.0.0.1:0` for any free port.
    /// Overrides `bindAddress` and `listenPort` from the config file.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
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
    // The admin tool prints its answers on stdout; only warnings go to the log.
    let filter = cli.log.clone().or(match cli.command {
        Command::Admin(_) => Some("warn".to_owned()),
        _ => None,
    });
    // Held to the end: dropping it writes out the log file's queued lines.
    let _log = ferromq::logging::init(&LogOptions {
        filter,
        format: cli.log_format,
        file: cli.log_file.clone(),
        file_size: cli.log_file_size,
        files_kept: cli.log_files_kept,
    })?;
    if !matches!(cli.command, Command::Admin(_)) {
        let limit = ferromq_uring::net::raise_open_files_limit();
        tracing::debug!(?limit, "open files limit");
    }
    match cli.command {
        Command::Admin(args) => run_admin(args),
        Command::Namesrv(args) => run_namesrv(args),
        Command::Broker(args) => run_broker(args),
        Command::Standalone(args) => run_standalone(args),
        Command::Controller(args) => run_controller(args),
    }
}

fn run_admin(args: ferromq::admin::AdminArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let text = match ferromq::admin::run(args) {
        Ok(text) => text,
        Err(error) => {
            // A refusal is an answer, not a crash: its code and remark, and no backtrace.
            eprintln!("ferromq admin: {error}");
            std::process::exit(1);
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Reads the Java properties file at `path`, if any, and applies it with `apply`; unknown
/// keys are logged as warnings.
fn apply_config_file(
    path: Option<&PathBuf>,
    server: &str,
    apply: impl FnOnce(&str, &[properties::Property]) -> Result<Vec<String>, ConfigError>,
) -> anyhow::Result<()> {
    let Some(path) = path else {
        return Ok(());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    let origin = path.display().to_string();
    for key in apply(&origin, &properties::parse(&text))? {
        tracing::warn!(file = %origin, %key, "unknown {server} config key ignored");
    }
    Ok(())
}

fn parse_shards(spec: &str) -> anyhow::Result<Placement> {
    spec.parse()
        .with_context(|| format!("bad --shards `{spec}`"))
}

/// The stop signal, tied to SIGINT and SIGTERM.
fn signal_shutdown() -> anyhow::Result<Shutdown> {
    let shutdown = Shutdown::new();
    shutdown
        .install_signal_handlers()
        .context("cannot install signal handlers")?;
    Ok(shutdown)
}

fn run_namesrv(args: NamesrvArgs) -> anyhow::Result<()> {
    let mut config = NamesrvConfig::default();
    apply_config_file(args.config.as_ref(), "name server", |origin, properties| {
        config.apply(origin, properties)
    })?;
    if let Some(addr) = args.listen {
        config.bind_address = addr.ip();
        config.listen_port = addr.port();
    }
    if let Some(spec) = &args.shards {
        config.shards = Some(parse_shards(spec)?);
    }
    let shutdown = signal_shutdown()?;
    let namesrv = ferromq::namesrv::start(config, shutdown)?;
    namesrv.wait()?;
    tracing::info!("name server stopped");
    Ok(())
}

fn run_controller(args: ControllerArgs) -> anyhow::Result<()> {
    let mut config = ControllerConfig::default();
    apply_config_file(args.config.as_ref(), "controller", |origin, properties| {
        config.apply(origin, properties)
    })?;
    if let Some(addr) = args.listen {
        config.bind_address = addr.ip();
        config.listen_port = addr.port();
    }
    let shutdown = signal_shutdown()?;
    let controller = ferromq::controller::start(config, shutdown)?;
    controller.wait()?;
    tracing::info!("controller stopped");
    Ok(())
}

fn broker_config(path: Option<&PathBuf>, config: &mut BrokerConfig) -> anyhow::Result<()> {
    apply_config_file(path, "broker", |origin, properties| {
        config.apply(origin, properties)
    })?;
    config.config_path = path.cloned();
    Ok(())
}

fn run_broker(args: BrokerArgs) -> anyhow::Result<()> {
    let mut config = BrokerConfig::default();
    broker_config(args.config.as_ref(), &mut config)?;
    if let Some(addr) = args.listen {
        config.bind_address = addr.ip();
        config.listen_port = addr.port();
    }
    if let Some(namesrv) = &args.namesrv {
        config.namesrv_addr = split_addresses(namesrv);
    }
    if let Some(store) = args.store {
        config.store.store_path_root_dir = store;
    }
    if let Some(spec) = &args.shards {
        config.shards = Some(parse_shards(spec)?);
    }
    let shutdown = signal_shutdown()?;
    let broker = ferromq::broker::start(config, shutdown)?;
    broker.wait()?;
    tracing::info!("broker stopped");
    Ok(())
}

fn run_standalone(args: StandaloneArgs) -> anyhow::Result<()> {
    let shutdown = signal_shutdown()?;
    let mut config = BrokerConfig {
        broker_name: "broker-a".to_owned(),
        broker_ip1: std::net::Ipv4Addr::LOCALHOST.into(),
        ..BrokerConfig::default()
    };
    config.store.store_path_root_dir = args.data.join("store");
    broker_config(args.config.as_ref(), &mut config)?;
    // One process, one set of TLS settings: the broker's config file sets both servers'.
    let namesrv_listen = args
        .namesrv_listen
        .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 9876)));
    let namesrv_config = NamesrvConfig {
        bind_address: namesrv_listen.ip(),
        listen_port: namesrv_listen.port(),
        kv_config_path: args.data.join("namesrv").join("kvConfig.json"),
        shards: Some("1".parse().context("one name server shard")?),
        tls: config.tls.clone(),
        ..NamesrvConfig::default()
    };
    let namesrv = ferromq::namesrv::start(namesrv_config, shutdown.clone())?;
    // A flag wins over the file only when it is given: its absence leaves the file's
    // `bindAddress` and `listenPort`, else the defaults (all interfaces, 10911).
    if let Some(addr) = args.broker_listen {
        config.bind_address = addr.ip();
        config.listen_port = addr.port();
    }
    config.namesrv_addr = vec![format!("127.0.0.1:{}", namesrv.addr.port())];
    let broker = match ferromq::broker::start(config, shutdown.clone()) {
        Ok(broker) => broker,
        Err(error) => {
            shutdown.trigger();
            let _ = namesrv.wait();
            return Err(error.into());
        }
    };
    tracing::info!(
        namesrv = %namesrv.addr,
        broker = %broker.addr,
        data = %args.data.display(),
        "standalone ready"
    );
    broker.wait()?;
    namesrv.wait()?;
    tracing::info!("standalone stopped");
    Ok(())
}
