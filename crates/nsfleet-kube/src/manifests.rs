//! What `nsfleet kube install` puts in a cluster: the two resources' definitions, the
//! namespace `nsfleet-system`, the controller (a Deployment of one) and the agent (a
//! DaemonSet), each with the least RBAC it needs:
//!
//! - the controller reads and writes Fleets (and their status), makes and deletes
//!   FleetParts, reads a Fleet's ConfigMap, and lists the agents' pods;
//! - an agent reads its machine's FleetParts, writes their status and finalizers, and
//!   writes its own pod's annotations (what its machine can hold).
//!
//! Both run in the machine's network namespace (`hostNetwork`): the agent's parts need
//! the machine's own addresses for their tunnels; the controller needs no pod network.

use crate::crd::{Fleet, FleetPart};
use kube::CustomResourceExt;
use serde_json::{json, Value};

pub const SYSTEM: &str = "nsfleet-system";
/// Where nsfleet's image has its binary (its entry point): not in /usr, which the agent
/// mounts from the machine.
pub const ENTRY: &str = "/nsfleet";

/// Where the controller and agents reach the API server when the cluster's service
/// address does not work from a machine's own namespace (a cluster without kube-proxy).
pub struct Options {
    pub image: String,
    pub api_server: Option<(String, u16)>,
}

/// Every object, in the order they are applied.
pub fn all(o: &Options) -> Vec<Value> {
    let mut out = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}}),
        serde_json::to_value(Fleet::crd()).expect("a CRD is JSON"),
        serde_json::to_value(FleetPart::crd()).expect("a CRD is JSON"),
    ];
    out.extend(rbac(
        "nsfleet-controller",
        json!([
            {"apiGroups": ["nsfleet.dev"], "resources": ["fleets"], "verbs": ["get", "list", "watch", "patch", "update"]},
            {"apiGroups": ["nsfleet.dev"], "resources": ["fleets/status"], "verbs": ["get", "patch", "update"]},
            {"apiGroups": ["nsfleet.dev"], "resources": ["fleetparts"], "verbs": ["get", "list", "watch", "create", "delete", "patch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
        ]),
        json!([
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"]},
        ]),
    ));
    out.extend(rbac(
        "nsfleet-agent",
        json!([
            {"apiGroups": ["nsfleet.dev"], "resources": ["fleetparts"], "verbs": ["get", "list", "watch", "patch", "update"]},
            {"apiGroups": ["nsfleet.dev"], "resources": ["fleetparts/status"], "verbs": ["get", "patch", "update"]},
        ]),
        json!([
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "patch"]},
        ]),
    ));
    out.push(controller(o));
    out.push(agent(o));
    out
}

/// A service account, its cluster-wide rules and its rules in `nsfleet-system`.
fn rbac(name: &str, cluster_rules: Value, system_rules: Value) -> Vec<Value> {
    let subject = json!([{"kind": "ServiceAccount", "name": name, "namespace": SYSTEM}]);
    let meta = json!({"name": name});
    let system_meta = json!({"name": name, "namespace": SYSTEM});
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": system_meta}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta, "rules": cluster_rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}, "subjects": subject}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": system_meta, "rules": system_rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": system_meta,
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, "subjects": subject}),
    ]
}

fn env(o: &Options) -> Vec<Value> {
    let field = |name: &str, path: &str| json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}});
    let mut env = vec![
        field("NSFLEET_MACHINE", "spec.nodeName"),
        field("NSFLEET_POD", "metadata.name"),
        field("NSFLEET_POD_NAMESPACE", "metadata.namespace"),
    ];
    if let Some((host, port)) = &o.api_server {
        env.push(json!({"name": "KUBERNETES_SERVICE_HOST", "value": host}));
        env.push(json!({"name": "KUBERNETES_SERVICE_PORT", "value": port.to_string()}));
    }
    env
}

fn controller(o: &Options) -> Value {
    let labels = json!({"app.kubernetes.io/name": "nsfleet-controller"});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nsfleet-controller", "namespace": SYSTEM},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "nsfleet-controller",
                    "hostNetwork": true,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{
                        "name": "controller", "image": o.image, "imagePullPolicy": "IfNotPresent",
                        "args": ["kube", "controller"], "env": env(o),
                    }],
                },
            },
        },
    })
}

fn agent(o: &Options) -> Value {
    let labels = json!({"app.kubernetes.io/name": "nsfleet-agent"});
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "nsfleet-agent", "namespace": SYSTEM},
        "spec": {
            "selector": {"matchLabels": labels},
            // An agent's parts end with its container: a new agent image replaces an agent
            // only when its pod is deleted (by whoever knows its machine's fleets can go).
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "nsfleet-agent",
                    "hostNetwork": true,
                    "tolerations": [{"operator": "Exists"}],
                    "terminationGracePeriodSeconds": 30,
                    "containers": [{
                        "name": "agent", "image": o.image, "imagePullPolicy": "IfNotPresent",
                        "args": ["kube", "agent"], "env": env(o),
                        "securityContext": {"privileged": true},
                        "volumeMounts": [
                            {"name": "usr", "mountPath": "/usr", "readOnly": true},
                            {"name": "etc", "mountPath": "/etc", "readOnly": true},
                        ],
                    }],
                    // Nodes run the machine's own programs (FRR, BIRD, iproute2...), as a
                    // fleet on one machine does: its /usr and /etc, read-only.
                    "volumes": [
                        {"name": "usr", "hostPath": {"path": "/usr", "type": "Directory"}},
                        {"name": "etc", "hostPath": {"path": "/etc", "type": "Directory"}},
                    ],
                },
            },
        },
    })
}
