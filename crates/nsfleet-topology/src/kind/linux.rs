//! The `linux` kind: a node that runs its own `commands` and nothing else, so it takes
//! neither `config` nor `daemons`.

use super::KindParts;
use crate::FileSource;

pub(super) fn parts(
    config: Option<FileSource>,
    daemons: &[String],
) -> Result<KindParts, (&'static str, String)> {
    if config.is_some() || !daemons.is_empty() {
        let key = if config.is_some() {
            "config"
        } else {
            "daemons"
        };
        return Err((
            key,
            format!("`{key}` is for kind = \"frr\" or \"bird\"; a linux node runs its `commands`"),
        ));
    }
    Ok(KindParts::default())
}
