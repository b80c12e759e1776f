//! The broadcasting offset file, in the form Java's `LocalFileOffsetStore` writes.
//!
//! Java keeps `~/.rocketmq_offsets/<clientId>/<group>/offsets.json` holding an
//! `OffsetSerializeWrapper`: `{"offsetTable":{<MessageQueue as JSON>:<offset>,...}}`. fastjson
//! writes object keys as bare objects, which is not JSON, so this module has its own writer
//! and a reader for exactly that shape (whitespace anywhere, as fastjson's pretty form has).

use super::MessageQueue;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file path Java uses under `root` (`~/.rocketmq_offsets` by default).
#[must_use]
pub fn offsets_path(root: &Path, client_id: &str, group: &str) -> PathBuf {
    root.join(client_id).join(group).join("offsets.json")
}

/// Writes the table as fastjson does (keys: brokerName, queueId, topic, in that order).
#[must_use]
pub fn encode(table: &BTreeMap<MessageQueue, i64>) -> String {
    let mut out = String::from("{\"offsetTable\":{");
    for (i, (mq, offset)) in table.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let key = serde_json::json!({
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "topic": mq.topic,
        });
        out.push_str(&key.to_string());
        out.push(':');
        out.push_str(&offset.to_string());
    }
    out.push_str("}}");
    out
}

struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl Cursor<'_> {
    fn skip_ws(&mut self) {
        let rest = &self.text[self.at..];
        self.at += rest.len() - rest.trim_start().len();
    }

    fn eat(&mut self, c: char) -> Result<(), String> {
        self.skip_ws();
        if self.text[self.at..].starts_with(c) {
            self.at += c.len_utf8();
            Ok(())
        } else {
            Err(format!("expected '{c}' at byte {}", self.at))
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.text[self.at..].chars().next()
    }

    fn value<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, String> {
        self.skip_ws();
        let mut stream = serde_json::Deserializer::from_str(&self.text[self.at..]).into_iter::<T>();
        match stream.next() {
            Some(Ok(value)) => {
                self.at += stream.byte_offset();
                Ok(value)
            }
            Some(Err(e)) => Err(format!("at byte {}: {e}", self.at)),
            None => Err("unexpected end".to_owned()),
        }
    }

    fn integer(&mut self) -> Result<i64, String> {
        self.skip_ws();
        let rest = &self.text[self.at..];
        let len = rest
            .char_indices()
            .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
            .map_or(rest.len(), |(i, _)| i);
        self.at += len;
        rest[..len]
            .parse()
            .map_err(|e| format!("bad offset at byte {}: {e}", self.at))
    }
}

/// Reads a file written by [`encode`] or by Java (object keys, or the same keys as strings).
///
/// # Errors
/// A description of the first thing that does not fit the shape.
pub fn decode(text: &str) -> Result<BTreeMap<MessageQueue, i64>, String> {
    let mut table = BTreeMap::new();
    let mut cursor = Cursor { text, at: 0 };
    cursor.eat('{')?;
    if cursor.peek() == Some('}') {
        return Ok(table);
    }
    let name: String = cursor.value()?;
    if name != "offsetTable" {
        return Err(format!("unexpected field {name}"));
    }
    cursor.eat(':')?;
    cursor.eat('{')?;
    loop {
        match cursor.peek() {
            Some('}') => break,
            Some(',') => cursor.eat(',')?,
            Some('"') => {
                let key: String = cursor.value()?;
                let mq: MessageQueue = serde_json::from_str(&key).map_err(|e| e.to_string())?;
                cursor.eat(':')?;
                table.insert(mq, cursor.integer()?);
            }
            Some('{') => {
                let mq: MessageQueue = cursor.value()?;
                cursor.eat(':')?;
                table.insert(mq, cursor.integer()?);
            }
            other => return Err(format!("unexpected {other:?} at byte {}", cursor.at)),
        }
    }
    Ok(table)
}

/// Writes `text` to `path` the way Java's `MixAll.string2File` does: a `.tmp` file first,
/// the previous file kept as `.bak`, then the rename.
///
/// # Errors
/// The I/O error.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    if path.exists() {
        std::fs::copy(path, path.with_extension("json.bak"))?;
    }
    std::fs::rename(&tmp, path)
}

/// Reads the table at `path`, falling back to the `.bak` copy; empty when neither exists.
///
/// # Errors
/// When a file exists but cannot be read or parsed.
pub fn read(path: &Path) -> Result<BTreeMap<MessageQueue, i64>, String> {
    for candidate in [path.to_path_buf(), path.with_extension("json.bak")] {
        match std::fs::read_to_string(&candidate) {
            Ok(text) => return decode(&text).map_err(|e| format!("{}: {e}", candidate.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", candidate.display())),
        }
    }
    Ok(BTreeMap::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(topic: &str, broker: &str, id: i32) -> MessageQueue {
        MessageQueue {
            topic: topic.into(),
            broker_name: broker.into(),
            queue_id: id,
        }
    }

    #[test]
    fn round_trip() {
        let mut table = BTreeMap::new();
        table.insert(mq("T", "broker-a", 0), 12);
        table.insert(mq("T", "broker-a", 1), 0);
        let text = encode(&table);
        assert_eq!(
            &text[..60],
            "{\"offsetTable\":{{\"brokerName\":\"broker-a\",\"queueId\":0,\"topic\""
        );
        assert_eq!(decode(&text).unwrap(), table);
        assert!(decode("{}").unwrap().is_empty());
    }

    #[test]
    fn reads_javas_pretty_form() {
        let java = "{\n\t\"offsetTable\":{{\n\t\t\t\"brokerName\":\"b\",\n\t\t\t\"queueId\":3,\n\
                    \t\t\t\"topic\":\"T\"\n\t\t}:42,{\"brokerName\":\"b\",\"queueId\":1,\
                    \"topic\":\"T\"}:-1\n\t}\n}";
        let table = decode(java).unwrap();
        assert_eq!(table.get(&mq("T", "b", 3)), Some(&42));
        assert_eq!(table.get(&mq("T", "b", 1)), Some(&-1));
        assert!(decode("{\"offsetTable\":{[1]:2}}").is_err());
    }
}
