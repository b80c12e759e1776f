//! Gathering writes on a real loopback connection: many slices leave in order and whole,
//! also when the peer reads late and the socket's buffer fills (the writer then waits on
//! the reactor and goes on).

// Only the executor helper is used here, not the segment paths.
#[allow(dead_code)]
mod common;

use common::on_executor;
use ferromq_uring::net::{bind_listener, connect, split, write_all_gathered, TcpStream};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use std::time::Duration;

/// Parts of awkward sizes (empty ones among them) that add up to many socket buffers.
fn parts() -> Vec<Vec<u8>> {
    (0..3000usize)
        .map(|i| {
            let len = match i % 7 {
                0 => 0,
                1 => 1,
                2 => 65_537,
                _ => (i * 7919) % 20_000,
            };
            (0..len).map(|b| ((b + i * 31) % 251) as u8).collect()
        })
        .collect()
}

/// Accepts one connection on `listener` and writes [`parts`] to it with gathering sends.
fn serve_parts(listener: glommio::net::TcpListener) -> glommio::Task<std::io::Result<()>> {
    glommio::spawn_local(async move {
        let stream: TcpStream = listener.accept().await?;
        let (_reader, mut half) = split(stream);
        let parts = parts();
        let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        write_all_gathered(&mut half, &slices).await?;
        half.close().await
    })
}

#[test]
fn every_byte_of_every_part_arrives_in_order_behind_a_late_reader() {
    let sent: Vec<u8> = parts().concat();
    assert!(sent.len() > 20 << 20, "more than the socket buffers hold");
    let received = on_executor(|| async move {
        let listener = bind_listener("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = serve_parts(listener);
        let mut client = connect(addr, Duration::from_secs(5)).await.unwrap();
        // Late: the writer fills the socket's buffers and has to wait.
        glommio::timer::sleep(Duration::from_millis(200)).await;
        let mut received = Vec::new();
        client.read_to_end(&mut received).await.unwrap();
        writer.await.unwrap();
        received
    });
    assert_eq!(received.len(), sent.len());
    assert!(received == sent, "bytes differ");
}

#[test]
fn a_peer_that_goes_away_fails_the_write_instead_of_hanging() {
    on_executor(|| async move {
        let listener = bind_listener("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = serve_parts(listener);
        let client = connect(addr, Duration::from_secs(5)).await.unwrap();
        glommio::timer::sleep(Duration::from_millis(100)).await;
        drop(client);
        let outcome = glommio::timer::timeout(Duration::from_secs(10), async { Ok(writer.await) })
            .await
            .expect("the write ends");
        assert!(outcome.is_err(), "a write to a closed peer fails");
    });
}
