//! A registry on this machine's loopback, for the tests and `nsfleet bench images`: no
//! registry is reachable from them. It is Debian's `docker-registry` (the distribution
//! registry v2) run as a child on 127.0.0.1 at a free port, its storage and
//! configuration in a folder the caller gives, killed and reaped when dropped; images
//! reach it as containerlab users' do, through `skopeo copy`. It never listens beyond
//! loopback and writes only in its folder.

use anyhow::{bail, Context};
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running registry.
pub struct LocalRegistry {
    child: Child,
    port: u16,
    storage: PathBuf,
    log: PathBuf,
}

/// Whether `docker-registry` and `skopeo` are installed; else the names of those missing.
pub fn missing_tools() -> Vec<&'static str> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let installed = |p: &str| std::env::split_paths(&path).any(|d| d.join(p).is_file());
    (["docker-registry", "skopeo"].into_iter())
        .filter(|p| !installed(p))
        .collect()
}

impl LocalRegistry {
    /// A registry storing under `home` (made if missing); with `htpasswd` (the file's
    /// text), one that asks for HTTP basic auth. Returns once `GET /v2/` answers.
    pub fn start(home: &Path, htpasswd: Option<&str>) -> anyhow::Result<LocalRegistry> {
        let storage = home.join("storage");
        fs::create_dir_all(&storage).with_context(|| format!("making {}", storage.display()))?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            storage.display()
        );
        if let Some(text) = htpasswd {
            let file = home.join("htpasswd");
            fs::write(&file, text)?;
            config += &format!(
                "auth:\n  htpasswd:\n    realm: nsfleet\n    path: {}\n",
                file.display()
            );
        }
        let config_file = home.join("config.yml");
        fs::write(&config_file, config)?;
        let log = home.join("log");
        let out = fs::File::create(&log)?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config_file)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("starting docker-registry (apt-get install docker-registry)")?;
        let mut registry = LocalRegistry {
            child,
            port,
            storage,
            log,
        };
        registry.wait_ready()?;
        Ok(registry)
    }

    /// Waits until `GET /v2/` answers (200, or 401 with auth).
    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                bail!("docker-registry exited ({status}): {}", self.log_text());
            }
            if self.answers() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!(
            "docker-registry did not answer in 20 s: {}",
            self.log_text()
        )
    }

    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let ask = format!("GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n\r\n", self.port);
        let mut head = [0u8; 12];
        s.write_all(ask.as_bytes()).is_ok()
            && s.read_exact(&mut head).is_ok()
            && head.starts_with(b"HTTP/1.")
    }

    /// What the registry logged.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `skopeo copy`s the image tagged `tag` in the OCI layout `layout` to `name` here
    /// (`test/app:1`), with `--all` the whole index; the reference to pull it by.
    pub fn push(
        &self,
        layout: &Path,
        tag: &str,
        name: &str,
        creds: Option<&str>,
        all: bool,
    ) -> anyhow::Result<String> {
        let reference = format!("{}/{name}", self.addr());
        let mut cmd = Command::new("skopeo");
        cmd.args([
            "--insecure-policy",
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
        ]);
        if let Some(c) = creds {
            cmd.args(["--dest-creds", c]);
        }
        if all {
            cmd.arg("--all");
        }
        let out = cmd
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{reference}"))
            .stdin(Stdio::null())
            .output()
            .context("running skopeo (apt-get install skopeo)")?;
        if !out.status.success() {
            bail!(
                "skopeo copy to {reference}: {}{}",
                String::from_utf8_lossy(&out.stderr),
                self.log_text()
            );
        }
        Ok(reference)
    }

    /// The file of a blob in the registry's storage.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2.min(hex.len())])
            .join(hex)
            .join("data")
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
