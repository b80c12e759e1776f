//! TLS on the remoting ports, with Java's settings (`TlsSystemConfig`, `tls.*` keys) and its
//! three server modes (`tls.server.mode`):
//!
//! - `disabled`: plain TCP only; a connection that opens with a TLS handshake is closed;
//! - `permissive` (Java's default): TLS and plain TCP on the same port, told apart by the
//!   first byte, 0x16 (a TLS handshake record) or not, as Java's `HandshakeHandler`;
//! - `enforcing`: TLS only; a connection that opens with anything else is closed.
//!
//! With `tls.test.mode.enable=true` (Java's default) the server makes itself a self-signed
//! certificate at start-up, as Java's netty `SelfSignedCertificate`; otherwise it reads
//! `tls.server.certPath` and `tls.server.keyPath`. `tls.server.need.client.auth` (`none`,
//! `optional`, `require`) asks clients for a certificate, checked against
//! `tls.server.trustCertPath` when `tls.server.authClient=true` and taken as it is when not
//! (Java's `InsecureTrustManagerFactory`).
//!
//! The keys are read from the server's config file and then, as Java does, from
//! `tls.config.file` (default `/etc/rocketmq/tls.properties`) when it exists, which may set
//! every key but `tls.server.mode` and `tls.enable`. `tls.enable` makes the broker's own
//! connections to name servers use TLS with the `tls.client.*` keys.

use ferromq_client::tls::{load_certs, load_key, root_store, AnyCertificate, ClientTlsSettings};
use ferromq_client::tls::{optional_path, optional_text, parse_bool, TlsClient, TlsError};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;

/// `tls.server.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain TCP only.
    Disabled,
    /// TLS or plain TCP, by the first byte (Java's default).
    Permissive,
    /// TLS only.
    Enforcing,
}

/// `tls.server.need.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// Ask for no client certificate (Java's default).
    None,
    /// Ask, and accept clients without one.
    Optional,
    /// Refuse clients without one.
    Require,
}

/// The `tls.*` keys of a server (and of its own client connections), Java's defaults.
#[derive(Clone, Debug)]
pub struct TlsSettings {
    /// `tls.server.mode` (`permissive`).
    pub mode: TlsMode,
    /// `tls.enable` (false): the broker's connections to name servers use TLS.
    pub enable: bool,
    /// `tls.config.file` (`/etc/rocketmq/tls.properties`), read when it exists.
    pub config_file: PathBuf,
    /// `tls.server.need.client.auth` (`none`).
    pub need_client_auth: ClientAuth,
    /// `tls.server.certPath`: the server's PEM certificate chain.
    pub cert_path: Option<PathBuf>,
    /// `tls.server.keyPath`: its PEM key.
    pub key_path: Option<PathBuf>,
    /// `tls.server.keyPassword`: refused when set (encrypted keys are not supported).
    pub key_password: Option<String>,
    /// `tls.server.authClient` (false): check client certificates against
    /// `trust_cert_path`.
    pub auth_client: bool,
    /// `tls.server.trustCertPath`: the certificates client certificates must chain to.
    pub trust_cert_path: Option<PathBuf>,
    /// The `tls.client.*` keys, for `enable`, and `tls.test.mode.enable` (true), which
    /// also makes the server's certificate a self-signed one and its client checks lax.
    pub client: ClientTlsSettings,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            mode: TlsMode::Permissive,
            enable: false,
            config_file: PathBuf::from("/etc/rocketmq/tls.properties"),
            need_client_auth: ClientAuth::None,
            cert_path: None,
            key_path: None,
            key_password: None,
            auth_client: false,
            trust_cert_path: None,
            client: ClientTlsSettings::default(),
        }
    }
}

impl TlsSettings {
    /// Applies one `tls.*` key; `Ok(false)` for a key that is not one.
    ///
    /// # Errors
    /// What the value should have been.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "tls.server.mode" => {
                self.mode = match value.trim().to_ascii_lowercase().as_str() {
                    "disabled" => TlsMode::Disabled,
                    "permissive" => TlsMode::Permissive,
                    "enforcing" => TlsMode::Enforcing,
                    _ => return Err("disabled, permissive or enforcing".to_owned()),
                };
            }
            "tls.server.need.client.auth" => {
                self.need_client_auth = match value.trim().to_ascii_lowercase().as_str() {
                    "none" => ClientAuth::None,
                    "optional" => ClientAuth::Optional,
                    "require" => ClientAuth::Require,
                    _ => return Err("none, optional or require".to_owned()),
                };
            }
            "tls.enable" => self.enable = parse_bool(value)?,
            "tls.config.file" => self.config_file = PathBuf::from(value),
            "tls.server.certPath" => self.cert_path = optional_path(value),
            "tls.server.keyPath" => self.key_path = optional_path(value),
            "tls.server.keyPassword" => self.key_password = optional_text(value),
            "tls.server.authClient" => self.auth_client = parse_bool(value)?,
            "tls.server.trustCertPath" => self.trust_cert_path = optional_path(value),
            // `tls.test.mode.enable` among them: one key for both sides, as in Java.
            _ => return self.client.set(key, value),
        }
        Ok(true)
    }

    /// Applies `tls.config.file` when it exists, every key but `tls.server.mode`,
    /// `tls.enable` and `tls.config.file` itself (Java's `extractTlsConfigFromFile`).
    ///
    /// # Errors
    /// A file that exists but cannot be read, or a bad value in it.
    pub fn apply_config_file(&mut self) -> Result<(), String> {
        let file = self.config_file.clone();
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("{}: {e}", file.display())),
        };
        let properties = crate::config::properties::parse(&text);
        for property in properties {
            let key = property.key.as_str();
            if matches!(key, "tls.server.mode" | "tls.enable" | "tls.config.file") {
                continue;
            }
            self.set(key, &property.value).map_err(|expected| {
                let at = format!("{} line {}", file.display(), property.line);
                format!("{at}: {key}={}: expected {expected}", property.value)
            })?;
        }
        tracing::info!(file = %file.display(), "read TLS settings");
        Ok(())
    }

    /// The server side, or `None` in `disabled` mode.
    ///
    /// # Errors
    /// Files that cannot be read, or settings that do not fit together.
    pub fn server(&self) -> Result<Option<ServerTls>, TlsError> {
        if self.mode == TlsMode::Disabled {
            return Ok(None);
        }
        let provider = ferromq_client::tls::provider();
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let (certs, key) = if self.client.test_mode {
            self_signed()?
        } else {
            if self.key_password.is_some() {
                return Err(TlsError::Config(
                    "tls.server.keyPassword: encrypted keys are not supported; decrypt the key \
                     (openssl pkcs8 -topk8 -nocrypt) and leave the password unset"
                        .to_owned(),
                ));
            }
            let (Some(cert), Some(key)) = (&self.cert_path, &self.key_path) else {
                return Err(TlsError::Config(
                    "tls.test.mode.enable=false needs tls.server.certPath and tls.server.keyPath"
                        .to_owned(),
                ));
            };
            (load_certs(cert)?, load_key(key)?)
        };
        let builder = match self.client_verifier(provider)? {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(certs, key)
            .map_err(|e| TlsError::Config(format!("server certificate: {e}")))?;
        Ok(Some(ServerTls {
            mode: self.mode,
            acceptor: futures_rustls::TlsAcceptor::from(Arc::new(config)),
        }))
    }

    /// How client certificates are checked, if they are asked for.
    fn client_verifier(
        &self,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Option<Arc<dyn ClientCertVerifier>>, TlsError> {
        let mandatory = match self.need_client_auth {
            ClientAuth::None => return Ok(None),
            ClientAuth::Optional => false,
            ClientAuth::Require => true,
        };
        if !self.auth_client || self.client.test_mode {
            let any = AnyClientCertificate {
                check: AnyCertificate { provider },
                mandatory,
            };
            return Ok(Some(Arc::new(any)));
        }
        let Some(trust) = &self.trust_cert_path else {
            return Err(TlsError::Config(
                "tls.server.authClient=true needs tls.server.trustCertPath".to_owned(),
            ));
        };
        let builder =
            WebPkiClientVerifier::builder_with_provider(Arc::new(root_store(trust)?), provider);
        let builder = if mandatory {
            builder
        } else {
            builder.allow_unauthenticated()
        };
        let verifier = builder
            .build()
            .map_err(|e| TlsError::Config(format!("client certificate check: {e}")))?;
        Ok(Some(verifier))
    }

    /// The broker's own client side (`tls.enable`), or `None` for plain TCP.
    ///
    /// # Errors
    /// Files that cannot be read, or settings that do not fit together.
    pub fn own_client(&self) -> Result<Option<TlsClient>, TlsError> {
        if !self.enable {
            return Ok(None);
        }
        TlsClient::from_settings(&self.client).map(Some)
    }
}

/// A certificate for `localhost` and 127.0.0.1 signed by its own key, new at each start.
fn self_signed() -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| TlsError::Config(format!("self-signed certificate: {e}")))?;
    let key = PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into());
    Ok((vec![made.cert.der().clone()], key))
}

/// The server side of TLS: the mode and the handshake; cheap to clone.
#[derive(Clone)]
pub struct ServerTls {
    /// `permissive` or `enforcing`.
    pub mode: TlsMode,
    /// Runs server handshakes.
    pub acceptor: futures_rustls::TlsAcceptor,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// The first byte of a TLS connection: a handshake record.
pub const HANDSHAKE_RECORD: u8 = 0x16;

/// Takes whatever client certificate is presented (and, when `mandatory`, refuses clients
/// without one): Java's server with `tls.server.authClient=false`.
#[derive(Debug)]
struct AnyClientCertificate {
    check: AnyCertificate,
    mandatory: bool,
}

impl ClientCertVerifier for AnyClientCertificate {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.check.signature(false, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.check.signature(true, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.check.schemes()
    }
}

/// A stream whose first bytes were already read: they are read again first. The server
/// reads a connection's first bytes to tell TLS from plain TCP, then hands them on.
#[derive(Debug)]
pub struct Prefixed<S> {
    head: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    /// `inner`, with `head` to be read before anything more of it.
    pub fn new(head: Vec<u8>, inner: S) -> Prefixed<S> {
        Prefixed { head, at: 0, inner }
    }
}

impl<S: futures::AsyncRead + Unpin> futures::AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if this.at < this.head.len() {
            let n = buf.len().min(this.head.len() - this.at);
            buf[..n].copy_from_slice(&this.head[this.at..this.at + n]);
            this.at += n;
            if this.at == this.head.len() {
                this.head = Vec::new();
                this.at = 0;
            }
            return std::task::Poll::Ready(Ok(n));
        }
        std::pin::Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: futures::AsyncWrite + Unpin> futures::AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_close(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_close(cx)
    }
}
