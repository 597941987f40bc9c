//! The ids a fleet's confined nodes are outside: one range of [`RANGE`] ids per fleet,
//! taken from nsfleet's own block for as long as the supervisor lives.
//!
//! The block is nsfleet's by record, not by a file on the host: [`BLOCK`] below, which
//! stays clear of the ids people and distributions use (systemd's reservations for
//! users, dynamic users and nspawn's containers end below it). A slot whose ids a user
//! of the host's /etc/passwd, a group of /etc/group or a range of /etc/subuid or
//! /etc/subgid has is never taken.
//!
//! A slot is held by an abstract Unix socket, `@nsfleet-ids-<first id>`, bound in the
//! host's network namespace by the supervisor: two supervisors cannot bind one name, and
//! the kernel lets go of it when the supervisor ends, however it ends (`down`, a crash,
//! `kill -9`). Nothing is written, so nothing is left for `clean`; the range is given
//! back only once the supervisor, and with it every process of the fleet (PID 1 of its
//! PID namespace), is gone.

use nsfleet_sys::userns::IdRange;
use std::os::unix::net::UnixListener;

/// Ids per fleet: a node's root is the first, and the ids of an image's files (up to
/// 65,535, `nobody`) are the ones after it, as Docker's and podman's ranges.
pub const RANGE: u32 = 65_536;

/// nsfleet's block: 4,095 slots from 0x7000_0000 (1,879,048,192), after systemd's
/// container range (524,288 to 1,879,048,191) and before its foreign range
/// (0x7FFE_0000) and the ids past 2^31 that some tools take as negative.
pub const BLOCK: std::ops::Range<u32> = 0x7000_0000..0x7FFE_0000;

/// A fleet's range, held as long as this lives.
pub struct IdLease {
    pub ids: IdRange,
    /// None for a user's fleet: its ids are its own user namespace's.
    _held: Option<UnixListener>,
}

/// Takes the first free slot of [`BLOCK`] that nobody of the host's files has, starting
/// from one chosen by the fleet's name (so that fleets started together rarely try the
/// same slots).
pub fn take(fleet: &str) -> std::io::Result<IdLease> {
    if !nsfleet_sys::userns::in_host_namespace()? {
        return Ok(IdLease {
            ids: users_range()?,
            _held: None,
        });
    }
    let taken = host_ids();
    let slots = (BLOCK.end - BLOCK.start) / RANGE;
    let start = fleet
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b.into()))
        % slots;
    for k in 0..slots {
        let first = BLOCK.start + (start + k) % slots * RANGE;
        let range = first..first + RANGE;
        if taken
            .iter()
            .any(|t| t.start < range.end && range.start < t.end)
        {
            continue;
        }
        if let Some(held) = hold(first)? {
            let ids = IdRange {
                first,
                count: RANGE,
            };
            return Ok(IdLease {
                ids,
                _held: Some(held),
            });
        }
    }
    Err(std::io::Error::other(format!(
        "every one of nsfleet's {slots} id ranges ({}-{}) is held by a fleet: take one down",
        BLOCK.start,
        BLOCK.end - 1
    )))
}

/// A user's fleet (its supervisor root of a user namespace the user made): its confined
/// nodes' root is the fleet's, the user, as rootless podman's containers' is, and their
/// other ids are the fleet's next ones, the user's subordinate ids where they have them
/// (an image's owners), as many as the fleet's user namespace has, up to [`RANGE`].
/// Not a subordinate id for root: a user's supervisor may not trace (nor so much as
/// setns through a pidfd into) a process of another id than theirs, and a node's init is
/// reached that way.
fn users_range() -> std::io::Result<IdRange> {
    let mapped = |gid| -> std::io::Result<u32> {
        let map = nsfleet_sys::userns::own_map(gid)?;
        // Ids 0, 1, 2... as far as they run on without a gap.
        let mut next = 0u32;
        while let Some(&(inside, _, n)) = map
            .iter()
            .find(|&&(inside, _, n)| inside <= next && next - inside < n)
        {
            next = inside.saturating_add(n);
        }
        Ok(next)
    };
    let count = mapped(false)?.min(mapped(true)?).clamp(1, RANGE);
    Ok(IdRange { first: 0, count })
}

/// The socket that holds slot `first`, or `None` if another fleet holds it.
fn hold(first: u32) -> std::io::Result<Option<UnixListener>> {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("nsfleet-ids-{first}");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    match UnixListener::bind_addr(&addr) {
        Ok(l) => Ok(Some(l)),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Ok(None),
        Err(e) => Err(e),
    }
}

/// The ids the host's users, groups and subordinate ranges have.
fn host_ids() -> Vec<std::ops::Range<u32>> {
    let mut out = Vec::new();
    for (file, field) in [("/etc/passwd", 2), ("/etc/group", 2)] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for id in text
            .lines()
            .filter_map(|l| l.split(':').nth(field)?.parse::<u32>().ok())
        {
            out.push(id..id.saturating_add(1));
        }
    }
    for file in ["/etc/subuid", "/etc/subgid"] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for l in text.lines() {
            let mut f = l.split(':').skip(1).map(|v| v.trim().parse::<u32>());
            if let (Some(Ok(first)), Some(Ok(count))) = (f.next(), f.next()) {
                out.push(first..first.saturating_add(count));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_fleets_never_hold_one_range_and_a_range_comes_back_when_its_fleet_goes() {
        let a = take("ids-test").unwrap();
        let b = take("ids-test").unwrap();
        assert_ne!(a.ids, b.ids);
        for l in [&a, &b] {
            assert!(BLOCK.contains(&l.ids.first) && l.ids.count == RANGE);
            assert!(l.ids.first + RANGE <= BLOCK.end);
        }
        let first = a.ids;
        drop(a);
        assert_eq!(take("ids-test").unwrap().ids, first);
    }
}
