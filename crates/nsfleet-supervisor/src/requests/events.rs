//! `events`: a new watcher of the fleet.

use crate::Supervisor;
use std::os::unix::net::UnixStream;

impl Supervisor {
    /// A new watcher, between changes: its sockets in the nodes would keep a node that
    /// `apply` removes from being reclaimed.
    pub(super) fn subscribe(&self, conn: &UnixStream) -> anyhow::Result<()> {
        let _between = self.changes.lock();
        self.watchers.subscribe(conn, &self.fleet)
    }
}
