//! rustls for quinn: TLS 1.3 only, ALPN h3, ring as the crypto provider. The client verifies the server's
//! certificate against the lab CA for the URL's host name (never skipped); both write SSLKEYLOGFILE through
//! rustls's own KeyLogFile when it is set.

use std::sync::Arc;

use quiclab_h3_common::ALPN_H3;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn key_log() -> Arc<dyn rustls::KeyLog> {
    if std::env::var_os("SSLKEYLOGFILE").is_some_and(|p| !p.is_empty()) {
        Arc::new(rustls::KeyLogFile::new())
    } else {
        Arc::new(rustls::NoKeyLog)
    }
}

/// The client's TLS, trusting the CA certificates in `ca` (the lab's: quiclab_h3_common::CA_FILE).
pub fn client(ca: &str) -> Result<QuicClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| format!("{ca}: {e}"))? {
        roots.add(cert.map_err(|e| format!("{ca}: {e}"))?).map_err(|e| format!("{ca}: {e}"))?;
    }
    let mut c = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = vec![ALPN_H3.to_vec()];
    c.key_log = key_log();
    QuicClientConfig::try_from(c).map_err(|e| e.to_string())
}

pub fn server(cert: &str, key: &str) -> Result<QuicServerConfig, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{cert}: {e}"))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{key}: {e}"))?;
    let mut s = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| e.to_string())?;
    s.alpn_protocols = vec![ALPN_H3.to_vec()];
    s.key_log = key_log();
    QuicServerConfig::try_from(s).map_err(|e| e.to_string())
}
