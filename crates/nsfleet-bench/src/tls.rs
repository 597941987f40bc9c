//! HTTPS for the lab server's clients here (`bench serve`) and in the suite: a
//! certificate made as a user makes one (openssl: a CA of its own and a leaf it signs),
//! and a TLS client that trusts that CA alone. Never a verifier that trusts anything.

use anyhow::{bail, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A client's end of a TLS connection over TCP.
pub type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A server's certificate and key (PEM files), and the CA that signed it.
#[derive(Clone)]
pub struct Certificate {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Certificate {
    /// A certificate for `names` (`DNS:lab.test,IP:10.77.0.1`), signed by a CA made here
    /// too, their files in `dir` (Debian's openssl).
    pub fn make(dir: &Path, names: &str) -> anyhow::Result<Certificate> {
        std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
        let file = |name: &str| dir.join(name).display().to_string();
        let (ca, cert, key) = (file("ca.pem"), file("cert.pem"), file("key.pem"));
        let (ca_key, csr, ext) = (file("ca.key"), file("leaf.csr"), file("ext.cnf"));
        std::fs::write(&ext, format!("subjectAltName={names}\n"))?;
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
        for step in [
            format!("req -x509 {ec} -days 1 -subj /CN=nsfleet-test-ca -keyout {ca_key} -out {ca}"),
            format!("req {ec} -subj /CN=nsfleet-test -keyout {key} -out {csr}"),
            format!(
                "x509 -req -in {csr} -CA {ca} -CAkey {ca_key} -days 1 -extfile {ext} -out {cert}"
            ),
        ] {
            let made = (std::process::Command::new("openssl").args(step.split(' ')))
                .output()
                .context("running openssl (Debian's package openssl)")?;
            if !made.status.success() {
                let said = String::from_utf8_lossy(&made.stderr);
                bail!("openssl {step}: {said}");
            }
        }
        Ok(Certificate {
            ca: ca.into(),
            cert: cert.into(),
            key: key.into(),
        })
    }

    /// A TLS connection over `tcp` to the server named `name` (as its certificate names
    /// it), trusting this CA alone.
    pub fn connect(&self, name: &str, tcp: TcpStream) -> anyhow::Result<TlsStream> {
        let pem = std::fs::read(&self.ca).with_context(|| format!("{}", self.ca.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&pem) {
            roots.add(c?)?;
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = name.to_string().try_into()?;
        let conn = rustls::ClientConnection::new(Arc::new(config), name)?;
        Ok(rustls::StreamOwned::new(conn, tcp))
    }
}
