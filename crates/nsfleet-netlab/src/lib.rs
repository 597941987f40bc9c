//! netlab's front: `nsfleet netlab ARGS` runs the user's own netlab (PyPI `networklab`)
//! with nsfleet standing in for the `containerlab`, `docker` and `sudo` it calls
//! ([`netlab`]), and `nsfleet stand-in TOOL` answers each of those tools' command lines
//! ([`standin`]) with containerlab's front (nsfleet-clab) and the general client's
//! commands.
//!
//! It never installs anything on the host or touches a real Docker or containerlab, and
//! never answers a command it does not stand in for: it refuses it by name. The general
//! client never imports it.

pub mod netlab;
pub mod standin;
mod state;
