//! The JSON header serialization (type 0), `RemotingSerializable` with fastjson in Java.
//!
//! Output matches what a Java peer emits (`reference/remoting.md` §4.1): keys in alphabetical
//! order (`code`, `extFields`, `flag`, `language`, `opaque`, `remark`,
//! `serializeTypeCurrentRPC`, `version`), null fields omitted, every extFields value a string,
//! `language` as its enum name.
//!
//! Input is accepted as leniently as Java accepts it: any key order, unknown keys, missing keys
//! (0 / null), `language` as a name or a number, `remark` as `""`, extFields values that are
//! JSON strings, numbers or booleans, trailing whitespace after the object, and bytes that are
//! not UTF-8, read as U+FFFD (Java makes a `String` of the header bytes before parsing).

use super::command::{ExtFields, LanguageCode, RemotingCommand};
use super::DecodeError;
use super::RequestCode;
use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use std::fmt;

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
/// The header is read in one pass into the command (no `serde_json::Value` tree, no key
/// strings for the command's own fields): it is parsed for every request, and building the
/// tree took 30% of a broker's CPU under a produce load (`perf`, 100k msg/s).
///
/// # Errors
/// [`DecodeError::BadJsonHeader`] when the bytes are not one JSON object, or a field has a type
/// no Java peer would accept (for example a `code` that is an object).
pub fn decode_header(bytes: &[u8]) -> Result<RemotingCommand, DecodeError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => decode_text(text),
        // Rare: the copy is paid only by a header that is not UTF-8.
        Err(_) => decode_text(&String::from_utf8_lossy(bytes)),
    }
}

fn decode_text(text: &str) -> Result<RemotingCommand, DecodeError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let command = serde::Deserializer::deserialize_map(&mut deserializer, CommandVisitor)
        .and_then(|command| deserializer.end().map(|()| command))
        .map_err(|e| DecodeError::BadJsonHeader(e.to_string()))?;
    Ok(command)
}

fn push_int(out: &mut Vec<u8>, value: i64) {
    out.extend_from_slice(value.to_string().as_bytes());
}

fn push_str(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(&mut *out, text).expect("writing a str into a Vec cannot fail");
}

/// Reads the header object into a [`RemotingCommand`].
struct CommandVisitor;

impl<'de> Visitor<'de> for CommandVisitor {
    type Value = RemotingCommand;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object header")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RemotingCommand, A::Error> {
        // What a header leaves out reads as 0 (the version too), as Java's fields default.
        let mut command = RemotingCommand {
            version: 0,
            ..RemotingCommand::request(RequestCode(0))
        };
        while let Some(key) = map.next_key::<HeaderKey>()? {
            match key {
                HeaderKey::Code => command.code = map.next_value::<LenientInt>()?.0,
                HeaderKey::Flag => command.flag = map.next_value::<LenientInt>()?.0,
                HeaderKey::Opaque => command.opaque = map.next_value::<LenientInt>()?.0,
                HeaderKey::Version => command.version = map.next_value::<LenientInt>()?.0,
                HeaderKey::Language => command.language = map.next_value::<Language>()?.0,
                HeaderKey::Remark => command.remark = map.next_value::<LenientText>()?.0,
                HeaderKey::ExtFields => command.ext_fields = map.next_value::<LenientFields>()?.0,
                // serializeTypeCurrentRPC and anything newer: informational.
                HeaderKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(command)
    }
}

/// A key of the header object, told apart without allocating it.
enum HeaderKey {
    Code,
    Flag,
    Opaque,
    Version,
    Language,
    Remark,
    ExtFields,
    Other,
}

impl<'de> Deserialize<'de> for HeaderKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = HeaderKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a header field name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<HeaderKey, E> {
                Ok(match key {
                    "code" => HeaderKey::Code,
                    "flag" => HeaderKey::Flag,
                    "opaque" => HeaderKey::Opaque,
                    "version" => HeaderKey::Version,
                    "language" => HeaderKey::Language,
                    "remark" => HeaderKey::Remark,
                    "extFields" => HeaderKey::ExtFields,
                    _ => HeaderKey::Other,
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// An int as Java reads one: a number, a numeric string, or null (0).
struct LenientInt(i32);

impl<'de> Deserialize<'de> for LenientInt {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IntVisitor;
        impl Visitor<'_> for IntVisitor {
            type Value = LenientInt;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an int (a number, a numeric string or null)")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<LenientInt, E> {
                in_int_range(n)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<LenientInt, E> {
                in_int_range(n)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<LenientInt, E> {
                s.trim()
                    .parse()
                    .map(LenientInt)
                    .map_err(|_| E::custom(format!("{s:?} is not an int")))
            }
            fn visit_unit<E: de::Error>(self) -> Result<LenientInt, E> {
                Ok(LenientInt(0))
            }
        }
        deserializer.deserialize_any(IntVisitor)
    }
}

/// `n` as an int, or the error naming it if it does not fit one.
fn in_int_range<E: de::Error, N: Copy + fmt::Display + TryInto<i32>>(
    n: N,
) -> Result<LenientInt, E> {
    n.try_into()
        .map(LenientInt)
        .map_err(|_| E::custom(format!("{n} is out of an int's range")))
}

/// `language`: a name (unknown ones are accepted: it only labels the peer), a number, or
/// null (JAVA).
struct Language(LanguageCode);

impl<'de> Deserialize<'de> for Language {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LanguageVisitor;
        impl Visitor<'_> for LanguageVisitor {
            type Value = Language;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a language name or code")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Language, E> {
                Ok(Language(
                    LanguageCode::from_name(name).unwrap_or(LanguageCode::OTHER),
                ))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Language, E> {
                u8::try_from(n)
                    .map(|code| Language(LanguageCode(code)))
                    .map_err(|_| E::custom(format!("bad `language`: {n}")))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Language, E> {
                Err(E::custom(format!("bad `language`: {n}")))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Language, E> {
                Ok(Language(LanguageCode::JAVA))
            }
        }
        deserializer.deserialize_any(LanguageVisitor)
    }
}

/// Text as Java keeps it: a string, a number or boolean written as text, or null (none).
struct LenientText(Option<String>);

impl<'de> Deserialize<'de> for LenientText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut text = String::new();
        let present = AppendText(&mut text).deserialize(deserializer)?;
        Ok(LenientText(present.then_some(text)))
    }
}

/// `extFields`: an object of text values (a null value is the same as no entry), or null.
struct LenientFields(Option<ExtFields>);

impl<'de> Deserialize<'de> for LenientFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = LenientFields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an `extFields` object of text values")
            }
            fn visit_unit<E: de::Error>(self) -> Result<LenientFields, E> {
                Ok(LenientFields(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LenientFields, A::Error> {
                // A send's header has 12-14 fields: one allocation for them, not growths.
                let mut fields = ExtFields::with_capacity(map.size_hint().unwrap_or(16));
                loop {
                    // Key and value are appended to the fields' text as they are read.
                    let key_start = fields.text_mut().len();
                    if map.next_key_seed(AppendKey(fields.text_mut()))?.is_none() {
                        break;
                    }
                    let value_start = fields.text_mut().len();
                    let present = map.next_value_seed(AppendText(fields.text_mut()))?;
                    let value_end = fields.text_mut().len();
                    if present {
                        // Duplicates stay; `ExtFields::get` takes the last, as Java's map
                        // keeps it.
                        fields.push_appended((key_start, value_start), (value_start, value_end));
                    } else {
                        // A null value is the same as no entry.
                        fields.text_mut().truncate(key_start);
                    }
                }
                Ok(LenientFields(Some(fields)))
            }
        }
        deserializer.deserialize_any(FieldsVisitor)
    }
}

/// Appends a JSON string (an extFields key) to the text.
struct AppendKey<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for AppendKey<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        struct KeyVisitor<'a>(&'a mut String);
        impl Visitor<'_> for KeyVisitor<'_> {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an extFields name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<(), E> {
                self.0.push_str(key);
                Ok(())
            }
        }
        deserializer.deserialize_str(KeyVisitor(self.0))
    }
}

/// Appends an extFields value as text (a string, or a number or boolean written as Java's
/// map would hold it); `false` for null, which appends nothing.
struct AppendText<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for AppendText<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        struct TextVisitor<'a>(&'a mut String);
        impl TextVisitor<'_> {
            fn write(self, value: impl fmt::Display) -> bool {
                use fmt::Write;
                write!(self.0, "{value}").expect("writing to a String cannot fail");
                true
            }
        }
        impl Visitor<'_> for TextVisitor<'_> {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("text (a string, number, boolean or null)")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<bool, E> {
                self.0.push_str(s);
                Ok(true)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<bool, E> {
                Ok(self.write(n))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<bool, E> {
                Ok(self.write(n))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<bool, E> {
                Ok(match serde_json::Number::from_f64(n) {
                    Some(number) => self.write(number),
                    None => self.write(n),
                })
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<bool, E> {
                Ok(self.write(b))
            }
            fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
                Ok(false)
            }
        }
        deserializer.deserialize_any(TextVisitor(self.0))
    }
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
    fn decode_reads_escapes_numbers_as_text_and_the_last_duplicate() {
        let text = concat!(
            r#"{"code":"10","serializeTypeCurrentRPC":"JSON","future":{"a":[1,2]},"#,
            r#""extFields":{"k\u0065y":"v\"1","f":1.5,"k":2,"n":-3},"remark":7,"version":null} "#,
        )
        .as_bytes();
        let command = decode_header(text).unwrap();
        assert_eq!(command.code, 10);
        assert_eq!(command.version, 0);
        assert_eq!(command.remark.as_deref(), Some("7"));
        let fields = command.ext_fields.unwrap();
        assert_eq!(fields.get("key"), Some("v\"1"));
        assert_eq!(fields.get("f"), Some("1.5"));
        assert_eq!(fields.get("n"), Some("-3"));
        let twice = decode_header(br#"{"extFields":{"a":"1","a":"2"}}"#).unwrap();
        assert_eq!(twice.ext_fields.unwrap().get("a"), Some("2"));
    }

    #[test]
    fn decode_reads_bytes_that_are_not_utf8_as_replacement_characters() {
        let text = b"{\"code\":30,\"remark\":\"bad\xff\",\"extFields\":{\"topic\":\"T\xfe\xffx\"}}";
        let command = decode_header(text).unwrap();
        assert_eq!(command.code, 30);
        assert_eq!(command.remark.as_deref(), Some("bad\u{fffd}"));
        let fields = command.ext_fields.unwrap();
        assert_eq!(fields.get("topic"), Some("T\u{fffd}\u{fffd}x"));
    }

    #[test]
    fn decode_rejects_what_java_would_not_read() {
        for bad in [
            &br#"{"code":1.5}"#[..],
            br#"{"code":"x"}"#,
            br#"{"opaque":4294967296}"#,
            br#"{"language":-1}"#,
            br#"{"extFields":{"a":{"b":1}}}"#,
            br#"{"extFields":[1]}"#,
            br#"{"remark":[]}"#,
            br#"{"code":1} x"#,
            br#"{"code":1"#,
        ] {
            assert!(
                matches!(decode_header(bad), Err(DecodeError::BadJsonHeader(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
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
