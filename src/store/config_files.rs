//! The integer-keyed config files under `config/`: `consumerOffset.json` and
//! `delayOffset.json`, read and written in the exact shape Java 4.9.x gives them
//! (`reference/store-format.md` §11.2, §11.4).
//!
//! ```text
//! {
//! <TAB>"offsetTable":{
//! <TAB><TAB>"TopicA@group":{0:150,1:150
//! <TAB><TAB>},
//! <TAB><TAB>"%RETRY%group@group":{0:1
//! <TAB><TAB>}
//! <TAB>}
//! }
//! ```
//!
//! fastjson's pretty printer puts integer-keyed entries on one line with bare keys and the
//! closing brace on the next; there is no newline at the end of the file. Entries keep the
//! order they were read or inserted in. Reading accepts quoted keys too, and the 5.x fields
//! (`dataVersion`, `groupTopicMap`) are ignored.

use crate::config::fastjson::parse_lenient;
use serde_json::Value;

/// `consumerOffset.json`: `topic@group` → queue id → next offset to consume.
#[doc(alias = "ConsumerOffsetManager")]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerOffsetTable {
    /// Entries in file order.
    pub offset_table: Vec<(String, Vec<(i32, i64)>)>,
}

/// `delayOffset.json`: delay level → next offset in that level's queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DelayOffsetTable {
    /// Entries in file order.
    pub offset_table: Vec<(i32, i64)>,
}

/// A config file that is not what it should be.
#[derive(Debug, thiserror::Error)]
#[error("config file is not valid: {0}")]
pub struct ConfigFileError(String);

impl ConsumerOffsetTable {
    /// Parses the file.
    ///
    /// # Errors
    /// [`ConfigFileError`] naming what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<ConsumerOffsetTable, ConfigFileError> {
        let root = parse_lenient(bytes).map_err(ConfigFileError)?;
        let mut offset_table = Vec::new();
        for (key, queues) in object(&root["offsetTable"], "offsetTable")? {
            offset_table.push((key.clone(), int_map(queues, key)?));
        }
        Ok(ConsumerOffsetTable { offset_table })
    }

    /// The file as Java writes it.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\n\t\"offsetTable\":{");
        for (index, (key, queues)) in self.offset_table.iter().enumerate() {
            out.push_str(if index == 0 { "\n\t\t" } else { ",\n\t\t" });
            out.push_str(&serde_json::to_string(key).expect("strings serialize"));
            out.push(':');
            push_int_map(&mut out, queues, "\t\t");
        }
        out.push_str(if self.offset_table.is_empty() {
            "}\n}"
        } else {
            "\n\t}\n}"
        });
        out
    }

    /// The committed offset of `queue_id` of `topic` for `group`.
    #[must_use]
    pub fn offset(&self, topic: &str, group: &str, queue_id: i32) -> Option<i64> {
        let key = format!("{topic}@{group}");
        let (_, queues) = self.offset_table.iter().find(|(k, _)| *k == key)?;
        queues
            .iter()
            .find(|(q, _)| *q == queue_id)
            .map(|(_, offset)| *offset)
    }
}

impl DelayOffsetTable {
    /// Parses the file.
    ///
    /// # Errors
    /// [`ConfigFileError`] naming what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<DelayOffsetTable, ConfigFileError> {
        let root = parse_lenient(bytes).map_err(ConfigFileError)?;
        Ok(DelayOffsetTable {
            offset_table: int_map(&root["offsetTable"], "offsetTable")?,
        })
    }

    /// The file as Java writes it.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\n\t\"offsetTable\":");
        push_int_map(&mut out, &self.offset_table, "\t");
        out.push_str("\n}");
        out
    }
}

fn object<'a>(
    value: &'a Value,
    what: &str,
) -> Result<&'a serde_json::Map<String, Value>, ConfigFileError> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(ConfigFileError(format!(
            "`{what}` is not an object: {other}"
        ))),
    }
}

fn int_map(value: &Value, what: &str) -> Result<Vec<(i32, i64)>, ConfigFileError> {
    object(value, what)?
        .iter()
        .map(|(key, offset)| {
            let queue = key
                .parse()
                .map_err(|_| ConfigFileError(format!("{what}: bad key {key}")))?;
            let offset = offset
                .as_i64()
                .ok_or_else(|| ConfigFileError(format!("{what}: bad offset {offset}")))?;
            Ok((queue, offset))
        })
        .collect()
}

fn push_int_map(out: &mut String, entries: &[(i32, i64)], indent: &str) {
    out.push('{');
    for (index, (key, value)) in entries.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&format!("{key}:{value}"));
    }
    if !entries.is_empty() {
        out.push('\n');
        out.push_str(indent);
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_offsets_round_trip_and_look_up() {
        let text = "{\n\t\"offsetTable\":{\n\t\t\"T@g\":{0:5,1:6\n\t\t}\n\t}\n}";
        let table = ConsumerOffsetTable::parse(text.as_bytes()).unwrap();
        assert_eq!(table.offset("T", "g", 1), Some(6));
        assert_eq!(table.offset("T", "g", 2), None);
        assert_eq!(table.to_json(), text);
        let quoted = br#"{"offsetTable":{"T@g":{"0":5,"1":6}},"dataVersion":{"counter":1}}"#;
        assert_eq!(ConsumerOffsetTable::parse(quoted).unwrap(), table);
        assert!(ConsumerOffsetTable::parse(b"{\"offsetTable\":[]}").is_err());
    }

    #[test]
    fn empty_tables_write_valid_files() {
        let empty = ConsumerOffsetTable::default().to_json();
        assert_eq!(
            ConsumerOffsetTable::parse(empty.as_bytes()).unwrap(),
            ConsumerOffsetTable::default()
        );
        let empty = DelayOffsetTable::default().to_json();
        assert_eq!(
            DelayOffsetTable::parse(empty.as_bytes()).unwrap(),
            DelayOffsetTable::default()
        );
    }
}
