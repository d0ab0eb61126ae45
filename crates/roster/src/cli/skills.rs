//! `roster skills ...`: working with skill directories.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use roster_core::catalog::Catalog;
use roster_core::skills::{flattened_tools, load};

use crate::i18n::text;
use crate::store::scan_skills_dir;

/// `roster skills` subcommands.
#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Load every skill under PATH and report each invalid one with its reason; exits 1 when
    /// any skill is invalid, 2 when PATH cannot be read.
    Check {
        /// The skills root: each directory under it holding a SKILL.md is a skill.
        #[arg(default_value = "skills")]
        path: PathBuf,
    },
}

/// Runs a `roster skills` subcommand; `max_file_size` is `[skills] max_file_size`, so a check
/// refuses exactly what the gateway would.
pub fn run(command: SkillsCommand, max_file_size: u64) -> anyhow::Result<ExitCode> {
    match command {
        SkillsCommand::Check { path } => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            check(&path, max_file_size, &mut out)
        }
    }
}

/// What `check` found, line by line.
fn check(root: &Path, max_file_size: u64, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let scan = match scan_skills_dir(root, max_file_size) {
        Ok(scan) => scan,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut problems: Vec<String> = scan.unreadable.iter().map(|u| u.to_string()).collect();
    let report = load(scan.sources);
    for invalid in &report.invalid {
        problems.push(format!(
            "{}: {}",
            root.join(&invalid.dir).join("SKILL.md").display(),
            invalid.error
        ));
    }
    let catalog = Catalog::from_report(report);
    let registry = catalog.registry();
    let mut valid = 0;
    for (skill, _) in registry.iter() {
        match flattened_tools(skill, &|id| registry.get(id)) {
            Ok(_) => {
                valid += 1;
                let word = text("cli.skills.ok", &[]);
                writeln!(out, "{word:<8} {} ({})", skill.id, skill.kind)?;
            }
            Err(error) => {
                problems.push(format!(
                    "{}: {error}",
                    root.join(&skill.id).join("SKILL.md").display()
                ));
            }
        }
    }
    let word = text("cli.skills.invalid", &[]);
    for problem in &problems {
        writeln!(out, "{word:<8} {problem}")?;
    }
    let summary = text(
        "cli.skills.summary",
        &[
            ("valid", &valid),
            ("invalid", &problems.len()),
            ("path", &root.display()),
        ],
    );
    writeln!(out, "{summary}")?;
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
