//! Finding skill directories under a skills root.
//!
//! Discovery stays inside the root: symlinks below it are never followed, whether they point
//! inside or outside (a symlinked directory is skipped, a symlinked `SKILL.md` is reported), so
//! what is served is exactly the tree under the root. A `SKILL.md` larger than the skill file
//! size limit is reported, not read.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use roster_core::skills::SkillSource;

use super::StoreError;

/// Nesting deeper than this is not a namespace any more.
const MAX_DEPTH: usize = 16;

pub use crate::config::DEFAULT_MAX_SKILL_FILE_SIZE;

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
/// resources and are not searched; hidden directories and symlinks are skipped. A `SKILL.md`
/// of more than `max_file_size` bytes is reported as unreadable.
pub fn scan_skills_dir(root: &Path, max_file_size: u64) -> Result<SkillDirScan, StoreError> {
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
    walk(root, max_file_size, &mut Vec::new(), &mut scan);
    scan.sources.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(scan)
}

/// Reads a skill file of at most `max` bytes; the reason it cannot be served otherwise.
pub fn read_skill_file(path: &Path, max: u64) -> Result<String, String> {
    let file = fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    // Reading one byte past the limit tells a file that grew since it was listed.
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max {
        return Err(too_large(max));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".into())
}

fn too_large(max: u64) -> String {
    format!("larger than the skill file size limit of {max} bytes ([skills] max_file_size)")
}

fn walk(dir: &Path, max_file_size: u64, segments: &mut Vec<String>, scan: &mut SkillDirScan) {
    let skill_file = dir.join("SKILL.md");
    let found = fs::symlink_metadata(&skill_file).ok();
    if !segments.is_empty() && found.is_some() {
        let read = match found {
            Some(meta) if meta.file_type().is_symlink() => Err(
                "a symlink; skills are read only from regular files inside the skills root".into(),
            ),
            Some(meta) if !meta.is_file() => Err("not a regular file".into()),
            Some(meta) if meta.len() > max_file_size => Err(too_large(max_file_size)),
            _ => read_skill_file(&skill_file, max_file_size),
        };
        match read {
            Ok(text) => scan
                .sources
                .push(SkillSource::new(segments.join("/"), text)),
            Err(reason) => scan.unreadable.push(UnreadableSkill {
                path: skill_file,
                reason,
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
            // The entry's own type: a symlink to a directory is not a directory here.
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            (!name.starts_with('.') && is_dir).then_some((name, entry.path()))
        })
        .collect();
    children.sort();
    for (name, path) in children {
        segments.push(name);
        walk(&path, max_file_size, segments, scan);
        segments.pop();
    }
}
