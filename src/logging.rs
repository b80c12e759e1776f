//! Where the servers' log goes and in what shape: text or JSON lines (`--log-format`), on
//! stderr or in a file rotated by size (`--log-file`), as Java's `logback_broker.xml` keeps
//! `broker.log`: a new file past 128 MB, the last 20 kept gzipped, written off the calling
//! thread (logback's `AsyncAppender`).
//!
//! A shard never waits for the log file's disk: lines go through a bounded queue (128,000
//! lines) to a writer thread, and when the queue is full a line is dropped rather than the
//! shard blocked. Lines on stderr are written by the calling thread.
//!
//! Tested by `tests/logging.rs`: a broker's JSON lines parsed, the disk-full state change
//! found with its fields, and the file rotated and gzipped at the size given.

use file_rotate::compression::Compression;
use file_rotate::suffix::AppendCount;
use file_rotate::{ContentLimit, FileRotate};
use std::io::IsTerminal;
use std::path::PathBuf;
use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::fmt::format::{DefaultFields, Format};
use tracing_subscriber::fmt::{MakeWriter, SubscriberBuilder};
use tracing_subscriber::EnvFilter;

/// Java's `maxFileSize` for `broker.log`.
pub const LOG_FILE_SIZE_DEFAULT: u64 = 128 * 1000 * 1000;

/// Java's `maxIndex` for `broker.log`: rotated files kept.
pub const LOG_FILES_KEPT_DEFAULT: usize = 20;

/// The shape of each line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (ANSI colours on a terminal).
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields` (the message is
    /// `fields.message`) and the spans it happened in.
    Json,
}

/// Where and how to log.
#[derive(Clone, Debug)]
pub struct LogOptions {
    /// RUST_LOG-syntax filter; `None` reads RUST_LOG, else `info`.
    pub filter: Option<String>,
    /// The line format.
    pub format: LogFormat,
    /// The log file; `None` logs to stderr.
    pub file: Option<PathBuf>,
    /// Bytes after which the file is rotated.
    pub file_size: u64,
    /// Rotated files kept (gzipped), the oldest removed first.
    pub files_kept: usize,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            filter: None,
            format: LogFormat::Text,
            file: None,
            file_size: LOG_FILE_SIZE_DEFAULT,
            files_kept: LOG_FILES_KEPT_DEFAULT,
        }
    }
}

/// Keeps the file writer's thread alive; dropping it writes out the lines still queued.
#[must_use = "dropping the guard stops the log file's writer"]
pub struct LogGuard(Option<WorkerGuard>);

impl std::fmt::Debug for LogGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LogGuard").field(&self.0.is_some()).finish()
    }
}

/// Installs the process's log subscriber.
///
/// # Errors
/// The log file's directory cannot be made, or a subscriber is already installed.
pub fn init(options: &LogOptions) -> anyhow::Result<LogGuard> {
    let text = match &options.filter {
        Some(text) => text.clone(),
        None => std::env::var(EnvFilter::DEFAULT_ENV).unwrap_or_else(|_| "info".to_owned()),
    };
    // openraft logs every failed heartbeat to a down peer at info and warn: only its warnings
    // and errors, unless the filter names it.
    let text = match text.contains("openraft") {
        true => text,
        false => format!("{text},openraft=warn"),
    };
    let filter = EnvFilter::new(text);
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let Some(path) = &options.file else {
        let builder = builder
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal());
        install(builder, options.format)?;
        return Ok(LogGuard(None));
    };
    // Made here so that a bad path is an error, not the rotating writer's panic.
    let path = std::path::absolute(path)
        .map_err(|error| anyhow::anyhow!("bad log file {}: {error}", path.display()))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|error| {
            anyhow::anyhow!("cannot make the log directory {}: {error}", dir.display())
        })?;
    }
    let limit = usize::try_from(options.file_size)
        .unwrap_or(usize::MAX)
        .max(1);
    let file = FileRotate::new(
        &path,
        AppendCount::new(options.files_kept),
        ContentLimit::BytesSurpassed(limit),
        // Every rotated file gzipped, as logback's `broker.%i.log.gz`.
        Compression::OnRotate(0),
        None,
    );
    let (writer, guard) = tracing_appender::non_blocking(file);
    install(builder.with_writer(writer).with_ansi(false), options.format)?;
    Ok(LogGuard(Some(guard)))
}

/// Installs `builder`'s subscriber with lines in `format`.
fn install<W>(
    builder: SubscriberBuilder<DefaultFields, Format, EnvFilter, W>,
    format: LogFormat,
) -> anyhow::Result<()>
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    installed.map_err(|error| anyhow::anyhow!("cannot install the logger: {error}"))
}
