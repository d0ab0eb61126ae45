//! The configuration the docs show is configuration roster takes: every ```toml block of the
//! README and of `docs/*.md` parses with the parser `roster serve` uses (each `${VAR}` given a
//! value), so a key renamed or a value reshaped in the code fails here until its page says so.

use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The ```toml blocks of `text`, each with the line it starts on.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match &mut open {
            None if line.trim_start().starts_with("```toml") => open = Some((n + 1, String::new())),
            Some(_) if line.trim_start().starts_with("```") => blocks.extend(open.take()),
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    assert!(open.is_none(), "a ```toml block is never closed");
    blocks
}

/// The pages with configuration: the README and every page under docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("a docs entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

#[test]
fn every_toml_block_of_the_docs_parses() {
    let env = |_: &str| Some("value-from-the-environment".to_owned());
    let mut parsed = 0;
    let mut failures = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a readable page");
        for (line, block) in toml_blocks(&text) {
            let at = page.with_file_name("roster.toml");
            match roster::Config::from_toml(&block, &at, &env) {
                Ok(_) => parsed += 1,
                Err(e) => failures.push(format!("{}:{line}: {e}", page.display())),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The configuration reference is one of them: a page that lost its blocks fails too.
    assert!(parsed >= 4, "only {parsed} toml blocks found in the docs");
}

#[test]
fn the_configuration_reference_names_every_gateway_key_of_the_defaults() {
    // Each key the parser knows in [gateway] is on the reference page: read the keys from an
    // error the parser gives for an unknown one, which lists what it expects.
    let env = |_: &str| None;
    let error = roster::Config::from_toml(
        "[gateway]\nno_such_key = 1\n",
        Path::new("roster.toml"),
        &env,
    )
    .expect_err("an unknown key is refused")
    .to_string();
    let reference = std::fs::read_to_string(root().join("docs/configuration.md")).expect("page");
    let expected: Vec<&str> = error
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|key| key.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .filter(|key| *key != "no_such_key")
        .collect();
    assert!(
        expected.len() > 20,
        "the parser's error lists the keys: {error}"
    );
    let missing: Vec<&&str> = expected
        .iter()
        .filter(|key| !reference.contains(&format!("\n{key} =")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md has no line for these [gateway] keys: {missing:?}"
    );
}
