//! Registry credentials as `docker login` saves them: in Docker's config file
//! (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`), either with the credential
//! helper it names for the registry (`credHelpers`, else `credsStore`: the program
//! `docker-credential-NAME`, asked as Docker asks it), or in its `auths`, each entry's
//! `auth` the base64 of `user:password`. Docker Hub's entry is under
//! `https://index.docker.io/v1/`.
//!
//! It never writes, and never runs a helper for a config given as text (a cluster's pull
//! Secret, which carries `auths` only). Credentials it finds but cannot use (an
//! `identitytoken` alone) are said in `unused`, so that a refused pull can tell why.

use anyhow::Context;
use base64::Engine;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// How a pull logs in to one registry.
pub(crate) struct Login {
    pub auth: RegistryAuth,
    /// Where the credentials came from (`/root/.docker/config.json, entry "ghcr.io"`);
    /// None when the pull is anonymous.
    pub from: Option<String>,
    /// Why credentials the file has for this registry are not used, if it has some.
    pub unused: Option<String>,
}

#[derive(Deserialize, Default)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

/// Docker's config file: `$DOCKER_CONFIG/config.json`, else `$HOME/.docker/config.json`.
pub(crate) fn default_config_path() -> Option<PathBuf> {
    let dir = match std::env::var_os("DOCKER_CONFIG") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(std::env::var_os("HOME")?).join(".docker"),
    };
    Some(dir.join("config.json"))
}

/// The login for `registry` (`127.0.0.1:5000`, `docker.io`) from the config file at
/// `path`: anonymous when the file or its entry is missing; an error when the file cannot
/// be read or is not Docker's JSON.
pub(crate) fn login_for(registry: &str, path: Option<&Path>) -> anyhow::Result<Login> {
    let Some(path) = path else {
        return Ok(Login::anonymous());
    };
    match read_config(path)? {
        Some(text) => login_from(registry, &text, &path.display().to_string(), true),
        None => Ok(Login::anonymous()),
    }
}

/// The config file's bytes; None when there is no such file.
fn read_config(path: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

impl Login {
    fn anonymous() -> Login {
        Login {
            auth: RegistryAuth::Anonymous,
            from: None,
            unused: None,
        }
    }
}

/// The login for `registry` from a config file's `text`, called `called` in messages:
/// its helper's for the registry first, if it names one and `helpers` are run (as Docker
/// does), else its `auths` entry.
pub(crate) fn login_from(
    registry: &str,
    text: &[u8],
    called: &str,
    helpers: bool,
) -> anyhow::Result<Login> {
    let anonymous = Login::anonymous();
    let config: DockerConfig = serde_json::from_slice(text)
        .with_context(|| format!("{called} is not a Docker config file"))?;
    let helper = helpers.then(|| helper_of(&config, registry)).flatten();
    if let Some(helper) = helper {
        if let Some((user, password)) = ask_helper(helper, registry, called)? {
            return Ok(Login {
                auth: RegistryAuth::Basic(user, password),
                from: Some(format!("{called}, helper docker-credential-{helper}")),
                unused: None,
            });
        }
    }
    let Some((key, entry)) = config
        .auths
        .iter()
        .find(|(k, _)| same_registry(k, registry))
    else {
        return Ok(anonymous);
    };
    let from = format!("{called}, entry {key:?}");
    match user_password(entry) {
        Some((user, password)) => Ok(Login {
            auth: RegistryAuth::Basic(user, password),
            from: Some(from),
            unused: None,
        }),
        None => Ok(Login {
            unused: Some(unusable(entry, &from)),
            ..anonymous
        }),
    }
}

/// The credentials Docker's config file (at `path`, else its default place) has for the
/// registries of `references`, as a config file of their own: only those registries'
/// entries of `auths`, so that a cluster's pull Secret carries no other registry's, and a
/// helper's credentials written as such an entry (the machines run no helper). None when
/// it has none for them (or there is no such file).
pub fn pull_credentials_for(
    references: &[String],
    path: Option<&Path>,
) -> anyhow::Result<Option<String>> {
    let Some(path) = path.map(Path::to_path_buf).or_else(default_config_path) else {
        return Ok(None);
    };
    let Some(text) = read_config(&path)? else {
        return Ok(None);
    };
    let called = path.display().to_string();
    let config: serde_json::Value = serde_json::from_slice(&text)
        .with_context(|| format!("{called} is not a Docker config file"))?;
    let mut registries = Vec::new();
    for r in references {
        registries.push(crate::reference::parse(r)?.resolve_registry().to_string());
    }
    // Each registry's helper asked once, whatever the number of its images.
    registries.sort();
    registries.dedup();
    let mut auths = (config["auths"].as_object().into_iter().flatten())
        .filter(|(key, _)| registries.iter().any(|r| same_registry(key, r)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect::<serde_json::Map<_, _>>();
    let helpers: DockerConfig = serde_json::from_value(config.clone())
        .with_context(|| format!("{called} is not a Docker config file"))?;
    for registry in &registries {
        let Some(helper) = helper_of(&helpers, registry) else {
            continue;
        };
        if let Some((user, password)) = ask_helper(helper, registry, &called)? {
            auths.retain(|key, _| !same_registry(key, registry));
            let auth =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            auths.insert(
                server_address(registry),
                serde_json::json!({ "auth": auth }),
            );
        }
    }
    if auths.is_empty() {
        return Ok(None);
    }
    Ok(Some(serde_json::json!({ "auths": auths }).to_string()))
}

/// A config entry's user and password: its `auth` (base64 of `user:password`), or
/// `username` and `password` as some tools write them.
fn user_password(entry: &AuthEntry) -> Option<(String, String)> {
    if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (user, password) = text.split_once(':')?;
        return Some((user.to_string(), password.to_string()));
    }
    Some((entry.username.clone()?, entry.password.clone()?))
}

/// Why an entry without a usable user and password is not used.
fn unusable(entry: &AuthEntry, from: &str) -> String {
    if entry.identitytoken.is_some() {
        format!("{from} has only an identitytoken (an OAuth refresh token), which nsfleet does not use: log in with a user and password or an access token")
    } else {
        format!("{from} has no user and password nsfleet can read (its auth is not base64 of user:password)")
    }
}

/// The credential helper the config names for this registry: its own (`credHelpers`),
/// else the config's (`credsStore`).
fn helper_of<'a>(config: &'a DockerConfig, registry: &str) -> Option<&'a str> {
    let helper = config
        .cred_helpers
        .iter()
        .find(|(k, _)| same_registry(k, registry))
        .map(|(_, h)| h)
        .or(config.creds_store.as_ref())?;
    Some(helper.as_str()).filter(|h| !h.is_empty())
}

/// What a credential helper says when it has nothing for a server (Docker's words).
const HELPER_HAS_NONE: &str = "credentials not found in native keychain";

/// `registry`'s user and password as credential helper `docker-credential-HELPER` (named
/// by the config `called`) keeps them, asked as Docker asks: `get`, the server's address
/// on its standard input, JSON on its standard output. None when it has none; an error
/// when it cannot be run, fails, or keeps a token nsfleet cannot use.
fn ask_helper(
    helper: &str,
    registry: &str,
    called: &str,
) -> anyhow::Result<Option<(String, String)>> {
    let program = format!("docker-credential-{helper}");
    let named = || format!("{program} (the credential helper {called} names for {registry})");
    let out = run_helper(&program, &server_address(registry))
        .with_context(|| format!("cannot run {}", named()))?;
    let Some(out) = out else {
        anyhow::bail!(
            "{} did not answer within {} s (is it waiting for a keychain to be unlocked?)",
            named(),
            HELPER_BOUND.as_secs()
        );
    };
    let said = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        if said.trim() == HELPER_HAS_NONE {
            return Ok(None);
        }
        let why = [said.trim(), String::from_utf8_lossy(&out.stderr).trim()].join(" ");
        let why: String = why.trim().chars().take(400).collect();
        anyhow::bail!("{} failed ({}): {why}", named(), out.status);
    }
    #[derive(Deserialize)]
    struct Said {
        #[serde(rename = "Username")]
        username: String,
        #[serde(rename = "Secret")]
        secret: String,
    }
    let got: Said = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "{} answered what is not Docker's JSON (Username, Secret)",
            named()
        )
    })?;
    if got.username.is_empty() && got.secret.is_empty() {
        return Ok(None);
    }
    // Docker's mark of an identity token (an OAuth refresh token) in the Secret.
    if got.username == "<token>" {
        anyhow::bail!("{} keeps an identity token for {registry}, which nsfleet does not use: log in with a user and password or an access token", named());
    }
    Ok(Some((got.username, got.secret)))
}

/// How long a credential helper may take: one waiting on a locked keychain's prompt is
/// killed, and said.
const HELPER_BOUND: std::time::Duration = std::time::Duration::from_secs(60);
/// The most of each of a helper's outputs that is read.
const HELPER_SAYS: u64 = 64 << 10;

/// Runs `program get` with `server` on its standard input: its status and outputs (each
/// at most [`HELPER_SAYS`]), or None when it did not end within [`HELPER_BOUND`] (it
/// is killed then).
fn run_helper(program: &str, server: &str) -> io::Result<Option<std::process::Output>> {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // A helper that ends before reading its input says why on its output.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(server.as_bytes());
    }
    fn reader(from: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut said = Vec::new();
            if let Some(from) = from {
                let _ = from.take(HELPER_SAYS).read_to_end(&mut said);
            }
            said
        })
    }
    let (stdout, stderr) = (reader(child.stdout.take()), reader(child.stderr.take()));
    let until = std::time::Instant::now() + HELPER_BOUND;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if std::time::Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            // Its readers end with its pipes (or with a child of its that holds them).
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let joined = |h: std::thread::JoinHandle<Vec<u8>>| h.join().unwrap_or_default();
    Ok(Some(std::process::Output {
        status,
        stdout: joined(stdout),
        stderr: joined(stderr),
    }))
}

/// A registry as Docker names it to helpers and in `auths`: Docker Hub by its old v1
/// address, the others by host (and port).
fn server_address(registry: &str) -> String {
    match same_registry(registry, "docker.io") {
        true => "https://index.docker.io/v1/".to_string(),
        false => registry.to_string(),
    }
}

/// Whether a config key names `registry`. Keys are written as Docker writes them: a host
/// with a port, sometimes with a scheme and a path (`https://index.docker.io/v1/`).
fn same_registry(key: &str, registry: &str) -> bool {
    let host = |s: &str| {
        let s = s
            .trim_start_matches("https://")
            .trim_start_matches("http://");
        let s = s.split('/').next().unwrap_or(s);
        match s {
            "docker.io" | "index.docker.io" | "registry-1.docker.io" => "docker.io".to_string(),
            other => other.to_ascii_lowercase(),
        }
    };
    host(key) == host(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_hub_is_its_v1_key() {
        assert!(same_registry("https://index.docker.io/v1/", "docker.io"));
        assert!(same_registry("127.0.0.1:5000", "127.0.0.1:5000"));
        assert!(same_registry("http://127.0.0.1:5000", "127.0.0.1:5000"));
        assert!(!same_registry("127.0.0.1:5000", "127.0.0.1:5001"));
        assert!(!same_registry("ghcr.io", "docker.io"));
    }

    #[test]
    fn a_pull_secret_carries_only_the_entries_of_the_images_registries() {
        let dir = std::env::temp_dir().join(format!("nsfleet-creds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.json");
        let config = r#"{"auths": {"10.0.0.1:5000": {"auth": "dTpw"}, "https://index.docker.io/v1/": {"auth": "b"}, "ghcr.io": {"auth": "c"}}, "credHelpers": {"quay.io": "nsfleet-test-absent"}}"#;
        std::fs::write(&file, config).unwrap();
        let refs = [
            "10.0.0.1:5000/lab/app:1".to_string(),
            "alpine:3.20".to_string(),
        ];
        let text = pull_credentials_for(&refs, Some(&file)).unwrap().unwrap();
        let kept: serde_json::Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&String> = kept["auths"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["10.0.0.1:5000", "https://index.docker.io/v1/"]);
        assert!(!text.contains("credHelpers"), "{text}");
        let none = pull_credentials_for(&["k8s.io/x/y:1".to_string()], Some(&file)).unwrap();
        assert_eq!(none, None);
        // A helper the config names for a registry, not installed: said, not passed over.
        let e = pull_credentials_for(&["quay.io/x/y:1".to_string()], Some(&file)).unwrap_err();
        assert!(
            format!("{e:#}").contains(
                "cannot run docker-credential-nsfleet-test-absent (the credential helper"
            ),
            "{e:#}"
        );
        let login = login_from("10.0.0.1:5000", text.as_bytes(), "the Secret", false).unwrap();
        assert!(login.from.unwrap().starts_with("the Secret, entry"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn auth_is_base64_of_user_and_password() {
        let entry = AuthEntry {
            auth: Some("dXNlcjpwYTpzcw==".into()), // user:pa:ss
            ..AuthEntry::default()
        };
        assert_eq!(user_password(&entry), Some(("user".into(), "pa:ss".into())));
        let token_only = AuthEntry {
            identitytoken: Some("t".into()),
            ..AuthEntry::default()
        };
        assert_eq!(user_password(&token_only), None);
        assert!(unusable(&token_only, "f").contains("identitytoken"));
    }
}
