//! Reconcile and routing at the sizes a large gateway sees: one server with 10,000 tools.
//!
//! Run with `cargo bench -p roster-core --bench registry`; figures go to `bench/core.md`.

use divan::{Bencher, black_box};
use roster_core::{Listing, NamingConfig, Tool, ToolRegistry};
use serde_json::{Map, Value, json};

/// A JSON object literal as a map.
fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn main() {
    divan::main();
}

const TOOLS: usize = 10_000;

/// A tool shaped like real ones: a paragraph of description, a few typed and described
/// parameters, annotations.
fn tool(name: &str, variant: usize) -> Tool {
    let mut tool = Tool::new(name)
        .with_description(format!(
            "Searches the {name} index for documents matching a query and returns the best \
             matches with their titles, links and a short excerpt of each (revision {variant})."
        ))
        .with_input_schema(object(json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                "cursor": {"type": "string", "description": "Where the previous page ended."},
                "filters": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["query"],
            "additionalProperties": false
        })));
    tool.annotations = Some(Box::new(
        json!({"readOnlyHint": true, "openWorldHint": false}),
    ));
    tool
}

fn listing(prefix: &str, variant_of: impl Fn(usize) -> usize) -> Vec<Tool> {
    (0..TOOLS)
        .map(|i| tool(&format!("{prefix}_{i}"), variant_of(i)))
        .collect()
}

fn loaded() -> ToolRegistry {
    let mut registry =
        ToolRegistry::new(vec!["docs".into(), "other".into()], NamingConfig::default());
    registry.reconcile("docs", listing("search", |_| 0));
    registry.reconcile(
        "other",
        (0..100).map(|i| tool(&format!("t{i}"), 0)).collect(),
    );
    registry
}

/// Every tool replaced by a differently named one: 10,000 removed, 10,000 added.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn reconcile_10k_full_replace(bencher: Bencher<'_, '_>) {
    bencher
        .with_inputs(|| (loaded(), listing("lookup", |_| 0)))
        .bench_local_values(|(mut registry, listing)| {
            let delta = registry.reconcile("docs", listing);
            (registry, delta)
        });
}

/// Same names, every description changed: 10,000 changed.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn reconcile_10k_all_changed(bencher: Bencher<'_, '_>) {
    bencher
        .with_inputs(|| (loaded(), listing("search", |_| 1)))
        .bench_local_values(|(mut registry, listing)| {
            let delta = registry.reconcile("docs", listing);
            (registry, delta)
        });
}

/// The target case: 1% of the tools changed their description (100 changed).
#[divan::bench(sample_count = 30, sample_size = 1)]
fn reconcile_10k_one_percent_changed(bencher: Bencher<'_, '_>) {
    bencher
        .with_inputs(|| (loaded(), listing("search", |i| usize::from(i % 100 == 0))))
        .bench_local_values(|(mut registry, listing)| {
            let delta = registry.reconcile("docs", listing);
            debug_assert_eq!(delta.changed.len(), TOOLS / 100);
            (registry, delta)
        });
}

/// The target case through `reconcile_deferring_drop`: what a runtime holding the registry
/// behind a lock would hold it for; the superseded copies are freed after the timed section.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn reconcile_10k_one_percent_changed_deferring_drop(bencher: Bencher<'_, '_>) {
    bencher
        .with_inputs(|| (loaded(), listing("search", |i| usize::from(i % 100 == 0))))
        .bench_local_values(|(mut registry, listing)| {
            let (delta, superseded) = registry.reconcile_deferring_drop("docs", listing);
            (registry, delta, superseded)
        });
}

/// The target case as the runtime can run it: fingerprints taken as the pages arrived (outside
/// the timed section, as outside the registry's lock), superseded copies freed afterwards.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn reconcile_listing_10k_one_percent_changed(bencher: Bencher<'_, '_>) {
    bencher
        .with_inputs(|| {
            let listing: Listing = listing("search", |i| usize::from(i % 100 == 0)).into();
            (loaded(), listing)
        })
        .bench_local_values(|(mut registry, listing)| {
            let (delta, superseded) = registry.reconcile_listing("docs", listing);
            (registry, delta, superseded)
        });
}

/// 1% of the tools renamed: 100 removed, 100 added.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn reconcile_10k_one_percent_renamed(bencher: Bencher<'_, '_>) {
    let renamed = || {
        (0..TOOLS)
            .map(|i| {
                let prefix = if i % 100 == 0 { "renamed" } else { "search" };
                tool(&format!("{prefix}_{i}"), 0)
            })
            .collect::<Vec<_>>()
    };
    bencher
        .with_inputs(|| (loaded(), renamed()))
        .bench_local_values(|(mut registry, listing)| {
            let delta = registry.reconcile("docs", listing);
            (registry, delta)
        });
}

/// The same listing again: nothing to report.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn reconcile_10k_unchanged(bencher: Bencher<'_, '_>) {
    bencher
        .with_inputs(|| (loaded(), listing("search", |_| 0)))
        .bench_local_values(|(mut registry, listing)| {
            let delta = registry.reconcile("docs", listing);
            (registry, delta)
        });
}

/// One exposed-name lookup, cycling through all 10,100 names so the table is not all in L1.
/// The names sit back to back in one buffer, as a request's name would be at hand in cache.
#[divan::bench]
fn route_lookup_cycling(bencher: Bencher<'_, '_>) {
    let registry = loaded();
    let mut buffer = String::new();
    let mut spans = Vec::new();
    for t in registry.tools() {
        spans.push((buffer.len(), buffer.len() + t.exposed_name.len()));
        buffer.push_str(t.exposed_name);
    }
    let mut i = 0;
    bencher.bench_local(|| {
        i = (i + 1) % spans.len();
        let (start, end) = spans[i];
        black_box(registry.route(black_box(&buffer[start..end])))
    });
}

/// The same name looked up again and again.
#[divan::bench]
fn route_lookup_same_name(bencher: Bencher<'_, '_>) {
    let registry = loaded();
    bencher.bench_local(|| black_box(registry.route(black_box("docs__search_5000"))));
}

/// A lookup of a name that does not route.
#[divan::bench]
fn route_miss(bencher: Bencher<'_, '_>) {
    let registry = loaded();
    bencher.bench_local(|| black_box(registry.route(black_box("docs__no_such_tool"))));
}

/// The fingerprint of one tool shaped as above, in cache.
#[divan::bench]
fn fingerprint_one_tool(bencher: Bencher<'_, '_>) {
    let tool = tool("search_1", 0);
    bencher.bench_local(|| black_box(roster_core::Fingerprint::of(black_box(&tool))));
}

/// Part of every reconcile: fingerprinting a fresh 10,000-tool listing.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn part_fingerprint_10k_listing(bencher: Bencher<'_, '_>) {
    bencher
        .with_inputs(|| listing("search", |_| 0))
        .bench_local_refs(|listing| {
            listing
                .iter()
                .fold(0u64, |acc, t| acc ^ roster_core::Fingerprint::of(t).0)
        });
}

/// Part of every reconcile: freeing one 10,000-tool listing (the copy that is not kept).
#[divan::bench(sample_count = 30, sample_size = 1)]
fn part_drop_10k_listing(bencher: Bencher<'_, '_>) {
    bencher
        .with_inputs(|| listing("search", |_| 0))
        .bench_local_values(drop);
}

/// The target case at a tenth of the size, where the listing fits in cache.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn reconcile_1k_one_percent_changed(bencher: Bencher<'_, '_>) {
    let small = |variant_of: fn(usize) -> usize| {
        (0..TOOLS / 10)
            .map(|i| tool(&format!("search_{i}"), variant_of(i)))
            .collect::<Vec<_>>()
    };
    bencher
        .with_inputs(|| {
            let mut registry = ToolRegistry::new(vec!["docs".into()], NamingConfig::default());
            registry.reconcile("docs", small(|_| 0));
            (registry, small(|i| usize::from(i % 100 == 0)))
        })
        .bench_local_values(|(mut registry, listing)| {
            let delta = registry.reconcile("docs", listing);
            (registry, delta)
        });
}
