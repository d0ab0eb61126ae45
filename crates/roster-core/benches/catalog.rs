//! Catalog benches over 100,000 generated skills: search latency, indexing time, memory per
//! skill. Run with `cargo bench -p roster-core --bench catalog`; figures go in `bench/skills.md`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use roster_core::catalog::{Catalog, Subscriptions};
use roster_core::skills::{SkillSource, load};

#[path = "support/corpus.rs"]
mod corpus;

const SKILLS: usize = 100_000;

/// Counts live heap bytes, for memory per skill.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

static SOURCES: LazyLock<Vec<SkillSource>> = LazyLock::new(|| corpus::skill_sources(SKILLS));
static CATALOG: LazyLock<Catalog> =
    LazyLock::new(|| Catalog::from_report(load(SOURCES.iter().cloned())));
static ZIPF_QUERIES: LazyLock<Vec<String>> = LazyLock::new(|| corpus::queries(1000));
static TOPICAL_QUERIES: LazyLock<Vec<String>> = LazyLock::new(|| corpus::topical_queries(1000));
static NAME_QUERIES: LazyLock<Vec<String>> = LazyLock::new(|| {
    (0..1000)
        .map(|i| {
            CATALOG
                .registry()
                .iter()
                .nth(i * 97)
                .map(|(s, _)| s.name.clone())
                .unwrap_or_default()
        })
        .collect()
});

fn main() {
    report_memory();
    report_index_time();
    LazyLock::force(&CATALOG);
    divan::main();
}

/// Live heap bytes per skill of the loaded skills, and of the catalog built over them.
fn report_memory() {
    let before = LIVE.load(Ordering::Relaxed);
    let sources = corpus::skill_sources(SKILLS);
    let source_bytes: usize = sources.iter().map(|s| s.text.len()).sum();
    let report = load(sources);
    let after_load = LIVE.load(Ordering::Relaxed);
    let catalog = Catalog::from_report(report);
    let after_catalog = LIVE.load(Ordering::Relaxed);
    // `load` consumed and freed `sources`, so the deltas from `before` count skills only.
    println!(
        "memory per skill: SKILL.md text {} B; parsed skills {} B; catalog (registry + search index) {} B, of which index {} B",
        source_bytes / SKILLS,
        (after_load - before) / SKILLS,
        (after_catalog - before) / SKILLS,
        (after_catalog - after_load) / SKILLS,
    );
    drop(catalog);
}

/// The time this thread has spent on a CPU, from Linux's schedstat; `None` elsewhere. The
/// machine the figures come from is shared, so wall time alone overstates the work.
fn thread_cpu_time() -> Option<std::time::Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(std::time::Duration::from_nanos(nanos))
}

/// One indexing run of 100,000 skills, wall time and on-CPU time.
fn report_index_time() {
    let sources = SOURCES.clone();
    let (wall, cpu) = (std::time::Instant::now(), thread_cpu_time());
    let report = load(sources);
    let (parse_wall, parse_cpu) = (wall.elapsed(), thread_cpu_time());
    let catalog = Catalog::from_report(report);
    let (total_wall, total_cpu) = (wall.elapsed(), thread_cpu_time());
    let on_cpu = |end: Option<std::time::Duration>| match (cpu, end) {
        (Some(start), Some(end)) => format!("{:.2?}", end - start),
        _ => "n/a".into(),
    };
    println!(
        "index {SKILLS} skills once: parse {parse_wall:.2?} wall / {} on CPU; parse + catalog {total_wall:.2?} wall / {} on CPU",
        on_cpu(parse_cpu),
        on_cpu(total_cpu),
    );
    drop(catalog);
}

fn search_each(
    bencher: divan::Bencher<'_, '_>,
    queries: &'static [String],
    subscriptions: Subscriptions,
) {
    let catalog = &*CATALOG;
    let mut at = 0;
    bencher.bench_local(|| {
        at = (at + 1) % queries.len();
        catalog.search(&subscriptions, &queries[at], 10)
    });
}

/// One query of 1–3 words drawn from the corpus's own Zipf distribution (common words
/// included), top 10, public skills only.
#[divan::bench(sample_count = 2000)]
fn search_zipf_query(bencher: divan::Bencher<'_, '_>) {
    search_each(bencher, &ZIPF_QUERIES, Subscriptions::none());
}

/// One query of 1–3 mid-frequency ("topical") words, top 10.
#[divan::bench(sample_count = 2000)]
fn search_topical_query(bencher: divan::Bencher<'_, '_>) {
    search_each(bencher, &TOPICAL_QUERIES, Subscriptions::none());
}

/// A query for a skill's exact name, top 10, holding `pro`.
#[divan::bench(sample_count = 2000)]
fn search_exact_name(bencher: divan::Bencher<'_, '_>) {
    search_each(bencher, &NAME_QUERIES, ["pro"].into_iter().collect());
}

/// Parsing 100,000 SKILL.md texts and building the catalog and its search index.
#[divan::bench(sample_count = 3)]
fn index_100k(bencher: divan::Bencher<'_, '_>) {
    bencher
        .with_inputs(|| SOURCES.clone())
        .bench_local_values(|sources| Catalog::from_report(load(sources)));
}

/// Building the catalog (registry + search index) from 100,000 already parsed skills.
#[divan::bench(sample_count = 3)]
fn build_catalog_100k(bencher: divan::Bencher<'_, '_>) {
    bencher
        .with_inputs(|| load(SOURCES.iter().cloned()))
        .bench_local_values(Catalog::from_report);
}
