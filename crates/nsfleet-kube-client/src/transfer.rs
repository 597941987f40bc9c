//! Images to the machines of a fleet on Kubernetes, from the user's own image store,
//! through the cluster's API: no registry. A part whose machine's store lacks layers of
//! its images says which (its status, while Fetching); only those are sent, each by an
//! exec of `nsfleet kube receive-layer` in that machine's agent, which checks the stream
//! against its digest on arrival. Machines are sent to at once, and a few layers at once
//! to each; a dropped connection resumes where the machine says its kept bytes end.
//!
//! It never writes to the user's store (it only holds the images it sends), and it never
//! decides what a machine lacks: the machine's own store says.

use anyhow::anyhow;
use nsfleet::topology::Topology;
use nsfleet_image::transfer::{LayerExport, Portable};
use nsfleet_image::{Hold, ImageId, RunConfig, Store};
use nsfleet_kube::crd::{self, FleetImage};
use nsfleet_kube::{agents, manifests, remote, Client};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

/// Layers sent to one machine at once.
const PER_MACHINE: usize = 4;
/// Tries of one layer: a dropped connection resumes, a refused stream starts again.
const TRIES: usize = 3;
/// How often the parts are asked what their machines lack.
const POLL: Duration = Duration::from_millis(250);
/// How long a try that failed waits for its machine to have a ready agent again (its
/// pod restarted or replaced: the layer resumes where the machine's store kept it).
const AGENT_BACK: Duration = Duration::from_secs(90);
/// How long a stream's connection may take no bytes before the try is given up (and
/// resumed on the next).
const STREAM_IDLE: Duration = Duration::from_secs(30);
/// How often the cluster's agents are listed while layers are on their way: one list for
/// every machine and layer in flight.
const AGENTS_POLL: Duration = Duration::from_secs(2);
/// How long a receiver whose connection failed is given to say why.
const SAID_BOUND: Duration = Duration::from_secs(5);
/// Bytes handed to the connection at a time.
const CHUNK: usize = 256 << 10;

/// The images a topology's nodes name, from the user's store at `root` (pulled into it
/// first when it lacks one, as a local `up` does; an image that cannot be had is an error
/// at the lines that name it, and nothing is made), and the hold that keeps them in the
/// store while they are sent. With `machines_pull`, an image the store lacks is not pulled
/// here: it is marked for each machine to pull from its registry.
pub fn fleet_images(
    topo: &Topology,
    file: &Path,
    root: &Path,
    machines_pull: bool,
) -> anyhow::Result<(Vec<FleetImage>, Option<Hold>)> {
    if machines_pull {
        return held_or_pulled(topo, root);
    }
    let mut found = topo.clone();
    let Some(hold) = nsfleet_client::fleet_images::find(&mut found, file, root)? else {
        return Ok((Vec::new(), None));
    };
    let store = Store::open(root)?;
    let sizes = image_sizes(&store)?;
    let images = (topo.images().into_iter())
        .map(|(reference, _)| sent_image(&store, reference, &sizes))
        .collect::<anyhow::Result<_>>()?;
    Ok((images, Some(hold)))
}

/// `fleet_images` with `machines_pull`: those the store holds, held and sent; the others
/// pulled by the machines.
fn held_or_pulled(topo: &Topology, root: &Path) -> anyhow::Result<(Vec<FleetImage>, Option<Hold>)> {
    if topo.images().is_empty() {
        return Ok((Vec::new(), None));
    }
    let store = Store::open(root)?;
    let sizes = image_sizes(&store)?;
    let (mut images, mut ids) = (Vec::new(), Vec::new());
    for (reference, _) in topo.images() {
        match store.find(&reference)? {
            Some(image) => {
                ids.push(image.id);
                images.push(sent_image(&store, reference, &sizes)?);
            }
            None => images.push(FleetImage {
                reference,
                from_registry: true,
                ..FleetImage::default()
            }),
        }
    }
    let hold = store.hold(&format!("fleet {}", topo.name), &ids)?;
    Ok((images, Some(hold)))
}

/// The unpacked bytes of each image of the store.
fn image_sizes(store: &Store) -> anyhow::Result<HashMap<ImageId, u64>> {
    Ok((store.list()?.into_iter())
        .map(|r| (r.id, r.size))
        .collect())
}

/// An image of the user's store, as the machines are sent it.
fn sent_image(
    store: &Store,
    reference: String,
    sizes: &HashMap<ImageId, u64>,
) -> anyhow::Result<FleetImage> {
    let p = (store.portable(&reference)?).ok_or_else(|| {
        anyhow!(
            "image {reference} left {} meanwhile",
            store.root().display()
        )
    })?;
    let size = sizes.get(&p.id).copied().unwrap_or(0);
    let layer_sizes = p.layers.iter().map(|l| store.layer_bytes(l)).collect();
    Ok(FleetImage {
        layer_sizes,
        ..fleet_image(reference, p, size)
    })
}

fn fleet_image(reference: String, p: Portable, size: u64) -> FleetImage {
    FleetImage {
        reference,
        from_registry: false,
        id: p.id.0,
        names: p.names,
        architecture: p.architecture,
        os: p.os,
        layers: p.layers,
        layer_sizes: Vec::new(),
        size,
        created_unix: p.created_unix,
        entrypoint: p.run.entrypoint,
        cmd: p.run.cmd,
        env: p.run.env,
        workdir: p.run.workdir,
        user: p.run.user,
    }
}

/// The image as a machine's store adopts it.
pub(crate) fn portable(i: &FleetImage) -> Portable {
    Portable {
        id: ImageId(i.id.clone()),
        names: i.names.clone(),
        architecture: i.architecture.clone(),
        os: i.os.clone(),
        layers: i.layers.clone(),
        created_unix: i.created_unix,
        run: RunConfig {
            entrypoint: i.entrypoint.clone(),
            cmd: i.cmd.clone(),
            env: i.env.clone(),
            workdir: i.workdir.clone(),
            user: i.user.clone(),
        },
    }
}

/// What was sent to one machine.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Moved {
    /// Layers its store took from this store.
    pub layers: u64,
    /// Bytes sent over the connection (a resumed layer's kept part not counted again).
    pub bytes: u64,
    /// Layers resumed after a dropped connection.
    pub resumed: u64,
    /// Tries the machine refused (what arrived did not match its digest, or the
    /// connection failed before it said where to start), each followed by another.
    pub tried_again: u64,
}

/// One layer's sending, done.
struct Sent {
    machine: String,
    /// Whether the machine took it (not: it had it already, from another fleet meanwhile).
    took: bool,
    bytes: u64,
    resumed: bool,
    tried_again: u64,
}

/// Sends the layers the parts of one fleet ask for, as they ask.
pub struct Shipper {
    client: Client,
    namespace: String,
    fleet: String,
    store: Store,
    quiet: bool,
    started: HashSet<(String, String)>,
    lanes: HashMap<String, Arc<Semaphore>>,
    running: JoinSet<Result<Sent, String>>,
    /// Per machine, what it was sent.
    pub moved: BTreeMap<String, Moved>,
    /// The fleet's images (those sent have their layers): what an error names.
    images: Vec<FleetImage>,
    /// The ready agents, by machine, kept listed by one task from the first layer a part
    /// asks for until the shipper is dropped (once the fleet is up).
    agents: Option<(watch::Receiver<ReadyAgents>, JoinSet<()>)>,
}

/// The ready agent of each machine, as last listed, or why they could not be listed.
type ReadyAgents = Result<HashMap<String, agents::Agent>, String>;

impl Shipper {
    /// A shipper for `fleet`, whose nodes' `images` are sent (those not pulled by the
    /// machines).
    pub fn new(
        client: Client,
        namespace: &str,
        fleet: &str,
        store: Store,
        quiet: bool,
        images: &[FleetImage],
    ) -> Self {
        Shipper {
            images: images.to_vec(),
            agents: None,
            client,
            namespace: namespace.to_string(),
            fleet: fleet.to_string(),
            store,
            quiet,
            started: HashSet::new(),
            lanes: HashMap::new(),
            running: JoinSet::new(),
            moved: BTreeMap::new(),
        }
    }

    /// Whether the fleet's nodes name any image sent from this store (else its parts
    /// need not be asked).
    pub fn has_images(&self) -> bool {
        self.images.iter().any(|i| !i.layers.is_empty())
    }

    /// The ready agents as last listed, listing them every [`AGENTS_POLL`] from now on.
    async fn ready_agents(&mut self) -> watch::Receiver<ReadyAgents> {
        if let Some((agents, _)) = &self.agents {
            return agents.clone();
        }
        let (tx, rx) = watch::channel(list_ready(&self.client).await);
        let mut keeper = JoinSet::new();
        let client = self.client.clone();
        keeper.spawn(async move {
            loop {
                tokio::time::sleep(AGENTS_POLL).await;
                if tx.send(list_ready(&client).await).is_err() {
                    return;
                }
            }
        });
        self.agents = Some((rx.clone(), keeper));
        rx
    }

    /// Sends what the parts ask for until a layer cannot be sent (a machine refused it
    /// `TRIES` times, or its disk is full): that error, naming the machine and the layer.
    /// Never returns otherwise: the caller drops it once the fleet is up.
    pub async fn run(&mut self) -> anyhow::Error {
        loop {
            if let Err(e) = self.look().await {
                return e;
            }
            let next = tokio::time::sleep(POLL);
            tokio::pin!(next);
            loop {
                tokio::select! {
                    Some(done) = self.running.join_next() => {
                        if let Err(e) = self.landed(done) {
                            return e;
                        }
                    }
                    _ = &mut next => break,
                }
            }
        }
    }

    fn landed(
        &mut self,
        done: Result<Result<Sent, String>, tokio::task::JoinError>,
    ) -> anyhow::Result<()> {
        let sent = done
            .map_err(|e| anyhow!("sending a layer: {e}"))?
            .map_err(anyhow::Error::msg)?;
        let m = self.moved.entry(sent.machine).or_default();
        m.layers += sent.took as u64;
        m.bytes += sent.bytes;
        m.resumed += sent.resumed as u64;
        m.tried_again += sent.tried_again;
        Ok(())
    }

    /// Starts sending each layer a part's machine lacks that is not on its way yet.
    async fn look(&mut self) -> anyhow::Result<()> {
        let (_, parts) = remote::get(&self.client, &self.namespace, &self.fleet).await?;
        for part in parts {
            let machine = part.spec.machine.clone();
            let missing = part.status.map(|s| s.missing_layers).unwrap_or_default();
            let new: Vec<String> = (missing.into_iter())
                .filter(|l| !self.started.contains(&(machine.clone(), l.clone())))
                .collect();
            if new.is_empty() {
                continue;
            }
            let agents = self.ready_agents().await;
            // Not listed ready yet (the list is up to AGENTS_POLL old): asked again at the
            // next look. An agent that stays gone is the controller's to call Lost.
            let Ok(agent) = ready_agent(&agents.borrow(), &machine) else {
                continue;
            };
            if !self.quiet {
                eprintln!(
                    "  {machine}: its image store lacks {} layers: sending them",
                    new.len()
                );
            }
            let lane = (self.lanes.entry(machine.clone()))
                .or_insert_with(|| Arc::new(Semaphore::new(PER_MACHINE)))
                .clone();
            for layer in new {
                self.started.insert((machine.clone(), layer.clone()));
                let images = crd::with_any_layer(&self.images, std::slice::from_ref(&layer));
                let to = To {
                    client: self.client.clone(),
                    agent: agent.clone(),
                    agents: agents.clone(),
                    quiet: self.quiet,
                    images: images.join(", "),
                };
                let store = self.store.clone();
                let lane = lane.clone();
                self.running.spawn(async move {
                    let _turn = lane.acquire_owned().await.map_err(|e| e.to_string())?;
                    to.send(store, layer).await
                });
            }
        }
        Ok(())
    }
}

/// A machine's agent, reached through the cluster.
struct To {
    client: Client,
    agent: agents::Agent,
    /// The ready agents, as the shipper keeps them listed.
    agents: watch::Receiver<ReadyAgents>,
    quiet: bool,
    /// The images the layer sent is of.
    images: String,
}

impl To {
    /// One layer to this machine, tried again after a dropped connection (resuming) or a
    /// refused stream (from the start), each time by the machine's agent then (one
    /// restarted or replaced since is waited for): what it took, or why not, naming the
    /// machine, the layer and its images.
    async fn send(mut self, store: Store, diff_id: String) -> Result<Sent, String> {
        let machine = self.agent.machine.clone();
        let short = diff_id
            .trim_start_matches("sha256:")
            .get(..12)
            .unwrap_or(&diff_id)
            .to_string();
        let images = self.images.clone();
        let named = |e: String| format!("machine {machine}: layer {short} (of {images}): {e}");
        let id = diff_id.clone();
        let export = tokio::task::spawn_blocking(move || store.export_layer(&id))
            .await
            .map_err(|e| named(e.to_string()))?
            .map_err(|e| named(format!("{e:#}")))?;
        let export = Arc::new(export);
        let mut sent = Sent {
            machine: machine.clone(),
            took: false,
            bytes: 0,
            resumed: false,
            tried_again: 0,
        };
        let mut last = String::new();
        for _ in 0..TRIES {
            // A stream to an agent whose pod went away may never end: the try ends then.
            let tried = tokio::select! {
                r = self.once(export.clone()) => r,
                why = agent_replaced(self.agents.clone(), &self.agent) => Err((0, why)),
            };
            match tried {
                Ok((from, bytes)) => {
                    sent.bytes += bytes;
                    sent.took = from.is_some();
                    let from = from.unwrap_or(0);
                    sent.resumed |= from > 0;
                    if !self.quiet && from > 0 {
                        eprintln!(
                            "  {machine}: layer {short}: resumed at byte {from} of {}",
                            export.size()
                        );
                    }
                    return Ok(sent);
                }
                Err((bytes, e)) if e.contains("is full") => {
                    return Err(named(format!("{e} (after {bytes} bytes)")))
                }
                Err((bytes, e)) => {
                    sent.bytes += bytes;
                    sent.tried_again += 1;
                    if !self.quiet {
                        eprintln!("  {machine}: layer {short}: {e}; trying again");
                    }
                    last = e;
                    self.agent = agent_back(self.agents.clone(), &machine)
                        .await
                        .map_err(named)?;
                }
            }
        }
        Err(named(format!("not taken after {TRIES} tries: {last}")))
    }

    /// One try: the machine says where to start, the rest of the stream is sent, and the
    /// machine's word on it read. Where it started and the bytes sent, or the bytes sent
    /// and what went wrong.
    async fn once(&self, export: Arc<LayerExport>) -> Result<(Option<u64>, u64), (u64, String)> {
        let args: Vec<String> = vec![
            "kube".into(),
            "receive-layer".into(),
            export.diff_id().into(),
            export.digest().into(),
            export.size().to_string(),
        ];
        let fail = |e: String| (0, e);
        let mut proc = (remote::open_in_agent(&self.client, &self.agent, &args).await)
            .map_err(|e| fail(e.to_string()))?;
        let mut out =
            tokio::io::BufReader::new(proc.stdout().ok_or_else(|| fail("no stdout".into()))?);
        let mut err = proc.stderr().ok_or_else(|| fail("no stderr".into()))?;
        let mut first = String::new();
        let _ = out.read_line(&mut first).await;
        let from = match first.trim().strip_prefix("from ") {
            _ if first.trim() == "present" => None,
            Some(n) => Some(
                n.parse::<u64>()
                    .map_err(|_| fail(format!("the machine said {first:?}")))?,
            ),
            None => {
                let mut said = String::new();
                let _ = err.read_to_string(&mut said).await;
                return Err(fail(last_line(&said, "the receiver ended at once")));
            }
        };
        let mut stdin = proc.stdin().ok_or_else(|| fail("no stdin".into()))?;
        let mut sent = 0u64;
        if let Some(from) = from {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
            let stream = export.clone();
            let producer = tokio::task::spawn_blocking(move || {
                let mut w = std::io::BufWriter::with_capacity(CHUNK, Chunks(tx));
                stream.write_from(from, &mut w)?;
                w.flush()?;
                anyhow::Ok(())
            });
            while let Some(mut chunk) = rx.recv().await {
                let dropped = match faults::meddle(from + sent, &mut chunk) {
                    faults::Fault::Stall(rest) => {
                        stdin
                            .write_all(&chunk)
                            .await
                            .map_err(|e| (sent, e.to_string()))?;
                        sent += chunk.len() as u64;
                        eprintln!(
                            "  {}: the stream stalls after {} bytes (injected)",
                            self.agent.machine,
                            from + sent
                        );
                        tokio::time::sleep(STALL).await;
                        chunk = rest;
                        false
                    }
                    faults::Fault::Drop => true,
                    faults::Fault::None => false,
                };
                if dropped {
                    stdin
                        .write_all(&chunk)
                        .await
                        .map_err(|e| (sent, e.to_string()))?;
                    sent += chunk.len() as u64;
                    proc.abort();
                    return Err((
                        sent,
                        format!(
                            "the connection dropped after {} bytes (injected)",
                            from + sent
                        ),
                    ));
                }
                // A connection whose other end is gone (its agent's container killed) may
                // take writes no more without failing them.
                let wrote = tokio::time::timeout(STREAM_IDLE, stdin.write_all(&chunk)).await;
                let why = match wrote {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(e.to_string()),
                    Err(_) => Some(format!("it took nothing for {} s", STREAM_IDLE.as_secs())),
                };
                if let Some(why) = why {
                    // The receiver may have ended first, saying why (its store is full).
                    let said = tokio::time::timeout(SAID_BOUND, read_all(&mut err)).await;
                    let why = match said.ok().map(|t| last_line(&t, "")) {
                        Some(line) if !line.is_empty() => line,
                        _ => format!("the connection dropped after {} bytes: {why}", from + sent),
                    };
                    return Err((sent, why));
                }
                sent += chunk.len() as u64;
            }
            match producer.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err((sent, format!("reading it from this store: {e:#}"))),
                Err(e) => return Err((sent, e.to_string())),
            }
        }
        let _ = stdin.shutdown().await;
        drop(stdin);
        let (mut said, mut rest) = (String::new(), String::new());
        let _ = tokio::join!(err.read_to_string(&mut said), out.read_to_string(&mut rest));
        drop((out, err));
        let code = remote::finished(proc)
            .await
            .map_err(|e| (sent, e.to_string()))?;
        if code != 0 {
            return Err((sent, last_line(&said, &format!("exit code {code}"))));
        }
        Ok((from, sent))
    }
}

/// Every ready agent of the cluster, by machine.
async fn list_ready(client: &Client) -> ReadyAgents {
    let all = agents::list(client, manifests::SYSTEM, None).await;
    let all = all.map_err(|e| e.to_string())?;
    Ok((all.into_iter())
        .filter(|a| a.ready)
        .map(|a| (a.machine.clone(), a))
        .collect())
}

/// `machine`'s ready agent in `agents`, or why there is none.
fn ready_agent(agents: &ReadyAgents, machine: &str) -> Result<agents::Agent, String> {
    match agents {
        Ok(ready) => (ready.get(machine).cloned())
            .ok_or_else(|| format!("machine {machine} has no ready nsfleet agent")),
        Err(e) => Err(e.clone()),
    }
}

/// Resolves once a list of the agents shows `agent`'s machine with no ready agent, or
/// another pod's: why. A list that failed says nothing either way (a stream to an agent
/// that is gone meanwhile ends by its own bound, [`STREAM_IDLE`]).
async fn agent_replaced(mut agents: watch::Receiver<ReadyAgents>, agent: &agents::Agent) -> String {
    loop {
        if agents.changed().await.is_err() {
            return "the agents are no longer listed".to_string();
        }
        let now = match &*agents.borrow_and_update() {
            Ok(ready) => ready.get(&agent.machine).map(|a| a.pod.clone()),
            Err(_) => continue,
        };
        match now {
            Some(pod) if pod == agent.pod => {}
            Some(pod) => return format!("its agent {} was replaced by {pod}", agent.pod),
            None => return format!("machine {} has no ready nsfleet agent", agent.machine),
        }
    }
}

/// Machine `machine`'s agent after a try failed, from a list made since (the one before
/// may still show an agent whose container just died), waiting up to [`AGENT_BACK`] for
/// it to be ready (a pod restarting or replaced by its DaemonSet).
async fn agent_back(
    mut agents: watch::Receiver<ReadyAgents>,
    machine: &str,
) -> Result<agents::Agent, String> {
    let until = tokio::time::Instant::now() + AGENT_BACK;
    agents.mark_unchanged();
    if tokio::time::timeout_at(until, agents.changed())
        .await
        .is_err()
    {
        return Err(format!(
            "the agents were not listed within {} s",
            AGENT_BACK.as_secs()
        ));
    }
    loop {
        let last = match ready_agent(&agents.borrow_and_update(), machine) {
            Ok(a) => return Ok(a),
            Err(e) => e,
        };
        match tokio::time::timeout_at(until, agents.changed()).await {
            Ok(Ok(())) => {}
            _ => return Err(format!("{last} within {} s", AGENT_BACK.as_secs())),
        }
    }
}

/// Everything `r` gives until it ends (what it gave so far when it fails).
async fn read_all(r: &mut (impl tokio::io::AsyncRead + Unpin)) -> String {
    let mut text = String::new();
    let _ = r.read_to_string(&mut text).await;
    text
}

fn last_line(text: &str, otherwise: &str) -> String {
    (text.lines().rev())
        .map(|l| l.trim())
        .find(|l| !l.is_empty())
        .map_or_else(
            || otherwise.to_string(),
            |l| l.trim_start_matches("nsfleet: ").to_string(),
        )
}

/// A writer that hands what it is given to the connection's task.
struct Chunks(tokio::sync::mpsc::Sender<Vec<u8>>);

impl Write for Chunks {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        (self.0.blocking_send(buf.to_vec())).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the connection ended")
        })?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How long an injected stall holds a stream (the tests take its machine's agent away
/// meanwhile).
const STALL: Duration = Duration::from_secs(20);

/// Faults for the tests (built with `fault-injection`): `NSFLEET_FAULT_SEND=drop:N` drops
/// the connection of the first layer stream of this process to pass byte N, once;
/// `stall:N` holds that stream for [`STALL`] before byte N, once; `corrupt:N` changes its
/// byte N, once; `corrupt-every:N` changes byte N of every stream. Without the feature,
/// nothing.
mod faults {
    /// What a chunk about to be sent meets (without the feature, nothing).
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    pub enum Fault {
        None,
        /// The chunk was cut where the connection drops.
        Drop,
        /// The chunk was cut where the stream stalls; the rest follows the stall.
        Stall(Vec<u8>),
    }

    #[cfg(feature = "fault-injection")]
    pub fn meddle(at: u64, chunk: &mut Vec<u8>) -> Fault {
        use std::sync::atomic::{AtomicBool, Ordering};
        static DONE: AtomicBool = AtomicBool::new(false);
        let Ok(plan) = std::env::var("NSFLEET_FAULT_SEND") else {
            return Fault::None;
        };
        let Some((what, n)) = plan.split_once(':') else {
            return Fault::None;
        };
        let Ok(n) = n.parse::<u64>() else {
            return Fault::None;
        };
        let end = at + chunk.len() as u64;
        if n < at || n >= end {
            return Fault::None;
        }
        let i = (n - at) as usize;
        if what == "corrupt-every" {
            chunk[i] ^= 0xff;
            return Fault::None;
        }
        if DONE.swap(true, Ordering::SeqCst) {
            return Fault::None;
        }
        match what {
            "drop" => {
                chunk.truncate(i);
                Fault::Drop
            }
            "stall" => Fault::Stall(chunk.split_off(i)),
            "corrupt" => {
                chunk[i] ^= 0xff;
                Fault::None
            }
            _ => Fault::None,
        }
    }

    #[cfg(not(feature = "fault-injection"))]
    #[inline(always)]
    pub fn meddle(_at: u64, _chunk: &mut Vec<u8>) -> Fault {
        Fault::None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_agents_store_is_where_its_commands_look_by_default() {
        assert_eq!(
            nsfleet_kube::manifests::IMAGE_STORE,
            nsfleet_image::DEFAULT_ROOT
        );
    }
}
