//! The controller (a Deployment of one): places each Fleet's nodes on the machines that run
//! the agent, makes one FleetPart per machine, and keeps the Fleet's status as its parts'
//! agents report. It holds no state of its own: a restarted controller reads everything
//! back from the resources.
//!
//! A Fleet's life: Deploying (parts made) -> Running (every part up) -> Degraded (a
//! machine's agent lost while running); Failed (a part failed, or an agent was lost while
//! deploying: every part is deleted, which rolls the fleet back on every machine);
//! Deleting (parts deleted; each agent takes its part down and says it was reclaimed).
//! A part whose agent is gone cannot be taken down by anyone: its finalizer is dropped
//! after [`LOST_BOUND`], and the Fleet's status says which machine was not reclaimed.

use crate::crd::{
    Fleet, FleetPart, FleetPartSpec, FleetStatus, MachineStatus, Running, FINALIZER, FLEET_LABEL,
    MACHINE_LABEL, OWNER_RENEWED,
};
use crate::plan::{self, MachineInfo};
use crate::{agents, crd, Error};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a deleted part whose machine has no agent waits for one before its finalizer
/// is dropped (nothing can take it down: the machine or its agent is gone).
pub const LOST_BOUND: Duration = Duration::from_secs(30);
/// How long a deleted fleet whose parts were let go stays, saying which, after them.
const SAID_FOR: Duration = Duration::from_secs(3);
/// How often a fleet's status is brought up to date while nothing changes (an agent's
/// loss shows as no event on the fleet or its parts).
const REFRESH: Duration = Duration::from_secs(5);
/// Parts created at once when a fleet is placed.
const PARTS_AT_ONCE: usize = 16;
/// The first VXLAN network identifier a fleet may get.
const FIRST_VNI: u32 = 1 << 20;

pub struct Ctx {
    pub client: Client,
    /// The namespace the agents run in.
    pub system: String,
    /// Held while a fleet is placed or changed: fleets are reconciled concurrently, and
    /// each takes VXLAN identifiers no other fleet's parts use. Lock order: this, then
    /// the heartbeats' map (a leaf).
    pub placing: tokio::sync::Mutex<()>,
    /// The agents' Leases as this controller has seen them renewed.
    pub heartbeats: agents::Heartbeats,
    /// Owned fleets' renewals as this controller has seen them: by the fleet's uid, the
    /// annotation's value and when it was first seen with it. A leaf lock.
    pub renewals: std::sync::Mutex<HashMap<String, (String, Instant)>>,
}

/// Runs the controller until the process ends.
pub async fn run(system: String) -> anyhow::Result<()> {
    let client = Client::try_default().await?;
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        system,
        placing: tokio::sync::Mutex::new(()),
        heartbeats: agents::Heartbeats::default(),
        renewals: Default::default(),
    });
    eprintln!("nsfleet controller: watching fleets in every namespace");
    let fleets = Api::<Fleet>::all(client.clone());
    let work = Controller::new(fleets, watcher::Config::default())
        .owns(Api::<FleetPart>::all(client), watcher::Config::default())
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                eprintln!("nsfleet controller: {e}");
            }
        });
    let said = "nsfleet controller: SIGTERM: ending (fleets keep running)";
    crate::until_terminated(work, said).await
}

fn error_policy(_: Arc<Fleet>, e: &Error, _: Arc<Ctx>) -> Action {
    if !e.0.starts_with("waiting") {
        eprintln!("nsfleet controller: {}", e.0);
    }
    Action::requeue(Duration::from_secs(1))
}

async fn reconcile(fleet: Arc<Fleet>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = fleet.namespace().unwrap_or_else(|| "default".into());
    let api: Api<Fleet> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, fleet, |event| async {
        match event {
            Event::Apply(f) => apply(&f, &ctx).await,
            Event::Cleanup(f) => cleanup(&f, &ctx).await,
        }
    })
    .await
    .map_err(|e| match e {
        kube::runtime::finalizer::Error::CleanupFailed(e)
        | kube::runtime::finalizer::Error::ApplyFailed(e) => e,
        e => Error(e.to_string()),
    })
}

fn parts_api(ctx: &Ctx, fleet: &Fleet) -> Api<FleetPart> {
    let ns = fleet.namespace().unwrap_or_else(|| "default".into());
    Api::namespaced(ctx.client.clone(), &ns)
}

async fn parts_of(ctx: &Ctx, fleet: &Fleet) -> Result<Vec<FleetPart>, Error> {
    let lp = ListParams::default().labels(&crate::crd::parts_of(&fleet.name_any()));
    Ok(parts_api(ctx, fleet).list(&lp).await?.items)
}

/// Writes the whole status: when the fleet is placed, or fails before it has parts.
async fn set_status(ctx: &Ctx, fleet: &Fleet, status: &FleetStatus) -> Result<(), Error> {
    let mut status = status.clone();
    status.observed_generation = fleet.metadata.generation;
    patch_status(ctx, fleet, json!(status)).await
}

/// Writes only the fields of the status that follow the parts (phase, message, nodes up,
/// machines): what placement wrote stays, whatever this reconcile's copy of it says.
async fn set_progress(ctx: &Ctx, fleet: &Fleet, status: &FleetStatus) -> Result<(), Error> {
    let fields = json!({
        "phase": status.phase,
        "message": status.message,
        "nodesUp": status.nodes_up,
        "machines": status.machines,
        "changeError": status.change_error,
    });
    patch_status(ctx, fleet, fields).await
}

async fn patch_status(ctx: &Ctx, fleet: &Fleet, fields: serde_json::Value) -> Result<(), Error> {
    let api = fleets_api(ctx, fleet);
    let patch = json!({ "status": fields });
    let pp = PatchParams::default();
    api.patch_status(&fleet.name_any(), &pp, &Patch::Merge(&patch))
        .await?;
    Ok(())
}

fn fleets_api(ctx: &Ctx, fleet: &Fleet) -> Api<Fleet> {
    let ns = fleet.namespace().unwrap_or_else(|| "default".into());
    Api::namespaced(ctx.client.clone(), &ns)
}

async fn apply(fleet: &Fleet, ctx: &Ctx) -> Result<Action, Error> {
    if owner_lost(fleet, ctx) {
        let name = fleet.name_any();
        eprintln!("nsfleet controller: fleet {name}: its owner's watcher stopped renewing it: deleting it");
        ignore_gone(
            fleets_api(ctx, fleet)
                .delete(&name, &DeleteParams::default())
                .await,
        )?;
        return Ok(Action::await_change());
    }
    let parts = parts_of(ctx, fleet).await?;
    // The status as it is now, not as the event that woke us saw it: a placement or a
    // phase written since must not be undone.
    let now = fleets_api(ctx, fleet).get_status(&fleet.name_any()).await?;
    let status = now.status.unwrap_or_default();
    if status.phase == "Failed" {
        // Failed is for good: what is left of its parts is being taken down, and the
        // fleet is never placed again (the user deletes it, or makes it anew).
        if !parts.is_empty() {
            let agents = agents::list(&ctx.client, &ctx.system, Some(&ctx.heartbeats)).await?;
            roll_back(ctx, fleet, &parts, &agents).await?;
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        return Ok(Action::await_change());
    }
    if parts.is_empty() {
        if status.vni_base.is_some() {
            // Placed before, and its parts gone since (deleted by hand): said, not redone.
            let lost = FleetStatus {
                phase: "Failed".into(),
                message: "its parts were deleted".into(),
                ..status
            };
            set_status(ctx, fleet, &lost).await?;
            return Ok(Action::await_change());
        }
        return match place(fleet, ctx).await {
            Ok(status) => {
                set_status(ctx, fleet, &status).await?;
                Ok(Action::requeue(Duration::from_secs(1)))
            }
            Err(e) => {
                let failed = FleetStatus {
                    phase: "Failed".into(),
                    message: e.0,
                    ..FleetStatus::default()
                };
                set_status(ctx, fleet, &failed).await?;
                Ok(Action::await_change())
            }
        };
    }
    let live: Vec<FleetPart> = (parts.iter())
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .cloned()
        .collect();
    let settled = matches!(status.phase.as_str(), "Running" | "Degraded" | "Applying");
    if settled && fleet.metadata.generation != status.observed_generation {
        // The topology changed (`nsfleet apply --kube`): the parts are changed to it.
        let ns = fleet.namespace().unwrap_or_else(|| "default".into());
        let target = match topology_text(ctx, fleet, &ns).await {
            Ok(topology) => Ok(Running {
                topology,
                format: fleet.spec.format.clone(),
                software: fleet.spec.software.clone(),
            }),
            Err(e) => Err(e.0),
        };
        let changed = change(fleet, ctx, &live, status, target).await?;
        set_status(ctx, fleet, &changed).await?;
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let agents = agents::list(&ctx.client, &ctx.system, Some(&ctx.heartbeats)).await?;
    let mut status = status;
    status.machines = machines_of(&live, &agents);
    status.nodes_up = status.machines.iter().map(|m| m.nodes_up).sum();
    // While deploying, a part that fails or loses its agent fails the whole fleet, which
    // is rolled back; once running, the rest runs on (Degraded), and `down` reclaims it.
    let deploying = !settled;
    let failed: Vec<String> = (status.machines.iter())
        .filter(|m| matches!(m.phase.as_str(), "Failed" | "Lost"))
        .map(|m| format!("machine {}: {}", m.machine, m.message))
        .collect();
    if deploying && !failed.is_empty() {
        status.phase = "Failed".into();
        status.message = format!("{}; rolled back on every machine", failed.join("; "));
        set_progress(ctx, fleet, &status).await?;
        roll_back(ctx, fleet, &parts, &agents).await?;
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let generation = |p: &FleetPart| p.metadata.generation;
    let state = |p: &FleetPart| p.status.clone().unwrap_or_default();
    let refused: Vec<String> = (live.iter())
        .filter(|p| {
            state(p)
                .refused_generation
                .is_some_and(|g| Some(g) == generation(p))
        })
        .map(|p| format!("machine {}: {}", p.spec.machine, state(p).message))
        .collect();
    // A part its machine refused the change for is not waited for.
    let behind = (live.iter()).any(|p| {
        let s = state(p);
        s.observed_generation != generation(p) && s.refused_generation != generation(p)
    });
    if !refused.is_empty() && !behind {
        // All or nothing over the machines: every part goes back to what ran before.
        let failed_on = format!("the change failed on {}", refused.join("; "));
        if let Some(before) = status.before_change.clone() {
            let mut undone = change(fleet, ctx, &live, status.clone(), Ok(before)).await?;
            undone.change_error = match undone.change_error.is_empty() {
                true => format!("{failed_on}; it was undone on every machine"),
                false => format!(
                    "{failed_on}; undoing it on the other machines failed too: {}",
                    undone.change_error
                ),
            };
            undone.before_change = None;
            set_status(ctx, fleet, &undone).await?;
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        status.change_error = format!(
            "{failed_on}; it was undone there, and the other machines have it: apply the file again"
        );
    }
    status.phase = if !failed.is_empty() {
        status.message = format!(
            "{}: those nodes are gone; `down` reclaims the rest",
            failed.join("; ")
        );
        "Degraded".into()
    } else if !refused.is_empty() && !behind {
        "Degraded".into()
    } else if behind {
        if status.phase == "Deploying" {
            "Deploying"
        } else {
            "Applying"
        }
        .into()
    } else if status.machines.iter().all(|m| m.phase == "Running") {
        status.message.clear();
        "Running".into()
    } else {
        "Deploying".into()
    };
    set_progress(ctx, fleet, &status).await?;
    Ok(Action::requeue(REFRESH))
}

/// Whether an owned fleet's watcher has not renewed it for its lease, as this controller
/// has seen (its own clock: the watcher's machine's clock is not trusted; a restarted
/// controller starts counting again).
fn owner_lost(fleet: &Fleet, ctx: &Ctx) -> bool {
    let (Some(owner), Some(uid)) = (&fleet.spec.owner, fleet.uid()) else {
        return false;
    };
    let value = (fleet.annotations().get(OWNER_RENEWED).cloned()).unwrap_or_default();
    let mut seen = ctx.renewals.lock().unwrap_or_else(|e| e.into_inner());
    let last = seen
        .entry(uid)
        .or_insert_with(|| (value.clone(), Instant::now()));
    if last.0 != value {
        *last = (value, Instant::now());
    }
    last.1.elapsed() > Duration::from_secs(owner.lease_seconds)
}

/// The fleet's topology changed: placed again with every node kept on its machine (see
/// [`plan::replan`]), each part's spec changed, parts made on machines newly used and
/// deleted from machines no longer used. A change refused (a bad topology, no room) is
/// said in `change_error`, and nothing is changed.
async fn change(
    fleet: &Fleet,
    ctx: &Ctx,
    parts: &[FleetPart],
    status: FleetStatus,
    target: Result<Running, String>,
) -> Result<FleetStatus, Error> {
    let _placing = ctx.placing.lock().await;
    let name = fleet.name_any();
    let refused = |e: String| FleetStatus {
        change_error: format!("the change was refused, and nothing changed: {e}"),
        ..status.clone()
    };
    let target = match target {
        Ok(t) => t,
        Err(e) => return Ok(refused(e)),
    };
    let before = running(parts);
    let (text, format) = (target.topology, target.format.as_deref());
    let topo = match plan::read(&name, &text, format) {
        Ok(t) => t,
        Err(e) => return Ok(refused(e)),
    };
    let room = room(ctx, fleet).await?;
    let current: Vec<FleetPartSpec> = parts.iter().map(|p| p.spec.clone()).collect();
    let next_vni = room.next_vni.max(status.vni_base.unwrap_or(FIRST_VNI));
    let mut plan = match plan::replan(&topo, &text, format, &room.machines, &current, next_vni) {
        Ok(p) => p,
        Err(e) => return Ok(refused(e)),
    };
    plan::give_software(&mut plan, &topo, &target.software, &room.machines);
    for p in &mut plan.parts {
        p.up = fleet.spec.up.clone();
    }
    let last_vni = (plan.parts.iter().flat_map(|p| &p.tunnels))
        .map(|t| t.vni)
        .max();
    if last_vni.is_some_and(|v| v >= 1 << 24) {
        return Ok(refused(
            "the cluster's fleets have used every VXLAN network identifier".into(),
        ));
    }
    let api = parts_api(ctx, fleet);
    for spec in &plan.parts {
        match parts.iter().find(|p| p.spec.machine == spec.machine) {
            Some(p) => {
                // Every field written, an absent one as null: a merge patch leaves
                // what it does not name as it was.
                let mut whole = json!(spec);
                for field in [
                    "format",
                    "images",
                    "hostSoftware",
                    "workers",
                    "wait",
                    "waitTimeoutS",
                ] {
                    if whole.get(field).is_none() {
                        whole[field] = serde_json::Value::Null;
                    }
                }
                let patch = json!({ "spec": whole });
                api.patch(
                    &p.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
            }
            None => {
                api.create(&PostParams::default(), &new_part(fleet, spec))
                    .await?;
            }
        }
    }
    for p in parts {
        if !plan.parts.iter().any(|s| s.machine == p.spec.machine) {
            ignore_gone(api.delete(&p.name_any(), &DeleteParams::default()).await)?;
        }
    }
    Ok(FleetStatus {
        phase: "Applying".into(),
        message: format!(
            "changing to {} nodes on {} machines, {} links crossing machines",
            plan.nodes,
            plan.parts.len(),
            plan.tunnels
        ),
        nodes: plan.nodes,
        machine_count: plan.parts.len() as u64,
        tunnels: plan.tunnels as u64,
        tunnel_mtu: Some(plan.tunnel_mtu),
        change_error: String::new(),
        before_change: before,
        ..status
    })
}

/// What the parts run: the topology they share, and every image any of them was given.
fn running(parts: &[FleetPart]) -> Option<Running> {
    let first = &parts.first()?.spec;
    let mut software = first.software.clone();
    for p in &parts[1..] {
        for i in &p.spec.software.images {
            if !software.images.iter().any(|x| x.reference == i.reference) {
                software.images.push(i.clone());
            }
        }
    }
    Some(Running {
        topology: first.topology.clone(),
        format: first.format.clone(),
        software,
    })
}

/// What the cluster has for a fleet: the machines whose agents are ready (those the fleet
/// names, if it names any), each with what other fleets' parts leave it, and the first
/// VXLAN identifier no other fleet's part uses.
struct Room {
    machines: Vec<MachineInfo>,
    next_vni: u32,
}

async fn room(ctx: &Ctx, fleet: &Fleet) -> Result<Room, Error> {
    let agents = agents::list(&ctx.client, &ctx.system, Some(&ctx.heartbeats)).await?;
    let parts_everywhere = Api::<FleetPart>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let others =
        |p: &&FleetPart| p.spec.fleet != fleet.name_any() || p.namespace() != fleet.namespace();
    let there = |m: &str| -> Vec<&FleetPart> {
        (parts_everywhere.iter().filter(others))
            .filter(|p| p.spec.machine == m)
            .collect()
    };
    let machines = (agents.iter())
        .filter(|a| a.ready)
        .filter(|a| fleet.spec.machines.is_empty() || fleet.spec.machines.contains(&a.machine))
        .map(|a| MachineInfo {
            capacity: (a.info.capacity)
                .saturating_sub(there(&a.machine).iter().map(|p| p.spec.weight).sum()),
            max_nodes: (a.info.max_nodes).saturating_sub(
                (there(&a.machine).iter())
                    .map(|p| p.spec.nodes.len() as u64)
                    .sum(),
            ),
            ..a.info.clone()
        })
        .collect();
    // Above every identifier another fleet's parts use (the parts, not the fleets'
    // status, which is written after them), and above 4096 and its neighbours, which
    // others' overlays take (Calico's default is 4096).
    let next_vni = (parts_everywhere.iter().filter(others))
        .flat_map(|p| p.spec.tunnels.iter().map(|t| t.vni + 1))
        .max()
        .unwrap_or(FIRST_VNI)
        .max(FIRST_VNI);
    Ok(Room { machines, next_vni })
}

/// Each part's machine, as its agent reports it; "Lost" when no ready agent runs there.
fn machines_of(parts: &[FleetPart], agents: &[agents::Agent]) -> Vec<MachineStatus> {
    let mut machines: Vec<MachineStatus> = (parts.iter())
        .map(|p| {
            let s = p.status.clone().unwrap_or_default();
            let alive = agents
                .iter()
                .any(|a| a.machine == p.spec.machine && a.ready);
            let (phase, message) = if !alive && !s.reclaimed {
                ("Lost".to_string(), gone_message(p, &s.missing_layers))
            } else if s.phase.is_empty() {
                ("Deploying".to_string(), s.message)
            } else {
                (s.phase, s.message)
            };
            MachineStatus {
                machine: p.spec.machine.clone(),
                address: p.spec.address.clone(),
                nodes: p.spec.nodes.len() as u64,
                nodes_up: s.nodes_up,
                phase,
                reclaimed: s.reclaimed,
                message,
            }
        })
        .collect();
    machines.sort_by(|a, b| a.machine.cmp(&b.machine));
    machines
}

/// Why a part's machine is Lost: its agent is gone, while it was fetching the layers
/// `missing` of which images, if it was.
fn gone_message(part: &FleetPart, missing: &[String]) -> String {
    let fetching = crd::with_any_layer(&part.spec.software.images, missing);
    match fetching.is_empty() {
        true => "its agent is gone".to_string(),
        false => format!(
            "its agent is gone while its store was fetching layers of {}",
            fetching.join(", ")
        ),
    }
}

/// Every part deleted: each agent takes its part down; a part on a lost machine has its
/// finalizer dropped now (nobody is there to take it down).
async fn roll_back(
    ctx: &Ctx,
    fleet: &Fleet,
    parts: &[FleetPart],
    agents: &[agents::Agent],
) -> Result<(), Error> {
    let api = parts_api(ctx, fleet);
    for p in parts {
        let alive = agents
            .iter()
            .any(|a| a.machine == p.spec.machine && a.ready);
        if !alive {
            drop_finalizer(&api, p).await?;
        }
        if p.metadata.deletion_timestamp.is_none() {
            ignore_gone(api.delete(&p.name_any(), &DeleteParams::default()).await)?;
        }
    }
    Ok(())
}

async fn drop_finalizer(api: &Api<FleetPart>, p: &FleetPart) -> Result<(), Error> {
    if p.finalizers().is_empty() {
        return Ok(());
    }
    let patch = json!({ "metadata": { "finalizers": null } });
    ignore_gone(
        api.patch(
            &p.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map(|_| ()),
    )
}

fn ignore_gone<T>(r: Result<T, kube::Error>) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The fleet being deleted: its parts deleted, and the fleet kept until each is gone (its
/// agent took it down) or its machine has been without an agent for [`LOST_BOUND`].
async fn cleanup(fleet: &Fleet, ctx: &Ctx) -> Result<Action, Error> {
    if let Some(uid) = fleet.uid() {
        (ctx.renewals.lock().unwrap_or_else(|e| e.into_inner())).remove(&uid);
    }
    let parts = parts_of(ctx, fleet).await?;
    // The status as it is now: what an earlier round said must be read back.
    let now = fleets_api(ctx, fleet).get_status(&fleet.name_any()).await?;
    let status = now.status.unwrap_or_default();
    let since = fleet.meta().deletion_timestamp.as_ref().map(|t| t.0);
    let waited = since.map_or(Duration::ZERO, |t| {
        let now = k8s_openapi::jiff::Timestamp::now();
        Duration::try_from(now.duration_since(t)).unwrap_or(Duration::ZERO)
    });
    if parts.is_empty() {
        if !status.unreclaimed.is_empty() && waited < LOST_BOUND + SAID_FOR {
            // Held a little longer, so that whoever deletes it reads which machines were
            // let go before it is gone.
            return Err(Error("waiting with the unreclaimed machines said".into()));
        }
        return Ok(Action::await_change());
    }
    let agents = agents::list(&ctx.client, &ctx.system, Some(&ctx.heartbeats)).await?;
    let api = parts_api(ctx, fleet);
    let alive = |p: &FleetPart| (agents.iter()).any(|a| a.machine == p.spec.machine && a.ready);
    let given_up: Vec<&FleetPart> = (parts.iter())
        .filter(|p| !alive(p) && waited >= LOST_BOUND && !p.finalizers().is_empty())
        .collect();
    if !given_up.is_empty() {
        // Said before the parts go, while the fleet is still there to say it.
        let mut unreclaimed = status.unreclaimed.clone();
        unreclaimed.extend(given_up.iter().map(|p| p.spec.machine.clone()));
        unreclaimed.sort();
        unreclaimed.dedup();
        patch_status(ctx, fleet, json!({ "unreclaimed": unreclaimed })).await?;
    }
    for p in &parts {
        if given_up.iter().any(|g| g.name_any() == p.name_any()) {
            drop_finalizer(&api, p).await?;
        }
        if p.metadata.deletion_timestamp.is_none() {
            ignore_gone(api.delete(&p.name_any(), &DeleteParams::default()).await)?;
        }
    }
    let mut status = status;
    status.phase = "Deleting".into();
    status.machines = machines_of(&parts, &agents);
    set_progress(ctx, fleet, &status).await?;
    Err(Error(format!(
        "waiting for {} part(s) of fleet {} to be taken down",
        parts.len(),
        fleet.name_any()
    )))
}

/// Places a fleet with no parts yet: its topology read, the agents' machines weighed, one
/// part made per machine. Nothing is made when anything is refused.
async fn place(fleet: &Fleet, ctx: &Ctx) -> Result<FleetStatus, Error> {
    let _placing = ctx.placing.lock().await;
    let name = fleet.name_any();
    plan::check_fleet_name(&name).map_err(Error)?;
    let ns = fleet.namespace().unwrap_or_else(|| "default".into());
    let all: Vec<Fleet> = Api::<Fleet>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    if let Some(other) = all
        .iter()
        .find(|f| f.name_any() == name && f.uid() != fleet.uid())
    {
        return Err(Error(format!(
            "a fleet named {name} is already in namespace {}: fleet names are the machines' too, so they are unique in the cluster",
            other.namespace().unwrap_or_default()
        )));
    }
    let started = Instant::now();
    let text = topology_text(ctx, fleet, &ns).await?;
    let format = fleet.spec.format.as_deref();
    let topo = plan::read(&name, &text, format).map_err(Error)?;
    let read = started.elapsed();
    let room = room(ctx, fleet).await?;
    for m in &fleet.spec.machines {
        if !room.machines.iter().any(|x| &x.name == m) {
            return Err(Error(format!(
                "machine {m} runs no ready nsfleet agent (kubectl -n {} get pods -o wide)",
                ctx.system
            )));
        }
    }
    let (machines, vni_base) = (room.machines, room.next_vni);
    let mut plan = plan::plan(&topo, &text, format, &machines, vni_base).map_err(Error)?;
    plan::give_software(&mut plan, &topo, &fleet.spec.software, &machines);
    plan::prefer_holders(&mut plan, &machines);
    for p in &mut plan.parts {
        p.up = fleet.spec.up.clone();
    }
    if vni_base as u64 + plan.tunnels as u64 >= 1 << 24 {
        return Err(Error(
            "the cluster's fleets have used every VXLAN network identifier".into(),
        ));
    }
    let planned = started.elapsed();
    make_parts(&parts_api(ctx, fleet), fleet, &plan.parts).await?;
    let secs = |d: Duration| d.as_secs_f64();
    eprintln!(
        "nsfleet controller: fleet {name} placed: {} nodes on {} machines in {:.2} s (topology read {:.2} s, room and plan {:.2} s, parts made {:.2} s)",
        plan.nodes,
        plan.parts.len(),
        secs(started.elapsed()),
        secs(read),
        secs(planned - read),
        secs(started.elapsed() - planned)
    );
    Ok(FleetStatus {
        phase: "Deploying".into(),
        message: format!(
            "{} nodes on {} machines, {} links crossing machines (VXLAN, MTU {}){}",
            plan.nodes,
            plan.parts.len(),
            plan.tunnels,
            plan.tunnel_mtu,
            to_fetch(&plan.parts)
        ),
        nodes: plan.nodes,
        nodes_up: 0,
        machine_count: plan.parts.len() as u64,
        tunnels: plan.tunnels as u64,
        tunnel_mtu: Some(plan.tunnel_mtu),
        vni_base: Some(vni_base),
        machines: Vec::new(),
        unreclaimed: Vec::new(),
        observed_generation: None,
        change_error: String::new(),
        before_change: None,
    })
}

/// Makes the parts, [`PARTS_AT_ONCE`] requests at a time (one after another, each waited
/// for, was most of a large fleet's placement: 20 ms a part). All or nothing: when one
/// cannot be made, those made go again.
async fn make_parts(
    api: &Api<FleetPart>,
    fleet: &Fleet,
    specs: &[FleetPartSpec],
) -> Result<(), Error> {
    // Each request owns what it sends (a future borrowing the specs is refused by the
    // controller's runtime: its futures must hold for any lifetime).
    let creating: Vec<_> = (specs.iter())
        .map(|spec| {
            let (api, part, machine) = (api.clone(), new_part(fleet, spec), spec.machine.clone());
            async move {
                (
                    machine,
                    api.create(&PostParams::default(), &part).await.map(drop),
                )
            }
        })
        .collect();
    let made: Vec<(String, Result<(), kube::Error>)> = futures_util::stream::iter(creating)
        .buffer_unordered(PARTS_AT_ONCE)
        .collect()
        .await;
    let Some((machine, Err(e))) = made.iter().find(|(_, r)| r.is_err()) else {
        return Ok(());
    };
    for (m, _) in made.iter().filter(|(_, r)| r.is_ok()) {
        let name = plan::part_name(&fleet.name_any(), m);
        let _ = api.delete(&name, &DeleteParams::default()).await;
    }
    Err(Error(format!("making machine {machine}'s part: {e}")))
}

/// What each machine's image store must fetch for its part, said after a placement
/// (nothing when no node names an image).
fn to_fetch(parts: &[FleetPartSpec]) -> String {
    let all = || parts.iter().flat_map(|p| &p.software.images);
    let sent = all().any(|i| !i.from_registry);
    let pulled = all().any(|i| i.from_registry);
    let mut said = String::new();
    if sent {
        let each: Vec<String> = (parts.iter())
            .map(|p| format!("{} {:.1} MB", p.machine, p.fetch_bytes as f64 / 1e6))
            .collect();
        said += &format!("; image layers to fetch: {}", each.join(", "));
    }
    if pulled {
        said += "; each machine pulls the images the user's store lacked from their registries";
    }
    said
}

fn new_part(fleet: &Fleet, spec: &FleetPartSpec) -> FleetPart {
    let mut part = FleetPart::new(
        &plan::part_name(&fleet.name_any(), &spec.machine),
        spec.clone(),
    );
    part.metadata = ObjectMeta {
        name: part.metadata.name.take(),
        namespace: fleet.namespace(),
        labels: Some(
            [
                (FLEET_LABEL.to_string(), fleet.name_any()),
                (MACHINE_LABEL.to_string(), spec.machine.clone()),
            ]
            .into(),
        ),
        owner_references: fleet.controller_owner_ref(&()).map(|o| vec![o]),
        ..ObjectMeta::default()
    };
    part
}

async fn topology_text(ctx: &Ctx, fleet: &Fleet, ns: &str) -> Result<String, Error> {
    match (&fleet.spec.topology, &fleet.spec.config_map) {
        (Some(t), None) => Ok(t.clone()),
        (None, Some(cm)) => {
            let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
            let map = api
                .get(&cm.name)
                .await
                .map_err(|e| Error(format!("the topology's ConfigMap {ns}/{}: {e}", cm.name)))?;
            (map.data.and_then(|d| d.get(&cm.key).cloned())).ok_or_else(|| {
                Error(format!(
                    "ConfigMap {ns}/{} has no key {:?}",
                    cm.name, cm.key
                ))
            })
        }
        (Some(_), Some(_)) => Err(Error(
            "spec.topology and spec.configMap both given: expected one".into(),
        )),
        (None, None) => Err(Error(
            "no topology: expected spec.topology (the file's text) or spec.configMap".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{FleetImage, FleetPartSpec, Software};

    #[test]
    fn a_machine_lost_while_fetching_names_the_images_it_was_fetching() {
        let image = |reference: &str, layers: &[&str]| FleetImage {
            reference: reference.into(),
            layers: layers.iter().map(|l| l.to_string()).collect(),
            ..FleetImage::default()
        };
        let spec = FleetPartSpec {
            software: Software {
                images: vec![image("a:1", &["l1", "l2"]), image("b:1", &["l1", "l3"])],
                ..Software::default()
            },
            ..FleetPartSpec::default()
        };
        let part = FleetPart::new("f-m1", spec);
        assert_eq!(gone_message(&part, &[]), "its agent is gone");
        assert_eq!(
            gone_message(&part, &["l3".into()]),
            "its agent is gone while its store was fetching layers of b:1"
        );
        assert_eq!(
            gone_message(&part, &["l1".into()]),
            "its agent is gone while its store was fetching layers of a:1, b:1"
        );
    }
}
