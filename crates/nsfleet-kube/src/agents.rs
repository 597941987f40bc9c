//! The machines nsfleet may use: the nodes where an agent pod runs. Each agent says what
//! its machine can hold and its underlay's MTU in its own pod's annotations; its address
//! is the pod's host IP (the agent runs in the machine's own network namespace). An agent
//! is alive while it renews its Lease (`agent-MACHINE`): not its pod's readiness, which
//! says what the machine's kubelet last said, and stays true while a frozen agent, or a
//! machine cut off with its kubelet, does nothing.

use crate::plan::MachineInfo;
use crate::Error;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The label of the agent's pods (the DaemonSet's selector).
pub const AGENT_LABEL: &str = "app.kubernetes.io/name=nsfleet-agent";
/// Bytes of memory the machine can give fleets, as the agent measured it.
pub const CAPACITY: &str = "nsfleet.dev/capacity";
/// The MTU of the machine's underlay.
pub const MTU: &str = "nsfleet.dev/mtu";
/// Network namespaces the machine may make for fleets, as the agent measured it.
pub const MAX_NODES: &str = "nsfleet.dev/max-nodes";
/// The layers the machine's image store holds: the first [`crate::plan::LAYER_KEY`] hex
/// digits of each diff_id, comma-separated.
pub const LAYERS: &str = "nsfleet.dev/layers";
/// How long an agent's Lease holds without renewal: the time a lost agent or machine
/// takes to be taken for lost.
pub const LEASE_SECONDS: i32 = 15;
/// How often an agent renews it.
pub const RENEW: std::time::Duration = std::time::Duration::from_secs(5);

/// The name of the Lease of `machine`'s agent.
pub fn lease_name(machine: &str) -> String {
    format!("agent-{machine}")
}

#[derive(Clone, Debug)]
pub struct Agent {
    pub pod: String,
    pub machine: String,
    /// Not being deleted, alive (see [`list`]), and has said its capacity.
    pub ready: bool,
    pub info: MachineInfo,
}

/// What one process has seen of each agent's Lease: its last renewTime, and when this
/// process saw it change. An agent is alive while its renewTime moved within the Lease's
/// duration by this process's own clock: no two machines' clocks are compared (as
/// client-go's leader election does). The first sight of a Lease counts as a renewal.
#[derive(Default)]
pub struct Heartbeats {
    /// Machine -> (renewTime as last read, when it was first read so). A leaf lock, held
    /// only to read and update the map.
    seen: std::sync::Mutex<HashMap<String, (String, Instant)>>,
}

impl Heartbeats {
    fn alive(&self, machine: &str, lease: Option<&LeaseSpec>) -> bool {
        let Some((renewed, held)) =
            lease.and_then(|l| Some((l.renew_time.as_ref()?, l.lease_duration_seconds?)))
        else {
            return false;
        };
        let renewed = renewed.0.to_string();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (last, since) = seen
            .entry(machine.to_string())
            .or_insert_with(|| (String::new(), Instant::now()));
        if *last != renewed {
            (*last, *since) = (renewed, Instant::now());
        }
        since.elapsed() < Duration::from_secs(held.max(0) as u64)
    }
}

/// Every agent pod of namespace `system`. With `heartbeats` (the controller's), an agent
/// is ready while its Lease is renewed; without (a user's command, which only needs a pod
/// to exec in), while its pod is Ready.
pub async fn list(
    client: &Client,
    system: &str,
    heartbeats: Option<&Heartbeats>,
) -> Result<Vec<Agent>, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), system);
    let list = pods
        .list(&ListParams::default().labels(AGENT_LABEL))
        .await?;
    let leases = match heartbeats {
        Some(_) => {
            Api::<Lease>::namespaced(client.clone(), system)
                .list(&ListParams::default())
                .await?
                .items
        }
        None => Vec::new(),
    };
    let alive = |pod: &Pod, machine: &str| match heartbeats {
        Some(h) => {
            let lease = (leases.iter()).find(|l| l.name_any() == lease_name(machine));
            h.alive(machine, lease.and_then(|l| l.spec.as_ref()))
        }
        None => (pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
    };
    Ok(list
        .items
        .iter()
        .filter_map(|p| agent_of(p, &alive))
        .collect())
}

fn agent_of(pod: &Pod, alive: &impl Fn(&Pod, &str) -> bool) -> Option<Agent> {
    let machine = pod.spec.as_ref()?.node_name.clone()?;
    let status = pod.status.as_ref();
    let address = status.and_then(|s| s.host_ip.clone()).unwrap_or_default();
    let ready = pod.metadata.deletion_timestamp.is_none() && alive(pod, &machine);
    let annotation = |k: &str| pod.annotations().get(k).and_then(|v| v.parse::<u64>().ok());
    let capacity = annotation(CAPACITY);
    let mtu = annotation(MTU).unwrap_or(1500) as u32;
    Some(Agent {
        pod: pod.name_any(),
        machine: machine.clone(),
        ready: ready && capacity.is_some() && !address.is_empty(),
        info: MachineInfo {
            name: machine,
            address,
            capacity: capacity.unwrap_or(0),
            mtu,
            // An agent that does not say it puts no limit here.
            max_nodes: annotation(MAX_NODES).unwrap_or(u64::MAX),
            layers: (pod.annotations().get(LAYERS).into_iter())
                .flat_map(|v| v.split(','))
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect(),
        },
    })
}
