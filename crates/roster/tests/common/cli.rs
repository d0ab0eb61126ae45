//! The `roster` binary run once, as a person runs a command: [`cli`] with the arguments, what
//! the test sets around it (a config, a state dir, the environment, a working directory), and
//! what it printed — [`Cli::stdout`] of a run that must succeed, [`Cli::fails`] /
//! [`Cli::fails_with`] for the stderr of one that must fail, [`Cli::output`] for the rest.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The built `roster` binary.
pub const ROSTER: &str = env!("CARGO_BIN_EXE_roster");

/// `roster ARGS`, in English whatever the machine's LANG (`ROSTER_LANG=en`; a test about the
/// language sets or removes it with [`Cli::env`] / [`Cli::env_remove`]).
pub fn cli<I, S>(args: I) -> Cli
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(ROSTER);
    command.env("ROSTER_LANG", "en");
    Cli {
        command,
        config: None,
        args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
    }
}

/// A `roster` command line to run once; see [`cli`].
pub struct Cli {
    command: Command,
    config: Option<PathBuf>,
    args: Vec<OsString>,
}

impl Cli {
    /// `--config PATH` before the arguments, with `ROSTER_STATE_DIR` unset unless
    /// [`Cli::state_dir`] names one: the state lives where the config says, never in the
    /// developer's state dir.
    pub fn config(mut self, path: impl AsRef<Path>) -> Self {
        self.config = Some(path.as_ref().to_owned());
        self
    }

    /// `ROSTER_STATE_DIR=DIR`, with `XDG_STATE_HOME` unset.
    pub fn state_dir(self, dir: impl AsRef<Path>) -> Self {
        self.env("ROSTER_STATE_DIR", dir.as_ref())
            .env_remove("XDG_STATE_HOME")
    }

    /// An environment variable for the run (over an earlier setting of it).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    /// Environment variables for the run.
    pub fn envs<K, V>(mut self, vars: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.command.envs(vars);
        self
    }

    /// An environment variable the run does not see (nor an earlier setting of it).
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.command.env_remove(key);
        self
    }

    /// The working directory of the run.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.command.current_dir(dir);
        self
    }

    /// Runs it (stdin empty, stdout and stderr captured) and returns what happened.
    pub fn output(self) -> Output {
        self.run().1
    }

    /// Runs it and returns its stdout; panics showing the command line and what it printed
    /// when it failed or printed something other than UTF-8.
    pub fn stdout(self) -> String {
        let (shown, output) = self.run();
        assert!(
            output.status.success(),
            "{shown} failed ({}): {}",
            output.status,
            printed(&output)
        );
        String::from_utf8(output.stdout)
            .unwrap_or_else(|e| panic!("{shown} printed non-UTF-8 on stdout: {e}"))
    }

    /// Runs it expecting it to fail (any exit but 0) and returns its stderr; panics showing
    /// what it printed when it succeeded.
    pub fn fails(self) -> String {
        let (shown, output) = self.run();
        assert!(
            !output.status.success(),
            "{shown} should fail: {}",
            printed(&output)
        );
        String::from_utf8(output.stderr)
            .unwrap_or_else(|e| panic!("{shown} printed non-UTF-8 on stderr: {e}"))
    }

    /// Runs it expecting exit code `code` and returns its stderr; panics showing what it
    /// printed when it ended otherwise.
    pub fn fails_with(self, code: i32) -> String {
        let (shown, output) = self.run();
        assert_eq!(
            output.status.code(),
            Some(code),
            "{shown} should exit with {code}: {}",
            printed(&output)
        );
        String::from_utf8(output.stderr)
            .unwrap_or_else(|e| panic!("{shown} printed non-UTF-8 on stderr: {e}"))
    }

    /// The command line as shown in a failure (`{:?}` of the command: the environment it sets
    /// and every argument), and what the run gave.
    fn run(mut self) -> (String, Output) {
        if let Some(config) = &self.config {
            self.command.arg("--config").arg(config);
            let named = self
                .command
                .get_envs()
                .any(|(key, _)| key == "ROSTER_STATE_DIR");
            if !named {
                self.command.env_remove("ROSTER_STATE_DIR");
            }
        }
        self.command.args(&self.args);
        let output = self
            .command
            .output()
            .unwrap_or_else(|e| panic!("run {:?}: {e}", self.command));
        (format!("{:?}", self.command), output)
    }
}

/// What a run printed on stderr (lossily decoded).
pub fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Both streams of a run, for a failure message.
fn printed(output: &Output) -> String {
    format!(
        "stderr: {}\nstdout: {}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    )
}
