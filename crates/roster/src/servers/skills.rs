//! A server's skills (SEP-2640), as roster takes them into its catalog, listed with the
//! server's resources. A server that declares the skills extension is listed by `skills/list`
//! and nothing more: no file is read ahead of need, the catalog holds each skill as its entry's
//! front matter says, and its `SKILL.md` is read when a client asks for it (`get_skill`, a
//! `resources/read`), checked against the entry (size, digest, front matter field by field)
//! and kept while the entry stays the same and gives it a digest. A server that only lists `skill://.../SKILL.md`
//! resources has no entries: each `SKILL.md` is read with the listing.
//!
//! What a server may cost is bounded: at most [`MAX_SKILLS`] skills of fewer than
//! `SKILL_FILE_LIMIT` (512) files each, each `SKILL.md` (and an entry's front matter) at most
//! [`crate::store::DEFAULT_MAX_SKILL_FILE_SIZE`] bytes (the catalog applies `[skills]
//! max_file_size` on top).

use std::collections::HashMap;

use futures::StreamExt as _;
use rmcp::handler::server::skill_catalog::SKILL_FILE_LIMIT;
use rmcp::model::{SKILL_MD, Skill, SkillResources};
use serde_json::{Value, json};

use super::Connection;
use crate::config::SkillSync;

/// The most skills one server contributes; the rest are left out, and said so in the log.
pub const MAX_SKILLS: usize = 1000;

/// How many `SKILL.md` reads one listing has in flight at once.
const READS_IN_FLIGHT: usize = 8;

/// One skill a server serves, as its last listing gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncedSkill {
    /// Its path at the server (`pdf/forms`): the skill's id there. roster serves it as
    /// `SERVER/pdf/forms`.
    pub path: String,
    /// The server's entry (`skills/list`), or one made from its resources.
    pub entry: Skill,
    /// The files beside `SKILL.md` the server listed, as paths under the skill's directory;
    /// empty when its manifest is `"dynamic"` (any path is asked for at the server).
    pub files: Vec<String>,
    /// What the catalog reads: its `SKILL.md` once read ([`SyncedSkill::loaded`]), else its
    /// entry's front matter as a `SKILL.md` without a body.
    pub text: String,
    /// Whether `text` is the `SKILL.md` as the server served it, checked.
    pub loaded: bool,
    /// Who may see it when its `SKILL.md` says nothing: what its entry says (a `visibility`
    /// list in the entry's front matter or `_meta`), else `skills.visibility` of the server.
    pub visibility: Vec<String>,
}

impl SyncedSkill {
    /// The skill from its entry alone: its front matter, no body, not loaded.
    pub fn from_entry(
        path: String,
        entry: Skill,
        files: Vec<String>,
        visibility: Vec<String>,
    ) -> Self {
        let front = serde_json::to_value(&entry.frontmatter).unwrap_or_default();
        // JSON is YAML: the catalog reads it as any front matter.
        let text = format!("---\n{front}\n---\n");
        SyncedSkill {
            path,
            entry,
            files,
            text,
            loaded: false,
            visibility,
        }
    }

    /// Checks `text`, the skill's `SKILL.md` as its server served it, against the entry: the
    /// manifest's size and digest, then (for an entry `skills/list` gave) the front matter
    /// field by field. `Err` says what does not match; such content is not used.
    pub fn check(&self, text: &str, listed_by_extension: bool) -> Result<(), String> {
        if let SkillResources::Files(files) = &self.entry.resources
            && let Some(file) = files.iter().find(|f| f.uri == self.entry.uri)
        {
            file.verify(text.as_bytes()).map_err(|e| e.to_string())?;
        }
        if !listed_by_extension {
            return Ok(());
        }
        let read = roster_core::skills::front_matter(text)
            .map_err(|e| format!("{}: {e}", self.entry.uri))?;
        let Ok(Value::Object(listed)) = serde_json::to_value(&self.entry.frontmatter) else {
            return Ok(());
        };
        for key in listed.keys().chain(read.keys()) {
            if listed.get(key) != read.get(key) {
                return Err(format!(
                    "{}: front matter `{key}` is {} in the file but {} in the server's entry",
                    self.entry.uri,
                    read.get(key).map_or("absent".into(), Value::to_string),
                    listed.get(key).map_or("absent".into(), Value::to_string),
                ));
            }
        }
        Ok(())
    }

    /// The URI of the skill's directory at the server, `/`-terminated.
    pub fn dir_uri(&self) -> &str {
        self.entry
            .uri
            .strip_suffix(SKILL_MD)
            .unwrap_or(&self.entry.uri)
    }

    /// The size of its `SKILL.md`: as the manifest gives it, else as read; `None` before it
    /// was read from a `"dynamic"` entry.
    pub fn skill_md_size(&self) -> Option<u64> {
        match &self.entry.resources {
            SkillResources::Files(files) => files
                .iter()
                .find(|f| f.uri == self.entry.uri)
                .map(|f| f.size),
            _ => None,
        }
        .or(self.loaded.then_some(self.text.len() as u64))
    }

    /// Whether the server's manifest lists every file (else it is `"dynamic"`).
    pub fn has_manifest(&self) -> bool {
        matches!(self.entry.resources, SkillResources::Files(_))
    }

    /// Whether a `SKILL.md` read before still holds when the server lists `entry`: only when
    /// both entries are the same and give it a digest (a `"dynamic"` skill, or one made from
    /// resources, is read again).
    pub fn same_text_as(&self, entry: &Skill) -> bool {
        self.loaded
            && self.entry == *entry
            && matches!(&entry.resources, SkillResources::Files(files)
                if files.iter().any(|f| f.uri == entry.uri))
    }
}

/// The skill's path in a `SKILL.md` URI: what comes after `scheme://` and before
/// `/SKILL.md` (`skill://pdf/forms/SKILL.md` → `pdf/forms`), if it is one.
pub fn skill_path(uri: &str) -> Option<&str> {
    let rest = uri.split_once("://").map_or(uri, |(_, rest)| rest);
    let path = rest
        .strip_suffix(SKILL_MD)?
        .strip_suffix('/')?
        .trim_start_matches('/');
    (!path.is_empty() && !uri.contains(['?', '#'])).then_some(path)
}

/// Lists `connection`'s skills as `sync` allows: by `skills/list` when `listed_by_extension`
/// (no file read: a `SKILL.md` read before is kept when `before`, the last listing, has the
/// same entry with a digest), else from `resources` (its `resources/list`: each `SKILL.md` read
/// now). A skill that cannot be read or does not check out is left out with a warning; `Err`
/// only when `skills/list` itself failed (the caller keeps what it had).
pub async fn list_skills(
    connection: &Connection,
    sync: &SkillSync,
    listed_by_extension: bool,
    resources: &[Value],
    before: &[SyncedSkill],
) -> Result<Vec<SyncedSkill>, super::RequestError> {
    let server = connection.server().to_owned();
    let entries: Vec<(Skill, Vec<String>)> = if listed_by_extension {
        connection
            .list_all("skills/list", "skills")
            .await?
            .into_iter()
            .filter_map(|raw| match serde_json::from_value::<Skill>(raw) {
                Ok(entry) => match entry.validate() {
                    Ok(()) => {
                        let files = manifest_files(&entry);
                        Some((entry, files))
                    }
                    Err(error) => {
                        tracing::warn!(%server, %error, "skill left out: its entry is not valid");
                        None
                    }
                },
                Err(error) => {
                    tracing::warn!(%server, %error, "skill left out: its entry cannot be read");
                    None
                }
            })
            .collect()
    } else {
        from_resources(resources)
    };
    let mut wanted: Vec<(String, Skill, Vec<String>)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (entry, files) in entries {
        let Some(path) = skill_path(&entry.uri).map(str::to_owned) else {
            continue;
        };
        if !sync.filter.permits(&path) || seen.contains(&path) {
            continue;
        }
        if files.len() >= SKILL_FILE_LIMIT {
            tracing::warn!(
                %server,
                skill = %path,
                "skill left out: it has more than the {SKILL_FILE_LIMIT} files a skill may have"
            );
            continue;
        }
        let front = serde_json::to_string(&entry.frontmatter).map_or(0, |f| f.len());
        if front as u64 > crate::store::DEFAULT_MAX_SKILL_FILE_SIZE {
            tracing::warn!(
                %server,
                skill = %path,
                "skill left out: its front matter is {front} bytes, more than a SKILL.md may be"
            );
            continue;
        }
        seen.insert(path.clone());
        if wanted.len() == MAX_SKILLS {
            tracing::warn!(
                %server,
                "the server lists more than {MAX_SKILLS} skills; the rest are left out"
            );
            break;
        }
        wanted.push((path, entry, files));
    }
    let kept: HashMap<&str, &SyncedSkill> =
        before.iter().map(|s| (s.entry.uri.as_str(), s)).collect();
    let reads = wanted.into_iter().map(|(path, entry, files)| {
        let visibility = entry_visibility(&entry).unwrap_or_else(|| sync.visibility.clone());
        // Read before, and the server lists it as it did: kept as it was read.
        let known = kept
            .get(entry.uri.as_str())
            .filter(|old| old.same_text_as(&entry))
            .map(|old| old.text.clone());
        let server = server.clone();
        async move {
            let mut skill = SyncedSkill::from_entry(path, entry, files, visibility);
            if let Some(text) = known {
                skill.text = text;
                skill.loaded = true;
            } else if !listed_by_extension {
                // No entry to go by: the file is all there is.
                let read = read_skill_md(connection, &skill.entry).await;
                match read.and_then(|text| skill.check(&text, false).map(|()| text)) {
                    Ok(text) => {
                        skill.text = text;
                        skill.loaded = true;
                    }
                    Err(why) => {
                        tracing::warn!(%server, skill = %skill.path, "skill left out: {why}");
                        return None;
                    }
                }
            }
            Some(skill)
        }
    });
    let mut skills: Vec<SyncedSkill> = futures::stream::iter(reads)
        .buffered(READS_IN_FLIGHT)
        .filter_map(|s| async move { s })
        .collect()
        .await;
    skills.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(skills)
}

/// The `visibility` a skill's entry gives, in its front matter or its `_meta`.
fn entry_visibility(entry: &Skill) -> Option<Vec<String>> {
    let list = |v: &Value| serde_json::from_value::<Vec<String>>(v.clone()).ok();
    entry
        .frontmatter
        .extra
        .get("visibility")
        .and_then(list)
        .or_else(|| {
            let meta = serde_json::to_value(entry.meta.as_ref()?).ok()?;
            meta.get("visibility").and_then(list)
        })
}

/// The paths, under the skill's directory, of the files its manifest lists besides `SKILL.md`.
fn manifest_files(entry: &Skill) -> Vec<String> {
    let dir = entry.uri.strip_suffix(SKILL_MD).unwrap_or(&entry.uri);
    match &entry.resources {
        SkillResources::Files(files) => files
            .iter()
            .filter(|f| f.uri != entry.uri)
            .filter_map(|f| f.uri.strip_prefix(dir).map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// Skills made from a server's `skill://.../SKILL.md` resources (a server that serves skills
/// without declaring the extension): each with the resources under its directory as files.
fn from_resources(resources: &[Value]) -> Vec<(Skill, Vec<String>)> {
    let uris: Vec<&str> = resources
        .iter()
        .filter_map(|r| r.get("uri").and_then(Value::as_str))
        .filter(|uri| uri.starts_with("skill://"))
        .collect();
    uris.iter()
        .filter(|uri| skill_path(uri).is_some())
        .map(|uri| {
            let dir = uri.strip_suffix(SKILL_MD).unwrap_or(uri);
            let files = uris
                .iter()
                .filter(|other| *other != uri)
                .filter_map(|other| other.strip_prefix(dir).map(str::to_owned))
                .collect();
            let name = skill_path(uri)
                .and_then(|p| p.rsplit('/').next())
                .unwrap_or_default();
            let entry = Skill::new(
                *uri,
                rmcp::model::SkillFrontmatter::new(name, ""),
                SkillResources::Dynamic,
            );
            (entry, files)
        })
        .collect()
}

/// The text of a skill's `SKILL.md`, read at its server. Not checked: see
/// [`SyncedSkill::check`].
async fn read_skill_md(connection: &Connection, entry: &Skill) -> Result<String, String> {
    let answer = connection
        .request("resources/read", json!({ "uri": entry.uri }))
        .await
        .map_err(|e| format!("reading {} failed: {e}", entry.uri))?;
    skill_md_text(&entry.uri, &answer)
}

/// The text of a `resources/read` answer for a `SKILL.md` (at most
/// [`crate::store::DEFAULT_MAX_SKILL_FILE_SIZE`] bytes).
pub fn skill_md_text(uri: &str, answer: &Value) -> Result<String, String> {
    let text = answer
        .get("contents")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{uri} did not come back as text"))?;
    if text.len() as u64 > crate::store::DEFAULT_MAX_SKILL_FILE_SIZE {
        return Err(format!(
            "{uri} is {} bytes, more than the {} a synced SKILL.md may be",
            text.len(),
            crate::store::DEFAULT_MAX_SKILL_FILE_SIZE
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skill_path_is_what_lies_between_the_scheme_and_skill_md() {
        assert_eq!(skill_path("skill://pdf/forms/SKILL.md"), Some("pdf/forms"));
        assert_eq!(skill_path("skill://guide/SKILL.md"), Some("guide"));
        assert_eq!(skill_path("file:///srv/x/SKILL.md"), Some("srv/x"));
        assert_eq!(skill_path("skill://SKILL.md"), None);
        assert_eq!(skill_path("skill://a/README.md"), None);
        assert_eq!(skill_path("skill://a/SKILL.md?v=1"), None);
    }

    #[test]
    fn a_skill_md_is_used_only_when_it_matches_its_entry() {
        use rmcp::model::{SkillFrontmatter, SkillResource};
        let text = "---\nname: forms\ndescription: Fill forms.\ntags: [pdf]\n---\nBody.\n";
        let uri = "skill://pdf/forms/SKILL.md";
        let entry = |text: &str, description: &str| {
            Skill::new(
                uri,
                SkillFrontmatter::new("forms", description).with_field("tags", json!(["pdf"])),
                SkillResources::Files(vec![SkillResource::from_bytes(uri, text.as_bytes())]),
            )
        };
        let skill = SyncedSkill::from_entry(
            "pdf/forms".into(),
            entry(text, "Fill forms."),
            Vec::new(),
            Vec::new(),
        );
        assert!(!skill.loaded);
        assert!(skill.text.contains("\"Fill forms.\""), "{}", skill.text);
        assert_eq!(skill.check(text, true), Ok(()));
        let tampered = text.replace("Body.", "Evil.");
        let why = skill.check(&tampered, true).expect_err("a digest mismatch");
        assert!(why.contains("digest"), "{why}");
        let longer = format!("{text}more");
        let why = skill.check(&longer, true).expect_err("a size mismatch");
        assert!(why.contains("bytes"), "{why}");
        // The bytes match the manifest, the front matter does not match the entry.
        let other = text.replace("Fill forms.", "Exfiltrate credentials");
        let lying = SyncedSkill::from_entry(
            "pdf/forms".into(),
            entry(&other, "Fill forms."),
            Vec::new(),
            Vec::new(),
        );
        let why = lying
            .check(&other, true)
            .expect_err("a front matter mismatch");
        assert!(why.contains("`description`"), "{why}");
    }

    #[test]
    fn resources_make_skills_with_the_files_under_their_directory() {
        let resources = vec![
            json!({"uri": "skill://pdf/forms/SKILL.md", "name": "forms"}),
            json!({"uri": "skill://pdf/forms/reference.md", "name": "ref"}),
            json!({"uri": "skill://pdf/other/SKILL.md", "name": "other"}),
            json!({"uri": "file:///etc/SKILL.md", "name": "not a skill"}),
        ];
        let skills = from_resources(&resources);
        let paths: Vec<(&str, &[String])> = skills
            .iter()
            .map(|(e, f)| (skill_path(&e.uri).unwrap_or(""), f.as_slice()))
            .collect();
        assert_eq!(
            paths,
            vec![
                ("pdf/forms", &["reference.md".to_owned()][..]),
                ("pdf/other", &[][..])
            ]
        );
    }
}
