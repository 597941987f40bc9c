//! `nsfleet capture NAME NODE:IFACE... --kube`: each machine's interfaces captured there,
//! by its agent (`capture --until-stdin-closes`, its output streamed back), and the
//! machines' captures made one here: pcapng merged in the order of the packets'
//! timestamps (`capture::merge`), or lines as they come, whole. Ctrl-C here, or a reader
//! of ours that goes, ends every machine's capture.

use crate::Cluster;
use anyhow::{anyhow, Context};
use nsfleet_client::capture::merge::Merge;
use nsfleet_kube::agents::Agent;
use nsfleet_kube::remote;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a packet waits for older ones from the other machines.
const HOLD: Duration = Duration::from_millis(300);

/// What to capture, as for a local capture.
pub struct CaptureOn {
    pub targets: Vec<String>,
    pub write: Option<PathBuf>,
    pub count: Option<u64>,
    pub snaplen: u32,
    pub filter: Vec<String>,
}

/// Captures on the interfaces' machines; returns the first machine's capture's exit code
/// that is not 0, or 0.
pub fn capture(name: &str, a: CaptureOn, c: &Cluster) -> anyhow::Result<i32> {
    let out: Box<dyn Write + Send> = match a.write.as_deref() {
        None => Box::new(std::io::stdout()),
        Some(p) if p == Path::new("-") => Box::new(std::io::stdout()),
        Some(p) => {
            Box::new(std::fs::File::create(p).with_context(|| format!("-w {}", p.display()))?)
        }
    };
    c.with_client(|client| async move {
        let groups = by_machine(&client, c, name, &a.targets).await?;
        let interfaces: Vec<u32> = groups.iter().map(|(_, t)| t.len() as u32).collect();
        let (feed, merged) = mpsc::channel();
        let pcapng = a.write.is_some();
        let count = a.count;
        let merging = std::thread::spawn(move || merge(merged, out, &interfaces, pcapng, count));
        let runs = groups.iter().enumerate().map(|(i, (agent, targets))| {
            let streams = remote::Streams {
                stdout: Feed {
                    stream: i,
                    to: feed.clone(),
                },
                stderr: std::io::stderr(),
                stdin: true,
            };
            let (args, client) = (machine_args(name, &a, targets), &client);
            async move { remote::run_in_agent(client, agent, &args, streams).await }
        });
        let codes = futures_util::future::join_all(runs).await;
        drop(feed);
        merging
            .join()
            .map_err(|_| anyhow!("the merge of the machines' captures failed"))??;
        let mut first_failed = 0;
        for code in codes {
            let code = code?;
            if first_failed == 0 {
                first_failed = code;
            }
        }
        Ok(first_failed)
    })
}

/// The targets grouped by machine, in the order they were given, with each machine's agent.
async fn by_machine(
    client: &nsfleet_kube::Client,
    c: &Cluster,
    name: &str,
    targets: &[String],
) -> anyhow::Result<Vec<(Agent, Vec<String>)>> {
    if targets.is_empty() {
        anyhow::bail!("no interface to capture: give NODE:IFACE");
    }
    let mut groups: Vec<(Agent, Vec<String>)> = Vec::new();
    for t in targets {
        let node = t.split_once(':').map_or(t.as_str(), |(n, _)| n);
        let (_, agent) = remote::node_home(client, &c.namespace, name, node).await?;
        match groups.iter_mut().find(|(a, _)| a.machine == agent.machine) {
            Some((_, ts)) => ts.push(t.clone()),
            None => groups.push((agent, vec![t.clone()])),
        }
    }
    Ok(groups)
}

/// The capture a machine runs: its interfaces, the same snapshot length, count and
/// filter, pcapng to standard output if pcapng is asked for here.
fn machine_args(name: &str, a: &CaptureOn, targets: &[String]) -> Vec<String> {
    let mut args = vec!["capture".to_string(), name.into()];
    args.extend(targets.iter().cloned());
    args.extend([
        "-s".into(),
        a.snaplen.to_string(),
        "--until-stdin-closes".into(),
    ]);
    if let Some(n) = a.count {
        args.extend(["-c".into(), n.to_string()]);
    }
    if a.write.is_some() {
        args.extend(["-w".into(), "-".into()]);
    }
    args.extend(a.filter.iter().cloned());
    args
}

/// One machine's output, handed to the merging thread as it comes; its end said when
/// dropped. A write fails once the merge is over, which ends that machine's capture.
struct Feed {
    stream: usize,
    to: mpsc::Sender<(usize, Option<Vec<u8>>)>,
}

impl Write for Feed {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        (self.to.send((self.stream, Some(b.to_vec()))))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        let _ = self.to.send((self.stream, None));
    }
}

/// The machines' outputs made one, until every machine's has ended or `count` packets are
/// written.
fn merge(
    from: mpsc::Receiver<(usize, Option<Vec<u8>>)>,
    out: Box<dyn Write + Send>,
    interfaces: &[u32],
    pcapng: bool,
    count: Option<u64>,
) -> anyhow::Result<()> {
    let mut sink = match pcapng {
        true => Sink::Pcapng(Merge::new(out, interfaces, count)),
        false => Sink::Lines {
            out,
            partial: vec![Vec::new(); interfaces.len()],
            left: count.unwrap_or(u64::MAX),
        },
    };
    let mut live = interfaces.len();
    while live > 0 && !sink.done() {
        match from.recv_timeout(Duration::from_millis(50)) {
            Ok((i, Some(bytes))) => sink.push(i, &bytes)?,
            Ok((i, None)) => {
                live -= 1;
                sink.end(i);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if let Sink::Pcapng(m) = &mut sink {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)?
                .saturating_sub(HOLD);
            m.release(now.as_nanos() as u64)?;
        }
    }
    if let Sink::Pcapng(m) = sink {
        m.finish()?;
    }
    Ok(())
}

/// Where the machines' outputs go: one pcapng, or whole lines.
enum Sink {
    Pcapng(Merge<Box<dyn Write + Send>>),
    Lines {
        out: Box<dyn Write + Send>,
        /// Each machine's line begun and not yet ended.
        partial: Vec<Vec<u8>>,
        left: u64,
    },
}

impl Sink {
    fn push(&mut self, i: usize, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::Pcapng(m) => m.push(i, bytes),
            Sink::Lines { out, partial, left } => {
                partial[i].extend_from_slice(bytes);
                while let Some(end) = partial[i].iter().position(|&b| b == b'\n') {
                    if *left == 0 {
                        break;
                    }
                    let line: Vec<u8> = partial[i].drain(..=end).collect();
                    out.write_all(&line)?;
                    *left -= 1;
                }
                out.flush()?;
            }
        }
        Ok(())
    }

    fn end(&mut self, i: usize) {
        if let Sink::Pcapng(m) = self {
            m.end(i);
        }
    }

    fn done(&self) -> bool {
        match self {
            Sink::Pcapng(m) => m.done(),
            Sink::Lines { left, .. } => *left == 0,
        }
    }
}
