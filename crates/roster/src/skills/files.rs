//! The catalog's files as clients read them (SEP-2640): skill entries and `skill://`
//! resources filtered by visibility, a synced skill's directories from its manifest, and its
//! files read at its server, checked, and kept; the skill file size limit over both.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rmcp::handler::server::skill_catalog::SkillCatalog as SkillFiles;
use rmcp::model::{ReadResourceResult, Resource, SKILL_MD, Skill as SkillFile};
use roster_core::catalog::Subscriptions;

use super::Skills;
use super::compose::SyncedServed;
use crate::servers::SyncedSkill;
use crate::servers::skills::skill_md_text;
use crate::sync::read;

/// Files of synced skills read at their servers, by the URI roster serves them at; bounded
/// by [`FileCache::BUDGET`] bytes (full: nothing more is kept, reads go to the server).
#[derive(Default)]
pub(super) struct FileCache {
    files: HashMap<String, (String, ReadResourceResult)>,
    bytes: usize,
}

impl FileCache {
    const BUDGET: usize = 16 << 20;

    pub(super) fn get(&self, uri: &str) -> Option<ReadResourceResult> {
        self.files.get(uri).map(|(_, read)| read.clone())
    }

    pub(super) fn put(&mut self, server: &str, uri: &str, read: &ReadResourceResult, size: usize) {
        if self.bytes + size <= Self::BUDGET {
            self.bytes += size;
            self.files
                .insert(uri.to_owned(), (server.to_owned(), read.clone()));
        }
    }

    /// Forgets one server's files (its skills changed).
    pub(super) fn forget(&mut self, server: &str) {
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

impl Skills {
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
