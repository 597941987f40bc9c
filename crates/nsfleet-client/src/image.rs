//! `nsfleet image`: the image store on the client side (`pull`, `load`, `ls`, `rm`,
//! `prune`), printed for people or, with `--json`, for machines, with progress bars for a
//! pull on a terminal. The store itself, the registry protocol, the checks and the
//! unpacking are `nsfleet-image`'s; nothing here touches a node.

use super::human_bytes;
use anyhow::bail;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use nsfleet_image::{ImageRecord, PullOptions, PullProgress, Store};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;

/// The store when neither `--store` nor `$NSFLEET_IMAGES` names one: root's, or the user's
/// (see `Store::default_root`).
pub fn default_store() -> PathBuf {
    Store::default_root()
}

pub struct LoadArgs {
    pub file: PathBuf,
    /// The engine (`docker`, `podman`) that holds `file`, an image's name there.
    pub from: Option<String>,
    pub name: Option<String>,
    pub json: bool,
    pub store: PathBuf,
}

/// Loads an archive's images; progress goes to stderr, the result to stdout.
pub fn load(a: LoadArgs) -> anyhow::Result<()> {
    // A user's store holds files of their subordinate ids: worked on as their root.
    crate::user::become_root_of_own_ids()?;
    let store = Store::open(&a.store)?;
    let mut say = |line: &str| eprintln!("{line}");
    let loaded = match &a.from {
        Some(engine) => {
            let reference = a.file.to_string_lossy();
            store.load_from(nsfleet_image::Engine::parse(engine)?, &reference, &mut say)?
        }
        None => store.load(&a.file, a.name.as_deref(), &mut say)?,
    };
    if a.json {
        println!("{}", serde_json::json!({ "loaded": loaded }));
        return Ok(());
    }
    for r in &loaded {
        print_stored("Loaded", r);
    }
    Ok(())
}

pub struct PullArgs {
    pub references: Vec<String>,
    pub json: bool,
    pub store: PathBuf,
    /// Registries reached over plain HTTP besides the loopback ones.
    pub insecure_registries: Vec<String>,
}

/// Pulls each reference in turn; one that fails does not stop the others, and the command
/// fails after them naming every failure. Progress goes to stderr (bars on a terminal,
/// lines otherwise), the result to stdout.
pub fn pull(a: PullArgs) -> anyhow::Result<()> {
    // A user's store holds files of their subordinate ids: worked on as their root.
    crate::user::become_root_of_own_ids()?;
    let store = Store::open(&a.store)?;
    let opts = PullOptions {
        insecure_registries: a.insecure_registries.clone(),
        ..PullOptions::default()
    };
    let bars = std::io::stderr().is_terminal() && !a.json;
    let pull = |r: &str| pull_one(&store, r, &opts, bars);
    let print = |record: &ImageRecord| print_stored("Pulled", record);
    each_reference(
        &a.references,
        a.json,
        ("pulled", "images not pulled"),
        pull,
        print,
    )
}

/// Does `act` to each reference in turn; one that fails does not stop the others. Each
/// done is printed (or, with `json`, all of them as `{"<key>": [...]}` at the end), and
/// the command fails after them naming every failure ("3 <several>: ...").
fn each_reference<T: serde::Serialize>(
    references: &[String],
    json: bool,
    (key, several): (&str, &str),
    mut act: impl FnMut(&str) -> anyhow::Result<T>,
    print: impl Fn(&T),
) -> anyhow::Result<()> {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for r in references {
        match act(r) {
            Ok(d) => {
                if !json {
                    print(&d);
                }
                done.push(d);
            }
            Err(e) => failed.push(format!("{e:#}")),
        }
    }
    if json {
        println!("{}", serde_json::json!({ key: done }));
    }
    match failed.as_slice() {
        [] => Ok(()),
        [one] => bail!("{one}"),
        failures => bail!("{} {several}:\n  {}", failures.len(), failures.join("\n  ")),
    }
}

/// Pulls `reference` into `store`, its progress on stderr (bars when `bars`).
pub(crate) fn pull_one(
    store: &Store,
    reference: &str,
    opts: &PullOptions,
    bars: bool,
) -> anyhow::Result<ImageRecord> {
    let mut view = PullView::new(bars);
    let result = store.pull(reference, opts, &mut |p| view.show(p));
    view.finish();
    result
}

/// A pull's progress on stderr: a bar per layer being fetched on a terminal, else a line
/// per step (the bytes of a layer are not told line by line).
struct PullView {
    bars: Option<MultiProgress>,
    layers: HashMap<String, ProgressBar>,
}

impl PullView {
    fn new(bars: bool) -> PullView {
        PullView {
            bars: bars.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
            layers: HashMap::new(),
        }
    }

    fn show(&mut self, p: PullProgress) {
        match p {
            PullProgress::Resolved {
                image,
                platform,
                layers,
                bytes,
                ..
            } => {
                let size = human_bytes(bytes as i64);
                let layers = match layers {
                    1 => "1 layer".to_string(),
                    n => format!("{n} layers"),
                };
                self.line(&format!("{image}: {platform}, {layers}, {size}"));
            }
            PullProgress::LayerPresent { digest, .. } => {
                self.line(&format!("{}: already in the store", short(&digest)));
            }
            PullProgress::LayerStarted { digest, size } => self.started(digest, size),
            PullProgress::LayerBytes { digest, done, .. } => {
                if let Some(bar) = self.layers.get(&digest) {
                    bar.set_position(done);
                }
            }
            PullProgress::LayerFetched { digest, size } => {
                if let Some(bar) = self.layers.remove(&digest) {
                    bar.finish_and_clear();
                }
                let size = human_bytes(size as i64);
                self.line(&format!("{}: fetched {size}", short(&digest)));
            }
            PullProgress::Store { line } => self.line(&line),
            // A kind of progress this client does not know yet: nothing to draw.
            _ => {}
        }
    }

    fn started(&mut self, digest: String, size: u64) {
        let Some(multi) = &self.bars else {
            let size = human_bytes(size as i64);
            self.line(&format!("{}: fetching {size}", short(&digest)));
            return;
        };
        let bar = multi.add(ProgressBar::new(size));
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} [{bar:30}] {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(short(&digest).to_string());
        self.layers.insert(digest, bar);
    }

    /// A line above the bars, or on its own.
    fn line(&self, text: &str) {
        match &self.bars {
            Some(multi) => {
                let _ = multi.println(text);
            }
            None => eprintln!("{text}"),
        }
    }

    fn finish(&mut self) {
        // A failed pull leaves bars of layers it did not finish.
        for (_, bar) in self.layers.drain() {
            bar.finish_and_clear();
        }
    }
}

/// The first 12 hex digits of a digest, as Docker shows a layer.
fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    &hex[..hex.len().min(12)]
}

/// `Pulled docker.io/library/alpine:3.20 (3f57d9401f8d, 1 layer, 8.1 MB)` on stdout.
fn print_stored(verb: &str, r: &ImageRecord) {
    let names = if r.names.is_empty() {
        "no name".to_string()
    } else {
        r.names.join(", ")
    };
    let layers = match r.layers.len() {
        1 => "1 layer".to_string(),
        n => format!("{n} layers"),
    };
    let size = human_bytes(r.size as i64);
    println!("{verb} {names} ({}, {layers}, {size})", r.id.short());
}

pub fn ls(store: PathBuf, json: bool) -> anyhow::Result<()> {
    let list = Store::open(&store)?.list()?;
    if json {
        println!("{}", serde_json::json!({ "images": list }));
        return Ok(());
    }
    print_table(&list);
    Ok(())
}

/// One row per name, as `docker images` shows them; an image without a name as `<none>`.
fn print_table(list: &[ImageRecord]) {
    let row = |name: &str, id: &str, arch: &str, layers: &str, size: &str| {
        println!("{name:<48} {id:<12} {arch:<8} {layers:>6} {size:>9}");
    };
    row("NAME", "ID", "ARCH", "LAYERS", "SIZE");
    for r in list {
        let none = ["<none>".to_string()];
        let names = if r.names.is_empty() {
            &none[..]
        } else {
            &r.names[..]
        };
        for n in names {
            let size = human_bytes(r.size as i64);
            row(
                n,
                r.id.short(),
                &r.architecture,
                &r.layers.len().to_string(),
                &size,
            );
        }
    }
}

/// Removes each reference; one that fails does not stop the others, and the command fails
/// after them naming every failure.
pub fn rm(store: PathBuf, references: &[String], json: bool) -> anyhow::Result<()> {
    // A user's store holds files of their subordinate ids: worked on as their root.
    crate::user::become_root_of_own_ids()?;
    let store = Store::open(&store)?;
    let print = |done: &nsfleet_image::Removed| {
        print_removed(&done.names, &done.images, &done.layers, done.bytes_freed)
    };
    let remove = |r: &str| store.remove(r);
    each_reference(
        references,
        json,
        ("removed", "references not removed"),
        remove,
        print,
    )
}

pub fn prune(store: PathBuf, all: bool, json: bool) -> anyhow::Result<()> {
    // A user's store holds files of their subordinate ids: worked on as their root.
    crate::user::become_root_of_own_ids()?;
    let p = Store::open(&store)?.prune(all)?;
    if json {
        println!("{}", serde_json::json!({ "pruned": p }));
        return Ok(());
    }
    let nothing = p.unfinished.is_empty()
        && p.stale_holds == 0
        && p.images.is_empty()
        && p.partials.is_empty();
    if nothing && p.layers.is_empty() {
        println!("Nothing to prune in {}", store.display());
        return Ok(());
    }
    for w in &p.unfinished {
        println!("Swept unfinished work {w} (its writer is gone)");
    }
    if !p.partials.is_empty() {
        println!(
            "Removed {} layer streams kept of dropped transfers",
            p.partials.len()
        );
    }
    if p.stale_holds > 0 {
        println!(
            "Removed {} stale holds (their holders are gone)",
            p.stale_holds
        );
    }
    print_removed(&p.names, &p.images, &p.layers, p.bytes_freed);
    Ok(())
}

fn print_removed(
    names: &[String],
    images: &[nsfleet_image::ImageId],
    layers: &[String],
    bytes: u64,
) {
    for n in names {
        println!("Untagged: {n}");
    }
    for i in images {
        println!("Deleted: {i}");
    }
    if !layers.is_empty() {
        println!(
            "{} layers removed, {} freed",
            layers.len(),
            human_bytes(bytes as i64)
        );
    }
}
