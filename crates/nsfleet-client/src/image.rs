//! `nsfleet image`: the image store on the client side (`load`, `ls`, `rm`, `prune`),
//! printed for people or, with `--json`, for machines. The store itself, its checks and
//! its unpacking are `nsfleet-image`'s; nothing here touches a node.

use super::human_bytes;
use anyhow::bail;
use nsfleet_image::{ImageRecord, Store};
use std::path::PathBuf;

/// The store when neither `--store` nor `$NSFLEET_IMAGES` names one.
pub const DEFAULT_STORE: &str = nsfleet_image::DEFAULT_ROOT;

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
        println!("Loaded {names} ({}, {layers}, {size})", r.id.short());
    }
    Ok(())
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
    let store = Store::open(&store)?;
    let mut removed = Vec::new();
    let mut failed = Vec::new();
    for r in references {
        match store.remove(r) {
            Ok(done) => {
                if !json {
                    print_removed(&done.names, &done.images, &done.layers, done.bytes_freed);
                }
                removed.push(done);
            }
            Err(e) => failed.push(format!("{e:#}")),
        }
    }
    if json {
        println!("{}", serde_json::json!({ "removed": removed }));
    }
    match failed.as_slice() {
        [] => Ok(()),
        [one] => bail!("{one}"),
        several => bail!(
            "{} references not removed:\n  {}",
            several.len(),
            several.join("\n  ")
        ),
    }
}

pub fn prune(store: PathBuf, all: bool, json: bool) -> anyhow::Result<()> {
    let p = Store::open(&store)?.prune(all)?;
    if json {
        println!("{}", serde_json::json!({ "pruned": p }));
        return Ok(());
    }
    let nothing = p.unfinished.is_empty() && p.stale_holds == 0 && p.images.is_empty();
    if nothing && p.layers.is_empty() {
        println!("Nothing to prune in {}", store.display());
        return Ok(());
    }
    for w in &p.unfinished {
        println!("Swept unfinished work {w} (its writer is gone)");
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
