//! The images a topology's nodes name, found in nsfleet's image store before anything
//! exists, and pulled from their registries when the store lacks them (as containerlab
//! pulls what Docker lacks): a reference that cannot be parsed or found is an error at the
//! place that names it, and nothing starts. Nothing falls back to the host's software
//! unless the user asked for that (`--host-software`).

use crate::errors::Refused;
use nsfleet::topology::{ImageRoot, Topology, TopologyError};
use nsfleet_image::{Hold, Image, PullOptions, Store};
use std::io::IsTerminal;
use std::path::Path;

/// Gives every node that names an image its image from the store at `store_root` (pulled
/// first if the store lacks it, its progress on stderr), and holds those images (`prune`
/// and `rm` leave them) for as long as the returned hold, or a process it is handed to,
/// lives. `None` when no node names one: the store is not even opened.
pub fn find(topo: &mut Topology, file: &Path, store_root: &Path) -> anyhow::Result<Option<Hold>> {
    if topo.images().is_empty() {
        return Ok(None);
    }
    let store = Store::open(store_root)?;
    let mut ids = Vec::new();
    let found = topo.find_images(|reference| {
        let image = lookup(&store, reference)?;
        ids.push(image.id.clone());
        Ok(root_of(image))
    });
    if let Err(missing) = found {
        let what = format!(
            "fleet {:?} was not started (nothing was created)",
            topo.name
        );
        let file = file.display().to_string();
        let placed = (missing.into_iter())
            .map(|(at, why)| TopologyError::new(&file, at, why))
            .collect();
        return Err(Refused {
            what,
            placed,
            unplaced: Vec::new(),
        }
        .into());
    }
    Ok(Some(store.hold(&format!("fleet {}", topo.name), &ids)?))
}

/// The store's image for `reference`, pulled if it lacks it; or what to do without it.
fn lookup(store: &Store, reference: &str) -> Result<Image, String> {
    match store.find(reference) {
        Ok(Some(image)) => return Ok(image),
        Ok(None) => {}
        Err(e) => return Err(format!("image {reference:?}: {e:#}")),
    }
    let bars = std::io::stderr().is_terminal();
    let pulled = crate::image::pull_one(store, reference, &PullOptions::default(), bars);
    let found = pulled.and_then(|_| store.find(reference));
    match found {
        Ok(Some(image)) => Ok(image),
        Ok(None) => Err(format!("image {reference:?}: pulled, yet not found in the store")),
        Err(e) => Err(format!(
            "image {reference:?} is not in nsfleet's image store ({}), and pulling it failed: {e:#}. Load it with `nsfleet image load FILE` (a `docker save` archive or an OCI layout), or run the host's own software instead with --host-software",
            store.root().display()
        )),
    }
}

/// What a node's world needs of an image, as the topology carries it to the supervisor.
fn root_of(image: Image) -> ImageRoot {
    ImageRoot {
        id: image.id.0,
        layers: (image.layers.iter())
            .map(|l| l.display().to_string())
            .collect(),
        entrypoint: image.run.entrypoint,
        cmd: image.run.cmd,
        env: image.run.env,
        workdir: image.run.workdir,
        user: image.run.user,
    }
}
