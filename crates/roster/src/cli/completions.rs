//! `roster completions bash|zsh|fish`, and the hidden `roster __complete` the scripts call.
//!
//! The static part (every subcommand, flag and fixed value) is clap_complete's generated
//! script. clap_complete's completion from live values (`ArgValueCompleter`) is still behind
//! its `unstable-dynamic` feature, so the values that only exist at run time — the unread seqs
//! for `inbox ack <SEQ>`, the pending ids for `inbox confirm <ID>`, server names for
//! `inbox list --channel`, the tools waiting for `tools approve|reject <NAME>` — come from
//! `roster __complete line -- <the words typed so far>`, which a few lines appended to each
//! script call: roster reads the words as its own parser would ([`position`]: `--config` and
//! `--state-dir` wherever they are, the options that take a value, the subcommands), so the
//! values come from the state directory the command being typed would use.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Args, ValueEnum, ValueHint};
use clap_complete::Shell;

use super::inbox::backend_for;
use super::state::resolve_state_dir;

/// `roster completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to print a completion script for.
    pub shell: CompletionShell,
}

/// The shells `roster completions` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    /// bash: `source <(roster completions bash)`.
    Bash,
    /// zsh: `source <(roster completions zsh)`.
    Zsh,
    /// fish: `roster completions fish | source`.
    Fish,
}

/// `roster __complete`: prints completion candidates, one per line as `value<TAB>description`.
#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// Which values to list.
    pub what: Completable,
    /// roster's state directory.
    #[arg(long, env = "ROSTER_STATE_DIR", value_hint = ValueHint::DirPath)]
    pub state_dir: Option<PathBuf>,
    /// For `line`: the command line's words up to the one being typed (the last, maybe empty),
    /// the program's name first.
    #[arg(last = true)]
    pub words: Vec<String>,
}

/// The run-time values the completion scripts ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Completable {
    /// Unread seqs, for `roster inbox ack <SEQ>`.
    #[value(name = "inbox-ack")]
    UnreadSeq,
    /// Pending confirm ids, for `roster inbox confirm <ID>`.
    #[value(name = "inbox-confirm")]
    PendingId,
    /// Server names seen in the inbox, for `roster inbox list --channel`.
    #[value(name = "inbox-channel")]
    Channel,
    /// Tools waiting for a decision, for `roster tools approve|reject <NAME>`.
    #[value(name = "tools-pending")]
    ToolsPending,
    /// Whichever of the above the word being typed asks for (see [`position`]).
    #[value(name = "line")]
    Line,
}

/// What the word being typed on a command line asks for, and the configuration and state
/// directory that command line names.
#[derive(Debug, PartialEq)]
struct Position {
    what: Completable,
    config: Option<PathBuf>,
    state_dir: Option<PathBuf>,
}

/// Reads `words` (the program's name, the words before the cursor, then the one being typed)
/// as `command`'s parser would: `None` when the word being typed takes no live value.
fn position(command: &mut clap::Command, words: &[String]) -> Option<Position> {
    command.build();
    let (current, before) = words.split_last()?;
    let mut at: &clap::Command = command;
    let mut path: Vec<&str> = Vec::new();
    let mut positionals = 0;
    let mut config = None;
    let mut state_dir = None;
    let mut value_of: Option<String> = None;
    let mut options_end = false;
    for word in before.iter().skip(1) {
        // bash splits `--config=FILE` into `--config`, `=` and `FILE`.
        if value_of.is_some() && word == "=" {
            continue;
        }
        if let Some(option) = value_of.take() {
            match option.as_str() {
                "config" => config = Some(PathBuf::from(word)),
                "state-dir" => state_dir = Some(PathBuf::from(word)),
                _ => {}
            }
            continue;
        }
        if !options_end && word == "--" {
            options_end = true;
        } else if let Some(long) = word.strip_prefix("--").filter(|_| !options_end) {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            match (name, value) {
                ("config", Some(value)) => config = Some(PathBuf::from(value)),
                ("state-dir", Some(value)) => state_dir = Some(PathBuf::from(value)),
                (_, Some(_)) => {}
                (_, None) => {
                    let arg = at.get_arguments().find(|a| a.get_long() == Some(name));
                    if arg.is_some_and(|a| a.get_action().takes_values()) {
                        value_of = Some(name.to_owned());
                    }
                }
            }
        } else if word.len() > 1 && word.starts_with('-') && !options_end {
            // `-X` whose option takes a value takes the next word; other short flags none.
            let short = word.chars().nth(1).filter(|_| word.len() == 2);
            let arg = at.get_arguments().find(|a| a.get_short() == short);
            if let Some(arg) = arg.filter(|a| a.get_action().takes_values()) {
                value_of = Some(arg.get_long().unwrap_or_default().to_owned());
            }
        } else if positionals == 0
            && let Some(sub) = at.find_subcommand(word)
        {
            at = sub;
            path.push(sub.get_name());
        } else {
            positionals += 1;
        }
    }
    let typing_option = current.starts_with('-') && !options_end;
    let what = match (path.as_slice(), value_of.as_deref()) {
        (["inbox", ..], Some("channel")) => Completable::Channel,
        (_, Some(_)) => return None,
        _ if typing_option => return None,
        (["inbox", "ack"], None) if positionals == 0 => Completable::UnreadSeq,
        (["inbox", "confirm"], None) if positionals == 0 => Completable::PendingId,
        (["tools", "approve" | "reject"], None) => Completable::ToolsPending,
        _ => return None,
    };
    Some(Position {
        what,
        config,
        state_dir,
    })
}

/// Prints the completion script for `args.shell`, its descriptions in the terminal's language.
pub fn run(args: CompletionsArgs, command: clap::Command) -> anyhow::Result<()> {
    let mut command = localized(command);
    let (shell, dynamic) = match args.shell {
        CompletionShell::Bash => (Shell::Bash, BASH_DYNAMIC),
        CompletionShell::Zsh => (Shell::Zsh, ZSH_DYNAMIC),
        CompletionShell::Fish => (Shell::Fish, FISH_DYNAMIC),
    };
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut command, "roster", &mut out);
    out.write_all(dynamic.as_bytes())?;
    Ok(())
}

/// Prints the candidates for `args.what`, from the running gateway's live inbox when one
/// answers, else from the audit trail (the backend `roster inbox` uses); the waiting tools
/// come from the pin store. Silent (and successful) when there is no inbox or store yet: a
/// completion must never print an error into the user's command line. The state directory is
/// found as `roster inbox` finds it.
///
/// With `line`, the words given after `--` say what to list and where (see [`position`]);
/// `false` when the word being typed takes no live value (the scripts then complete it as
/// clap's script does).
pub fn complete(
    args: CompleteArgs,
    config_path: &Path,
    mut command: clap::Command,
) -> anyhow::Result<bool> {
    let (what, config_path, state_dir) = match args.what {
        Completable::Line => match position(&mut command, &args.words) {
            Some(at) => (
                at.what,
                at.config.unwrap_or_else(|| config_path.to_owned()),
                at.state_dir.or(args.state_dir),
            ),
            None => return Ok(false),
        },
        what => (what, config_path.to_owned(), args.state_dir),
    };
    let config_path = config_path.as_path();
    if what == Completable::ToolsPending {
        super::tools::complete_pending(state_dir, config_path, &mut std::io::stdout().lock())?;
        return Ok(true);
    }
    let Ok(dir) = resolve_state_dir(state_dir, config_path) else {
        return Ok(true);
    };
    // The state dir's trail only: a completion does not wait for a database.
    let stores = crate::store::Stores::embedded(&dir);
    let Ok(backend) = backend_for(&dir, stores) else {
        return Ok(true);
    };
    let mut out = std::io::stdout().lock();
    match what {
        Completable::UnreadSeq => {
            let Ok(unread) = backend.unread() else {
                return Ok(true);
            };
            for entry in unread {
                writeln!(out, "{}\t{} {}", entry.seq, entry.channel, entry.method)?;
            }
        }
        Completable::PendingId => {
            let Ok(pending) = backend.pending_confirms() else {
                return Ok(true);
            };
            for confirm in pending {
                writeln!(
                    out,
                    "{}\t{} {}",
                    confirm.id, confirm.channel, confirm.method
                )?;
            }
        }
        Completable::Channel => {
            let Ok(entries) = backend.list(None, usize::MAX) else {
                return Ok(true);
            };
            let channels: BTreeSet<String> = entries.into_iter().map(|e| e.channel).collect();
            for channel in channels {
                writeln!(out, "{channel}")?;
            }
        }
        Completable::ToolsPending | Completable::Line => {}
    }
    Ok(true)
}

/// `command` with the descriptions people read in completions in the terminal's language: each
/// command's `about` from `cli.completions.about.<path>` (`roster` for the root, else the
/// command names joined by `_`, as `inbox_list`; the `help` subcommand's children share their
/// commands' keys), each argument's help from `cli.completions.args.<path>.<id>`, else the
/// nearest parent's, else `cli.completions.args.<id>`, and each value's help from
/// `cli.completions.values.<id>_<value>`. In English, and for hidden commands, clap's own text
/// (the doc comments) stays as it is.
pub fn localized(mut command: clap::Command) -> clap::Command {
    if crate::i18n::cli_locale_is_english() {
        return command;
    }
    // clap adds `help`, `version` and the `help` subcommand when it builds the command.
    command.build();
    localize_at(command, &[])
}

fn localize_at(mut command: clap::Command, path: &[String]) -> clap::Command {
    use crate::i18n::try_text;
    if command.is_hide_set() {
        return command;
    }
    let own = if path.is_empty() {
        "roster".to_owned()
    } else {
        path.join("_")
    };
    if let Some(about) = try_text(&format!("cli.completions.about.{own}")) {
        command = command.about(about);
    }
    let ids: Vec<String> = command
        .get_arguments()
        .map(|arg| arg.get_id().to_string())
        .collect();
    for id in ids {
        // The argument's own key for this command, else its parents', else the shared one.
        let help = (0..=path.len())
            .rev()
            .map(|n| match n {
                0 => format!("cli.completions.args.{id}"),
                n => format!("cli.completions.args.{}.{id}", path[..n].join("_")),
            })
            .find_map(|key| try_text(&key));
        command = command.mut_arg(&id, |mut arg| {
            if let Some(help) = help {
                arg = arg.help(help);
            }
            let mut changed = false;
            let values: Vec<PossibleValue> = arg
                .get_possible_values()
                .into_iter()
                .map(|value| {
                    let key = format!("cli.completions.values.{id}_{}", value.get_name());
                    match try_text(&key) {
                        Some(help) => {
                            changed = true;
                            value.help(help)
                        }
                        None => value,
                    }
                })
                .collect();
            if changed {
                arg = arg.value_parser(PossibleValuesParser::new(values));
            }
            arg
        });
    }
    localize_children(command, path)
}

/// Each subcommand of the command at `path`, localized (a `help` child as [`localize_help`]).
fn localize_children(mut command: clap::Command, path: &[String]) -> clap::Command {
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in names {
        let mut sub_path = path.to_vec();
        sub_path.push(name.clone());
        command = command.mut_subcommand(&name, |sub| {
            if name == "help" {
                // `roster help tools drift` describes `roster tools drift`.
                localize_help(sub, path)
            } else {
                localize_at(sub, &sub_path)
            }
        });
    }
    command
}

/// The `help` subcommand under the command at `path`: its own about, and its children named
/// as the commands they describe.
fn localize_help(mut help: clap::Command, path: &[String]) -> clap::Command {
    if let Some(about) = crate::i18n::try_text("cli.completions.about.help") {
        help = help.about(about);
    }
    localize_children(help, path)
}

/// Wraps clap's `_roster`: roster itself says whether the word being typed takes a live value
/// (`__complete line` succeeds) and which.
const BASH_DYNAMIC: &str = r#"
_roster_live() {
    local cur="${COMP_WORDS[COMP_CWORD]}" values
    if values="$("${COMP_WORDS[0]}" __complete line -- "${COMP_WORDS[@]:0:COMP_CWORD+1}" 2>/dev/null)"; then
        values="$(printf '%s\n' "$values" | cut -f1)"
        COMPREPLY=( $(compgen -W "$values" -- "$cur") )
        return 0
    fi
    _roster "$@"
}
if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _roster_live -o nosort -o bashdefault -o default roster
else
    complete -F _roster_live -o bashdefault -o default roster
fi
"#;

/// Wraps clap's `_roster` as [`BASH_DYNAMIC`] does.
const ZSH_DYNAMIC: &str = r#"
_roster_live() {
    local out
    if out="$(${words[1]} __complete line -- "${(@)words[1,CURRENT]}" 2>/dev/null)"; then
        local -a values
        values=(${(f)"$(print -r -- "$out" | sed $'s/\t/:/')"})
        _describe -t values values values
        return
    fi
    _roster "$@"
}
compdef _roster_live roster
"#;

/// Adds run-time values to clap's fish completions, where roster says the word being typed
/// takes them.
const FISH_DYNAMIC: &str = r#"
function __roster_live_values
    roster __complete line -- (commandline -opc) (commandline -ct) 2>/dev/null
end
function __roster_live
    __roster_live_values > /dev/null
end
complete -c roster -n __roster_live -f -a '(__roster_live_values)'
"#;
