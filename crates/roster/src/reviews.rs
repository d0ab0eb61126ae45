//! What waits for a person's decision on the pins: each definition that drifted from its pin, or
//! was never pinned, as the pin store keeps it (a review), named the way clients see the tool,
//! with its diff and its hidden characters shown; and a person's decision on some of them.
//! `roster tools drift | approve | reject` and the dashboard's Tools page both read and decide
//! through here.

use std::collections::HashSet;

use anyhow::{Context as _, bail};
use roster_core::naming::NamingConfig;
use roster_core::pin::is_hidden;
use serde::Serialize;

use crate::i18n::text;
use crate::store::{Decision, PinBook, Stores};

/// Whether a waiting definition replaces a pin or would be the first one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The tool has a pin and this definition differs from it.
    Changed,
    /// The tool was never pinned.
    New,
}

impl Kind {
    /// The word in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Changed => "changed",
            Kind::New => "new",
        }
    }

    /// The word shown to a person, in the terminal's language.
    pub fn word(self) -> String {
        text(&format!("cli.tools.kind.{}", self.as_str()), &[])
    }
}

/// What the gateway does with a waiting definition now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Absent from `tools/list` until a person approves.
    Withheld,
    /// Served (under `pin = "warn"`), and flagged for a person.
    Served,
    /// A person rejected this definition: withheld until the server lists another one.
    Rejected,
}

impl State {
    /// The word in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Withheld => "withheld",
            State::Served => "served",
            State::Rejected => "rejected",
        }
    }

    /// The word shown to a person, in the terminal's language.
    pub fn word(self) -> String {
        text(&format!("cli.tools.state.{}", self.as_str()), &[])
    }
}

/// One definition waiting for a decision, as `roster tools drift` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pending {
    /// The exposed-style name, `server<sep>tool`, by the configuration's naming.
    pub name: String,
    /// The server.
    pub server: String,
    /// The server's own tool name.
    pub tool: String,
    /// Changed from its pin, or new.
    pub kind: Kind,
    /// What the gateway does with it now.
    pub state: State,
    /// What changed, in a few words.
    pub summary: String,
    /// [`Pending::summary`] in the terminal's language, for text (JSON keeps `summary`).
    #[serde(skip)]
    pub summary_text: String,
    /// The readable per-part line diff from the pin (from nothing for a new tool).
    pub diff: String,
    /// Every hidden character in the waiting definition, named with its part and position.
    pub hidden: Vec<String>,
    /// When the gateway last listed this definition, in milliseconds since the Unix epoch.
    pub seen_at_ms: u64,
    /// Who made the current pin (`first use` or `person`); `None` for a new tool.
    pub pinned_by: Option<&'static str>,
}

impl Pending {
    fn key(&self) -> (String, String) {
        (self.server.clone(), self.tool.clone())
    }
}

/// Every review in `book`, ordered by server and tool, named by `naming`.
pub fn pending(book: &PinBook, naming: &NamingConfig) -> Vec<Pending> {
    book.reviews()
        .into_iter()
        .map(|entry| {
            let definition = &entry.review.review.definition;
            let hidden: Vec<String> = definition
                .hidden_text()
                .iter()
                .map(ToString::to_string)
                .collect();
            let (kind, mut summary, mut summary_text, diff) = match entry.pin {
                Some(pin) => match pin.pin.drift_to(definition) {
                    Some(drift) => (
                        Kind::Changed,
                        drift.summary(),
                        changed_parts_text(&drift),
                        drift.render(),
                    ),
                    None => (
                        Kind::Changed,
                        "unchanged from its pin".to_owned(),
                        text("cli.tools.summary.unchanged", &[]),
                        String::new(),
                    ),
                },
                None => (
                    Kind::New,
                    "never approved".to_owned(),
                    text("cli.tools.summary.new", &[]),
                    definition.as_new().render(),
                ),
            };
            if !hidden.is_empty() {
                summary.push_str(&format!(
                    "; it hides {} character{}",
                    hidden.len(),
                    if hidden.len() == 1 { "" } else { "s" }
                ));
                let form = if hidden.len() == 1 { "one" } else { "other" };
                summary_text.push_str(&text(
                    &format!("cli.tools.summary.hides.{form}"),
                    &[("count", &hidden.len())],
                ));
            }
            let state = if entry.review.review.rejected {
                State::Rejected
            } else if entry.review.withheld {
                State::Withheld
            } else {
                State::Served
            };
            Pending {
                name: naming.candidate(entry.server, entry.tool, false, 0),
                server: entry.server.to_owned(),
                tool: entry.tool.to_owned(),
                kind,
                state,
                summary,
                summary_text,
                diff,
                hidden,
                seen_at_ms: entry.review.seen_at_ms,
                pinned_by: entry.pin.map(|pin| pin.decided_by.as_str()),
            }
        })
        .collect()
}

/// "its description and input schema changed", in the terminal's language.
fn changed_parts_text(drift: &roster_core::pin::Drift) -> String {
    let parts: Vec<String> = drift
        .changes
        .iter()
        .map(|change| {
            text(
                &format!("cli.tools.summary.part.{}", change.part.key()),
                &[],
            )
        })
        .collect();
    let list = match parts.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => text(
            "cli.tools.summary.and",
            &[("init", &init.join(", ")), ("last", last)],
        ),
    };
    text("cli.tools.summary.changed", &[("parts", &list)])
}

/// `text` with every hidden character (invisible or bidirectional) and every control character
/// but newline and tab shown as `<U+XXXX>`: a definition must not reorder, hide or erase what a
/// person reads in a terminal.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        if is_hidden(ch) || (ch.is_control() && ch != '\n' && ch != '\t') {
            out.push_str(&format!("<U+{:04X}>", u32::from(ch)));
        } else {
            out.push(ch);
        }
    }
    out
}

/// Why a NAME picks no tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameProblem {
    /// No waiting tool has this name.
    Unknown,
    /// More than one waiting tool has this bare tool name: their exposed-style names.
    Ambiguous(Vec<String>),
}

/// The waiting tool `name` picks: its exposed-style name, `SERVER/TOOL`, or the server's own
/// tool name when exactly one waiting tool has it (in that order).
pub fn match_name<'a>(pending: &'a [Pending], name: &str) -> Result<&'a Pending, NameProblem> {
    if let Some(entry) = pending.iter().find(|p| p.name == name) {
        return Ok(entry);
    }
    if let Some(entry) = pending
        .iter()
        .find(|p| name.strip_prefix(p.server.as_str()) == Some(&format!("/{}", p.tool)))
    {
        return Ok(entry);
    }
    let bare: Vec<&Pending> = pending.iter().filter(|p| p.tool == name).collect();
    match bare.as_slice() {
        [] => Err(NameProblem::Unknown),
        [one] => Ok(one),
        many => Err(NameProblem::Ambiguous(
            many.iter().map(|p| p.name.clone()).collect(),
        )),
    }
}

/// What [`select`] picked: the entries to decide, and those `--server`/`--all` left out because
/// a person already rejected them (approve only).
#[derive(Debug, Default)]
pub struct Selection<'a> {
    /// To decide, in the order asked, each once.
    pub chosen: Vec<&'a Pending>,
    /// Rejected definitions `--server`/`--all` did not approve.
    pub left_rejected: Vec<&'a Pending>,
}

/// The entries `names`, `servers` and `all` pick for `decision`. Every name and server is
/// checked before anything is picked: one that picks nothing is an error naming it (and what
/// waits), so nothing is decided.
pub fn select<'a>(
    pending: &'a [Pending],
    decision: Decision,
    names: &[String],
    servers: &[String],
    all: bool,
) -> anyhow::Result<Selection<'a>> {
    let mut problems = Vec::new();
    let mut selection = Selection::default();
    let mut seen = HashSet::new();
    for name in names {
        match match_name(pending, name) {
            Ok(entry) => {
                if seen.insert(entry.key()) {
                    selection.chosen.push(entry);
                }
            }
            Err(NameProblem::Unknown) => {
                problems.push(format!("{name:?} matches no tool waiting for a decision"));
            }
            Err(NameProblem::Ambiguous(candidates)) => problems.push(format!(
                "{name:?} is the name of more than one waiting tool: {} (name one of them)",
                candidates.join(", ")
            )),
        }
    }
    for server in servers {
        if !pending.iter().any(|p| &p.server == server) {
            problems.push(format!(
                "server {server:?} has no tool waiting for a decision"
            ));
        }
    }
    if !problems.is_empty() {
        let waiting = if pending.is_empty() {
            "nothing waits for a decision".to_owned()
        } else {
            format!(
                "waiting: {}",
                pending
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        bail!(
            "{}\n{waiting}\nnothing was decided",
            visible(&problems.join("\n"))
        );
    }
    for entry in pending
        .iter()
        .filter(|p| all || servers.contains(&p.server))
    {
        if entry.state == State::Rejected {
            if decision == Decision::Approve && !seen.contains(&entry.key()) {
                selection.left_rejected.push(entry);
            }
            continue;
        }
        if seen.insert(entry.key()) {
            selection.chosen.push(entry);
        }
    }
    Ok(selection)
}

/// What waits in the pins of `stores`, named by `naming`. No store file means nothing waits
/// (and no file is made).
pub fn load_pending(stores: &Stores, naming: &NamingConfig) -> anyhow::Result<Vec<Pending>> {
    let Some(store) = stores.pins_existing()? else {
        return Ok(Vec::new());
    };
    Ok(pending(&store.load()?, naming))
}

/// What a person's decision did, each tool by the name `drift` shows (hidden characters made
/// visible).
#[derive(Debug, Default)]
pub struct Decided {
    /// The tools decided.
    pub decided: Vec<String>,
    /// Tools the gateway settled between the read and the decision (nothing was decided).
    pub settled: Vec<String>,
    /// Rejected definitions `--server`/`--all` left rejected.
    pub left_rejected: Vec<String>,
}

/// A person's decision on what waits in the pins of `stores`, as `roster tools approve` and
/// `reject` make it (and the dashboard's buttons): `names`, every waiting tool of `servers`, or
/// `all`. A name or server that picks nothing is an error and nothing is decided; `Ok(None)`:
/// nothing waits.
pub fn decide(
    stores: &Stores,
    naming: &NamingConfig,
    decision: Decision,
    names: &[String],
    servers: &[String],
    all: bool,
) -> anyhow::Result<Option<Decided>> {
    let store = stores.pins_existing()?;
    let pending = match &store {
        Some(store) => pending(&store.load()?, naming),
        None => Vec::new(),
    };
    let selection = select(&pending, decision, names, servers, all)?;
    if selection.chosen.is_empty() && selection.left_rejected.is_empty() {
        return Ok(None);
    }
    let mut decided = Vec::new();
    if let Some(mut store) = store
        && !selection.chosen.is_empty()
    {
        let keys: Vec<(String, String)> = selection.chosen.iter().map(|p| p.key()).collect();
        decided = store
            .decide(decision, &keys)
            .with_context(|| format!("nothing was decided (the store {stores})"))?;
    }
    let mut done = Decided::default();
    for entry in &selection.chosen {
        let name = visible(&entry.name);
        if decided.contains(&entry.key()) {
            done.decided.push(name);
        } else {
            done.settled.push(name);
        }
    }
    done.left_rejected = selection
        .left_rejected
        .iter()
        .map(|entry| visible(&entry.name))
        .collect();
    Ok(Some(done))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(server: &str, tool: &str, state: State) -> Pending {
        Pending {
            name: NamingConfig::default().candidate(server, tool, false, 0),
            server: server.to_owned(),
            tool: tool.to_owned(),
            kind: Kind::Changed,
            state,
            summary: "its description changed".to_owned(),
            summary_text: "its description changed".to_owned(),
            diff: String::new(),
            hidden: Vec::new(),
            seen_at_ms: 0,
            pinned_by: Some("first use"),
        }
    }

    fn waiting() -> Vec<Pending> {
        vec![
            entry("a", "echo", State::Withheld),
            entry("b", "echo", State::Served),
            entry("b", "add", State::Rejected),
        ]
    }

    #[test]
    fn a_name_is_the_exposed_name_server_slash_tool_or_a_unique_bare_name() {
        let pending = waiting();
        let name_of = |name: &str| match_name(&pending, name).map(|p| p.name.clone());
        assert_eq!(name_of("a__echo"), Ok("a__echo".to_owned()));
        assert_eq!(name_of("b/echo"), Ok("b__echo".to_owned()));
        assert_eq!(name_of("add"), Ok("b__add".to_owned()));
        assert_eq!(
            name_of("echo"),
            Err(NameProblem::Ambiguous(vec![
                "a__echo".to_owned(),
                "b__echo".to_owned()
            ]))
        );
        assert_eq!(name_of("nope"), Err(NameProblem::Unknown));
        assert_eq!(name_of("a/add"), Err(NameProblem::Unknown));
    }

    #[test]
    fn one_bad_name_picks_nothing_and_the_error_names_it_and_what_waits() {
        let pending = waiting();
        let error = select(
            &pending,
            Decision::Approve,
            &["a__echo".to_owned(), "nope".to_owned()],
            &[],
            false,
        )
        .expect_err("an unknown name");
        let text = error.to_string();
        assert!(text.contains("\"nope\""), "{text}");
        assert!(text.contains("waiting: a__echo, b__echo, b__add"), "{text}");
    }

    #[test]
    fn server_and_all_leave_a_rejected_definition_to_be_named() {
        let pending = waiting();
        let picked = select(&pending, Decision::Approve, &[], &["b".to_owned()], false)
            .expect("server b waits");
        let names = |v: &[&Pending]| v.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&picked.chosen), vec!["b__echo"]);
        assert_eq!(names(&picked.left_rejected), vec!["b__add"]);
        let picked =
            select(&pending, Decision::Approve, &["add".to_owned()], &[], true).expect("all");
        assert_eq!(names(&picked.chosen), vec!["b__add", "a__echo", "b__echo"]);
        assert!(picked.left_rejected.is_empty());
        let picked = select(&pending, Decision::Reject, &[], &[], true).expect("all");
        assert_eq!(names(&picked.chosen), vec!["a__echo", "b__echo"]);
    }

    #[test]
    fn hidden_and_control_characters_are_shown_not_obeyed() {
        assert_eq!(
            visible("a\u{202E}b\x1b[2K\tc\n"),
            "a<U+202E>b<U+001B>[2K\tc\n"
        );
    }
}
