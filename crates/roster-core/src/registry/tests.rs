use super::*;
use crate::delta::Delta;
use crate::naming::{NATIVE_OWNER, NamingMode, is_native};
use crate::tool::{ToolLookup, ToolPresence};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

fn registry(servers: &[&str], mode: NamingMode) -> ToolRegistry {
    ToolRegistry::new(
        servers.iter().map(|s| s.to_string()).collect(),
        NamingConfig {
            mode,
            ..NamingConfig::default()
        },
    )
}

fn tools(names: &[&str]) -> Vec<Tool> {
    names
        .iter()
        .map(|n| Tool::new(*n).with_description(format!("{n} does things")))
        .collect()
}

/// A JSON object literal as a map.
fn object(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn exposed(r: &ToolRegistry) -> Vec<String> {
    r.tools().map(|t| t.exposed_name.to_string()).collect()
}

#[test]
fn first_listing_adds_prefixed_names_in_listing_order() {
    let mut r = registry(&["gh", "fs"], NamingMode::Always);
    let delta = r.reconcile("fs", tools(&["read", "write"]));
    assert_eq!(delta.added, names(&["fs__read", "fs__write"]));
    r.reconcile("gh", tools(&["issue"]));
    assert_eq!(exposed(&r), names(&["gh__issue", "fs__read", "fs__write"]));
    assert_eq!(r.tool_counts(), vec![("gh", 1), ("fs", 2)]);
    assert_eq!(r.len(), 3);
    let route = r.route("fs__write").expect("routes");
    assert_eq!((route.server, route.tool.name.as_str()), ("fs", "write"));
    assert!(r.route("write").is_none());
}

#[test]
fn same_listing_twice_is_empty() {
    let mut r = registry(&["a"], NamingMode::Always);
    assert!(!r.reconcile("a", tools(&["x", "y"])).is_empty());
    assert!(r.reconcile("a", tools(&["x", "y"])).is_empty());
    assert!(
        r.reconcile("a", tools(&["y", "x"])).is_empty(),
        "order alone is no news"
    );
    assert_eq!(
        exposed(&r),
        names(&["a__y", "a__x"]),
        "but the order is kept"
    );
}

#[test]
fn description_or_schema_change_is_changed() {
    let mut r = registry(&["a"], NamingMode::Always);
    r.reconcile("a", tools(&["x", "y"]));
    let mut listing = tools(&["x", "y"]);
    listing[0].description = Some("new words".into());
    assert_eq!(r.reconcile("a", listing.clone()).changed, names(&["a__x"]));
    listing[1].input_schema = Arc::new(object(
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    ));
    let d = r.reconcile("a", listing.clone());
    assert_eq!(
        (d.added.len(), d.changed, d.removed.len()),
        (0, names(&["a__y"]), 0)
    );
    listing[1].output_schema = Some(Box::new(json!({"type": "object"})));
    assert_eq!(r.reconcile("a", listing.clone()).changed, names(&["a__y"]));
    listing[0].annotations = Some(Box::new(json!({"readOnlyHint": true})));
    assert_eq!(r.reconcile("a", listing).changed, names(&["a__x"]));
}

#[test]
fn title_and_meta_are_kept_but_are_no_news() {
    let mut r = registry(&["a"], NamingMode::Always);
    r.reconcile("a", tools(&["x"]));
    let mut listing = tools(&["x"]);
    listing[0].title = Some("X".into());
    listing[0].meta = Some(Box::new(json!({"v": 2})));
    assert!(r.reconcile("a", listing).is_empty());
    let tool = r.route("a__x").expect("routes").tool;
    assert_eq!(tool.title.as_deref(), Some("X"));
    assert_eq!(tool.meta.as_deref(), Some(&json!({"v": 2})));
}

#[test]
fn removed_tools_and_servers() {
    let mut r = registry(&["a", "b"], NamingMode::Always);
    r.reconcile("a", tools(&["x", "y"]));
    r.reconcile("b", tools(&["x"]));
    assert_eq!(r.reconcile("a", tools(&["y"])).removed, names(&["a__x"]));
    assert!(r.route("b__x").is_some(), "b's x is not a's x");
    let d = r.remove_server("b");
    assert_eq!(d.removed, names(&["b__x"]));
    assert!(!r.is_listed("b") && r.is_listed("a"));
    assert_eq!(r.tool_counts(), vec![("a", 1), ("b", 0)]);
    assert!(r.remove_server("nope").is_empty());
    assert!(r.remove_server("b").is_empty());
}

#[test]
fn deferring_drop_hands_back_every_copy_not_kept() {
    let mut plain = registry(&["a"], NamingMode::Always);
    let mut deferring = registry(&["a"], NamingMode::Always);
    plain.reconcile("a", tools(&["x", "y", "z"]));
    deferring.reconcile("a", tools(&["x", "y", "z"]));
    let mut listing = tools(&["x", "y", "w", "w"]);
    listing[1].description = Some("changed".into());
    let expected = plain.reconcile("a", listing.clone());
    let (delta, superseded) = deferring.reconcile_deferring_drop("a", listing);
    assert_eq!(delta, expected);
    // x's and y's second copies, the duplicate w, the removed z.
    assert_eq!(superseded.len(), 4);
    assert_eq!(exposed(&plain), exposed(&deferring));
    let y = deferring.route("a__y").expect("routes").tool;
    assert_eq!(y.description.as_deref(), Some("changed"));

    // A listing built page by page reconciles like the whole Vec.
    let mut paged = registry(&["a"], NamingMode::Always);
    paged.reconcile("a", tools(&["x", "y", "z"]));
    let mut listing = Listing::new();
    listing.extend(tools(&["x"]));
    listing.extend(tools(&["y", "w"]).into_iter().map(|mut t| {
        if t.name == "y" {
            t.description = Some("changed".into());
        }
        t
    }));
    assert_eq!(listing.len(), 3);
    let (delta, _) = paged.reconcile_listing("a", listing);
    assert_eq!(delta, expected);
}

#[test]
fn duplicate_names_in_one_listing_keep_the_first() {
    let mut r = registry(&["a"], NamingMode::Always);
    let mut listing = tools(&["x", "x"]);
    listing[1].description = Some("second".into());
    let d = r.reconcile("a", listing);
    assert_eq!(d.added, names(&["a__x"]));
    assert_eq!(r.len(), 1);
    assert_eq!(
        r.route("a__x").expect("routes").tool.description.as_deref(),
        Some("x does things")
    );
}

#[test]
fn conditional_prefixes_only_with_several_servers() {
    let mut one = registry(&["a"], NamingMode::Conditional);
    one.reconcile("a", tools(&["x"]));
    assert_eq!(exposed(&one), names(&["x"]));
    let mut two = registry(&["a", "b"], NamingMode::Conditional);
    two.reconcile("a", tools(&["x"]));
    assert_eq!(exposed(&two), names(&["a__x"]));
    // A server that was not configured joins: everyone is prefixed now, and told so.
    let d = one.reconcile("late", tools(&["y"]));
    assert_eq!(exposed(&one), names(&["a__x", "late__y"]));
    assert_eq!(d.added, names(&["late__y", "a__x"]));
    assert_eq!(d.removed, names(&["x"]));
}

#[test]
fn never_mode_first_server_in_config_keeps_the_bare_name() {
    for first in ["a", "b"] {
        let mut r = registry(&["a", "b"], NamingMode::Never);
        let second = if first == "a" { "b" } else { "a" };
        r.reconcile(first, tools(&["x", "only"]));
        r.reconcile(second, tools(&["x"]));
        assert_eq!(
            r.route("x").expect("routes").server,
            "a",
            "arrival order {first}"
        );
        assert_eq!(r.route("b__x").expect("routes").server, "b");
        assert_eq!(
            r.collisions(),
            &[Collision {
                name: "x".into(),
                kept_by: "a".into(),
                server: "b".into(),
                exposed_as: "b__x".into(),
            }]
        );
    }
}

#[test]
fn never_mode_renames_of_other_servers_are_in_the_delta() {
    let mut r = registry(&["a", "b"], NamingMode::Never);
    r.reconcile("b", tools(&["x"]));
    assert_eq!(exposed(&r), names(&["x"]));
    let d = r.reconcile("a", tools(&["x"]));
    // a's x now owns "x" (a different tool under the old name), b's x moved to "b__x".
    assert_eq!(d.changed, names(&["x"]));
    assert_eq!(d.added, names(&["b__x"]));
    assert!(d.removed.is_empty());
    assert_eq!(r.route("b__x").expect("b keeps its tool").tool.name, "x");
    let d = r.reconcile("a", Vec::new());
    assert_eq!(d.changed, names(&["x"]));
    assert_eq!(d.removed, names(&["b__x"]));
    assert_eq!(r.route("x").expect("bare again").server, "b");
    assert!(r.collisions().is_empty());
}

#[test]
fn native_names_are_never_shadowed() {
    let mut r = registry(&["s"], NamingMode::Never);
    r.reconcile("s", tools(&["list_skills", "refresh_tools", "other"]));
    assert_eq!(
        exposed(&r),
        names(&["s__list_skills", "s__refresh_tools", "other"])
    );
    assert!(r.route("list_skills").is_none());
    assert_eq!(r.collisions().len(), 2);
    assert_eq!(r.collisions()[0].kept_by, NATIVE_OWNER);
    let mut always = registry(&["s"], NamingMode::Always);
    always.reconcile("s", tools(&["channels"]));
    assert_eq!(exposed(&always), names(&["s__channels"]));
    assert!(always.collisions().is_empty());
    // A prefixed name can spell a native name too.
    let mut odd = ToolRegistry::new(
        vec!["list".into()],
        NamingConfig {
            mode: NamingMode::Always,
            separator: "_".into(),
        },
    );
    odd.reconcile("list", tools(&["skills"]));
    assert_ne!(exposed(&odd), names(&["list_skills"]));
}

#[test]
fn sanitized_names_stay_apart() {
    let mut r = registry(&["my server"], NamingMode::Always);
    r.reconcile(
        "my server",
        tools(&["a b", "a_b", "ünï", &"long".repeat(30)]),
    );
    let all = exposed(&r);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), 4);
    for name in &all {
        assert!(crate::naming::is_valid_exposed_name(name), "{name}");
    }
    let route = r.route(&all[0]).expect("routes");
    assert_eq!(
        (route.server, route.tool.name.as_str()),
        ("my server", "a b")
    );
}

#[test]
fn presence_follows_listings() {
    let mut r = registry(&["a", "b"], NamingMode::Always);
    assert_eq!(r.presence("a__x"), ToolPresence::Unknown);
    r.reconcile("a", tools(&["x"]));
    assert_eq!(r.presence("a__x"), ToolPresence::Present);
    assert_eq!(r.presence("a__y"), ToolPresence::Missing);
    assert_eq!(r.presence("b__y"), ToolPresence::Unknown);
    assert_eq!(
        r.presence("zzz__y"),
        ToolPresence::Missing,
        "no such server"
    );
    r.remove_server("a");
    assert_eq!(r.presence("a__x"), ToolPresence::Unknown);

    let mut bare = registry(&["a", "b"], NamingMode::Never);
    bare.reconcile("a", tools(&["x"]));
    assert_eq!(bare.presence("x"), ToolPresence::Present);
    assert_eq!(
        bare.presence("y"),
        ToolPresence::Unknown,
        "b may still offer it"
    );
    bare.reconcile("b", Vec::new());
    assert_eq!(bare.presence("y"), ToolPresence::Missing);
}

#[test]
fn exposed_names_by_server_and_own_name() {
    let mut r = registry(&["a", "b"], NamingMode::Never);
    r.reconcile("a", tools(&["x"]));
    r.reconcile("b", tools(&["x", "y"]));
    assert_eq!(r.exposed_name("a", "x"), Some("x"));
    assert_eq!(
        r.exposed_name("b", "x"),
        Some("b__x"),
        "a keeps the bare name"
    );
    assert_eq!(r.exposed_name("b", "z"), None);
    assert_eq!(r.exposed_name("c", "x"), None);
    assert_eq!(r.first_candidate("b", "z"), "z");
    let prefixed = registry(&["a"], NamingMode::Always);
    assert_eq!(prefixed.first_candidate("a", "z"), "a__z");
}

// ---- properties ----

/// Serial dictatorship from scratch: the assignment the incremental one must equal.
fn reference_names(r: &ToolRegistry) -> BTreeMap<(u32, String), String> {
    let bare_first = r.bare_first();
    let mut pairs: Vec<(u32, String)> = Vec::new();
    for (s, server) in r.servers.iter().enumerate() {
        for &slot in &server.order {
            let entry = server.slots[slot as usize].as_ref().expect("live slot");
            pairs.push((s as u32, entry.tool.name.clone()));
        }
    }
    pairs.sort();
    let mut taken = HashSet::new();
    let mut out = BTreeMap::new();
    for (s, tool) in pairs {
        let server = &r.servers[s as usize].name;
        let name = (0..)
            .map(|k| r.naming.candidate(server, &tool, bare_first, k))
            .find(|c| !is_native(c) && !taken.contains(c))
            .expect("chains are endless");
        taken.insert(name.clone());
        out.insert((s, tool), name);
    }
    out
}

/// exposed name -> (server, tool name, fingerprint), and per server its (tool, fingerprint)s.
type Snapshot = (
    BTreeMap<String, (String, String, Fingerprint)>,
    BTreeMap<String, Vec<(Tool, Fingerprint)>>,
);

/// What a client would be served, in order.
fn listed(r: &ToolRegistry) -> Vec<(String, Tool)> {
    r.tools()
        .map(|t| (t.exposed_name.to_string(), t.tool.clone()))
        .collect()
}

fn snapshot(r: &ToolRegistry) -> Snapshot {
    let mut by_name = BTreeMap::new();
    let mut by_server: BTreeMap<String, Vec<(Tool, Fingerprint)>> = BTreeMap::new();
    for t in r.tools() {
        by_name.insert(
            t.exposed_name.to_string(),
            (t.server.to_string(), t.tool.name.clone(), t.fingerprint),
        );
        by_server
            .entry(t.server.to_string())
            .or_default()
            .push((t.tool.clone(), t.fingerprint));
    }
    (by_name, by_server)
}

fn expected_delta(
    before: &Snapshot,
    after: &Snapshot,
) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let (b, a) = (&before.0, &after.0);
    let added = a.keys().filter(|n| !b.contains_key(*n)).cloned().collect();
    let removed = b.keys().filter(|n| !a.contains_key(*n)).cloned().collect();
    let changed = a
        .iter()
        .filter(|(n, t)| b.get(*n).is_some_and(|old| old != *t))
        .map(|(n, _)| n.clone())
        .collect();
    (added, changed, removed)
}

fn as_sets(d: &Delta) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let set = |v: &Vec<String>| v.iter().cloned().collect::<BTreeSet<_>>();
    (set(&d.added), set(&d.changed), set(&d.removed))
}

fn tool_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "x", "y", "x y", "x_y", "a__x", "b__x", "list_skills", "channels", "", "ü", "a", "b__",
            "_x", "x.y",
        ]).prop_map(String::from),
        1 => "[a-z]{60,70}",
        1 => "\\PC{0,6}",
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Reconcile(usize, Vec<(String, u8)>),
    Remove(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..4, prop::collection::vec((tool_name(), 0u8..3), 0..6)).prop_map(|(s, l)| Op::Reconcile(s, l)),
        1 => (0usize..4).prop_map(Op::Remove),
    ]
}

fn mode() -> impl Strategy<Value = NamingConfig> {
    (
        prop::sample::select(vec![
            NamingMode::Always,
            NamingMode::Conditional,
            NamingMode::Never,
        ]),
        prop::sample::select(vec!["__", "_", "."]),
    )
        .prop_map(|(mode, sep)| NamingConfig {
            mode,
            separator: sep.to_string(),
        })
}

fn server_names() -> impl Strategy<Value = Vec<String>> {
    prop::sample::select(vec![
        vec!["a", "b", "x", "late"],
        vec!["a", "a__b", "a_", "late"],
        vec!["a b", "a_b", "ü", "late"],
        vec!["s", "list", "", "late"],
    ])
    .prop_map(|v| v.into_iter().map(String::from).collect())
}

fn listing(spec: &[(String, u8)]) -> Vec<Tool> {
    spec.iter()
        .map(|(name, variant)| match variant {
            0 => Tool::new(name.clone()),
            1 => Tool::new(name.clone()).with_description("described"),
            _ => Tool::new(name.clone())
                .with_input_schema(object(json!({"type": "object", "properties": {}}))),
        })
        .collect()
}

#[test]
fn a_call_by_one_servers_own_name_routes_to_it() {
    let mut r = registry(&["apps", "fs"], NamingMode::Always);
    r.reconcile("apps", tools(&["poll-system-stats", "read"]));
    r.reconcile("fs", tools(&["read"]));
    let routed = r
        .route_call("poll-system-stats")
        .expect("one server has it");
    assert_eq!(
        (
            routed.server,
            routed.tool.name.as_str(),
            routed.exposed_name
        ),
        ("apps", "poll-system-stats", "apps__poll-system-stats")
    );
    let exposed = r.route_call("fs__read").expect("exposed name");
    assert_eq!((exposed.server, exposed.tool.name.as_str()), ("fs", "read"));
    assert_eq!(
        r.route_call("nope"),
        Err(CallRouteError::Unknown("nope".into()))
    );
}

#[test]
fn a_call_by_an_own_name_two_servers_have_names_both_exposed_names() {
    let mut r = registry(&["apps", "fs"], NamingMode::Always);
    r.reconcile("fs", tools(&["read"]));
    r.reconcile("apps", tools(&["read"]));
    let err = r.route_call("read").expect_err("ambiguous");
    assert_eq!(
        err,
        CallRouteError::Ambiguous {
            name: "read".into(),
            exposed: names(&["apps__read", "fs__read"]),
        }
    );
    let message = err.to_string();
    assert!(
        message.contains("apps__read") && message.contains("fs__read"),
        "{message}"
    );
}

#[test]
fn exposed_names_and_native_names_win_over_own_names() {
    // In `never` mode `a`'s bare `x` is exposed as `x`; `b`'s is `b__x`.
    let mut r = registry(&["a", "b"], NamingMode::Never);
    r.reconcile("a", tools(&["x"]));
    r.reconcile("b", tools(&["x", "a__x", "refresh_tools"]));
    assert_eq!(r.route_call("x").expect("exposed").server, "a");
    // `a__x` is b's own name and no exposed name (a's x is exposed bare).
    assert_eq!(r.route_call("a__x").expect("own name").server, "b");
    assert_eq!(
        r.route_call("refresh_tools"),
        Err(CallRouteError::Unknown("refresh_tools".into())),
        "a native tool's name never reaches a server"
    );
    assert_eq!(
        r.route_call("b__refresh_tools").expect("exposed").tool.name,
        "refresh_tools"
    );
}

#[test]
fn a_removed_server_is_no_owner() {
    let mut r = registry(&["a", "b"], NamingMode::Always);
    r.reconcile("a", tools(&["x"]));
    r.reconcile("b", tools(&["x"]));
    assert!(matches!(
        r.route_call("x"),
        Err(CallRouteError::Ambiguous { .. })
    ));
    r.remove_server("a");
    assert_eq!(r.route_call("x").expect("only b now").server, "b");
}

proptest! {
    /// `route_call` is: the exposed name's tool; else, for a non-native name, the one
    /// server listing it as its own name, or an error naming every such server's exposed
    /// name in config order.
    #[test]
    fn route_call_follows_its_rule(
        naming in mode(),
        listings in prop::collection::vec(
            prop::collection::vec(
                prop::sample::select(vec!["x", "y", "s1__x", "x__s2", "list_skills", "get_skill"]),
                0..4,
            ),
            3,
        ),
        called in prop::sample::select(vec!["x", "y", "z", "s1__x", "s2__x", "x__s2", "list_skills", "s3__get_skill"]),
    ) {
        let servers = names(&["s1", "s2", "s3"]);
        let mut r = ToolRegistry::new(servers.clone(), naming);
        for (server, listing) in servers.iter().zip(&listings) {
            r.reconcile(server, listing.iter().map(|n| Tool::new(*n)).collect());
        }
        let outcome = r.route_call(called);
        if let Some(exposed) = r.tools().find(|t| t.exposed_name == called) {
            prop_assert_eq!(outcome, Ok(exposed));
            return Ok(());
        }
        let owners: Vec<ExposedTool<'_>> = r.tools().filter(|t| t.tool.name == called).collect();
        match (is_native(called), owners.as_slice()) {
            (true, _) | (false, []) => {
                prop_assert_eq!(outcome, Err(CallRouteError::Unknown(called.to_owned())));
            }
            (false, [one]) => prop_assert_eq!(outcome, Ok(*one)),
            (false, many) => prop_assert_eq!(
                outcome,
                Err(CallRouteError::Ambiguous {
                    name: called.to_owned(),
                    exposed: many.iter().map(|t| t.exposed_name.to_owned()).collect(),
                })
            ),
        }
    }
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9_]{0,8}",
        "\\PC{0,12}",
        "[A-Za-z0-9_.-]{60,80}",
        "\\PC{60,100}",
        "[ _/]{1,3}",
    ]
}

proptest! {
    /// Whatever the servers and tools are called, every exposed name is valid, unique, routes
    /// to its own tool, and a fresh registry fed the same listings agrees on every name.
    #[test]
    fn arbitrary_names_expose_valid_unique_names(
        naming in mode(),
        servers in prop::collection::vec(any_text(), 1..4),
        listings in prop::collection::vec(prop::collection::vec(any_text(), 0..6), 4),
    ) {
        let mut unique = HashSet::new();
        let servers: Vec<String> = servers.into_iter().filter(|s| unique.insert(s.clone())).collect();
        let mut r = ToolRegistry::new(servers.clone(), naming.clone());
        for (server, names) in servers.iter().zip(&listings).rev() {
            r.reconcile(server, names.iter().map(|n| Tool::new(n.clone())).collect());
        }
        let mut seen = HashSet::new();
        for t in r.tools() {
            prop_assert!(crate::naming::is_valid_exposed_name(t.exposed_name), "{:?}", t.exposed_name);
            prop_assert!(seen.insert(t.exposed_name.to_string()), "{:?} twice", t.exposed_name);
            let route = r.route(t.exposed_name).expect("routes");
            prop_assert_eq!((route.server, &route.tool.name), (t.server, &t.tool.name));
        }
        let mut forward = ToolRegistry::new(servers.clone(), naming);
        for (server, names) in servers.iter().zip(&listings) {
            forward.reconcile(server, names.iter().map(|n| Tool::new(n.clone())).collect());
        }
        let names = |r: &ToolRegistry| r.tools().map(|t| (t.server.to_string(), t.tool.name.clone(), t.exposed_name.to_string())).collect::<Vec<_>>();
        prop_assert_eq!(names(&r), names(&forward));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn registry_invariants_hold_after_every_operation(
        naming in mode(),
        servers in server_names(),
        configured in 1usize..4,
        ops in prop::collection::vec(op(), 1..12),
    ) {
        let mut r = ToolRegistry::new(servers[..configured].to_vec(), naming);
        for op in ops {
            let before = snapshot(&r);
            let listed_before = listed(&r);
            let version_before = r.version();
            let (server, delta) = match &op {
                Op::Reconcile(s, spec) => (servers[*s].clone(), r.reconcile(&servers[*s], listing(spec))),
                Op::Remove(s) => (servers[*s].clone(), r.remove_server(&servers[*s])),
            };
            let after = snapshot(&r);

            // Exposed names: unique, valid, routing to their tools.
            let all: Vec<ExposedTool<'_>> = r.tools().collect();
            prop_assert_eq!(all.len(), r.len());
            prop_assert_eq!(after.0.len(), r.len(), "names are unique");
            for t in &all {
                prop_assert!(crate::naming::is_valid_exposed_name(t.exposed_name), "{:?}", t.exposed_name);
                prop_assert!(!is_native(t.exposed_name));
                let route = r.route(t.exposed_name).expect("every exposed name routes");
                prop_assert_eq!((route.server, &route.tool.name), (t.server, &t.tool.name));
                prop_assert_eq!(r.presence(t.exposed_name), ToolPresence::Present);
            }

            // Names depend on the state only, not on the history that led to it.
            let mut got = BTreeMap::new();
            for (s, srv) in r.servers.iter().enumerate() {
                for &slot in &srv.order {
                    let e = srv.slots[slot as usize].as_ref().expect("live slot");
                    got.insert((s as u32, e.tool.name.clone()), e.exposed.to_string());
                }
            }
            prop_assert_eq!(got, reference_names(&r));

            // No other server's entries were touched.
            for (other, entries) in &before.1 {
                if *other != server {
                    prop_assert_eq!(Some(entries), after.1.get(other));
                }
            }
            for (other, entries) in &after.1 {
                if *other != server {
                    prop_assert_eq!(Some(entries), before.1.get(other));
                }
            }

            // The delta says exactly what a client would see change.
            prop_assert_eq!(as_sets(&delta), expected_delta(&before, &after));
            let mut seen = HashSet::new();
            for n in delta.added.iter().chain(&delta.changed).chain(&delta.removed) {
                prop_assert!(seen.insert(n.clone()), "{} listed twice in {:?}", n, delta);
            }

            // The version moves whenever the listing a client sees does.
            if listed(&r) != listed_before {
                prop_assert_ne!(r.version(), version_before, "the tools changed, the version did not");
            }

            // Same listing again: nothing, and the version stays.
            if let Op::Reconcile(s, spec) = &op {
                let version = r.version();
                prop_assert!(r.reconcile(&servers[*s], listing(spec)).is_empty());
                prop_assert_eq!(r.version(), version, "an unchanged listing moved the version");
            }
        }
    }
}

fn found(r: &ToolRegistry, query: &str) -> Vec<String> {
    r.search(query, 10, |_| true)
        .into_iter()
        .map(|(t, _)| t.exposed_name.to_owned())
        .collect()
}

#[test]
fn search_follows_every_reconcile_without_a_rebuild() {
    let mut r = registry(&["a", "b"], NamingMode::Always);
    r.reconcile("a", tools(&["alpha"]));
    assert!(found(&r, "alpha").is_empty(), "search is off until set");
    r.set_search(true);
    assert_eq!(found(&r, "alpha"), ["a__alpha"]);
    // Added by a later listing: found; dropped: never found again.
    r.reconcile("b", tools(&["bravo"]));
    assert_eq!(found(&r, "bravo"), ["b__bravo"]);
    r.reconcile("a", Vec::new());
    assert!(found(&r, "alpha").is_empty());
    // A changed description is what is searched.
    r.reconcile(
        "b",
        vec![Tool::new("bravo").with_description("reticulates splines")],
    );
    assert_eq!(found(&r, "splines"), ["b__bravo"]);
    assert!(found(&r, "things").is_empty());
    // A crashed server's tools leave the index with it.
    r.remove_server("b");
    assert!(found(&r, "splines").is_empty());
}

#[test]
fn search_names_tools_as_exposed_now_and_ranks_an_exact_name_first() {
    let mut r = registry(&["a", "b"], NamingMode::Never);
    r.set_search(true);
    r.reconcile("b", tools(&["shared", "other"]));
    assert_eq!(found(&r, "shared"), ["shared"]);
    // a, earlier in config order, takes the bare name: b's tool is renamed, and search says so.
    r.reconcile("a", tools(&["shared"]));
    let hits = found(&r, "shared");
    assert_eq!(hits.len(), 2);
    assert!(hits.contains(&"shared".to_owned()) && hits.iter().any(|h| h.starts_with("b")));
    // "other does things" shares "does things" with every tool; its exact name still wins.
    assert_eq!(
        found(&r, "other").first().map(String::as_str),
        Some("other")
    );
    // accept hides what the caller may not see.
    let hidden: Vec<_> = r
        .search("shared", 10, |t| t.server != "a")
        .into_iter()
        .map(|(t, _)| t.server.to_owned())
        .collect();
    assert_eq!(hidden, ["b"]);
}
