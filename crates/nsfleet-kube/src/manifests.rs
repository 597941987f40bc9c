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
/// Each machine's image store, at the same place in the agent's container as on the
/// machine (nsfleet's default store: the agent's commands find it without being told).
pub const IMAGE_STORE: &str = "/var/lib/nsfleet/images";

/// Where the controller and agents reach the API server when the cluster's service
/// address does not work from a machine's own namespace (a cluster without kube-proxy).
pub struct Options {
    pub image: String,
    pub api_server: Option<(String, u16)>,
    /// The agents run Fleets' nodes unconfined when a Fleet asks (`up --privileged`):
    /// whoever may create a Fleet may then be root on every machine.
    pub allow_privileged: bool,
}

/// Set (to `1`) in the agents' environment by `install --allow-privileged`.
pub const ALLOW_PRIVILEGED: &str = "NSFLEET_ALLOW_PRIVILEGED";

/// Why a part that asks for unconfined nodes is refused on this machine, if it is: its
/// agent was installed without `--allow-privileged` (read from this process's
/// environment: the agent's, or a command it runs).
pub fn privileged_refusal(asked: bool) -> Option<String> {
    let allowed = std::env::var(ALLOW_PRIVILEGED).is_ok_and(|v| v == "1");
    (asked && !allowed).then(|| {
        "--privileged: nsfleet was installed in this cluster without --allow-privileged, so its agents run no node as the machine's root (`nsfleet kube install --allow-privileged ...` lets whoever may create a Fleet do so)".to_string()
    })
}

/// Every object, in the order they are applied.
pub fn all(o: &Options) -> Vec<Value> {
    let mut out = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}}),
        serde_json::to_value(Fleet::crd()).expect("a CRD is JSON"),
        serde_json::to_value(FleetPart::crd()).expect("a CRD is JSON"),
    ];
    for a in accounts() {
        out.extend(rbac(&a));
    }
    out.push(controller(o));
    out.push(agent(o));
    out
}

/// A service account of nsfleet's, and what it may do: cluster-wide, and in
/// `nsfleet-system` (RBAC rules: apiGroups, resources, verbs).
pub struct Account {
    pub name: &'static str,
    pub cluster_rules: Value,
    pub system_rules: Value,
}

/// The controller's and the agents' accounts, with the least each needs.
pub fn accounts() -> Vec<Account> {
    vec![
        Account {
            name: "nsfleet-controller",
            cluster_rules: json!([
                // delete: an owned fleet whose owner's watcher stopped renewing it.
                {"apiGroups": ["nsfleet.dev"], "resources": ["fleets"], "verbs": ["get", "list", "watch", "patch", "update", "delete"]},
                {"apiGroups": ["nsfleet.dev"], "resources": ["fleets/status"], "verbs": ["get", "patch", "update"]},
                {"apiGroups": ["nsfleet.dev"], "resources": ["fleetparts"], "verbs": ["get", "list", "watch", "create", "delete", "patch"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
            ]),
            system_rules: json!([
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"]},
            ]),
        },
        Account {
            name: "nsfleet-agent",
            cluster_rules: json!([
                {"apiGroups": ["nsfleet.dev"], "resources": ["fleetparts"], "verbs": ["get", "list", "watch", "patch", "update"]},
                {"apiGroups": ["nsfleet.dev"], "resources": ["fleetparts/status"], "verbs": ["get", "patch", "update"]},
                // A fleet's pull credentials (read into memory, only a Secret labelled for
                // that fleet: see crd::PULL_SECRET_LABEL).
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
            ]),
            system_rules: json!([
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "patch"]},
            ]),
        },
    ]
}

/// One thing an account must be allowed: a verb on a resource, cluster-wide or in a
/// namespace.
pub struct Permission {
    pub account: &'static str,
    pub group: String,
    /// `fleets`, or with its subresource, `fleets/status`.
    pub resource: String,
    pub verb: String,
    pub namespace: Option<&'static str>,
}

impl Permission {
    /// As a SubjectAccessReview asks it.
    pub fn attributes(&self) -> k8s_openapi::api::authorization::v1::ResourceAttributes {
        let (resource, subresource) = match self.resource.split_once('/') {
            Some((r, s)) => (r, Some(s.to_string())),
            None => (self.resource.as_str(), None),
        };
        k8s_openapi::api::authorization::v1::ResourceAttributes {
            group: Some(self.group.clone()),
            resource: Some(resource.to_string()),
            subresource,
            verb: Some(self.verb.clone()),
            namespace: self.namespace.map(str::to_string),
            ..Default::default()
        }
    }
}

impl std::fmt::Display for Permission {
    /// As refused: "nsfleet-agent may not patch fleetparts/status (cluster-wide)".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scope = self
            .namespace
            .map_or("cluster-wide".to_string(), |n| format!("in {n}"));
        write!(
            f,
            "{} may not {} {} ({scope})",
            self.account, self.verb, self.resource
        )
    }
}

/// Every permission of every account's rules, one verb on one resource each.
pub fn permissions() -> Vec<Permission> {
    let strings = |rule: &Value, k: &str| -> Vec<String> {
        (rule[k].as_array().into_iter().flatten())
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let mut out = Vec::new();
    for a in accounts() {
        for (rules, namespace) in [(&a.cluster_rules, None), (&a.system_rules, Some(SYSTEM))] {
            for rule in rules.as_array().into_iter().flatten() {
                for group in strings(rule, "apiGroups") {
                    for resource in strings(rule, "resources") {
                        for verb in strings(rule, "verbs") {
                            let (group, resource) = (group.clone(), resource.clone());
                            let account = a.name;
                            out.push(Permission {
                                account,
                                group,
                                resource,
                                verb,
                                namespace,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// An account's service account, its cluster-wide rules and its rules in
/// `nsfleet-system`, bound.
fn rbac(a: &Account) -> Vec<Value> {
    let (name, cluster_rules, system_rules) = (a.name, &a.cluster_rules, &a.system_rules);
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

/// The agents' environment: the controller's, and the install's consent to unconfined
/// nodes (only agents run nodes; the controller is not told).
fn agent_env(o: &Options) -> Vec<Value> {
    let mut env = env(o);
    if o.allow_privileged {
        env.push(json!({"name": ALLOW_PRIVILEGED, "value": "1"}));
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
                        "args": ["kube", "agent"], "env": agent_env(o),
                        "securityContext": {"privileged": true},
                        "volumeMounts": [
                            {"name": "usr", "mountPath": "/usr", "readOnly": true},
                            {"name": "etc", "mountPath": "/etc", "readOnly": true},
                            {"name": "images", "mountPath": IMAGE_STORE},
                        ],
                    }],
                    // Nodes that name no image (or every node, with --host-software) run
                    // the machine's own programs (FRR, BIRD, iproute2...), as a fleet on
                    // one machine does: its /usr and /etc, read-only. The others run their
                    // images from the machine's image store, nsfleet's own folder there,
                    // shared by every fleet on the machine and kept across agents.
                    "volumes": [
                        {"name": "usr", "hostPath": {"path": "/usr", "type": "Directory"}},
                        {"name": "etc", "hostPath": {"path": "/etc", "type": "Directory"}},
                        {"name": "images", "hostPath": {"path": IMAGE_STORE, "type": "DirectoryOrCreate"}},
                    ],
                },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_is_a_permission_to_check_and_said_plainly() {
        let all = permissions();
        let status = all
            .iter()
            .find(|p| {
                p.account == "nsfleet-controller"
                    && p.resource == "fleets/status"
                    && p.verb == "patch"
            })
            .expect("the controller patches a fleet's status");
        assert_eq!(
            status.to_string(),
            "nsfleet-controller may not patch fleets/status (cluster-wide)"
        );
        let a = status.attributes();
        assert_eq!(
            (a.resource.as_deref(), a.subresource.as_deref()),
            (Some("fleets"), Some("status"))
        );
        let lease = all
            .iter()
            .find(|p| p.account == "nsfleet-agent" && p.resource == "leases" && p.verb == "create")
            .expect("an agent makes its lease");
        assert_eq!(lease.namespace, Some(SYSTEM));
    }

    #[test]
    fn only_the_agents_are_told_the_install_allows_unconfined_nodes() {
        let o = Options {
            image: "nsfleet:test".into(),
            api_server: None,
            allow_privileged: true,
        };
        let told = |kind: &str| {
            let object = (all(&o).into_iter())
                .find(|v| v["kind"] == kind)
                .expect("installed");
            let env = &object["spec"]["template"]["spec"]["containers"][0]["env"];
            (env.as_array().expect("an environment").iter()).any(|e| e["name"] == ALLOW_PRIVILEGED)
        };
        assert!(told("DaemonSet"));
        assert!(!told("Deployment"));
    }
}
