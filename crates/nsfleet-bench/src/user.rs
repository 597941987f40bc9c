//! `nsfleet bench user`: the same fleets brought up and reclaimed by root and by an
//! ordinary user (a fleet in a user namespace of the user's own, see
//! docs/rootless.md), alternated in the same run: N bare nodes, and N fake routers on a
//! switch with an address each. Up is `nsfleet up`'s wall time, reclaimed `nsfleet
//! down`'s (it returns once the kernel has reclaimed every namespace); the ratios are the
//! user's over root's (the target: within 1.25x).

use super::{emit, machine, need_root, note, versus, Cli, Common, Ratio};
use anyhow::{bail, Context};
use nsfleet_results::{Better, Results};
use std::time::Instant;

pub struct UserArgs {
    /// Node counts, each measured in turn.
    pub counts: Vec<u64>,
    /// The user the user's fleets run as (by name, from /etc/passwd).
    pub user: String,
    pub common: Common,
}

/// What one fleet of a run is made of.
#[derive(Clone, Copy)]
enum Shape {
    /// Bare nodes: a namespace each, loopback up.
    Nodes,
    /// Fake routers on one switch, an address each, forwarding on.
    Routers,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Nodes => "nodes",
            Shape::Routers => "routers",
        }
    }

    /// The fleet's tables, after `[fleet]`.
    fn body(self, count: u64) -> String {
        match self {
            Shape::Nodes => format!("[[node]]\nname = \"n{{i}}\"\ncount = {count}\n"),
            Shape::Routers => format!(
                "[[generate]]\nkind = \"fake-routers\"\ncount = {count}\npool = \"10.0.0.0/12\"\n"
            ),
        }
    }
}

/// One shape's and size's samples over the repetitions: (up, down) seconds of each.
#[derive(Default)]
struct Samples {
    root_up_s: Vec<f64>,
    root_down_s: Vec<f64>,
    user_up_s: Vec<f64>,
    user_down_s: Vec<f64>,
}

pub fn user(a: UserArgs) -> anyhow::Result<()> {
    need_root("user")?;
    let c = &a.common;
    let (uid, gid) = nsfleet::sys::host::user(&a.user)
        .with_context(|| format!("--user {}: no such user in /etc/passwd", a.user))?;
    if uid == 0 {
        bail!("--user {}: that is root; give an ordinary user", a.user);
    }
    let mut counts: Vec<u64> = a.counts.iter().map(|&n| c.size(n, 50)).collect();
    counts.dedup();
    let mut res = Results::new(
        "user",
        machine(),
        serde_json::json!({"counts": counts, "runs": c.repetitions(), "workers": c.workers, "quick": c.quick, "user": a.user, "uid": uid}),
    );
    for &count in &counts {
        for shape in [Shape::Nodes, Shape::Routers] {
            let mut s = Samples::default();
            for r in 0..c.repetitions() {
                note(&format!(
                    "run {}/{}: {count} {}",
                    r + 1,
                    c.repetitions(),
                    shape.name()
                ));
                // Alternated: each first in turn.
                for as_user in [r % 2 == 1, r % 2 == 0] {
                    let who = as_user.then_some((uid, gid));
                    let (up, down) = one(shape, count, c.workers, who)?;
                    let (ups, downs) = match as_user {
                        true => (&mut s.user_up_s, &mut s.user_down_s),
                        false => (&mut s.root_up_s, &mut s.root_down_s),
                    };
                    ups.push(up);
                    downs.push(down);
                }
            }
            metrics(&mut res, &format!("{}_{count}", shape.name()), &s);
        }
    }
    emit(
        &res,
        c,
        &format!("fleets of a user vs root's, up and reclaimed ({counts:?})"),
    )
}

/// One fleet up and reclaimed, by root or (`who`) the user: the seconds of each.
fn one(
    shape: Shape,
    count: u64,
    workers: usize,
    who: Option<(u32, u32)>,
) -> anyhow::Result<(f64, f64)> {
    let cli = match who {
        Some((uid, gid)) => Cli::new()?.run_by(uid, gid)?,
        None => Cli::new()?,
    };
    let t = Instant::now();
    let mut up = cli.up_with(&shape.body(count), workers)?;
    let up_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    up.cli.down()?;
    Ok((up_s, t.elapsed().as_secs_f64()))
}

fn metrics(res: &mut Results, at: &str, s: &Samples) {
    for (what, user, root) in [
        ("up", &s.user_up_s, &s.root_up_s),
        ("down", &s.user_down_s, &s.root_down_s),
    ] {
        let (ours, theirs) = (format!("{at}_user_{what}_s"), format!("{at}_root_{what}_s"));
        let ratio = format!("{at}_{what}_user_vs_root");
        let r = Ratio::OursPerTheirs(&ratio, Better::Lower);
        versus(
            &mut res.metrics,
            "s",
            (Some(&ours), user),
            (Some(&theirs), root),
            r,
        )
        .target = Some("<= 1.25".into());
    }
}
