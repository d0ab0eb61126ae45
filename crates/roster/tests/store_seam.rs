//! The store seam (`roster::store::Stores`): one suite per concern, run against every backend
//! — the state dir's files and a real PostgreSQL cluster (`common::infra::Postgres`) — so a
//! backend that answers differently fails here, not on a user's replica.
//!
//! Suites: the OAuth tokens, the tool pins, the inbox's trail.

mod common;

use std::time::{Duration, Instant};

use common::infra::Postgres;
use roster::config::StoreConfig;
use roster::inbox::{Inbox, InboxConfig};
use roster::store::{DecidedBy, Decision, PinStore, PinWrite, Stores, Tokens};
use roster_core::pin::Pin;

fn pin(description: &str) -> Pin {
    let schema = serde_json::json!({"type": "object"});
    Pin::of(
        &roster_core::Tool::new("echo")
            .with_description(description)
            .with_input_schema(schema.as_object().cloned().expect("a schema object")),
    )
}

fn key(server: &str, tool: &str) -> (String, String) {
    (server.to_owned(), tool.to_owned())
}

/// Waits (at most 10 s) until `gateway`'s data version is no longer `before`: a backend tells
/// its followers of another connection's commit on its own time (a `NOTIFY` arrives on a
/// thread of its own), so this waits for the change rather than for a fixed while.
fn version_moves(backend: &str, gateway: &mut PinStore, before: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while gateway.data_version().expect("version") == before {
        assert!(
            Instant::now() < deadline,
            "{backend}: another connection's commit never changed the data version"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What every pin store must do: the first definition is the pin (a later first use does not
/// replace it), a different one waits for a person, a person's approval makes it the pin and
/// a rejection stands for that definition only; an old pin is completed unless a person
/// decided since; every commit of another connection (a person's, elsewhere) moves the
/// gateway's data version. `gateway` follows the store; `person` is another connection to it.
fn pins_suite(backend: &str, gateway: &mut PinStore, person: &mut PinStore) {
    assert!(
        gateway.load().expect("load").servers.is_empty(),
        "{backend}: empty"
    );
    let first_use = |description: &str| PinWrite::FirstUse {
        tool: "echo".into(),
        pin: pin(description),
    };
    gateway.apply("a", &[first_use("v1")]).expect("pin");
    gateway
        .apply("a", &[first_use("other")])
        .expect("pin again");
    let book = person.load().expect("the person reads");
    let record = &book.servers["a"].pins["echo"];
    assert_eq!(record.pin, pin("v1"), "{backend}: the first use stands");
    assert_eq!(record.decided_by, DecidedBy::FirstUse, "{backend}");
    // A redefinition waits, withheld; the person approves it.
    let review = |description: &str| PinWrite::Review {
        tool: "echo".into(),
        definition: pin(description),
        withheld: true,
    };
    gateway.apply("a", &[review("v2")]).expect("review");
    let before = gateway.data_version().expect("version");
    let decided = person
        .decide(Decision::Approve, &[key("a", "echo"), key("a", "nothing")])
        .expect("approve");
    assert_eq!(
        decided,
        vec![key("a", "echo")],
        "{backend}: only what waits"
    );
    version_moves(backend, gateway, before);
    let book = gateway.load().expect("load");
    let server = &book.servers["a"];
    assert_eq!(server.pins["echo"].pin, pin("v2"), "{backend}: approved");
    assert_eq!(
        server.pins["echo"].decided_by,
        DecidedBy::Person,
        "{backend}"
    );
    assert!(server.reviews.is_empty(), "{backend}: nothing waits");
    // A rejection stands while the definition is the same, not for the next one.
    gateway.apply("a", &[review("v3")]).expect("review");
    let before = gateway.data_version().expect("version");
    person
        .decide(Decision::Reject, &[key("a", "echo")])
        .expect("reject");
    version_moves(backend, gateway, before);
    let waits = |store: &PinStore| store.load().expect("load").servers["a"].reviews["echo"].clone();
    assert!(waits(gateway).review.rejected, "{backend}: rejected");
    assert!(waits(gateway).withheld, "{backend}: withheld");
    gateway.apply("a", &[review("v3")]).expect("listed again");
    assert!(waits(gateway).review.rejected, "{backend}: still rejected");
    gateway.apply("a", &[review("v4")]).expect("redefined");
    assert!(!waits(gateway).review.rejected, "{backend}: asks again");
    // Settled: nothing waits any more.
    gateway
        .apply(
            "a",
            &[PinWrite::Settled {
                tool: "echo".into(),
            }],
        )
        .expect("settle");
    assert!(
        gateway.load().expect("load").servers["a"]
            .reviews
            .is_empty()
    );
    // A held pin is completed, unless what is stored is no longer what was read.
    let complete = |held: &str, whole: &str| PinWrite::Complete {
        tool: "echo".into(),
        held: Box::new(pin(held)),
        whole: Box::new(pin(whole)),
    };
    gateway
        .apply("a", &[complete("stale", "lost")])
        .expect("complete");
    assert_eq!(
        gateway.load().expect("load").servers["a"].pins["echo"].pin,
        pin("v2")
    );
    gateway
        .apply("a", &[complete("v2", "v2 whole")])
        .expect("complete");
    assert_eq!(
        gateway.load().expect("load").servers["a"].pins["echo"].pin,
        pin("v2 whole"),
        "{backend}: completed"
    );
}

/// What every token store must do: records per server, stamps that only grow, a step-up that
/// a refresh leaves and a login clears, and forgetting.
fn tokens_suite(backend: &str, store: &dyn Tokens) {
    assert_eq!(store.load("a").expect("load"), None, "{backend}: empty");
    assert_eq!(store.stamp("a").expect("stamp"), None, "{backend}");
    let first = store.save("a", "http://a/mcp", "{}").expect("save");
    let second = store.save("a", "http://a/mcp", "{\"x\":1}").expect("save");
    assert!(
        second > first,
        "{backend}: stamps increase, {first} then {second}"
    );
    assert_eq!(store.stamp("a").expect("stamp"), Some(second), "{backend}");
    let record = store.load("a").expect("load").expect("a record");
    assert_eq!(
        (
            record.url.as_str(),
            record.credentials.as_str(),
            record.updated_ms
        ),
        ("http://a/mcp", "{\"x\":1}", second),
        "{backend}"
    );
    assert_eq!(
        store.load("b").expect("load"),
        None,
        "{backend}: per server"
    );
    // A step-up waits through refreshes, and only a login (clear_step_up) ends it.
    assert_eq!(store.step_up("a").expect("step-up"), None, "{backend}");
    store.set_step_up("a", "Bearer scope=\"x\"").expect("set");
    store
        .save("a", "http://a/mcp", "{}")
        .expect("a refresh saves");
    assert_eq!(
        store.step_up("a").expect("step-up").as_deref(),
        Some("Bearer scope=\"x\""),
        "{backend}: a refresh does not answer a step-up"
    );
    store.clear_step_up("a").expect("clear");
    assert_eq!(store.step_up("a").expect("step-up"), None, "{backend}");
    // A step-up for a server without a record records nothing.
    store.set_step_up("b", "Bearer").expect("set");
    assert_eq!(store.step_up("b").expect("step-up"), None, "{backend}");
    assert!(store.clear("a").expect("clear"), "{backend}");
    assert!(!store.clear("a").expect("clear again"), "{backend}");
    assert_eq!(store.stamp("a").expect("stamp"), None, "{backend}");
    assert_eq!(store.load("a").expect("load"), None, "{backend}");
}

#[test]
fn the_state_dirs_tokens_keep_the_rules() {
    let dir = tempfile::tempdir().expect("temp dir");
    tokens_suite("state dir", &*Stores::embedded(dir.path()).tokens());
    // Another process (a `roster auth login`) sees what this one wrote, and the other way round.
    let one = Stores::embedded(dir.path()).tokens();
    let other = Stores::embedded(dir.path()).tokens();
    let stamp = one.save("s", "http://s/mcp", "{}").expect("save");
    assert_eq!(other.stamp("s").expect("stamp"), Some(stamp));
    tokens_suite("in memory", &*Stores::in_memory().tokens());
}

#[test]
fn the_shared_stores_tokens_keep_the_rules() {
    let pg = Postgres::start();
    // The password inline (the parser refuses it in a config file; the connection takes it).
    let config = StoreConfig {
        url: pg.url_with_password(),
        password_env: None,
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let stores = Stores::open(Some(&config), dir.path()).expect("connects");
    assert!(stores.is_shared() && stores.state_dir().is_none());
    tokens_suite("postgres", &*stores.tokens());
    // A second replica (its own connection) sees the first one's writes.
    let replica = Stores::open(Some(&config), dir.path()).expect("connects");
    let stamp = stores
        .tokens()
        .save("s", "http://s/mcp", "{}")
        .expect("save");
    assert_eq!(replica.tokens().stamp("s").expect("stamp"), Some(stamp));
    assert!(
        std::fs::read_dir(dir.path()).expect("dir").next().is_none(),
        "nothing is written to the state dir"
    );
}

#[test]
fn the_state_dirs_pins_keep_the_rules() {
    let dir = tempfile::tempdir().expect("temp dir");
    let stores = Stores::embedded(dir.path());
    assert!(
        stores.pins_existing().expect("reads").is_none(),
        "nothing pinned, no file made"
    );
    let mut gateway = stores.pins().expect("opens");
    let mut person = Stores::embedded(dir.path())
        .pins_existing()
        .expect("reads")
        .expect("the gateway made the file");
    pins_suite("state dir", &mut gateway, &mut person);
    assert!(
        Stores::in_memory()
            .pins_existing()
            .expect("reads")
            .is_none()
    );
}

#[test]
fn the_shared_stores_pins_keep_the_rules() {
    let pg = Postgres::start();
    let config = StoreConfig {
        url: pg.url_with_password(),
        password_env: None,
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut gateway = Stores::open(Some(&config), dir.path())
        .expect("connects")
        .pins()
        .expect("opens");
    // The person on another replica: its own connection.
    let mut person = Stores::open(Some(&config), dir.path())
        .expect("connects")
        .pins_existing()
        .expect("reads")
        .expect("a shared store always has its pins");
    pins_suite("postgres", &mut gateway, &mut person);
}

/// What every inbox trail must keep across a restart (`open` opens the inbox anew, as a
/// restarted gateway or another replica does): every entry with its seq, which ones were read
/// and which roster handled itself, a seq that only grows, and a purge.
fn inbox_suite(backend: &str, open: &dyn Fn() -> Inbox) {
    let message = |data: &str| serde_json::json!({"level": "info", "data": data});
    let inbox = open();
    assert_eq!(inbox.entry_count(), 0, "{backend}: empty");
    let one = inbox.record("s", "notifications/message", message("one"), false);
    let handled = inbox.record(
        "s",
        "notifications/tools/list_changed",
        serde_json::json!({}),
        true,
    );
    let two = inbox.record("t", "notifications/message", message("two"), false);
    assert!(
        one < handled && handled < two,
        "{backend}: {one}, {handled}, {two}"
    );
    assert_eq!(
        inbox.unread().len(),
        2,
        "{backend}: what roster handled is not unread"
    );
    assert_eq!(inbox.list(Some("s"), 10).len(), 2, "{backend}: by channel");
    assert_eq!(inbox.ack(Some(one)), 1, "{backend}: read up to the first");
    drop(inbox);
    let again = open();
    let seqs: Vec<u64> = again.list(None, 10).iter().map(|e| e.seq).collect();
    assert_eq!(seqs.len(), 3, "{backend}: every entry is back: {seqs:?}");
    for seq in [one, handled, two] {
        assert!(
            seqs.contains(&seq),
            "{backend}: {seq} is back with its seq: {seqs:?}"
        );
    }
    let unread: Vec<u64> = again.unread().iter().map(|e| e.seq).collect();
    assert_eq!(unread, vec![two], "{backend}: read state is back");
    let three = again.record("s", "notifications/message", message("three"), false);
    assert!(three > two, "{backend}: the seq grows across a restart");
    let report = again.clear(true);
    assert_eq!(report.cleared, 4, "{backend}");
    assert!(report.partial_warning.is_none(), "{backend}: {report:?}");
    drop(again);
    let after = open();
    assert_eq!(
        after.entry_count(),
        0,
        "{backend}: the purge holds after a restart"
    );
    let four = after.record("s", "notifications/message", message("four"), false);
    assert!(four > three, "{backend}: the seq grows across a purge");
}

#[test]
fn the_state_dirs_inbox_trail_keeps_the_rules() {
    let dir = tempfile::tempdir().expect("temp dir");
    let open =
        || Inbox::open(InboxConfig::new(Stores::embedded(dir.path()))).expect("the inbox opens");
    inbox_suite("state dir", &open);
    assert!(
        dir.path().join(roster::inbox::AUDIT_FILE).is_file(),
        "the trail is the state dir's audit.jsonl"
    );
}

#[test]
fn the_shared_stores_inbox_trail_keeps_the_rules() {
    let pg = Postgres::start();
    let config = StoreConfig {
        url: pg.url_with_password(),
        password_env: None,
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let open = || {
        Inbox::open(InboxConfig {
            ..InboxConfig::new(Stores::open(Some(&config), dir.path()).expect("connects"))
        })
        .expect("the inbox opens")
    };
    inbox_suite("postgres", &open);
    assert!(
        !dir.path().join(roster::inbox::AUDIT_FILE).exists(),
        "nothing is written to the state dir's trail"
    );
}

#[test]
fn an_unreachable_shared_store_is_an_error_naming_its_url() {
    let port = common::free_port();
    let url = format!("postgres://roster@127.0.0.1:{port}/roster");
    let config = StoreConfig {
        url: url.clone(),
        password_env: None,
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let error = Stores::open(Some(&config), dir.path()).expect_err("nothing listens");
    assert!(error.to_string().contains(&url), "{error}");
}
