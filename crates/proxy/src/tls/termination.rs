//! TLS termination on HTTP listeners and STARTTLS on mail listeners (`tls = …` in a listener): the certificates loaded
//! into a rustls server config per listener, and the SNI resolver that serves each client
//! the first certificate valid for the name it asked for (the first certificate when it
//! asked for none or for a name none covers). Built off the data path, at start and at
//! every reload; a certificate or key that does not load refuses the reload.

use config::{CertKey, Config};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// One acceptor per listener, in config order (`None`: plain HTTP or not an HTTP listener).
pub fn acceptors(config: &Config) -> Result<Vec<Option<TlsAcceptor>>, String> {
    config
        .listeners
        .iter()
        .map(|l| match &l.tls {
            None => Ok(None),
            Some(pairs) => acceptor(pairs, (l.protocol == config::Protocol::Http).then_some(&l.http2.alpn))
                .map(Some)
                .map_err(|e| format!("listener '{}': {e}", l.name)),
        })
        .collect()
}

/// `alpn`: what an HTTP listener offers (`h2`, `http/1.1`, in the listener's order);
/// `None` for mail listeners (STARTTLS clients send no ALPN).
fn acceptor(pairs: &[CertKey], alpn: Option<&Vec<String>>) -> Result<TlsAcceptor, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let keys = pairs.iter().map(|p| certified_key(p, &provider)).collect::<Result<Vec<_>, _>>()?;
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(BySni { keys }));
    // A client that offers none of these gets a handshake failure (RFC 7301 §3.2); one
    // that sends no ALPN at all speaks HTTP/1.1 (or HTTP/2 with prior knowledge).
    if let Some(alpn) = alpn {
        server.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    }
    Ok(TlsAcceptor::from(Arc::new(server)))
}

/// Loads one certificate / key pair as the switch would (PEM parse, key type, key matches
/// certificate): what `cswitch check` asks before `run` would refuse it.
pub fn check_pair(pair: &CertKey) -> Result<(), String> {
    let provider = rustls::crypto::ring::default_provider();
    certified_key(pair, &provider).map(drop)
}

fn certified_key(
    pair: &CertKey,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<Arc<CertifiedKey>, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&pair.cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("{}: {e}", pair.cert.display()))?;
    if chain.is_empty() {
        return Err(format!("{}: no certificate", pair.cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(&pair.key).map_err(|e| format!("{}: {e}", pair.key.display()))?;
    let signing =
        provider.key_provider.load_private_key(key).map_err(|e| format!("{}: {e}", pair.key.display()))?;
    let certified = CertifiedKey::new(chain, signing);
    certified
        .keys_match()
        .map_err(|e| format!("{} does not match {}: {e}", pair.key.display(), pair.cert.display()))?;
    Ok(Arc::new(certified))
}

/// Serves the first certificate valid for the client's SNI, else the first one.
#[derive(Debug)]
struct BySni {
    keys: Vec<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for BySni {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let by_name = hello.server_name().and_then(|name| {
            let name = ServerName::try_from(name).ok()?;
            self.keys.iter().find(|k| valid_for(k, &name))
        });
        by_name.or_else(|| self.keys.first()).cloned()
    }
}

fn valid_for(key: &CertifiedKey, name: &ServerName<'_>) -> bool {
    let Some(leaf) = key.cert.first() else { return false };
    webpki::EndEntityCert::try_from(leaf)
        .is_ok_and(|cert| cert.verify_is_valid_for_subject_name(name).is_ok())
}
