//! The `bird` kind: the host's installed BIRD 2 with the node's own configuration, one
//! daemon, so it takes no `daemons`.

use super::{file, need_config, private, KindParts};
use crate::{FileSource, HostNeed};

/// BIRD in the foreground (`-f`, so that nsfleet watches it), its control socket where
/// `birdc` looks for it (/run/bird/bird.ctl).
pub(super) fn parts(
    config: Option<FileSource>,
    daemons: &[String],
) -> Result<KindParts, (&'static str, String)> {
    let config = need_config("bird", config)?;
    if !daemons.is_empty() {
        return Err((
            "daemons",
            "`daemons` is for kind = \"frr\"; BIRD is one daemon".to_string(),
        ));
    }
    let needs = (["bird", "birdc"].iter())
        .map(|tool| {
            let why = format!("kind = \"bird\" needs BIRD, which is not installed here (no `{tool}` in PATH): apt-get install bird2");
            (HostNeed::Program(tool.to_string()), why)
        })
        .collect();
    Ok(KindParts {
        dirs: vec![
            private("/etc/bird", None, 0o755),
            private("/run/bird", None, 0o755),
        ],
        files: vec![file("/etc/bird/bird.conf", config)],
        commands: vec!["exec bird -f -c /etc/bird/bird.conf".to_string()],
        needs,
        router: true,
    })
}
