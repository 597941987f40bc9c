//! `gen`: the traffic generator's commands.

use crate::control::Reply;
use crate::Supervisor;
use nsfleet_traffic::Command;

impl Supervisor {
    pub(super) fn gen(&self, commands: &[Command], threads: Option<usize>, sink: bool) -> Reply {
        if *self.state.lock() != "up" {
            return Reply::error(format!("fleet {:?} is not up", self.name));
        }
        match (self.traffic.lock()).apply(&self.fleet, commands, threads, sink) {
            Ok(r) => Reply::Gen(r),
            Err(e) => Reply::failure(&e),
        }
    }
}
