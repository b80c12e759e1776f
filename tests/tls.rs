//! TLS on the remoting ports (Java's `tls.server.mode` and `tls.*` keys): the three modes on
//! the name server and the broker, certificates from files with client-certificate checks,
//! settings from `tls.config.file`, settings a server refuses at start, peers that open with
//! a handshake and stop, and the Java 4.9.8 client with `-Dtls.enable=true` against an
//! enforcing ferromq and a default (permissive) one.

mod common;

use common::java::{run_java_with, Serialize, Standalone};
use common::{BrokerProcess, NamesrvProcess, TempDir};
use ferromq::client::consumer::{ConsumeFromWhere, LitePullConsumer, LitePullConsumerConfig};
use ferromq::client::tls::{ClientTlsSettings, TlsClient};
use ferromq::client::{ClientConfig, Message, Producer, SendStatus};
use ferromq::remoting::client::{connect_tokio, ClientConfig as ConnectionConfig};
use ferromq::remoting::headers::GetRouteInfoRequestHeader;
use ferromq::remoting::{RemotingCommand, RequestCode};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Whether one request over a connection made with `tls` gets an answer (any code).
async fn answers(addr: SocketAddr, tls: Option<TlsClient>) -> bool {
    let config = ConnectionConfig {
        tls,
        ..ConnectionConfig::default()
    };
    let Ok(Ok((client, _))) =
        tokio::time::timeout(Duration::from_secs(5), connect_tokio(addr, config)).await
    else {
        return false;
    };
    let request = RemotingCommand::request_with_header(
        RequestCode::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: "TBW102".into(),
            accept_standard_json_only: None,
        },
    );
    client
        .request_timeout(request, Duration::from_secs(5))
        .await
        .is_ok()
}

/// (plain answered, TLS answered) for a name server started with `config`.
fn plain_and_tls(config: &str) -> (bool, bool) {
    let namesrv = NamesrvProcess::start(config);
    common::runtime().block_on(async {
        (
            answers(namesrv.addr, None).await,
            answers(namesrv.addr, Some(TlsClient::insecure())).await,
        )
    })
}

#[test]
fn each_mode_serves_what_java_serves_on_one_port() {
    // Java's default is permissive, with a self-signed certificate (test mode).
    assert_eq!(plain_and_tls(""), (true, true), "default (permissive)");
    assert_eq!(
        plain_and_tls("tls.server.mode=permissive"),
        (true, true),
        "permissive"
    );
    assert_eq!(
        plain_and_tls("tls.server.mode=disabled"),
        (true, false),
        "disabled"
    );
    assert_eq!(
        plain_and_tls("tls.server.mode=enforcing"),
        (false, true),
        "enforcing"
    );
}

/// A certificate authority, a server certificate for 127.0.0.1 and a client certificate,
/// written as PEM files under `dir`.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn write_pki(dir: &Path, name: &str) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |names: Vec<SanType>| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = names;
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(vec![SanType::IpAddress([127, 0, 0, 1].into())]);
    let (client_cert, client_key) = leaf(vec![SanType::DnsName("client".try_into().unwrap())]);
    let write = |file: &str, text: &str| {
        let path = dir.join(format!("{name}-{file}"));
        std::fs::write(&path, text).unwrap();
        path
    };
    Pki {
        ca: write("ca.pem", &ca_cert.pem()),
        server_cert: write("server.pem", &server_cert),
        server_key: write("server.key", &server_key),
        client_cert: write("client.pem", &client_cert),
        client_key: write("client.key", &client_key),
    }
}

/// A client with Java's non-test settings: the server checked against `trust`, and the
/// client certificate of `pki` presented when `present`.
fn checking_client(trust: &Path, pki: &Pki, present: bool) -> TlsClient {
    let settings = ClientTlsSettings {
        test_mode: false,
        auth_server: true,
        trust_cert_path: Some(trust.to_path_buf()),
        cert_path: present.then(|| pki.client_cert.clone()),
        key_path: present.then(|| pki.client_key.clone()),
        key_password: None,
    };
    TlsClient::from_settings(&settings).unwrap()
}

#[test]
fn certificates_from_files_and_client_certificates_are_checked_both_ways() {
    let dir = TempDir::new("tls-pki");
    let pki = write_pki(dir.path(), "good");
    let other = write_pki(dir.path(), "other");
    // Every key but the mode comes from `tls.config.file`, as Java reads them.
    let file = dir.path().join("tls.properties");
    std::fs::write(
        &file,
        format!(
            "tls.test.mode.enable=false\ntls.server.certPath={}\ntls.server.keyPath={}\n\
             tls.server.need.client.auth=require\ntls.server.authClient=true\n\
             tls.server.trustCertPath={}\ntls.server.mode=disabled\n",
            pki.server_cert.display(),
            pki.server_key.display(),
            pki.ca.display()
        ),
    )
    .unwrap();
    let namesrv = NamesrvProcess::start(&format!(
        "tls.server.mode=enforcing\ntls.config.file={}",
        file.display()
    ));
    common::runtime().block_on(async {
        let addr = namesrv.addr;
        let ok = |client: TlsClient| answers(addr, Some(client));
        assert!(
            ok(checking_client(&pki.ca, &pki, true)).await,
            "a client that trusts the CA and presents a certificate it signed"
        );
        assert!(
            !ok(checking_client(&pki.ca, &pki, false)).await,
            "no client certificate, need.client.auth=require"
        );
        assert!(
            !ok(checking_client(&pki.ca, &other, true)).await,
            "a client certificate of another CA, authClient=true"
        );
        assert!(
            !ok(checking_client(&other.ca, &pki, true)).await,
            "the client does not trust the server's CA"
        );
        assert!(
            !ok(TlsClient::insecure()).await,
            "an insecure client presents no certificate"
        );
        // The file's mode line is ignored (Java's rule): the server still enforces TLS.
        assert!(!answers(addr, None).await, "plain TCP to enforcing");
    });
}

#[test]
fn settings_a_server_cannot_use_stop_it_at_start_with_the_reason() {
    let dir = TempDir::new("tls-bad");
    let pki = write_pki(dir.path(), "bad");
    let encrypted = dir.path().join("encrypted.key");
    std::fs::write(
        &encrypted,
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
    )
    .unwrap();
    let cases = [
        (
            "tls.server.mode=sometimes".to_owned(),
            "disabled, permissive or enforcing",
        ),
        (
            "tls.test.mode.enable=false".to_owned(),
            "needs tls.server.certPath and tls.server.keyPath",
        ),
        (
            format!(
                "tls.test.mode.enable=false\ntls.server.certPath={}\ntls.server.keyPath={}",
                pki.server_cert.display(),
                encrypted.display()
            ),
            "encrypted keys are not supported",
        ),
        (
            format!(
                "tls.test.mode.enable=false\ntls.server.certPath={}\ntls.server.keyPath={}",
                dir.path().join("missing.pem").display(),
                pki.server_key.display()
            ),
            "missing.pem",
        ),
        (
            format!(
                "tls.test.mode.enable=false\ntls.server.certPath={}\ntls.server.keyPath={}\n\
                 tls.server.need.client.auth=require\ntls.server.authClient=true",
                pki.server_cert.display(),
                pki.server_key.display()
            ),
            "needs tls.server.trustCertPath",
        ),
        (
            "tls.server.authClient=yes".to_owned(),
            "tls.server.authClient = 'yes' is invalid: true or false",
        ),
        (
            "tls.client.authServer=maybe".to_owned(),
            "tls.client.authServer = 'maybe' is invalid: true or false",
        ),
    ];
    for (config, reason) in cases {
        let file = dir.path().join("namesrv.conf");
        std::fs::write(&file, format!("{config}\n")).unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_ferromq"))
            .args([
                "namesrv",
                "-c",
                file.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{config}: started");
        assert!(text.contains(reason), "{config}: {text}");
    }
}

/// A peer that opens with a TLS handshake record and then sends nothing more is closed
/// after the handshake time limit; one that sends noise after 0x16 at once; neither takes
/// the server down.
#[test]
fn handshakes_that_stall_or_are_noise_close_only_their_connection() {
    let namesrv = NamesrvProcess::start("");
    let mut stalled = std::net::TcpStream::connect(namesrv.addr).unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01]).unwrap();
    let mut noise = std::net::TcpStream::connect(namesrv.addr).unwrap();
    let mut junk = vec![0x16u8];
    junk.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    noise.write_all(&junk).unwrap();
    noise
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 64];
    // Closed (0 bytes, or a reset), perhaps after a TLS alert.
    let closed = |stream: &mut std::net::TcpStream, buf: &mut [u8]| loop {
        match stream.read(buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    };
    closed(&mut noise, &mut buf);
    let started = Instant::now();
    stalled
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    closed(&mut stalled, &mut buf);
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(20),
        "stalled handshake held {waited:?}"
    );
    let alive = common::runtime().block_on(async {
        (
            answers(namesrv.addr, None).await,
            answers(namesrv.addr, Some(TlsClient::insecure())).await,
        )
    });
    assert_eq!(alive, (true, true));
}

#[test]
fn an_enforcing_broker_serves_tls_clients_and_registers_over_tls() {
    let dir = TempDir::new("tls-broker");
    let namesrv = NamesrvProcess::start("tls.server.mode=enforcing");
    let broker = BrokerProcess::start(
        &dir.path().join("store"),
        &format!(
            "namesrvAddr={}\ntls.server.mode=enforcing\ntls.enable=true\nbrokerName=tls-b",
            namesrv.addr
        ),
    );
    let namesrv_addr = namesrv.addr.to_string();
    common::runtime().block_on(async {
        assert!(!answers(broker.addr, None).await, "plain TCP to the broker");
        let mut config = ClientConfig::new(&namesrv_addr);
        config.tls = Some(TlsClient::insecure());
        let producer = Producer::new("tls-p", config.clone());
        producer.start().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        // The route appears once the broker registered, which it did over TLS.
        let first = loop {
            match producer.send(Message::new("TlsT", "m0")).await {
                Ok(sent) => break sent,
                Err(error) => {
                    assert!(Instant::now() < deadline, "no route over TLS: {error}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        assert_eq!(first.send_status, SendStatus::SendOk);
        for i in 1..300 {
            let body = format!("m{i}").repeat(1 + i % 50);
            let sent = producer.send(Message::new("TlsT", body)).await.unwrap();
            assert_eq!(sent.send_status, SendStatus::SendOk);
        }
        producer.shutdown().await;

        let mut lite = LitePullConsumerConfig::new("tls-g");
        lite.consume_from_where = ConsumeFromWhere::FirstOffset;
        let consumer = LitePullConsumer::new(config.clone(), lite);
        consumer.subscribe("TlsT", "*").unwrap();
        consumer.start().await.unwrap();
        let mut seen = BTreeSet::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen.len() < 300 && Instant::now() < deadline {
            for message in consumer.poll(Duration::from_millis(500)).await {
                let body = String::from_utf8_lossy(&message.body).into_owned();
                let seq: usize = body
                    .trim_start_matches('m')
                    .split('m')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert_eq!(body, format!("m{seq}").repeat(1 + seq % 50));
                seen.insert(seq);
            }
        }
        consumer.shutdown().await;
        assert_eq!(seen, (0..300).collect(), "every message back over TLS");
    });

    // `ferromq admin --tls` reaches both; without it, the enforcing name server closes it.
    let admin = |tls: bool| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ferromq"));
        command.args(["admin", "-n", &namesrv_addr, "topicList"]);
        if tls {
            command.arg("--tls");
        }
        let output = command.output().unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    let (ok, listed) = admin(true);
    assert!(ok && listed.contains("TlsT"), "{listed}");
    assert!(
        !admin(false).0,
        "admin without --tls to an enforcing name server"
    );
}

#[test]
fn the_java_client_with_tls_enable_works_against_ferromq() {
    common::java::require_kit();
    // Enforcing: name server and broker; the broker registers over TLS.
    let ours = Standalone::start("tls.server.mode=enforcing\ntls.enable=true");
    let ns = ours.namesrv_addr();
    let tls = "-Dtls.enable=true";
    let run = |topic: &str, mode: &str, jvm: &str| {
        run_java_with(
            "SendConsume",
            &[&ns, topic, mode, "40"],
            Serialize::Json,
            jvm,
            Duration::from_secs(180),
        )
    };
    run("TlsJavaSync", "sync", tls).assert_passed("SendConsume sync, TLS, enforcing");
    let plain = run("TlsJavaPlain", "sync", "");
    assert!(
        plain.status.is_none_or(|s| !s.success()),
        "a plain Java client against an enforcing ferromq passed: {}",
        plain.text
    );
    drop(ours);

    // Permissive (the default): TLS and plain clients on one port.
    let ours = Standalone::start("");
    let ns = ours.namesrv_addr();
    // Plain Java clients against the default are every other Java test.
    run_java_with(
        "SendConsume",
        &[&ns, "PermTls", "async", "40"],
        Serialize::Rocketmq,
        tls,
        Duration::from_secs(180),
    )
    .assert_passed("SendConsume async, TLS, permissive");
}
