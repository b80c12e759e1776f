//! The requesting half of the remoting protocol, against real sockets.
//!
//! Method: a tokio listener in the test plays a peer that behaves badly on purpose (never
//! answers, answers out of order, sends its own request, closes); the client must match
//! responses by opaque, time out without losing the connection, deliver the peer's requests
//! to its inbound stream, and fail pending requests once the connection is gone.

use ferromq::remoting::client::{connect_tokio, ClientConfig, ClientError};
use ferromq::remoting::codec::{encode_to_vec, FrameDecoder};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use futures::StreamExt;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn read_commands(stream: &mut TcpStream, count: usize) -> Vec<RemotingCommand> {
    let mut decoder = FrameDecoder::new(1 << 24);
    let mut commands = Vec::new();
    let mut chunk = [0u8; 4096];
    while commands.len() < count {
        let read = stream.read(&mut chunk).await.unwrap();
        assert!(read > 0, "client closed early");
        decoder.extend(&chunk[..read]);
        while let Some(command) = decoder.next_command().unwrap() {
            commands.push(command);
        }
    }
    commands
}

#[tokio::test]
async fn responses_out_of_order_reach_their_requests() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let requests = read_commands(&mut stream, 2).await;
        // Answer the second request first, then the first.
        for request in requests.iter().rev() {
            let mut response = RemotingCommand::success_to(request);
            response.remark = Some(format!("for {}", request.code));
            stream.write_all(&encode_to_vec(&response)).await.unwrap();
        }
        requests
    });
    let config = ClientConfig {
        serialize_type: SerializeType::RocketMq,
        ..Default::default()
    };
    let (client, _inbound) = connect_tokio(addr, config).await.unwrap();
    let first = client.request_timeout(
        RemotingCommand::request(RequestCode(101)),
        Duration::from_secs(5),
    );
    let second = client.request_timeout(
        RemotingCommand::request(RequestCode(102)),
        Duration::from_secs(5),
    );
    let (first, second) = tokio::join!(first, second);
    assert_eq!(first.unwrap().remark.as_deref(), Some("for 101"));
    assert_eq!(second.unwrap().remark.as_deref(), Some("for 102"));
    let requests = peer.await.unwrap();
    assert_ne!(
        requests[0].opaque, requests[1].opaque,
        "fresh opaque per request"
    );
    assert!(requests
        .iter()
        .all(|r| r.serialize_type == SerializeType::RocketMq));
}

#[tokio::test]
async fn silent_peer_times_out_and_connection_stays_usable() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let requests = read_commands(&mut stream, 2).await;
        // Ignore the first; answer the second. Then a late answer to the first.
        stream
            .write_all(&encode_to_vec(&RemotingCommand::success_to(&requests[1])))
            .await
            .unwrap();
        stream
            .write_all(&encode_to_vec(&RemotingCommand::success_to(&requests[0])))
            .await
            .unwrap();
        stream
    });
    let (client, _inbound) = connect_tokio(addr, ClientConfig::default()).await.unwrap();
    let timed_out = client
        .request_timeout(
            RemotingCommand::request(RequestCode(1)),
            Duration::from_millis(100),
        )
        .await;
    assert!(
        matches!(timed_out, Err(ClientError::Timeout(_))),
        "{timed_out:?}"
    );
    let answered = client
        .request_timeout(
            RemotingCommand::request(RequestCode(2)),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(answered.response_code(), ResponseCode::SUCCESS);
    assert!(!client.is_closed());
    drop(peer.await.unwrap());
}

#[tokio::test]
async fn oneway_sets_flag_and_peer_requests_arrive_inbound() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let oneway = read_commands(&mut stream, 1).await.remove(0);
        let mut check = RemotingCommand::request(RequestCode::CHECK_TRANSACTION_STATE);
        check.opaque = 77;
        check.mark_oneway();
        stream.write_all(&encode_to_vec(&check)).await.unwrap();
        let reply = read_commands(&mut stream, 1).await.remove(0);
        (oneway, reply)
    });
    let (client, mut inbound) = connect_tokio(addr, ClientConfig::default()).await.unwrap();
    client
        .oneway(RemotingCommand::request(
            RequestCode::UPDATE_CONSUMER_OFFSET,
        ))
        .await
        .unwrap();
    let from_peer = tokio::time::timeout(Duration::from_secs(5), inbound.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        from_peer.request_code(),
        RequestCode::CHECK_TRANSACTION_STATE
    );
    client
        .send_response(RemotingCommand::success_to(&from_peer))
        .await
        .unwrap();
    let (oneway, reply) = peer.await.unwrap();
    assert!(oneway.is_oneway());
    assert!(reply.is_response());
    assert_eq!(reply.opaque, 77);
}

#[tokio::test]
async fn peer_closing_fails_pending_requests() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        read_commands(&mut stream, 1).await;
        drop(stream);
    });
    let (client, _inbound) = connect_tokio(addr, ClientConfig::default()).await.unwrap();
    let pending = client
        .request_timeout(
            RemotingCommand::request(RequestCode(5)),
            Duration::from_secs(5),
        )
        .await;
    assert!(matches!(pending, Err(ClientError::Closed)), "{pending:?}");
    peer.await.unwrap();
    let after = client
        .request(RemotingCommand::request(RequestCode(6)))
        .await;
    assert!(matches!(after, Err(ClientError::Closed)), "{after:?}");
    assert!(client.is_closed());
}
