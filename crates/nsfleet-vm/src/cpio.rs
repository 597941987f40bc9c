//! The initramfs format the kernel unpacks (cpio "newc", uncompressed): directories and
//! files with their modes, and the trailer. Bytes only.

/// An archive being written.
#[derive(Default)]
pub struct Cpio {
    bytes: Vec<u8>,
    inode: u32,
}

impl Cpio {
    pub fn dir(&mut self, path: &str) {
        self.entry(path, 0o040755, &[]);
    }

    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) {
        self.entry(path, 0o100000 | mode, data);
    }

    fn entry(&mut self, path: &str, mode: u32, data: &[u8]) {
        self.inode += 1;
        let name_len = path.len() + 1;
        let fields = [
            self.inode,
            mode,
            0,
            0,
            1,
            0,
            data.len() as u32,
            0,
            0,
            0,
            0,
            name_len as u32,
            0,
        ];
        self.bytes.extend_from_slice(b"070701");
        for f in fields {
            self.bytes.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(path.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        self.bytes.resize(self.bytes.len().next_multiple_of(4), 0);
    }

    /// The archive, with its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_newc_headers_padded_to_four_bytes() {
        let mut c = Cpio::default();
        c.dir("bin");
        c.file("init", 0o755, b"#!/bin/sh\n");
        let b = c.finish();
        assert!(b.starts_with(b"070701"));
        assert_eq!(b.len() % 4, 0);
        let text = String::from_utf8_lossy(&b);
        assert_eq!(text.matches("070701").count(), 3);
        assert!(text.contains("TRAILER!!!"));
        // The file's header: mode 100755, size 10.
        let at = text.find("init").unwrap() - 110;
        assert_eq!(&text[at + 14..at + 22], "000081ed");
        assert_eq!(&text[at + 54..at + 62], "0000000a");
    }
}
