//! What a node's kernel says of where it can send, asked of the fleet's supervisor: its
//! routes, and ICMP echoes from it. For a scenario's expectations; no command prints them.

use super::FleetRef;
use anyhow::bail;
use nsfleet::control::{Reply, Request, RouteDst};
use std::net::IpAddr;
use std::time::Duration;

/// Node `node`'s unicast routes of its main table, both families, as its kernel has them
/// now.
pub fn routes(fleet: &FleetRef, node: &str) -> anyhow::Result<Vec<RouteDst>> {
    let mut client = fleet.connect()?;
    let req = Request::Routes { node: node.into() };
    match client.call(&req)? {
        Reply::Routes { routes, .. } => Ok(routes),
        other => bail!("unexpected reply from the supervisor: {other:?}"),
    }
}

/// What a [`ping`] saw: `received` of `sent` echo requests answered, and each answered
/// one's round trip in ms, in the order they were sent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pinged {
    pub sent: u32,
    pub received: u32,
    pub rtt_ms: Vec<f64>,
}

/// `count` ICMP echo requests from node `node` to `addr`, `interval` apart, each answered
/// within `timeout` or counted lost (the supervisor takes 1 to 100,000 of them, an
/// interval and a timeout of 1 ms to 60 s). Returns once the last one is answered or
/// lost.
pub fn ping(
    fleet: &FleetRef,
    node: &str,
    addr: IpAddr,
    count: u32,
    interval: Duration,
    timeout: Duration,
) -> anyhow::Result<Pinged> {
    let mut client = fleet.connect()?;
    // The whole schedule, the last one's wait, and room for the supervisor to answer.
    let takes = interval.saturating_mul(count) + timeout + Duration::from_secs(10);
    client.set_timeout(Some(takes));
    let req = Request::Ping {
        node: node.into(),
        addr,
        count,
        interval_ms: millis(interval),
        timeout_ms: millis(timeout),
    };
    match client.call(&req)? {
        Reply::Pinged {
            sent,
            received,
            rtt_ms,
            ..
        } => Ok(Pinged {
            sent,
            received,
            rtt_ms,
        }),
        other => bail!("unexpected reply from the supervisor: {other:?}"),
    }
}

/// `d` in whole milliseconds, rounded up: 1 µs is 1 ms, not 0 (which the supervisor
/// refuses).
fn millis(d: Duration) -> u64 {
    d.as_micros().div_ceil(1000).min(u128::from(u64::MAX)) as u64
}
