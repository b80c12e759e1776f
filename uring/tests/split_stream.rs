//! The halves of `net::split` on a real loopback connection: they lend one descriptor, a
//! read and a write run at once, `shutdown_both` through the write half ends a read pending
//! on the read half, and the socket stays open until both halves are gone.

// Only the executor helper is used here, not the segment paths.
#[allow(dead_code)]
mod common;

use common::on_executor;
use ferromq_uring::net::{bind_listener, connect, shutdown_both, split, TcpStream};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

/// A connected pair on loopback: (accepted, connected).
async fn pair() -> (TcpStream, TcpStream) {
    let listener = bind_listener("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let accepting = glommio::spawn_local(async move { listener.accept().await.unwrap() });
    let connected = connect(addr, Duration::from_secs(5)).await.unwrap();
    (accepting.await, connected)
}

#[test]
fn split_halves_lend_the_stream_descriptor() {
    on_executor(|| async move {
        let (accepted, _peer) = pair().await;
        let fd = accepted.as_raw_fd();
        let (reader, writer) = split(accepted);
        assert_eq!(reader.as_fd().as_raw_fd(), fd);
        assert_eq!(writer.as_fd().as_raw_fd(), fd);
    });
}

#[test]
fn split_halves_read_and_write_at_once_both_ways() {
    on_executor(|| async move {
        let (accepted, peer) = pair().await;
        let (mut reader, mut writer) = split(accepted);
        let (mut peer_reader, mut peer_writer) = split(peer);
        // The read is pending before anything is written.
        let reading = glommio::spawn_local(async move {
            let mut got = [0u8; 5];
            reader.read_exact(&mut got).await.unwrap();
            got
        });
        writer.write_all(b"ping!").await.unwrap();
        let mut got = [0u8; 5];
        peer_reader.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping!");
        peer_writer.write_all(b"pong!").await.unwrap();
        assert_eq!(&reading.await, b"pong!");
    });
}

#[test]
fn shutdown_both_through_the_write_half_ends_a_pending_read() {
    on_executor(|| async move {
        let (accepted, mut peer) = pair().await;
        let (mut reader, writer) = split(accepted);
        let reading = glommio::spawn_local(async move {
            let mut got = [0u8; 1];
            reader.read(&mut got).await
        });
        // Let the read start and wait (the reading task runs before this one resumes).
        futures_lite::future::yield_now().await;
        shutdown_both(writer.as_fd()).unwrap();
        let read = glommio::timer::timeout(Duration::from_secs(10), async { Ok(reading.await) })
            .await
            .expect("the pending read ends");
        assert_eq!(read.unwrap(), 0, "the read side sees the end of the stream");
        let mut rest = Vec::new();
        assert_eq!(
            peer.read_to_end(&mut rest).await.unwrap(),
            0,
            "so does the peer"
        );
    });
}

#[test]
fn split_socket_stays_open_until_both_halves_are_dropped() {
    on_executor(|| async move {
        let (accepted, mut peer) = pair().await;
        let (mut reader, writer) = split(accepted);
        drop(writer);
        peer.write_all(b"still there").await.unwrap();
        let mut got = [0u8; 11];
        reader.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"still there");
        drop(reader);
        let mut rest = Vec::new();
        assert_eq!(
            peer.read_to_end(&mut rest).await.unwrap(),
            0,
            "closed: end of stream"
        );
    });
}
