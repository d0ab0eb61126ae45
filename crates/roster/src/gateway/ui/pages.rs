//! The dashboard's pages as HTML: each page function gives its title and its `<main>`;
//! [`layout`] puts the header, navigation and the last action's message around it. Every text
//! from outside (server names, tool definitions, inbox params) is escaped.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use rust_i18n::t;
use serde_json::Value;

use super::{Flash, Gateway};
use crate::store::{Decision, PinBook};

/// What a page is rendered for.
pub(super) struct View<'a> {
    pub(super) lang: &'static str,
    pub(super) csrf: &'a str,
    pub(super) gateway: &'a Gateway,
    pub(super) query: &'a HashMap<String, String>,
}

impl View<'_> {
    fn t(&self, key: &str) -> String {
        t!(key, locale = self.lang).into_owned()
    }

    fn q(&self, name: &str) -> &str {
        self.query.get(name).map(String::as_str).unwrap_or_default()
    }
}

/// `text` safe inside HTML text and attribute values.
pub(super) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}

/// `text` as one query-string value.
pub(crate) fn query_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}

/// `12s`, `3m`, `2h`, `4d`: a duration at a glance, the same in every language.
fn short(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

fn ago(lang: &str, ms: u64) -> String {
    t!("ui.time.ago", locale = lang, d = short(ms)).into_owned()
}

fn within(lang: &str, ms: u64) -> String {
    t!("ui.time.in", locale = lang, d = short(ms)).into_owned()
}

/// A time of day in UTC from milliseconds since the epoch.
fn stamp(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// A one-button form posting `action` with `fields` and the session's CSRF token.
fn button(
    view: &View<'_>,
    action: &str,
    fields: &[(&str, &str)],
    label: &str,
    class: &str,
) -> String {
    let mut form = format!(
        "<form method=\"post\" action=\"/ui/action/{action}\" class=\"inline\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(view.csrf)
    );
    for (name, value) in fields {
        let _ = write!(
            form,
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            esc(name),
            esc(value)
        );
    }
    let _ = write!(
        form,
        "<button type=\"submit\" class=\"{class}\" data-action=\"{action}\">{}</button></form>",
        esc(label)
    );
    form
}

/// The whole page around `main`.
pub(super) fn layout(
    view: &View<'_>,
    path: &str,
    title: &str,
    flash: Option<&Flash>,
    main: &str,
) -> String {
    let mut nav = String::new();
    for (href, key) in [
        ("/ui/servers", "ui.nav.servers"),
        ("/ui/tools", "ui.nav.tools"),
        ("/ui/changes", "ui.nav.changes"),
        ("/ui/inbox", "ui.nav.inbox"),
        ("/ui/skills", "ui.nav.skills"),
    ] {
        let current = path == href || (href == "/ui/tools" && path == "/ui/tool");
        let _ = write!(
            nav,
            "<a href=\"{href}\"{}>{}",
            if current {
                " aria-current=\"page\""
            } else {
                ""
            },
            esc(&view.t(key))
        );
        if href == "/ui/inbox" {
            let unread = view.gateway.inbox().map_or(0, |i| i.unread_count());
            let _ = write!(
                nav,
                " <span class=\"badge\" id=\"nav-unread\">{unread}</span>"
            );
        }
        nav.push_str("</a>");
    }
    let flash = flash.map_or(String::new(), |f| {
        format!(
            "<p class=\"flash {}\" id=\"flash\" role=\"status\">{}</p>",
            if f.ok { "ok" } else { "error" },
            esc(&f.text)
        )
    });
    format!(
        "<!doctype html>\n<html lang=\"{lang}\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · roster</title>\
         <link rel=\"stylesheet\" href=\"/ui/assets/style.css\">\
         <script src=\"/ui/assets/app.js\" defer></script></head>\
         <body><header><span class=\"brand\">roster</span><nav>{nav}</nav>\
         <form method=\"post\" action=\"/ui/logout\" class=\"inline\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <button type=\"submit\" class=\"quiet\">{logout}</button></form></header>\
         {flash}<main id=\"main\" data-stamp=\"{stamp}\">{main}</main></body></html>\n",
        lang = view.lang,
        title = esc(title),
        csrf = esc(view.csrf),
        logout = esc(&view.t("ui.nav.logout")),
        stamp = main_stamp(main),
    )
}

/// A fingerprint of a page's `<main>`: the page's script swaps in a new one only when it differs.
pub(super) fn main_stamp(main: &str) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(main.as_bytes()))
}

/// The login page, with `error` (a catalogue key) when the last attempt failed.
pub(super) fn login(lang: &'static str, admin_token: bool, error: Option<&str>) -> String {
    let tr = |key: &str| esc(&t!(key, locale = lang));
    let error = error.map_or(String::new(), |key| {
        format!("<p class=\"flash error\" role=\"alert\">{}</p>", tr(key))
    });
    let form = if admin_token {
        format!(
            "<form method=\"post\" action=\"/ui/login\" class=\"login\">\
             <label for=\"token\">{label}</label>\
             <input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"current-password\" required>\
             <button type=\"submit\">{submit}</button></form>",
            label = tr("ui.login.token"),
            submit = tr("ui.login.submit"),
        )
    } else {
        String::new()
    };
    format!(
        "<!doctype html>\n<html lang=\"{lang}\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · roster</title><link rel=\"stylesheet\" href=\"/ui/assets/style.css\"></head>\
         <body><header><span class=\"brand\">roster</span></header><main id=\"main\">\
         <h1>{title}</h1>{error}<p>{how}</p>{form}</main></body></html>\n",
        title = tr("ui.login.title"),
        how = tr(if admin_token {
            "ui.login.how_token"
        } else {
            "ui.login.how_link"
        }),
    )
}

/// The era a negotiated protocol version belongs to.
fn era(view: &View<'_>, version: Option<&str>) -> String {
    match version {
        None => "—".to_owned(),
        Some(v) if v >= "2026-07-28" => format!("{} ({v})", view.t("ui.servers.era_stateless")),
        Some(v) => format!("{} ({v})", view.t("ui.servers.era_initialize")),
    }
}

/// A state word in the page's language, or as it is when the catalogue has none.
fn state_word(view: &View<'_>, group: &str, word: &str) -> String {
    let key = format!("ui.{group}.{}", word.replace('-', "_"));
    let text = view.t(&key);
    if text == key { word.to_owned() } else { text }
}

/// Servers: transport, era, state, tools, last and next listing, restarts, last error; refresh
/// and restart.
pub(super) fn servers(view: &View<'_>) -> (String, String) {
    let title = view.t("ui.nav.servers");
    let mut servers = view.gateway.roster().servers_json();
    crate::gateway::http::redact(&mut servers);
    let mut out = format!(
        "<h1>{}</h1><div class=\"actions\">{}</div>",
        esc(&title),
        button(
            view,
            "refresh-all",
            &[],
            &view.t("ui.servers.refresh_all"),
            ""
        )
    );
    let headers = [
        "ui.servers.name",
        "ui.servers.transport",
        "ui.servers.era",
        "ui.servers.state",
        "ui.servers.tools",
        "ui.servers.last_listing",
        "ui.servers.next_listing",
        "ui.servers.restarts",
        "ui.servers.last_error",
        "ui.servers.actions",
    ];
    out.push_str("<table id=\"servers\"><thead><tr>");
    for key in headers {
        let _ = write!(out, "<th>{}</th>", esc(&view.t(key)));
    }
    out.push_str("</tr></thead><tbody>");
    for server in servers.as_array().into_iter().flatten() {
        let name = server["name"].as_str().unwrap_or_default();
        let connection = server["connection"].as_str().unwrap_or_default();
        let listing = server["listing"].as_str().unwrap_or_default();
        let last = server["listed_ms_ago"]
            .as_u64()
            .map_or("—".to_owned(), |ms| ago(view.lang, ms));
        let next = server["next_listing_in_ms"]
            .as_u64()
            .map_or("—".to_owned(), |ms| {
                if ms == 0 {
                    view.t("ui.servers.next_turn")
                } else {
                    within(view.lang, ms)
                }
            });
        let _ = write!(
            out,
            "<tr data-server=\"{n}\"><td class=\"name\">{n}</td><td>{transport}</td><td>{era}</td>\
             <td><span class=\"state {cclass}\">{connection}</span> · {listing}</td>\
             <td class=\"num\">{tools}</td><td>{last}</td><td>{next}</td><td class=\"num\">{restarts}</td>\
             <td class=\"error\">{error}</td><td>{refresh}{restart}</td></tr>",
            n = esc(name),
            transport = esc(server["transport"].as_str().unwrap_or("—")),
            era = esc(&era(view, server["protocol_version"].as_str())),
            cclass = esc(connection),
            connection = esc(&state_word(view, "state", connection)),
            listing = esc(&state_word(view, "listing", listing)),
            tools = server["tools"].as_u64().unwrap_or(0),
            last = esc(&last),
            next = esc(&next),
            restarts = server["restarts"].as_u64().unwrap_or(0),
            error = esc(server["last_error"].as_str().unwrap_or("")),
            refresh = button(
                view,
                "refresh",
                &[("server", name)],
                &view.t("ui.servers.refresh"),
                ""
            ),
            restart = button(
                view,
                "restart",
                &[("server", name)],
                &view.t("ui.servers.restart"),
                "warn"
            ),
        );
    }
    out.push_str("</tbody></table>");
    (title, out)
}

/// The pin store this gateway decides in, read now (`None`: pins live in memory or nothing
/// was stored yet).
fn pin_book(view: &View<'_>) -> (Option<PinBook>, roster_core::NamingConfig) {
    let (dir, naming) = view.gateway.roster().pins_place();
    let book = dir
        .and_then(|at| at.open_existing().ok().flatten())
        .and_then(|store| store.load().ok());
    (book, naming)
}

/// A tool's pin state in words: pinned (by whom), waiting, or not pinned.
fn pin_state(view: &View<'_>, book: Option<&PinBook>, server: &str, tool: &str) -> String {
    let Some(pins) = book.and_then(|b| b.server(server)) else {
        return view.t("ui.tools.pin_none");
    };
    if pins.reviews.contains_key(tool) {
        return view.t("ui.tools.pin_waiting");
    }
    match pins.pins.get(tool) {
        Some(pin) if pin.decided_by == crate::store::DecidedBy::Person => {
            view.t("ui.tools.pin_person")
        }
        Some(_) => view.t("ui.tools.pin_first_use"),
        None => view.t("ui.tools.pin_none"),
    }
}

/// The waiting definitions, each with approve and reject.
fn waiting_table(
    view: &View<'_>,
    pending: &[crate::reviews::Pending],
    back: (&str, &str),
) -> String {
    let mut out = format!(
        "<table id=\"waiting\"><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        esc(&view.t("ui.tools.name")),
        esc(&view.t("ui.tools.kind")),
        esc(&view.t("ui.tools.state")),
        esc(&view.t("ui.tools.summary")),
        esc(&view.t("ui.servers.actions")),
    );
    for p in pending {
        let name = crate::reviews::visible(&p.name);
        let _ = write!(
            out,
            "<tr data-tool=\"{n}\"><td class=\"name\"><a href=\"/ui/tool?name={q}\">{n}</a></td><td>{kind}</td>\
             <td>{state}</td><td>{summary}</td><td>{approve}{reject}</td></tr>",
            n = esc(&name),
            q = query_escape(&p.name),
            kind = esc(&state_word(view, "pin_kind", p.kind.as_str())),
            state = esc(&state_word(view, "pin_state", p.state.as_str())),
            summary = esc(&crate::reviews::visible(&p.summary)),
            approve = button(
                view,
                "approve",
                &[("name", &p.name), ("back", back.0), ("exposed", back.1)],
                &view.t("ui.tools.approve"),
                "ok"
            ),
            reject = button(
                view,
                "reject",
                &[("name", &p.name), ("back", back.0), ("exposed", back.1)],
                &view.t("ui.tools.reject"),
                "warn"
            ),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// Tools: what waits for a decision, then the live union with search and a server filter.
pub(super) fn tools(view: &View<'_>) -> (String, String) {
    let title = view.t("ui.nav.tools");
    let (book, naming) = pin_book(view);
    let pending = book
        .as_ref()
        .map(|b| crate::reviews::pending(b, &naming))
        .unwrap_or_default();
    let mut out = format!("<h1>{}</h1>", esc(&title));
    if !pending.is_empty() {
        let _ = write!(
            out,
            "<section id=\"drift\"><h2>{}</h2>{}</section>",
            esc(&view.t("ui.tools.waiting")),
            waiting_table(view, &pending, ("tools", ""))
        );
    }
    let query = view.q("q").trim().to_lowercase();
    let only = view.q("server");
    let tools = view.gateway.roster().tools();
    let mut servers: Vec<&str> = tools.iter().map(|t| t.server.as_str()).collect();
    servers.dedup();
    let _ = write!(
        out,
        "<form method=\"get\" action=\"/ui/tools\" class=\"filter\">\
         <input type=\"search\" name=\"q\" value=\"{q}\" placeholder=\"{search}\" aria-label=\"{search}\">\
         <select name=\"server\" aria-label=\"{server}\"><option value=\"\">{all}</option>",
        q = esc(view.q("q")),
        search = esc(&view.t("ui.tools.search")),
        server = esc(&view.t("ui.tools.server")),
        all = esc(&view.t("ui.tools.all_servers")),
    );
    for server in &servers {
        let _ = write!(
            out,
            "<option value=\"{s}\"{sel}>{s}</option>",
            s = esc(server),
            sel = if *server == only { " selected" } else { "" }
        );
    }
    let _ = write!(
        out,
        "</select><button type=\"submit\">{}</button></form>",
        esc(&view.t("ui.tools.filter"))
    );
    let shown: Vec<_> = tools
        .iter()
        .filter(|t| only.is_empty() || t.server == only)
        .filter(|t| {
            query.is_empty()
                || t.exposed_name.to_lowercase().contains(&query)
                || t.tool
                    .description
                    .as_deref()
                    .is_some_and(|d| d.to_lowercase().contains(&query))
        })
        .collect();
    let _ = write!(
        out,
        "<p class=\"count\" id=\"tool-count\">{}</p>",
        esc(&t!(
            "ui.tools.count",
            locale = view.lang,
            shown = shown.len(),
            total = tools.len()
        ))
    );
    let _ = write!(
        out,
        "<table id=\"tools\"><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        esc(&view.t("ui.tools.name")),
        esc(&view.t("ui.tools.server")),
        esc(&view.t("ui.tools.description")),
        esc(&view.t("ui.tools.pin")),
    );
    for tool in shown {
        let description = tool
            .tool
            .description
            .as_deref()
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr data-tool=\"{n}\"><td class=\"name\"><a href=\"/ui/tool?name={q}\">{n}</a></td>\
             <td>{server}</td><td>{description}</td><td>{pin}</td></tr>",
            n = esc(&tool.exposed_name),
            q = query_escape(&tool.exposed_name),
            server = esc(&tool.server),
            description = esc(&crate::reviews::visible(description)),
            pin = esc(&pin_state(
                view,
                book.as_ref(),
                &tool.server,
                &tool.tool.name
            )),
        );
    }
    out.push_str("</tbody></table>");
    (title, out)
}

/// One tool: its definition, its pin state, and what waits for a decision with the diff.
pub(super) fn tool(view: &View<'_>) -> (String, String) {
    let name = view.q("name");
    let (book, naming) = pin_book(view);
    let live = view
        .gateway
        .roster()
        .tools()
        .into_iter()
        .find(|t| t.exposed_name == name);
    let pending: Vec<_> = book
        .as_ref()
        .map(|b| crate::reviews::pending(b, &naming))
        .unwrap_or_default()
        .into_iter()
        .filter(|p| {
            p.name == name
                || live
                    .as_ref()
                    .is_some_and(|t| t.server == p.server && t.tool.name == p.tool)
        })
        .collect();
    let mut out = format!(
        "<p><a href=\"/ui/tools\">← {}</a></p><h1 class=\"name\">{}</h1>",
        esc(&view.t("ui.nav.tools")),
        esc(&crate::reviews::visible(name))
    );
    if live.is_none() && pending.is_empty() {
        let _ = write!(
            out,
            "<p class=\"flash error\">{}</p>",
            esc(&view.t("ui.tools.no_such_tool"))
        );
        return (name.to_owned(), out);
    }
    if let Some(tool) = &live {
        let _ = write!(
            out,
            "<dl><dt>{}</dt><dd>{}</dd><dt>{}</dt><dd id=\"pin-state\">{}</dd></dl>",
            esc(&view.t("ui.tools.server")),
            esc(&tool.server),
            esc(&view.t("ui.tools.pin")),
            esc(&pin_state(
                view,
                book.as_ref(),
                &tool.server,
                &tool.tool.name
            )),
        );
    }
    for p in &pending {
        let _ = write!(
            out,
            "<section class=\"review\"><h2>{}</h2>{}<pre class=\"diff\">{}</pre>",
            esc(&view.t("ui.tools.waiting")),
            waiting_table(view, std::slice::from_ref(p), ("tool", name)),
            esc(&crate::reviews::visible(&p.diff)),
        );
        if !p.hidden.is_empty() {
            let _ = write!(out, "<h3>{}</h3><ul>", esc(&view.t("ui.tools.hidden")));
            for hidden in &p.hidden {
                let _ = write!(out, "<li>{}</li>", esc(hidden));
            }
            out.push_str("</ul>");
        }
        out.push_str("</section>");
    }
    if let Some(tool) = &live {
        let definition = serde_json::to_string_pretty(&tool.tool).unwrap_or_default();
        let _ = write!(
            out,
            "<h2>{}</h2><pre class=\"definition\">{}</pre>",
            esc(&view.t("ui.tools.definition")),
            esc(&crate::reviews::visible(&definition))
        );
    }
    (name.to_owned(), out)
}

/// A person's decision on the waiting tool `name`, made as `roster tools approve|reject` makes
/// it; the answer in `lang`.
pub(super) fn decide(
    gateway: &Gateway,
    lang: &'static str,
    decision: Decision,
    name: &str,
) -> Result<String, String> {
    let (dir, naming) = gateway.roster().pins_place();
    let dir = dir.ok_or("this gateway keeps its pins in memory; nothing can be decided here")?;
    let dir = &dir;
    let done = crate::reviews::decide(dir, &naming, decision, &[name.to_owned()], &[], false)
        .map_err(|e| format!("{e:#}"))?;
    let shown = crate::reviews::visible(name);
    if done.is_none_or(|done| done.decided.is_empty()) {
        return Err(format!(
            "{shown} no longer waits for a decision (the gateway settled it)"
        ));
    }
    let key = match decision {
        Decision::Approve => "ui.tools.approved",
        Decision::Reject => "ui.tools.rejected",
    };
    Ok(t!(key, locale = lang, name = shown).into_owned())
}

/// The recent changes, newest first.
pub(super) fn changes(view: &View<'_>) -> (String, String) {
    let title = view.t("ui.nav.changes");
    let changes = view.gateway.roster().recent_changes();
    let mut out = format!("<h1>{}</h1>", esc(&title));
    if changes.is_empty() {
        let _ = write!(
            out,
            "<p class=\"empty\">{}</p>",
            esc(&view.t("ui.changes.none"))
        );
        return (title, out);
    }
    out.push_str("<ol id=\"changes\" class=\"changes\">");
    for change in changes {
        let _ = write!(
            out,
            "<li data-server=\"{s}\"><span class=\"when\">{at}</span> <strong>{s}</strong><ul>",
            s = esc(&change.server),
            at = esc(&stamp(change.at_ms)),
        );
        for (key, names) in [
            ("ui.changes.added", &change.delta.added),
            ("ui.changes.changed", &change.delta.changed),
            ("ui.changes.removed", &change.delta.removed),
        ] {
            if names.is_empty() {
                continue;
            }
            let _ = write!(out, "<li>{}: ", esc(&view.t(key)));
            let listed: Vec<String> = names
                .iter()
                .map(|n| match change.delta.reasons.get(n) {
                    Some(why) => format!("<code>{}</code> ({})", esc(n), esc(why)),
                    None => format!("<code>{}</code>", esc(n)),
                })
                .collect();
            out.push_str(&listed.join(", "));
            out.push_str("</li>");
        }
        out.push_str("</ul></li>");
    }
    out.push_str("</ol>");
    (title, out)
}

/// A JSON value in at most `max` characters.
fn brief(value: &Value, max: usize) -> String {
    let text = value.to_string();
    if text.chars().count() <= max {
        return text;
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}

/// The inbox: unread count, pending confirmations (yes / no), the newest entries, ack and clear.
pub(super) fn inbox(view: &View<'_>) -> (String, String) {
    let title = view.t("ui.nav.inbox");
    let mut out = format!("<h1>{}</h1>", esc(&title));
    let Some(inbox) = view.gateway.inbox() else {
        let _ = write!(
            out,
            "<p class=\"flash error\">{}</p>",
            esc(crate::gateway::admin::NO_INBOX)
        );
        return (title, out);
    };
    // "Mark all read" marks what this page shows, not what came after it was drawn: the last
    // entry is read before the count, so the button never covers an entry the count missed.
    let up_to = inbox.last_seq().to_string();
    let unread = inbox.unread_count();
    let _ = write!(
        out,
        "<p class=\"count\">{} <span id=\"unread-count\">{unread}</span></p><div class=\"actions\">{ack}\
         <a class=\"button warn\" id=\"clear\" href=\"/ui/inbox/clear\">{clear}</a>\
         <a class=\"button warn\" id=\"clear-all\" href=\"/ui/inbox/clear?all=1\">{clear_all}</a></div>",
        esc(&view.t("ui.inbox.unread")),
        ack = button(
            view,
            "ack",
            &[("up_to", &up_to)],
            &view.t("ui.inbox.ack_all"),
            ""
        ),
        clear = esc(&view.t("ui.inbox.clear")),
        clear_all = esc(&view.t("ui.inbox.clear_all")),
    );
    let pending = inbox.pending_confirms();
    let _ = write!(out, "<h2>{}</h2>", esc(&view.t("ui.inbox.pending")));
    if pending.is_empty() {
        let _ = write!(
            out,
            "<p class=\"empty\" id=\"no-pending\">{}</p>",
            esc(&view.t("ui.inbox.no_pending"))
        );
    } else {
        out.push_str("<ul id=\"pending\" class=\"pending\">");
        for confirm in &pending {
            let id = confirm.id.to_string();
            let message = confirm.params["message"]
                .as_str()
                .map_or_else(|| brief(&confirm.params, 300), str::to_owned);
            let _ = write!(
                out,
                "<li data-confirm=\"{id}\"><p><strong>#{id}</strong> {channel} · <code>{method}</code> · \
                 {expires}</p><p class=\"message\">{message}</p>{yes}{no}</li>",
                channel = esc(&confirm.channel),
                method = esc(&confirm.method),
                expires = esc(&t!(
                    "ui.inbox.expires",
                    locale = view.lang,
                    at = confirm.expires_at
                )),
                message = esc(&message),
                yes = button(
                    view,
                    "confirm",
                    &[("id", &id), ("answer", "yes")],
                    &view.t("ui.inbox.yes"),
                    "ok"
                ),
                no = button(
                    view,
                    "confirm",
                    &[("id", &id), ("answer", "no")],
                    &view.t("ui.inbox.no"),
                    "warn"
                ),
            );
        }
        out.push_str("</ul>");
    }
    let entries = inbox.list(None, 200);
    let _ = write!(out, "<h2>{}</h2>", esc(&view.t("ui.inbox.recent")));
    if entries.is_empty() {
        let _ = write!(
            out,
            "<p class=\"empty\">{}</p>",
            esc(&view.t("ui.inbox.empty"))
        );
        return (title, out);
    }
    let _ = write!(
        out,
        "<table id=\"entries\"><thead><tr><th>#</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        esc(&view.t("ui.inbox.when")),
        esc(&view.t("ui.inbox.channel")),
        esc(&view.t("ui.inbox.method")),
        esc(&view.t("ui.inbox.state")),
        esc(&view.t("ui.inbox.params")),
    );
    for entry in entries {
        let state = serde_json::to_value(entry.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr data-seq=\"{seq}\" class=\"{state}\"><td class=\"num\">{seq}</td><td>{at}</td><td>{channel}</td>\
             <td><code>{method}</code></td><td>{word}</td><td class=\"params\">{params}</td></tr>",
            seq = entry.seq,
            state = esc(&state),
            at = esc(&entry.at),
            channel = esc(&entry.channel),
            method = esc(&entry.method),
            word = esc(&state_word(view, "entry", &state)),
            params = esc(&brief(&entry.params, 200)),
        );
    }
    out.push_str("</tbody></table>");
    (title, out)
}

/// Before clearing: what will go, as `roster inbox clear [--all]` would clear it.
pub(super) fn clear_confirmation(view: &View<'_>) -> (String, String) {
    let all = view.q("all") == "1";
    let title = view.t(if all {
        "ui.inbox.clear_all"
    } else {
        "ui.inbox.clear"
    });
    let (entries, pending) = view.gateway.inbox().map_or((0, 0), |inbox| {
        (
            inbox.list(None, usize::MAX).len(),
            inbox.pending_confirms().len(),
        )
    });
    let question = t!(
        if all {
            "ui.inbox.clear_all_question"
        } else {
            "ui.inbox.clear_question"
        },
        locale = view.lang,
        n = entries,
        declined = pending
    );
    let out = format!(
        "<h1>{}</h1><p id=\"clear-question\">{}</p><div class=\"actions\">{}<a class=\"button\" href=\"/ui/inbox\">{}</a></div>",
        esc(&title),
        esc(&question),
        button(
            view,
            "clear",
            &[("all", if all { "1" } else { "0" })],
            &title,
            "warn"
        ),
        esc(&view.t("ui.inbox.cancel")),
    );
    (title, out)
}

/// Skills: each one's kind, visibility and availability; the last refresh's summary.
pub(super) fn skills(view: &View<'_>) -> (String, String) {
    let title = view.t("ui.nav.skills");
    let skills = view.gateway.skills();
    let mut out = format!("<h1>{}</h1>", esc(&title));
    match skills.last_refresh() {
        Some((at, result)) => {
            let _ = write!(
                out,
                "<p class=\"count\" id=\"refresh-summary\">{} · {}</p>",
                esc(&t!(
                    "ui.skills.summary",
                    locale = view.lang,
                    refreshed = result.total_refreshed(),
                    failed = result.total_failed(),
                    skipped = result.total_skipped()
                )),
                esc(&stamp(at)),
            );
        }
        None => {
            let _ = write!(
                out,
                "<p class=\"count\">{}</p>",
                esc(&view.t("ui.skills.never_refreshed"))
            );
        }
    }
    let rows = skills.overview();
    if rows.is_empty() {
        let _ = write!(
            out,
            "<p class=\"empty\">{}</p>",
            esc(&view.t("ui.skills.none"))
        );
        return (title, out);
    }
    let _ = write!(
        out,
        "<table id=\"skills\"><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        esc(&view.t("ui.skills.id")),
        esc(&view.t("ui.skills.name")),
        esc(&view.t("ui.skills.kind")),
        esc(&view.t("ui.skills.visibility")),
        esc(&view.t("ui.skills.available")),
    );
    for skill in rows {
        let visibility = if skill.visibility.is_empty() {
            view.t("ui.skills.everyone")
        } else {
            skill.visibility.join(", ")
        };
        let available = if skill.available {
            view.t("ui.skills.yes")
        } else {
            format!(
                "{}: {}",
                view.t("ui.skills.no"),
                skill.reason.as_deref().unwrap_or_default()
            )
        };
        let _ = write!(
            out,
            "<tr data-skill=\"{id}\"><td class=\"name\">{id}</td><td>{name}</td><td>{kind}</td><td>{visibility}</td>\
             <td class=\"{class}\">{available}</td></tr>",
            id = esc(&skill.id),
            name = esc(&skill.name),
            kind = esc(&state_word(view, "skills.kinds", skill.kind)),
            visibility = esc(&visibility),
            class = if skill.available { "ok" } else { "error" },
            available = esc(&available),
        );
    }
    out.push_str("</tbody></table>");
    (title, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_servers_cannot_become_markup() {
        assert_eq!(
            esc("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
        assert_eq!(
            query_escape("fs__read file&x=ü"),
            "fs__read%20file%26x%3D%C3%BC"
        );
    }

    #[test]
    fn short_durations_read_at_a_glance() {
        assert_eq!(short(12_000), "12s");
        assert_eq!(short(180_000), "3m");
        assert_eq!(short(7_200_000), "2h");
        assert_eq!(short(3 * 86_400_000), "3d");
    }
}
