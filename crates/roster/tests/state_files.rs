//! Every file roster keeps in its state directory is readable by its owner only, whatever the
//! directory: a real `roster serve --http` on a state directory that already exists, world
//! readable, with the dynamic Python SDK server (pins, a notification in the audit trail) and a server
//! behind OAuth (the token store).

mod common;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use common::mode_of as mode;

/// Every file (and socket) under `dir`, depth first.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the state dir") {
        let path = entry.expect("an entry").path();
        let kind = std::fs::symlink_metadata(&path)
            .expect("metadata")
            .file_type();
        if kind.is_dir() {
            found.extend(files_under(&path));
        } else if kind.is_file() || kind.is_socket() {
            found.push(path);
        }
    }
    found
}

#[test]
fn every_state_file_is_owner_only_in_a_state_dir_that_already_exists() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    common::make_dir(&state, 0o755);
    // An audit trail an older roster made with the umask's mode.
    let audit = state.join("audit.jsonl");
    std::fs::write(&audit, "").expect("write");
    common::set_mode(&audit, 0o644);
    let closed = common::free_port();
    let config = format!(
        "[gateway]\nstate_dir = {state:?}\n\n{}\n[servers.login]\nurl = \"http://127.0.0.1:{closed}/mcp\"\nauth = \"oauth\"\n",
        common::dynamic_server_toml("a", "legacy", &[])
    );
    let path = dir.path().join("roster.toml");
    std::fs::write(&path, config).expect("write config");
    let gateway = common::Gateway::serve(dir, &path, &[]);
    gateway.wait_for_admin();

    let report = common::call_tools(
        &["--url", &gateway.url],
        &json!([["a__note", {"text": "kept in the inbox"}]]),
    );
    assert!(report.to_string().contains("noted"), "{report}");
    common::wait_until("the server's log message is in the audit trail", || {
        std::fs::read_to_string(&audit).is_ok_and(|text| text.contains("kept in the inbox"))
    });
    common::wait_until("the OAuth token store exists", || {
        state.join("oauth/tokens.sqlite3").exists()
    });

    let files = files_under(&state);
    let names: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(&state).expect("under").display().to_string())
        .collect();
    for expected in [
        "audit.jsonl",
        "inbox.lock",
        "roster.sqlite3",
        "admin.sock",
        "oauth/tokens.sqlite3",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    let wide: Vec<String> = files
        .iter()
        .zip(&names)
        .filter(|(file, _)| mode(file) != 0o600)
        .map(|(file, name)| format!("{name} {:o}", mode(file)))
        .collect();
    assert!(wide.is_empty(), "not owner-only: {wide:?}");
    assert_eq!(
        mode(&state),
        0o755,
        "a directory roster did not make keeps its mode"
    );
}
