//! The JSON header serialization (type 0), `RemotingSerializable` with fastjson in Java.
//!
//! Output matches what a Java peer emits (`reference/remoting.md` §4.1): keys in alphabetical
//! order (`code`, `extFields`, `flag`, `language`, `opaque`, `remark`,
//! `serializeTypeCurrentRPC`, `version`), null fields omitted, every extFields value a string,
//! `language` as its enum name.
//!
//! Input is accepted as leniently as Java accepts it: any key order, unknown keys, missing keys
//! (0 / null), `language` as a name or a number, `remark` as `""`, extFields values that are
//! JSON strings, numbers or booleans, and trailing whitespace after the object.

use super::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use super::DecodeError;
use serde_json::Value;

/// Appends the JSON header of `command` to `out`.
pub fn encode_header(command: &RemotingCommand, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"code\":");
    push_int(out, i64::from(command.code));
    if let Some(fields) = &command.ext_fields {
        out.extend_from_slice(b",\"extFields\":{");
        for (index, (key, value)) in fields.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            push_str(out, key);
            out.push(b':');
            push_str(out, value);
        }
        out.push(b'}');
    }
    out.extend_from_slice(b",\"flag\":");
    push_int(out, i64::from(command.flag));
    out.extend_from_slice(b",\"language\":");
    match command.language.name() {
        Some(name) => push_str(out, name),
        None => push_int(out, i64::from(command.language.0)),
    }
    out.extend_from_slice(b",\"opaque\":");
    push_int(out, i64::from(command.opaque));
    if let Some(remark) = &command.remark {
        out.extend_from_slice(b",\"remark\":");
        push_str(out, remark);
    }
    out.extend_from_slice(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    push_int(out, i64::from(command.version));
    out.push(b'}');
}

/// Decodes a JSON header; the body is filled in by the caller.
///
/// # Errors
/// [`DecodeError::BadJsonHeader`] when the bytes are not one JSON object, or a field has a type
/// no Java peer would accept (for example a `code` that is an object).
pub fn decode_header(bytes: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| DecodeError::BadJsonHeader(e.to_string()))?;
    let Value::Object(map) = value else {
        return Err(DecodeError::BadJsonHeader(
            "header is not a JSON object".into(),
        ));
    };
    let mut command = RemotingCommand {
        code: 0,
        language: LanguageCode::JAVA,
        version: 0,
        opaque: 0,
        flag: 0,
        remark: None,
        ext_fields: None,
        serialize_type: SerializeType::Json,
        body: Vec::new(),
    };
    for (key, value) in map {
        match key.as_str() {
            "code" => command.code = int_field("code", &value)?,
            "flag" => command.flag = int_field("flag", &value)?,
            "opaque" => command.opaque = int_field("opaque", &value)?,
            "version" => command.version = int_field("version", &value)?,
            "language" => command.language = language_field(&value)?,
            "remark" => command.remark = optional_text("remark", &value)?,
            "extFields" => command.ext_fields = ext_fields(&value)?,
            _ => {} // serializeTypeCurrentRPC and anything newer: informational.
        }
    }
    Ok(command)
}

fn push_int(out: &mut Vec<u8>, value: i64) {
    out.extend_from_slice(value.to_string().as_bytes());
}

fn push_str(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(&mut *out, text).expect("writing a str into a Vec cannot fail");
}

fn int_field(name: &str, value: &Value) -> Result<i32, DecodeError> {
    let parsed = match value {
        Value::Null => Some(0),
        Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| DecodeError::BadJsonHeader(format!("`{name}` is not an int: {value}")))
}

fn language_field(value: &Value) -> Result<LanguageCode, DecodeError> {
    match value {
        Value::Null => Ok(LanguageCode::JAVA),
        // Unknown names are accepted: the language only labels the peer.
        Value::String(name) => Ok(LanguageCode::from_name(name).unwrap_or(LanguageCode::OTHER)),
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u8::try_from(n).ok())
            .map(LanguageCode)
            .ok_or_else(|| DecodeError::BadJsonHeader(format!("bad `language`: {n}"))),
        other => Err(DecodeError::BadJsonHeader(format!(
            "bad `language`: {other}"
        ))),
    }
}

fn optional_text(name: &str, value: &Value) -> Result<Option<String>, DecodeError> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Number(_) | Value::Bool(_) => Ok(Some(value.to_string())),
        other => Err(DecodeError::BadJsonHeader(format!(
            "`{name}` is not text: {other}"
        ))),
    }
}

fn ext_fields(value: &Value) -> Result<Option<ExtFields>, DecodeError> {
    let map = match value {
        Value::Null => return Ok(None),
        Value::Object(map) => map,
        other => {
            return Err(DecodeError::BadJsonHeader(format!(
                "`extFields` is not an object: {other}"
            )))
        }
    };
    let mut fields = ExtFields::new();
    for (key, value) in map {
        match value {
            // Java's map holds strings; a null value is the same as no entry.
            Value::Null => {}
            Value::String(s) => fields.push(key.clone(), s.clone()),
            Value::Number(_) | Value::Bool(_) => fields.push(key.clone(), value.to_string()),
            other => {
                return Err(DecodeError::BadJsonHeader(format!(
                    "extFields value of `{key}` is not a string: {other}"
                )))
            }
        }
    }
    Ok(Some(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_matches_java_key_order() {
        let mut command = RemotingCommand::request(super::super::RequestCode(105));
        command.version = 479;
        command.opaque = 7;
        command.ext_fields = Some([("topic", "TopicTest")].into_iter().collect());
        let mut out = Vec::new();
        encode_header(&command, &mut out);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            concat!(
                r#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","#,
                r#""opaque":7,"serializeTypeCurrentRPC":"JSON","version":479}"#
            )
        );
    }

    #[test]
    fn decode_lenient_input_takes_defaults() {
        let text = concat!(
            r#"{"opaque":"3","language":9,"#,
            r#""extFields":{"queueId":1,"order":true,"x":null},"remark":""}"#,
            "\n"
        )
        .as_bytes();
        let command = decode_header(text).unwrap();
        assert_eq!(command.code, 0);
        assert_eq!(command.opaque, 3);
        assert_eq!(command.language, LanguageCode::GO);
        assert_eq!(command.remark.as_deref(), Some(""));
        let fields = command.ext_fields.unwrap();
        assert_eq!(fields.get("queueId"), Some("1"));
        assert_eq!(fields.get("order"), Some("true"));
        assert_eq!(fields.get("x"), None);
    }

    #[test]
    fn decode_rejects_non_object() {
        assert!(matches!(
            decode_header(b"[1]"),
            Err(DecodeError::BadJsonHeader(_))
        ));
        assert!(matches!(
            decode_header(b"{\"code\":{}}"),
            Err(DecodeError::BadJsonHeader(_))
        ));
    }
}
