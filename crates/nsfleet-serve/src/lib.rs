//! The lab server: what nsfleet shows of a fleet in a browser. Today `graph`, `nsfleet
//! graph`: a fleet drawn as one self-contained HTML page (or its graph as DOT, Mermaid or
//! JSON, for other tools), from its topology file or from the running fleet, and with
//! `--serve PORT` that page served live, following the fleet's state and events. Next
//! here: `nsfleet serve`, an HTTP API and a browser workbench over running fleets.
//!
//! A front as the others are, a crate of its own on the general client (`nsfleet-client`:
//! `connect`, the run directory's fleets), which never imports it. It reaches a fleet
//! only through its supervisor's control socket: it *never* changes a node, enters or
//! holds a namespace, or starts a process in a fleet, and it *never* listens beyond
//! 127.0.0.1 (a page shows a fleet's addresses and follows its events).

pub mod graph;
pub mod server;
