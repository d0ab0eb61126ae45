use super::*;

fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

/// `text` read as the file at `path`, with only `pairs` in the environment.
fn parse_with(text: &str, path: &str, pairs: &'static [(&'static str, &'static str)]) -> Config {
    Config::from_toml(text, Path::new(path), &env_of(pairs)).expect("valid")
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    let env = env_of(&[("TOKEN", "s3cret"), ("HOME", "/home/u")]);
    Config::from_toml(text, Path::new("/etc/roster/roster.toml"), &env)
}

#[test]
fn full_file_parses() {
    let config = parse(
        r#"
        [gateway]
        naming = "conditional"
        separator = "."
        refresh_interval = "2h"
        debounce = "250ms"
        subscriptions = ["eng"]

        [skills]
        paths = ["skills", "/abs/skills"]

        [servers.fs]
        command = "npx"
        args = ["-y", "fs"]
        env = { API = "Bearer ${TOKEN}", LIT = "$${NOPE}" }
        cwd = "work"
        tools.deny = ["delete_*"]

        [servers.remote]
        url = "https://example.com/mcp"
        headers = { Authorization = "Bearer ${TOKEN}" }
        call_timeout = 5

        [servers.old]
        url = "http://127.0.0.1:9/sse"
        transport = "sse"
        enabled = false
        "#,
    )
    .expect("valid config");
    assert_eq!(config.gateway.naming, NamingMode::Conditional);
    assert_eq!(config.server_order, vec!["fs", "remote", "old"]);
    assert_eq!(config.gateway.separator, ".");
    assert_eq!(config.gateway.refresh_interval, Duration::from_secs(7200));
    assert_eq!(config.gateway.debounce, Duration::from_millis(250));
    assert_eq!(
        config.skills.paths,
        vec![
            PathBuf::from("/etc/roster/skills"),
            PathBuf::from("/abs/skills")
        ]
    );
    let fs = &config.servers["fs"];
    let TransportConfig::Stdio { env, cwd, .. } = &fs.transport else {
        panic!("fs is stdio")
    };
    assert_eq!(env["API"], "Bearer s3cret");
    assert_eq!(env["LIT"], "${NOPE}");
    assert_eq!(cwd.as_deref(), Some(Path::new("/etc/roster/work")));
    assert!(!fs.tools.permits("delete_file"));
    assert!(fs.tools.permits("read_file"));
    let TransportConfig::StreamableHttp { headers, .. } = &config.servers["remote"].transport
    else {
        panic!("remote is streamable http")
    };
    assert_eq!(headers["Authorization"], "Bearer s3cret");
    assert_eq!(
        config.servers["remote"].call_timeout,
        Duration::from_secs(5)
    );
    assert!(matches!(
        config.servers["old"].transport,
        TransportConfig::Sse { .. }
    ));
    assert!(!config.servers["old"].enabled);
}

#[test]
fn gateway_serving_keys_and_clients_parse() {
    let config = parse(
        r#"
        [gateway]
        listen = "127.0.0.1:9000"
        delta_notes = false
        page_size = 50
        page_bytes = 65536

        [[clients]]
        name = "ide"
        token_env = "IDE_TOKEN"
        subscriptions = ["eng"]
        "#,
    )
    .expect("valid");
    assert_eq!(config.gateway.listen, "127.0.0.1:9000");
    assert!(!config.gateway.delta_notes);
    assert_eq!(
        config.gateway.pages(),
        PageLimits {
            size: 50,
            bytes: 65536
        }
    );
    let err = parse("[gateway]\npage_bytes = 100\n").expect_err("too small");
    assert!(
        err.to_string().contains("gateway.page_bytes") && err.to_string().contains("1024"),
        "{err}"
    );
    assert_eq!(config.clients.len(), 1);
    assert_eq!(config.clients[0].token_env.as_deref(), Some("IDE_TOKEN"));
    let err = parse("[[clients]]\nname = \"x\"\n").expect_err("no token");
    assert!(err.to_string().contains("clients[0]"), "{err}");
}

#[test]
fn task_keys_parse_and_bad_ones_are_named() {
    let config = parse(
        r#"
        [gateway]
        task_after = "250ms"
        task_ttl = "10m"
        max_tasks = 3

        [servers.build]
        command = "build-server"
        tasks.required = ["build_*"]
        tasks.forbidden = ["build_quick", "ping"]
        "#,
    )
    .expect("valid");
    assert_eq!(config.gateway.task_after, Duration::from_millis(250));
    assert_eq!(config.gateway.task_ttl, Duration::from_secs(600));
    assert_eq!(config.gateway.max_tasks, 3);
    let tasks = &config.servers["build"].tasks;
    assert_eq!(tasks.of("build_all"), Some(TaskSupport::Required));
    assert_eq!(tasks.of("build_quick"), Some(TaskSupport::Forbidden));
    assert_eq!(tasks.of("ping"), Some(TaskSupport::Forbidden));
    assert_eq!(tasks.of("status"), None);
    assert_eq!(TaskSupport::parse("optional"), Some(TaskSupport::Optional));
    assert_eq!(TaskSupport::parse("always"), None);

    let err = parse("[gateway]\ntask_ttl = \"0s\"\n").expect_err("zero ttl");
    assert!(err.to_string().contains("gateway.task_ttl"), "{err}");
    let err =
        parse("[servers.x]\ncommand = \"x\"\ntasks.required = [\"[\"]\n").expect_err("bad glob");
    assert!(err.to_string().contains("servers.x.tasks"), "{err}");
    let err =
        parse("[servers.x]\ncommand = \"x\"\ntasks.sometimes = []\n").expect_err("unknown key");
    assert!(err.to_string().contains("sometimes"), "{err}");
}

#[test]
fn server_limits_parse_and_bad_ones_are_named() {
    let config = parse(
        "[gateway]\nnotification_rate = 5\nmax_tools = 3\nkill_grace = \"1s\"\n\
         [servers.x]\ncommand = \"x\"\n",
    )
    .expect("valid");
    let limits = &config.servers["x"].limits;
    assert_eq!(limits.notification_rate, 5);
    assert_eq!(limits.notification_burst, 200);
    assert_eq!(limits.max_tools, 3);
    assert_eq!(limits.kill_grace, Duration::from_secs(1));
    for (text, key) in [
        ("notification_rate = 0", "gateway.notification_rate"),
        ("max_listing_bytes = 0", "gateway.max_listing_bytes"),
        ("max_log_line = 10", "gateway.max_log_line"),
        ("kill_grace = \"soon\"", "gateway.kill_grace"),
    ] {
        let err = parse(&format!("[gateway]\n{text}\n")).expect_err(text);
        assert!(err.to_string().contains(key), "{err}");
    }
}

#[test]
fn secrets_in_urls_are_never_shown() {
    let url = "https://user:pw@example.com:8443/mcp?api_key=k3y&v=1#frag";
    let parsed = reqwest::Url::parse(url).expect("valid");
    let error = format!("error sending request for url ({parsed}): refused; k: api_key=k3y&v=1");
    let shown = redact_url_in(&error, url);
    assert!(!shown.contains("k3y") && !shown.contains("pw"), "{shown}");
    assert!(
        shown.contains("https://***@example.com:8443/mcp?***"),
        "{shown}"
    );
}

#[test]
fn the_documented_example_parses() {
    let source = include_str!("mod.rs");
    let start = source.find("//! ```toml\n").expect("example start") + "//! ```toml\n".len();
    let end = start + source[start..].find("//! ```\n").expect("example end");
    let example: String = source[start..end]
        .lines()
        .map(|l| {
            l.strip_prefix("//! ")
                .unwrap_or(l.trim_start_matches("//!"))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let env = env_of(&[
        ("FS_TOKEN", "a"),
        ("WEB_TOKEN", "b"),
        ("WEB_KEY", "k"),
        ("CORP_SECRET", "s"),
        ("HOME", "/h"),
    ]);
    let config =
        Config::from_toml(&example, Path::new("/c/roster.toml"), &env).expect("example valid");
    assert_eq!(config.skills.max_file_size, 1 << 20);
    assert_eq!(config.gateway.admin_max_line, 65536);
    assert_eq!(config.server_order, vec!["fs", "web", "linear", "corp"]);
    assert_eq!(config.gateway.state_dir, PathBuf::from("/c/state"));
    assert!(config.servers["linear"].oauth.is_some());
    assert_eq!(
        config.servers["corp"]
            .oauth
            .as_ref()
            .and_then(|o| o.redirect_port),
        Some(8765)
    );
    assert_eq!(config.clients.len(), 1);
    assert_eq!(config.clients[0].delta_notes, Some(false));
    assert!(!config.servers["fs"].tools.permits("write_file"));
    let permissions = &config.clients[0].permissions;
    assert!(permissions.tools.permits("fs__read_file"));
    assert!(!permissions.tools.permits("fs__write_file"));
    assert!(!permissions.prompts.permits("web__summarize"));
    let auth = config.auth.expect("[auth]");
    assert_eq!(auth.issuers, ["https://idp.example.com"]);
    assert_eq!(auth.required_scopes, ["mcp"]);
    assert_eq!(auth.rules.len(), 1);
    assert_eq!(auth.rules[0].name, "eng-{sub}");
    assert_eq!(
        auth.rules[0].claim,
        Some(("groups".to_owned(), "eng".to_owned()))
    );
}

#[test]
fn auth_and_permission_mistakes_name_the_key() {
    let cases = [
        (
            "[auth]\naudience = \"https://r.example/mcp\"\n",
            "auth.issuers",
        ),
        (
            "[auth]\nissuer = \"https://idp.example\"\n",
            "auth.audience",
        ),
        (
            "[auth]\nissuer = \"idp.example\"\naudience = \"https://r.example/mcp\"\n",
            "auth.issuer",
        ),
        (
            "[auth]\nissuers = [\"https://idp.example\", \"ftp://x\"]\n\
             audience = \"https://r.example/mcp\"\n",
            "auth.issuers[1]",
        ),
        (
            "[auth]\nissuer = \"https://idp.example\"\naudience = \"https://r.example/mcp\"\n\
             [[auth.rules]]\nclaim = \"groups\"\n",
            "auth.rules[0].value",
        ),
        (
            "[auth]\nissuer = \"https://idp.example\"\naudience = \"https://r.example/mcp\"\n\
             [[auth.rules]]\ntools.allow = [\"a[\"]\n",
            "auth.rules[0].tools",
        ),
        (
            "[[clients]]\nname = \"c\"\ntoken_env = \"T\"\nresources.deny = [\"{a\"]\n",
            "clients[0].resources",
        ),
    ];
    for (text, expected) in cases {
        let err = parse(text).expect_err(text);
        assert!(
            matches!(&err, ConfigError::Invalid { key, .. } if key == expected),
            "{text}: {err}"
        );
    }
    let err = parse("[auth]\nissuer = \"https://i\"\naudience = \"https://a\"\nleway = 1\n")
        .expect_err("a misspelt key");
    assert!(err.to_string().contains("leway"), "{err}");
}

#[test]
fn defaults_apply() {
    let config = parse("").expect("empty config is valid");
    assert_eq!(config.gateway.refresh_interval, Duration::from_secs(3600));
    assert_eq!(config.gateway.debounce, Duration::from_millis(500));
    assert!(config.gateway.dynamic_tools);
    assert_eq!(
        config.gateway.state_dir,
        PathBuf::from("/home/u/.local/state/roster")
    );
}

#[test]
fn pin_policy_is_set_for_the_gateway_and_overridden_per_server() {
    use super::{NewTools, PinPolicy};
    let config = parse(
        "[gateway]\npin = \"approve\"\nnew_tools = \"approve\"\n\
         [servers.a]\ncommand = \"x\"\n[servers.b]\ncommand = \"x\"\npin = \"off\"\nnew_tools = \"trust\"\n",
    )
    .expect("parses");
    assert_eq!(config.servers["a"].pin, PinPolicy::Approve);
    assert_eq!(config.servers["a"].new_tools, NewTools::Approve);
    assert_eq!(config.servers["b"].pin, PinPolicy::Off);
    assert_eq!(config.servers["b"].new_tools, NewTools::Trust);
    let defaults = parse("[servers.a]\ncommand = \"x\"\n").expect("parses");
    assert_eq!(defaults.servers["a"].pin, PinPolicy::Warn);
    assert_eq!(defaults.servers["a"].new_tools, NewTools::Trust);
    let err = parse("[servers.a]\ncommand = \"x\"\npin = \"sometimes\"\n").expect_err("bad pin");
    let text = err.to_string();
    assert!(
        text.contains("sometimes") && text.contains("warn") && text.contains("approve"),
        "{text}"
    );
}

#[test]
fn unknown_key_names_the_key_and_file() {
    let err = parse("[servers.a]\ncommand = \"x\"\ncomand = \"y\"\n").expect_err("typo");
    let text = err.to_string();
    assert!(text.contains("/etc/roster/roster.toml"), "{text}");
    assert!(text.contains("comand"), "{text}");
    let err = parse("[gateway]\nrefresh = \"1h\"\n").expect_err("unknown gateway key");
    assert!(err.to_string().contains("refresh"), "{err}");
}

#[test]
fn missing_command_is_an_error() {
    let err = parse("[servers.a]\nargs = [\"x\"]\n").expect_err("no command");
    assert!(
        matches!(&err, ConfigError::Invalid { key, .. } if key == "servers.a.command"),
        "{err}"
    );
    assert!(err.to_string().contains("a program to run"), "{err}");
}

#[test]
fn bad_url_is_an_error() {
    for url in ["not a url", "ftp://example.com/x", "127.0.0.1:8080"] {
        let err = parse(&format!("[servers.a]\nurl = \"{url}\"\n")).expect_err(url);
        assert!(
            matches!(&err, ConfigError::Invalid { key, .. } if key == "servers.a.url"),
            "{url}: {err}"
        );
    }
}

#[test]
fn variables_are_expanded_in_urls_and_an_unset_one_is_named() {
    let config = parse("[servers.a]\nurl = \"https://h.example/${TOKEN}/mcp\"\n")
        .expect("a set variable expands");
    match &config.servers["a"].transport {
        TransportConfig::StreamableHttp { url, .. } => {
            assert_eq!(url, "https://h.example/s3cret/mcp");
        }
        other => panic!("not an HTTP server: {other:?}"),
    }
    let err = parse("[servers.a]\nurl = \"${MCP_URL}\"\n").expect_err("unset var");
    match &err {
        ConfigError::MissingVariable { key, var, .. } => {
            assert_eq!((key.as_str(), var.as_str()), ("servers.a.url", "MCP_URL"));
        }
        other => panic!("wrong error: {other}"),
    }
    assert!(!err.to_string().contains("relative URL"), "{err}");
}

#[test]
fn skill_file_size_reads_bytes_and_units() {
    for (text, bytes) in [
        ("2048", 2048),
        ("\"512KiB\"", 512 * 1024),
        ("\"2MB\"", 2_000_000),
    ] {
        let config = parse(&format!("[skills]\nmax_file_size = {text}\n")).expect(text);
        assert_eq!(config.skills.max_file_size, bytes, "{text}");
    }
    for bad in ["0", "\"lots\"", "\"1 parsec\""] {
        let err = parse(&format!("[skills]\nmax_file_size = {bad}\n")).expect_err(bad);
        assert!(err.to_string().contains("skills.max_file_size"), "{err}");
    }
}

#[test]
fn a_server_name_that_leaves_no_room_for_tools_is_refused() {
    let long = "s".repeat(62);
    let err = parse(&format!("[servers.{long}]\ncommand = \"x\"\n")).expect_err("too long");
    let text = err.to_string();
    assert!(text.contains(&format!("servers.{long}")), "{text}");
    assert!(text.contains("at most 61"), "{text}");
    let fits = "s".repeat(61);
    assert!(parse(&format!("[servers.{fits}]\ncommand = \"x\"\n")).is_ok());
    let never = format!("[gateway]\nnaming = \"never\"\n\n[servers.{long}]\ncommand = \"x\"\n");
    assert!(
        parse(&never).is_ok(),
        "bare names need no room for a prefix"
    );
}

#[test]
fn missing_variable_names_it() {
    let err = parse("[servers.a]\ncommand = \"x\"\nenv = { K = \"${NOT_SET}\" }\n")
        .expect_err("unset var");
    match &err {
        ConfigError::MissingVariable { key, var, .. } => {
            assert_eq!(key, "servers.a.env.K");
            assert_eq!(var, "NOT_SET");
        }
        other => panic!("wrong error: {other}"),
    }
    assert!(err.to_string().contains("NOT_SET"));
    let err = parse("[servers.a]\nurl = \"http://h/\"\nheaders = { A = \"${X\" }\n")
        .expect_err("unclosed");
    assert!(err.to_string().contains("servers.a.headers.A"), "{err}");
}

#[test]
fn separator_follows_the_registry_rule_and_names_the_key() {
    for bad in ["", "123456789", "a b", "::"] {
        let err = parse(&format!("[gateway]\nseparator = {bad:?}\n")).expect_err(bad);
        assert!(
            matches!(&err, ConfigError::Invalid { key, .. } if key == "gateway.separator"),
            "{bad:?}: {err}"
        );
        assert!(err.to_string().contains("roster.toml"), "{err}");
    }
    let config = parse("[gateway]\nseparator = \"12345678\"\n").expect("8 characters");
    assert_eq!(config.gateway.separator, "12345678");
    config
        .gateway
        .naming_config()
        .validate()
        .expect("the registry accepts it");
}

#[test]
fn huge_or_non_finite_durations_are_errors_naming_the_key() {
    for (text, why) in [
        ("[gateway]\nrefresh_interval = 1e20\n", "too large"),
        (
            "[gateway]\ndebounce = \"99999999999999999999h\"\n",
            "too large",
        ),
        ("[gateway]\ndebounce = inf\n", "not a finite number"),
        ("[gateway]\ndebounce = nan\n", "not a finite number"),
    ] {
        let err = parse(text).expect_err("rejected");
        assert!(matches!(&err, ConfigError::Invalid { .. }), "{err}");
        let shown = err.to_string();
        assert!(shown.contains("gateway."), "{shown}");
        assert!(shown.contains(why), "{shown}");
        assert!(!shown.contains("it is negative"), "{shown}");
    }
}

#[test]
fn negative_or_bad_durations_are_errors() {
    let err = parse("[gateway]\ndebounce = \"-5ms\"\n").expect_err("negative");
    assert!(err.to_string().contains("gateway.debounce"), "{err}");
    assert!(err.to_string().contains("negative"), "{err}");
    let err = parse("[gateway]\ndebounce = -1\n").expect_err("negative number");
    assert!(err.to_string().contains("gateway.debounce"), "{err}");
    let err = parse("[gateway]\nrefresh_interval = \"1 fortnight\"\n").expect_err("unit");
    assert!(err.to_string().contains("fortnight"), "{err}");
}

#[test]
fn command_and_url_together_is_an_error() {
    let err = parse("[servers.a]\ncommand = \"x\"\nurl = \"http://h/\"\n").expect_err("both");
    assert!(err.to_string().contains("not both"), "{err}");
}

#[test]
fn dynamic_tools_env_switch_wins() {
    let config = parse_with(
        "[gateway]\ndynamic_tools = true\n",
        "r.toml",
        &[("ROSTER_DYNAMIC_TOOLS", "0")],
    );
    assert!(!config.gateway.dynamic_tools);
}

#[test]
fn state_dir_env_wins() {
    let config = parse_with(
        "[gateway]\nstate_dir = \"here\"\n",
        "/c/r.toml",
        &[("ROSTER_STATE_DIR", "/var/roster")],
    );
    assert_eq!(config.gateway.state_dir, PathBuf::from("/var/roster"));
    let config = parse("[gateway]\nstate_dir = \"here\"\n").expect("valid");
    assert_eq!(config.gateway.state_dir, PathBuf::from("/etc/roster/here"));
}

#[test]
fn claude_desktop_json_reads_as_is() {
    let env = env_of(&[("TOKEN", "t")]);
    let config = Config::from_mcp_servers_json(
        r#"{
          "mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "x"], "env": {"K": "${TOKEN}"}},
            "web": {"type": "http", "url": "https://e.com/mcp", "headers": {"A": "b"}},
            "legacy": {"type": "sse", "url": "http://127.0.0.1:1/sse", "disabled": true}
          },
          "globalShortcut": "Ctrl+Space"
        }"#,
        Path::new("claude_desktop_config.json"),
        &env,
    )
    .expect("valid json");
    assert_eq!(config.servers.len(), 3);
    let TransportConfig::Stdio { env, .. } = &config.servers["fs"].transport else {
        panic!("fs is stdio")
    };
    assert_eq!(env["K"], "t");
    assert!(matches!(
        config.servers["web"].transport,
        TransportConfig::StreamableHttp { .. }
    ));
    assert!(!config.servers["legacy"].enabled);
    assert_eq!(config.server_order, ["fs", "web", "legacy"], "file order");
}

#[test]
fn json_servers_keep_file_order_and_a_repeat_keeps_its_first_place() {
    let config = Config::from_mcp_servers_json(
        r#"{"mcpServers": {
            "zeta": {"command": "z"},
            "alpha": {"command": "a"},
            "zeta": {"command": "z2"}
        }}"#,
        Path::new("mcp.json"),
        &env_of(&[]),
    )
    .expect("valid json");
    assert_eq!(config.server_order, ["zeta", "alpha"]);
    let TransportConfig::Stdio { command, .. } = &config.servers["zeta"].transport else {
        panic!("zeta is stdio")
    };
    assert_eq!(command, "z2");
}

#[test]
fn json_errors_name_the_key() {
    let env = env_of(&[]);
    let err = Config::from_mcp_servers_json(
        r#"{"mcpServers": {"x": {"args": []}}}"#,
        Path::new("c.json"),
        &env,
    )
    .expect_err("no command");
    assert!(err.to_string().contains("mcpServers.x.command"), "{err}");
    assert!(err.to_string().contains("c.json"), "{err}");
}

#[test]
fn allow_and_deny_combine() {
    let f = ToolFilter::new(
        vec!["read_*".into(), "list".into()],
        vec!["read_secret*".into()],
    )
    .expect("valid globs");
    assert!(f.permits("read_file"));
    assert!(f.permits("list"));
    assert!(!f.permits("write_file"));
    assert!(!f.permits("read_secrets"));
}

#[test]
fn redacted_urls_keep_the_server_but_not_its_secrets() {
    assert_eq!(
        redact_url("https://bob:hunter2@example.com:8443/mcp?api_key=abc#x"),
        "https://***@example.com:8443/mcp?***"
    );
    assert_eq!(
        redact_url("http://127.0.0.1:9/mcp"),
        "http://127.0.0.1:9/mcp"
    );
    let text = "error sending request for url (https://example.com/mcp?api_key=abc): refused.";
    let shown = redact_urls(text);
    assert!(!shown.contains("abc"), "{shown}");
    assert_eq!(
        shown,
        "error sending request for url (https://example.com/mcp?***): refused."
    );
    assert_eq!(redact_urls("no url here"), "no url here");
    // Any scheme; a colour code after a URL stays; a URL without secrets is left as written.
    assert_eq!(
        redact_urls("\x1b[3murl\x1b[0m=postgres://u:pw@db:5432/r?sslmode=x\x1b[0m at http://h:1"),
        "\x1b[3murl\x1b[0m=postgres://***@db:5432/r?***\x1b[0m at http://h:1"
    );
    assert_eq!(
        redact_urls("Url { username: \"u\", password: Some(\"p\\\"w\"), query: Some(\"k=v\") }"),
        "Url { username: \"***\", password: Some(\"***\"), query: Some(\"***\") }"
    );
}

#[test]
fn durations_read_humantime_forms_and_bare_seconds() {
    for (text, expected) in [
        ("500ms", Duration::from_millis(500)),
        ("2min", Duration::from_secs(120)),
        ("1h 30m", Duration::from_secs(5400)),
        ("30", Duration::from_secs(30)),
        ("1.5", Duration::from_millis(1500)),
    ] {
        assert_eq!(parse_duration(text), Ok(expected), "{text}");
    }
    for (text, why) in [("-5ms", "negative"), ("1 fortnight", "fortnight"), ("", "")] {
        let err = parse_duration(text).expect_err(text);
        assert!(err.contains(why), "{text}: {err}");
    }
}

#[test]
fn oauth_settings_are_checked_naming_the_key() {
    let error = |text: &str| parse(text).expect_err("refused").to_string();
    let e = error("[servers.a]\ncommand = \"x\"\nauth = \"oauth\"\n");
    assert!(
        e.contains("servers.a.auth") && e.contains("`url` server"),
        "{e}"
    );
    let e = error("[servers.a]\nurl = \"http://h/mcp\"\nauth = \"basic\"\n");
    assert!(
        e.contains("servers.a.auth") && e.contains("\"oauth\""),
        "{e}"
    );
    let e = error(
        "[servers.a]\nurl = \"http://h/mcp\"\n[servers.a.oauth]\nclient_id = \"c\"\nclient_secret_env = \"ROSTER_TEST_UNSET_SECRET\"\n",
    );
    assert!(
        e.contains("servers.a.oauth.client_secret_env") && e.contains("ROSTER_TEST_UNSET_SECRET"),
        "{e}"
    );
    let e = error(
        "[servers.a]\nurl = \"http://h/mcp\"\n[servers.a.oauth]\ngrant = \"client_credentials\"\n",
    );
    assert!(e.contains("servers.a.oauth.grant"), "{e}");
    let e = error(
        "[servers.a]\nurl = \"http://h/mcp\"\n[servers.a.oauth]\nclient_metadata_url = \"http://x/c.json\"\n",
    );
    assert!(e.contains("servers.a.oauth.client_metadata_url"), "{e}");
    let e = error("[servers.a]\nurl = \"http://h/mcp\"\n[servers.a.oauth]\nscope = [\"x\"]\n");
    assert!(e.contains("scope"), "{e}");
    let config =
        parse("[servers.a]\nurl = \"http://h/mcp\"\n[servers.a.oauth]\nscopes = [\"x\"]\n")
            .expect("parses");
    let oauth = config.servers["a"].oauth.clone().expect("oauth");
    assert_eq!(oauth.scopes, vec!["x".to_owned()]);
    assert_eq!(oauth.grant, super::OAuthGrant::AuthorizationCode);
    assert_eq!(
        parse("[servers.a]\nurl = \"http://h/mcp\"\n")
            .expect("parses")
            .servers["a"]
            .oauth,
        None
    );
}

#[test]
fn tools_mode_and_always_parse_per_gateway_and_client_and_bad_ones_are_named() {
    let config = parse(
        r#"
        [gateway]
        tools_mode = "search"
        always = ["fs__read_*"]

        [[clients]]
        name = "ide"
        token_env = "IDE_TOKEN"
        tools_mode = "all"

        [[clients]]
        name = "agent"
        token_env = "AGENT_TOKEN"
        always = ["git__*"]
        "#,
    )
    .expect("valid");
    assert_eq!(config.gateway.tools_mode, ToolsMode::Search);
    assert!(config.gateway.always.lists("fs__read_text_file"));
    assert!(!config.gateway.always.lists("fs__write_file"));
    assert_eq!(config.clients[0].tools_mode, Some(ToolsMode::All));
    assert_eq!(config.clients[0].always, None);
    assert_eq!(config.clients[1].tools_mode, None);
    assert!(
        config.clients[1]
            .always
            .as_ref()
            .is_some_and(|a| a.lists("git__git_log"))
    );
    // The default lists nothing in search mode and is "all".
    let plain = parse("").expect("valid");
    assert_eq!(plain.gateway.tools_mode, ToolsMode::All);
    assert!(!plain.gateway.always.lists("anything"));

    let err = parse("[gateway]\ntools_mode = \"lazy\"\n").expect_err("unknown mode");
    assert!(err.to_string().contains("tools_mode"), "{err}");
    let err = parse("[gateway]\nalways = [\"a[\"]\n").expect_err("bad glob");
    assert!(err.to_string().contains("gateway.always"), "{err}");
    let err = parse("[[clients]]\nname = \"x\"\ntoken_env = \"T\"\nalways = [\"[\"]\n")
        .expect_err("bad glob");
    assert!(err.to_string().contains("clients[0].always"), "{err}");
}

#[test]
fn store_url_parses_and_mistakes_name_the_key() {
    let config =
        parse("[store]\nurl = \"postgres://roster@db:5432/roster\"\npassword_env = \"PGPASS\"\n")
            .expect("a store");
    let store = config.store.expect("[store]");
    assert_eq!(store.url, "postgres://roster@db:5432/roster");
    assert_eq!(store.password_env.as_deref(), Some("PGPASS"));
    assert!(parse("").expect("empty").store.is_none());
    for (text, key) in [
        ("[store]\nurl = \"mysql://x@y/z\"\n", "store.url"),
        (
            "[store]\nurl = \"postgres://roster:secret@db/roster\"\n",
            "store.url",
        ),
        (
            "[store]\nurl = \"postgres://db/r?sslmode=bogus\"\n",
            "store.url",
        ),
        (
            "[store]\nurl = \"postgres://db/r\"\npassword_env = \"\"\n",
            "store.password_env",
        ),
    ] {
        let err = parse(text).expect_err(text);
        assert!(
            matches!(&err, ConfigError::Invalid { key: k, .. } if k == key),
            "{text}: {err}"
        );
    }
    let err = parse("[store]\npassword_env = \"X\"\n").expect_err("no url");
    assert!(err.to_string().contains("url"), "{err}");
}

#[test]
fn a_page_ends_at_its_count_or_before_the_item_that_passes_its_bytes() {
    let limits = PageLimits {
        size: 3,
        bytes: 100,
    };
    let lengths = [40, 40, 40, 10, 10, 10, 10, 500, 30];
    let end = |start| limits.end(start, lengths.len(), |i| lengths[i]);
    // 40 + 40 fit, a third 40 would pass 100.
    assert_eq!(end(0), 2);
    // 40 + 10 + 10 is three items: the count ends it.
    assert_eq!(end(2), 5);
    // An item longer than a page alone makes a page of its own; the one after it waits.
    assert_eq!(end(5), 7);
    assert_eq!(end(7), 8);
    assert_eq!(end(8), 9, "the list's end ends the last page");
    assert_eq!(end(9), 9, "a cursor at the end: an empty page");
    let one = PageLimits { size: 0, bytes: 1 };
    assert_eq!(
        one.end(0, lengths.len(), |i| lengths[i]),
        1,
        "a page holds one item at least"
    );
}
