//! roster as an OAuth 2.1 resource server (`[auth]`) and per-client permissions, seen from
//! outside: a real `roster serve --http`, the official Python SDK client, and a small
//! authorization server (`tests/python/idp.py`) that publishes its metadata and JWKS over HTTP
//! on 127.0.0.1 and signs tokens with keys it generated (RS256 and ES256).

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The test's authorization server; killed when dropped.
struct Idp {
    _child: common::KillOnDrop,
    issuer: String,
    runtime: tokio::runtime::Runtime,
}

impl Idp {
    fn start() -> Self {
        let mut child = std::process::Command::new(common::python())
            .arg(common::workspace_root().join("tests/python/idp.py"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("start idp.py");
        let stdout = child.stdout.take().expect("stdout piped");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("idp.py prints its port");
        let port = serde_json::from_str::<Value>(&line).expect("a JSON line")["port"]
            .as_u64()
            .expect("a port");
        Self {
            _child: common::KillOnDrop(child),
            issuer: format!("http://127.0.0.1:{port}"),
            runtime: tokio::runtime::Runtime::new().expect("runtime"),
        }
    }

    fn post(&self, path: &str, body: Value) -> String {
        self.runtime.block_on(async {
            reqwest::Client::new()
                .post(format!("{}{path}", self.issuer))
                .json(&body)
                .send()
                .await
                .expect("POST to idp.py")
                .text()
                .await
                .expect("a text answer")
        })
    }

    /// A token `idp.py` signs (see its `/mint`).
    fn mint(&self, request: Value) -> String {
        self.post("/mint", request)
    }
}

/// `roster serve --http` on a port chosen here, so `[auth] audience` can name roster's own URL.
fn serve_on_own_port(
    config: impl FnOnce(&Path, &str) -> String,
    env: &[(&str, &str)],
) -> common::Gateway {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let path = dir.path().join("roster.toml");
    std::fs::write(&path, config(dir.path(), &url)).expect("write config");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_roster"));
    command
        .arg("--config")
        .arg(&path)
        .args(["serve", "--http", &format!("127.0.0.1:{port}")])
        .env_remove("ROSTER_STATE_DIR")
        .envs(env.iter().copied());
    let (child, url) = common::serve_http(command);
    common::Gateway {
        child: common::KillOnDrop(child),
        url,
        dir,
    }
}

fn dynamic_server() -> String {
    format!(
        "[servers.dynamic]\ncommand = {}\nargs = [{}]\n",
        common::toml_str(&common::python().to_string_lossy()),
        common::toml_str(&common::python_fixture("dynamic.py").to_string_lossy()),
    )
}

/// What `identity_view.py` reports for `token` at `gateway` (see the script).
fn view(gateway: &common::Gateway, token: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--url", gateway.url.as_str(), "--token", token];
    args.extend(extra);
    common::python_client_report("identity_view.py", &args)
}

/// A POST of `initialize` with `token`: the status and the `WWW-Authenticate` header.
fn initialize(gateway: &common::Gateway, token: Option<&str>) -> (u16, String) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let mut request = reqwest::Client::new()
            .post(&gateway.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("POST /mcp");
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().expect("ASCII").to_owned())
            .unwrap_or_default();
        (response.status().as_u16(), challenge)
    })
}

fn get_json(url: &str) -> (u16, Value) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let response = reqwest::get(url).await.expect("GET");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    })
}

#[test]
fn jwt_access_tokens_from_the_issuer_are_taken_and_the_rest_refused_as_the_spec_says() {
    let idp = Idp::start();
    let issuer = idp.issuer.clone();
    let gateway = serve_on_own_port(
        |dir, url| {
            format!(
                "[gateway]\nstate_dir = {state:?}\n\n{server}\n\
                 [auth]\nissuer = {issuer:?}\naudience = {url:?}\nrequired_scopes = [\"mcp\"]\n\n\
                 [[auth.rules]]\nscope = \"mcp:echo-only\"\nname = \"echo-{{sub}}\"\n\
                 tools.allow = [\"dynamic__echo\"]\n\n\
                 [[clients]]\nname = \"ci\"\ntoken_env = \"ROSTER_TEST_CI_TOKEN\"\n",
                state = dir.join("state"),
                server = dynamic_server(),
            )
        },
        &[("ROSTER_TEST_CI_TOKEN", "static-secret")],
    );
    let base = gateway.url.trim_end_matches("/mcp").to_owned();
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp");

    // The protected resource metadata, at both well-known forms.
    for url in [
        &metadata_url,
        &format!("{base}/.well-known/oauth-protected-resource"),
    ] {
        let (status, doc) = get_json(url);
        assert_eq!(status, 200, "{url}");
        assert_eq!(doc["resource"], json!(gateway.url), "{doc}");
        assert_eq!(doc["authorization_servers"], json!([issuer]), "{doc}");
        assert_eq!(
            doc["scopes_supported"],
            json!(["mcp", "mcp:echo-only"]),
            "{doc}"
        );
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]), "{doc}");
    }

    // No token: 401 naming the metadata and the scope needed.
    let (status, challenge) = initialize(&gateway, None);
    assert_eq!(status, 401);
    assert_eq!(
        challenge,
        format!("Bearer scope=\"mcp\", resource_metadata=\"{metadata_url}\"")
    );

    let audience = gateway.url.clone();
    let valid =
        |kid: &str| idp.mint(json!({"kid": kid, "claims": {"aud": audience, "scope": "mcp"}}));

    // Valid RS256 and ES256 tokens: the Python SDK client lists and calls.
    for kid in ["rsa-1", "ec-1"] {
        let token = valid(kid);
        let seen = view(
            &gateway,
            &token,
            &["--calls", r#"[["dynamic__echo", {"text": "hi"}]]"#],
        );
        assert!(
            seen["tools"].as_array().expect("tools").len() > 2,
            "{kid}: {seen}"
        );
        assert_eq!(
            seen["calls"][0]["content"][0]["text"], "dynamic: hi",
            "{kid}: {seen}"
        );
    }

    // Tokens that are not valid: 401 invalid_token with the reason; the SDK client is refused.
    let refused: [(&str, String, &str); 5] = [
        (
            "expired",
            idp.mint(json!({"exp_in": -600, "claims": {"aud": audience, "scope": "mcp"}})),
            "expired",
        ),
        (
            "wrong audience",
            idp.mint(json!({"claims": {"aud": "http://127.0.0.1:1/mcp", "scope": "mcp"}})),
            "audience",
        ),
        (
            "wrong issuer",
            idp.mint(
                json!({"claims": {"aud": audience, "scope": "mcp", "iss": "http://127.0.0.1:1"}}),
            ),
            "issuer",
        ),
        (
            "forged signature",
            idp.mint(json!({"forge": true, "claims": {"aud": audience, "scope": "mcp"}})),
            "signature",
        ),
        (
            "not yet valid",
            idp.mint(json!({"claims": {"aud": audience, "scope": "mcp", "nbf": 4_000_000_000u64}})),
            "not valid yet",
        ),
    ];
    for (case, token, reason) in &refused {
        let (status, challenge) = initialize(&gateway, Some(token));
        assert_eq!(status, 401, "{case}");
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\", error_description=\"")
                && challenge.contains(reason)
                && challenge.ends_with(&format!(
                    "scope=\"mcp\", resource_metadata=\"{metadata_url}\""
                )),
            "{case}: {challenge}"
        );
        let seen = view(&gateway, token, &[]);
        assert!(
            common::str_contains(&seen["refused"], "401"),
            "{case}: {seen}"
        );
    }

    // A valid token without the required scope: 403 insufficient_scope.
    let unscoped = idp.mint(json!({"claims": {"aud": audience, "scope": "other"}}));
    let (status, challenge) = initialize(&gateway, Some(&unscoped));
    assert_eq!(status, 403);
    assert_eq!(
        challenge,
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"mcp\", resource_metadata=\"{metadata_url}\""
        )
    );
    let seen = view(&gateway, &unscoped, &[]);
    assert!(common::str_contains(&seen["refused"], "403"), "{seen}");

    // An [[auth.rules]] entry: a token with `mcp:echo-only` sees and calls only dynamic__echo.
    let echo_only = idp.mint(json!({"claims": {"aud": audience, "scope": "mcp mcp:echo-only"}}));
    let seen = view(
        &gateway,
        &echo_only,
        &[
            "--calls",
            r#"[["dynamic__echo", {"text": "hi"}], ["dynamic__listing_count", {}], ["dynamic__no_such_tool", {}]]"#,
        ],
    );
    assert_eq!(seen["tools"], json!(["dynamic__echo"]), "{seen}");
    assert_eq!(seen["tools_cache_scope"], "private", "{seen}");
    assert_eq!(
        seen["calls"][0]["content"][0]["text"], "dynamic: hi",
        "{seen}"
    );
    assert_eq!(
        seen["calls"][1]["error"]["message"]
            .as_str()
            .map(|m| m.replace("dynamic__listing_count", "NAME")),
        seen["calls"][2]["error"]["message"]
            .as_str()
            .map(|m| m.replace("dynamic__no_such_tool", "NAME")),
        "a denied tool answers as an unknown one: {seen}"
    );

    // The static [[clients]] token keeps working beside [auth].
    let seen = view(&gateway, "static-secret", &[]);
    assert!(seen["tools"].as_array().expect("tools").len() > 2, "{seen}");

    // The issuer rotates its key: a token under the new key id is taken once roster refetched
    // the JWKS (an unknown key id refetches, at most once per 5 s).
    let rotated = idp.post("/rotate", json!({}));
    assert_eq!(rotated, "rsa-2");
    let token = valid("rsa-2");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, challenge) = initialize(&gateway, Some(&token));
        if status == 200 {
            break;
        }
        assert_eq!(status, 401, "{challenge}");
        assert!(
            Instant::now() < deadline,
            "the rotated key was never taken: {challenge}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let seen = view(&gateway, &token, &[]);
    assert!(seen["tools"].as_array().expect("tools").len() > 2, "{seen}");
    // The key it replaced is gone from the JWKS, and so from what roster takes.
    let (status, _) = initialize(&gateway, Some(&valid("rsa-1")));
    assert_eq!(status, 401, "a token of the retired key is refused");
}

/// `message` with `name` replaced, to compare a refusal with a not-found answer.
fn error_text(answer: &Value, name: &str) -> String {
    answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("an error: {answer}"))
        .replace(name, "NAME")
}

#[test]
fn a_client_limited_to_read_tools_neither_sees_nor_calls_the_others() {
    let files = tempfile::tempdir().expect("temp dir");
    std::fs::write(files.path().join("notes.txt"), "kept").expect("write notes");
    let files_dir = files.path().to_string_lossy().into_owned();
    let gateway = common::Gateway::start(
        |dir| {
            format!(
                "[gateway]\nstartup_wait = \"30s\"\nturn_wait = \"30s\"\nstate_dir = {state:?}\n\n\
                 [servers.fs]\ncommand = {node}\nargs = [{fs}, {files}]\n\n\
                 [servers.fixture]\ncommand = {py}\nargs = [{fixture}]\n\n\
                 [[clients]]\nname = \"reader\"\ntoken_env = \"ROSTER_TEST_READER\"\n\
                 tools.allow = [\"fs__read_*\"]\n\
                 prompts.allow = [\"fixture__test_simple_prompt\"]\n\
                 resources.deny = [\"test://static-binary\", \"test://template/*\"]\n\n\
                 [[clients]]\nname = \"no-refresh\"\ntoken_env = \"ROSTER_TEST_NO_REFRESH\"\n\
                 tools.deny = [\"refresh_tools\"]\n\n\
                 [[clients]]\nname = \"full\"\ntoken_env = \"ROSTER_TEST_FULL\"\n",
                state = dir.join("state"),
                node = common::toml_str(&common::node22().to_string_lossy()),
                fs = common::toml_str(
                    &common::npm_bin("@modelcontextprotocol/server-filesystem").to_string_lossy()
                ),
                files = common::toml_str(&files_dir),
                py = common::toml_str(&common::python().to_string_lossy()),
                fixture = common::toml_str(
                    &common::workspace_root()
                        .join("tests/python/conformance_server.py")
                        .to_string_lossy()
                ),
            )
        },
        &[
            ("ROSTER_TEST_READER", "reader-token"),
            ("ROSTER_TEST_NO_REFRESH", "no-refresh-token"),
            ("ROSTER_TEST_FULL", "full-token"),
        ],
    );
    let written = files.path().join("written.txt");
    let write = json!({"path": written, "content": "x"});
    let notes = json!({"path": files.path().join("notes.txt")});

    let reader = view(
        &gateway,
        "reader-token",
        &[
            "--calls",
            &json!([
                ["fs__write_file", write],
                ["write_file", write],
                ["refresh_tools", {}],
                ["fs__no_such_tool", {}],
                ["fs__read_text_file", notes],
            ])
            .to_string(),
            "--prompts",
            r#"["fixture__test_simple_prompt", "fixture__test_prompt_with_arguments", "fixture__no_such_prompt"]"#,
            "--reads",
            r#"["test://static-text", "test://static-binary", "test://template/42/data", "test://nowhere"]"#,
        ],
    );
    let tools: Vec<&str> = common::strings(&reader["tools"]);
    assert!(tools.contains(&"fs__read_text_file"), "{tools:?}");
    assert!(
        tools.iter().all(|t| t.starts_with("fs__read_")),
        "only fs__read_* is listed (no fs__write_file, no native tool): {tools:?}"
    );
    assert_eq!(reader["tools_cache_scope"], "private", "{reader}");
    let calls = &reader["calls"];
    let unknown = error_text(&calls[3], "fs__no_such_tool");
    assert!(unknown.contains("unknown tool"), "{unknown}");
    // A denied tool is refused as an unknown one is: by its exposed name, by the server's
    // own name, and a native tool.
    for (i, denied) in ["fs__write_file", "write_file", "refresh_tools"]
        .into_iter()
        .enumerate()
    {
        assert_eq!(error_text(&calls[i], denied), unknown, "{denied}: {calls}");
    }
    assert_eq!(calls[4]["content"][0]["text"], "kept", "{calls}");
    assert!(
        !written.exists(),
        "the denied write never reached the server"
    );

    assert_eq!(
        reader["prompts"],
        json!(["fixture__test_simple_prompt"]),
        "{reader}"
    );
    let prompts = &reader["prompt_gets"];
    assert!(prompts[0]["messages"].is_array(), "{prompts}");
    assert_eq!(
        error_text(&prompts[1], "fixture__test_prompt_with_arguments"),
        error_text(&prompts[2], "fixture__no_such_prompt"),
        "{prompts}"
    );
    let resources = reader["resources"].as_array().expect("resources");
    assert!(resources.contains(&json!("test://static-text")), "{reader}");
    assert!(
        !resources.contains(&json!("test://static-binary")),
        "{reader}"
    );
    assert_eq!(reader["templates"], json!([]), "{reader}");
    let reads = &reader["reads"];
    assert_eq!(
        reads[0]["contents"][0]["uri"], "test://static-text",
        "{reads}"
    );
    let not_found = error_text(&reads[3], "test://nowhere");
    for (i, denied) in [(1, "test://static-binary"), (2, "test://template/42/data")] {
        assert_eq!(error_text(&reads[i], denied), not_found, "{reads}");
    }

    // A client denied only a native tool: everything else, but never refresh_tools.
    let no_refresh = view(
        &gateway,
        "no-refresh-token",
        &["--calls", r#"[["refresh_tools", {}], ["list_skills", {}]]"#],
    );
    let tools = no_refresh["tools"].as_array().expect("tools");
    assert!(tools.contains(&json!("fs__write_file")), "{no_refresh}");
    assert!(tools.contains(&json!("list_skills")), "{no_refresh}");
    assert!(!tools.contains(&json!("refresh_tools")), "{no_refresh}");
    assert_eq!(
        error_text(&no_refresh["calls"][0], "refresh_tools"),
        unknown,
        "{no_refresh}"
    );
    assert!(
        no_refresh["calls"][1]["structuredContent"].is_object(),
        "{no_refresh}"
    );

    // A client without permissions sees and calls everything.
    let full = view(
        &gateway,
        "full-token",
        &["--calls", &json!([["fs__write_file", write]]).to_string()],
    );
    let tools = full["tools"].as_array().expect("tools");
    assert!(
        tools.contains(&json!("fs__write_file")) && tools.contains(&json!("refresh_tools")),
        "{full}"
    );
    assert_eq!(
        full["templates"],
        json!(["test://template/{id}/data"]),
        "{full}"
    );
    assert!(
        written.exists(),
        "the full client's write reached the server: {full}"
    );
}

#[test]
fn a_reload_puts_new_permissions_and_an_auth_table_in_force() {
    let idp = Idp::start();
    let write_config = |dir: &Path, extra: &str| {
        format!(
            "[gateway]\nstate_dir = {state:?}\n\n{server}\n\
             [[clients]]\nname = \"one\"\ntoken_env = \"ROSTER_TEST_ONE\"\n{extra}\n",
            state = dir.join("state"),
            server = dynamic_server(),
        )
    };
    let gateway = common::Gateway::start(
        |dir| write_config(dir, ""),
        &[("ROSTER_TEST_ONE", "one-secret")],
    );
    let path = gateway.dir.path().join("roster.toml");
    let reload = |extra: &str| {
        std::fs::write(&path, write_config(gateway.dir.path(), extra)).expect("write");
        common::cli(["reload"]).config(&path).stdout()
    };
    let calls = ["--calls", r#"[["dynamic__echo", {"text": "hi"}]]"#];
    let before = view(&gateway, "one-secret", &calls);
    assert!(
        before["tools"]
            .as_array()
            .expect("tools")
            .contains(&json!("dynamic__echo"))
    );
    let base = gateway.url.trim_end_matches("/mcp").to_owned();
    let metadata = format!("{base}/.well-known/oauth-protected-resource");
    assert_eq!(get_json(&metadata).0, 404, "no [auth] yet");

    let said = reload(&format!(
        "tools.deny = [\"dynamic__echo\"]\n\n[auth]\nissuer = {:?}\naudience = {:?}\n",
        idp.issuer, gateway.url
    ));
    assert!(said.contains("in force now: clients, auth"), "{said}");
    let after = view(&gateway, "one-secret", &calls);
    assert!(
        !after["tools"]
            .as_array()
            .expect("tools")
            .contains(&json!("dynamic__echo")),
        "{after}"
    );
    assert!(
        error_text(&after["calls"][0], "dynamic__echo").contains("unknown tool"),
        "{after}"
    );
    let (status, doc) = get_json(&metadata);
    assert_eq!(
        (status, &doc["authorization_servers"]),
        (200, &json!([idp.issuer]))
    );
    let token = idp.mint(json!({"claims": {"aud": gateway.url}}));
    let seen = view(&gateway, &token, &calls);
    assert_eq!(
        seen["calls"][0]["content"][0]["text"], "dynamic: hi",
        "{seen}"
    );
}
