//! The skill catalog as the gateway serves it: native tools (through [`Catalog`], visibility
//! checked at every call) and the MCP skills extension (SEP-2640: `skills/list`, `skills/get`,
//! `skill://` resources), filtered by the same visibility.
//!
//! The catalog is made (`compose`) of the local skills (the `[skills] paths`, followed on
//! disk) and the skills of the servers roster fronts (synced, see [`crate::servers::skills`]):
//! a server's skill is `SERVER/PATH`, its includes and tool names mapped to what roster serves,
//! its `SKILL.md` read at the server only when asked for and checked against the server's
//! entry first.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rmcp::handler::server::skill_catalog::SkillCatalog as SkillFiles;
use rmcp::model::{ReadResourceResult, Resource, SKILL_MD, Skill as SkillFile};
use roster_core::SkillSource;
use roster_core::catalog::{Catalog, Subscriptions};
use roster_core::skills::SkillRefreshResult;
use roster_core::skills::{load, load_adjusted};

use crate::Roster;
use crate::servers::SyncedSkill;
use crate::servers::skills::skill_md_text;
use crate::store::scan_skills_dir;
use crate::sync::{read, write};

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

/// Files of synced skills read at their servers, by the URI roster serves them at; bounded
/// by [`FileCache::BUDGET`] bytes (full: nothing more is kept, reads go to the server).
#[derive(Default)]
struct FileCache {
    files: HashMap<String, (String, ReadResourceResult)>,
    bytes: usize,
}

impl FileCache {
    const BUDGET: usize = 16 << 20;

    fn get(&self, uri: &str) -> Option<ReadResourceResult> {
        self.files.get(uri).map(|(_, read)| read.clone())
    }

    fn put(&mut self, server: &str, uri: &str, read: &ReadResourceResult, size: usize) {
        if self.bytes + size <= Self::BUDGET {
            self.bytes += size;
            self.files
                .insert(uri.to_owned(), (server.to_owned(), read.clone()));
        }
    }

    /// Forgets one server's files (its skills changed).
    fn forget(&mut self, server: &str) {
        self.files.retain(|_, (s, _)| s != server);
        self.bytes = self
            .files
            .values()
            .map(|(_, read)| read_size(read) as usize)
            .sum();
    }
}

/// How many bytes a read's contents carry.
pub(crate) fn read_size(read: &ReadResourceResult) -> u64 {
    use rmcp::model::ResourceContents;
    read.contents
        .iter()
        .map(|c| match c {
            ResourceContents::TextResourceContents { text, .. } => text.len() as u64,
            // base64: four characters carry three bytes.
            ResourceContents::BlobResourceContents { blob, .. } => blob.len() as u64 / 4 * 3,
            _ => 0,
        })
        .sum()
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

/// One root as served: its sources (each skill directory's `SKILL.md`) and its files.
#[derive(Clone)]
struct Served {
    sources: Vec<SkillSource>,
    files: Option<Arc<SkillFiles>>,
}

/// What one read of the roots made.
struct Read {
    served: Vec<Served>,
    problems: Vec<String>,
}

/// Reads every root; a skill that is unreadable or invalid now but was served before (in
/// `before`) keeps its last good version, and so do its root's files.
fn read_roots(roots: &[PathBuf], max_file_size: u64, before: Option<&[Served]>) -> Read {
    let mut problems = Vec::new();
    let mut served = Vec::new();
    for (i, root) in roots.iter().enumerate() {
        let old = before.and_then(|b| b.get(i));
        let old_source = |dir: &str| {
            old.and_then(|o| o.sources.iter().find(|s| s.dir == dir))
                .cloned()
        };
        let mut sources = Vec::new();
        let mut kept_old = false;
        match scan_skills_dir(root, max_file_size) {
            Ok(scan) => {
                for unreadable in &scan.unreadable {
                    let dir = unreadable
                        .path
                        .strip_prefix(root)
                        .ok()
                        .map(|p| {
                            p.to_string_lossy()
                                .trim_end_matches("SKILL.md")
                                .trim_end_matches('/')
                                .to_owned()
                        })
                        .unwrap_or_default();
                    match old_source(&dir) {
                        Some(good) => {
                            kept_old = true;
                            problems.push(format!(
                                "{unreadable}; the last good version is still served"
                            ));
                            sources.push(good);
                        }
                        None => problems.push(unreadable.to_string()),
                    }
                }
                // Each source on its own: a broken one is told apart from the others.
                let report = load(scan.sources.clone());
                for invalid in &report.invalid {
                    match old_source(&invalid.dir) {
                        Some(good) => {
                            kept_old = true;
                            problems.push(format!(
                                "{}/SKILL.md: {}; the last good version is still served",
                                invalid.dir, invalid.error
                            ));
                            sources.push(good);
                        }
                        None => {
                            problems.push(format!("{}/SKILL.md: {}", invalid.dir, invalid.error))
                        }
                    }
                }
                let broken: std::collections::HashSet<&str> =
                    report.invalid.iter().map(|i| i.dir.as_str()).collect();
                sources.extend(
                    scan.sources
                        .into_iter()
                        .filter(|s| !broken.contains(s.dir.as_str())),
                );
                sources.sort_by(|a, b| a.dir.cmp(&b.dir));
            }
            Err(e) => {
                // A root that cannot be read now keeps what it served.
                problems.push(e.to_string());
                if let Some(old) = old {
                    served.push(old.clone());
                    continue;
                }
            }
        }
        let files = match (kept_old, old) {
            (true, Some(old)) => old.files.clone(),
            _ => match SkillFiles::from_dir(root) {
                Ok(files) => Some(Arc::new(files)),
                Err(e) => {
                    problems.push(format!("{}: {e}", root.display()));
                    old.and_then(|o| o.files.clone())
                }
            },
        };
        served.push(Served { sources, files });
    }
    Read { served, problems }
}

/// One synced skill as served: the server it comes from, and what that server gave.
#[derive(Debug, Clone)]
pub(crate) struct SyncedServed {
    pub(crate) server: String,
    pub(crate) skill: SyncedSkill,
}

/// What the catalog is made of besides the local roots: each server's skills, in config
/// order, and how a server's own tool names read in roster (`None`: as written).
#[derive(Default)]
struct Synced {
    by_server: BTreeMap<String, Vec<SyncedSkill>>,
    order: Vec<String>,
}

/// The catalog of the local skills and the synced ones, with the synced ones by id.
struct Composed {
    catalog: Catalog,
    synced: BTreeMap<String, SyncedServed>,
    problems: Vec<(String, String)>,
    /// Each server's tool names its skills use, with the names roster served for them.
    names: Names,
}

/// Where a problem is told (the inbox).
type Tell = Arc<dyn Fn(&str) + Send + Sync>;

/// The name roster serves a server's tool under, by the server and the tool's own name.
type ExposedName<'a> = dyn Fn(&str, &str) -> String + 'a;

/// Per server, the tool names its skills use (its own names) and what they were mapped to.
type Names = BTreeMap<String, BTreeMap<String, String>>;

/// Makes the catalog: the local skills keep their ids; a server's skill is `SERVER/PATH`, or
/// `SERVER/SERVER/PATH` when a skill before it (local first, then servers in config order)
/// holds that id. A synced skill's includes name its server's other skills, its tool
/// references its server's tools by their own names (`exposed(server, name)` gives the name
/// roster serves), and it is seen by whom its entry or the server's config says when its
/// `SKILL.md` says nothing.
fn compose(served: &[Served], synced: &Synced, exposed: Option<&ExposedName<'_>>) -> Composed {
    let mut sources: Vec<SkillSource> = served
        .iter()
        .flat_map(|s| s.sources.iter().cloned())
        .collect();
    let mut taken: HashSet<String> = sources.iter().map(|s| s.dir.clone()).collect();
    let mut by_id: BTreeMap<String, SyncedServed> = BTreeMap::new();
    // Per server: its path → the id roster serves it under.
    let mut ids: HashMap<&str, HashMap<&str, String>> = HashMap::new();
    let mut problems = Vec::new();
    let mut names = Names::new();
    let servers = synced
        .order
        .iter()
        .filter_map(|server| Some((server, synced.by_server.get(server)?)));
    for (server, skills) in servers {
        for skill in skills {
            let id = [
                format!("{server}/{}", skill.path),
                format!("{server}/{server}/{}", skill.path),
            ]
            .into_iter()
            .find(|id| !taken.contains(id));
            let Some(id) = id else {
                problems.push((
                    server.clone(),
                    format!(
                        "skill {} of server `{server}` is left out: its ids are taken",
                        skill.path
                    ),
                ));
                continue;
            };
            if id != format!("{server}/{}", skill.path) {
                tracing::warn!(
                    %server,
                    skill = %skill.path,
                    "a skill before it holds {server}/{}; served as {id}",
                    skill.path
                );
            }
            taken.insert(id.clone());
            ids.entry(server.as_str())
                .or_default()
                .insert(skill.path.as_str(), id.clone());
            sources.push(SkillSource::new(id.clone(), skill.text.clone()));
            by_id.insert(
                id,
                SyncedServed {
                    server: server.clone(),
                    skill: skill.clone(),
                },
            );
        }
    }
    let report = load_adjusted(sources, |skill| {
        let Some(origin) = by_id.get(&skill.id) else {
            return;
        };
        let server = origin.server.as_str();
        if skill.visibility.is_empty() {
            skill.visibility = origin.skill.visibility.clone();
        }
        let own = ids.get(server);
        for include in &mut skill.includes {
            if let Some(id) = own.and_then(|own| own.get(include.as_str())) {
                *include = id.clone();
            }
        }
        if let Some(exposed) = exposed {
            let used = names.entry(server.to_owned()).or_default();
            let tools = skill.tools.iter_mut();
            for tool in tools.chain(skill.steps.iter_mut().map(|step| &mut step.tool)) {
                let mapped = exposed(server, tool);
                used.insert(std::mem::replace(tool, mapped.clone()), mapped);
            }
        }
    });
    for invalid in &report.invalid {
        if let Some(origin) = by_id.remove(&invalid.dir) {
            let text = format!(
                "skill {} of server `{}` is left out: {}",
                origin.skill.path, origin.server, invalid.error
            );
            problems.push((origin.server, text));
        }
    }
    Composed {
        catalog: Catalog::from_report(report),
        synced: by_id,
        problems,
        names,
    }
}

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

    /// The skill id a `skill://<id>/...` URI belongs to, if `subscriptions` may see it.
    fn visible_id_of(&self, uri: &str, subscriptions: &Subscriptions) -> bool {
        let Some(path) = uri.strip_prefix("skill://") else {
            return false;
        };
        let catalog = self.read();
        // The longest visible skill id that prefixes the path owns the file.
        let mut id = path;
        loop {
            if catalog.get(subscriptions, id).is_ok() {
                return true;
            }
            match id.rfind('/') {
                Some(at) => id = &id[..at],
                None => return false,
            }
        }
    }

    /// SEP-2640 skill entries the caller may see: the local skills', then the synced ones'
    /// (their URIs and manifests under `skill://ID/`).
    pub(crate) fn skill_files(&self, subscriptions: &Subscriptions) -> Vec<SkillFile> {
        let mut entries: Vec<SkillFile> = self
            .files()
            .iter()
            .flat_map(|f| f.skills())
            .filter(|s| self.visible_id_of(&s.uri, subscriptions))
            .collect();
        entries.extend(self.map_visible_synced(subscriptions, synced_entry));
        entries
    }

    /// The `skill://` resources the caller may see (each skill's `SKILL.md`).
    pub(crate) fn resources(&self, subscriptions: &Subscriptions) -> Vec<Resource> {
        let mut resources: Vec<Resource> = self
            .files()
            .iter()
            .flat_map(|f| f.resources())
            .filter(|r| self.visible_id_of(&r.uri, subscriptions))
            .collect();
        resources.extend(self.map_visible_synced(subscriptions, |id, served, skill| {
            let resource = Resource::new(format!("skill://{id}/{SKILL_MD}"), &skill.name)
                .with_description(&skill.description)
                .with_mime_type("text/markdown");
            match served.skill.skill_md_size() {
                Some(size) => resource.with_size(size),
                None => resource,
            }
        }));
        resources
    }

    /// `f` of each synced skill the caller may see: its id, origin, and the skill as the
    /// catalog holds it (nothing is copied to ask).
    fn map_visible_synced<T>(
        &self,
        subscriptions: &Subscriptions,
        f: impl Fn(&str, &SyncedServed, &roster_core::Skill) -> T,
    ) -> Vec<T> {
        let synced = read(&self.synced_ids).clone();
        let catalog = self.read();
        synced
            .iter()
            .filter_map(|(id, served)| {
                let skill = catalog.get(subscriptions, id).ok()?.skill;
                Some(f(id, served, skill))
            })
            .collect()
    }

    /// The synced skill a `skill://` URI is in, if the caller may see it: its id, origin and
    /// the path of the file under its directory.
    fn synced_of(
        &self,
        uri: &str,
        subscriptions: &Subscriptions,
    ) -> Option<(String, SyncedServed, String)> {
        let path = uri.strip_prefix("skill://")?;
        let synced = read(&self.synced_ids).clone();
        let mut id = path;
        while let Some(at) = id.rfind('/') {
            id = &id[..at];
            if let Some(served) = synced.get(id) {
                self.read().get(subscriptions, id).ok()?;
                let file = path[id.len() + 1..].to_owned();
                return Some((id.to_owned(), served.clone(), file));
            }
        }
        None
    }

    /// `resources/directory/read` of a directory of a synced skill the caller may see (its
    /// root `skill://ID`, or a directory inside): the files and directories right in it, from
    /// the server's manifest (or the resources it listed). `None`: not such a directory.
    pub(crate) fn synced_directory(
        &self,
        uri: &str,
        subscriptions: &Subscriptions,
    ) -> Option<Vec<Resource>> {
        use rmcp::model::{DIRECTORY_MIME_TYPE, SkillResources};
        let path = uri.strip_prefix("skill://")?.trim_end_matches('/');
        let synced = read(&self.synced_ids).clone();
        let (id, served) = synced.iter().find(|(id, _)| {
            path == id.as_str()
                || path
                    .strip_prefix(id.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        })?;
        self.read().get(subscriptions, id).ok()?;
        let inside = path[id.len()..].trim_start_matches('/');
        let skill = &served.skill;
        let size_of = |file: &str| match &skill.entry.resources {
            SkillResources::Files(files) => files
                .iter()
                .find(|f| f.uri == format!("{}{file}", skill.dir_uri()))
                .map(|f| f.size),
            _ => None,
        };
        let mut children: BTreeMap<String, Resource> = BTreeMap::new();
        let all = std::iter::once(SKILL_MD).chain(skill.files.iter().map(String::as_str));
        for file in all {
            let rest = if inside.is_empty() {
                file
            } else {
                match file.strip_prefix(inside).and_then(|r| r.strip_prefix('/')) {
                    Some(rest) => rest,
                    None => continue,
                }
            };
            let here = if inside.is_empty() {
                format!("skill://{id}")
            } else {
                format!("skill://{id}/{inside}")
            };
            let child = match rest.split_once('/') {
                Some((dir, _)) => {
                    Resource::new(format!("{here}/{dir}"), dir).with_mime_type(DIRECTORY_MIME_TYPE)
                }
                None => {
                    let mut resource = Resource::new(format!("{here}/{rest}"), rest);
                    if rest.ends_with(".md") {
                        resource = resource.with_mime_type("text/markdown");
                    }
                    match size_of(file) {
                        Some(size) => resource.with_size(size),
                        None => resource,
                    }
                }
            };
            children.entry(child.uri.clone()).or_insert(child);
        }
        (!children.is_empty()).then(|| children.into_values().collect())
    }

    /// The `skill://` URIs of the files a synced skill's manifest lists besides `SKILL.md`.
    pub fn synced_files(&self, id: &str) -> Vec<String> {
        read(&self.synced_ids)
            .get(id)
            .map(|served| {
                served
                    .skill
                    .files
                    .iter()
                    .map(|file| format!("skill://{id}/{file}"))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The SEP-2640 entry of a synced skill at `uri` (its `SKILL.md`), for `skills/get`.
    pub(crate) fn synced_skill(
        &self,
        uri: &str,
        subscriptions: &Subscriptions,
    ) -> Option<SkillFile> {
        let (id, served, file) = self.synced_of(uri, subscriptions)?;
        if file != SKILL_MD {
            return None;
        }
        let skill = self.read().get(subscriptions, &id).ok()?.skill.clone();
        Some(synced_entry(&id, &served, &skill))
    }

    /// Loads a synced skill the caller may see, if it is not yet: its `SKILL.md` is read at
    /// its server and checked against the server's entry (size, digest, front matter); from
    /// then on the catalog serves it whole (its body for `get_skill`, searches). `Err` says why
    /// the skill cannot be loaded: content that does not check out is not used. Local skills,
    /// and skills the caller may not see, are left as they are.
    pub(crate) async fn load_synced(
        &self,
        id: &str,
        subscriptions: &Subscriptions,
    ) -> Result<(), String> {
        let Some(served) = read(&self.synced_ids).get(id).cloned() else {
            return Ok(());
        };
        if served.skill.loaded || self.read().get(subscriptions, id).is_err() {
            return Ok(());
        }
        let Some(roster) = crate::sync::lock(&self.roster).clone() else {
            return Ok(());
        };
        let uri = &served.skill.entry.uri;
        let checked = match roster.read_skill_file(&served.server, uri).await {
            Ok(answer) => skill_md_text(uri, &answer)
                .and_then(|text| served.skill.check(&text, true).map(|()| text)),
            Err(e) => Err(e.to_string()),
        };
        match checked {
            Ok(text) => {
                self.keep_loaded(&served.server, &served.skill, text);
                Ok(())
            }
            Err(why) => {
                let message = format!(
                    "skill {id} of server `{}` cannot be loaded: {why}",
                    served.server
                );
                tracing::warn!("{message}");
                if let Some(tell) = crate::sync::lock(&self.problem).clone() {
                    tell(&message);
                }
                Err(message)
            }
        }
    }

    /// Serves `text` as the checked `SKILL.md` of `skill` of `server` (while the server lists
    /// it as it does now).
    fn keep_loaded(&self, server: &str, skill: &SyncedSkill, text: String) {
        {
            let mut synced = crate::sync::lock(&self.synced);
            let held = synced
                .by_server
                .get_mut(server)
                .and_then(|skills| skills.iter_mut().find(|s| s.entry == skill.entry));
            match held {
                Some(held) => {
                    held.text = text;
                    held.loaded = true;
                }
                None => return,
            }
        }
        for (_, problem) in self.recompose().into_iter().filter(|(s, _)| s == server) {
            tracing::warn!("skill: {problem}");
        }
    }

    /// A file of a synced skill the caller may see, for `resources/read`: its `SKILL.md`
    /// (loaded first, see [`Skills::load_synced`]), a file read before and kept, or the file
    /// read at the server now — checked against the manifest's size and digest and `[skills]
    /// max_file_size`, then kept while the server's skills stay as they are. `None`: no such
    /// file (answered as an unknown URI); `Err`: why it is not served.
    pub(crate) async fn read_synced(
        &self,
        uri: &str,
        subscriptions: &Subscriptions,
    ) -> Option<Result<ReadResourceResult, String>> {
        use rmcp::model::{ResourceContents, SkillResources};
        let (id, served, file) = self.synced_of(uri, subscriptions)?;
        if file == SKILL_MD {
            if let Err(why) = self.load_synced(&id, subscriptions).await {
                return Some(Err(why));
            }
            let text = read(&self.synced_ids).get(&id)?.skill.text.clone();
            let text = ResourceContents::text(text, uri).with_mime_type("text/markdown");
            return Some(Ok(ReadResourceResult::new(vec![text])));
        }
        let skill = &served.skill;
        if skill.has_manifest() && !skill.files.contains(&file) {
            return None;
        }
        if let Some(kept) = crate::sync::lock(&self.file_cache).get(uri) {
            return Some(Ok(kept));
        }
        let roster = crate::sync::lock(&self.roster).clone()?;
        let at = format!("{}{file}", skill.dir_uri());
        let server = &served.server;
        let answer = match roster.read_skill_file(server, &at).await {
            Ok(answer) => answer,
            Err(e) => return Some(Err(e.to_string())),
        };
        let mut read: ReadResourceResult = match serde_json::from_value(answer) {
            Ok(read) => read,
            Err(e) => return Some(Err(format!("server `{server}` answered {at}: {e}"))),
        };
        for contents in &mut read.contents {
            match contents {
                ResourceContents::TextResourceContents { uri: u, .. }
                | ResourceContents::BlobResourceContents { uri: u, .. } => *u = uri.to_owned(),
                _ => {}
            }
        }
        let size = read_size(&read);
        if !self.within_limit_of(uri, size) {
            return None;
        }
        if let SkillResources::Files(files) = &skill.entry.resources
            && let Some(entry) = files.iter().find(|f| f.uri == at)
        {
            let bytes = match read.contents.as_slice() {
                [ResourceContents::TextResourceContents { text, .. }] => text.as_bytes().to_vec(),
                [ResourceContents::BlobResourceContents { blob, .. }] => {
                    use base64::Engine as _;
                    base64::engine::general_purpose::STANDARD
                        .decode(blob)
                        .unwrap_or_default()
                }
                _ => Vec::new(),
            };
            if let Err(e) = entry.verify(&bytes) {
                let message = format!("server `{server}` answered {e}; not served");
                tracing::warn!("skill: {message}");
                return Some(Err(message));
            }
            crate::sync::lock(&self.file_cache).put(server, uri, &read, size as usize);
        }
        Some(Ok(read))
    }

    /// The catalogs of files, for reads; `None` when the caller may not see `uri` (answered
    /// exactly as an unknown URI).
    pub(crate) fn files_for(
        &self,
        uri: &str,
        subscriptions: &Subscriptions,
    ) -> Option<Arc<Vec<Arc<SkillFiles>>>> {
        (self.visible_id_of(uri, subscriptions) && self.within_limit(uri)).then(|| self.files())
    }

    /// The files served now.
    fn files(&self) -> Arc<Vec<Arc<SkillFiles>>> {
        read(&self.files).clone()
    }

    /// Whether the file at `uri` (if it is one) is within the skill file size limit; one that
    /// is not is answered like an unknown URI, and logged with the limit.
    fn within_limit(&self, uri: &str) -> bool {
        let Some(read) = self.files().iter().find_map(|f| f.read_resource(uri)) else {
            return true;
        };
        self.within_limit_of(uri, read_size(&read))
    }

    /// Whether a skill file of `bytes` bytes is within the limit; one that is not is logged.
    fn within_limit_of(&self, uri: &str, bytes: u64) -> bool {
        if bytes > self.max_file_size {
            tracing::warn!(
                "skill file {uri} is {bytes} bytes, larger than the skill file size limit of {} \
                 bytes ([skills] max_file_size); not served",
                self.max_file_size
            );
            return false;
        }
        true
    }

    /// Whether any skill file is served (the extension is declared only then).
    pub(crate) fn serves_files(&self) -> bool {
        self.files().iter().any(|f| !f.skills().is_empty()) || !read(&self.synced_ids).is_empty()
    }
}

/// The name roster serves `server`'s tool `name` under: its exposed name when it is listed, the
/// name as it is when roster serves a tool by that name, else the name it would be exposed
/// under.
fn exposed_name(registry: &roster_core::ToolRegistry, server: &str, name: &str) -> String {
    if let Some(exposed) = registry.exposed_name(server, name) {
        exposed.to_owned()
    } else if registry.route(name).is_some() {
        name.to_owned()
    } else {
        registry.first_candidate(server, name)
    }
}

/// A synced skill's SEP-2640 entry as roster serves it: at `skill://ID/SKILL.md`, its
/// manifest's files under `skill://ID/`, its front matter as the server gave it with the
/// name and description its `SKILL.md` has.
fn synced_entry(id: &str, served: &SyncedServed, skill: &roster_core::Skill) -> SkillFile {
    use rmcp::model::{SkillFrontmatter, SkillResource, SkillResources};
    let dir = served.skill.dir_uri().to_owned();
    let ours = |uri: &str| {
        format!(
            "skill://{id}/{}",
            uri.strip_prefix(dir.as_str()).unwrap_or(SKILL_MD)
        )
    };
    let resources = match &served.skill.entry.resources {
        SkillResources::Files(files) => SkillResources::Files(
            files
                .iter()
                .map(|f| SkillResource::new(ours(&f.uri), &f.digest, f.size))
                .collect(),
        ),
        _ => SkillResources::Dynamic,
    };
    let mut frontmatter = SkillFrontmatter::new(&skill.name, &skill.description);
    frontmatter.extra = served.skill.entry.frontmatter.extra.clone();
    // Who may see it is roster's business, not the client's.
    frontmatter.extra.remove("visibility");
    SkillFile::new(format!("skill://{id}/{SKILL_MD}"), frontmatter, resources)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(path: &std::path::Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn synced(path: &str, text: &str, visibility: &[&str]) -> SyncedSkill {
        use rmcp::model::{SkillFrontmatter, SkillResources};
        let name = path.rsplit('/').next().unwrap_or(path);
        SyncedSkill {
            path: path.to_owned(),
            entry: SkillFile::new(
                format!("skill://{path}/SKILL.md"),
                SkillFrontmatter::new(name, "d"),
                SkillResources::Dynamic,
            ),
            files: Vec::new(),
            text: text.to_owned(),
            loaded: true,
            visibility: visibility.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    #[test]
    fn synced_skills_are_namespaced_a_clash_is_prefixed_again_and_names_are_mapped() {
        let dir = tempfile::tempdir().expect("temp dir");
        write(
            &dir.path().join("docs/pdf/forms/SKILL.md"),
            "---\nname: forms\ndescription: Local.\n---\nbody\n",
        );
        let (local, problems) = Skills::load(&[dir.path().to_owned()], 1 << 20);
        assert!(problems.is_empty(), "{problems:?}");
        let served = crate::sync::lock(&local.served).clone();
        let mut from_servers = Synced {
            order: vec!["docs".to_owned()],
            ..Synced::default()
        };
        from_servers.by_server.insert(
            "docs".to_owned(),
            vec![
                synced_skill_with_includes(),
                synced(
                    "pdf/forms",
                    "---\nname: forms\ndescription: Synced.\n---\nb\n",
                    &[],
                ),
                synced(
                    "pro/only",
                    "---\nname: only\ndescription: P.\nvisibility: [pro]\n---\nb\n",
                    &["team"],
                ),
                synced(
                    "team/only",
                    "---\nname: only\ndescription: T.\n---\nb\n",
                    &["team"],
                ),
                synced("broken", "no front matter", &[]),
            ],
        );
        let exposed = |server: &str, name: &str| format!("{server}__{name}");
        let composed = compose(&served, &from_servers, Some(&exposed));
        let everyone = Subscriptions::default();
        let catalog = &composed.catalog;
        let description = |subs: &Subscriptions, id: &str| {
            catalog
                .get(subs, id)
                .map(|d| d.skill.description.clone())
                .ok()
        };
        assert_eq!(
            description(&everyone, "docs/pdf/forms").as_deref(),
            Some("Local.")
        );
        assert_eq!(
            description(&everyone, "docs/docs/pdf/forms").as_deref(),
            Some("Synced.")
        );
        // Its own visibility wins; without one, the server's.
        let team: Subscriptions = ["team".to_owned()].into_iter().collect();
        let pro: Subscriptions = ["pro".to_owned()].into_iter().collect();
        assert!(description(&team, "docs/pro/only").is_none());
        assert!(description(&pro, "docs/pro/only").is_some());
        assert!(description(&everyone, "docs/team/only").is_none());
        assert!(description(&team, "docs/team/only").is_some());
        // Includes name the server's skills; tools its tools.
        let flow = catalog.get(&everyone, "docs/ops/shout").expect("the flow");
        assert_eq!(flow.skill.includes, vec!["docs/docs/pdf/forms"]);
        assert_eq!(flow.skill.steps[0].tool, "docs__echo");
        assert_eq!(flow.skill.tools, vec!["docs__add"]);
        assert!(
            composed
                .problems
                .iter()
                .any(|(s, p)| s == "docs" && p.contains("broken") && p.contains("`docs`")),
            "{:?}",
            composed.problems
        );
        assert!(!composed.synced.contains_key("docs/broken"));
        assert_eq!(
            composed.synced["docs/docs/pdf/forms"].skill.path,
            "pdf/forms"
        );
    }

    fn synced_skill_with_includes() -> SyncedSkill {
        synced(
            "ops/shout",
            "---\nname: shout\ndescription: S.\nkind: flow_template\nincludes: [pdf/forms]\n\
             tools: [add]\nparameters:\n  type: object\n  properties:\n    t: {type: string}\n\
             steps:\n  - tool: echo\n    arguments: {text: \"{t}\"}\n---\nb\n",
            &[],
        )
    }

    #[test]
    fn a_synced_skills_directories_come_from_its_manifest() {
        use rmcp::model::{DIRECTORY_MIME_TYPE, SkillFrontmatter, SkillResource, SkillResources};
        let text = "---\nname: forms\ndescription: d\nvisibility: [pro]\n---\nb\n";
        let dir = "skill://pdf/forms/";
        let manifest = vec![
            SkillResource::from_bytes(format!("{dir}SKILL.md"), text.as_bytes()),
            SkillResource::from_bytes(format!("{dir}a.txt"), b"aaa"),
            SkillResource::from_bytes(format!("{dir}references/guide.md"), b"guide"),
        ];
        let mut skill = SyncedSkill::from_entry(
            "pdf/forms".into(),
            SkillFile::new(
                format!("{dir}SKILL.md"),
                SkillFrontmatter::new("forms", "d").with_field("visibility", json!(["pro"])),
                SkillResources::Files(manifest),
            ),
            vec!["a.txt".into(), "references/guide.md".into()],
            vec!["pro".into()],
        );
        skill.text = text.to_owned();
        skill.loaded = true;
        let (skills, _) = Skills::load(&[], 1 << 20);
        skills.sync("docs", &[skill]);
        let pro: Subscriptions = ["pro".to_owned()].into_iter().collect();
        let listing = |uri: &str, subs: &Subscriptions| {
            skills.synced_directory(uri, subs).map(|children| {
                children
                    .into_iter()
                    .map(|r| (r.uri.clone(), r.mime_type.clone(), r.size))
                    .collect::<Vec<_>>()
            })
        };
        let dir_mime = Some(DIRECTORY_MIME_TYPE.to_owned());
        let markdown = Some("text/markdown".to_owned());
        assert_eq!(
            listing("skill://docs/pdf/forms", &pro),
            Some(vec![
                (
                    "skill://docs/pdf/forms/SKILL.md".into(),
                    markdown.clone(),
                    Some(text.len() as u64)
                ),
                ("skill://docs/pdf/forms/a.txt".into(), None, Some(3)),
                ("skill://docs/pdf/forms/references".into(), dir_mime, None),
            ])
        );
        assert_eq!(
            listing("skill://docs/pdf/forms/references/", &pro),
            Some(vec![(
                "skill://docs/pdf/forms/references/guide.md".into(),
                markdown,
                Some(5)
            )])
        );
        assert_eq!(listing("skill://docs/pdf/forms/nope", &pro), None);
        assert_eq!(
            listing("skill://docs/pdf/forms", &Subscriptions::default()),
            None
        );
        assert_eq!(listing("skill://docs/pdf", &pro), None);
    }

    #[test]
    fn no_skill_file_beyond_the_limit_is_served() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        write(
            &root.join("docs/guide/SKILL.md"),
            "---\nname: guide\ndescription: A guide.\n---\n\nSee reference.md.\n",
        );
        write(&root.join("docs/guide/reference.md"), &"r".repeat(4096));
        write(
            &root.join("docs/huge/SKILL.md"),
            &format!(
                "---\nname: huge\ndescription: Huge.\n---\n\n{}\n",
                "h".repeat(4096)
            ),
        );
        let (skills, problems) = Skills::load(&[root.to_owned()], 2048);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("docs/huge/SKILL.md") && p.contains("2048 bytes")),
            "{problems:?}"
        );
        let everyone = Subscriptions::default();
        let listed: Vec<String> = skills
            .skill_files(&everyone)
            .into_iter()
            .map(|s| s.uri)
            .collect();
        assert!(
            listed.iter().any(|u| u.contains("docs/guide")),
            "{listed:?}"
        );
        assert!(
            !listed.iter().any(|u| u.contains("docs/huge")),
            "{listed:?}"
        );
        assert!(skills.read().get(&everyone, "docs/huge").is_err());
        assert!(
            skills
                .files_for("skill://docs/guide/SKILL.md", &everyone)
                .is_some()
        );
        assert!(
            skills
                .files_for("skill://docs/guide/reference.md", &everyone)
                .is_none(),
            "a 4 KiB file is beyond a 2 KiB limit"
        );
        let (roomy, _) = Skills::load(&[root.to_owned()], 1 << 20);
        assert!(
            roomy
                .files_for("skill://docs/guide/reference.md", &everyone)
                .is_some()
        );
    }
}
