//! The user's side: a fleet on a cluster made, watched, entered and removed through the
//! Kubernetes API, as data (nsfleet-client prints it).

use crate::agents;
use crate::crd::{Fleet, FleetPart, FleetSpec, FleetStatus, OWNER_RENEWED, PULL_SECRET_LABEL};
use crate::manifests::{self, SYSTEM};
use crate::Error;
use k8s_openapi::api::core::v1::Secret;
pub use kube::api::AttachedProcess;
use kube::api::{AttachParams, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::{self, Scope};
use kube::{Api, Client, Config, ResourceExt};
use std::time::{Duration, Instant};

/// The cluster of `KUBECONFIG` (or ~/.kube/config), in `context` or its current one.
pub async fn connect(context: Option<&str>) -> Result<Client, Error> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let config = match Kubeconfig::read() {
        Ok(k) => Config::from_custom_kubeconfig(k, &options)
            .await
            .map_err(|e| Error(format!("cannot read the cluster's configuration: {e}")))?,
        Err(e) if context.is_some() => {
            return Err(Error(format!(
                "no kubeconfig to find context {context:?} in: {e}"
            )))
        }
        Err(_) => Config::infer().await.map_err(|e| {
            Error(format!(
                "no cluster: set KUBECONFIG, or run inside a cluster ({e})"
            ))
        })?,
    };
    let cluster = config.cluster_url.to_string();
    let client = Client::try_from(config)?;
    client
        .apiserver_version()
        .await
        .map_err(|e| Error(format!("the cluster at {cluster} cannot be reached: {e}")))?;
    Ok(client)
}

/// Applies every object of [`manifests::all`] (server-side apply: again is harmless).
pub async fn install(client: &Client, o: &manifests::Options) -> Result<Vec<String>, Error> {
    let mut done = Vec::new();
    for obj in manifests::all(o) {
        let obj: DynamicObject = serde_json::from_value(obj).map_err(|e| Error(e.to_string()))?;
        let types = obj
            .types
            .clone()
            .ok_or_else(|| Error("an object without a kind".into()))?;
        let gvk = GroupVersionKind::try_from(&types).map_err(|e| Error(e.to_string()))?;
        let (resource, caps) = discovery::pinned_kind(client, &gvk).await?;
        let api: Api<DynamicObject> = match (caps.scope, obj.namespace()) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), &ns, &resource),
            _ => Api::all_with(client.clone(), &resource),
        };
        let name = obj.name_any();
        let pp = PatchParams::apply("nsfleet").force();
        api.patch(&name, &pp, &Patch::Apply(&obj))
            .await
            .map_err(|e| Error(format!("{} {name}: {e}", types.kind)))?;
        done.push(format!("{} {name}", types.kind));
        if types.kind == "CustomResourceDefinition" {
            // The resource must be served before anything names it.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    Ok(done)
}

/// Waits until the controller runs and every machine the agents' DaemonSet covers has a
/// ready agent that has said its capacity; returns the agents.
pub async fn wait_installed(client: &Client, bound: Duration) -> Result<Vec<agents::Agent>, Error> {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
    let started = Instant::now();
    loop {
        let ds: Api<DaemonSet> = Api::namespaced(client.clone(), SYSTEM);
        let deploy: Api<Deployment> = Api::namespaced(client.clone(), SYSTEM);
        let desired = (ds.get_opt("nsfleet-agent").await?)
            .and_then(|d| d.status)
            .map_or(0, |s| s.desired_number_scheduled);
        let controller = (deploy.get_opt("nsfleet-controller").await?)
            .and_then(|d| d.status)
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        let agents = agents::list(client, SYSTEM, None).await?;
        let ready = agents.iter().filter(|a| a.ready).count() as i32;
        if controller >= 1 && desired > 0 && ready >= desired {
            return Ok(agents);
        }
        if started.elapsed() > bound {
            return Err(Error(format!(
                "after {} s: controller ready {}, agents ready {ready} of {desired} (kubectl -n {SYSTEM} get pods -o wide)",
                bound.as_secs(),
                controller >= 1
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The agent pods that still run an earlier install's template: the agents' DaemonSet
/// updates OnDelete, so that an install ends no running fleet (an agent's parts end with
/// its container). Read once the DaemonSet's controller has seen the latest install (up
/// to 10 s), by the newest of its revisions.
pub async fn agents_behind(client: &Client) -> Result<Vec<String>, Error> {
    use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
    use k8s_openapi::api::core::v1::Pod;
    const HASH: &str = "controller-revision-hash";
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), SYSTEM);
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let ds = sets.get("nsfleet-agent").await?;
        let seen = ds.status.as_ref().and_then(|s| s.observed_generation);
        if seen >= ds.metadata.generation || Instant::now() > until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let labelled = ListParams::default().labels(agents::AGENT_LABEL);
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), SYSTEM);
    let newest = (revisions.list(&labelled).await?.items.into_iter()).max_by_key(|r| r.revision);
    let Some(hash) = newest.and_then(|r| r.labels().get(HASH).cloned()) else {
        return Ok(Vec::new());
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), SYSTEM);
    Ok((pods.list(&labelled).await?.items.into_iter())
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.labels().get(HASH) != Some(&hash))
        .map(|p| p.name_any())
        .collect())
}

/// Makes a Fleet: refused if one of that name is in the namespace already.
pub async fn create(
    client: &Client,
    ns: &str,
    name: &str,
    mut spec: FleetSpec,
    pull_credentials: Option<String>,
) -> Result<(), Error> {
    let api: Api<Fleet> = Api::namespaced(client.clone(), ns);
    if let Some(f) = api.get_opt(name).await.map_err(crd_missing)? {
        let phase = f.status.map(|s| s.phase).unwrap_or_default();
        return Err(Error(format!(
            "a fleet named {name} is already in namespace {ns} ({phase}): `nsfleet down {name} --kube` first"
        )));
    }
    let Some(text) = pull_credentials else {
        (api.create(&PostParams::default(), &Fleet::new(name, spec))
            .await)
            .map_err(crd_missing)?;
        return Ok(());
    };
    // The Secret first, so that no agent looks for it before it is there; then owned by
    // the Fleet, so that it goes when the Fleet does.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = pull_secret(name, text);
    let secret_name = secret.name_any();
    let _ = secrets.delete(&secret_name, &DeleteParams::default()).await;
    secrets.create(&PostParams::default(), &secret).await?;
    if let Some(pull) = spec.software.pull.as_mut() {
        pull.secret = Some(secret_name.clone());
    }
    let made = match api
        .create(&PostParams::default(), &Fleet::new(name, spec))
        .await
    {
        Ok(made) => made,
        Err(e) => {
            let _ = secrets.delete(&secret_name, &DeleteParams::default()).await;
            return Err(crd_missing(e));
        }
    };
    let owner = serde_json::json!({"metadata": {"ownerReferences": [kube::Resource::owner_ref(&made, &()).unwrap_or_default()]}});
    secrets
        .patch(&secret_name, &PatchParams::default(), &Patch::Merge(owner))
        .await?;
    Ok(())
}

/// Puts `config_text` in the running fleet's pull Secret (made anew, owned by the
/// fleet, before a change that pulls names it): its name.
pub async fn renew_pull_secret(
    client: &Client,
    fleet: &Fleet,
    config_text: String,
) -> Result<String, Error> {
    let ns = fleet.namespace().unwrap_or_else(|| "default".into());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let mut secret = pull_secret(&fleet.name_any(), config_text);
    secret.metadata.owner_references = kube::Resource::owner_ref(fleet, &()).map(|o| vec![o]);
    let name = secret.name_any();
    let _ = secrets.delete(&name, &DeleteParams::default()).await;
    secrets.create(&PostParams::default(), &secret).await?;
    Ok(name)
}

/// The Secret that hands a fleet's pull credentials (Docker's config text) to its
/// machines' agents: labelled for that fleet, as they require.
fn pull_secret(fleet: &str, config_text: String) -> Secret {
    use k8s_openapi::ByteString;
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("nsfleet-pull-{fleet}")),
            labels: Some([(PULL_SECRET_LABEL.to_string(), fleet.to_string())].into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(
            [(
                ".dockerconfigjson".to_string(),
                ByteString(config_text.into_bytes()),
            )]
            .into(),
        ),
        ..Default::default()
    }
}

/// Renews an owned fleet's lease (its [`OWNER_RENEWED`] annotation, to `value`); false
/// when the fleet is gone.
pub async fn renew_owner(
    client: &Client,
    ns: &str,
    name: &str,
    value: &str,
) -> Result<bool, Error> {
    let api: Api<Fleet> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({"metadata": {"annotations": {OWNER_RENEWED: value}}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Whether the cluster's RBAC lets nsfleet's controller and agents do what they need
/// ([`manifests::permissions`]), asked of the API server (SubjectAccessReview) before a
/// fleet is made: a controller that may not write a Fleet's status would leave `up`
/// waiting. Not asked when the user may not ask it.
pub async fn check_access(client: &Client) -> Result<(), Error> {
    use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewSpec};
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let mut refused = Vec::new();
    for p in manifests::permissions() {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(format!("system:serviceaccount:{SYSTEM}:{}", p.account)),
                resource_attributes: Some(p.attributes()),
                ..Default::default()
            },
            ..Default::default()
        };
        match reviews.create(&PostParams::default(), &review).await {
            Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => {}
            Ok(_) => refused.push(p.to_string()),
            Err(kube::Error::Api(e)) if e.code == 403 => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
    if refused.is_empty() {
        return Ok(());
    }
    Err(Error(format!(
        "the cluster's RBAC refuses nsfleet: {}; nothing was made (`nsfleet kube install` applies the roles again)",
        refused.join(", ")
    )))
}

/// A 404 on the resource itself means nsfleet is not installed in the cluster.
fn crd_missing(e: kube::Error) -> Error {
    match &e {
        kube::Error::Api(a) if a.code == 404 => Error(
            "this cluster has no nsfleet.dev resources: install nsfleet there first (`nsfleet kube install --image REF`)".into(),
        ),
        _ => e.into(),
    }
}

/// The fleet and its parts.
pub async fn get(client: &Client, ns: &str, name: &str) -> Result<(Fleet, Vec<FleetPart>), Error> {
    let api: Api<Fleet> = Api::namespaced(client.clone(), ns);
    let fleet = (api.get_opt(name).await.map_err(crd_missing)?)
        .ok_or_else(|| Error(format!("no fleet named {name} in namespace {ns}")))?;
    let parts: Api<FleetPart> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&crate::crd::parts_of(name));
    Ok((fleet, parts.list(&lp).await?.items))
}

/// Waits until the controller has acted on the fleet's `generation` and the fleet is
/// Running (or Degraded, or its change refused), or it is Failed, calling `progress`
/// with each new status; gives up after `bound`.
pub async fn wait_ready(
    client: &Client,
    ns: &str,
    name: &str,
    generation: i64,
    bound: Duration,
    mut progress: impl FnMut(&FleetStatus),
) -> Result<FleetStatus, Error> {
    let started = Instant::now();
    let mut last = FleetStatus::default();
    loop {
        let (fleet, _) = get(client, ns, name).await?;
        let status = fleet.status.unwrap_or_default();
        if status != last {
            progress(&status);
            last = status.clone();
        }
        let seen = status.observed_generation.is_some_and(|g| g >= generation);
        let settled = matches!(status.phase.as_str(), "Running" | "Failed" | "Degraded");
        // Failed is final whatever the generation; a change refused is said once every
        // machine has been put back (the controller refuses without changing the phase).
        if status.phase == "Failed" || (seen && settled) {
            return Ok(status);
        }
        if started.elapsed() > bound {
            return Err(Error(format!(
                "fleet {name} was not ready in {} s (phase {:?}: {})",
                bound.as_secs(),
                status.phase,
                status.message
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Changes the fleet's topology (`nsfleet apply --kube`); returns the Fleet's new
/// generation, which [`wait_ready`] waits for.
pub async fn change(
    client: &Client,
    ns: &str,
    name: &str,
    topology: String,
    format: &str,
    images: &[crate::crd::FleetImage],
    pull: Option<&crate::crd::MachinePull>,
) -> Result<i64, Error> {
    let api: Api<Fleet> = Api::namespaced(client.clone(), ns);
    let (fleet, _) = get(client, ns, name).await?;
    let revision = fleet.spec.revision.unwrap_or(0) + 1;
    let patch = serde_json::json!({ "spec": { "topology": topology, "format": format, "revision": revision, "images": images, "pull": pull } });
    let fleet = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    fleet
        .metadata
        .generation
        .ok_or_else(|| Error(format!("fleet {name} has no generation")))
}

/// Deletes the fleet and waits until it is gone (every part taken down, or given up on
/// by the controller's bound). Returns each machine's last word.
pub async fn delete(
    client: &Client,
    ns: &str,
    name: &str,
    bound: Duration,
) -> Result<Vec<crate::crd::MachineStatus>, Error> {
    let api: Api<Fleet> = Api::namespaced(client.clone(), ns);
    let (fleet, _) = get(client, ns, name).await?;
    let mut last = fleet.status.unwrap_or_default().machines;
    api.delete(name, &DeleteParams::default()).await?;
    let started = Instant::now();
    let mut unreclaimed = Vec::new();
    loop {
        let Some(f) = api.get_opt(name).await? else {
            // Gone: reclaimed everywhere but where the controller said it let a part go.
            for m in &mut last {
                m.reclaimed = !unreclaimed.contains(&m.machine);
                if m.reclaimed {
                    m.phase = "Reclaimed".into();
                } else {
                    m.message = "no agent ran there to take its part down".into();
                }
            }
            return Ok(last);
        };
        if let Some(s) = f.status {
            unreclaimed = s.unreclaimed;
            for m in &mut last {
                if let Some(now) = s.machines.iter().find(|x| x.machine == m.machine) {
                    *m = now.clone();
                }
            }
        }
        if started.elapsed() > bound {
            return Err(Error(format!(
                "fleet {name} was still being deleted after {} s",
                bound.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The part that holds `node`, and the agent of its machine.
pub async fn node_home(
    client: &Client,
    ns: &str,
    fleet: &str,
    node: &str,
) -> Result<(FleetPart, agents::Agent), Error> {
    let (_, parts) = get(client, ns, fleet).await?;
    let part = (parts.into_iter())
        .find(|p| p.spec.nodes.iter().any(|n| n == node))
        .ok_or_else(|| Error(format!("fleet {fleet} has no node {node}")))?;
    let agent = machine_agent(client, &part.spec.machine).await?;
    Ok((part, agent))
}

/// The ready agent of `machine`.
pub async fn machine_agent(client: &Client, machine: &str) -> Result<agents::Agent, Error> {
    let agents = agents::list(client, SYSTEM, None).await?;
    (agents.into_iter())
        .find(|a| a.machine == machine && a.ready)
        .ok_or_else(|| Error(format!("machine {machine} has no ready nsfleet agent")))
}

/// Where a command run by an agent writes, and whether it reads our end closing.
pub struct Streams<O, E> {
    pub stdout: O,
    pub stderr: E,
    /// The command is given a standard input that ends when we do (it never carries
    /// data): a command that runs until stopped watches it, and so ends with us.
    pub stdin: bool,
}

/// Runs nsfleet (the agent's own program) with `args` in `agent`'s container, on its
/// machine: what it writes passed to `streams` as it comes, its exit code returned.
pub async fn run_in_agent<O: std::io::Write, E: std::io::Write>(
    client: &Client,
    agent: &agents::Agent,
    args: &[String],
    streams: Streams<O, E>,
) -> Result<i32, Error> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), SYSTEM);
    let mut argv = vec![manifests::ENTRY.to_string()];
    argv.extend(args.iter().cloned());
    let ap = AttachParams::default()
        .stdin(streams.stdin)
        .stdout(true)
        .stderr(true);
    let mut proc = pods.exec(&agent.pod, argv, &ap).await?;
    // Never written: it closes when our reader of the command's output goes (a pipe's
    // reader ended: the command ends with it), when this returns, or when our process
    // ends.
    let stdin = proc.stdin();
    let mut out = proc.stdout().ok_or_else(|| Error("no stdout".into()))?;
    let mut err = proc.stderr().ok_or_else(|| Error("no stderr".into()))?;
    let status = proc.take_status();
    let Streams { stdout, stderr, .. } = streams;
    let output = async move {
        pass(&mut out, stdout).await;
        drop(stdin);
    };
    let _ = tokio::join!(output, pass(&mut err, stderr));
    let status = match status {
        Some(s) => s.await,
        None => None,
    };
    proc.join().await.map_err(|e| Error(e.to_string()))?;
    Ok(exit_code(status))
}

/// Starts nsfleet (the agent's own program) with `args` in `agent`'s container, its
/// standard input, output and error for the caller to speak with it; [`finished`] gives
/// its exit code.
pub async fn open_in_agent(
    client: &Client,
    agent: &agents::Agent,
    args: &[String],
) -> Result<AttachedProcess, Error> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), SYSTEM);
    let mut argv = vec![manifests::ENTRY.to_string()];
    argv.extend(args.iter().cloned());
    let ap = AttachParams::default()
        .stdin(true)
        .stdout(true)
        .stderr(true);
    Ok(pods.exec(&agent.pod, argv, &ap).await?)
}

/// The exit code of a command [`open_in_agent`] started, once it has ended.
pub async fn finished(mut proc: AttachedProcess) -> Result<i32, Error> {
    let status = match proc.take_status() {
        Some(s) => s.await,
        None => None,
    };
    proc.join().await.map_err(|e| Error(e.to_string()))?;
    Ok(exit_code(status))
}

/// Runs `command` in `node` of the fleet, on its machine, through that machine's agent:
/// its output passed through, its exit code returned.
pub async fn exec(
    client: &Client,
    ns: &str,
    fleet: &str,
    node: &str,
    command: &[String],
) -> Result<i32, Error> {
    let (_, agent) = node_home(client, ns, fleet, node).await?;
    let mut args = vec!["exec".into(), fleet.into(), node.into(), "--".into()];
    args.extend(command.iter().cloned());
    let streams = Streams {
        stdout: std::io::stdout(),
        stderr: std::io::stderr(),
        stdin: false,
    };
    run_in_agent(client, &agent, &args, streams).await
}

/// The command's exit code from the exec's final status (0 on success).
fn exit_code(status: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>) -> i32 {
    let Some(s) = status else { return 1 };
    if s.status.as_deref() == Some("Success") {
        return 0;
    }
    (s.details.and_then(|d| d.causes))
        .and_then(|c| {
            c.into_iter()
                .find(|c| c.reason.as_deref() == Some("ExitCode"))
        })
        .and_then(|c| c.message?.parse().ok())
        .unwrap_or(1)
}

/// Copies what the remote process writes to one of our streams, as it comes.
async fn pass(from: &mut (impl tokio::io::AsyncRead + Unpin), mut to: impl std::io::Write) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 16 << 10];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 || to.write_all(&buf[..n]).and_then(|_| to.flush()).is_err() {
            break;
        }
    }
}
