//! What the admin commands print: left-aligned tables with mqadmin's `#Column` headers,
//! times as `yyyy-MM-dd HH:mm:ss,SSS` (UTC), and the readers of the broker bodies that are
//! not plain JSON (fastjson maps keyed by `MessageQueue` objects).

use crate::calendar::{civil_from_days, days_from_civil};
use serde_json::Value;

/// A command's result: the JSON for `--json` and the text for people.
#[derive(Debug)]
pub struct Report {
    /// Stable JSON object or array.
    pub json: Value,
    /// The human form, ending with a newline.
    pub text: String,
}

/// A table printed with every column padded to its widest cell, two spaces apart.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headers (mqadmin's `#Name` form).
    #[must_use]
    pub fn new(headers: &[&str]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The aligned text, one line per row.
    #[must_use]
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|row| row.get(c))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let pad = widths[c].saturating_sub(cell.chars().count());
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `yyyy-MM-dd HH:mm:ss,SSS` in UTC (mqadmin's `timeMillisToHumanString2`, which uses the
/// local zone); `N/A` for 0 or less.
#[must_use]
pub fn human_time(millis: i64) -> String {
    if millis <= 0 {
        return "N/A".to_owned();
    }
    let days = millis.div_euclid(86_400_000);
    let in_day = millis.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02},{:03}",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// Parses mqadmin's timestamp forms: `now` (`now_ms`), epoch milliseconds, or
/// `yyyy-MM-dd#HH:mm:ss:SSS` (read as UTC).
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_timestamp(text: &str, now_ms: i64) -> Result<i64, String> {
    let text = text.trim();
    if text == "now" {
        return Ok(now_ms);
    }
    if let Ok(millis) = text.parse::<i64>() {
        return Ok(millis);
    }
    let bad = || format!("bad timestamp `{text}`: use now, epoch ms or yyyy-MM-dd#HH:mm:ss:SSS");
    let (date, time) = text.split_once('#').ok_or_else(bad)?;
    let numbers = |part: &str, sep: char| -> Result<Vec<i64>, String> {
        part.split(sep)
            .map(|n| n.parse::<i64>().map_err(|_| bad()))
            .collect()
    };
    let date = numbers(date, '-')?;
    let time = numbers(time, ':')?;
    let [year, month, day] = date[..] else {
        return Err(bad());
    };
    let [hour, minute, second, millis] = time[..] else {
        return Err(bad());
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return Err(bad());
    }
    let days = days_from_civil(year, month, day);
    Ok(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis)
}

/// An `i64` field of a JSON object, 0 when absent.
#[must_use]
pub fn int(value: &Value, field: &str) -> i64 {
    value[field].as_i64().unwrap_or(0)
}

/// A string field of a JSON object, empty when absent.
#[must_use]
pub fn text(value: &Value, field: &str) -> String {
    value[field].as_str().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_through_the_civil_calendar() {
        assert_eq!(human_time(0), "N/A");
        assert_eq!(human_time(1_700_000_000_123), "2023-11-14 22:13:20,123");
        assert_eq!(
            parse_timestamp("2023-11-14#22:13:20:123", 0),
            Ok(1_700_000_000_123)
        );
        assert_eq!(
            parse_timestamp("2000-02-29#00:00:00:000", 0),
            Ok(951_782_400_000)
        );
        assert_eq!(parse_timestamp("now", 42), Ok(42));
        assert_eq!(parse_timestamp("1234", 42), Ok(1234));
        assert!(parse_timestamp("yesterday", 0).is_err());
    }

    #[test]
    fn tables_pad_every_column_but_the_last() {
        let mut table = Table::new(&["#A", "#Bee"]);
        table.row(vec!["long cell".into(), "x".into()]);
        assert_eq!(table.render(), "#A         #Bee\nlong cell  x\n");
    }
}
