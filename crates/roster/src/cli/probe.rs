//! `roster probe URL`: connects to one MCP server exactly as a gateway connects to its servers
//! (the same transports, eras, listing and call path), lists its tools and calls each of them
//! once, and prints what happened as JSON. It is how the conformance suite's client scenarios
//! drive roster's client side (`scripts/conformance`), and a quick check of a server before it
//! goes into `roster.toml`.
//!
//! A tool is called with the arguments given by `--call NAME=JSON`, else with arguments made
//! from its input schema: each required property's `default`, first `enum` value, or a plain
//! value of its type. In `--call` arguments, a string `"@schema:TOOL"` stands for TOOL's input
//! schema as roster holds it — what the gateway would serve its clients — so a server can see
//! what survived the trip. A question the server asks during a call (elicitation, sampling) has no
//! person to answer it here, so it is declined, as a gateway with no client behind the call
//! declines it.
//!
//! The server's skills (SEP-2640) are listed as the gateway syncs them, and nothing of them is
//! read unless `--load-skill NAME` asks: then the skill is loaded as a client's `get_skill`
//! loads it (its `SKILL.md` checked against the server's entry), and each file its manifest
//! lists is read and checked; a check that fails stops there.
//!
//! With `--oauth` the server is reached as an `auth = "oauth"` server is: a server that wants
//! a login gets one without a person (`roster::oauth::login_headless`: roster follows the
//! authorization URL's redirect to its own loopback callback), and a call refused for want of
//! scope (step-up) logs in again and is tried once more. A connection or listing refused again
//! after a login (more scope, another authorization server) gets another login, at most
//! [`MAX_LOGINS`] in a row.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::config::{Config, ConfigError};
use crate::servers::ServerState;
use crate::skills::Skills;
use crate::{Roster, RosterOptions};

/// The server name the probe gives the one server it connects to.
pub const PROBE_SERVER: &str = "probe";

/// What `roster probe` connects to and calls.
#[derive(Debug, Clone)]
pub struct ProbeSpec {
    /// The server's URL.
    pub url: String,
    /// `streamable-http` or `sse`.
    pub transport: String,
    /// `auto`, `legacy` (initialize era) or `modern` (2026-07-28).
    pub protocol: String,
    /// Arguments for named tools, instead of ones made from the schema.
    pub calls: BTreeMap<String, Map<String, Value>>,
    /// Extra `[servers.probe]` keys, as TOML lines (headers, timeouts).
    pub extra: String,
    /// Reach the server as an `auth = "oauth"` server, logging in without a person.
    pub oauth: bool,
    /// A client registered out of band: its id and the variable holding its secret.
    pub client: Option<(String, Option<String>)>,
    /// Skills of the server to load, by name or path, as a client's `get_skill` loads them:
    /// `SKILL.md` read and checked against the server's entry, then each file its manifest
    /// lists. Nothing is read for a skill not named here.
    pub load_skills: Vec<String>,
}

/// The protocol setting for a protocol version the conformance suite names
/// (`MCP_CONFORMANCE_PROTOCOL_VERSION`): dated versions through 2025-11-25 use the initialize
/// lifecycle, later ones the stateless one.
pub fn protocol_for_version(version: &str) -> &'static str {
    if version > "2025-11-25" {
        "modern"
    } else {
        "legacy"
    }
}

/// `NAME=JSON` → the tool's name and its arguments object.
pub fn parse_call(text: &str) -> Result<(String, Map<String, Value>), String> {
    let (name, arguments) = text
        .split_once('=')
        .ok_or_else(|| format!("--call {text:?}: expected NAME=JSON"))?;
    match serde_json::from_str(arguments) {
        Ok(Value::Object(map)) => Ok((name.to_owned(), map)),
        Ok(_) => Err(format!(
            "--call {name}: the arguments must be a JSON object"
        )),
        Err(e) => Err(format!("--call {name}: the arguments are not JSON: {e}")),
    }
}

impl ProbeSpec {
    /// The configuration the probe runs: one server, named as the server names its tools
    /// (`naming = "never"`), state kept in `state_dir`.
    pub fn config(&self, state_dir: &std::path::Path) -> Result<Config, ConfigError> {
        let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
        let text = format!(
            "[gateway]\nnaming = \"never\"\nstartup_wait = \"30s\"\nstate_dir = {state}\n\n\
             [servers.{PROBE_SERVER}]\nurl = {url}\ntransport = {transport}\nprotocol = {protocol}\n{oauth}{extra}\n",
            oauth = match (&self.client, self.oauth) {
                (Some((id, secret_env)), true) => format!(
                    "oauth.client_id = {}\n{}",
                    quote(id),
                    secret_env
                        .as_deref()
                        .map(|var| format!("oauth.client_secret_env = {}\n", quote(var)))
                        .unwrap_or_default()
                ),
                (None, true) => "auth = \"oauth\"\n".to_owned(),
                (_, false) => String::new(),
            },
            state = quote(&state_dir.display().to_string()),
            url = quote(&self.url),
            transport = quote(&self.transport),
            protocol = quote(&self.protocol),
            extra = self.extra,
        );
        let env = |name: &str| std::env::var(name).ok();
        Config::from_toml(&text, &state_dir.join("probe.toml"), &env)
    }
}

/// Made-up arguments a tool's input schema accepts: each required property's `default`, first
/// `enum` value or a plain value of its type.
pub fn example_arguments(schema: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        let property = properties.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
        out.insert(name.to_owned(), example_value(property));
    }
    out
}

fn example_value(schema: &Value) -> Value {
    if let Some(value) = schema.get("default").or(schema.get("const")) {
        return value.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let kind = match schema.get("type") {
        Some(Value::Array(kinds)) => kinds.iter().find_map(Value::as_str).unwrap_or("string"),
        Some(Value::String(kind)) => kind.as_str(),
        _ => "string",
    };
    match kind {
        "number" | "integer" => json!(1),
        "boolean" => json!(true),
        "array" => json!([]),
        "object" => Value::Object(example_arguments(schema)),
        "null" => Value::Null,
        _ => json!("probe"),
    }
}

/// Connects, lists, calls every tool once, and reports: `{"server": status, "tools": [names],
/// "calls": {name: result or error}}`. `Err` when the server could not be reached or listed.
pub async fn run(spec: &ProbeSpec) -> anyhow::Result<Value> {
    let state = tempfile_dir()?;
    let config = spec.config(state.path())?;
    let oauth = config
        .servers
        .get(PROBE_SERVER)
        .and_then(|server| server.oauth.clone());
    let roster = Roster::start_with(config, RosterOptions::default()).await?;
    let (skills, _) = Skills::load(&[], crate::store::DEFAULT_MAX_SKILL_FILE_SIZE);
    let skills = std::sync::Arc::new(skills);
    skills.follow(&roster);
    let outcome = match probe(&roster, spec, oauth.as_ref()).await {
        Ok(mut report) => {
            report["skills"] = probe_skills(&skills, &spec.load_skills).await;
            Ok(report)
        }
        Err(e) => Err(e),
    };
    roster.shutdown_and_wait().await;
    outcome
}

fn probe_state(roster: &Roster) -> anyhow::Result<crate::servers::ServerStatus> {
    roster
        .status()
        .into_iter()
        .find(|s| s.name == PROBE_SERVER)
        .ok_or_else(|| anyhow::anyhow!("the probe's server is missing from status"))
}

/// When the server waits for a login, or has just asked for more scope (a 403
/// `insufficient_scope`, recorded for the login: the connection ends and the server waits):
/// logs in without a person and waits (at most 30 s) until the gateway's supervisor has
/// reconnected with the new token. Whether it logged in.
async fn log_in_if_asked(
    roster: &Roster,
    spec: &ProbeSpec,
    oauth: Option<&crate::config::OAuthConfig>,
) -> anyhow::Result<bool> {
    let Some(oauth) = oauth else {
        return Ok(false);
    };
    let tokens = roster.stores().tokens();
    let step_up = crate::oauth::step_up_pending(PROBE_SERVER, &*tokens)?;
    if !step_up && probe_state(roster)?.state != ServerState::NeedsLogin {
        return Ok(false);
    }
    // A server may refuse the connection after a login again (its handshake or listing wants
    // a scope the first login did not ask for, or a token of another authorization server):
    // logged in again, a bounded number of times, as a client stops asking a person after a
    // few refusals.
    for _ in 0..MAX_LOGINS {
        // The connection that was refused ends first; the one to wait for comes after the
        // login.
        wait_for(roster, spec, "wait for a login", |s| {
            s.state == ServerState::NeedsLogin
        })
        .await?;
        let asked = probe_state(roster)?.logins_asked;
        crate::oauth::login_headless(PROBE_SERVER, &spec.url, oauth, &tokens, None).await?;
        // Connected, or refused once more (it may pass through `connected` in a moment).
        wait_for(roster, spec, "connect after the login", |s| {
            s.state == ServerState::Connected || s.logins_asked > asked
        })
        .await?;
        if probe_state(roster)?.logins_asked == asked {
            // A turn lists the server; a listing refused with 401 asks for another login.
            roster.open_session().begin_turn().await;
            if probe_state(roster)?.logins_asked == asked {
                return Ok(true);
            }
        }
    }
    anyhow::bail!(
        "{} refused roster after each of {MAX_LOGINS} logins",
        spec.url
    )
}

/// How long the probe waits for its server to be connected or waiting for a login, after the
/// first turn.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// Logins the probe makes in a row for one refusal before it gives up.
const MAX_LOGINS: usize = 3;

/// Waits (at most 30 s) until the probe's server's status is one `done` takes.
async fn wait_for(
    roster: &Roster,
    spec: &ProbeSpec,
    what: &str,
    done: impl Fn(&crate::servers::ServerStatus) -> bool,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done(&probe_state(roster)?) {
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("{} did not {what} within 30 s", spec.url);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn probe(
    roster: &Roster,
    spec: &ProbeSpec,
    oauth: Option<&crate::config::OAuthConfig>,
) -> anyhow::Result<Value> {
    // A turn lists a server whose first listing has not happened yet.
    roster.open_session().begin_turn().await;
    // A listing refused for want of a login may end its connection before the refusal is
    // recorded: the server reads `disconnected` for a moment, then `needs-login`. Settled
    // first, at most SETTLE (a server that stays down is reported as it is then).
    let settled = wait_for(roster, spec, "settle", |s| {
        matches!(s.state, ServerState::Connected | ServerState::NeedsLogin)
    });
    if let Ok(settled) = tokio::time::timeout(SETTLE, settled).await {
        settled?;
    }
    log_in_if_asked(roster, spec, oauth).await?;
    let status = roster.status_json();
    let server = probe_state(roster)?;
    if server.state != ServerState::Connected {
        anyhow::bail!(
            "{} is {}: {}",
            spec.url,
            server.state,
            server.last_error.as_deref().unwrap_or("no error recorded")
        );
    }
    let tools = roster.tools();
    let schema_of = |name: &str| {
        tools
            .iter()
            .find(|t| t.exposed_name == name)
            .map(|t| Value::Object((*t.tool.input_schema).clone()))
    };
    let mut calls = Map::new();
    for tool in &tools {
        let arguments = match spec.calls.get(&tool.exposed_name) {
            Some(given) => given
                .iter()
                .map(|(k, v)| (k.clone(), with_schemas(v, &schema_of)))
                .collect(),
            None => example_arguments(&Value::Object((*tool.tool.input_schema).clone())),
        };
        let mut answer = roster
            .call(&tool.exposed_name, Some(arguments.clone()))
            .await;
        // A call refused for want of scope ends the connection and asks for a login (step-up).
        if answer.is_err() && log_in_if_asked(roster, spec, oauth).await? {
            answer = roster.call(&tool.exposed_name, Some(arguments)).await;
        }
        let answer = answer.unwrap_or_else(|e| json!({ "error": e.to_string() }));
        calls.insert(tool.exposed_name.clone(), answer);
    }
    Ok(json!({
        "server": status["servers"][0],
        "tools": tools.iter().map(|t| t.exposed_name.clone()).collect::<Vec<_>>(),
        "calls": calls,
    }))
}

/// The server's skills, and each of `load` loaded: `{"listed": [ids], "loaded": {name:
/// {"files": {uri: bytes}} or {"error": why}}}`. A skill to load that is not listed within 10 s
/// is reported as not found.
async fn probe_skills(skills: &Skills, load: &[String]) -> Value {
    let everyone = roster_core::catalog::Subscriptions::default();
    let find = |name: &str| {
        skills
            .overview()
            .into_iter()
            .find(|s| s.name == name || s.id == format!("{PROBE_SERVER}/{name}") || s.id == name)
    };
    let mut loaded = Map::new();
    for name in load {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut found = find(name);
        while found.is_none() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            found = find(name);
        }
        let Some(skill) = found else {
            loaded.insert(name.clone(), json!({"error": "no such skill"}));
            continue;
        };
        let mut files = Map::new();
        let mut outcome = Value::Null;
        let skill_md = format!("skill://{}/SKILL.md", skill.id);
        let mut uris = vec![skill_md.clone()];
        uris.extend(skills.synced_files(&skill.id));
        for uri in uris {
            match skills.read_synced(&uri, &everyone).await {
                Some(Ok(read)) => {
                    files.insert(uri, json!(crate::skills::read_size(&read)));
                }
                Some(Err(why)) => {
                    // Content that does not check out is not used: nothing more is read.
                    outcome = json!({"error": why});
                    break;
                }
                None => {
                    outcome = json!({"error": format!("{uri} is not served")});
                    break;
                }
            }
        }
        if outcome.is_null() {
            outcome = json!({"files": files});
        }
        loaded.insert(name.clone(), outcome);
    }
    let listed: Vec<String> = skills.overview().into_iter().map(|s| s.id).collect();
    json!({"listed": listed, "loaded": loaded})
}

/// `value` with every `"@schema:TOOL"` string replaced by TOOL's input schema (left as it is
/// when there is no such tool).
fn with_schemas(value: &Value, schema_of: &dyn Fn(&str) -> Option<Value>) -> Value {
    match value {
        Value::String(text) => text
            .strip_prefix("@schema:")
            .and_then(schema_of)
            .unwrap_or_else(|| value.clone()),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| with_schemas(v, schema_of)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), with_schemas(v, schema_of)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A private directory for the probe's state, removed when dropped.
fn tempfile_dir() -> std::io::Result<TempDir> {
    let path = std::env::temp_dir().join(format!("roster-probe-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(TempDir(path))
}

struct TempDir(std::path::PathBuf);

impl TempDir {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_come_from_defaults_enums_and_types_of_the_required_properties() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "number"},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "n": {"type": "integer", "default": 7},
                "flag": {"type": ["boolean", "null"]},
                "opt": {"type": "string"},
                "inner": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
            },
            "required": ["a", "mode", "n", "flag", "inner"]
        });
        assert_eq!(
            Value::Object(example_arguments(&schema)),
            json!({"a": 1, "mode": "fast", "n": 7, "flag": true, "inner": {"x": "probe"}})
        );
    }

    #[test]
    fn a_call_argument_names_what_is_wrong() {
        assert_eq!(
            parse_call("add={\"a\":1}").expect("a call"),
            (
                "add".to_owned(),
                json!({"a": 1}).as_object().expect("an object").clone()
            )
        );
        assert!(
            parse_call("add")
                .expect_err("refused")
                .contains("NAME=JSON")
        );
        assert!(
            parse_call("add=[1]")
                .expect_err("refused")
                .contains("JSON object")
        );
        assert!(
            parse_call("add={")
                .expect_err("refused")
                .contains("not JSON")
        );
    }

    #[test]
    fn a_schema_reference_is_replaced_by_that_tools_schema() {
        let schema_of = |name: &str| (name == "t").then(|| json!({"$defs": {}}));
        assert_eq!(
            with_schemas(
                &json!({"schema": "@schema:t", "list": ["@schema:t", "@schema:u", 1]}),
                &schema_of
            ),
            json!({"schema": {"$defs": {}}, "list": [{"$defs": {}}, "@schema:u", 1]})
        );
    }

    #[test]
    fn conformance_versions_map_to_eras() {
        assert_eq!(protocol_for_version("2025-06-18"), "legacy");
        assert_eq!(protocol_for_version("2025-11-25"), "legacy");
        assert_eq!(protocol_for_version("2026-07-28"), "modern");
    }
}
