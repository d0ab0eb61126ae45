//! The `Roster` façade against real servers: dynamic tools in both eras, storms, same-named
//! tools, restarts and crash loops, failed first listings, refresh, garbage on stdout.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    args, dynamic_server_toml, eventually, has_tool, listing_count, test_config, text_of,
};
use roster::servers::{NotificationSink, ServerState};
use roster::{Roster, RosterOptions};
use serde_json::{Value, json};

fn refresh_count(roster: &Roster, server: &str) -> u64 {
    roster
        .status()
        .into_iter()
        .find(|s| s.name == server)
        .map(|s| s.refresh_count)
        .expect("server in status")
}

async fn dynamic_tool_round_trip(protocol: &str) {
    common::init_tracing();
    let roster = Roster::start(test_config(&dynamic_server_toml("dyn", protocol, &[]), ""))
        .await
        .expect("starts");
    let status = &roster.status()[0];
    assert_eq!(status.state, ServerState::Connected);
    let expect_modern = protocol != "legacy";
    assert_eq!(
        status.protocol_version.as_deref() == Some("2026-07-28"),
        expect_modern,
        "{status:?}"
    );
    assert!(has_tool(&roster, "dyn__echo"));
    // Tools present when the session began are not news to it.
    let first = roster.begin_turn().await;
    assert_eq!(first.delta, None, "{first:?}");

    roster
        .call("dyn__add_tool", args(json!({"name": "fresh"})))
        .await
        .expect("add_tool answers");
    eventually("the new tool is registered", || {
        has_tool(&roster, "dyn__fresh")
    })
    .await;
    let turn = roster.begin_turn().await;
    let delta = turn.delta.expect("a delta");
    assert_eq!(delta.added, vec!["dyn__fresh".to_owned()]);
    assert!(delta.removed.is_empty() && delta.changed.is_empty());
    assert!(turn.note.expect("a note").contains("dyn__fresh"));
    let result = roster.call("dyn__fresh", None).await.expect("callable");
    assert_eq!(text_of(&result), "I am fresh");

    roster
        .call("dyn__remove_tool", args(json!({"name": "fresh"})))
        .await
        .expect("remove_tool answers");
    eventually("the tool is gone", || !has_tool(&roster, "dyn__fresh")).await;
    let delta = roster.begin_turn().await.delta.expect("a delta");
    assert_eq!(delta.removed, vec!["dyn__fresh".to_owned()]);
    let err = roster.call("dyn__fresh", None).await.expect_err("gone");
    assert!(matches!(err, roster::CallError::UnknownTool(_)), "{err}");
}

#[tokio::test]
async fn dynamic_tools_legacy_era() {
    dynamic_tool_round_trip("legacy").await;
}

#[tokio::test]
async fn dynamic_tools_modern_era() {
    dynamic_tool_round_trip("auto").await;
}

async fn storm(protocol: &str) {
    common::init_tracing();
    // A window wide enough that a loaded machine cannot open a gap inside the burst.
    let roster = Roster::start(test_config(
        &dynamic_server_toml("dyn", protocol, &[]),
        "debounce = \"700ms\"",
    ))
    .await
    .expect("starts");
    let before = listing_count(&roster, "dyn").await;
    assert_eq!(refresh_count(&roster, "dyn"), 0);
    roster
        .call("dyn__storm", args(json!({"count": 200})))
        .await
        .expect("storm answers");
    // The debounced re-list reaches the server.
    while listing_count(&roster, "dyn").await == before {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The whole burst was read before the call's answer; once no trailing edge is pending,
    // none can come without a new list_changed. The quiet server's first list_changed was
    // listed at once (the leading edge), the rest of the storm in one trailing listing at most.
    eventually("no trailing edge is pending", || {
        !roster.status()[0].refresh_pending
    })
    .await;
    let fired = refresh_count(&roster, "dyn");
    assert!((1..=2).contains(&fired), "{fired} re-lists for one storm");
    let listed = listing_count(&roster, "dyn").await - before;
    assert!((1..=2).contains(&listed), "{listed} listings for one storm");
}

#[tokio::test]
async fn storm_of_list_changed_costs_at_most_two_listings_legacy() {
    storm("legacy").await;
}

#[tokio::test]
async fn storm_of_list_changed_costs_at_most_two_listings_modern() {
    storm("auto").await;
}

#[tokio::test]
async fn two_servers_with_echo() {
    common::init_tracing();
    let servers = format!(
        "{}{}",
        dynamic_server_toml("a", "legacy", &[]),
        dynamic_server_toml("b", "legacy", &[])
    );
    let roster = Roster::start(test_config(&servers, ""))
        .await
        .expect("starts");
    roster.begin_turn().await;
    let a = roster
        .call("a__echo", args(json!({"text": "x"})))
        .await
        .expect("a echo");
    let b = roster
        .call("b__echo", args(json!({"text": "x"})))
        .await
        .expect("b echo");
    assert_eq!(text_of(&a), "a: x");
    assert_eq!(text_of(&b), "b: x");
    let b_echo_before = roster
        .tools()
        .into_iter()
        .find(|t| t.exposed_name == "b__echo")
        .expect("b__echo");

    roster
        .call(
            "a__change_echo",
            args(json!({"description": "Echo, louder"})),
        )
        .await
        .expect("change_echo answers");
    eventually("a's echo changes", || {
        roster.tools().iter().any(|t| {
            t.exposed_name == "a__echo" && t.tool.description.as_deref() == Some("Echo, louder")
        })
    })
    .await;
    let delta = roster.begin_turn().await.delta.expect("a delta");
    assert_eq!(delta.changed, vec!["a__echo".to_owned()]);
    assert!(
        delta.added.is_empty() && delta.removed.is_empty(),
        "{delta:?}"
    );
    let b_echo_after = roster
        .tools()
        .into_iter()
        .find(|t| t.exposed_name == "b__echo")
        .expect("b__echo still there");
    assert_eq!(b_echo_before, b_echo_after);
    let b = roster
        .call("b__echo", args(json!({"text": "y"})))
        .await
        .expect("b echo");
    assert_eq!(text_of(&b), "b: y");
}

#[tokio::test]
async fn killed_server_restarts_and_crash_loop_stays_contained() {
    common::init_tracing();
    let servers = format!(
        "{}{}",
        dynamic_server_toml("live", "legacy", &[]),
        dynamic_server_toml("doomed", "legacy", &["--exit-at-start"])
    );
    let roster = Roster::start(test_config(&servers, ""))
        .await
        .expect("starts");
    roster.begin_turn().await;
    let status = roster.status();
    let live = status.iter().find(|s| s.name == "live").expect("live");
    let pid = live.pid.expect("a pid");
    assert!(has_tool(&roster, "live__echo"));

    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    eventually("the dead server's tools vanish", || {
        !has_tool(&roster, "live__echo")
    })
    .await;
    eventually("the server is restarted and listed again", || {
        has_tool(&roster, "live__echo")
    })
    .await;
    let delta = roster.begin_turn().await;
    // Removed then added again between two turns: the merged delta may cancel out, but the
    // registry went through both; what must hold is that the tools are back and callable.
    assert!(
        delta
            .delta
            .as_ref()
            .is_none_or(|d| !d.removed.contains(&"live__echo".to_owned())),
        "{delta:?}"
    );
    let status = roster.status();
    let live = status.iter().find(|s| s.name == "live").expect("live");
    assert!(live.restarts >= 1, "{live:?}");
    assert_ne!(live.pid, Some(pid));
    eventually("the killed process is reaped", || {
        !Path::new(&format!("/proc/{pid}")).exists()
    })
    .await;
    let result = roster
        .call("live__echo", args(json!({"text": "back"})))
        .await
        .expect("callable after restart");
    assert_eq!(text_of(&result), "live: back");

    eventually("the always-exiting server is parked in crash-loop", || {
        roster
            .status()
            .iter()
            .any(|s| s.name == "doomed" && s.state == ServerState::CrashLoop)
    })
    .await;
    let doomed = roster
        .status()
        .into_iter()
        .find(|s| s.name == "doomed")
        .expect("doomed");
    assert_eq!(doomed.tools, 0);
    assert!(doomed.last_error.is_some());
    assert_eq!(doomed.state.to_string(), "crash-loop");
    let json = roster.status_json();
    let doomed_json = json["servers"]
        .as_array()
        .expect("servers array")
        .iter()
        .find(|s| s["name"] == "doomed")
        .cloned()
        .expect("doomed in JSON");
    assert_eq!(doomed_json["connection"], "crash-loop");
    assert_eq!(doomed_json["listing"], "crash-loop");
    let result = roster
        .call("live__echo", args(json!({"text": "unhurt"})))
        .await
        .expect("others keep working");
    assert_eq!(text_of(&result), "live: unhurt");
}

#[tokio::test]
async fn session_sees_removal_when_a_server_dies() {
    common::init_tracing();
    // A long backoff keeps the server down long enough to observe the removal delta.
    let roster = Roster::start(test_config(&dynamic_server_toml("live", "legacy", &[]), ""))
        .await
        .expect("starts");
    let session = roster.open_session();
    let watcher = session.clone();
    let changed = tokio::spawn(async move { watcher.changed().await });
    let pid = roster.status()[0].pid.expect("pid");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    tokio::time::timeout(Duration::from_secs(30), session.delta_arrived())
        .await
        .expect("the removal is queued for the session");
    assert!(session.has_pending());
    tokio::time::timeout(Duration::from_secs(30), changed)
        .await
        .expect("changed() resolves")
        .expect("watcher task");
    let first = session.drain();
    let delta = first.delta.expect("a delta");
    assert!(
        delta.removed.contains(&"live__echo".to_owned()),
        "{delta:?}"
    );
    assert!(first.note.expect("note").contains("live__echo"));
}

#[tokio::test]
async fn failed_first_listing_is_retried_in_the_background_once_its_backoff_allows() {
    common::init_tracing();
    let roster = Roster::start(test_config(
        &dynamic_server_toml("flaky", "legacy", &["--fail-first-listing"]),
        "refresh_interval = \"1h\"",
    ))
    .await
    .expect("starts");
    let status = &roster.status()[0];
    assert_eq!(status.state, ServerState::Connected, "{status:?}");
    assert!(
        matches!(
            status.listing,
            Some(roster_core::ListingState::Failed { .. })
        ),
        "{status:?}"
    );
    assert!(roster.tools().is_empty());
    // Past the (20 ms) backoff (the 1 h interval does not apply to a failed server), a turn
    // retries it in the background, without waiting; the next turn has its tools.
    tokio::time::sleep(Duration::from_millis(200)).await;
    roster.begin_turn().await;
    eventually("the retried listing brings the tools", || {
        has_tool(&roster, "flaky__echo")
    })
    .await;
    let turn = roster.begin_turn().await;
    assert!(
        turn.delta
            .expect("delta")
            .added
            .contains(&"flaky__echo".to_owned())
    );
    assert_eq!(listing_count(&roster, "flaky").await, 2);
}

#[tokio::test]
async fn repeated_refresh_costs_one_listing_per_server() {
    common::init_tracing();
    let servers = format!(
        "{}{}",
        dynamic_server_toml("a", "legacy", &[]),
        dynamic_server_toml("b", "auto", &[])
    );
    let roster = Roster::start(test_config(&servers, ""))
        .await
        .expect("starts");
    roster.begin_turn().await;
    let (a0, b0) = (
        listing_count(&roster, "a").await,
        listing_count(&roster, "b").await,
    );
    // Not due: a turn lists nothing.
    roster.begin_turn().await;
    assert_eq!(listing_count(&roster, "a").await, a0);
    for _ in 0..10 {
        assert_eq!(roster.refresh(), 2);
    }
    let (one, two) = tokio::join!(roster.begin_turn(), roster.begin_turn());
    assert_eq!(one.delta, None);
    assert_eq!(two.delta, None);
    roster.begin_turn().await;
    assert_eq!(listing_count(&roster, "a").await, a0 + 1);
    assert_eq!(listing_count(&roster, "b").await, b0 + 1);
}

#[tokio::test]
async fn garbage_on_stdout_does_not_hurt() {
    common::init_tracing();
    let servers = format!(
        "{}{}",
        dynamic_server_toml("junk", "legacy", &["--garbage"]),
        dynamic_server_toml("clean", "legacy", &[])
    );
    let roster = Roster::start(test_config(&servers, ""))
        .await
        .expect("starts");
    let result = roster.call("junk__garbage", None).await.expect("answers");
    assert_eq!(text_of(&result), "wrote garbage");
    let result = roster
        .call("junk__echo", args(json!({"text": "ok"})))
        .await
        .expect("still connected");
    assert_eq!(text_of(&result), "junk: ok");
    let result = roster
        .call("clean__echo", args(json!({"text": "ok"})))
        .await
        .expect("other server fine");
    assert_eq!(text_of(&result), "clean: ok");
    let junk = roster
        .status()
        .into_iter()
        .find(|s| s.name == "junk")
        .expect("junk");
    assert_eq!(junk.restarts, 0);
}

#[derive(Default)]
struct Recorder(Mutex<Vec<(String, String, bool)>>);

impl NotificationSink for Recorder {
    fn record(&self, channel: &str, method: &str, _params: Value, handled: bool) {
        self.0
            .lock()
            .expect("lock")
            .push((channel.to_owned(), method.to_owned(), handled));
    }
}

impl Recorder {
    /// How many `notifications/tools/list_changed` of `channel` were recorded.
    fn list_changed_of(&self, channel: &str) -> usize {
        self.0
            .lock()
            .expect("lock")
            .iter()
            .filter(|(c, m, _)| c == channel && m == "notifications/tools/list_changed")
            .count()
    }
}

/// Has `dyn` add the tool `name` and waits until its `count`th list_changed is recorded.
async fn add_tool_recorded(roster: &Roster, recorder: &Recorder, name: &str, count: usize) {
    roster
        .call("dyn__add_tool", args(json!({"name": name})))
        .await
        .expect("add_tool answers");
    eventually(&format!("list_changed number {count} is recorded"), || {
        recorder.list_changed_of("dyn") >= count
    })
    .await;
}

#[tokio::test]
async fn notifications_reach_the_sink_and_dynamic_tools_can_be_off() {
    common::init_tracing();
    let recorder = Arc::new(Recorder::default());
    let options = RosterOptions {
        sink: recorder.clone(),
        ..RosterOptions::default()
    };
    let roster = Roster::start_with(
        test_config(
            &dynamic_server_toml("dyn", "legacy", &[]),
            "dynamic_tools = false",
        ),
        options,
    )
    .await
    .expect("starts");
    add_tool_recorded(&roster, &recorder, "fresh", 1).await;
    let records = recorder.0.lock().expect("lock").clone();
    assert!(
        records
            .iter()
            .filter(|(_, m, _)| m == "notifications/tools/list_changed")
            .all(|(_, _, handled)| !handled),
        "{records:?}"
    );
    // No sleep proves that nothing re-lists it: only a stale server is ever re-listed (by a turn
    // or the debounced background re-list), and a turn re-lists it at once. A second
    // list_changed is the marker: the reader handles the server's messages in order, so once
    // the marker is recorded every listener of the first one has run.
    add_tool_recorded(&roster, &recorder, "marker", 2).await;
    roster.begin_turn().await;
    assert!(!has_tool(&roster, "dyn__fresh"));
    assert_eq!(refresh_count(&roster, "dyn"), 0);
    // An explicit refresh still picks the tool up at the next turn.
    roster.refresh();
    roster.begin_turn().await;
    assert!(has_tool(&roster, "dyn__fresh"));
}

#[tokio::test]
async fn tool_filters_apply_to_every_listing() {
    common::init_tracing();
    let server = format!(
        "{}tools.deny = [\"fresh*\", \"storm\"]\n",
        dynamic_server_toml("dyn", "legacy", &[])
    );
    let roster = Roster::start(test_config(&server, ""))
        .await
        .expect("starts");
    assert!(has_tool(&roster, "dyn__echo"));
    assert!(!has_tool(&roster, "dyn__storm"));
    roster
        .call("dyn__add_tool", args(json!({"name": "fresh_one"})))
        .await
        .expect("add_tool answers");
    roster
        .call("dyn__add_tool", args(json!({"name": "other"})))
        .await
        .expect("add_tool answers");
    eventually("the allowed tool appears", || {
        has_tool(&roster, "dyn__other")
    })
    .await;
    assert!(!has_tool(&roster, "dyn__fresh_one"));
}

#[tokio::test]
async fn a_zero_ttl_from_a_server_that_announces_changes_does_not_relist_every_turn() {
    common::init_tracing();
    let roster = Roster::start(test_config(
        &dynamic_server_toml("eager", "auto", &["--ttl-ms", "0"]),
        "",
    ))
    .await
    .expect("starts");
    let status = &roster.status()[0];
    assert_eq!(status.protocol_version.as_deref(), Some("2026-07-28"));
    let before = listing_count(&roster, "eager").await;
    // The server advertises tools.listChanged, so its SDK-default `ttlMs: 0` is no hint: the
    // refresh interval governs and turns cost no listing.
    roster.begin_turn().await;
    roster.begin_turn().await;
    let (_, _, _) = tokio::join!(
        roster.begin_turn(),
        roster.begin_turn(),
        roster.begin_turn()
    );
    assert_eq!(listing_count(&roster, "eager").await, before);
    // A refresh still re-lists it once at the next turn, shared by turns that start together.
    roster.refresh();
    let (_, _) = tokio::join!(roster.begin_turn(), roster.begin_turn());
    assert_eq!(listing_count(&roster, "eager").await, before + 1);
}

#[tokio::test]
async fn unanswered_ping_fails_the_connection_and_restarts_it() {
    common::init_tracing();
    let server = format!(
        "{}ping_interval = \"300ms\"\n",
        dynamic_server_toml("frozen", "legacy", &[])
    );
    let roster = Roster::start(test_config(&server, ""))
        .await
        .expect("starts");
    let pid = roster.status()[0].pid.expect("pid");
    // A stopped process keeps its pipes open but answers nothing: only the ping notices.
    let stopped = std::process::Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(stopped.success());
    eventually("the frozen server is replaced", || {
        let status = &roster.status()[0];
        status.restarts >= 1 && status.pid.is_some_and(|p| p != pid) && status.tools > 0
    })
    .await;
    let status = &roster.status()[0];
    assert!(common::last_error_says(status, "ping"), "{status:?}");
    let result = roster
        .call("frozen__echo", args(json!({"text": "thawed"})))
        .await
        .expect("the new process answers");
    assert_eq!(text_of(&result), "frozen: thawed");
    // The stopped process was killed and reaped: no zombie left behind.
    eventually("the frozen process is killed and reaped", || {
        !Path::new(&format!("/proc/{pid}")).exists()
    })
    .await;
}

#[tokio::test]
async fn modern_server_restart_listens_again() {
    common::init_tracing();
    let roster = Roster::start(test_config(&dynamic_server_toml("dyn", "auto", &[]), ""))
        .await
        .expect("starts");
    let pid = roster.status()[0].pid.expect("pid");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    eventually("restarted", || {
        let status = &roster.status()[0];
        status.pid.is_some_and(|p| p != pid) && status.tools > 0
    })
    .await;
    assert_eq!(
        roster.status()[0].protocol_version.as_deref(),
        Some("2026-07-28")
    );
    // list_changed still arrives: the new connection opened subscriptions/listen again.
    roster
        .call("dyn__add_tool", args(json!({"name": "after_restart"})))
        .await
        .expect("add_tool answers");
    eventually("the tool added after the restart appears", || {
        has_tool(&roster, "dyn__after_restart")
    })
    .await;
}

#[tokio::test]
async fn naming_never_gives_the_bare_name_to_the_first_server_in_the_file() {
    common::init_tracing();
    // `zeta` comes first in the file though it sorts last.
    let servers = format!(
        "{}{}",
        dynamic_server_toml("zeta", "legacy", &[]),
        dynamic_server_toml("alpha", "legacy", &[])
    );
    let roster = Roster::start(test_config(&servers, "naming = \"never\""))
        .await
        .expect("starts");
    let echo = roster
        .tools()
        .into_iter()
        .find(|t| t.exposed_name == "echo")
        .expect("a bare echo");
    assert_eq!(echo.server, "zeta");
    let collisions = roster.with_registry(|r| r.collisions().to_vec());
    assert!(
        collisions
            .iter()
            .any(|c| c.name == "echo" && c.kept_by == "zeta" && c.server == "alpha"),
        "{collisions:?}"
    );
    let alpha_echo = collisions
        .iter()
        .find(|c| c.name == "echo")
        .map(|c| c.exposed_as.clone())
        .expect("alpha's echo is exposed under another name");
    let result = roster
        .call(&alpha_echo, args(json!({"text": "x"})))
        .await
        .expect("alpha's echo is callable");
    assert_eq!(text_of(&result), "alpha: x");
    let result = roster
        .call("echo", args(json!({"text": "x"})))
        .await
        .expect("bare echo");
    assert_eq!(text_of(&result), "zeta: x");
}

#[tokio::test]
async fn a_hanging_listing_times_out_and_delays_no_one_else() {
    common::init_tracing();
    let servers = format!(
        "{}list_timeout = \"500ms\"\n{}",
        dynamic_server_toml("stuck", "legacy", &["--hang-listing-after", "1"]),
        dynamic_server_toml("fine", "legacy", &[])
    );
    let roster = Roster::start(test_config(&servers, ""))
        .await
        .expect("starts");
    assert!(has_tool(&roster, "stuck__echo") && has_tool(&roster, "fine__echo"));
    roster.refresh();
    roster
        .call("fine__add_tool", args(json!({"name": "extra"})))
        .await
        .expect("add_tool answers");
    eventually("fine's new tool is picked up", || {
        has_tool(&roster, "fine__extra")
    })
    .await;
    roster.begin_turn().await;
    let stuck = roster
        .status()
        .into_iter()
        .find(|s| s.name == "stuck")
        .expect("stuck");
    assert!(
        matches!(
            stuck.listing,
            Some(roster_core::ListingState::Failed { .. })
        ),
        "{stuck:?}"
    );
    assert!(
        common::last_error_says(&stuck, "did not answer"),
        "{stuck:?}"
    );
    // The earlier listing's tools stay while the connection is alive; the server keeps being
    // retried at the turns its backoff allows.
    assert!(has_tool(&roster, "stuck__echo"));
    assert_eq!(stuck.state, ServerState::Connected);
}

#[tokio::test]
async fn dropping_the_roster_kills_and_reaps_its_servers() {
    common::init_tracing();
    let roster = Roster::start(test_config(&dynamic_server_toml("dyn", "legacy", &[]), ""))
        .await
        .expect("starts");
    let pid = roster.status()[0].pid.expect("pid");
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    drop(roster);
    eventually("the server process is gone", || {
        !Path::new(&format!("/proc/{pid}")).exists()
    })
    .await;
}

#[tokio::test]
async fn reconcile_hook_sees_every_delta_and_can_read_live_tools() {
    common::init_tracing();
    type Seen = Arc<Mutex<Vec<(String, Vec<String>, roster_core::ToolPresence)>>>;
    let seen: Seen = Arc::default();
    let roster = Roster::start(test_config(&dynamic_server_toml("dyn", "legacy", &[]), ""))
        .await
        .expect("starts");
    let lookup = roster.tool_lookup();
    let sink = seen.clone();
    roster.set_reconcile_hook(Some(Arc::new(move |server, delta| {
        // The hook may read the registry: no roster lock is held while it runs.
        let presence = lookup.presence("dyn__fresh");
        sink.lock()
            .expect("lock")
            .push((server.to_owned(), delta.added.clone(), presence));
    })));
    let lookup = roster.tool_lookup();
    assert_eq!(
        lookup.presence("dyn__echo"),
        roster_core::ToolPresence::Present
    );
    assert_eq!(
        lookup.presence("dyn__fresh"),
        roster_core::ToolPresence::Missing
    );
    roster
        .call("dyn__add_tool", args(json!({"name": "fresh"})))
        .await
        .expect("add_tool answers");
    eventually("the hook saw the new tool", || {
        !seen.lock().expect("lock").is_empty()
    })
    .await;
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(
        seen,
        vec![(
            "dyn".to_owned(),
            vec!["dyn__fresh".to_owned()],
            roster_core::ToolPresence::Present
        )]
    );
}

/// A roster of the `dynamic` fixture server `name` whose notifications go to an inbox in a
/// state dir of its own.
async fn roster_with_inbox(name: &str) -> (tempfile::TempDir, Arc<roster::inbox::Inbox>, Roster) {
    use roster::inbox::{Inbox, InboxConfig};
    common::init_tracing();
    let dir = tempfile::tempdir().expect("tempdir");
    let inbox = Arc::new(
        Inbox::open(InboxConfig::new(roster::store::Stores::embedded(
            dir.path(),
        )))
        .expect("inbox opens"),
    );
    let roster = Roster::start_with(
        test_config(&dynamic_server_toml(name, "legacy", &[]), ""),
        RosterOptions {
            sink: inbox.clone(),
            ..RosterOptions::default()
        },
    )
    .await
    .expect("starts");
    (dir, inbox, roster)
}

#[tokio::test]
async fn notifications_land_in_the_inbox_and_its_audit_trail() {
    use roster::inbox::EntryState;
    let (dir, inbox, roster) = roster_with_inbox("on").await;
    roster
        .call("on__add_tool", args(json!({"name": "fresh"})))
        .await
        .expect("add_tool answers");
    eventually("the list_changed is in the inbox", || {
        inbox
            .list(Some("on"), 100)
            .iter()
            .any(|e| e.method == "notifications/tools/list_changed")
    })
    .await;
    let entry = inbox
        .list(Some("on"), 100)
        .into_iter()
        .find(|e| e.method == "notifications/tools/list_changed")
        .expect("entry");
    assert_eq!(entry.state, EntryState::Handled);
    inbox.sync();
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).expect("audit trail");
    assert!(
        audit.contains("notifications/tools/list_changed"),
        "{audit}"
    );
}

#[tokio::test]
async fn progress_passes_through_a_roster_call() {
    common::init_tracing();
    let roster = Roster::start(test_config(&dynamic_server_toml("dyn", "auto", &[]), ""))
        .await
        .expect("starts");
    let progress = Arc::new(Mutex::new(Vec::<Value>::new()));
    let sink = progress.clone();
    let result = roster
        .call_with(
            "dyn__slow",
            args(json!({"seconds": 0.2})),
            roster::servers::CallOptions {
                progress: Some(Arc::new(move |p: &Value| {
                    sink.lock().expect("lock").push(p.clone())
                })),
                ..roster::servers::CallOptions::default()
            },
        )
        .await
        .expect("slow answers");
    assert_eq!(text_of(&result), "done");
    let progress = progress.lock().expect("lock").clone();
    assert_eq!(progress.len(), 1, "{progress:?}");
    assert_eq!(progress[0]["message"], "halfway");
    // As the server wrote it (a number: 2 or 2.0 alike).
    assert_eq!(progress[0]["total"].as_f64(), Some(2.0), "{progress:?}");
}

#[tokio::test]
async fn tools_come_in_config_order_then_each_servers_own_order() {
    common::init_tracing();
    // Config order is the reverse of name order, and the fixture's own order is not sorted.
    let servers = format!(
        "{}{}",
        dynamic_server_toml("zeta", "legacy", &[]),
        dynamic_server_toml("alpha", "legacy", &[])
    );
    let roster = Roster::start(test_config(&servers, ""))
        .await
        .expect("starts");
    let tools = roster.tools();
    let servers: Vec<&str> = tools.iter().map(|t| t.server.as_str()).collect();
    let first_alpha = servers
        .iter()
        .position(|s| *s == "alpha")
        .expect("alpha has tools");
    assert!(first_alpha > 0, "{servers:?}");
    assert!(
        servers[..first_alpha].iter().all(|s| *s == "zeta"),
        "{servers:?}"
    );
    assert!(
        servers[first_alpha..].iter().all(|s| *s == "alpha"),
        "{servers:?}"
    );
    for server in ["zeta", "alpha"] {
        let names: Vec<&str> = tools
            .iter()
            .filter(|t| t.server == server)
            .map(|t| t.tool.name.as_str())
            .collect();
        // dynamic.py registers these first, in this order.
        assert_eq!(
            names[..4],
            ["echo", "change_echo", "add_tool", "remove_tool"],
            "{server}: {names:?}"
        );
    }
}

#[tokio::test]
async fn a_server_elicitation_is_decided_through_the_inbox() {
    let (_dir, inbox, roster) = roster_with_inbox("el").await;
    for (yes, expected) in [(true, "accept confirm=True"), (false, "decline")] {
        let call = {
            let roster = roster.clone();
            tokio::spawn(async move {
                roster
                    .call("el__confirm_delete", args(json!({"path": "/tmp/x"})))
                    .await
            })
        };
        eventually("the elicitation waits in the inbox", || {
            !inbox.pending_confirms().is_empty()
        })
        .await;
        let pending = inbox.pending_confirms();
        assert_eq!(pending.len(), 1, "{pending:?}");
        assert_eq!(pending[0].channel, "el");
        assert_eq!(pending[0].method, "elicitation/create");
        assert_eq!(pending[0].params["message"], "Delete /tmp/x?");
        inbox.confirm(pending[0].id, yes).expect("decided");
        let result = call.await.expect("joins").expect("confirm_delete answers");
        assert_eq!(text_of(&result), expected, "{result}");
    }
}

#[tokio::test]
async fn without_a_confirming_sink_elicitation_is_not_offered() {
    common::init_tracing();
    let roster = Roster::start(test_config(&dynamic_server_toml("no", "legacy", &[]), ""))
        .await
        .expect("starts");
    let result = roster
        .call("no__confirm_delete", args(json!({"path": "/tmp/x"})))
        .await
        .expect("confirm_delete answers");
    // The SDK refuses to elicit from a client without the capability, or gets a decline.
    let text = text_of(&result);
    assert!(
        result["isError"] == json!(true) || text == "decline",
        "{result}"
    );
}

#[tokio::test]
async fn a_crash_during_a_listing_counts_as_one_failure() {
    common::init_tracing();
    // Two failures make a crash loop, parked at a backoff longer than `eventually` waits: a
    // crash counted twice (once by the cut-off listing, once by the supervisor) never comes
    // back within the test.
    let roster = Roster::start(test_config(
        &dynamic_server_toml("hang", "legacy", &["--hang-listing-after", "1"]),
        "crash_loop_after = 2\nbackoff_max = \"120s\"\n",
    ))
    .await
    .expect("starts");
    assert!(has_tool(&roster, "hang__echo"));
    let listing = {
        let roster = roster.clone();
        tokio::spawn(async move { roster.relist("hang").await })
    };
    loop {
        if listing_count(&roster, "hang").await >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = roster.status()[0].pid.expect("a pid");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    let relisted = listing.await.expect("joins");
    assert!(relisted.is_err(), "{relisted:?}");
    eventually("the server restarts after one failure's backoff", || {
        let status = &roster.status()[0];
        status.pid.is_some_and(|p| p != pid) && has_tool(&roster, "hang__echo")
    })
    .await;
    let status = &roster.status()[0];
    assert_eq!(status.restarts, 1, "{status:?}");
    assert_ne!(status.state, ServerState::CrashLoop, "{status:?}");
}

#[tokio::test]
async fn a_listen_stream_the_server_ends_is_opened_again() {
    common::init_tracing();
    let roster = Roster::start(test_config(&dynamic_server_toml("dyn", "modern", &[]), ""))
        .await
        .expect("starts");
    assert_eq!(
        roster.status()[0].protocol_version.as_deref(),
        Some("2026-07-28")
    );
    // The answer races the stream's end, which now closes the connection: either is fine.
    match roster.call("dyn__end_listen", None).await {
        Ok(result) => assert_eq!(text_of(&result), "ended"),
        Err(error) => assert!(
            matches!(
                &error,
                roster::CallError::Request {
                    source: roster::servers::RequestError::Closed,
                    ..
                }
            ),
            "{error}"
        ),
    }
    // The connection is replaced by one that listens again.
    eventually("reconnected after the stream ended", || {
        let status = &roster.status()[0];
        status.restarts >= 1 && status.tools > 0
    })
    .await;
    roster
        .call("dyn__add_tool", args(json!({"name": "after_listen_ended"})))
        .await
        .expect("add_tool answers");
    eventually("list_changed is heard again", || {
        has_tool(&roster, "dyn__after_listen_ended")
    })
    .await;
}
