//! How each group consumes each topic, PULL or POP (`messageRequestMode.json`, Java 5.x's
//! `MessageRequestModeManager`), as SET_MESSAGE_REQUEST_MODE (`mqadmin setConsumeMode`)
//! sets it and QUERY_ASSIGNMENT reads it.
//!
//! The file is Java's: `{"messageRequestModeMap":{topic:{group:body}}}` with each body a
//! `SetMessageRequestModeRequestBody`, so a store moves between ferromq and a Java broker
//! with its modes. A change is answered once the file is written.

use super::lock;
use crate::config::persist::{next_snapshot_version, read_with_backup, write_snapshot_off_shard};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A group's mode on a topic (`SetMessageRequestModeRequestBody`, also the body of
/// SET_MESSAGE_REQUEST_MODE).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestMode {
    /// `consumerGroup`.
    #[serde(default)]
    pub consumer_group: String,
    /// `mode`: `PULL` or `POP`.
    #[serde(default = "pull")]
    pub mode: String,
    /// `popShareQueueNum`: in POP mode, how many following consumers' queues a consumer
    /// pops too (0 or less, or as many as the group has: every queue, as queue -1).
    #[serde(default)]
    pub pop_share_queue_num: i32,
    /// `topic`.
    #[serde(default)]
    pub topic: String,
}

/// `MessageRequestMode.PULL`.
pub const MODE_PULL: &str = "PULL";
/// `MessageRequestMode.POP`.
pub const MODE_POP: &str = "POP";

fn pull() -> String {
    MODE_PULL.to_owned()
}

impl RequestMode {
    /// Whether the mode is POP.
    #[must_use]
    pub fn is_pop(&self) -> bool {
        self.mode == MODE_POP
    }
}

/// The file's shape (`MessageRequestModeSerializeWrapper`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModeFile {
    #[serde(default)]
    message_request_mode_map: BTreeMap<String, BTreeMap<String, RequestMode>>,
}

/// The table of modes, by topic then group.
#[derive(Debug)]
pub struct RequestModes {
    path: PathBuf,
    table: Mutex<ModeFile>,
}

impl RequestModes {
    /// Reads `messageRequestMode.json` from `dir` (or its `.bak`); empty when neither exists.
    ///
    /// # Errors
    /// A file that exists but is not such a table (named in the message).
    pub(super) fn load(dir: &Path) -> Result<RequestModes, String> {
        let path = dir.join("messageRequestMode.json");
        let accept = |bytes: &[u8]| serde_json::from_slice::<ModeFile>(bytes).is_ok();
        let table = match read_with_backup(&path, accept) {
            Ok(Some(bytes)) => {
                serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?
            }
            Ok(None) => ModeFile::default(),
            Err(error) => return Err(format!("{}: {error}", path.display())),
        };
        Ok(RequestModes {
            path,
            table: Mutex::new(table),
        })
    }

    /// The mode set for `group` on `topic`, if any.
    #[must_use]
    pub fn get(&self, topic: &str, group: &str) -> Option<RequestMode> {
        let table = lock(&self.table);
        table
            .message_request_mode_map
            .get(topic)?
            .get(group)
            .cloned()
    }

    /// Sets `mode` (for its topic and group); ends once the file holds it.
    pub async fn set(&self, mode: RequestMode) {
        let (version, bytes) = {
            let mut table = lock(&self.table);
            let groups = table
                .message_request_mode_map
                .entry(mode.topic.clone())
                .or_default();
            groups.insert(mode.consumer_group.clone(), mode);
            (next_snapshot_version(), self.json_of(&table).into_bytes())
        };
        if let Err(error) = write_snapshot_off_shard(self.path.clone(), version, bytes).await {
            tracing::error!(path = %self.path.display(), %error, "cannot persist config");
        }
    }

    /// The table as the file holds it (the body of GET_ALL_MESSAGE_REQUEST_MODE).
    #[must_use]
    pub fn to_json(&self) -> String {
        self.json_of(&lock(&self.table))
    }

    fn json_of(&self, table: &ModeFile) -> String {
        serde_json::to_string(table).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_reads_and_writes_javas_shape() {
        let java = concat!(
            r#"{"messageRequestModeMap":{"T":{"G":{"consumerGroup":"G","mode":"POP","#,
            r#""popShareQueueNum":0,"topic":"T"}}}}"#
        );
        let file: ModeFile = serde_json::from_str(java).unwrap();
        assert_eq!(serde_json::to_string(&file).unwrap(), java);
        let mode = &file.message_request_mode_map["T"]["G"];
        assert!(mode.is_pop());
        let defaults: RequestMode = serde_json::from_str(r#"{"topic":"T"}"#).unwrap();
        assert_eq!(defaults.mode, MODE_PULL);
        assert_eq!(defaults.pop_share_queue_num, 0);
    }
}
