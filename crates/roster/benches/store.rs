//! Store benches over 100,000 generated skills: indexing into SQLite, loading the catalog back,
//! and FTS5's bm25 ranking measured against the in-memory index (speed and whether an exact
//! name query ranks its skill first). Run with `cargo bench -p roster --bench store`.

use std::sync::{LazyLock, Mutex};

use roster::core::catalog::{Catalog, Subscriptions};
use roster::core::skills::{Skill, SkillSource, load};
use roster::store::{CatalogStore, SqliteStore, load_catalog};
use rusqlite::Connection;

#[path = "../../roster-core/benches/support/corpus.rs"]
mod corpus;

const SKILLS: usize = 100_000;

static SOURCES: LazyLock<Vec<SkillSource>> = LazyLock::new(|| corpus::skill_sources(SKILLS));
static SKILL_LIST: LazyLock<Vec<Skill>> = LazyLock::new(|| load(SOURCES.iter().cloned()).skills);
// A connection is not Sync; the benches run on one thread, the Mutex only satisfies `static`.
static FTS: LazyLock<Mutex<Connection>> = LazyLock::new(|| Mutex::new(fts_index(&SKILL_LIST)));
static CATALOG: LazyLock<Catalog> =
    LazyLock::new(|| Catalog::from_report(load(SOURCES.iter().cloned())));
static ZIPF_QUERIES: LazyLock<Vec<String>> = LazyLock::new(|| corpus::queries(1000));
static TOPICAL_QUERIES: LazyLock<Vec<String>> = LazyLock::new(|| corpus::topical_queries(1000));

/// The same fields and boosts as the in-memory index (name 4, tags 3, description 2,
/// content 1), Porter stemming.
fn fts_index(skills: &[Skill]) -> Connection {
    let conn = Connection::open_in_memory().expect("sqlite");
    conn.execute_batch(
        "CREATE VIRTUAL TABLE skill_fts USING fts5(id UNINDEXED, name, tags, description, content, tokenize = 'porter unicode61');",
    )
    .expect("fts5 is compiled into bundled sqlite");
    let tx = conn.unchecked_transaction().expect("tx");
    {
        let mut insert = tx
            .prepare("INSERT INTO skill_fts (id, name, tags, description, content) VALUES (?1, ?2, ?3, ?4, ?5)")
            .expect("prepare");
        for skill in skills {
            insert
                .execute((
                    &skill.id,
                    skill.name.replace('-', " "),
                    skill.tags.join(" "),
                    &skill.description,
                    &skill.content,
                ))
                .expect("insert");
        }
    }
    tx.commit().expect("commit");
    conn
}

/// FTS5 query syntax would read `-` and other punctuation as operators; quote each word.
fn fts_query(query: &str) -> String {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}

fn fts_search(conn: &Connection, query: &str, limit: usize) -> Vec<String> {
    let mut select = conn
        .prepare_cached(
            "SELECT id FROM skill_fts WHERE skill_fts MATCH ?1 ORDER BY bm25(skill_fts, 0.0, 4.0, 3.0, 2.0, 1.0) LIMIT ?2",
        )
        .expect("prepare");
    select
        .query_map((fts_query(query), limit as i64), |row| row.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

fn main() {
    compare_ranking();
    divan::main();
}

/// How often a query for a skill's exact name puts that skill first, in each engine.
fn compare_ranking() {
    let sample: Vec<&Skill> = SKILL_LIST.iter().step_by(SKILLS / 1000).collect();
    let everyone: Subscriptions = ["pro"].into_iter().collect();
    let fts_conn = FTS.lock().expect("fts lock");
    let (mut fts_first, mut memory_first, mut fts_top10) = (0, 0, 0);
    for skill in &sample {
        let fts = fts_search(&fts_conn, &skill.name, 10);
        fts_first += usize::from(fts.first() == Some(&skill.id));
        fts_top10 += usize::from(fts.contains(&skill.id));
        let memory = CATALOG.search(&everyone, &skill.name, 10);
        memory_first += usize::from(memory.first().map(|h| &h.entry.id) == Some(&skill.id));
    }
    println!(
        "exact-name query ranks the skill first: in-memory {memory_first}/{n}, FTS5 {fts_first}/{n} (FTS5 top 10: {fts_top10}/{n})",
        n = sample.len()
    );
    // Do both engines agree on the top hit of ordinary queries?
    let agree = TOPICAL_QUERIES
        .iter()
        .take(200)
        .filter(|q| {
            let fts = fts_search(&fts_conn, q, 1);
            let memory = CATALOG.search(&everyone, q, 1);
            fts.first() == memory.first().map(|h| &h.entry.id)
        })
        .count();
    println!("topical queries with the same top hit in both engines: {agree}/200");
}

fn fts_each(bencher: divan::Bencher<'_, '_>, queries: &'static [String]) {
    let conn = FTS.lock().expect("fts lock");
    let mut at = 0;
    bencher.bench_local(|| {
        at = (at + 1) % queries.len();
        fts_search(&conn, &queries[at], 10)
    });
}

/// FTS5 bm25, Zipf-distributed 1–3 word queries, top 10 (compare `search_zipf_query`).
#[divan::bench(sample_count = 300)]
fn fts5_zipf_query(bencher: divan::Bencher<'_, '_>) {
    fts_each(bencher, &ZIPF_QUERIES);
}

/// FTS5 bm25, topical 1–3 word queries, top 10 (compare `search_topical_query`).
#[divan::bench(sample_count = 300)]
fn fts5_topical_query(bencher: divan::Bencher<'_, '_>) {
    fts_each(bencher, &TOPICAL_QUERIES);
}

/// Writing 100,000 skill sources into an empty SQLite store (one transaction).
#[divan::bench(sample_count = 3)]
fn sqlite_index_100k(bencher: divan::Bencher<'_, '_>) {
    bencher
        .with_inputs(|| SqliteStore::open_in_memory().expect("sqlite"))
        .bench_local_values(|mut store| store.replace_all(&SOURCES).expect("index"));
}

/// Re-indexing 100,000 unchanged sources (hash comparison only).
#[divan::bench(sample_count = 3)]
fn sqlite_reindex_unchanged_100k(bencher: divan::Bencher<'_, '_>) {
    bencher
        .with_inputs(|| {
            let mut store = SqliteStore::open_in_memory().expect("sqlite");
            store.replace_all(&SOURCES).expect("index");
            store
        })
        .bench_local_values(|mut store| store.replace_all(&SOURCES).expect("re-index"));
}

/// Loading the catalog of 100,000 skills from SQLite: read, parse, build the search index.
#[divan::bench(sample_count = 3)]
fn sqlite_load_catalog_100k(bencher: divan::Bencher<'_, '_>) {
    let mut store = SqliteStore::open_in_memory().expect("sqlite");
    store.replace_all(&SOURCES).expect("index");
    bencher.bench_local(|| load_catalog(&store).expect("load"));
}

/// Building the FTS5 index over 100,000 parsed skills.
#[divan::bench(sample_count = 3)]
fn fts5_index_100k(bencher: divan::Bencher<'_, '_>) {
    bencher.bench_local(|| fts_index(&SKILL_LIST));
}
