//! `nsfleet netlab`: netlab with nsfleet standing in for containerlab and Docker; and
//! the hidden `nsfleet stand-in TOOL`, which the scripts it puts on netlab's PATH call.

use clap::{Args, ValueEnum};
use nsfleet_netlab::{netlab, standin};
use std::ffi::OsString;
use std::path::PathBuf;

/// Run netlab with nsfleet standing in for containerlab and Docker
///
/// Run netlab (PyPI `networklab`, yours) with nsfleet standing in for containerlab and
/// Docker: `nsfleet netlab up`, `validate`, `connect r1`, `capture r1 eth1`, `status`,
/// `down`, for labs of FRR and Linux nodes (provider clab).
///
/// For this run only, `containerlab`, `docker` and `sudo` on netlab's PATH are nsfleet:
/// `containerlab deploy` is `nsfleet deploy --host-software --netns-names` (nodes run the
/// host's FRR and programs, whatever image netlab names; each node's namespace is named
/// clab-LAB-NODE for `ip netns exec`), `docker exec` is `nsfleet exec`, `docker ps` and
/// `docker stats` read the running labs. A command netlab runs that nsfleet does not
/// answer fails, naming it. Nothing is installed on the host: the stand-ins are scripts
/// in a folder under the run directory, removed when netlab ends (`nsfleet clean --all`
/// removes it if nsfleet netlab was killed). A real Docker or containerlab on the
/// machine is not touched. A LAN's bridge, which netlab makes on the host for
/// containerlab, is a switch of the lab's own: those steps are answered without running
/// them. Not stood in for yet: what netlab does through Ansible (`netlab config`,
/// `collect`). Example: `nsfleet netlab up` in a folder with netlab's topology.yml.
#[derive(Args)]
pub struct NetlabCommand {
    /// Run a netlab of another major version than the one nsfleet answers (26.x).
    #[arg(long)]
    untested_netlab: bool,
    /// netlab's own arguments (`up`, `validate`, `down --cleanup`, ...).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    args: Vec<OsString>,
}

impl NetlabCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let code = netlab::netlab(netlab::NetlabArgs {
            args: self.args,
            untested: self.untested_netlab,
            run_dir,
        })?;
        std::process::exit(code)
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Tool {
    Containerlab,
    Docker,
    Sudo,
}

/// What `nsfleet netlab`'s stand-in scripts call: answers one `containerlab`, `docker`
/// or `sudo` command line as netlab runs it.
#[derive(Args)]
pub struct StandInCommand {
    tool: Tool,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

impl StandInCommand {
    pub fn run(self, run_dir: PathBuf) -> anyhow::Result<()> {
        let tool = match self.tool {
            Tool::Containerlab => standin::Tool::Containerlab,
            Tool::Docker => standin::Tool::Docker,
            Tool::Sudo => standin::Tool::Sudo,
        };
        let code = standin::answer(standin::StandInArgs {
            tool,
            args: self.args,
            run_dir,
        })?;
        std::process::exit(code)
    }
}
