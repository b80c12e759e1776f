//! Reading and writing the JSON that Java's fastjson 1.x produces (`reference/remoting.md`
//! §10): maps with integer keys are written with bare keys (`{0:150}`), which is not JSON.
//!
//! [`parse_lenient`] quotes bare numeric keys and parses the result, so both forms read the
//! same; object key order is kept. [`queue_keyed_map`] reads maps keyed by objects (the
//! `MessageQueue`-keyed offset tables of consume stats and offset resets). Writers for the
//! files whose integer-keyed maps must stay bare live with their types
//! (`store::config_files`).

use serde_json::Value;

/// Parses fastjson output: standard JSON, or JSON with bare integer object keys.
///
/// # Errors
/// The parse error, as text for the caller's message.
pub fn parse_lenient(bytes: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    serde_json::from_str(&quote_numeric_keys(text)).map_err(|e| e.to_string())
}

/// Rewrites `{0:` and `,0:` outside strings as `{"0":` and `,"0":`.
#[must_use]
pub fn quote_numeric_keys(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_string = false;
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(escaped) = chars.get(index + 1) {
                    out.push(*escaped);
                    index += 1;
                }
            } else if c == '"' {
                in_string = false;
            }
            index += 1;
            continue;
        }
        out.push(c);
        index += 1;
        if c == '"' {
            in_string = true;
            continue;
        }
        if c != '{' && c != ',' {
            continue;
        }
        // Skip whitespace, then see whether an integer followed by ':' comes next.
        let mut look = index;
        while chars.get(look).is_some_and(|c| c.is_whitespace()) {
            look += 1;
        }
        let digits_start = look;
        if chars.get(look) == Some(&'-') {
            look += 1;
        }
        while chars.get(look).is_some_and(char::is_ascii_digit) {
            look += 1;
        }
        let is_key = look > digits_start && chars.get(look) == Some(&':');
        if is_key {
            out.extend(&chars[index..digits_start]);
            out.push('"');
            out.extend(&chars[digits_start..look]);
            out.push('"');
            index = look;
        }
    }
    out
}

/// The entries of a fastjson map whose keys are objects (`MessageQueue` in offset tables),
/// found under `field` of the body's top object (`{"offsetTable":{{"brokerName":..}:{..}}}`),
/// as (key, value) pairs. Standard JSON with string keys holding the queue JSON reads too.
///
/// # Errors
/// What is malformed, as text.
pub fn queue_keyed_map(body: &[u8], field: &str) -> Result<Vec<(Value, Value)>, String> {
    let needle = format!("\"{field}\"");
    let start = find(body, needle.as_bytes()).ok_or_else(|| format!("no {field} in body"))?;
    let mut at = skip_space(body, start + needle.len());
    at = expect(body, at, b':')?;
    at = expect(body, at, b'{')?;
    let mut entries = Vec::new();
    for _ in 0..body.len() {
        if body.get(at) == Some(&b'}') {
            return Ok(entries);
        }
        let (key, next) = next_value(body, at)?;
        let key = match key {
            Value::String(text) => serde_json::from_str(&text).map_err(|e| e.to_string())?,
            other => other,
        };
        at = expect(body, next, b':')?;
        let (value, next) = next_value(body, at)?;
        entries.push((key, value));
        at = skip_space(body, next);
        match body.get(at) {
            Some(b',') => at = skip_space(body, at + 1),
            Some(b'}') => {}
            _ => return Err(format!("expected , or }} at byte {at} of {field}")),
        }
    }
    Err(format!("{field} does not end"))
}

/// The text of the value under `field` of the body's top object, as it stands (an object
/// keyed by objects stays as fastjson wrote it), for passing it on unchanged; `None` when
/// the field is absent or its value does not end.
#[must_use]
pub fn raw_field<'a>(body: &'a str, field: &str) -> Option<&'a str> {
    let needle = format!("\"{field}\"");
    let bytes = body.as_bytes();
    let start = find(bytes, needle.as_bytes())?;
    let at = expect(bytes, start + needle.len(), b':').ok()?;
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &byte) in bytes.iter().enumerate().skip(at) {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth == 0 => return Some(body[at..i].trim_end()),
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&body[at..=i]);
                }
            }
            b',' if depth == 0 => return Some(body[at..i].trim_end()),
            _ => {}
        }
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn skip_space(body: &[u8], mut at: usize) -> usize {
    while body.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

fn expect(body: &[u8], at: usize, byte: u8) -> Result<usize, String> {
    let at = skip_space(body, at);
    if body.get(at) == Some(&byte) {
        Ok(skip_space(body, at + 1))
    } else {
        Err(format!("expected `{}` at byte {at}", char::from(byte)))
    }
}

/// One JSON value starting at `at`, and the position after it.
fn next_value(body: &[u8], at: usize) -> Result<(Value, usize), String> {
    let rest = body.get(at..).ok_or("body ends early")?;
    let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
    let value = stream
        .next()
        .ok_or("body ends early")?
        .map_err(|e| e.to_string())?;
    Ok((value, at + stream.byte_offset()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numeric_keys_parse_like_quoted_ones() {
        let bare = parse_lenient(b"{\"t@g\":{0:150,1:7\n},\"s\":\"{0:x\"}").unwrap();
        let quoted = parse_lenient(b"{\"t@g\":{\"0\":150,\"1\":7},\"s\":\"{0:x\"}").unwrap();
        assert_eq!(bare, quoted);
        assert_eq!(bare["s"], "{0:x", "strings are left alone");
        assert_eq!(
            parse_lenient(b"[1, 2]").unwrap(),
            serde_json::json!([1, 2]),
            "arrays untouched"
        );
    }

    #[test]
    fn raw_fields_come_back_as_written() {
        let body = r#"{"a":{{"q":"}"}:1,"b":[2]},"n":12 ,"s":"x,}"}"#;
        assert_eq!(raw_field(body, "a"), Some(r#"{{"q":"}"}:1,"b":[2]}"#));
        assert_eq!(raw_field(body, "n"), Some("12"));
        assert_eq!(raw_field(body, "s"), Some(r#""x,}""#));
        assert_eq!(raw_field(body, "z"), None);
        assert_eq!(raw_field(r#"{"a":{"#, "a"), None);
    }

    #[test]
    fn queue_keyed_maps_read_with_object_keys() {
        let body = concat!(
            r#"{"consumeTps":0.0,"offsetTable":{"#,
            r#"{"brokerName":"b","queueId":1,"topic":"T"}:{"maxOffset":3},"#,
            r#"{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":0}}}"#
        )
        .as_bytes();
        let entries = queue_keyed_map(body, "offsetTable").unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].0["queueId"], 1);
        assert_eq!(entries[0].1["maxOffset"], 3);
        let empty = queue_keyed_map(br#"{"offsetTable":{}}"#, "offsetTable").unwrap();
        assert!(empty.is_empty());
        assert!(queue_keyed_map(br#"{"offsetTable":{{"a":1}"#, "offsetTable").is_err());
    }
}
