//! The dashboard (`/ui`) in a real browser: headless Chromium from Debian's packages, driven
//! over WebDriver (chromedriver) by fantoccini, against a real `roster serve --http` fronting
//! the dynamic Python server, with the official Python SDK client calling through it. The link
//! comes from `roster ui`, as a person gets it. Screenshots of each page are written to
//! `target/dashboard-screenshots/`.
//!
//! And, without a browser, what keeps the page to its person: the credential, CSRF, CSP and the
//! Host/Origin checks.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// Chromium and chromedriver: `ROSTER_TEST_CHROMIUM` / `ROSTER_TEST_CHROMEDRIVER`, else Debian's
/// paths. `scripts/test` installs them; a test never skips for want of them.
fn browser_paths() -> (PathBuf, PathBuf) {
    let chromium = std::env::var_os("ROSTER_TEST_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    let driver = std::env::var_os("ROSTER_TEST_CHROMEDRIVER")
        .map_or_else(|| PathBuf::from("/usr/bin/chromedriver"), PathBuf::from);
    for path in [&chromium, &driver] {
        assert!(
            path.exists(),
            "{} is missing: the dashboard tests need Debian's chromium and chromium-driver \
             (scripts/test installs them: apt-get install chromium chromium-driver)",
            path.display()
        );
    }
    (chromium, driver)
}

/// A chromedriver on a free port, ended when dropped.
struct Driver {
    _child: common::KillOnDrop,
    url: String,
    chromium: PathBuf,
    profiles: tempfile::TempDir,
}

impl Driver {
    fn start() -> Self {
        let (chromium, driver) = browser_paths();
        let port = common::free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        common::wait_for_port(port);
        Self {
            _child: common::KillOnDrop(child),
            url: format!("http://127.0.0.1:{port}"),
            chromium,
            profiles: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// A headless browser whose `Accept-Language` is `language`.
    async fn browser(&self, language: &str) -> Client {
        let profile = tempfile::Builder::new()
            .prefix("profile")
            .tempdir_in(self.profiles.path())
            .expect("profile dir");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": self.chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                    format!("--lang={language}"),
                ],
                "prefs": {"intl.accept_languages": language},
            }),
        );
        let client = ClientBuilder::rustls()
            .expect("a WebDriver client")
            .capabilities(caps)
            .connect(&self.url)
            .await
            .expect("a Chromium session from chromedriver");
        // The profile lives as long as the driver's directory (Chromium may still write to it).
        std::mem::forget(profile);
        client
    }
}

/// A gateway fronting the dynamic server on an `initialize` session (its elicitation needs the
/// back-channel), with pins that a person approves, and the example skills.
fn start_gateway(env: &[(&str, &str)], gateway_extra: &str) -> common::Gateway {
    let skills = format!(
        "[skills]\npaths = [{:?}]",
        common::workspace_root().join("examples/skills")
    );
    let gateway = common::Gateway::start(
        |dir| {
            common::dynamic_config(
                dir,
                gateway_extra,
                "protocol = \"legacy\"\npin = \"approve\"",
                &skills,
            )
        },
        env,
    );
    gateway.wait_for_admin();
    gateway
}

/// `roster ui` against the gateway's state dir: the one-time link it prints.
fn ui_link(state: &Path) -> String {
    let link = common::cli(["ui"])
        .state_dir(state)
        .stdout()
        .trim()
        .to_owned();
    assert!(
        link.starts_with("http://127.0.0.1:") && link.contains("/ui/login?token="),
        "{link}"
    );
    link
}

fn roster_json(state: &Path, args: &[&str]) -> Value {
    let out = common::cli(args).state_dir(state).stdout();
    serde_json::from_str(&out).expect("JSON output")
}

/// Reloads `path` until `css` matches an element whose text satisfies `check`; its text.
async fn reload_until(
    browser: &Client,
    base: &str,
    path: &str,
    css: &str,
    check: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        browser
            .goto(&format!("{base}{path}"))
            .await
            .expect("navigate");
        if let Ok(element) = browser.find(Locator::Css(css)).await
            && let Ok(text) = element.text().await
            && check(&text)
        {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{path}: {css} never showed what was expected; the page: {}",
            browser.source().await.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Clicks the first element `css` matches on the current page.
async fn click(browser: &Client, css: &str) {
    let find = async || on_page(browser, css).await;
    fresh(css, "clicking", find, async |element: Element| {
        element.click().await.map(drop)
    })
    .await
}

/// The text of `css` once it is on the page (after a click, the next page may still be loading).
/// The page re-renders as it polls the gateway: an element found just before a re-render is
/// gone when its text is read, so it is looked up again.
async fn wait_text(browser: &Client, css: &str) -> String {
    let find = async || match browser
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css(css))
        .await
    {
        Ok(element) => element,
        Err(e) => panic!(
            "{css} never appeared ({e}); at {:?}: {}",
            browser.current_url().await.map(|u| u.to_string()),
            browser.source().await.unwrap_or_default()
        ),
    };
    fresh(css, "the text of", find, async |element: Element| {
        element.text().await
    })
    .await
}

async fn text_of(browser: &Client, css: &str) -> String {
    let find = async || on_page(browser, css).await;
    fresh(css, "the text of", find, async |element: Element| {
        element.text().await
    })
    .await
}

/// The first element `css` matches on the current page.
async fn on_page(browser: &Client, css: &str) -> Element {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
}

/// `act` on the element `find` gives, found again when a re-render replaced it in between.
async fn fresh<T>(
    css: &str,
    what: &str,
    find: impl AsyncFn() -> Element,
    act: impl AsyncFn(Element) -> Result<T, fantoccini::error::CmdError>,
) -> T {
    for _ in 0..20 {
        match act(find().await).await {
            Ok(value) => return value,
            Err(e) if is_stale(&e) => continue,
            Err(e) => panic!("{what} {css}: {e}"),
        }
    }
    panic!("{css} was replaced every time ({what})");
}

/// The element was replaced by a re-render between finding it and using it.
fn is_stale(error: &fantoccini::error::CmdError) -> bool {
    matches!(
        error,
        fantoccini::error::CmdError::Standard(e)
            if e.error == fantoccini::error::ErrorStatus::StaleElementReference
    )
}

async fn screenshot(browser: &Client, name: &str) {
    let dir = common::workspace_root().join("target/dashboard-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    let png = browser.screenshot().await.expect("a screenshot");
    std::fs::write(dir.join(format!("{name}.png")), png).expect("write screenshot");
}

fn base_of(link: &str) -> String {
    link.split("/ui/").next().expect("a base").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_runs_the_gateway_from_the_browser() {
    let gateway = start_gateway(&[], "");
    let state = gateway.state();
    let driver = Driver::start();
    let browser = driver.browser("en-US").await;

    // The link logs in once and leaves the address bar for the servers page.
    let link = ui_link(&state);
    let base = base_of(&link);
    browser.goto(&link).await.expect("open the link");
    let here = browser.current_url().await.expect("url");
    assert_eq!(here.path(), "/ui/servers", "{here}");
    assert!(
        here.query().is_none(),
        "the token left the address bar: {here}"
    );
    let row = reload_until(
        &browser,
        &base,
        "/ui/servers",
        "tr[data-server='dynamic']",
        |t| t.contains("connected") && t.contains("stdio"),
    )
    .await;
    assert!(row.contains("initialize (2025-11-25)"), "{row}");
    assert!(text_of(&browser, "html").await.contains("Servers"));
    screenshot(&browser, "servers").await;

    // The same link does not log in a second browser.
    let other = driver.browser("en-US").await;
    other.goto(&link).await.expect("open the spent link");
    assert!(
        text_of(&other, "main")
            .await
            .contains("already used or has expired"),
        "a spent link is refused"
    );
    other.close().await.expect("close");

    // Tools: the live union, searchable, filterable by server.
    browser
        .goto(&format!("{base}/ui/tools?q=listing_count&server=dynamic"))
        .await
        .expect("tools");
    let count = text_of(&browser, "#tool-count").await;
    assert!(count.starts_with("1 of "), "{count}");
    assert!(
        text_of(&browser, "tr[data-tool='dynamic__listing_count']")
            .await
            .contains("pinned at first use")
    );

    // A redefined tool is withheld (pin = "approve"); the person approves it from the page.
    let report = common::call_tools(
        &["--url", &gateway.url],
        &json!([["dynamic__change_echo", {"description": "Echo, redefined."}]]),
    );
    assert!(
        report["results"][0]["content"][0]["text"].is_string(),
        "{report}"
    );
    reload_until(
        &browser,
        &base,
        "/ui/tools",
        "#drift tr[data-tool='dynamic__echo']",
        |t| t.contains("withheld"),
    )
    .await;
    assert!(
        browser
            .find(Locator::Css("#tools tr[data-tool='dynamic__echo']"))
            .await
            .is_err(),
        "a withheld tool is not in the live union"
    );
    screenshot(&browser, "tools").await;
    browser
        .goto(&format!("{base}/ui/tool?name=dynamic__echo"))
        .await
        .expect("tool page");
    let diff = text_of(&browser, "pre.diff").await;
    assert!(diff.contains("Echo, redefined."), "the drift diff: {diff}");
    click(&browser, ".review button[data-action='approve']").await;
    let flash = wait_text(&browser, "#flash").await;
    assert!(flash.starts_with("Approved dynamic__echo"), "{flash}");
    assert_eq!(
        roster_json(&state, &["tools", "drift", "--json"]),
        json!([]),
        "the page's approval is the store's"
    );
    reload_until(
        &browser,
        &base,
        "/ui/tools",
        "#tools tr[data-tool='dynamic__echo']",
        |t| t.contains("Echo, redefined.") && t.contains("approved by a person"),
    )
    .await;

    // Changes: the newest first, naming what changed.
    browser
        .goto(&format!("{base}/ui/changes"))
        .await
        .expect("changes");
    let newest = text_of(&browser, "#changes > li").await;
    assert!(
        newest.contains("dynamic") && newest.contains("dynamic__echo"),
        "{newest}"
    );
    screenshot(&browser, "changes").await;

    // An unread notification, acknowledged from the page.
    common::call_tools(
        &["--url", &gateway.url],
        &json!([["dynamic__note", {"text": "disk almost full"}]]),
    );
    reload_until(&browser, &base, "/ui/inbox", "#unread-count", |t| t != "0").await;
    let before: u64 = text_of(&browser, "#unread-count")
        .await
        .parse()
        .expect("a count");
    assert!(before >= 1);
    click(&browser, "button[data-action='ack']").await;
    // What the page showed is read now, the note among it; a notification that landed after
    // the page was drawn stays unread (the button marks what the person saw).
    let flash = wait_text(&browser, "#flash").await;
    let marked: u64 = flash
        .strip_prefix("Marked ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the flash says how many: {flash}"));
    assert!((1..=before).contains(&marked), "{marked} of {before}");
    let note_state = browser
        .execute(
            "return [...document.querySelectorAll('#entries tr')]\
             .find(r => r.textContent.includes('disk almost full'))?.className ?? null",
            vec![],
        )
        .await
        .expect("read the note's row");
    assert_eq!(note_state, json!("read"));
    let unread_rows = browser
        .execute(
            "return document.querySelectorAll('#entries tr.unread').length",
            vec![],
        )
        .await
        .expect("count the unread rows");
    let unread_rows = unread_rows.as_u64().expect("a number of rows");
    let count = |text: String| text.parse::<u64>().expect("a count");
    let unread = count(text_of(&browser, "#unread-count").await);
    let nav = count(text_of(&browser, "#nav-unread").await);
    // The page reads the count, then the rows, then the badge; nothing marks an entry read
    // meanwhile, so each read sees at least what the one before it saw (all equal, and 0,
    // unless something landed after the ack).
    assert!(
        unread <= unread_rows && unread_rows <= nav,
        "count {unread}, unread rows {unread_rows}, badge {nav}"
    );

    // A pending confirmation of the real server, answered yes from the page.
    let client = common::spawn_call_tools(
        &gateway.url,
        &json!([["dynamic__confirm_delete", {"path": "/tmp/x"}]]),
    );
    let pending = reload_until(
        &browser,
        &base,
        "/ui/inbox",
        "#pending li[data-confirm]",
        |t| t.contains("Delete /tmp/x?"),
    )
    .await;
    assert!(pending.contains("elicitation/create"), "{pending}");
    screenshot(&browser, "inbox").await;
    click(&browser, "#pending li[data-confirm] button.ok").await;
    assert!(
        wait_text(&browser, "#flash")
            .await
            .ends_with(": confirmed."),
        "the page says what it did"
    );
    let output = client.wait_with_output().expect("the Python client ends");
    let report = common::client_report("call_tools.py", &output);
    assert_eq!(
        report["results"][0]["content"][0]["text"], "accept confirm=True",
        "the server got the person's yes: {report}"
    );

    // Clear, with the same confirmation the CLI's words give.
    click(&browser, "#clear").await;
    let question = wait_text(&browser, "#clear-question").await;
    assert!(question.starts_with("Clear the inbox?"), "{question}");
    click(&browser, "button[data-action='clear']").await;
    assert!(wait_text(&browser, "#flash").await.starts_with("Cleared "));
    assert!(
        browser.find(Locator::Css("#entries")).await.is_err(),
        "the inbox is empty"
    );
    let pending = common::cli(["inbox", "pending", "--json"])
        .state_dir(&state)
        .output();
    assert!(
        pending.stdout.is_empty(),
        "nothing waits after the clear: {pending:?}"
    );

    // Skills: availability against the live tools and the last refresh's summary.
    browser
        .goto(&format!("{base}/ui/skills"))
        .await
        .expect("skills");
    let summary = text_of(&browser, "#refresh-summary").await;
    assert!(summary.starts_with("refreshed: "), "{summary}");
    assert!(
        text_of(&browser, "tr[data-skill='pro/release-notes']")
            .await
            .contains("pro")
    );
    screenshot(&browser, "skills").await;

    // Restart one server from the servers page: its restart count moves.
    browser
        .goto(&format!("{base}/ui/servers"))
        .await
        .expect("servers");
    click(
        &browser,
        "tr[data-server='dynamic'] button[data-action='restart']",
    )
    .await;
    assert!(
        wait_text(&browser, "#flash")
            .await
            .starts_with("Restarting dynamic")
    );
    reload_until(
        &browser,
        &base,
        "/ui/servers",
        "tr[data-server='dynamic']",
        |t| t.contains("connected"),
    )
    .await;
    browser.close().await.expect("close the browser");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browsers_language_chooses_the_labels() {
    let gateway = start_gateway(&[], "");
    let driver = Driver::start();
    for (language, servers, tools, inbox) in [
        ("pt-BR", "Servidores", "Ferramentas", "Caixa de entrada"),
        ("es", "Servidores", "Herramientas", "Bandeja de entrada"),
        ("de-DE", "Servers", "Tools", "Inbox"),
    ] {
        let browser = driver.browser(language).await;
        browser
            .goto(&ui_link(&gateway.state()))
            .await
            .expect("open the link");
        let nav = text_of(&browser, "header nav").await;
        assert!(
            nav.contains(servers) && nav.contains(tools) && nav.contains(inbox),
            "{language}: {nav}"
        );
        let lang = browser
            .find(Locator::Css("html"))
            .await
            .expect("html")
            .attr("lang")
            .await
            .expect("lang");
        let expected = if language == "de-DE" { "en" } else { language };
        assert_eq!(lang.as_deref(), Some(expected));
        if language == "pt-BR" {
            let heading = text_of(&browser, "#servers thead").await;
            assert!(heading.contains("Última listagem"), "{heading}");
            screenshot(&browser, "servers-pt-BR").await;
        }
        browser.close().await.expect("close");
    }
}

/// Plain HTTP against `/ui` of the `--http` listener, with the admin token configured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_admin_credential_opens_the_dashboard() {
    const TOKEN: &str = "s3cret-admin-token";
    let ui_port = common::free_port();
    let gateway = start_gateway(
        &[("ROSTER_TEST_UI_ADMIN", TOKEN)],
        &format!("admin_token_env = \"ROSTER_TEST_UI_ADMIN\"\nui_listen = \"127.0.0.1:{ui_port}\""),
    );
    let base = gateway.url.trim_end_matches("/mcp").to_owned();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let location = |r: &reqwest::Response| {
        r.headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };

    let anonymous = http
        .get(format!("{base}/ui/servers"))
        .send()
        .await
        .expect("GET");
    assert_eq!(anonymous.status(), 303);
    assert_eq!(location(&anonymous), "/ui/login");
    // The admin token is never taken from a query string.
    let queried = http
        .get(format!("{base}/ui/login?token={TOKEN}"))
        .send()
        .await
        .expect("GET");
    assert_eq!(queried.status(), 401);
    assert!(queried.headers().get("set-cookie").is_none());
    let wrong = http
        .post(format!("{base}/ui/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", "guess"))
        .send()
        .await
        .expect("POST");
    assert_eq!(wrong.status(), 401);
    let right = http
        .post(format!("{base}/ui/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", TOKEN))
        .send()
        .await
        .expect("POST");
    assert_eq!(right.status(), 303);
    let cookie = right
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a session cookie")
        .to_owned();
    assert!(
        cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && cookie.contains("Path=/ui"),
        "{cookie}"
    );
    let session = cookie.split(';').next().expect("name=value").to_owned();

    let page = http
        .get(format!("{base}/ui/servers"))
        .header("cookie", &session)
        .send()
        .await
        .expect("GET");
    assert_eq!(page.status(), 200);
    let csp = page
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'")
            && csp.contains("script-src 'self'")
            && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    let body = page.text().await.expect("body");
    assert!(
        !body.contains(TOKEN),
        "the page never carries the admin token"
    );
    assert!(!body.contains("<script>"), "no inline script");
    let csrf = body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF token in the page's forms")
        .to_owned();

    let action = format!("{base}/ui/action/refresh-all");
    let forged = http
        .post(&action)
        .header("cookie", &session)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={}", "not-it"))
        .send()
        .await
        .expect("POST");
    assert_eq!(
        forged.status(),
        403,
        "an action without the page's CSRF token"
    );
    let missing = http
        .post(&action)
        .header("cookie", &session)
        .send()
        .await
        .expect("POST");
    assert!(missing.status().is_client_error(), "{}", missing.status());
    let cross = http
        .post(&action)
        .header("cookie", &session)
        .header("origin", "http://evil.example")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .expect("POST");
    assert_eq!(cross.status(), 403, "another origin's form");
    let rebound = http
        .get(format!("{base}/ui/servers"))
        .header("cookie", &session)
        .header("host", "evil.example")
        .send()
        .await
        .expect("GET");
    assert_eq!(rebound.status(), 403, "a DNS-rebinding Host");
    let done = http
        .post(&action)
        .header("cookie", &session)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .expect("POST");
    assert_eq!(done.status(), 303);
    assert_eq!(location(&done), "/ui/servers");
    let after = http
        .get(format!("{base}/ui/servers"))
        .header("cookie", &session)
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("body");
    assert!(after.contains("Marked 1 server(s) stale"), "{after}");

    // `[gateway] ui_listen`: the dashboard alone, on an address of its own, same sessions.
    common::wait_for_port(ui_port);
    let own = format!("http://127.0.0.1:{ui_port}");
    let login = http
        .get(format!("{own}/ui/login"))
        .send()
        .await
        .expect("GET");
    assert_eq!(login.status(), 200);
    assert!(login.text().await.expect("body").contains("name=\"token\""));
    let mcp = http.post(format!("{own}/mcp")).send().await.expect("POST");
    assert_eq!(mcp.status(), 404, "ui_listen serves no MCP");
    let there = http
        .get(format!("{own}/ui/servers"))
        .header("cookie", &session)
        .send()
        .await
        .expect("GET");
    assert_eq!(there.status(), 200);
}
