//! Images a container engine on this machine already holds, taken from it without a
//! registry: the engine writes them as a `docker save` archive (its own `save` command,
//! which reads its own storage) into the store's work area, and the archive is loaded as
//! any other. Nothing of the engine's storage is read or written by nsfleet.

use crate::work::Work;
use crate::{ImageRecord, Store};
use anyhow::{bail, Context};
use std::process::{Command, Stdio};

/// A container engine whose `save` nsfleet runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Docker,
    Podman,
}

impl Engine {
    /// `docker` or `podman`.
    pub fn parse(name: &str) -> anyhow::Result<Engine> {
        match name {
            "docker" => Ok(Engine::Docker),
            "podman" => Ok(Engine::Podman),
            _ => bail!("{name:?}: the engines images are taken from are docker and podman"),
        }
    }

    fn program(self) -> &'static str {
        match self {
            Engine::Docker => "docker",
            Engine::Podman => "podman",
        }
    }

    /// `save` writing `reference` as a docker-archive to `out`.
    fn save(self, reference: &str, out: &std::path::Path) -> Command {
        let mut c = Command::new(self.program());
        c.arg("save");
        if self == Engine::Podman {
            c.args(["--format", "docker-archive"]);
        }
        c.arg("-o").arg(out).arg(reference);
        c
    }
}

impl Store {
    /// Takes `reference` from `engine` (which must hold it) into the store.
    pub fn load_from(
        &self,
        engine: Engine,
        reference: &str,
        progress: &mut dyn FnMut(&str),
    ) -> anyhow::Result<Vec<ImageRecord>> {
        let work = Work::new(&self.tmp())?;
        let archive = work.path().join("image.tar");
        progress(&format!("{} save {reference}", engine.program()));
        let out = (engine.save(reference, &archive))
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {} (is it installed?)", engine.program()))?;
        if !out.status.success() {
            bail!(
                "{} save {reference}: {}",
                engine.program(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        self.load(&archive, Some(reference), progress)
    }
}
