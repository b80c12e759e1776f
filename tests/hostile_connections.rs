//! Connections that misbehave, to a real `ferromq broker`: frames whose length lies (past the
//! frame limit, negative, a header longer than its frame), a request trickled a byte at a
//! time, frames cut off by peers that vanish, and thousands of connections opened and
//! dropped at once. Each misbehaving connection alone is closed (or, trickling, answered);
//! a connection opened before it all still answers after, and so does a new one.

mod common;

use common::{BrokerProcess, TempDir};
use ferromq::remoting::codec::encode_to_vec;
use ferromq::remoting::{FrameDecoder, RemotingCommand, RequestCode, ResponseCode};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

fn probe_frame() -> Vec<u8> {
    encode_to_vec(&RemotingCommand::request(
        RequestCode::GET_BROKER_RUNTIME_INFO,
    ))
}

fn open(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Reads one answer off `stream`.
fn answer(stream: &mut TcpStream) -> RemotingCommand {
    let mut decoder = FrameDecoder::new(ferromq::limits::FRAME_SIZE_MAX);
    let mut buf = [0u8; 64 * 1024];
    loop {
        if let Some(command) = decoder.next_command().expect("a well-formed answer") {
            return command;
        }
        let n = stream.read(&mut buf).expect("an answer within 10 s");
        assert!(n > 0, "closed before answering");
        decoder.extend(&buf[..n]);
    }
}

/// Whether the broker closed `stream` (EOF or reset) within its read timeout; a read that
/// times out means it is still open.
fn closed(stream: &mut TcpStream) -> bool {
    use std::io::ErrorKind::{TimedOut, WouldBlock};
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Err(e) if matches!(e.kind(), WouldBlock | TimedOut) => return false,
            Err(_) => return true,
            // An error answer may come first; the close follows.
            Ok(_) => continue,
        }
    }
}

fn served(stream: &mut TcpStream) -> bool {
    stream.write_all(&probe_frame()).is_ok()
        && answer(stream).response_code() == ResponseCode::SUCCESS
}

#[test]
fn lying_trickling_vanishing_and_crowding_connections_hurt_only_themselves() {
    let dir = TempDir::on_disk("hostile-connections");
    let mut broker = BrokerProcess::start(&dir.path().join("store"), "brokerName=broker-conn");
    let addr = broker.addr;
    let mut witness = open(addr);
    assert!(served(&mut witness));

    // Lengths that lie: past the 16 MiB frame limit, negative, a header longer than its frame.
    let over_limit = [&(16 * 1024 * 1024 + 1_i32).to_be_bytes()[..], b"abcd"].concat();
    let negative = [&(-1_i32).to_be_bytes()[..], b"abcd"].concat();
    let header_too_long = [
        &8_i32.to_be_bytes()[..],
        &100_i32.to_be_bytes()[..],
        b"abcd",
    ]
    .concat();
    for (what, bytes) in [
        ("over the frame limit", over_limit),
        ("negative", negative),
        ("header longer than frame", header_too_long),
    ] {
        let mut liar = open(addr);
        liar.write_all(&bytes).unwrap();
        assert!(
            closed(&mut liar),
            "a frame length {what} left the connection open"
        );
    }

    // A request a byte at a time is answered once whole.
    let mut trickle = open(addr);
    for byte in probe_frame() {
        trickle.write_all(&[byte]).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(answer(&mut trickle).response_code(), ResponseCode::SUCCESS);

    // Peers that vanish mid-frame: the frame says 1 KiB, half comes, then the socket closes.
    let mut cut = [&1024_i32.to_be_bytes()[..], &[0u8; 512][..]].concat();
    cut.truncate(516);
    for _ in 0..500 {
        let mut gone = open(addr);
        gone.write_all(&cut).unwrap();
    }

    // Thousands at once: 3,000 connections open together, then all dropped.
    let crowd: Vec<TcpStream> = (0..3_000).map(|_| open(addr)).collect();
    let mut last = open(addr);
    assert!(
        served(&mut last),
        "a connection among 3,000 others was not served"
    );
    drop(crowd);

    assert!(
        broker.child.try_wait().unwrap().is_none(),
        "the broker exited"
    );
    assert!(
        served(&mut witness),
        "the first connection stopped being served"
    );
    assert!(served(&mut open(addr)), "a new connection was not served");
}
