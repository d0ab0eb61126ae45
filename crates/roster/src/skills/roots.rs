//! The local skills: each `[skills] paths` root read, a skill that is broken or unreadable now
//! keeping the version served before it.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::handler::server::skill_catalog::SkillCatalog as SkillFiles;
use roster_core::SkillSource;
use roster_core::skills::load;

use crate::store::scan_skills_dir;

/// One root as served: its sources (each skill directory's `SKILL.md`) and its files.
#[derive(Clone)]
pub(super) struct Served {
    pub(super) sources: Vec<SkillSource>,
    pub(super) files: Option<Arc<SkillFiles>>,
}

/// What one read of the roots made.
pub(super) struct Read {
    pub(super) served: Vec<Served>,
    pub(super) problems: Vec<String>,
}

/// Reads every root; a skill that is unreadable or invalid now but was served before (in
/// `before`) keeps its last good version, and so do its root's files.
pub(super) fn read_roots(roots: &[PathBuf], max_file_size: u64, before: Option<&[Served]>) -> Read {
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
