//! The store seam (`roster::store::Stores`): one suite per concern, run against every backend
//! — the state dir's files and a real PostgreSQL cluster (`common::infra::Postgres`) — so a
//! backend that answers differently fails here, not on a user's replica.
//!
//! Behind the seam so far: the OAuth tokens.

mod common;

use common::infra::Postgres;
use roster::config::StoreConfig;
use roster::store::{Stores, Tokens};

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
    assert!(stores.shared().is_some() && stores.state_dir().is_none());
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
