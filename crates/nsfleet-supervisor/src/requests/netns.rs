//! `exec` (and everything that enters a node): a node's namespace, or its world's init
//! as a pidfd, passed over the socket.

use crate::control::{self, Reply};
use crate::Supervisor;
use nsfleet_core::Node;
use nsfleet_subsys::process::Procs;
use nsfleet_sys as sys;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;

impl Supervisor {
    pub(super) fn send_netns(&self, conn: &UnixStream, node: &str) -> std::io::Result<()> {
        let nodes = self.fleet.nodes();
        let world = |n: &Node| n.inspect::<Procs, _>(self.defaults.process, Procs::world_pidfd);
        // An Open vSwitch switch lives in its hub's world.
        let world =
            |n: &Node| (world(n).flatten()).or_else(|| n.host().and_then(|h| world(&h).flatten()));
        let found = nodes.find(node).map(|n| match world(n) {
            Some(pidfd) => (n, Some(pidfd), true),
            None => (n, n.dup_netns(), false),
        });
        let restrictions = |n: &Node| {
            let of =
                |n: &Node| n.inspect::<Procs, _>(self.defaults.process, Procs::world_restrictions);
            (of(n).flatten()).or_else(|| n.host().and_then(|h| of(&h).flatten()))
        };
        match found {
            Some((n, Some(fd), world)) => {
                let mut line = serde_json::to_vec(&Reply::Netns {
                    node: node.into(),
                    inode: n.inode(),
                    world,
                    env: nsfleet_subsys::process::environment(n, &self.name),
                    image: n.config().image.as_ref().map(|i| control::ExecIn {
                        workdir: i.workdir().map(String::from),
                        user: i.user().map(String::from),
                    }),
                    ovs_bridge: (n.config().ovs.is_some())
                        .then(|| nsfleet_subsys::ovs::bridge_name(n).to_string()),
                    restrictions: restrictions(n).unwrap_or_default(),
                })?;
                line.push(b'\n');
                sys::send_with_fd(conn.as_fd(), &line, fd.as_fd())
            }
            Some((_, None, _)) => control::write_line(
                conn,
                &Reply::error(format!(
                    "node {node:?} of fleet {:?} is being torn down",
                    self.name
                )),
            ),
            None => {
                let message = match self.known_node(node) {
                    Err(e) => format!("{e:#}"),
                    Ok(_) => format!("fleet {:?} has no node {node:?}", self.name),
                };
                control::write_line(conn, &Reply::error(message))
            }
        }
    }
}
