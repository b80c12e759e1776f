//! Reading and writing the JSON that Java's fastjson 1.x produces (`reference/remoting.md`
//! §10): maps with integer keys are written with bare keys (`{0:150}`), which is not JSON.
//!
//! [`parse_lenient`] quotes bare numeric keys and parses the result, so both forms read the
//! same; object key order is kept. Writers for the files whose integer-keyed maps must stay
//! bare live with their types (`store::config_files`).

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
}
