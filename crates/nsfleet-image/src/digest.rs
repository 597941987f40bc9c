//! sha256 digests: of whole blobs, and of streams as they are read (a layer's compressed
//! blob and its uncompressed tar are hashed in the one pass that unpacks it).

use anyhow::bail;
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::io::{self, Read};
use std::rc::Rc;

/// `sha256:<hex>` of `bytes`.
pub(crate) fn of_bytes(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The hex digits of a `sha256:<64 hex>` digest, or an error naming `what` it is the
/// digest of: digests become file names in the store, so nothing else is accepted.
pub(crate) fn hex_of<'a>(digest: &'a str, what: &str) -> anyhow::Result<&'a str> {
    let Some(hex) = digest.strip_prefix("sha256:") else {
        bail!("{what}: digest {digest:?} is not sha256, the only algorithm nsfleet checks");
    };
    let lower_hex = hex
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if hex.len() != 64 || !lower_hex {
        bail!("{what}: {digest:?} is not a sha256 digest (64 lowercase hex digits)");
    }
    Ok(hex)
}

/// A running digest, shared between the reader that feeds it and whoever
/// reads the result once the stream is done.
#[derive(Clone, Default)]
pub(crate) struct Meter(Rc<RefCell<Sha256>>);

impl Meter {
    /// `sha256:<hex>` of what went through so far.
    pub fn digest(&self) -> String {
        format!("sha256:{}", hex::encode(self.0.borrow().clone().finalize()))
    }

    /// A reader of `inner` that feeds this meter.
    pub fn reader<R: Read>(&self, inner: R) -> Metered<R> {
        Metered {
            inner,
            meter: self.clone(),
        }
    }
}

/// A reader that hashes what it reads.
pub(crate) struct Metered<R> {
    inner: R,
    meter: Meter,
}

impl<R> Metered<R> {
    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.meter.0.borrow_mut().update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metered_stream_has_the_digest_of_its_bytes() {
        let meter = Meter::default();
        let mut out = Vec::new();
        meter.reader(&b"hello"[..]).read_to_end(&mut out).unwrap();
        assert_eq!(meter.digest(), of_bytes(b"hello"));
    }

    #[test]
    fn only_sha256_digests_become_names() {
        let good = format!("sha256:{}", "a".repeat(64));
        assert_eq!(hex_of(&good, "x").unwrap(), "a".repeat(64));
        assert!(hex_of("sha512:abcd", "x").is_err());
        assert!(hex_of("sha256:../../etc", "x").is_err());
        assert!(hex_of(&format!("sha256:{}", "A".repeat(64)), "x").is_err());
    }
}
