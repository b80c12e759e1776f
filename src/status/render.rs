//! The page's HTML, rendered on the server from the kept snapshots: tables, and charts as
//! inline SVG polylines. Every text that comes from the cluster (names, remarks, message
//! bodies) is escaped. Element ids and `data-` attributes name what the browser test reads.

use super::{lock, Snapshot, StatusPage};
use crate::admin::output::Report;
use crate::admin::snapshot::rate;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;

/// How often the page reloads its live part, at most.
const RELOAD_MS_MAX: u128 = 2_000;
/// Topics drawn in the topic chart.
const CHART_TOPICS: usize = 5;
const CHART_WIDTH: f64 = 560.0;
const CHART_HEIGHT: f64 = 120.0;
const COLOURS: [&str; 5] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"];

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em;margin:0 0 .5em}h2{font-size:1.1em;margin:1.2em 0 .4em}\
table{border-collapse:collapse;margin-bottom:.5em}\
td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}\
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.charts{display:flex;flex-wrap:wrap;gap:1em}.chart{border:1px solid #ddd;padding:4px}\
form{display:inline-block;vertical-align:top;border:1px solid #ddd;padding:8px;margin:4px}\
label{display:block;margin:2px 0}.problem{color:#b00}.ok{color:#060}pre{white-space:pre-wrap}";

/// What an admin request through the page came to.
#[derive(Debug)]
pub enum Outcome {
    /// It was done; its report.
    Done(Report),
    /// It was refused or failed; why.
    Refused(String),
}

/// The whole page.
pub fn page(page: &StatusPage) -> String {
    let reload = page.interval.as_millis().min(RELOAD_MS_MAX);
    let mut out = head("status");
    let _ = write!(
        out,
        "<div id=\"live\">{}</div>{}<script>\
         setInterval(async()=>{{try{{const r=await fetch('/live');\
         if(r.ok){{document.getElementById('live').innerHTML=await r.text();}}}}\
         catch(e){{}}}},{reload});</script></body></html>",
        live(page),
        tools()
    );
    out
}

/// The result page of a lookup or an action.
pub fn outcome(_page: &StatusPage, title: &str, outcome: &Outcome) -> String {
    let mut out = head(title);
    let _ = write!(out, "<h2>{}</h2>", escape(title));
    match outcome {
        Outcome::Done(report) => {
            let _ = write!(out, "<p id=\"result\" class=\"ok\">done</p>");
            let messages = report.json["messages"].as_array();
            if let Some(messages) = messages {
                out.push_str(&found_table(messages));
            }
            let _ = write!(out, "<pre id=\"report\">{}</pre>", escape(&report.text));
        }
        Outcome::Refused(reason) => {
            let _ = write!(
                out,
                "<p id=\"result\" class=\"problem\">refused: {}</p>",
                escape(reason)
            );
        }
    }
    out.push_str("<p><a href=\"/\">back to the status page</a></p></body></html>");
    out
}

/// The part the page reloads: problems, tables and charts.
pub fn live(page: &StatusPage) -> String {
    let history = lock(&page.history);
    let mut out = String::new();
    if let Some(problem) = lock(&page.problem).as_ref() {
        let _ = write!(
            out,
            "<p class=\"problem\" id=\"problem\">{}</p>",
            escape(problem)
        );
    }
    let Some(last) = history.back() else {
        out.push_str("<p id=\"waiting\">reading the cluster…</p>");
        return out;
    };
    let previous = history.len().checked_sub(2).and_then(|i| history.get(i));
    let seconds = previous.map_or(0.0, |p| {
        last.sample.at.duration_since(p.sample.at).as_secs_f64()
    });
    let clusters: Vec<&str> = {
        let mut names: Vec<&str> = last
            .sample
            .brokers
            .iter()
            .map(|b| b.cluster.as_str())
            .collect();
        names.dedup();
        names
    };
    let _ = write!(
        out,
        "<p>cluster <b id=\"cluster\">{}</b> · {} brokers · {} topics · {} groups · \
         snapshot every {} ms</p>",
        escape(&clusters.join(", ")),
        last.sample.brokers.len(),
        last.sample.topics.len(),
        last.sample.groups.len(),
        page.interval.as_millis()
    );
    out.push_str(&charts(&history));
    out.push_str(&brokers(last));
    out.push_str(&topics(last, previous, seconds));
    out.push_str(&groups(last, previous, seconds));
    if !last.sample.problems.is_empty() {
        out.push_str("<h2>Not answering</h2><ul class=\"problem\">");
        for problem in &last.sample.problems {
            let _ = write!(out, "<li>{}</li>", escape(problem));
        }
        out.push_str("</ul>");
    }
    out
}

fn head(title: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head><body><h1>ferromq · {}</h1>",
        escape(title),
        escape(title)
    )
}

fn brokers(last: &Snapshot) -> String {
    let mut out = String::from(
        "<h2>Brokers</h2><table id=\"brokers\"><tr><th>Broker</th><th>Id</th><th>Address</th>\
         <th>Role</th><th>In/s</th><th>Out/s</th><th>Put p99 ms</th><th>Disk</th>\
         <th>Max offset</th><th>HA lag bytes</th></tr>",
    );
    // The cells' classes: numbers right-aligned, the role named for the test.
    const CLASSES: [&str; 10] = ["", "n", "", "role", "n", "n", "n", "n", "n", "n"];
    for b in &last.sample.brokers {
        let _ = write!(out, "<tr data-broker=\"{}\">", escape(&b.name));
        for (cell, class) in b.cells().iter().zip(CLASSES) {
            let _ = write!(out, "<td class=\"{class}\">{}</td>", escape(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

fn topics(last: &Snapshot, previous: Option<&Snapshot>, seconds: f64) -> String {
    let mut out = String::from(
        "<h2>Topics</h2><table id=\"topics\"><tr><th>Topic</th><th>In/s</th>\
         <th>Messages</th></tr>",
    );
    for (topic, end) in &last.sample.topics {
        let before = previous.and_then(|p| p.sample.topics.get(topic).copied());
        let _ = write!(
            out,
            "<tr data-topic=\"{}\"><td>{}</td><td class=\"n rate\">{}</td>\
             <td class=\"n messages\">{end}</td></tr>",
            escape(topic),
            escape(topic),
            rate(*end, before, seconds)
        );
    }
    out.push_str("</table>");
    out
}

fn groups(last: &Snapshot, previous: Option<&Snapshot>, seconds: f64) -> String {
    let mut out = String::from(
        "<h2>Consumer groups</h2><table id=\"groups\"><tr><th>Group</th><th>Topic</th>\
         <th>Out/s</th><th>Lag</th></tr>",
    );
    for ((group, topic), figures) in &last.sample.groups {
        let before = previous
            .and_then(|p| p.sample.groups.get(&(group.clone(), topic.clone())))
            .map(|f| f.committed);
        let _ = write!(
            out,
            "<tr data-group=\"{}\" data-topic=\"{}\"><td>{}</td><td>{}</td>\
             <td class=\"n rate\">{}</td><td class=\"n lag\">{}</td></tr>",
            escape(group),
            escape(topic),
            escape(group),
            escape(topic),
            rate(figures.committed, before, seconds),
            figures.lag
        );
    }
    out.push_str(
        "</table><h2>Lag per queue</h2><table id=\"queues\"><tr><th>Group</th><th>Topic</th>\
         <th>Broker</th><th>Queue</th><th>End</th><th>Committed</th><th>Lag</th></tr>",
    );
    for ((group, topic, broker, queue), figures) in &last.sample.queues {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{queue}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(group),
            escape(topic),
            escape(broker),
            figures.end,
            figures.committed,
            (figures.end - figures.committed).max(0)
        );
    }
    out.push_str("</table>");
    out
}

/// The charts of the kept snapshots: the cluster's rates, the put latency, and the
/// busiest topics' rates.
fn charts(history: &VecDeque<Snapshot>) -> String {
    let points = |value: &dyn Fn(&Snapshot) -> f64| -> Vec<(i64, f64)> {
        history.iter().map(|s| (s.wall_ms, value(s))).collect()
    };
    let masters_in = points(&|s| s.sample.brokers.iter().map(|b| b.in_tps).sum());
    let masters_out = points(&|s| s.sample.brokers.iter().map(|b| b.out_tps).sum());
    let put_p99 = points(&|s| {
        s.sample
            .brokers
            .iter()
            .filter_map(|b| b.put_p99_ms)
            .fold(0.0, f64::max)
    });
    // Per topic, its rate between consecutive snapshots.
    let mut per_topic: BTreeMap<&str, Vec<(i64, f64)>> = BTreeMap::new();
    for pair in history.iter().collect::<Vec<_>>().windows(2) {
        let (before, after) = (pair[0], pair[1]);
        let seconds = after
            .sample
            .at
            .duration_since(before.sample.at)
            .as_secs_f64();
        if seconds <= 0.0 {
            continue;
        }
        for (topic, end) in &after.sample.topics {
            let start = before.sample.topics.get(topic).copied().unwrap_or(*end);
            #[allow(clippy::cast_precision_loss)] // offsets far below 2^52
            let per_second = (end - start).max(0) as f64 / seconds;
            per_topic
                .entry(topic.as_str())
                .or_default()
                .push((after.wall_ms, per_second));
        }
    }
    let mut busiest: Vec<(&str, Vec<(i64, f64)>)> = per_topic.into_iter().collect();
    busiest.sort_by(|a, b| {
        let total = |s: &[(i64, f64)]| s.iter().map(|p| p.1).sum::<f64>();
        total(&b.1).total_cmp(&total(&a.1))
    });
    busiest.truncate(CHART_TOPICS);
    let topic_series: Vec<(String, Vec<(i64, f64)>)> = busiest
        .into_iter()
        .map(|(topic, series)| (topic.to_owned(), series))
        .collect();
    let mut out = String::from("<h2>Last 15 minutes</h2><div class=\"charts\">");
    out.push_str(&chart(
        "chart-in",
        "Messages in per second (brokers' putTps)",
        &[("in/s".to_owned(), masters_in)],
    ));
    out.push_str(&chart(
        "chart-out",
        "Messages out per second (getTransferedTps)",
        &[("out/s".to_owned(), masters_out)],
    ));
    out.push_str(&chart(
        "chart-latency",
        "Put latency p99, ms (highest broker)",
        &[("p99".to_owned(), put_p99)],
    ));
    out.push_str(&chart(
        "chart-topics",
        "Busiest topics, messages in per second",
        &topic_series,
    ));
    out.push_str("</div>");
    out
}

/// One chart: a polyline per series over the time the series span, the highest value
/// labelled.
fn chart(id: &str, title: &str, series: &[(String, Vec<(i64, f64)>)]) -> String {
    let all = series.iter().flat_map(|(_, points)| points.iter());
    let (mut t_min, mut t_max, mut v_max) = (i64::MAX, i64::MIN, 0.0f64);
    for (t, v) in all {
        t_min = t_min.min(*t);
        t_max = t_max.max(*t);
        v_max = v_max.max(*v);
    }
    let mut out = format!(
        "<div class=\"chart\" id=\"{id}\"><div>{}</div><svg width=\"{CHART_WIDTH}\" \
         height=\"{}\" viewBox=\"0 0 {CHART_WIDTH} {}\" role=\"img\">",
        escape(title),
        CHART_HEIGHT + 16.0,
        CHART_HEIGHT + 16.0
    );
    let _ = write!(
        out,
        "<text x=\"2\" y=\"10\" font-size=\"10\">max {}</text>",
        format_value(v_max)
    );
    #[allow(clippy::cast_precision_loss)] // milliseconds over minutes
    let span = t_max.saturating_sub(t_min).max(1) as f64;
    let scale = if v_max > 0.0 { v_max } else { 1.0 };
    for (index, (name, points)) in series.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        let coordinates: Vec<String> = points
            .iter()
            .map(|(t, v)| {
                #[allow(clippy::cast_precision_loss)]
                let x = t.saturating_sub(t_min) as f64 / span * CHART_WIDTH;
                let y = 14.0 + CHART_HEIGHT - v / scale * CHART_HEIGHT;
                format!("{x:.1},{y:.1}")
            })
            .collect();
        let _ = write!(
            out,
            "<polyline data-series=\"{}\" fill=\"none\" stroke=\"{colour}\" \
             stroke-width=\"1.5\" points=\"{}\"><title>{}</title></polyline>",
            escape(name),
            coordinates.join(" "),
            escape(name)
        );
    }
    out.push_str("</svg>");
    if series.len() > 1 {
        out.push_str("<div>");
        for (index, (name, _)) in series.iter().enumerate() {
            let colour = COLOURS[index % COLOURS.len()];
            let _ = write!(
                out,
                "<span style=\"color:{colour}\">■ {}</span> ",
                escape(name)
            );
        }
        out.push_str("</div>");
    }
    out.push_str("</div>");
    out
}

fn tools() -> String {
    "<h2>Find a message</h2>\
     <form id=\"lookup\" method=\"get\" action=\"/message\">\
     <label>Topic <input name=\"topic\"></label>\
     <label>Key <input name=\"key\"></label>\
     <label>or message id <input name=\"id\" size=\"34\"></label>\
     <button type=\"submit\">Find</button></form>\
     <h2>Actions</h2>\
     <form id=\"create-topic\" method=\"post\" action=\"/topic\"><b>Create or update a topic</b>\
     <label>Topic <input name=\"topic\" required></label>\
     <label>Read queues <input name=\"read\" value=\"8\" size=\"4\"></label>\
     <label>Write queues <input name=\"write\" value=\"8\" size=\"4\"></label>\
     <label>Perm <input name=\"perm\" value=\"6\" size=\"4\"></label>\
     <label>Cluster <input name=\"cluster\" placeholder=\"this cluster\"></label>\
     <button type=\"submit\">Save</button></form>\
     <form id=\"reset-offset\" method=\"post\" action=\"/offset\"><b>Reset a group's offset</b>\
     <label>Group <input name=\"group\" required></label>\
     <label>Topic <input name=\"topic\" required></label>\
     <label>To <input name=\"timestamp\" value=\"now\" title=\"now, epoch ms or \
     yyyy-MM-dd#HH:mm:ss:SSS\"></label>\
     <button type=\"submit\">Reset</button></form>\
     <form id=\"resend\" method=\"post\" action=\"/resend\"><b>Resend a dead-lettered message</b>\
     <label>Group <input name=\"group\" required></label>\
     <label>Message id <input name=\"id\" required size=\"34\"></label>\
     <button type=\"submit\">Resend</button></form>"
        .to_owned()
}

fn found_table(messages: &[serde_json::Value]) -> String {
    let mut out = String::from(
        "<table id=\"found\"><tr><th>Message id</th><th>Topic</th><th>Queue</th><th>Offset</th>\
         <th>Keys</th><th>Tags</th><th>Body</th></tr>",
    );
    for message in messages {
        let text = |key: &str| message[key].as_str().unwrap_or_default().to_owned();
        let property = |key: &str| {
            message["properties"][key]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        let _ = write!(
            out,
            "<tr><td class=\"msg-id\">{}</td><td>{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"body\">{}</td></tr>",
            escape(&text("msgId")),
            escape(&text("topic")),
            message["queueId"],
            message["queueOffset"],
            escape(&property("KEYS")),
            escape(&property("TAGS")),
            escape(&text("body"))
        );
    }
    out.push_str("</table>");
    out
}

fn format_value(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

/// Text made safe inside HTML elements and quoted attributes.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_the_cluster_cannot_make_markup() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn a_chart_without_points_is_an_empty_box() {
        let svg = chart("c", "t", &[("a".to_owned(), Vec::new())]);
        assert!(svg.contains("points=\"\""), "{svg}");
    }

    #[test]
    fn a_chart_scales_its_series_into_the_box() {
        let svg = chart(
            "c",
            "t",
            &[(
                "a".to_owned(),
                vec![(0, 0.0), (1_000, 50.0), (2_000, 100.0)],
            )],
        );
        assert!(
            svg.contains("points=\"0.0,134.0 280.0,74.0 560.0,14.0\""),
            "{svg}"
        );
        assert!(svg.contains("max 100"), "{svg}");
    }
}
