//! The controller's events on disk: `controllerStorePath/events.jsonl`, one applied
//! [`Event`] a line as JSON (serde's externally tagged form, e.g.
//! `{"ElectMaster":{"broker_name":"broker-a","new_master":2}}`), appended in the order
//! applied and synced (`fdatasync`) before the responses and notices that follow from them
//! leave. At start the file is replayed through the same `apply`, which rebuilds the state.
//!
//! A last line without its newline is a write a crash cut short: nobody was answered after
//! it, so replay drops it (and the next append starts a fresh line after truncating it). Any
//! other line that does not parse stops the start with the file and line: the log is the
//! state, and skipping an event would change every later one.
//!
//! This single file stands in until the events go into a replicated log (openraft); it is
//! never compacted, which is fine for the few events a group makes (ids, elections, SyncStateSet
//! changes).
//!
//! Writes run on a thread of their own (blocking file I/O has no place on the shard); one
//! sync covers every batch queued by then (group commit).

use super::replicas_info::Event;
use futures::channel::{mpsc, oneshot};
use futures::StreamExt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The log's file name under `controllerStorePath`.
pub const EVENT_LOG_FILE: &str = "events.jsonl";

/// Why the log cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EventLogError {
    /// Reading, creating or writing the file failed.
    #[error("controller event log {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A whole line is not an event.
    #[error(
        "controller event log {path} line {line}: not an event ({reason}); fix or move the file"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parse error.
        reason: String,
    },
}

/// Reads the events of the log in `dir`, dropping a torn last line; none if there is no file.
///
/// # Errors
/// [`EventLogError`] when the file cannot be read or a whole line is not an event.
pub fn replay(dir: &Path) -> Result<Vec<Event>, EventLogError> {
    let path = dir.join(EVENT_LOG_FILE);
    let text = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(EventLogError::Io { path, source }),
    };
    let whole = text
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |end| end + 1);
    let mut events = Vec::new();
    for (index, line) in text[..whole].split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let event = serde_json::from_slice(line).map_err(|e| EventLogError::Corrupt {
            path: path.clone(),
            line: index + 1,
            reason: e.to_string(),
        })?;
        events.push(event);
    }
    if whole < text.len() {
        tracing::warn!(
            path = %path.display(),
            bytes = text.len() - whole,
            "controller event log ends in a torn line; dropped"
        );
        truncate(&path, whole as u64)?;
    }
    Ok(events)
}

fn truncate(path: &Path, len: u64) -> Result<(), EventLogError> {
    let io = |source| EventLogError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io)?;
    file.set_len(len).map_err(io)?;
    file.sync_all().map_err(io)
}

/// One batch to append, and where to say it is durable.
type Append = (Vec<Event>, oneshot::Sender<Result<(), String>>);

/// The sending half of the writer thread; cheap to clone.
#[derive(Clone, Debug)]
pub struct EventLog {
    appends: mpsc::UnboundedSender<Append>,
}

impl EventLog {
    /// Opens (creating) the log in `dir` for appending and starts its writer thread.
    ///
    /// # Errors
    /// [`EventLogError::Io`] when the directory or file cannot be made or opened.
    pub fn open(dir: &Path) -> Result<EventLog, EventLogError> {
        let path = dir.join(EVENT_LOG_FILE);
        let io = |source| EventLogError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        // Unbounded on purpose: the sender is the shard that already applied the events, and
        // it cannot wait for room without letting a later request's events overtake these.
        // What is queued is bounded by the requests in flight, each waiting for its batch.
        let (appends, receiver) = mpsc::unbounded();
        let writer_path = path.clone();
        std::thread::Builder::new()
            .name("controller-log".to_owned())
            .spawn(move || run_writer(file, &writer_path, receiver))
            .map_err(io)?;
        Ok(EventLog { appends })
    }

    /// Appends `events` and waits until they, and every batch queued before them, are on
    /// disk; with no events, only waits for those before.
    ///
    /// # Errors
    /// The write or sync error, as text; the caller must stop serving (state and log differ).
    pub async fn append(&self, events: Vec<Event>) -> Result<(), String> {
        let (done, durable) = oneshot::channel();
        self.appends
            .unbounded_send((events, done))
            .map_err(|_| "the controller log writer has stopped".to_owned())?;
        durable
            .await
            .map_err(|_| "the controller log writer has stopped".to_owned())?
    }
}

fn run_writer(mut file: std::fs::File, path: &Path, mut receiver: mpsc::UnboundedReceiver<Append>) {
    futures::executor::block_on(async move {
        while let Some(first) = receiver.next().await {
            let mut batch = vec![first];
            while let Ok(more) = receiver.try_recv() {
                batch.push(more);
            }
            let mut bytes = Vec::new();
            for (events, _) in &batch {
                for event in events {
                    // An enum of strings and integers always serializes.
                    if let Ok(line) = serde_json::to_vec(event) {
                        bytes.extend_from_slice(&line);
                        bytes.push(b'\n');
                    }
                }
            }
            // A batch of reads only waits for the writes queued before it.
            let written = if bytes.is_empty() {
                Ok(())
            } else {
                file.write_all(&bytes).and_then(|()| file.sync_data())
            };
            let outcome = written.map_err(|error| {
                let path = path.display();
                tracing::error!(%path, %error, "controller event log write failed");
                format!("controller event log {path}: {error}")
            });
            for (_, done) in batch {
                let _ = done.send(outcome.clone());
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(master: i64) -> Event {
        Event::ElectMaster {
            broker_name: "broker-a".to_owned(),
            new_master: Some(master),
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ferromq-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn append_then_replay_gives_the_events_in_order() {
        let dir = temp_dir("event-log");
        assert!(replay(&dir).unwrap().is_empty(), "no file is no events");
        let log = EventLog::open(&dir).unwrap();
        futures::executor::block_on(async {
            log.append(vec![event(1), event(2)]).await.unwrap();
            log.append(vec![event(3)]).await.unwrap();
        });
        assert_eq!(replay(&dir).unwrap(), vec![event(1), event(2), event(3)]);
        let text = std::fs::read_to_string(dir.join(EVENT_LOG_FILE)).unwrap();
        assert_eq!(
            text.lines().next(),
            Some(r#"{"ElectMaster":{"broker_name":"broker-a","new_master":1}}"#)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn replay_drops_a_torn_last_line_and_refuses_a_corrupt_one() {
        let dir = temp_dir("event-log-torn");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(EVENT_LOG_FILE);
        let whole = format!("{}\n", serde_json::to_string(&event(1)).unwrap());
        std::fs::write(&path, format!("{whole}{{\"ElectMas")).unwrap();
        assert_eq!(replay(&dir).unwrap(), vec![event(1)]);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            whole,
            "the torn tail is cut"
        );
        std::fs::write(&path, format!("{whole}garbage\n{whole}")).unwrap();
        let error = replay(&dir).unwrap_err().to_string();
        assert!(error.contains("line 2: not an event"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
