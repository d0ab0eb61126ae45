//! The skill catalog roster serves: native tools (through [`Catalog`], visibility checked at
//! every call) and the MCP skills extension (SEP-2640: `skills/list`, `skills/get`, `skill://`
//! resources), filtered by the same visibility.
//!
//! The catalog is made (`compose`) of the local skills (the `[skills] paths`, followed on
//! disk, `roots`) and the skills of the servers roster fronts (synced, see
//! [`crate::servers::skills`]): a server's skill is `SERVER/PATH`, its includes and tool names
//! mapped to what roster serves, its `SKILL.md` read at the server only when asked for and
//! checked against the server's entry first (`files`).
//!
//! This file holds [`Skills`] and what keeps it current: loading, reloading an edited root,
//! syncing a server's skills, following the live tools.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rmcp::handler::server::skill_catalog::SkillCatalog as SkillFiles;
use roster_core::catalog::Catalog;
use roster_core::skills::SkillRefreshResult;

use crate::Roster;
use crate::servers::SyncedSkill;
use crate::sync::{read, write};

mod compose;
mod files;
mod roots;

use compose::{Names, Synced, SyncedServed, compose, exposed_name};
use files::FileCache;
pub(crate) use files::read_size;
use roots::{Served, read_roots};

/// The skills of the configured `[skills] paths`, followed on disk ([`Skills::watch`]): an
/// added, changed or removed skill is served at the next request; a broken edit keeps the last
/// good version served and says why. With them, the skills of the servers ([`Skills::follow`]).
pub struct Skills {
    catalog: RwLock<Catalog>,
    /// Each root's files (SEP-2640), replaced whole when the root changes.
    files: RwLock<Arc<Vec<Arc<SkillFiles>>>>,
    /// The configured roots, in order.
    roots: Vec<PathBuf>,
    /// What is served now: each root's sources, and its files.
    served: std::sync::Mutex<Vec<Served>>,
    /// The tool lookup skills are checked against ([`Skills::follow`]); a reloaded catalog gets
    /// it too.
    lookup: std::sync::Mutex<Option<Arc<dyn roster_core::ToolLookup + Send + Sync>>>,
    /// The file watcher, kept for as long as the skills are.
    watcher: std::sync::Mutex<Option<notify::RecommendedWatcher>>,
    /// `[skills] max_file_size`: no skill file larger than this is served, whatever the SDK's
    /// catalog would hold.
    max_file_size: u64,
    /// The outcome of the last [`Skills::refresh`], and when (milliseconds since the epoch).
    last_refresh: std::sync::Mutex<Option<(u64, SkillRefreshResult)>>,
    /// Servers' skills ([`Skills::follow`]).
    synced: std::sync::Mutex<Synced>,
    /// The synced skills served now, by id.
    synced_ids: RwLock<Arc<BTreeMap<String, SyncedServed>>>,
    /// The tool names the synced skills use, as mapped when the catalog was made.
    names: std::sync::Mutex<Names>,
    /// The gateway the synced skills come from: their tools' names, their files.
    roster: std::sync::Mutex<Option<Roster>>,
    /// Synced skills' files read at their servers, kept until the server's skills change.
    file_cache: std::sync::Mutex<FileCache>,
    /// Where a skill left out is told (the inbox), besides the log ([`Skills::watch`]).
    problem: std::sync::Mutex<Option<Tell>>,
}

/// One skill as the people who run roster see it: every skill, whatever its visibility.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SkillOverview {
    /// The skill's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// `skill` or `flow`.
    pub kind: &'static str,
    /// The subscriptions that may see it (empty: everyone).
    pub visibility: Vec<String>,
    /// Whether every tool it references is live.
    pub available: bool,
    /// Why not, when it is not.
    pub reason: Option<String>,
}

impl std::fmt::Debug for Skills {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skills").finish_non_exhaustive()
    }
}

/// Where a problem is told (the inbox).
type Tell = Arc<dyn Fn(&str) + Send + Sync>;

impl Skills {
    /// Loads every skill under `roots`. Skills that cannot be read or parsed, or whose
    /// `SKILL.md` is larger than `max_file_size` bytes, are left out and reported (one line
    /// each), so one broken file does not take the catalog down.
    pub fn load(roots: &[PathBuf], max_file_size: u64) -> (Self, Vec<String>) {
        let read = read_roots(roots, max_file_size, None);
        let files: Vec<Arc<SkillFiles>> =
            read.served.iter().filter_map(|s| s.files.clone()).collect();
        let composed = compose(&read.served, &Synced::default(), None);
        let skills = Self {
            catalog: RwLock::new(composed.catalog),
            files: RwLock::new(Arc::new(files)),
            roots: roots.to_vec(),
            served: std::sync::Mutex::new(read.served),
            lookup: std::sync::Mutex::new(None),
            watcher: std::sync::Mutex::new(None),
            max_file_size,
            last_refresh: std::sync::Mutex::new(None),
            synced: std::sync::Mutex::new(Synced::default()),
            synced_ids: RwLock::new(Arc::default()),
            names: std::sync::Mutex::new(Names::new()),
            roster: std::sync::Mutex::new(None),
            file_cache: std::sync::Mutex::new(FileCache::default()),
            problem: std::sync::Mutex::new(None),
        };
        (skills, read.problems)
    }

    /// Reads the roots again and serves what changed; a skill whose edit is broken keeps its
    /// last good version. Returns whether anything served changed, and the problems (each
    /// broken or unreadable skill, with why).
    pub fn reload(&self) -> (bool, Vec<String>) {
        let before = crate::sync::lock(&self.served).clone();
        let read = read_roots(&self.roots, self.max_file_size, Some(&before));
        let same = before.len() == read.served.len()
            && before
                .iter()
                .zip(&read.served)
                .all(|(a, b)| a.sources == b.sources);
        if same {
            return (false, read.problems);
        }
        let files: Vec<Arc<SkillFiles>> =
            read.served.iter().filter_map(|s| s.files.clone()).collect();
        *write(&self.files) = Arc::new(files);
        *crate::sync::lock(&self.served) = read.served;
        // The servers' skills left out were told when they came.
        self.recompose();
        (true, read.problems)
    }

    /// Makes the catalog again from what is served now (local and synced), refreshes it, and
    /// returns the synced skills left out: each server, and why.
    fn recompose(&self) -> Vec<(String, String)> {
        let served = crate::sync::lock(&self.served).clone();
        let roster = crate::sync::lock(&self.roster).clone();
        let composed = {
            let synced = crate::sync::lock(&self.synced);
            match &roster {
                Some(roster) => roster.with_registry(|registry| {
                    compose(&served, &synced, Some(&|s, n| exposed_name(registry, s, n)))
                }),
                None => compose(&served, &synced, None),
            }
        };
        let mut catalog = composed.catalog;
        if let Some(lookup) = crate::sync::lock(&self.lookup).clone() {
            catalog.registry_mut().set_tool_lookup(lookup);
        }
        *self.write() = catalog;
        *write(&self.synced_ids) = Arc::new(composed.synced);
        *crate::sync::lock(&self.names) = composed.names;
        self.refresh();
        composed.problems
    }

    /// After `server`'s tools changed: the catalog is made again when a name its skills use
    /// now maps to another tool name, else only refreshed.
    fn reconciled(&self, server: &str) {
        let renamed = match crate::sync::lock(&self.roster).clone() {
            Some(roster) => {
                let names = crate::sync::lock(&self.names);
                names.get(server).is_some_and(|used| {
                    roster.with_registry(|registry| {
                        used.iter()
                            .any(|(own, mapped)| exposed_name(registry, server, own) != *mapped)
                    })
                })
            }
            None => false,
        };
        if renamed {
            self.recompose();
        } else {
            self.refresh();
        }
    }

    /// Serves `skills` as `server`'s skills from now on (an empty list: none).
    pub fn sync(&self, server: &str, skills: &[SyncedSkill]) {
        {
            let mut synced = crate::sync::lock(&self.synced);
            let mut skills = skills.to_vec();
            // A skill loaded before that the server lists as it did stays loaded.
            if let Some(before) = synced.by_server.get(server) {
                for skill in skills.iter_mut().filter(|s| !s.loaded) {
                    if let Some(held) = before.iter().find(|b| b.same_text_as(&skill.entry)) {
                        skill.text = held.text.clone();
                        skill.loaded = true;
                    }
                }
            }
            if skills.is_empty() {
                synced.by_server.remove(server);
            } else {
                synced.by_server.insert(server.to_owned(), skills);
            }
            if let Some(roster) = crate::sync::lock(&self.roster).as_ref() {
                synced.order = roster.server_order();
            }
            if !synced.order.iter().any(|s| s == server) {
                synced.order.push(server.to_owned());
            }
        }
        crate::sync::lock(&self.file_cache).forget(server);
        let told = crate::sync::lock(&self.problem).clone();
        // This server's skills left out (another's were told when they came).
        let problems = self.recompose().into_iter().filter(|(s, _)| s == server);
        for (_, problem) in problems {
            tracing::warn!("skill: {problem}");
            if let Some(tell) = &told {
                tell(&problem);
            }
        }
        tracing::info!(%server, skills = skills.len(), "server skills synced");
    }

    /// Follows the roots on disk: an added, changed or removed skill (or file beside it) is
    /// read again, debounced (`DEBOUNCE` after the last change), and served; then `changed`
    /// is called (the gateway tells clients `resources/list_changed`) and each problem goes
    /// to `problem` (the inbox). Needs a tokio runtime; without one, or when the roots cannot
    /// be watched, it logs why and the catalog stays as loaded.
    pub fn watch(
        self: &Arc<Self>,
        changed: impl Fn() + Send + Sync + 'static,
        problem: impl Fn(&str) + Send + Sync + 'static,
    ) {
        use notify::Watcher as _;
        const DEBOUNCE: std::time::Duration = std::time::Duration::from_millis(200);
        let problem: Tell = Arc::new(problem);
        *crate::sync::lock(&self.problem) = Some(problem.clone());
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if event.is_ok_and(|e| !e.kind.is_access()) {
                // Full: a read is due anyway.
                let _ = tx.try_send(());
            }
        });
        let mut watcher = match watcher {
            Ok(watcher) => watcher,
            Err(error) => {
                tracing::warn!(%error, "skill directories are not followed: edits need a restart");
                return;
            }
        };
        for root in &self.roots {
            if let Err(error) = watcher.watch(root, notify::RecursiveMode::Recursive) {
                tracing::warn!(root = %root.display(), %error, "this skill directory is not followed");
            }
        }
        *crate::sync::lock(&self.watcher) = Some(watcher);
        let skills = Arc::downgrade(self);
        runtime.spawn(async move {
            while rx.recv().await.is_some() {
                // Quiet for DEBOUNCE: an editor's several writes make one read.
                while tokio::time::timeout(DEBOUNCE, rx.recv())
                    .await
                    .is_ok_and(|e| e.is_some())
                {}
                let Some(skills) = skills.upgrade() else {
                    return;
                };
                let (was_changed, problems) =
                    match tokio::task::spawn_blocking(move || skills.reload()).await {
                        Ok(outcome) => outcome,
                        Err(_) => continue,
                    };
                for text in &problems {
                    tracing::warn!("skill: {text}");
                    problem(text);
                }
                if was_changed {
                    changed();
                }
            }
        });
    }

    /// Checks skills' tool references against `roster` from now on, and refreshes
    /// availability after every reconcile that changed something.
    pub fn follow(self: &Arc<Self>, roster: &Roster) {
        let lookup = roster.tool_lookup();
        *crate::sync::lock(&self.lookup) = Some(lookup.clone());
        *crate::sync::lock(&self.roster) = Some(roster.clone());
        self.write().registry_mut().set_tool_lookup(lookup);
        self.refresh();
        let skills = Arc::downgrade(self);
        roster.set_reconcile_hook(Some(Arc::new(move |server, _delta| {
            if let Some(skills) = skills.upgrade() {
                skills.reconciled(server);
            }
        })));
        let skills = Arc::downgrade(self);
        roster.set_skills_hook(Arc::new(move |server, synced| {
            if let Some(skills) = skills.upgrade() {
                skills.sync(server, synced);
            }
        }));
    }

    /// Recomputes every skill's availability.
    pub fn refresh(&self) {
        let result = self.write().registry_mut().refresh_all();
        tracing::debug!("skill refresh: {result:?}");
        *crate::sync::lock(&self.last_refresh) = Some((crate::store::now_ms(), result));
    }

    /// The last refresh's outcome and when it ran (milliseconds since the epoch).
    pub fn last_refresh(&self) -> Option<(u64, SkillRefreshResult)> {
        crate::sync::lock(&self.last_refresh).clone()
    }

    /// Every skill with its kind, visibility and availability, in id order.
    pub fn overview(&self) -> Vec<SkillOverview> {
        let catalog = self.read();
        let mut rows: Vec<SkillOverview> = catalog
            .registry()
            .iter()
            .map(|(skill, availability)| SkillOverview {
                id: skill.id.clone(),
                name: skill.name.clone(),
                kind: skill.kind.as_str(),
                visibility: skill.visibility.clone(),
                available: availability.is_available(),
                reason: availability.reason().map(str::to_owned),
            })
            .collect();
        rows.sort_by(|a, b| a.id.cmp(&b.id));
        rows
    }

    /// Reads the catalog.
    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        read(&self.catalog)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Catalog> {
        write(&self.catalog)
    }
}
