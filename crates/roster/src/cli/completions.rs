//! `roster completions bash|zsh|fish`, and the hidden `roster __complete` the scripts call.
//!
//! The static part (every subcommand, flag and fixed value) is clap_complete's generated
//! script. clap_complete's completion from live values (`ArgValueCompleter`) is still behind
//! its `unstable-dynamic` feature, so the values that only exist at run time — the unread seqs
//! for `inbox ack <SEQ>`, the pending ids for `inbox confirm <ID>`, server names for
//! `inbox list --channel`, the tools waiting for `tools approve|reject <NAME>` — come from
//! `roster __complete <what>`, which a few lines appended to each script call.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Args, ValueEnum, ValueHint};
use clap_complete::Shell;

use super::inbox::{backend_for, resolve_state_dir};

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
pub fn complete(args: CompleteArgs, config_path: &Path) -> anyhow::Result<()> {
    if args.what == Completable::ToolsPending {
        super::tools::complete_pending(args.state_dir, config_path, &mut std::io::stdout().lock())?;
        return Ok(());
    }
    let Ok(dir) = resolve_state_dir(args.state_dir, config_path) else {
        return Ok(());
    };
    let Ok(backend) = backend_for(&dir) else {
        return Ok(());
    };
    let mut out = std::io::stdout().lock();
    match args.what {
        Completable::UnreadSeq => {
            let Ok(unread) = backend.unread() else {
                return Ok(());
            };
            for entry in unread {
                writeln!(out, "{}\t{} {}", entry.seq, entry.channel, entry.method)?;
            }
        }
        Completable::PendingId => {
            let Ok(pending) = backend.pending_confirms() else {
                return Ok(());
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
                return Ok(());
            };
            let channels: BTreeSet<String> = entries.into_iter().map(|e| e.channel).collect();
            for channel in channels {
                writeln!(out, "{channel}")?;
            }
        }
        Completable::ToolsPending => {}
    }
    Ok(())
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

/// Wraps clap's `_roster` so the run-time values come from `roster __complete`.
const BASH_DYNAMIC: &str = r#"
_roster_live() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" what=""
    if [[ "${COMP_WORDS[1]}" == "inbox" ]]; then
        if [[ "$prev" == "--channel" ]]; then
            what=inbox-channel
        elif [[ ${COMP_CWORD} -eq 3 && "$cur" != -* ]]; then
            case "${COMP_WORDS[2]}" in
                ack) what=inbox-ack ;;
                confirm) what=inbox-confirm ;;
            esac
        fi
    elif [[ "${COMP_WORDS[1]}" == "tools" && ${COMP_CWORD} -ge 3 && "$cur" != -* ]]; then
        case "${COMP_WORDS[2]}" in
            approve|reject)
                case "$prev" in
                    --server|--state-dir) ;;
                    *) what=tools-pending ;;
                esac ;;
        esac
    fi
    if [[ -n "$what" ]]; then
        local values
        values="$("${COMP_WORDS[0]}" __complete "$what" 2>/dev/null | cut -f1)"
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

/// Wraps clap's `_roster` so the run-time values come from `roster __complete`.
const ZSH_DYNAMIC: &str = r#"
_roster_live() {
    local what=""
    if [[ ${words[2]} == inbox ]]; then
        if [[ ${words[CURRENT-1]} == --channel ]]; then
            what=inbox-channel
        elif (( CURRENT == 4 )) && [[ ${words[CURRENT]} != -* ]]; then
            case ${words[3]} in
                ack) what=inbox-ack ;;
                confirm) what=inbox-confirm ;;
            esac
        fi
    elif [[ ${words[2]} == tools ]] && (( CURRENT >= 4 )) && [[ ${words[CURRENT]} != -* ]]; then
        case ${words[3]} in
            approve|reject)
                case ${words[CURRENT-1]} in
                    --server|--state-dir) ;;
                    *) what=tools-pending ;;
                esac ;;
        esac
    fi
    if [[ -n $what ]]; then
        local -a values
        values=(${(f)"$(${words[1]} __complete $what 2>/dev/null | sed $'s/\t/:/')"})
        _describe -t values $what values
        return
    fi
    _roster "$@"
}
compdef _roster_live roster
"#;

/// Adds run-time values to clap's fish completions.
const FISH_DYNAMIC: &str = r#"
complete -c roster -n '__fish_seen_subcommand_from inbox; and __fish_seen_subcommand_from ack' -f -a '(roster __complete inbox-ack 2>/dev/null)'
complete -c roster -n '__fish_seen_subcommand_from inbox; and __fish_seen_subcommand_from confirm; and test (count (commandline -opc)) -eq 3' -f -a '(roster __complete inbox-confirm 2>/dev/null)'
complete -c roster -n '__fish_seen_subcommand_from inbox; and __fish_seen_subcommand_from list' -l channel -f -r -a '(roster __complete inbox-channel 2>/dev/null)'
complete -c roster -n '__fish_seen_subcommand_from tools; and __fish_seen_subcommand_from approve reject' -f -a '(roster __complete tools-pending 2>/dev/null)'
"#;
