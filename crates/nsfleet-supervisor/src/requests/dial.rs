//! `dial`: a connection to a published port, made in the fleet's own namespace and passed
//! over the socket. A user's fleet lives in a network namespace of its own, where its
//! ports are published (the `ports` subsystem's rules); its forwarder listens on the
//! host's ports, where the fleet is not, and splices what it accepts to these.

use crate::control::{self, Reply};
use crate::Supervisor;
use nsfleet_sys as sys;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// How long a dial may take: a node that does not answer is the client's to see.
const PATIENCE: Duration = Duration::from_secs(5);

impl Supervisor {
    pub(super) fn dial(&self, conn: &UnixStream, port: u16) -> std::io::Result<()> {
        let published = (self.fleet.nodes().iter()).any(|n| {
            (n.config().ports.iter())
                .any(|p| p.host_port == port && p.proto == nsfleet_topology::Proto::Tcp)
        });
        if !published {
            let message = format!("fleet {:?} publishes no TCP port {port}", self.name);
            return control::write_line(conn, &Reply::error(message));
        }
        // The fleet's own connection to its own port: the `ports` rules' output chain
        // takes it to the node, as they take the host's own connections in root's.
        let to = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        match std::net::TcpStream::connect_timeout(&to, PATIENCE) {
            Ok(s) => {
                let mut line = serde_json::to_vec(&Reply::Dialed { port })?;
                line.push(b'\n');
                sys::send_with_fd(conn.as_fd(), &line, s.as_fd())
            }
            Err(e) => {
                let message = format!("port {port} of fleet {:?}: {e}", self.name);
                control::write_line(conn, &Reply::error(message))
            }
        }
    }
}
