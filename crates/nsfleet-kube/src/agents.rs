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

/// The label of the agent's pods (the DaemonSet's selector).
pub const AGENT_LABEL: &str = "app.kubernetes.io/name=nsfleet-agent";
/// Bytes of memory the machine can give fleets, as the agent measured it.
pub const CAPACITY: &str = "nsfleet.dev/capacity";
/// The MTU of the machine's underlay.
pub const MTU: &str = "nsfleet.dev/mtu";
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
    /// Not being deleted, renewing its Lease, and has said its capacity.
    pub ready: bool,
    pub info: MachineInfo,
}

/// Every agent pod of namespace `system`, ready or not.
pub async fn list(client: &Client, system: &str) -> Result<Vec<Agent>, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), system);
    let list = pods
        .list(&ListParams::default().labels(AGENT_LABEL))
        .await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), system);
    let leases = leases.list(&ListParams::default()).await?.items;
    let now = k8s_openapi::jiff::Timestamp::now();
    let renewed = |machine: &str| {
        (leases.iter())
            .filter(|l| l.name_any() == lease_name(machine))
            .filter_map(|l| l.spec.as_ref())
            .any(|s| held_at(s, now))
    };
    Ok(list
        .items
        .iter()
        .filter_map(|p| agent_of(p, &renewed))
        .collect())
}

/// Whether a Lease was renewed within its duration before `now`.
fn held_at(spec: &LeaseSpec, now: k8s_openapi::jiff::Timestamp) -> bool {
    let (Some(renewed), Some(seconds)) = (&spec.renew_time, spec.lease_duration_seconds) else {
        return false;
    };
    now.duration_since(renewed.0).as_secs() < i64::from(seconds)
}

fn agent_of(pod: &Pod, renewed: &impl Fn(&str) -> bool) -> Option<Agent> {
    let machine = pod.spec.as_ref()?.node_name.clone()?;
    let status = pod.status.as_ref();
    let address = status.and_then(|s| s.host_ip.clone()).unwrap_or_default();
    let ready = pod.metadata.deletion_timestamp.is_none() && renewed(&machine);
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
        },
    })
}
