//! The inbox in a test's own state directory, opened and filled through the library as the
//! gateway fills it.

use std::path::Path;
use std::time::Duration;

use roster::inbox::{AUDIT_BACKUP_FILE, ConfirmRequest, FsyncPolicy, Inbox, InboxConfig};
use serde_json::Value;

/// The inbox config for the state directory `dir`, without fsync (a test's temp dir need not
/// survive a power cut).
pub fn config(dir: &Path) -> InboxConfig {
    InboxConfig {
        fsync: FsyncPolicy::Never,
        ..InboxConfig::new(roster::store::Stores::embedded(dir))
    }
}

/// The inbox of `dir`, owned (locked) by this process until it is dropped.
pub fn open(dir: &Path) -> Inbox {
    Inbox::open(config(dir)).expect("the inbox opens")
}

/// Records a `notifications/message` from `channel` with `params`, unread; its seq.
pub fn record_message(inbox: &Inbox, channel: &str, params: Value) -> u64 {
    inbox.record(channel, "notifications/message", params, false)
}

/// Records a `notifications/tools/list_changed` from `channel`, `handled` when a re-list
/// consumed it; its seq.
pub fn record_list_changed(inbox: &Inbox, channel: &str, handled: bool) -> u64 {
    inbox.record(
        channel,
        "notifications/tools/list_changed",
        Value::Null,
        handled,
    )
}

/// An `elicitation/create` asking with `params`, pending for `ttl`.
pub fn ask(params: Value, ttl: Duration) -> ConfirmRequest {
    ConfirmRequest {
        method: "elicitation/create".into(),
        params,
        ttl,
    }
}

/// Puts a non-empty directory where the audit trail's backup file goes in `dir`: neither a
/// purge's remove_file nor a rotation's rename can take its place.
pub fn block_the_backup(dir: &Path) {
    let blocker = dir.join(AUDIT_BACKUP_FILE);
    std::fs::create_dir(&blocker).expect("mkdir");
    std::fs::write(blocker.join("keep"), b"x").expect("write");
}
