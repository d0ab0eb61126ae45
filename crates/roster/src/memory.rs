//! Giving freed heap back to the system. A listing is parsed, gated and reconciled through
//! large short-lived values (a 100-tool page is a tree of thousands of allocations); glibc's
//! allocator keeps the freed pages in its arenas, so a roster that just listed fifty servers
//! would hold several MiB it no longer uses. After listings, and at most every
//! [`TRIM_EVERY_MS`], the pages are returned (`malloc_trim`). So they are after client sessions
//! end: a thousand sessions that expire together free ~80 MiB across the worker threads'
//! arenas, which glibc would keep (and each burst would grow, ~60 MiB more over ten bursts).
//! Other allocators and platforms: a no-op.
//!
//! Between those trims, glibc's own would give back the top of the heap whenever more than
//! 128 KiB of it is free — after every message of that size: a 64 KiB tool result forwarded
//! both ways cost 66 page faults per call as the heap shrank and grew again. `roster serve`
//! keeps up to [`KEEP_FREED`] for reuse instead, and heap-allocates what is smaller than
//! [`HEAP_BELOW`] (glibc maps each larger block anew, with a fault per page).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The shortest time between two trims after listings.
const TRIM_EVERY_MS: u64 = 2_000;

/// Freed heap at its top kept for reuse (glibc gives back what is more).
const KEEP_FREED: i32 = 1 << 20;

/// Blocks smaller than this come from the heap (larger ones are mapped on their own).
const HEAP_BELOW: i32 = 1 << 20;

/// Sets the heap up for serving (see the module's words); called once, before the runtime
/// starts its threads.
#[allow(unsafe_code)]
pub fn tune_for_serving() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets glibc's allocator parameters, under its lock.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, KEEP_FREED);
        libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_BELOW);
    }
}

/// When the last trim was, in milliseconds since the Unix epoch.
struct LastTrim(AtomicU64);

impl LastTrim {
    /// Whether a trim is due at `now`; if so, `now` becomes the last trim.
    fn due(&self, now: u64) -> bool {
        let last = self.0.load(Ordering::Relaxed);
        now.saturating_sub(last) >= TRIM_EVERY_MS
            && self
                .0
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

static LAST_TRIM: LastTrim = LastTrim(AtomicU64::new(0));

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Returns freed heap to the system, unless that was done in the last two seconds.
pub(crate) fn release_freed_soon() {
    if LAST_TRIM.due(now_ms()) {
        trim();
    }
}

/// Whether a trim of [`release_freed_later`] is waiting to run.
static TRIM_PENDING: AtomicBool = AtomicBool::new(false);

/// Returns freed heap to the system [`TRIM_EVERY_MS`] from now, once for all the calls made until
/// then: for what is freed in a burst (sessions ending together), whose end a trim right away
/// would miss. Outside a tokio runtime, now.
pub(crate) fn release_freed_later() {
    if TRIM_PENDING.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        TRIM_PENDING.store(false, Ordering::Release);
        release_freed();
        return;
    };
    runtime.spawn(async {
        tokio::time::sleep(Duration::from_millis(TRIM_EVERY_MS)).await;
        TRIM_PENDING.store(false, Ordering::Release);
        release_freed();
    });
}

/// Returns freed heap to the system now.
pub(crate) fn release_freed() {
    LAST_TRIM.0.store(now_ms(), Ordering::Relaxed);
    trim();
}

#[allow(unsafe_code)]
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas under their locks; any thread may call
    // it at any time, and 0 asks it to keep no padding.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_after_listings_are_at_most_one_per_interval() {
        let last = LastTrim(AtomicU64::new(0));
        assert!(last.due(10_000));
        assert!(
            !last.due(10_000 + TRIM_EVERY_MS - 1),
            "too soon after the last"
        );
        assert!(last.due(10_000 + TRIM_EVERY_MS), "due again");
        assert!(!last.due(10_000 + TRIM_EVERY_MS), "once");
    }
}
