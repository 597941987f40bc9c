//! Fault injection, for tests only: built with the `fault-injection` feature,
//! `NSFLEET_FAULT=N:fail` makes the N-th kernel operation of this process fail
//! (`N:fail:ENOSPC`, `ENOMEM`, `EMFILE`, `ENOBUFS`: with the kernel's errno), and
//! `NSFLEET_FAULT=N:kill` ends the process right there (_exit: no unwinding, no
//! cleanup). `NSFLEET_FAULT=count` fails nothing and logs each operation's number to
//! stderr. A plan may count from a stage instead of from the start: `N:fail@apply` fails
//! the N-th operation after the latest [`stage`]`("apply")` (each `nsfleet apply`), and
//! nothing before the first. Without the feature, [`point`] and [`stage`] are empty
//! inline functions.
//!
//! Points mark the operations of creating a fleet: a namespace created or entered, a
//! netlink batch sent, a sysctl written, a process started, a host-link journal line.

#[cfg(feature = "fault-injection")]
mod armed {
    use std::io;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::OnceLock;

    enum Plan {
        Count,
        /// The operation number, and the errno to fail with (none: an injected-fault error).
        Fail(u64, Option<i32>),
        Kill(u64),
    }

    /// Operations counted so far, from the start or from the plan's stage.
    static COUNT: AtomicU64 = AtomicU64::new(0);
    /// Whether the plan's stage has been reached (always, for a plan without one).
    static REACHED: AtomicBool = AtomicBool::new(false);

    /// The plan, and the stage it counts from.
    fn plan() -> Option<&'static (Plan, Option<String>)> {
        static PLAN: OnceLock<Option<(Plan, Option<String>)>> = OnceLock::new();
        PLAN.get_or_init(|| {
            let v = std::env::var("NSFLEET_FAULT").ok()?;
            let (v, from) = match v.split_once('@') {
                Some((v, stage)) => (v.to_string(), Some(stage.to_string())),
                None => (v, None),
            };
            REACHED.store(from.is_none(), Ordering::SeqCst);
            Some((parse(&v)?, from))
        })
        .as_ref()
    }

    fn parse(v: &str) -> Option<Plan> {
        {
            if v == "count" {
                return Some(Plan::Count);
            }
            let mut parts = v.split(':');
            let n: u64 = parts.next()?.parse().ok()?;
            match (parts.next()?, parts.next()) {
                ("fail", None) => Some(Plan::Fail(n, None)),
                ("fail", Some(errno)) => Some(Plan::Fail(n, Some(errno_named(errno)?))),
                ("kill", None) => Some(Plan::Kill(n)),
                _ => None,
            }
        }
    }

    pub fn stage(name: &str) {
        if plan().is_some_and(|(_, from)| from.as_deref() == Some(name)) {
            COUNT.store(0, Ordering::SeqCst);
            REACHED.store(true, Ordering::SeqCst);
        }
    }

    fn errno_named(name: &str) -> Option<i32> {
        Some(match name {
            "ENOSPC" => libc::ENOSPC,
            "ENOMEM" => libc::ENOMEM,
            "EMFILE" => libc::EMFILE,
            "ENOBUFS" => libc::ENOBUFS,
            _ => return None,
        })
    }

    pub fn point(what: &str) -> io::Result<()> {
        let Some((plan, _)) = plan() else {
            return Ok(());
        };
        if !REACHED.load(Ordering::SeqCst) {
            return Ok(());
        }
        let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
        match *plan {
            Plan::Count => eprintln!("nsfleet: fault point {n}: {what}"),
            Plan::Fail(at, None) if at == n => {
                return Err(io::Error::other(format!(
                    "injected fault at kernel operation {n} ({what})"
                )));
            }
            // The kernel's own error, as exhaustion gives it.
            Plan::Fail(at, Some(errno)) if at == n => {
                return Err(io::Error::from_raw_os_error(errno))
            }
            Plan::Kill(at) if at == n => {
                // Not kill(getpid(), SIGKILL): the supervisor is PID 1 of its namespace,
                // and the kernel ignores that from inside. _exit ends the process as a
                // kill would: no unwinding, no destructors, no flushing.
                eprintln!("nsfleet: fault point {n} ({what}): dying here");
                nsfleet_sys::exit_now(137);
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(feature = "fault-injection")]
pub use armed::{point, stage};

/// A kernel operation is about to happen; with the feature, possibly an injected fault.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn point(_what: &str) -> std::io::Result<()> {
    Ok(())
}

/// A stage of the process's work begins (`apply`): a plan may count from here.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn stage(_name: &str) {}
