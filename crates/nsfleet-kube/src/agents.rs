//! The machines nsfleet may use: the nodes where an agent pod runs. Each agent says what
//! its machine can hold and its underlay's MTU in its own pod's annotations; its address
//! is the pod's host IP (the agent runs in the machine's own network namespace).

use crate::plan::MachineInfo;
use crate::Error;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

/// The label of the agent's pods (the DaemonSet's selector).
pub const AGENT_LABEL: &str = "app.kubernetes.io/name=nsfleet-agent";
/// Bytes of memory the machine can give fleets, as the agent measured it.
pub const CAPACITY: &str = "nsfleet.dev/capacity";
/// The MTU of the machine's underlay.
pub const MTU: &str = "nsfleet.dev/mtu";

#[derive(Clone, Debug)]
pub struct Agent {
    pub pod: String,
    pub machine: String,
    /// Running, ready, and has said its capacity.
    pub ready: bool,
    pub info: MachineInfo,
}

/// Every agent pod of namespace `system`, ready or not.
pub async fn list(client: &Client, system: &str) -> Result<Vec<Agent>, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), system);
    let list = pods
        .list(&ListParams::default().labels(AGENT_LABEL))
        .await?;
    Ok(list.items.iter().filter_map(agent_of).collect())
}

fn agent_of(pod: &Pod) -> Option<Agent> {
    let machine = pod.spec.as_ref()?.node_name.clone()?;
    let status = pod.status.as_ref();
    let address = status.and_then(|s| s.host_ip.clone()).unwrap_or_default();
    let ready = pod.metadata.deletion_timestamp.is_none()
        && (status.and_then(|s| s.conditions.as_ref()))
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
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
