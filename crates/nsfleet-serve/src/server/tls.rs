//! TLS for a server reached over the network (`--cert`, `--key`): the certificate and key
//! read from PEM files, and [`Tls`], a connection's stream through rustls that behaves as
//! its socket does, blocking or not, so that every handler (a terminal's non-blocking
//! relay included) runs unchanged over it.
//!
//! It must never report a socket's readiness it does not have: a read that finds nothing
//! decrypted reads the socket, so that "would block" means the socket has nothing, and
//! the relay's `poll` on the socket stays true to the stream.

use super::socket::Socket;
use anyhow::{bail, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The first byte of every TLS connection (a handshake record): a connection that starts
/// otherwise speaks plain HTTP to an HTTPS server, and is told so in plain HTTP.
pub const HANDSHAKE: u8 = 0x16;

/// The server's TLS configuration: the certificate chain of `cert` (leaf first) and the
/// private key of `key`, both PEM, as openssl, certbot and mkcert write them.
pub fn config(cert: &Path, key: &Path) -> anyhow::Result<Arc<ServerConfig>> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("--cert {}: cannot read it", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("--cert {}: not a PEM certificate file", cert.display()))?;
    if chain.is_empty() {
        bail!(
            "--cert {}: no certificate in it (expected a PEM block BEGIN CERTIFICATE)",
            cert.display()
        );
    }
    std::fs::File::open(key).with_context(|| format!("--key {}: cannot read it", key.display()))?;
    let secret = PrivateKeyDer::from_pem_file(key).with_context(|| {
        format!(
            "--key {}: no private key read from it (expected an unencrypted PEM block BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("the TLS library's default protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, secret)
        .with_context(|| {
            format!(
                "--cert {} with --key {}: not a certificate and its key",
                cert.display(),
                key.display()
            )
        })?;
    // One request per connection: HTTP/1.1 alone (a WebSocket is an HTTP/1.1 upgrade).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A connection's stream through TLS. Reads and writes block, or say "would block", as
/// the socket under them does: a write is refused while what earlier ones left is still
/// waiting for the socket, so that rustls holds at most one write's worth, and `flush`
/// says "would block" until the socket has taken everything.
pub struct Tls {
    conn: ServerConnection,
    tcp: Socket,
}

impl Tls {
    pub fn new(config: &Arc<ServerConfig>, tcp: Socket) -> io::Result<Tls> {
        let conn = ServerConnection::new(config.clone()).map_err(io::Error::other)?;
        Ok(Tls { conn, tcp })
    }

    /// Writes what rustls holds to the socket, until it is all out or the socket is full.
    fn push(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.tcp)?;
        }
        Ok(())
    }
}

impl Read for Tls {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                // Zero: the client's close_notify.
                Ok(n) => return Ok(n),
                // Nothing decrypted yet: the socket is read below.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if self.conn.read_tls(&mut self.tcp)? == 0 {
                // The socket's end without a close_notify: the client went away.
                return Ok(0);
            }
            let processed = self.conn.process_new_packets();
            // The handshake's answers, or an alert saying why it failed, go out now; one
            // the socket cannot take at once goes with the next write.
            match self.push() {
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
                _ => {}
            }
            processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        }
    }
}

impl Write for Tls {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push()?;
        let n = self.conn.writer().write(buf)?;
        // As much as the socket takes now; `flush` (or the next write) does the rest.
        match self.push() {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.push()
    }
}

impl Drop for Tls {
    /// The close_notify, so that a stream that ends with its connection (events, a
    /// capture) is read to its end, not as a truncation. Within a second: a client that
    /// reads slowly, or not at all, does not hold the thread.
    fn drop(&mut self) {
        self.conn.send_close_notify();
        let until = Instant::now() + Duration::from_secs(1);
        let _ = self.tcp.tcp().set_nonblocking(false);
        while self.conn.wants_write() {
            let left = until.saturating_duration_since(Instant::now());
            let timeout = self.tcp.tcp().set_write_timeout(Some(left));
            if left.is_zero() || timeout.is_err() || self.conn.write_tls(&mut self.tcp).is_err() {
                break;
            }
        }
    }
}
