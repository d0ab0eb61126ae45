//! The skill catalog as the gateway serves it: native tools (through [`Catalog`], visibility
//! checked at every call) and the MCP skills extension (SEP-2640: `skills/list`, `skills/get`,
//! `skill://` resources), filtered by the same visibility.

use crate::sync::{read, write};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rmcp::handler::server::skill_catalog::SkillCatalog as SkillFiles;
use rmcp::model::{Resource, Skill as SkillFile};
use roster_core::SkillSource;
use roster_core::catalog::{Catalog, Subscriptions};
use roster_core::skills::SkillRefreshResult;
use roster_core::skills::load;

use crate::Roster;
use crate::store::scan_skills_dir;

/// The skills of the configured `[skills] paths`, followed on disk ([`Skills::watch`]): an
/// added, changed or removed skill is served at the next request; a broken edit keeps the last
/// good version served and says why.
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
    catalog: Catalog,
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
    let report = load(served.iter().flat_map(|s| s.sources.iter().cloned()));
    Read {
        served,
        catalog: Catalog::from_report(report),
        problems,
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
        let skills = Self {
            catalog: RwLock::new(read.catalog),
            files: RwLock::new(Arc::new(files)),
            roots: roots.to_vec(),
            served: std::sync::Mutex::new(read.served),
            lookup: std::sync::Mutex::new(None),
            watcher: std::sync::Mutex::new(None),
            max_file_size,
            last_refresh: std::sync::Mutex::new(None),
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
        let mut catalog = read.catalog;
        if let Some(lookup) = crate::sync::lock(&self.lookup).clone() {
            catalog.registry_mut().set_tool_lookup(lookup);
        }
        let files: Vec<Arc<SkillFiles>> =
            read.served.iter().filter_map(|s| s.files.clone()).collect();
        *self.write() = catalog;
        *write(&self.files) = Arc::new(files);
        *crate::sync::lock(&self.served) = read.served;
        self.refresh();
        (true, read.problems)
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
        self.write().registry_mut().set_tool_lookup(lookup);
        self.refresh();
        let skills = Arc::downgrade(self);
        roster.set_reconcile_hook(Some(Arc::new(move |_server, _delta| {
            if let Some(skills) = skills.upgrade() {
                skills.refresh();
            }
        })));
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

    /// SEP-2640 skill entries the caller may see.
    pub(crate) fn skill_files(&self, subscriptions: &Subscriptions) -> Vec<SkillFile> {
        self.files()
            .iter()
            .flat_map(|f| f.skills())
            .filter(|s| self.visible_id_of(&s.uri, subscriptions))
            .collect()
    }

    /// The `skill://` resources the caller may see.
    pub(crate) fn resources(&self, subscriptions: &Subscriptions) -> Vec<Resource> {
        self.files()
            .iter()
            .flat_map(|f| f.resources())
            .filter(|r| self.visible_id_of(&r.uri, subscriptions))
            .collect()
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
        use rmcp::model::ResourceContents;
        let Some(read) = self.files().iter().find_map(|f| f.read_resource(uri)) else {
            return true;
        };
        let bytes: u64 = read
            .contents
            .iter()
            .map(|c| match c {
                ResourceContents::TextResourceContents { text, .. } => text.len() as u64,
                // base64: four characters carry three bytes.
                ResourceContents::BlobResourceContents { blob, .. } => blob.len() as u64 / 4 * 3,
                _ => 0,
            })
            .sum();
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
        self.files().iter().any(|f| !f.skills().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &std::path::Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
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
