//! `wait`: until the fleet is ready by a condition (see `ready`), its standing told to the
//! asker as it goes, and the end told to the fleet's watchers too (`events`).

use crate::control::{self, Reply};
use crate::ready::{Condition, Outcome};
use crate::watch::FleetEvent;
use crate::Supervisor;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

impl Supervisor {
    pub(super) fn wait(
        &self,
        conn: &UnixStream,
        until: Condition,
        bound: Duration,
    ) -> std::io::Result<()> {
        let start = Instant::now();
        // An asker that stops reading must not hold the wait (and the namespaces it
        // reads) on a write.
        conn.set_write_timeout(Some(Duration::from_secs(1)))?;
        // An asker gone (Ctrl-C) ends the wait: progress it cannot write.
        let outcome = self.wait_ready(until, bound, |standing| {
            let r = Reply::Waiting {
                standing: standing.clone(),
                elapsed_s: start.elapsed().as_secs_f64(),
            };
            control::write_line(conn, &r).is_ok()
        });
        let since_up_s = self.born.elapsed().as_secs_f64();
        let elapsed_s = start.elapsed().as_secs_f64();
        let (reply, met) = match outcome {
            Outcome::Met { of } => (
                Reply::Ready {
                    condition: until,
                    after_s: elapsed_s,
                    since_up_s,
                    of,
                },
                true,
            ),
            Outcome::Failed(failed) => (
                Reply::Unready {
                    condition: until,
                    failed,
                    standing: None,
                    elapsed_s,
                },
                false,
            ),
            Outcome::Unmet(standing) => (
                Reply::Unready {
                    condition: until,
                    failed: Vec::new(),
                    standing: Some(standing),
                    elapsed_s,
                },
                false,
            ),
            Outcome::Gone => return Ok(()),
            Outcome::Error(message) => return control::write_line(conn, &Reply::error(message)),
        };
        self.watchers.publish(&FleetEvent::Ready {
            condition: until,
            met,
            since_up_s,
        });
        control::write_line(conn, &reply)
    }
}
