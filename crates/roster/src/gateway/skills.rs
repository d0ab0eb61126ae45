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

/// The skills of the configured `[skills] paths`.
pub struct Skills {
    catalog: RwLock<Catalog>,
    files: Vec<SkillFiles>,
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

impl Skills {
    /// Loads every skill under `roots`. Skills that cannot be read or parsed, or whose
    /// `SKILL.md` is larger than `max_file_size` bytes, are left out and reported (one line
    /// each), so one broken file does not take the catalog down.
    pub fn load(roots: &[PathBuf], max_file_size: u64) -> (Self, Vec<String>) {
        let mut problems = Vec::new();
        let mut sources: Vec<SkillSource> = Vec::new();
        let mut files = Vec::new();
        for root in roots {
            match scan_skills_dir(root, max_file_size) {
                Ok(scan) => {
                    problems.extend(scan.unreadable.iter().map(ToString::to_string));
                    sources.extend(scan.sources);
                }
                Err(e) => problems.push(e.to_string()),
            }
            match SkillFiles::from_dir(root) {
                Ok(catalog) => files.push(catalog),
                Err(e) => problems.push(format!("{}: {e}", root.display())),
            }
        }
        let report = load(sources);
        problems.extend(
            report
                .invalid
                .iter()
                .map(|invalid| format!("{}/SKILL.md: {}", invalid.dir, invalid.error)),
        );
        let skills = Self {
            catalog: RwLock::new(Catalog::from_report(report)),
            files,
            max_file_size,
            last_refresh: std::sync::Mutex::new(None),
        };
        (skills, problems)
    }

    /// Checks skills' tool references against `roster` from now on, and refreshes
    /// availability after every reconcile that changed something.
    pub fn follow(self: &Arc<Self>, roster: &Roster) {
        self.write()
            .registry_mut()
            .set_tool_lookup(roster.tool_lookup());
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
        self.files
            .iter()
            .flat_map(|f| f.skills())
            .filter(|s| self.visible_id_of(&s.uri, subscriptions))
            .collect()
    }

    /// The `skill://` resources the caller may see.
    pub(crate) fn resources(&self, subscriptions: &Subscriptions) -> Vec<Resource> {
        self.files
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
    ) -> Option<&[SkillFiles]> {
        (self.visible_id_of(uri, subscriptions) && self.within_limit(uri))
            .then_some(self.files.as_slice())
    }

    /// Whether the file at `uri` (if it is one) is within the skill file size limit; one that
    /// is not is answered like an unknown URI, and logged with the limit.
    fn within_limit(&self, uri: &str) -> bool {
        use rmcp::model::ResourceContents;
        let Some(read) = self.files.iter().find_map(|f| f.read_resource(uri)) else {
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
        self.files.iter().any(|f| !f.skills().is_empty())
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
