//! Headless Chromium driven over its DevTools protocol (a WebSocket): one page, opened at
//! a URL, whose expressions are evaluated and whose keys are typed as a person types
//! them. For the lab server's bench (a page's first render) and its browser test.

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// Headless Chromium whose every file is in `profile`, a folder of the caller's (made
/// here): its profile, and what it writes beside it: its singleton socket's folder (in
/// TMPDIR), its crash reports and caches (under HOME). Removing the folder removes it
/// all, even after Chromium was killed, and nothing of the user's home is touched. Its
/// socket's path, `PROFILE/t/org.chromium.Chromium.XXXXXX/SingletonSocket`, must fit in
/// a socket address's 108 bytes: `profile` within about 60.
pub fn headless(profile: &Path) -> std::io::Result<Command> {
    let (tmp, home) = (profile.join("t"), profile.join("home"));
    std::fs::create_dir_all(&tmp)?;
    std::fs::create_dir_all(&home)?;
    let mut chromium = Command::new("chromium");
    chromium
        .arg(format!(
            "--user-data-dir={}",
            profile.join("data").display()
        ))
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .env("TMPDIR", tmp)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"));
    Ok(chromium)
}

/// One Chromium with one page; killed when dropped.
pub struct Browser {
    child: Child,
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next: u64,
}

impl Browser {
    /// Chromium started with its profile in `profile` (a folder of the caller's, made
    /// here), its page at `url`.
    pub fn open(url: &str, profile: &Path) -> anyhow::Result<Browser> {
        Browser::open_with(url, profile, &[])
    }

    /// [`Browser::open`] with more of Chromium's flags (a certificate's key trusted).
    pub fn open_with(url: &str, profile: &Path, flags: &[&str]) -> anyhow::Result<Browser> {
        let mut child = headless(profile)?
            .arg("--window-size=1500,900")
            .args(flags)
            .args(["--remote-debugging-port=0", "about:blank"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("running chromium (Debian's package chromium)")?;
        let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
        let devtools = loop {
            let line = lines
                .next()
                .ok_or_else(|| anyhow!("chromium ended before its DevTools listened"))??;
            if let Some(url) = line.strip_prefix("DevTools listening on ") {
                break url.to_string();
            }
        };
        // The rest of what it says is read, so that it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let (ws, _) = tungstenite::connect(devtools)?;
        let mut b = Browser {
            child,
            ws,
            session: String::new(),
            next: 0,
        };
        let target = b.call("Target.createTarget", json!({ "url": url }))?;
        let attach = json!({ "targetId": target["targetId"], "flatten": true });
        let session = b.call("Target.attachToTarget", attach)?["sessionId"].clone();
        b.session = session.as_str().unwrap_or_default().to_string();
        Ok(b)
    }

    /// A DevTools command, in the page's session once there is one; its result.
    pub fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next += 1;
        let mut m = json!({ "id": self.next, "method": method, "params": params });
        if !self.session.is_empty() {
            m["sessionId"] = self.session.clone().into();
        }
        self.ws.send(Message::text(m.to_string()))?;
        loop {
            let Message::Text(t) = self.ws.read()? else {
                continue;
            };
            let v: Value = serde_json::from_str(&t)?;
            if v["id"] == self.next {
                if !v["error"].is_null() {
                    bail!("{method}: {}", v["error"]);
                }
                return Ok(v["result"].clone());
            }
        }
    }

    /// A JavaScript expression's value in the page (a promise's, once settled).
    pub fn eval(&mut self, expression: &str) -> anyhow::Result<Value> {
        let params =
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true });
        let r = self.call("Runtime.evaluate", params)?;
        if !r["exceptionDetails"].is_null() {
            bail!("{expression}: {}", r["exceptionDetails"]);
        }
        Ok(r["result"]["value"].clone())
    }

    /// Waits up to `within` until `expression` is true in the page (what it reads may not
    /// exist yet: an exception counts as false); says what the page shows otherwise.
    pub fn wait(&mut self, what: &str, expression: &str, within: Duration) -> anyhow::Result<()> {
        let guarded =
            format!("(() => {{ try {{ return {expression}; }} catch (e) {{ return false; }} }})()");
        let deadline = Instant::now() + within;
        while self.eval(&guarded)? != json!(true) {
            if Instant::now() > deadline {
                let seen =
                    self.eval("document.body ? document.body.innerText.slice(0, 2000) : ''")?;
                bail!("{what}: not seen in {within:?}; the page shows: {seen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// `text` typed into what has the focus, then Enter, as a person types them.
    pub fn type_line(&mut self, text: &str) -> anyhow::Result<()> {
        self.call("Input.insertText", json!({ "text": text }))?;
        for kind in ["keyDown", "keyUp"] {
            let enter = json!({ "type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r" });
            self.call("Input.dispatchKeyEvent", enter)?;
        }
        Ok(())
    }

    /// The page as a PNG.
    pub fn screenshot(&mut self) -> anyhow::Result<Vec<u8>> {
        use base64::Engine;
        let shot = self.call("Page.captureScreenshot", json!({ "format": "png" }))?;
        let data = shot["data"]
            .as_str()
            .ok_or_else(|| anyhow!("no screenshot"))?;
        Ok(base64::engine::general_purpose::STANDARD.decode(data)?)
    }

    /// Goes to `url` in the same page.
    pub fn navigate(&mut self, url: &str) -> anyhow::Result<()> {
        self.call("Page.navigate", json!({ "url": url })).map(drop)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
