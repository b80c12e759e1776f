//! Java `.properties` text, the format of `namesrv.conf` and `broker.conf`.
//!
//! Follows `java.util.Properties.load` for what config files use: `key=value`, `key: value` or
//! `key value`; `#` and `!` comment lines; blank lines; a trailing backslash continues a line;
//! the escapes `\t`, `\n`, `\r`, `\\`, `\uXXXX`. Keys keep their file order so that errors and
//! warnings are reported in the order a person reads them.

/// One `key=value` pair with its line number (1-based) for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Property {
    /// The key.
    pub key: String,
    /// The value, unescaped, leading whitespace removed.
    pub value: String,
    /// Line where the entry starts.
    pub line: usize,
}

/// Parses properties text. Never fails: like Java, malformed escapes are taken literally.
#[must_use]
pub fn parse(text: &str) -> Vec<Property> {
    let mut properties = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let start_line = index + 1;
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        let mut logical = String::from(trimmed);
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        properties.push(Property {
            key: unescape(key),
            value: unescape(value),
            line: start_line,
        });
    }
    properties
}

fn ends_with_odd_backslashes(line: &str) -> bool {
    line.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 1
}

fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => break,
            _ => index += 1,
        }
    }
    let key_end = index.min(bytes.len());
    let mut rest = &line[key_end..];
    rest = rest.trim_start_matches([' ', '\t', '\x0c']);
    if let Some(stripped) = rest.strip_prefix(['=', ':']) {
        rest = stripped.trim_start_matches([' ', '\t', '\x0c']);
    }
    (&line[..key_end], rest)
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.clone().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(decoded) if hex.len() == 4 => {
                        out.push(decoded);
                        chars.nth(3);
                    }
                    _ => out.push('u'),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// `text` with each `(key, value)` of `updates` set: the last entry of that key has its
/// lines replaced by `key=value`, a key with no entry is appended. Comments, blank lines and
/// the other entries stay as they are (UPDATE_BROKER_CONFIG persisting what it changed).
#[must_use]
pub fn set_keys(text: &str, updates: &[(String, String)]) -> String {
    let lines: Vec<&str> = text.lines().collect();
    // (key, first line index, one past its last line) of every entry, in order.
    let mut spans = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let trimmed = lines[index].trim_start();
        let start = index;
        index += 1;
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        let mut logical = String::from(trimmed);
        while ends_with_odd_backslashes(&logical) && index < lines.len() {
            logical.pop();
            logical.push_str(lines[index].trim_start());
            index += 1;
        }
        spans.push((unescape(split_key_value(&logical).0), start, index));
    }
    let mut replaced: Vec<Option<String>> = vec![None; lines.len()];
    let mut dropped = vec![false; lines.len()];
    let mut appended = Vec::new();
    for (key, value) in updates {
        let entry = format!("{}={}", escape(key, true), escape(value, false));
        match spans.iter().rev().find(|(k, _, _)| k == key) {
            Some(&(_, start, end)) => {
                replaced[start] = Some(entry);
                for flag in &mut dropped[start + 1..end] {
                    *flag = true;
                }
            }
            None => appended.push(entry),
        }
    }
    let mut out = String::with_capacity(text.len() + 64);
    for (i, line) in lines.iter().enumerate() {
        if dropped[i] {
            continue;
        }
        out.push_str(replaced[i].as_deref().unwrap_or(line));
        out.push('\n');
    }
    for entry in appended {
        out.push_str(&entry);
        out.push('\n');
    }
    out
}

/// What `Properties.load` reads back as `text`: backslashes and line breaks escaped, and in
/// a key the separators too.
fn escape(text: &str, key: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '=' | ':' | ' ' if key => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_keys_replaces_the_last_entry_and_appends_new_keys() {
        let text = "# broker\nbrokerPermission=6\nlistenPort = 1\nbrokerPermission = 2\n\
                    long=a\\\n  b\nother=x\n";
        let updates = [
            ("brokerPermission".to_owned(), "4".to_owned()),
            ("long".to_owned(), "C:\\dir".to_owned()),
            ("fresh".to_owned(), "yes".to_owned()),
        ];
        let updated = set_keys(text, &updates);
        assert_eq!(
            updated,
            "# broker\nbrokerPermission=6\nlistenPort = 1\nbrokerPermission=4\n\
             long=C:\\\\dir\nother=x\nfresh=yes\n"
        );
        let parsed: Vec<(String, String)> = parse(&updated)
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect();
        assert!(parsed.contains(&("long".to_owned(), "C:\\dir".to_owned())));
        assert_eq!(parsed.last(), Some(&("fresh".to_owned(), "yes".to_owned())));
        assert_eq!(set_keys("", &updates[2..]), "fresh=yes\n");
    }

    #[test]
    fn parse_java_forms() {
        let text = "# comment\n! also\n\nlistenPort=9876\nname : value x\nspaced  v\n\
                    long = a\\\n   b\npath=C\\:\\\\dir\nuni=\\u00e9\n";
        let parsed: Vec<(String, String)> =
            parse(text).into_iter().map(|p| (p.key, p.value)).collect();
        let expected = [
            ("listenPort", "9876"),
            ("name", "value x"),
            ("spaced", "v"),
            ("long", "ab"),
            ("path", "C:\\dir"),
            ("uni", "é"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(parsed, expected);
    }

    #[test]
    fn parse_records_line_numbers() {
        let parsed = parse("a=1\n\n# x\nb=2\n");
        assert_eq!(parsed[1].line, 4);
    }
}
