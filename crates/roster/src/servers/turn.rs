//! A turn: what a client's request waits for before it is answered, and what it leaves to the
//! background. DESIGN's rule: a turn waits only for what it needs.
//!
//! - A call of a server's tool waits at most for that server's own listing, and only when the
//!   server announced a change (or was never listed); never for another server. A list (tools,
//!   prompts, resources, a search, the skill catalog) waits, up to `turn_wait`, for the servers
//!   that announced a change and those never listed — one still starting included.
//! - A server a turn waited for in vain is not waited for again until its listing ends
//!   ([`roster_core::ServerSchedule::waited_in_vain`]): the listing goes on in the background,
//!   and its delta reaches every session as any other does (a `list_changed`, a note).
//! - Stale-while-revalidate: a listing whose hold ran out with no change announced, and a
//!   failed server past its backoff, are served as they are and listed in the background, one
//!   such listing per server at a time. A server's `ttlMs` shorter than `min_ttl` (0 included)
//!   counts as `min_ttl`, so such a server costs one listing per `min_ttl` however many
//!   requests come — and nothing to any request.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use roster_core::{ListingState, ListingTicket, ToolRegistry};
use tokio::task::JoinHandle;

use super::listing::Relisting;
use super::runtime::{Runtime, Slot};

/// What a turn needs fresh before its request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Needs<'a> {
    /// What a list shows (tools, prompts, resources, a search, the skill catalog): every
    /// server's announced changes.
    Lists,
    /// A call of this tool: by an exposed name, the server it routes to; by a server's own
    /// name (which routes only while exactly one server has it), every server, as for a list.
    /// A name no listed server has waits for the servers whose prefix it carries, or for every
    /// server when it carries none (a tool a server just announced).
    Call(&'a str),
}

/// The servers `needs` waits for (`None`: all of them).
fn needed_servers(registry: &ToolRegistry, needs: Needs<'_>) -> Option<Vec<String>> {
    let Needs::Call(name) = needs else {
        return None;
    };
    match registry.route_call(name) {
        Ok(tool) if tool.exposed_name == name => return Some(vec![tool.server.to_owned()]),
        Ok(_) => return None,
        Err(_) => {}
    }
    let separator = &registry.naming().separator;
    let prefixed: Vec<String> = registry
        .servers()
        .filter(|server| {
            name.strip_prefix(server)
                .is_some_and(|rest| rest.starts_with(separator.as_str()))
        })
        .map(str::to_owned)
        .collect();
    (!prefixed.is_empty()).then_some(prefixed)
}

/// One server's part in a turn.
struct Job {
    slot: Arc<Slot>,
    when: Relisting,
    /// The turn waits for it (else it runs in the background, one at a time per server).
    awaited: bool,
    /// Its tools are listed (if still due when the job runs); `Some` ticket when awaited.
    tools: bool,
    /// Its listing's hold ran out: a listing taken lists its offerings too.
    expired: bool,
    /// Its offerings are listed (if still stale when the job runs).
    offerings: bool,
}

/// A job the turn waits for, with what it waits to see answered.
struct Awaited {
    slot: Arc<Slot>,
    tools: Option<ListingTicket>,
    offerings: Option<ListingTicket>,
    task: JoinHandle<()>,
}

impl Runtime {
    /// Starts a turn: waits (at most `turn_wait`) for the listings `needs` needs, and starts in
    /// the background every other listing that is due. A listing that outlasts the wait goes
    /// on in the background; its delta reaches the sessions at a later turn.
    pub(crate) async fn list_due(self: &Arc<Self>, needs: Needs<'_>) {
        self.follow_pin_decisions();
        let turn_started = Instant::now();
        let jobs = self.plan(needs, turn_started);
        let mut awaited = Vec::new();
        for job in jobs {
            if job.awaited {
                let Relisting::IfDue {
                    tools, offerings, ..
                } = job.when
                else {
                    continue;
                };
                let tools = job.tools.then_some(tools);
                let offerings = job.offerings.then_some(offerings);
                let slot = job.slot.clone();
                let task = tokio::spawn(crate::telemetry::carried(self.clone().run(job)));
                awaited.push(Awaited {
                    slot,
                    tools,
                    offerings,
                    task,
                });
            } else if !job.slot.revalidating.swap(true, Ordering::AcqRel) {
                let rt = self.clone();
                tokio::spawn(async move {
                    let slot = job.slot.clone();
                    rt.run(job).await;
                    slot.revalidating.store(false, Ordering::Release);
                });
            }
        }
        if awaited.is_empty() {
            return;
        }
        let all = futures::future::join_all(awaited.iter_mut().map(|a| &mut a.task));
        if tokio::time::timeout(self.gateway.turn_wait, all)
            .await
            .is_ok()
        {
            return;
        }
        let mut state = self.state();
        for a in awaited.iter().filter(|a| !a.task.is_finished()) {
            let Some(schedule) = state.schedule.server_mut(&a.slot.name) else {
                continue;
            };
            // Unless a listing that answers what the turn waited for ended just now.
            let listed_since = schedule.last_listed().is_some_and(|at| at >= turn_started);
            if a.tools
                .is_some_and(|t| !(schedule.answers(t) && listed_since))
            {
                schedule.waited_in_vain();
            }
            if a.offerings.is_some_and(|t| !schedule.offerings_answer(t)) {
                schedule.offerings_waited_in_vain();
            }
            tracing::info!(
                server = %a.slot.name,
                wait = ?self.gateway.turn_wait,
                "a listing outlasted the turn wait: it goes on in the background, and no turn \
                 waits for this server again until it ends"
            );
        }
    }

    /// What each server's part in a turn starting at `now` is (servers with none are left out).
    fn plan(&self, needs: Needs<'_>, now: Instant) -> Vec<Job> {
        let state = self.state();
        let needed = needed_servers(&state.registry, needs);
        state
            .schedule
            .iter()
            .filter_map(|(name, schedule)| {
                let needed_here = needed.as_ref().is_none_or(|n| n.iter().any(|s| s == name));
                let wait_tools = needed_here && schedule.turn_waits();
                let wait_offerings = needed_here && schedule.turn_waits_for_offerings();
                let due = schedule.needs_listing(now);
                let stale_offerings = schedule.offerings_stale();
                if !(due || stale_offerings || wait_tools || wait_offerings) {
                    return None;
                }
                let slot = self.slot(name)?;
                let awaited = wait_tools || wait_offerings;
                // In the background only what can be listed now: a server still connecting is
                // its supervisor's to list.
                if !awaited && slot.connection().is_none() {
                    return None;
                }
                Some(Job {
                    slot,
                    when: Relisting::IfDue {
                        turn_started: now,
                        tools: schedule.listing_ticket(),
                        offerings: schedule.offerings_ticket(),
                    },
                    awaited,
                    tools: if awaited { wait_tools } else { due },
                    expired: due && matches!(schedule.state(), ListingState::Listed { .. }),
                    offerings: if awaited {
                        wait_offerings
                    } else {
                        stale_offerings
                    },
                })
            })
            .collect()
    }

    /// Runs one server's part of a turn: waits for a server still starting (its first listing
    /// is its supervisor's), then lists what is still due.
    async fn run(self: Arc<Self>, job: Job) {
        let slot = &job.slot;
        if job.awaited {
            let mut first = slot.first_attempt.subscribe();
            let _ = first.wait_for(|done| *done).await;
        }
        if slot.connection().is_none() {
            return;
        }
        if job.tools {
            let listed = self.relist_if(slot, job.when).await;
            if job.expired && matches!(listed, Ok(Some(_))) {
                // A hold that ran out is taken whole: prompts, resources and skills too.
                self.list_offerings(slot, Relisting::Always).await;
                return;
            }
        }
        if job.offerings {
            self.list_offerings(slot, job.when).await;
        }
    }
}
