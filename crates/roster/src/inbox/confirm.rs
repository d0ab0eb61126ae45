//! Confirms: server requests only a person may decide. They live apart from the ring (`list`,
//! `unread` and `render` never see them), are answered by [`Inbox::confirm`], or `Expired` once
//! their deadline passes or their server stops waiting.

use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::sync::oneshot;

use super::trail::Inner;
use super::{
    ConfirmDecision, ConfirmEntry, ConfirmId, EntryState, Inbox, InboxError, Seq, now_rfc3339,
    rfc3339,
};
use crate::store::trail::AuditRecord;

/// A server request that needs a person's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmRequest {
    /// The request's method, e.g. `elicitation/create`.
    pub method: String,
    /// What the person needs to decide (the request's params, or a summary of them).
    pub params: Value,
    /// How long the request waits before it is answered [`ConfirmDecision::Expired`].
    pub ttl: Duration,
}

/// The servers layer's handle on a pending confirm: the id, and the decision once there is one.
#[derive(Debug)]
pub struct PendingConfirm {
    /// The id a person decides it by.
    pub id: ConfirmId,
    /// When it will be answered [`ConfirmDecision::Expired`] if nobody decides.
    pub expires_at: SystemTime,
    decision: oneshot::Receiver<ConfirmDecision>,
}

impl PendingConfirm {
    /// Waits for the decision. If the inbox goes away first, the answer is `Expired`.
    pub async fn decision(self) -> ConfirmDecision {
        self.decision.await.unwrap_or(ConfirmDecision::Expired)
    }

    /// Waits for the decision on a plain thread (not inside an async runtime).
    pub fn blocking_decision(self) -> ConfirmDecision {
        self.decision
            .blocking_recv()
            .unwrap_or(ConfirmDecision::Expired)
    }

    /// The decision if there is one already, without waiting.
    pub fn try_decision(&mut self) -> Option<ConfirmDecision> {
        match self.decision.try_recv() {
            Ok(decision) => Some(decision),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => Some(ConfirmDecision::Expired),
        }
    }
}

impl Inner {
    pub(super) fn decide(
        &mut self,
        seq: Seq,
        decision: ConfirmDecision,
        reason: &str,
    ) -> Option<bool> {
        if !self.view.pending.contains_key(&seq) {
            return None;
        }
        // A shared inbox's request may wait on another replica: it gets the decision from
        // the log, and only a request that waits here can be known to have stopped.
        let waits_here = self.waiters.get(&seq).is_some_and(|w| !w.is_closed());
        let waits_elsewhere = self.shared() && !self.waiters.contains_key(&seq);
        self.commit(AuditRecord::Decision {
            seq,
            at: now_rfc3339(),
            decision,
            reason: reason.to_owned(),
        });
        Some(waits_here || waits_elsewhere)
    }

    /// Expires confirms past their deadline, and those whose server stopped waiting (the
    /// [`PendingConfirm`] was dropped), so `pending` never offers a decision nobody receives.
    pub(super) fn expire(&mut self, now: SystemTime) -> usize {
        let due: Vec<(Seq, &'static str)> = self
            .view
            .pending
            .iter()
            .filter_map(|(&seq, slot)| {
                let gone = match self.waiters.get(&seq) {
                    Some(waiter) => waiter.is_closed(),
                    // Shared: another replica's request waits for it.
                    None => !self.shared(),
                };
                if slot.expires <= now {
                    Some((seq, "nobody decided before the deadline"))
                } else if gone {
                    Some((seq, "the server stopped waiting"))
                } else {
                    None
                }
            })
            .collect();
        for &(seq, reason) in &due {
            self.decide(seq, ConfirmDecision::Expired, reason);
        }
        due.len()
    }
}

impl Inbox {
    /// Keeps a request from `channel` that only a person may decide. It never shows in
    /// [`list`](Self::list), [`unread`](Self::unread) or [`render`](super::render); the returned handle gets
    /// the decision from [`confirm`](Self::confirm), or `Expired` after `request.ttl`.
    pub fn record_pending_confirm(&self, channel: &str, request: ConfirmRequest) -> PendingConfirm {
        let (waiter, decision) = oneshot::channel();
        let now = SystemTime::now();
        let expires = now.checked_add(request.ttl).unwrap_or(now);
        let mut inner = self.shared.lock();
        let seq = inner.commit(AuditRecord::Confirm {
            // Given by `commit`.
            seq: 0,
            at: rfc3339(now),
            channel: channel.to_owned(),
            method: request.method,
            params: request.params,
            expires_at: rfc3339(expires),
        });
        if seq == 0 {
            // The shared store cannot take it now: nobody could decide it, so it is answered
            // at once (the waiter is dropped: `Expired`).
            tracing::warn!(
                channel,
                "a confirm could not be recorded in the store; expired"
            );
        } else {
            if let Some(slot) = inner.view.pending.get_mut(&seq) {
                // The exact deadline (the record keeps it to the millisecond).
                slot.expires = expires;
            }
            inner.waiters.insert(seq, waiter);
        }
        PendingConfirm {
            id: ConfirmId(seq),
            expires_at: expires,
            decision,
        }
    }

    /// A person's decision on a pending confirm: `yes` confirms, otherwise declines. A confirm
    /// past its deadline is expired instead, and reported as already decided.
    pub fn confirm(&self, id: ConfirmId, yes: bool) -> Result<ConfirmDecision, InboxError> {
        let mut inner = self.shared.fresh();
        inner.expire(SystemTime::now());
        if let Some(done) = inner.view.decided.iter().rev().find(|c| c.id == id) {
            let decision = match done.state {
                EntryState::Confirmed => ConfirmDecision::Confirmed,
                EntryState::Declined => ConfirmDecision::Declined,
                _ => ConfirmDecision::Expired,
            };
            return Err(InboxError::ConfirmDecided { id, decision });
        }
        let decision = if yes {
            ConfirmDecision::Confirmed
        } else {
            ConfirmDecision::Declined
        };
        match inner.decide(id.0, decision, "decided by a person") {
            None => Err(InboxError::UnknownConfirm { id }),
            Some(true) => Ok(decision),
            Some(false) => Err(InboxError::ConfirmAbandoned { id, decision }),
        }
    }

    /// Answers `Expired` to every pending confirm whose deadline is at or before `now` (and
    /// records as expired those whose waiter is gone); returns how many. The background thread
    /// calls this every second; call it to expire on your own clock.
    pub fn expire_confirms(&self, now: SystemTime) -> usize {
        self.shared.lock().expire(now)
    }

    /// Confirms waiting for a person, oldest first (any past their deadline, or whose server
    /// stopped waiting, are expired first).
    pub fn pending_confirms(&self) -> Vec<ConfirmEntry> {
        let mut inner = self.shared.fresh();
        inner.expire(SystemTime::now());
        inner.view.pending_confirms()
    }

    /// Pending and recently decided confirms, by id: the person's history.
    pub fn confirms(&self) -> Vec<ConfirmEntry> {
        self.shared.fresh().view.confirms()
    }
}
