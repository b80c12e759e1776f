//! Delivery accounting for the tests that drive a foreign client program (`tests/cpp/`,
//! `tests/go/`) against `ferromq standalone`. The program only reports, one JSON object per
//! line and event (`ev`: `sent`, `recv`, `consumer_done`, ...; `part`: which part of the run);
//! these helpers account for every message by its unique key: none lost, none unexpected,
//! none delivered twice, each with the tag, body and message id it was sent with, and each
//! order's steps in sequence on one queue. (`dead_code` is allowed for all of `common` in
//! `mod.rs`: not every test binary uses every helper.)

use serde_json::Value;
use std::collections::BTreeMap;
use std::process::ExitStatus;

/// The program's standard output, one JSON event per line.
///
/// # Panics
///
/// On a line that is not JSON: the program writes nothing else.
pub fn parse_events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

/// How the `program` ("Python", "Go") ended: successfully, after its closing `end` event,
/// with no `error`, `send_error` or `timeout` event.
pub fn check_ended(
    program: &str,
    exit: Option<ExitStatus>,
    all: &[Value],
    failures: &mut Vec<String>,
) {
    if !exit.is_some_and(|s| s.success()) {
        failures.push(format!("the {program} program ended with {exit:?}"));
    }
    if !all.iter().any(|e| e["ev"] == "end") {
        failures.push(format!("the {program} program printed no end event"));
    }
    for event in all {
        if ["error", "send_error", "timeout"].contains(&text(&event["ev"])) {
            failures.push(format!("{program} reported {event}"));
        }
    }
}

/// The `sent` events of `part` by key (oneway ones too: they carry no result).
pub fn sent_by_key<'a>(
    all: &'a [Value],
    part: &str,
    failures: &mut Vec<String>,
) -> BTreeMap<&'a str, &'a Value> {
    let mut by_key = BTreeMap::new();
    for event in events(all, "sent", Some(part)) {
        if by_key.insert(text(&event["key"]), event).is_some() {
            failures.push(format!("{part}: key sent twice: {event}"));
        }
    }
    by_key
}

/// The plain part's sends: `per_mode` each of sync, async and oneway reported, and every one
/// but the oneway ones SEND_OK with a message id.
pub fn check_plain_sends(
    sent: &BTreeMap<&str, &Value>,
    per_mode: usize,
    failures: &mut Vec<String>,
) {
    for mode in ["sync", "async", "oneway"] {
        let n = sent.values().filter(|e| e["mode"] == mode).count();
        if n != per_mode {
            failures.push(format!("plain: {n} {mode} sends reported, {per_mode} made"));
        }
    }
    for event in sent.values().filter(|e| e["mode"] != "oneway") {
        if event["status"] != 0 || text(&event["msg_id"]).is_empty() {
            failures.push(format!(
                "plain: a send not SEND_OK with a message id: {event}"
            ));
        }
    }
}

/// The sends of `sent` whose tag is not `TagAsync`: what a consumer of
/// `TagSync || TagOneway` expects.
pub fn without_async_tag<'a>(sent: &BTreeMap<&'a str, &'a Value>) -> BTreeMap<&'a str, &'a Value> {
    sent.iter()
        .filter(|(_, e)| e["tag"] != "TagAsync")
        .map(|(k, e)| (*k, *e))
        .collect()
}

/// Every expected key received, with its tag, body and (when the send reported one) message
/// id, and whatever `check(what, sent, got, failures)` adds; nothing unexpected; duplicates
/// counted. Returns "N/M keys, D duplicates".
pub fn account(
    what: &str,
    expected: &BTreeMap<&str, &Value>,
    got: &[&Value],
    failures: &mut Vec<String>,
    check: impl Fn(&str, &Value, &Value, &mut Vec<String>),
) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for event in got {
        let key = text(&event["key"]);
        *counts.entry(key).or_default() += 1;
        let Some(sent) = expected.get(key) else {
            failures.push(format!("{what}: unexpected message {event}"));
            continue;
        };
        for field in ["tag", "body"] {
            if event[field] != sent[field] {
                failures.push(format!("{what}: {field} differs, sent {sent}, got {event}"));
            }
        }
        if sent.get("msg_id").is_some() && event["msg_id"] != sent["msg_id"] {
            failures.push(format!(
                "{what}: message id differs, sent {sent}, got {event}"
            ));
        }
        check(what, sent, event, failures);
    }
    let lost: Vec<&str> = expected
        .keys()
        .filter(|k| !counts.contains_key(*k))
        .copied()
        .collect();
    if !lost.is_empty() {
        failures.push(format!("{what}: {} lost: {lost:?}", lost.len()));
    }
    let duplicated: BTreeMap<&str, usize> = counts
        .iter()
        .filter(|(k, n)| **n > 1 && expected.contains_key(*k))
        .map(|(k, n)| (*k, *n))
        .collect();
    let duplicates: usize = duplicated.values().map(|n| n - 1).sum();
    if duplicates > 0 {
        failures.push(format!(
            "{what}: {duplicates} duplicate deliveries (key: times) {duplicated:?}"
        ));
    }
    let received_keys = counts.keys().filter(|k| expected.contains_key(*k)).count();
    format!(
        "{received_keys}/{} keys, {duplicates} duplicates",
        expected.len()
    )
}

/// For [`account`]: nothing checked beyond tag, body and message id.
pub fn no_more_checks(_what: &str, _sent: &Value, _got: &Value, _failures: &mut Vec<String>) {}

/// The queue each order of the `sent` orders went to; an order sent to two queues is a
/// failure.
pub fn queue_of_order(
    sent: &BTreeMap<&str, &Value>,
    failures: &mut Vec<String>,
) -> BTreeMap<i64, i64> {
    let mut queue_of_order: BTreeMap<i64, i64> = BTreeMap::new();
    for event in sent.values() {
        let (order, queue) = (number(&event["order"]), number(&event["queue"]));
        if *queue_of_order.entry(order).or_insert(queue) != queue {
            failures.push(format!("order: order {order} sent to two queues: {event}"));
        }
    }
    queue_of_order
}

/// The orderly consumer's `got`, in the order consumed: each order from the queue it was sent
/// to (`queue_of_order`), its steps in sequence from 0, and queue offsets rising on every
/// queue.
pub fn check_order_sequence(
    got: &[&Value],
    queue_of_order: &BTreeMap<i64, i64>,
    failures: &mut Vec<String>,
) {
    let mut next_step: BTreeMap<i64, i64> = BTreeMap::new();
    let mut last_offset: BTreeMap<i64, i64> = BTreeMap::new();
    for event in got {
        let (order, step) = order_step(event);
        let (queue, offset) = (number(&event["queue"]), number(&event["offset"]));
        if queue_of_order.get(&order) != Some(&queue) {
            failures.push(format!(
                "order: consumed from another queue than sent: {event}"
            ));
        }
        let expected = next_step.entry(order).or_insert(0);
        if step != *expected {
            failures.push(format!(
                "order: order {order} step {step} after {}",
                *expected - 1
            ));
        }
        *expected = step + 1;
        let last = last_offset.entry(queue).or_insert(-1);
        if offset <= *last {
            failures.push(format!(
                "order: queue {queue} offset {offset} after {}",
                *last
            ));
        }
        *last = offset;
    }
}

/// A received order message's order and step, from its string properties (-1 where absent).
pub fn order_step(event: &Value) -> (i64, i64) {
    let order = text(&event["order"]).parse().unwrap_or(-1);
    let step = text(&event["step"]).parse().unwrap_or(-1);
    (order, step)
}

/// The `recv` events of `part` from `consumer`, in the order consumed.
pub fn received<'a>(all: &'a [Value], part: &str, consumer: &str) -> Vec<&'a Value> {
    events(all, "recv", Some(part))
        .into_iter()
        .filter(|e| e["consumer"] == consumer)
        .collect()
}

/// The events named `ev` (of `part`, if given), in the order printed.
pub fn events<'a>(all: &'a [Value], ev: &str, part: Option<&str>) -> Vec<&'a Value> {
    all.iter()
        .filter(|e| e["ev"] == ev && part.is_none_or(|p| e["part"] == p))
        .collect()
}

/// A string field, or "" when absent or not a string.
pub fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

/// An integer field, or -1 when absent or not an integer.
pub fn number(value: &Value) -> i64 {
    value.as_i64().unwrap_or(-1)
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
