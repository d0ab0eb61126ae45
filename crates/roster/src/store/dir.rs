//! Finding skill directories under a skills root.

use std::fs;
use std::path::{Path, PathBuf};

use roster_core::skills::SkillSource;

use super::StoreError;

/// Nesting deeper than this is taken for a symlink loop rather than a namespace.
const MAX_DEPTH: usize = 16;

/// The skill directories found under a root.
#[derive(Debug, Default)]
pub struct SkillDirScan {
    /// Each directory holding a `SKILL.md`, with its text, ordered by directory.
    pub sources: Vec<SkillSource>,
    /// `SKILL.md` files (or directories) that could not be read.
    pub unreadable: Vec<UnreadableSkill>,
}

/// A skill file that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {reason}", .path.display())]
pub struct UnreadableSkill {
    /// The file or directory.
    pub path: PathBuf,
    /// Why it could not be read.
    pub reason: String,
}

/// Walks `root`: every directory holding a `SKILL.md` is a skill, its id the directory's path
/// under `root`. A skill directory's own subdirectories (scripts, references, assets) are its
/// resources and are not searched; hidden directories are skipped.
pub fn scan_skills_dir(root: &Path) -> Result<SkillDirScan, StoreError> {
    let io = |source| StoreError::Io {
        path: root.to_owned(),
        source,
    };
    if !fs::metadata(root).map_err(io)?.is_dir() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        )));
    }
    let mut scan = SkillDirScan::default();
    walk(root, &mut Vec::new(), &mut scan);
    scan.sources.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(scan)
}

fn walk(dir: &Path, segments: &mut Vec<String>, scan: &mut SkillDirScan) {
    let skill_file = dir.join("SKILL.md");
    if !segments.is_empty() && skill_file.is_file() {
        match fs::read(&skill_file).map(String::from_utf8) {
            Ok(Ok(text)) => scan
                .sources
                .push(SkillSource::new(segments.join("/"), text)),
            Ok(Err(_)) => scan.unreadable.push(UnreadableSkill {
                path: skill_file,
                reason: "not UTF-8 text".into(),
            }),
            Err(error) => scan.unreadable.push(UnreadableSkill {
                path: skill_file,
                reason: error.to_string(),
            }),
        }
        return;
    }
    if segments.len() >= MAX_DEPTH {
        scan.unreadable.push(UnreadableSkill {
            path: dir.to_owned(),
            reason: format!("nested deeper than {MAX_DEPTH} directories"),
        });
        return;
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            scan.unreadable.push(UnreadableSkill {
                path: dir.to_owned(),
                reason: error.to_string(),
            });
            return;
        }
    };
    let mut children: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let path = entry.path();
            (!name.starts_with('.') && path.is_dir()).then_some((name, path))
        })
        .collect();
    children.sort();
    for (name, path) in children {
        segments.push(name);
        walk(&path, segments, scan);
        segments.pop();
    }
}
