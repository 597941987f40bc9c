//! The lab server: what nsfleet shows of fleets in a browser, and the HTTP API scripts
//! drive them with.
//!
//! - `server`: `nsfleet serve`, one process for every fleet under the run directory: the
//!   workbench page (the live graph, a terminal per node, a link's panel, node actions,
//!   events, the topology with its dry run) and the API it is built on, `/api/v1`
//!   (described by `server/openapi.json`), behind a token and checks of Host and Origin.
//! - `graph`: `nsfleet graph`, a fleet drawn as one self-contained HTML page (or DOT,
//!   Mermaid, JSON), from its topology file or the running fleet, and `--serve PORT`,
//!   that page alone, live.
//!
//! A front as the others are, a crate of its own on the general client (`nsfleet-client`),
//! which never imports it. It reaches a fleet only through its supervisor's control
//! socket and the `nsfleet` command: it *never* enters or holds a namespace itself (a
//! terminal's shell and a capture are `nsfleet exec` and `nsfleet capture`, run as its
//! children and ended with their client), and it *never* listens beyond a loopback
//! address without TLS.

pub mod graph;
pub mod server;
