//! What the inbox costs: one append (fsync never / interval), a replay on open, a render.

use std::path::Path;

use divan::Bencher;
use roster::inbox::{FsyncPolicy, Inbox, InboxConfig, render};
use serde_json::json;

fn main() {
    divan::main();
}

fn inbox(dir: &Path, fsync: FsyncPolicy) -> Inbox {
    Inbox::open(InboxConfig {
        fsync,
        ..InboxConfig::new(roster::store::Stores::embedded(dir))
    })
    .expect("the inbox opens")
}

fn params(n: u64) -> serde_json::Value {
    json!({"level": "info", "logger": "files", "data": format!("indexed {n} files under /srv/data")})
}

#[divan::bench(args = ["never", "interval"])]
fn record(bencher: Bencher<'_, '_>, fsync: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let inbox = inbox(dir.path(), fsync.parse().expect("a policy"));
    let mut n = 0;
    bencher.bench_local(|| {
        n += 1;
        inbox.record("files", "notifications/message", params(n), false)
    });
}

/// Opening replays the trail: 10,000 entries (the ring keeps the last 1,000).
#[divan::bench(sample_count = 20)]
fn open_replaying_10k(bencher: Bencher<'_, '_>) {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let inbox = inbox(dir.path(), FsyncPolicy::Never);
        for n in 0..10_000 {
            inbox.record("files", "notifications/message", params(n), false);
        }
    }
    bencher.bench_local(|| {
        Inbox::snapshot(&roster::store::Stores::embedded(dir.path()), 1000)
            .expect("snapshot")
            .last_seq()
    });
}

#[divan::bench]
fn render_1000_capped(bencher: Bencher<'_, '_>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let inbox = inbox(dir.path(), FsyncPolicy::Never);
    for n in 0..1000 {
        inbox.record("files", "notifications/message", params(n), false);
    }
    let entries = inbox.list(None, 1000);
    bencher.bench_local(|| render(&entries, 1000, 8000).len());
}
