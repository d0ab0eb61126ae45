//! Tool search measurements (issue 19, `[gateway] tools_mode = "search"`).
//!
//! In process, on roster-core's `ToolRegistry` with search on: recall@5 of the labelled set in
//! `bench/tool-search` (the six reference servers' real tools, plus deterministic synthetic
//! filler servers after them), search latency at 10,000 tools, and what keeping the index costs
//! a reconcile. End to end, through `roster serve` over stdio in front of 50 echo servers × 100
//! filler tools: the o200k tokens of the client's `tools/list` in `all` and `search` mode, the
//! tokens an agent spends finding and calling one tool in each mode, and `search_tools` round
//! trips timed by this (rmcp) client and by the official Python SDK client, each against a
//! baseline of the same run.
//!
//! `cargo run --release -p roster-bench --bin tool-search -- [--roster PATH] [--python PATH]`;
//! `--quick` runs the in-process part at tiny sizes (the smoke test's check that this runs).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use roster_bench::client::{Session, Target, Watcher, connect};
use roster_bench::stats::Percentiles;
use roster_core::{NamingConfig, Tool, ToolRegistry};
use serde::Deserialize;
use serde_json::{Map, Value, json};

// ---- the labelled set ----

const REFERENCE_TOOLS: &str = include_str!("../../tool-search/reference-tools.json");
const QUERIES: &str = include_str!("../../tool-search/queries.jsonl");
/// The reference servers in config order.
const REFERENCE_SERVERS: [&str; 6] = ["fs", "memory", "everything", "time", "git", "fetch"];

#[derive(Debug, Deserialize)]
struct Query {
    query: String,
    relevant: Vec<String>,
}

fn queries() -> anyhow::Result<Vec<Query>> {
    QUERIES
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("queries.jsonl: {l}")))
        .collect()
}

fn reference_servers() -> anyhow::Result<Vec<(String, Vec<Tool>)>> {
    let doc: Value = serde_json::from_str(REFERENCE_TOOLS)?;
    REFERENCE_SERVERS
        .iter()
        .map(|&server| {
            let tools = doc["servers"][server].clone();
            let tools: Vec<Tool> = serde_json::from_value(tools)
                .with_context(|| format!("reference-tools.json: servers.{server}"))?;
            Ok((server.to_owned(), tools))
        })
        .collect()
}

// ---- synthetic fillers ----

/// SaaS-like domains: a server name and the things its tools act on.
const DOMAINS: &[(&str, &[&str])] = &[
    (
        "crm",
        &[
            "contact", "lead", "deal", "account", "company", "pipeline", "note", "activity",
        ],
    ),
    (
        "billing",
        &[
            "invoice",
            "payment",
            "subscription",
            "customer",
            "refund",
            "coupon",
            "plan",
            "receipt",
        ],
    ),
    (
        "tickets",
        &[
            "ticket",
            "comment",
            "agent",
            "queue",
            "tag",
            "macro",
            "attachment",
            "sla policy",
        ],
    ),
    (
        "calendar",
        &[
            "event",
            "calendar",
            "attendee",
            "reminder",
            "availability",
            "room",
            "invitation",
            "time slot",
        ],
    ),
    (
        "weather",
        &[
            "forecast",
            "alert",
            "observation",
            "station",
            "radar image",
            "air quality report",
            "history",
            "location",
        ],
    ),
    (
        "analytics",
        &[
            "report",
            "dashboard",
            "metric",
            "segment",
            "funnel",
            "event",
            "cohort",
            "export",
        ],
    ),
    (
        "chat",
        &[
            "message", "channel", "thread", "reaction", "user", "file", "mention", "status",
        ],
    ),
    (
        "email",
        &[
            "message",
            "draft",
            "label",
            "mailbox",
            "attachment",
            "contact",
            "template",
            "filter",
        ],
    ),
    (
        "storage",
        &[
            "bucket",
            "object",
            "file",
            "folder",
            "upload",
            "version",
            "lifecycle rule",
            "access key",
        ],
    ),
    (
        "docs",
        &[
            "document",
            "page",
            "comment",
            "folder",
            "template",
            "revision",
            "permission",
            "space",
        ],
    ),
    (
        "projects",
        &[
            "project",
            "task",
            "milestone",
            "sprint",
            "board",
            "issue",
            "label",
            "member",
        ],
    ),
    (
        "hr",
        &[
            "employee",
            "time off request",
            "payroll run",
            "department",
            "position",
            "review",
            "benefit",
            "candidate",
        ],
    ),
    (
        "inventory",
        &[
            "product",
            "warehouse",
            "stock level",
            "order",
            "shipment",
            "supplier",
            "sku",
            "batch",
        ],
    ),
    (
        "shop",
        &[
            "order",
            "cart",
            "product",
            "customer",
            "discount",
            "review",
            "collection",
            "fulfillment",
        ],
    ),
    (
        "marketing",
        &[
            "campaign",
            "audience",
            "email template",
            "ad",
            "landing page",
            "subscriber",
            "list",
            "automation",
        ],
    ),
    (
        "monitoring",
        &[
            "alert",
            "incident",
            "check",
            "metric",
            "log entry",
            "dashboard",
            "on call schedule",
            "status page",
        ],
    ),
    (
        "cicd",
        &[
            "pipeline",
            "build",
            "job",
            "artifact",
            "deployment",
            "environment",
            "secret",
            "runner",
        ],
    ),
    (
        "cloud",
        &[
            "instance",
            "volume",
            "snapshot",
            "network",
            "firewall rule",
            "load balancer",
            "dns record",
            "image",
        ],
    ),
    (
        "database",
        &[
            "table",
            "row",
            "query",
            "index",
            "backup",
            "user",
            "schema",
            "connection",
        ],
    ),
    (
        "payments",
        &[
            "charge",
            "payout",
            "dispute",
            "card",
            "bank account",
            "transfer",
            "balance",
            "webhook",
        ],
    ),
    (
        "social",
        &[
            "post",
            "comment",
            "follower",
            "profile",
            "media",
            "hashtag",
            "mention",
            "scheduled post",
        ],
    ),
    (
        "maps",
        &[
            "place",
            "route",
            "geocode",
            "distance matrix",
            "map tile",
            "review",
            "direction",
            "timezone",
        ],
    ),
    (
        "translate",
        &[
            "text",
            "document",
            "glossary",
            "language",
            "translation job",
            "detection",
            "model",
            "translation memory",
        ],
    ),
    (
        "survey",
        &[
            "survey",
            "question",
            "response",
            "respondent",
            "template",
            "report",
            "distribution",
            "quota",
        ],
    ),
    (
        "accounting",
        &[
            "ledger",
            "journal entry",
            "expense",
            "bill",
            "tax rate",
            "vendor",
            "budget",
            "account",
        ],
    ),
    (
        "helpcenter",
        &[
            "article",
            "category",
            "section",
            "translation",
            "vote",
            "attachment",
            "search index",
            "author",
        ],
    ),
    (
        "video",
        &[
            "video",
            "playlist",
            "caption",
            "thumbnail",
            "live stream",
            "channel",
            "comment",
            "upload",
        ],
    ),
    (
        "music",
        &[
            "track",
            "album",
            "artist",
            "playlist",
            "queue",
            "device",
            "lyrics",
            "recommendation",
        ],
    ),
    (
        "iot",
        &[
            "device",
            "sensor reading",
            "firmware",
            "group",
            "rule",
            "telemetry",
            "command",
            "certificate",
        ],
    ),
    (
        "security",
        &[
            "vulnerability",
            "scan",
            "policy",
            "user",
            "role",
            "api key",
            "audit log",
            "session",
        ],
    ),
    (
        "legal",
        &[
            "contract",
            "clause",
            "signature request",
            "template",
            "matter",
            "document",
            "deadline",
            "party",
        ],
    ),
    (
        "travel",
        &[
            "flight",
            "hotel",
            "booking",
            "itinerary",
            "traveler",
            "fare",
            "seat",
            "visa requirement",
        ],
    ),
    (
        "food",
        &[
            "order",
            "restaurant",
            "menu item",
            "delivery",
            "courier",
            "rating",
            "coupon",
            "address",
        ],
    ),
    (
        "realestate",
        &[
            "listing",
            "property",
            "showing",
            "offer",
            "agent",
            "tenant",
            "lease",
            "maintenance request",
        ],
    ),
];

/// Second, third … instances of a domain (a company with regional accounts).
const INSTANCES: [&str; 4] = ["", "_eu", "_us", "_apac"];

/// Verbs and their one-sentence descriptions (`{n}` a noun, `{ns}` its plural, `{d}` the
/// domain); two phrasings each, picked by the seed.
const VERBS: &[(&str, [&str; 2])] = &[
    (
        "create",
        [
            "Create a new {n} in the {d} workspace.",
            "Creates a {n} with the given fields and returns it.",
        ],
    ),
    (
        "get",
        [
            "Get a single {n} by its ID.",
            "Fetch the details of one {n}, including timestamps and owner.",
        ],
    ),
    (
        "list",
        [
            "List {ns} with optional filters and pagination.",
            "Returns a page of {ns}, newest first.",
        ],
    ),
    (
        "update",
        [
            "Update fields of an existing {n}.",
            "Change the name, status or other properties of a {n}.",
        ],
    ),
    (
        "delete",
        [
            "Delete a {n} permanently.",
            "Remove a {n} from the {d} account; this cannot be undone.",
        ],
    ),
    (
        "search",
        [
            "Search {ns} by keyword or filter expression.",
            "Find {ns} whose fields match a text query.",
        ],
    ),
    (
        "archive",
        [
            "Archive a {n} so it no longer shows in default views.",
            "Move a {n} to the archive.",
        ],
    ),
    (
        "export",
        [
            "Export {ns} as CSV or JSON.",
            "Download all {ns} matching a filter as a file.",
        ],
    ),
    (
        "import",
        [
            "Import {ns} from a CSV file.",
            "Bulk load {ns} from uploaded data.",
        ],
    ),
    (
        "assign",
        ["Assign a {n} to a user or team.", "Set the owner of a {n}."],
    ),
    (
        "duplicate",
        [
            "Duplicate an existing {n}.",
            "Make a copy of a {n} with a new ID.",
        ],
    ),
    (
        "restore",
        [
            "Restore a previously archived or deleted {n}.",
            "Bring back a {n} from the trash.",
        ],
    ),
    (
        "count",
        [
            "Count {ns} matching a filter.",
            "Return the number of {ns} in the {d} account.",
        ],
    ),
    (
        "tag",
        ["Add tags to a {n}.", "Label a {n} with one or more tags."],
    ),
    (
        "share",
        [
            "Share a {n} with other users.",
            "Grant another user access to a {n}.",
        ],
    ),
    (
        "sync",
        [
            "Sync {ns} with the connected {d} account.",
            "Pull the latest {ns} from the {d} provider.",
        ],
    ),
];

/// Fields a create or update takes, with their descriptions.
const FIELDS: &[(&str, &str, &str)] = &[
    ("name", "string", "Display name of the {n}."),
    ("description", "string", "Free-text description."),
    ("status", "string", "One of active, pending or closed."),
    ("owner_id", "string", "ID of the user who owns the {n}."),
    ("due_date", "string", "Due date in ISO 8601 format."),
    ("email", "string", "Contact email address."),
    ("amount", "number", "Amount in the account's currency."),
    ("currency", "string", "Three-letter ISO currency code."),
    ("notes", "string", "Internal notes, not shown to customers."),
    ("priority", "string", "low, normal, high or urgent."),
    ("tags", "array", "Tags to attach."),
    ("metadata", "object", "Custom key-value pairs."),
];

/// A fixed-seed generator (splitmix64): the same fillers on every run and machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

fn plural(noun: &str) -> String {
    if noun.ends_with('y') && !noun.ends_with("ey") && !noun.ends_with("ay") {
        format!("{}ies", &noun[..noun.len() - 1])
    } else if noun.ends_with('s') || noun.ends_with("ch") || noun.ends_with('x') {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    }
}

fn property(kind: &str, description: String) -> Value {
    json!({"type": kind, "description": description})
}

/// One filler tool: `verb_noun`, a one-sentence description and a few described properties.
fn filler_tool(rng: &mut Rng, domain: &str, verb: usize, noun: &str) -> Tool {
    let (v, phrasings) = VERBS[verb];
    let snake = noun.replace(' ', "_");
    let fill = |s: &str| {
        s.replace("{ns}", &plural(noun))
            .replace("{n}", noun)
            .replace("{d}", domain)
    };
    let description = fill(phrasings[rng.below(2)]);
    let mut properties = Map::new();
    let id = || property("string", fill("The ID of the {n}."));
    match v {
        "create" | "update" => {
            if v == "update" {
                properties.insert(format!("{snake}_id"), id());
            }
            let mut fields: Vec<usize> = (0..FIELDS.len()).collect();
            rng.shuffle(&mut fields);
            for &f in &fields[..2 + rng.below(3)] {
                let (name, kind, text) = FIELDS[f];
                properties.insert(name.to_owned(), property(kind, fill(text)));
            }
        }
        "list" | "search" | "count" | "export" | "sync" => {
            if v == "search" {
                properties.insert(
                    "query".to_owned(),
                    property("string", "Text to match.".to_owned()),
                );
            } else {
                properties.insert(
                    "filter".to_owned(),
                    property("string", "Filter expression, e.g. status:open.".to_owned()),
                );
            }
            if v != "count" {
                properties.insert(
                    "limit".to_owned(),
                    property("integer", fill("Maximum number of {ns} to return.")),
                );
                properties.insert(
                    "cursor".to_owned(),
                    property(
                        "string",
                        "Pagination cursor from the previous page.".to_owned(),
                    ),
                );
            }
        }
        "import" => {
            properties.insert(
                "file_url".to_owned(),
                property("string", "URL of the CSV to import.".to_owned()),
            );
        }
        "assign" | "share" => {
            properties.insert(format!("{snake}_id"), id());
            properties.insert(
                "user_id".to_owned(),
                property("string", "The user or team to give it to.".to_owned()),
            );
        }
        "tag" => {
            properties.insert(format!("{snake}_id"), id());
            properties.insert(
                "tags".to_owned(),
                property("array", "Tags to add.".to_owned()),
            );
        }
        _ => {
            properties.insert(format!("{snake}_id"), id());
        }
    }
    let required: Vec<Value> = properties
        .keys()
        .filter(|k| k.ends_with("_id") || *k == "query")
        .map(|k| Value::String(k.clone()))
        .collect();
    let mut schema = Map::new();
    schema.insert("type".to_owned(), json!("object"));
    schema.insert("properties".to_owned(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".to_owned(), Value::Array(required));
    }
    Tool::new(format!("{v}_{snake}"))
        .with_description(description)
        .with_input_schema(schema)
}

/// `count` filler tools on servers of `per_server` tools, in a fixed order.
fn fillers(count: usize, per_server: usize) -> Vec<(String, Vec<Tool>)> {
    let mut rng = Rng(0x7001_5EA7_C419);
    let mut servers = Vec::new();
    let mut left = count;
    'outer: for instance in INSTANCES {
        for &(domain, nouns) in DOMAINS {
            if left == 0 {
                break 'outer;
            }
            let mut pairs: Vec<(usize, &str)> = (0..VERBS.len())
                .flat_map(|v| nouns.iter().map(move |&n| (v, n)))
                .collect();
            rng.shuffle(&mut pairs);
            let take = left.min(per_server).min(pairs.len());
            let tools = pairs[..take]
                .iter()
                .map(|&(v, n)| filler_tool(&mut rng, domain, v, n))
                .collect();
            servers.push((format!("{domain}{instance}"), tools));
            left -= take;
        }
    }
    assert_eq!(left, 0, "not enough filler servers for {count} tools");
    servers
}

/// The reference servers, then fillers up to `total` tools (no fillers when `total` is at or
/// under the reference tools' count).
fn catalog(total: usize) -> anyhow::Result<Vec<(String, Vec<Tool>)>> {
    let mut servers = reference_servers()?;
    let reference: usize = servers.iter().map(|(_, t)| t.len()).sum();
    servers.extend(fillers(total.saturating_sub(reference), 100));
    Ok(servers)
}

fn registry(servers: &[(String, Vec<Tool>)], search: bool) -> ToolRegistry {
    let mut registry = ToolRegistry::new(
        servers.iter().map(|(s, _)| s.clone()).collect(),
        NamingConfig::default(),
    );
    registry.set_search(search);
    for (server, tools) in servers {
        registry.reconcile(server, tools.clone());
    }
    registry
}

// ---- recall ----

#[derive(Debug, Default)]
struct Recall {
    tools: usize,
    hits: usize,
    queries: usize,
    misses: Vec<(String, Vec<String>, Vec<String>)>,
}

impl Recall {
    fn value(&self) -> f64 {
        self.hits as f64 / self.queries.max(1) as f64
    }
}

fn recall(queries: &[Query], tools: usize, mut top5: impl FnMut(&str) -> Vec<String>) -> Recall {
    let mut r = Recall {
        tools,
        queries: queries.len(),
        ..Recall::default()
    };
    for q in queries {
        let top = top5(&q.query);
        if top.iter().any(|name| q.relevant.contains(name)) {
            r.hits += 1;
        } else {
            r.misses.push((q.query.clone(), q.relevant.clone(), top));
        }
    }
    r
}

fn registry_top5(registry: &ToolRegistry, query: &str) -> Vec<String> {
    registry
        .search(query, 5, |_| true)
        .into_iter()
        .map(|(t, _)| t.exposed_name.to_owned())
        .collect()
}

/// roster-core's `ToolIndex` on its own, with related words on or off, keyed as the registry
/// keys (server index, slot), so ties break alike.
struct Ablation {
    index: roster_core::ToolIndex,
    names: std::collections::HashMap<u64, String>,
}

impl Ablation {
    fn new(servers: &[(String, Vec<Tool>)], related: bool) -> Self {
        let mut index = roster_core::ToolIndex::new();
        index.set_related_words(related);
        let mut names = std::collections::HashMap::new();
        for (s, (server, tools)) in servers.iter().enumerate() {
            for (slot, tool) in tools.iter().enumerate() {
                let key = (s as u64) << 32 | slot as u64;
                index.upsert(key, server, tool);
                names.insert(key, format!("{server}__{}", tool.name));
            }
        }
        Self { index, names }
    }

    fn top5(&self, query: &str) -> Vec<String> {
        self.index
            .search(query, 5, |_| true)
            .into_iter()
            .filter_map(|hit| self.names.get(&hit.key).cloned())
            .collect()
    }
}

fn print_recall(label: &str, r: &Recall) {
    println!(
        "| {label} | {} | {}/{} | {:.3} |",
        r.tools,
        r.hits,
        r.queries,
        r.value()
    );
}

fn print_misses(label: &str, r: &Recall) {
    if r.misses.is_empty() {
        return;
    }
    println!("\nMisses, {label}:\n");
    for (query, relevant, top) in &r.misses {
        println!(
            "- \"{query}\" wants {}; top 5: {}",
            relevant.join(" or "),
            if top.is_empty() {
                "(nothing)".to_owned()
            } else {
                top.join(", ")
            }
        );
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn fmt_us(p: &Option<Percentiles>) -> String {
    match p {
        Some(p) => format!("{:.1} | {:.1} | {:.1} | {}", p.p50, p.p90, p.p99, p.n),
        None => "— | — | — | 0".to_owned(),
    }
}

/// The in-process figures, printed as Markdown and returned as JSON.
fn in_process(args: &Args) -> anyhow::Result<Value> {
    let queries = queries()?;
    let reference: usize = reference_servers()?.iter().map(|(_, t)| t.len()).sum();
    let sizes: Vec<usize> = if args.quick {
        vec![0, 300]
    } else {
        vec![0, 5_000, 10_000]
    };
    let largest = *sizes.last().unwrap_or(&0);
    println!("## In process (roster-core `ToolRegistry`, search on)\n");
    println!(
        "{} labelled queries; {reference} reference tools (fs, memory, everything, time, git, fetch), then synthetic fillers.\n",
        queries.len()
    );
    println!("### recall@5\n");
    println!("| set | tools | hits | recall@5 |\n| --- | ---: | ---: | ---: |");
    let mut results = Vec::new();
    let mut all_misses = Vec::new();
    for &size in &sizes {
        let servers = catalog(size)?;
        let tools: usize = servers.iter().map(|(_, t)| t.len()).sum();
        let reg = registry(&servers, true);
        let with = recall(&queries, tools, |q| registry_top5(&reg, q));
        // The index on its own, checked against the registry with related words on (same
        // keys: it must rank alike), then without related words.
        let copy = Ablation::new(&servers, true);
        let mut same = true;
        for q in &queries {
            if copy.top5(&q.query) != registry_top5(&reg, &q.query) {
                same = false;
                eprintln!(
                    "tool-search: the index alone ranks {:?} unlike the registry",
                    q.query
                );
            }
        }
        let off = Ablation::new(&servers, false);
        let without = recall(&queries, tools, |q| off.top5(q));
        let label = if size == 0 {
            "reference only".to_owned()
        } else {
            format!("reference + fillers to {size}")
        };
        print_recall(&label, &with);
        print_recall(
            &format!(
                "{label}, related words off{}",
                if same {
                    ""
                } else {
                    " (the index alone ranks unlike the registry!)"
                }
            ),
            &without,
        );
        all_misses.push((label.clone(), with));
        all_misses.push((format!("{label}, related words off"), without));
        results.push(json!({
            "tools": tools,
            "recall_at_5": all_misses[all_misses.len() - 2].1.value(),
            "recall_at_5_without_related_words": all_misses[all_misses.len() - 1].1.value(),
            "index_alone_ranks_like_registry": same,
        }));
    }
    for (label, r) in &all_misses {
        print_misses(label, r);
    }

    // Latency: every query, warm, over the largest catalog.
    let servers = catalog(largest)?;
    let tools: usize = servers.iter().map(|(_, t)| t.len()).sum();
    let reg = registry(&servers, true);
    let rounds = if args.quick { 2 } else { args.rounds };
    for q in &queries {
        std::hint::black_box(reg.search(&q.query, args.limit, |_| true));
    }
    let mut samples = Vec::with_capacity(rounds * queries.len());
    for _ in 0..rounds {
        for q in &queries {
            let t = Instant::now();
            let hits = reg.search(&q.query, args.limit, |_| true);
            samples.push(nanos(t.elapsed()));
            std::hint::black_box(hits);
        }
    }
    let search = Percentiles::from_nanos(samples);
    println!(
        "\n### `search` latency, {tools} tools, limit {}, {} queries × {rounds} rounds (warm)\n",
        args.limit,
        queries.len()
    );
    println!("| p50 µs | p90 µs | p99 µs | n |\n| ---: | ---: | ---: | ---: |");
    println!("| {} |", fmt_us(&search));

    // The index's upkeep: one reconcile of a 100-tool server into the largest catalog.
    let churn_a: Vec<Tool> = fillers(100, 100).into_iter().flat_map(|(_, t)| t).collect();
    let churn_b: Vec<Tool> = churn_a
        .iter()
        .map(|t| {
            let mut t = t.clone();
            t.description = t.description.map(|d| format!("{d} Version two."));
            t
        })
        .collect();
    let reconcile_rounds = if args.quick { 4 } else { 200 };
    let mut upkeep = Vec::new();
    println!(
        "\n### One reconcile of a 100-tool server into {tools} tools ({reconcile_rounds} each, warm)\n"
    );
    println!(
        "| search | listing | p50 µs | p90 µs | p99 µs | n |\n| --- | --- | ---: | ---: | ---: | ---: |"
    );
    for search in [false, true] {
        let mut reg = registry(&servers, search);
        for changed in [true, false] {
            let mut samples = Vec::with_capacity(reconcile_rounds);
            reg.reconcile("churn", churn_a.clone());
            for round in 0..reconcile_rounds {
                let listing = if changed && round % 2 == 0 {
                    churn_b.clone()
                } else {
                    churn_a.clone()
                };
                let t = Instant::now();
                let delta = reg.reconcile("churn", listing);
                samples.push(nanos(t.elapsed()));
                std::hint::black_box(delta);
            }
            let p = Percentiles::from_nanos(samples);
            println!(
                "| {} | {} | {} |",
                if search { "on" } else { "off" },
                if changed {
                    "every description changed"
                } else {
                    "unchanged"
                },
                fmt_us(&p)
            );
            upkeep.push(json!({"search": search, "changed": changed, "us": p}));
        }
    }
    Ok(json!({
        "queries": queries.len(),
        "recall": results,
        "search_us": search,
        "search_tools": tools,
        "reconcile_us": upkeep,
    }))
}

// ---- end to end ----

fn bpe() -> anyhow::Result<&'static tiktoken_rs::CoreBPE> {
    static BPE: std::sync::OnceLock<tiktoken_rs::CoreBPE> = std::sync::OnceLock::new();
    if let Some(bpe) = BPE.get() {
        return Ok(bpe);
    }
    let made = tiktoken_rs::o200k_base()?;
    Ok(BPE.get_or_init(|| made))
}

fn tokens(text: &str) -> anyhow::Result<usize> {
    Ok(bpe()?.encode_ordinary(text).len())
}

/// The gateway's config: 50 echo servers × `tools` fillers, in `mode`.
fn write_config(dir: &Path, echo: &Path, servers: usize, tools: usize, mode: &str) -> PathBuf {
    let mut cfg = format!(
        "[gateway]\nstate_dir = {:?}\ntools_mode = {mode:?}\n\n",
        dir.join(format!("state-{mode}")).display().to_string()
    );
    for i in 1..=servers {
        cfg.push_str(&format!(
            "[servers.s{i:02}]\ncommand = {:?}\nargs = [\"--name\", \"s{i:02}\", \"--tools\", \"{tools}\", \"--ttl-ms\", \"3600000\"]\n\n",
            echo.display().to_string()
        ));
    }
    let path = dir.join(format!("roster-{mode}.toml"));
    // The directory is this run's own; a failed write shows as roster failing to start.
    let _ = std::fs::write(&path, cfg);
    path
}

/// The text a model reads of a result: its text blocks, joined.
fn result_text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One `tools/call` and what it costs in tokens: the request's params and the result's text.
async fn call(
    session: &Session,
    name: &str,
    arguments: Value,
) -> anyhow::Result<(rmcp::model::CallToolResult, usize, usize)> {
    let params = json!({"name": name, "arguments": arguments});
    let map = match arguments {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let result = session
        .peer()
        .call_tool(rmcp::model::CallToolRequestParams::new(name.to_owned()).with_arguments(map))
        .await
        .with_context(|| format!("tools/call {name}"))?;
    if result.is_error == Some(true) {
        anyhow::bail!("{name} failed: {}", result_text(&result));
    }
    let sent = tokens(&params.to_string())?;
    let read = tokens(&result_text(&result))?;
    Ok((result, sent, read))
}

async fn start(roster: &Path, config: &Path) -> anyhow::Result<Session> {
    let target = Target::Stdio(vec![
        roster.display().to_string(),
        "serve".to_owned(),
        "--config".to_owned(),
        config.display().to_string(),
    ]);
    Ok(connect(&target, Watcher::default()).await?)
}

async fn wait_until<T>(
    what: &str,
    limit: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> anyhow::Result<T> {
    let give_up = Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return Ok(v);
        }
        if Instant::now() >= give_up {
            anyhow::bail!("{what} within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The tools of a `search_tools` / `describe_tools` result.
fn result_tools(result: &rmcp::model::CallToolResult) -> Vec<Value> {
    let from_text = || {
        serde_json::from_str::<Value>(&result_text(result))
            .ok()
            .map(|v| v["tools"].clone())
    };
    match result
        .structured_content
        .as_ref()
        .map(|v| v["tools"].clone())
        .or_else(from_text)
    {
        Some(Value::Array(tools)) => tools,
        _ => Vec::new(),
    }
}

const AGENT_QUERY: &str = "repeat the given text back";
const AGENT_TEXT: &str = "hello from the agent";

async fn end_to_end(args: &Args, dir: &Path) -> anyhow::Result<Value> {
    let roster = args
        .roster
        .clone()
        .unwrap_or_else(|| sibling("roster").unwrap_or_else(|| PathBuf::from("roster")));
    let echo = args
        .echo_server
        .clone()
        .unwrap_or_else(|| sibling("echo-server").unwrap_or_else(|| PathBuf::from("echo-server")));
    let (servers, per) = (args.servers, args.tools_per_server);
    let expect = servers * (per + 5);
    println!(
        "\n## End to end: `roster serve` over stdio, {servers} echo servers × {per} filler tools ({expect} tools)\n"
    );
    println!("roster: `{}`\n", roster.display());

    // all mode: the whole listing, then one call of the tool.
    let cfg_all = write_config(dir, &echo, servers, per, "all");
    let session = start(&roster, &cfg_all).await?;
    let listed = wait_until(
        &format!("roster (all) did not list {expect} tools"),
        Duration::from_secs(60),
        async || {
            let tools = session.peer().list_all_tools().await.ok()?;
            (tools.len() >= expect).then_some(tools)
        },
    )
    .await?;
    let all_json = serde_json::to_string(&listed)?;
    let all_tokens = tokens(&all_json)?;
    let target = "s01__echo";
    let (_, all_sent, all_read) = call(&session, target, json!({"text": AGENT_TEXT})).await?;
    let _ = session.cancel().await;
    let all_bill = all_tokens + all_sent + all_read;

    // search mode: the small listing, search_tools, describe_tools of the top hit, call_tool.
    let cfg_search = write_config(dir, &echo, servers, per, "search");
    let session = start(&roster, &cfg_search).await?;
    let last: Vec<String> = (1..=servers)
        .map(|i| format!("s{i:02}__tool_{:04}", per.saturating_sub(1)))
        .collect();
    wait_until(
        "roster (search) did not describe every server's last tool",
        Duration::from_secs(60),
        async || {
            let r = session
                .peer()
                .call_tool(
                    rmcp::model::CallToolRequestParams::new("describe_tools").with_arguments(
                        json!({"names": last})
                            .as_object()
                            .cloned()
                            .unwrap_or_default(),
                    ),
                )
                .await
                .ok()?;
            (r.is_error != Some(true) && result_tools(&r).len() == last.len()).then_some(())
        },
    )
    .await?;
    let small = session.peer().list_all_tools().await?;
    let small_names: Vec<String> = small.iter().map(|t| t.name.to_string()).collect();
    let search_tokens = tokens(&serde_json::to_string(&small)?)?;
    let (found, s_sent, s_read) = call(
        &session,
        "search_tools",
        json!({"query": AGENT_QUERY, "limit": 5}),
    )
    .await?;
    let hits = result_tools(&found);
    let top = hits
        .first()
        .and_then(|t| t["name"].as_str())
        .context("search_tools found nothing")?
        .to_owned();
    let (_, d_sent, d_read) = call(&session, "describe_tools", json!({"names": [top]})).await?;
    let (_, c_sent, c_read) = call(
        &session,
        "call_tool",
        json!({"name": top, "arguments": {"text": AGENT_TEXT}}),
    )
    .await?;
    let search_bill = search_tokens + s_sent + s_read + d_sent + d_read + c_sent + c_read;

    println!(
        "### Tokens (o200k_base, compact JSON of the `tools` array; calls: params + result text)\n"
    );
    println!("| | all | search | all ÷ search |\n| --- | ---: | ---: | ---: |");
    println!(
        "| tools in `tools/list` | {} | {} | |",
        listed.len(),
        small.len()
    );
    println!(
        "| `tools/list` tokens | {all_tokens} | {search_tokens} | {:.0} |",
        all_tokens as f64 / search_tokens.max(1) as f64
    );
    println!(
        "| finding and calling one tool | {all_bill} | {search_bill} | {:.0} |",
        all_bill as f64 / search_bill.max(1) as f64
    );
    println!(
        "\nsearch mode lists: {}.\n\nThe agent's bill in search mode: `tools/list` {search_tokens} + `search_tools` {s_sent} + {s_read} (query {AGENT_QUERY:?}, top hit `{top}`) + `describe_tools` {d_sent} + {d_read} + `call_tool` {c_sent} + {c_read}. In all mode: `tools/list` {all_tokens} + `tools/call {target}` {all_sent} + {all_read}.",
        small_names.join(", ")
    );

    // Round trips, this client: search_tools against tools/list (search mode) and call_tool.
    let n = args.calls;
    let timed =
        async |name: &str, arguments: Option<Value>| -> anyhow::Result<Option<Percentiles>> {
            let mut samples = Vec::with_capacity(n);
            for i in 0..n + n / 10 {
                let t = Instant::now();
                match &arguments {
                    None => {
                        session.peer().list_tools(None).await?;
                    }
                    Some(a) => {
                        let r = session
                            .peer()
                            .call_tool(
                                rmcp::model::CallToolRequestParams::new(name.to_owned())
                                    .with_arguments(a.as_object().cloned().unwrap_or_default()),
                            )
                            .await?;
                        anyhow::ensure!(r.is_error != Some(true), "{name}: {}", result_text(&r));
                    }
                }
                if i >= n / 10 {
                    samples.push(nanos(t.elapsed()));
                }
            }
            Ok(Percentiles::from_nanos(samples))
        };
    let rt_list = timed("tools/list", None).await?;
    let rt_search = timed(
        "search_tools",
        Some(json!({"query": AGENT_QUERY, "limit": args.limit})),
    )
    .await?;
    let rt_call = timed(
        "call_tool",
        Some(json!({"name": top, "arguments": {"text": AGENT_TEXT}})),
    )
    .await?;
    let _ = session.cancel().await;

    let python = match &args.python {
        Some(p) => Some(p.clone()),
        None => {
            let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/.venv-mcp1/bin/python");
            venv.exists().then_some(venv)
        }
    };
    let sdk = match &python {
        None => Err(
            "no Python SDK venv (give --python, or make bench/clients/.venv-mcp1 as bench/run does)"
                .to_owned(),
        ),
        Some(python) => sdk_client(python, &roster, &cfg_search, &last, n, args.limit).await,
    };
    println!(
        "\n### Round trips through roster (search mode, {expect} tools behind it; {n} timed after {} warm-up)\n",
        n / 10
    );
    println!(
        "| client | request | p50 µs | p90 µs | p99 µs | n | p50 ÷ `tools/list` p50 |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |"
    );
    let ratio = |p: &Option<Percentiles>, base: &Option<Percentiles>| match (p, base) {
        (Some(p), Some(b)) if b.p50 > 0.0 => format!("{:.2}", p.p50 / b.p50),
        _ => "—".to_owned(),
    };
    let rows = |client: &str,
                list: &Option<Percentiles>,
                search: &Option<Percentiles>,
                call: &Option<Percentiles>| {
        println!(
            "| {client} | `tools/list` (baseline) | {} | 1.00 |",
            fmt_us(list)
        );
        println!(
            "| {client} | `search_tools` (limit {}) | {} | {} |",
            args.limit,
            fmt_us(search),
            ratio(search, list)
        );
        println!(
            "| {client} | `call_tool` → `{top}` | {} | {} |",
            fmt_us(call),
            ratio(call, list)
        );
    };
    rows("roster-bench (rmcp)", &rt_list, &rt_search, &rt_call);
    let sdk_json = match &sdk {
        Ok((client, list, search, call)) => {
            rows(client, list, search, call);
            json!({"client": client, "tools_list_us": list, "search_tools_us": search, "call_tool_us": call})
        }
        Err(reason) => {
            println!("\nPython SDK client not measured: {reason}");
            json!({"not_measured": reason})
        }
    };
    Ok(json!({
        "servers": servers,
        "tools_per_server": per,
        "tools_listed_all": listed.len(),
        "tools_listed_search": small.len(),
        "tokens_tools_list_all": all_tokens,
        "tokens_tools_list_search": search_tokens,
        "agent_tokens_all": all_bill,
        "agent_tokens_search": search_bill,
        "agent_parts_search": {"search_tools": [s_sent, s_read], "describe_tools": [d_sent, d_read], "call_tool": [c_sent, c_read]},
        "agent_parts_all": {"tools_call": [all_sent, all_read]},
        "rmcp": {"tools_list_us": rt_list, "search_tools_us": rt_search, "call_tool_us": rt_call},
        "python_sdk": sdk_json,
    }))
}

type SdkFigures = (
    String,
    Option<Percentiles>,
    Option<Percentiles>,
    Option<Percentiles>,
);

/// The official Python SDK client (bench/tool-search/sdk_search.py) through its own roster.
async fn sdk_client(
    python: &Path,
    roster: &Path,
    config: &Path,
    ready: &[String],
    calls: usize,
    limit: usize,
) -> Result<SdkFigures, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tool-search/sdk_search.py");
    let run = tokio::process::Command::new(python)
        .arg(&script)
        .args([
            "--calls",
            &calls.to_string(),
            "--warmup",
            &(calls / 10).to_string(),
        ])
        .args(["--query", AGENT_QUERY, "--limit", &limit.to_string()])
        .args(["--text", AGENT_TEXT, "--ready", &ready.join(",")])
        .arg("--stdio")
        .arg(roster)
        .args(["serve", "--config"])
        .arg(config)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .map_err(|_| "sdk_search.py took over 300 s".to_owned())?
        .map_err(|e| format!("could not run {}: {e}", python.display()))?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "sdk_search.py failed: {}",
            err.chars()
                .rev()
                .take(400)
                .collect::<String>()
                .chars()
                .rev()
                .collect::<String>()
        ));
    }
    let v: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("sdk_search.py printed no JSON: {e}"))?;
    let p = |key: &str| {
        let ns: Vec<u64> = v[key]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        Percentiles::from_nanos(ns)
    };
    Ok((
        v["client"].as_str().unwrap_or("python-sdk").to_owned(),
        p("tools_list_ns"),
        p("search_tools_ns"),
        p("call_tool_ns"),
    ))
}

/// A binary built beside this one (target/release/roster when this is target/release/…).
fn sibling(name: &str) -> Option<PathBuf> {
    let path = std::env::current_exe().ok()?.parent()?.join(name);
    path.exists().then_some(path)
}

// ---- main ----

#[derive(Debug, Parser)]
#[command(about = "Tool search: recall@5, search latency, tokens all vs search (issue 19)")]
struct Args {
    /// The roster binary (default: `roster` beside this binary).
    #[arg(long)]
    roster: Option<PathBuf>,
    /// The echo server binary (default: `echo-server` beside this binary).
    #[arg(long)]
    echo_server: Option<PathBuf>,
    /// Python of a venv with the official MCP Python SDK (default:
    /// bench/clients/.venv-mcp1/bin/python when it exists).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Tiny sizes, in process only: checks that this runs (the smoke test).
    #[arg(long)]
    quick: bool,
    /// In process only: no roster.
    #[arg(long)]
    in_process_only: bool,
    /// Rounds of the 58 queries timed in process.
    #[arg(long, default_value_t = 50)]
    rounds: usize,
    /// Results per search (the latency figures and `search_tools` round trips).
    #[arg(long, default_value_t = 10)]
    limit: usize,
    /// Echo servers behind roster end to end.
    #[arg(long, default_value_t = 50)]
    servers: usize,
    /// Filler tools per echo server end to end.
    #[arg(long, default_value_t = 100)]
    tools_per_server: usize,
    /// Timed round trips per request kind end to end, per client.
    #[arg(long, default_value_t = 500)]
    calls: usize,
    /// Also write the figures as JSON here.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut report = json!({"in_process": in_process(&args)?});
    if !(args.quick || args.in_process_only) {
        let dir = std::env::temp_dir().join(format!("roster-tool-search-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let e2e = runtime.block_on(end_to_end(&args, &dir));
        let _ = std::fs::remove_dir_all(&dir);
        match e2e {
            Ok(v) => report["end_to_end"] = v,
            Err(e) => {
                println!("\nEnd to end not measured: {e:#}");
                report["end_to_end"] = json!({"not_measured": format!("{e:#}")});
            }
        }
    }
    if let Some(out) = &args.out {
        std::fs::write(out, serde_json::to_string_pretty(&report)? + "\n")?;
    }
    Ok(())
}
