//! The status page in a real browser: headless Chromium (Debian's `chromium`, which
//! `scripts/test` installs) driven over the DevTools protocol against `ferromq standalone`
//! with `metricsExporterType=PROM`. The page loads and shows the cluster and a topic just
//! produced to; the topic's rate rises while messages go and falls back when they stop,
//! without reloading the page; a lookup by key finds the message; creating a topic, resetting
//! a group's offset and resending a dead-lettered message take effect in the broker. With
//! `aclEnable` the page asks for credentials and refuses wrong ones.

mod common;
mod sched;

use common::java::{free_port, Standalone};
use common::{connect, TempDir};
use ferromq::admin::AdminClient;
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::{
    ConsumerSendMsgBackRequestHeader, QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader, SendMessageResponseHeader,
    UpdateConsumerOffsetRequestHeader,
};
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use ferromq::store::message::decode_offset_msg_id;
use headless_chrome::{Browser, LaunchOptions, Tab};
use sched::{props, pull_all, runtime};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const TOPIC: &str = "PageT";
const GROUP: &str = "PageG";
const DEADLINE: Duration = Duration::from_secs(60);

fn page_conf(port: u16, extra: &str) -> String {
    format!(
        "metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n\
         metricsPromExporterPort={port}\nstatusPageSampleIntervalMs=300\n{extra}"
    )
}

fn browser() -> Browser {
    // Debian's `chromium` is a wrapper script; the browser itself is beside it.
    let binary = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .expect("chromium is not installed (scripts/test installs it: apt-get install chromium)");
    let options = LaunchOptions::default_builder()
        .path(Some(binary))
        .headless(true)
        // Tests run as root, where Chromium's sandbox cannot start.
        .sandbox(false)
        .idle_browser_timeout(Duration::from_secs(120))
        .build()
        .expect("launch options");
    Browser::new(options).expect("start headless chromium")
}

/// The text of the first element `selector` matches, or `None`.
fn text_of(tab: &Tab, selector: &str) -> Option<String> {
    let script = format!(
        "(() => {{ const e = document.querySelector({selector:?}); \
         return e ? e.textContent : null; }})()"
    );
    tab.evaluate(&script, false)
        .ok()
        .and_then(|result| result.value)
        .and_then(|value| value.as_str().map(str::to_owned))
}

/// Waits until the element `selector` has a text `check` accepts; that text.
fn wait_text(tab: &Tab, selector: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(text) = text_of(tab, selector) {
            if check(&text) {
                return text;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {selector} shows {:?}",
            text_of(tab, selector)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Enters `value` into the form field `selector` as a user does: a click, then the text
/// (inserted at once, as a paste or an input method does; a key event per character takes
/// about half a second each over the DevTools protocol).
fn fill(tab: &Tab, selector: &str, value: &str) {
    let field = tab.wait_for_element(selector).expect(selector);
    field.click().expect("click the field");
    // Select what the field holds, so that typing replaces it.
    tab.evaluate(
        &format!("document.querySelector({selector:?}).select()"),
        false,
    )
    .expect("select the field");
    tab.send_character(value).expect("enter the text");
}

/// Submits the form `form` by clicking its button and waits for the result page.
fn submit(tab: &Tab, form: &str) -> String {
    tab.wait_for_element(&format!("{form} button"))
        .expect("the form's button")
        .click()
        .expect("click submit");
    tab.wait_until_navigated().expect("the result page");
    wait_text(tab, "#result", "the result", |_| true)
}

fn rate(tab: &Tab) -> f64 {
    let selector = format!("#topics tr[data-topic=\"{TOPIC}\"] .rate");
    text_of(tab, &selector)
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(-1.0)
}

/// A send of message `n` with `key` and its own UNIQ_KEY (which it answers).
fn send_request(topic: &str, key: &str, n: u64) -> (RemotingCommand, String) {
    let uniq = format!("7F000001000000000000PAGE{n:08}");
    let properties = props(&[("KEYS", key), ("UNIQ_KEY", &uniq), ("WAIT", "true")]);
    let body = format!("body-{n}");
    let request = sched::send_request(topic, 0, body.as_bytes(), &properties, None, None);
    (request, uniq)
}

/// Sends message `n` with `key`; answers its UNIQ_KEY and its CommitLog offset.
async fn send(client: &RemotingClient, topic: &str, key: &str, n: u64) -> (String, i64) {
    let (request, uniq) = send_request(topic, key, n);
    let response = client.request(request).await.unwrap();
    assert_eq!(response.code, 0, "send refused: {:?}", response.remark);
    let header: SendMessageResponseHeader = response.decode_header().unwrap();
    let (_, offset) = decode_offset_msg_id(&header.msg_id).unwrap();
    (uniq, offset)
}

async fn committed(client: &RemotingClient, group: &str, topic: &str) -> Option<i64> {
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: 0,
        set_zero_if_not_found: Some(false),
    };
    let request = RemotingCommand::request_with_header(RequestCode::QUERY_CONSUMER_OFFSET, &header);
    let response = client.request(request).await.unwrap();
    let header: QueryConsumerOffsetResponseHeader = response.decode_header().ok()?;
    header.offset
}

#[test]
fn the_status_page_shows_the_cluster_live_finds_messages_and_acts_in_chromium() {
    let port = free_port();
    let server = Standalone::start(&page_conf(port, ""));
    let url = format!("http://127.0.0.1:{port}/");
    let rt = runtime();
    let client = rt.block_on(connect(server.broker, SerializeType::Json));
    // A topic with messages by key, one of them dead-lettered for the group.
    let mut sent = Vec::new();
    for n in 0..5 {
        sent.push(rt.block_on(send(&client, TOPIC, &format!("key-{n}"), n)));
    }
    let (dead_id, dead_offset) = sent[3].clone();
    let back = ConsumerSendMsgBackRequestHeader {
        offset: dead_offset,
        group: GROUP.into(),
        // A negative level sends it straight to the dead-letter queue.
        delay_level: -1,
        origin_msg_id: Some(dead_id.clone()),
        origin_topic: Some(TOPIC.into()),
        unit_mode: Some(false),
        max_reconsume_times: Some(16),
    };
    let request = RemotingCommand::request_with_header(RequestCode::CONSUMER_SEND_MSG_BACK, &back);
    let response = rt.block_on(client.request(request)).unwrap();
    assert_eq!(response.code, 0, "send back: {:?}", response.remark);
    // The group committed 1 of the topic's queue 0.
    let commit = UpdateConsumerOffsetRequestHeader {
        consumer_group: GROUP.into(),
        topic: TOPIC.into(),
        queue_id: 0,
        commit_offset: 1,
    };
    let request =
        RemotingCommand::request_with_header(RequestCode::UPDATE_CONSUMER_OFFSET, &commit);
    assert_eq!(rt.block_on(client.request(request)).unwrap().code, 0);

    let browser = browser();
    let tab = browser.new_tab().expect("a tab");
    tab.set_default_timeout(DEADLINE);
    tab.navigate_to(&url)
        .unwrap()
        .wait_until_navigated()
        .unwrap();

    // The page loads and shows the cluster, its broker and the topic just produced to.
    wait_text(&tab, "#cluster", "the cluster's name", |t| {
        t == "DefaultCluster"
    });
    wait_text(
        &tab,
        "#brokers tr[data-broker] .role",
        "the broker's role",
        |t| t == "ASYNC_MASTER",
    );
    let messages = format!("#topics tr[data-topic=\"{TOPIC}\"] .messages");
    wait_text(&tab, &messages, "the topic's messages", |t| t == "5");
    let lag = format!("#groups tr[data-group=\"{GROUP}\"][data-topic=\"{TOPIC}\"] .lag");
    wait_text(&tab, &lag, "the group's lag", |t| t == "4");
    assert_eq!(rate(&tab), 0.0, "no traffic yet");

    // Its rate moves while messages go, and falls back after, with no reload.
    let producer =
        common::PacedSends::start(server.broker, |n| send_request(TOPIC, "flow", 1_000 + n).0);
    let deadline = Instant::now() + DEADLINE;
    while rate(&tab) <= 0.0 {
        assert!(Instant::now() < deadline, "the rate never rose");
        std::thread::sleep(Duration::from_millis(100));
    }
    let flowing = producer.stop();
    assert!(flowing > 0);
    let deadline = Instant::now() + DEADLINE;
    while rate(&tab) != 0.0 {
        assert!(Instant::now() < deadline, "the rate never fell back");
        std::thread::sleep(Duration::from_millis(100));
    }
    let points = text_of(&tab, "#chart-topics polyline");
    assert!(points.is_some(), "the topic chart draws the topic");

    // A lookup by key finds the message.
    fill(&tab, "#lookup input[name=topic]", TOPIC);
    fill(&tab, "#lookup input[name=key]", "key-2");
    assert_eq!(submit(&tab, "#lookup"), "done");
    wait_text(&tab, "#found td.msg-id", "the found message", |t| {
        t == sent[2].0
    });
    assert_eq!(text_of(&tab, "#found td.body").as_deref(), Some("body-2"));

    // Creating a topic takes effect: the name server routes it.
    tab.navigate_to(&url)
        .unwrap()
        .wait_until_navigated()
        .unwrap();
    fill(&tab, "#create-topic input[name=topic]", "PageCreated");
    fill(&tab, "#create-topic input[name=write]", "3");
    assert_eq!(submit(&tab, "#create-topic"), "done");
    let namesrv = server.namesrv.to_string();
    let mut admin = AdminClient::new(Some(&namesrv), Duration::from_secs(5)).unwrap();
    let deadline = Instant::now() + DEADLINE;
    let route = loop {
        if let Ok(route) = admin.topic_route("PageCreated") {
            break route;
        }
        assert!(Instant::now() < deadline, "the created topic has no route");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(route.queue_datas[0].write_queue_nums, 3);

    // Resetting the group's offset to now moves its committed offset to the queue's end.
    tab.navigate_to(&url)
        .unwrap()
        .wait_until_navigated()
        .unwrap();
    fill(&tab, "#reset-offset input[name=group]", GROUP);
    fill(&tab, "#reset-offset input[name=topic]", TOPIC);
    assert_eq!(submit(&tab, "#reset-offset"), "done");
    let end = 5 + flowing as i64;
    assert_eq!(rt.block_on(committed(&client, GROUP, TOPIC)), Some(end));

    // Resending the dead-lettered message puts it in the group's retry topic, same id.
    tab.navigate_to(&url)
        .unwrap()
        .wait_until_navigated()
        .unwrap();
    fill(&tab, "#resend input[name=group]", GROUP);
    fill(&tab, "#resend input[name=id]", &dead_id);
    assert_eq!(submit(&tab, "#resend"), "done");
    let retry = format!("%RETRY%{GROUP}");
    let resent = rt.block_on(pull_all(&client, GROUP, &retry, 0));
    assert_eq!(resent.len(), 1, "{resent:?}");
    assert_eq!(resent[0].prop("UNIQ_KEY"), Some(dead_id.as_str()));
    assert_eq!(resent[0].body, b"body-3");

    // A refused action says why: a message the dead-letter queue does not have.
    tab.navigate_to(&url)
        .unwrap()
        .wait_until_navigated()
        .unwrap();
    fill(&tab, "#resend input[name=group]", GROUP);
    fill(
        &tab,
        "#resend input[name=id]",
        "7F0000010000000000000000NOTTHERE",
    );
    let refused = submit(&tab, "#resend");
    assert!(refused.starts_with("refused:"), "{refused}");
}

/// One HTTP/1.1 GET with an optional `Authorization` header; the status code.
fn get_status(addr: SocketAddr, path: &str, authorization: Option<&str>) -> u16 {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let auth = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: page\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
}

#[test]
fn with_acl_the_page_asks_for_keys_the_broker_accepts() {
    // The broker reads `<rocketmqHome>/conf/plain_acl.yml`, as Java's.
    let home = TempDir::on_disk("status-acl");
    std::fs::create_dir_all(home.path().join("conf")).unwrap();
    std::fs::write(
        home.path().join("conf/plain_acl.yml"),
        "globalWhiteRemoteAddresses: []\naccounts:\n  - accessKey: pageAdmin\n    \
         secretKey: pageSecret1\n    admin: true\n",
    )
    .unwrap();
    let port = free_port();
    let acl = format!("aclEnable=true\nrocketmqHome={}", home.path().display());
    let conf = page_conf(port, &acl);
    let _server = Standalone::start(&conf);
    let page = SocketAddr::from(([127, 0, 0, 1], port));
    use base64::Engine;
    let basic = |keys: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(keys)
        )
    };
    assert_eq!(get_status(page, "/", None), 401);
    assert_eq!(get_status(page, "/", Some(&basic("pageAdmin:wrong"))), 401);
    assert_eq!(
        get_status(page, "/", Some(&basic("nobody:pageSecret1"))),
        401
    );
    assert_eq!(
        get_status(page, "/", Some(&basic("pageAdmin:pageSecret1"))),
        200
    );
    // Metrics stay open to scrapes, as Java's exporter is.
    assert_eq!(get_status(page, "/metrics", None), 200);
}
