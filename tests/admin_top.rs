//! `ferromq admin top` through a pseudo-terminal (issue 41 part 3): the live view of a
//! running name server and broker shows the broker, a topic being produced to with a rate
//! above zero, and a consumer group's lag; `q` quits and gives the terminal back.
//!
//! Method: real name server and broker processes; a thread sends messages over a raw
//! remoting connection for as long as the test runs (bounded); `top` runs in a pty (the
//! `portable-pty` crate) and a terminal emulator (`vt100`) reads what it draws. Every wait
//! is a bounded poll of the emulated screen.

mod common;

use common::{connect, BrokerProcess, NamesrvProcess, TempDir};
use ferromq::remoting::headers::UpdateConsumerOffsetRequestHeader;
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use portable_pty::{CommandBuilder, PtySize};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::num::NonZeroU16;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOPIC: &str = "TopViewT";
const GROUP: &str = "TopViewG";
const BROKER_NAME: &str = "top-broker";

fn send_request(queue_id: i32) -> RemotingCommand {
    let mut header = common::send_header(TOPIC, queue_id, "WAIT\u{1}true\u{2}");
    header.d = 4;
    common::send_command(&header, b"top")
}

fn commit(broker: SocketAddr, offset: i64) {
    let rt = common::runtime();
    rt.block_on(async {
        let client = connect(broker, SerializeType::Json).await;
        let request = RemotingCommand::request_with_header(
            RequestCode::UPDATE_CONSUMER_OFFSET,
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: GROUP.into(),
                topic: TOPIC.into(),
                queue_id: 0,
                commit_offset: offset,
            },
        );
        assert_eq!(client.request(request).await.unwrap().code, 0);
    });
}

/// The cells of the first screen line whose cells start with `first` (box-drawing borders
/// dropped).
fn row(screen: &str, first: &str) -> Option<Vec<String>> {
    screen.lines().find_map(|line| {
        let cells: Vec<String> = line
            .split(|c: char| c.is_whitespace() || c == '│')
            .filter(|cell| !cell.is_empty())
            .map(str::to_owned)
            .collect();
        (cells.first().map(String::as_str) == Some(first)).then_some(cells)
    })
}

#[test]
fn top_shows_the_cluster_live_in_a_terminal_and_quits_on_q() {
    let namesrv = NamesrvProcess::start("");
    let dir = TempDir::on_disk("admin-top");
    let config = format!(
        "namesrvAddr=127.0.0.1:{}\nbrokerName={BROKER_NAME}\nbrokerClusterName=TopCluster\n\
         registerNameServerPeriod=200",
        namesrv.addr.port()
    );
    let broker = BrokerProcess::start(&dir.path().join("store"), &config);
    let producer = common::PacedSends::start(broker.addr, |_| send_request(0));
    // The topic exists once a send is answered; then the group commits its first message.
    let deadline = Instant::now() + Duration::from_secs(30);
    while producer.sent() == 0 {
        assert!(Instant::now() < deadline, "no send answered");
        std::thread::sleep(Duration::from_millis(20));
    }
    commit(broker.addr, 1);

    let pty = portable_pty::native_pty_system()
        .openpty(PtySize {
            rows: 40,
            cols: 140,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("open a pty");
    let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_ferromq"));
    command.args([
        "admin",
        "-n",
        &namesrv.addr.to_string(),
        "top",
        "--interval",
        "300",
    ]);
    command.env("TERM", "xterm-256color");
    let mut child = pty.slave.spawn_command(command).expect("spawn top");
    drop(pty.slave);
    let (rows, cols) = (NonZeroU16::new(40).unwrap(), NonZeroU16::new(140).unwrap());
    let parser = Arc::new(Mutex::new(vt100::Parser::new(rows, cols, 0)));
    let mut reader = pty.master.try_clone_reader().expect("pty reader");
    let reading = {
        let parser = Arc::clone(&parser);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                parser.lock().unwrap().process(&buffer[..n]);
            }
        })
    };
    let screen = || parser.lock().unwrap().screen().contents();

    // The broker, the topic with a rate above zero, the group behind by what it has not
    // committed.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (topic, group) = loop {
        let text = screen();
        let topic = row(&text, TOPIC);
        let group = row(&text, GROUP);
        let moving = topic
            .as_ref()
            .and_then(|cells| cells.get(1)?.parse::<f64>().ok())
            .is_some_and(|rate| rate > 0.0);
        let behind = group
            .as_ref()
            .and_then(|cells| cells.get(3)?.parse::<i64>().ok())
            .is_some_and(|lag| lag > 0);
        if moving && behind && row(&text, BROKER_NAME).is_some() {
            break (topic.unwrap(), group.unwrap());
        }
        assert!(
            Instant::now() < deadline,
            "top never showed the topic moving and the group behind:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = screen();
    let broker_row = row(&text, BROKER_NAME).unwrap();
    assert_eq!(broker_row[1], "0", "{text}");
    assert_eq!(broker_row[2], broker.addr.to_string(), "{text}");
    // One refresh read both: every message went to queue 0, and the group committed one.
    let messages: u64 = topic[2].parse().unwrap();
    assert_eq!(group[1], TOPIC, "{text}");
    let lag: u64 = group[3].parse().unwrap();
    assert_eq!(lag, messages - 1, "{text}");
    // The system topics and the cluster's own are not listed.
    assert!(row(&text, "TBW102").is_none(), "{text}");
    assert!(row(&text, "TopCluster").is_none(), "{text}");

    producer.stop();
    pty.master
        .take_writer()
        .expect("pty writer")
        .write_all(b"q")
        .expect("press q");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for top") {
            break status;
        }
        assert!(Instant::now() < deadline, "top did not quit on q");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "top exited with {status:?}");
    drop(pty.master);
    reading.join().unwrap();
    assert!(
        !parser.lock().unwrap().screen().alternate_screen(),
        "top left the terminal in its alternate screen"
    );
}

#[test]
fn top_prints_text_tables_when_not_on_a_terminal() {
    let namesrv = NamesrvProcess::start("");
    let dir = TempDir::on_disk("admin-top-batch");
    let config = format!(
        "namesrvAddr=127.0.0.1:{}\nbrokerName={BROKER_NAME}\nregisterNameServerPeriod=200",
        namesrv.addr.port()
    );
    let broker = BrokerProcess::start(&dir.path().join("store"), &config);
    let args = [
        "admin",
        "-n",
        &namesrv.addr.to_string(),
        "top",
        "--iterations",
        "2",
        "--interval",
        "200",
    ];
    // Until the broker has registered, the view has no broker row: run until both refreshes
    // show it (a registration between the two shows it in the second only).
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_ferromq"))
            .args(args)
            .output()
            .expect("run top");
        assert!(output.status.success(), "{output:?}");
        let text = String::from_utf8(output.stdout).unwrap();
        if text.matches("== Brokers (1)").count() == 2 {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "no broker row in both refreshes:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        !text.contains('\u{1b}'),
        "escape codes in text output: {text}"
    );
    assert_eq!(
        row(&text, BROKER_NAME).unwrap()[2],
        broker.addr.to_string(),
        "{text}"
    );
}
