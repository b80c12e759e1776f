//! TLS for connections to brokers and name servers: Java's `tls.enable` with the
//! `tls.client.*` settings of `TlsSystemConfig`, on rustls.
//!
//! As Java's client, [`TlsClient::insecure`] (`tls.test.mode.enable=true`, or
//! `tls.client.authServer=false`, both Java's defaults) encrypts and checks no server
//! certificate; [`TlsClient::from_settings`] with `auth_server` checks it against the
//! certificates in `trust_cert_path`, and presents a client certificate when given one.
//! Certificates and keys are PEM files; keys in PKCS#8 (what Java's netty reads), PKCS#1
//! or SEC1. Encrypted keys (`tls.client.keyPassword`) are refused with a message: decrypt
//! them first (`openssl pkcs8 -topk8 -nocrypt`).
//!
//! The PEM loaders and the accept-any certificate checks are public for the broker's server
//! side, which reads the same files.

use crate::config::parse_java_bool;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file that cannot be read or holds nothing usable.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Settings that do not fit together, or that rustls refuses.
    #[error("{0}")]
    Config(String),
}

/// The client's `tls.client.*` settings (Java's `TlsSystemConfig`, same defaults).
#[derive(Clone, Debug)]
pub struct ClientTlsSettings {
    /// `tls.test.mode.enable` (true): check no server certificate.
    pub test_mode: bool,
    /// `tls.client.authServer` (false): check the server's certificate against
    /// `trust_cert_path`.
    pub auth_server: bool,
    /// `tls.client.trustCertPath`: PEM certificates the server's must chain to.
    pub trust_cert_path: Option<PathBuf>,
    /// `tls.client.certPath`: the client's own certificate chain, for servers that ask.
    pub cert_path: Option<PathBuf>,
    /// `tls.client.keyPath`: the key of `cert_path`.
    pub key_path: Option<PathBuf>,
    /// `tls.client.keyPassword`: refused (see the module docs) when set.
    pub key_password: Option<String>,
}

impl Default for ClientTlsSettings {
    fn default() -> Self {
        ClientTlsSettings {
            test_mode: true,
            auth_server: false,
            trust_cert_path: None,
            cert_path: None,
            key_path: None,
            key_password: None,
        }
    }
}

impl ClientTlsSettings {
    /// Applies one `tls.client.*` or `tls.test.mode.enable` key; `Ok(false)` for a key that
    /// is not one of them.
    ///
    /// # Errors
    /// A message for a boolean that is neither `true` nor `false`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "tls.test.mode.enable" => self.test_mode = parse_bool(value)?,
            "tls.client.authServer" => self.auth_server = parse_bool(value)?,
            "tls.client.trustCertPath" => self.trust_cert_path = optional_path(value),
            "tls.client.certPath" => self.cert_path = optional_path(value),
            "tls.client.keyPath" => self.key_path = optional_path(value),
            "tls.client.keyPassword" => self.key_password = optional_text(value),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// A boolean `tls.*` value, or what it should have been.
///
/// # Errors
/// `"true or false"` for anything else (see [`parse_java_bool`]).
pub fn parse_bool(value: &str) -> Result<bool, String> {
    parse_java_bool(value).ok_or_else(|| "true or false".to_owned())
}

/// A file setting: unset when empty, as Java's `TlsSystemConfig` reads it.
#[must_use]
pub fn optional_path(value: &str) -> Option<PathBuf> {
    optional_text(value).map(PathBuf::from)
}

/// A text setting: unset when empty.
#[must_use]
pub fn optional_text(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_owned())
}

/// How a client connection is encrypted; cheap to clone. Clones are equal to each other, and
/// to nothing else.
#[derive(Clone)]
pub struct TlsClient {
    config: Arc<rustls::ClientConfig>,
}

impl PartialEq for TlsClient {
    fn eq(&self, other: &TlsClient) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for TlsClient {}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient").finish_non_exhaustive()
    }
}

impl TlsClient {
    /// Encrypts without checking the server's certificate: Java's client with
    /// `-Dtls.enable=true` and nothing else.
    #[must_use]
    pub fn insecure() -> TlsClient {
        let provider = provider();
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map(|builder| {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyCertificate { provider }))
                    .with_no_client_auth()
            });
        let config = config.expect("the ring provider supports rustls' default protocol versions");
        TlsClient::of(config)
    }

    /// The client Java's `TlsHelper.buildSslContext(true)` builds from `settings`.
    ///
    /// # Errors
    /// A file that cannot be read, or settings rustls refuses.
    pub fn from_settings(settings: &ClientTlsSettings) -> Result<TlsClient, TlsError> {
        if settings.test_mode {
            return Ok(TlsClient::insecure());
        }
        if settings.key_password.is_some() {
            return Err(encrypted_key(settings.key_path.as_deref()));
        }
        let provider = provider();
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let builder = if settings.auth_server {
            let Some(trust) = &settings.trust_cert_path else {
                return Err(TlsError::Config(
                    "tls.client.authServer=true needs tls.client.trustCertPath".to_owned(),
                ));
            };
            builder.with_root_certificates(root_store(trust)?)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate { provider }))
        };
        let config = match (&settings.cert_path, &settings.key_path) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
                .map_err(|e| TlsError::Config(format!("client certificate: {e}")))?,
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(TlsError::Config(
                    "tls.client.certPath and tls.client.keyPath go together".to_owned(),
                ))
            }
        };
        Ok(TlsClient::of(config))
    }

    fn of(config: rustls::ClientConfig) -> TlsClient {
        TlsClient {
            config: Arc::new(config),
        }
    }

    /// Runs the handshake on `stream`, connected to `addr` (the name the certificate must
    /// carry: its IP address, as Java's client knows brokers by address).
    ///
    /// # Errors
    /// The handshake's error.
    pub async fn handshake<S>(
        &self,
        addr: SocketAddr,
        stream: S,
    ) -> std::io::Result<futures_rustls::client::TlsStream<S>>
    where
        S: futures::AsyncRead + futures::AsyncWrite + Unpin,
    {
        let name = ServerName::IpAddress(addr.ip().into());
        let connector = futures_rustls::TlsConnector::from(self.config.clone());
        connector.connect(name, stream).await
    }
}

/// The crypto provider of every TLS config ferromq makes.
#[must_use]
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn encrypted_key(path: Option<&Path>) -> TlsError {
    TlsError::File {
        path: path.map(Path::to_path_buf).unwrap_or_default(),
        reason: "encrypted keys are not supported: decrypt it (openssl pkcs8 -topk8 -nocrypt) \
                 and leave the key password unset"
            .to_owned(),
    }
}

/// The certificates of a PEM file, in order (a chain starts with its leaf).
///
/// # Errors
/// [`TlsError::File`] when it cannot be read or holds no certificate.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |reason: String| TlsError::File {
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".to_owned()));
    }
    Ok(certs)
}

/// The private key of a PEM file: PKCS#8, PKCS#1 or SEC1, unencrypted.
///
/// # Errors
/// [`TlsError::File`] when it cannot be read or holds no unencrypted key.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let text = std::fs::read(path).map_err(|e| TlsError::File {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    if text
        .windows(b"ENCRYPTED PRIVATE KEY".len())
        .any(|w| w == b"ENCRYPTED PRIVATE KEY")
    {
        return Err(encrypted_key(Some(path)));
    }
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| TlsError::File {
        path: path.to_path_buf(),
        reason: format!("no PEM private key in it: {e}"),
    })
}

/// The certificates of a PEM file as trust anchors.
///
/// # Errors
/// [`TlsError::File`] when it cannot be read or a certificate is not one.
pub fn root_store(path: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in load_certs(path)? {
        roots.add(cert).map_err(|e| TlsError::File {
            path: path.to_path_buf(),
            reason: format!("not a trust anchor: {e}"),
        })?;
    }
    Ok(roots)
}

/// Accepts any certificate the peer presents, checking only that the handshake is signed by
/// its key: Java's `InsecureTrustManagerFactory`.
#[derive(Debug)]
pub struct AnyCertificate {
    /// Checks the handshake signatures.
    pub provider: Arc<CryptoProvider>,
}

impl AnyCertificate {
    /// Checks a handshake signature by `cert`'s key, of TLS 1.3 or 1.2.
    ///
    /// # Errors
    /// A signature that does not check.
    pub fn signature(
        &self,
        tls13: bool,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        if tls13 {
            verify_tls13_signature(message, cert, dss, algorithms)
        } else {
            verify_tls12_signature(message, cert, dss, algorithms)
        }
    }

    /// The signature schemes the provider checks.
    #[must_use]
    pub fn schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signature(false, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signature(true, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes()
    }
}
