//! The Servers page: each server's transport, era, state, tools, listings, restarts and last
//! error, with refresh and restart.

use std::fmt::Write as _;

use super::{View, ago, button, esc, state_word, within};

/// The era a negotiated protocol version belongs to.
fn era(view: &View<'_>, version: Option<&str>) -> String {
    match version {
        None => "—".to_owned(),
        Some(v) if v >= "2026-07-28" => format!("{} ({v})", view.t("ui.servers.era_stateless")),
        Some(v) => format!("{} ({v})", view.t("ui.servers.era_initialize")),
    }
}

/// A stdio server's sandbox beside its transport: the word, its rules on hover.
fn sandbox_cell(view: &View<'_>, sandbox: &serde_json::Value) -> String {
    if !sandbox.is_object() {
        return String::new();
    }
    let list = |key: &str| {
        sandbox[key]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .filter(|text| !text.is_empty())
            .unwrap_or_else(|| "—".to_owned())
    };
    let rules = format!(
        "read: {}; write: {}; network: {}; connect: {}; env: {}",
        list("read"),
        list("write"),
        sandbox["network"].as_str().unwrap_or("—"),
        list("connect"),
        list("env"),
    );
    format!(
        " · <span class=\"sandbox\" title=\"{}\">{}</span>",
        esc(&rules),
        esc(&view.t("ui.servers.sandboxed"))
    )
}

/// Servers: transport, era, state, tools, last and next listing, restarts, last error; refresh
/// and restart.
pub(in crate::gateway::ui) fn servers(view: &View<'_>) -> (String, String) {
    let title = view.t("ui.nav.servers");
    let mut servers = view.gateway.roster().servers_json();
    crate::gateway::http::guard::redact(&mut servers);
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
            "<tr data-server=\"{n}\"><td class=\"name\">{n}</td><td>{transport}{sandbox}</td><td>{era}</td>\
             <td><span class=\"state {cclass}\">{connection}</span> · {listing}</td>\
             <td class=\"num\">{tools}</td><td>{last}</td><td>{next}</td><td class=\"num\">{restarts}</td>\
             <td class=\"error\">{error}</td><td>{refresh}{restart}</td></tr>",
            n = esc(name),
            transport = esc(server["transport"].as_str().unwrap_or("—")),
            sandbox = sandbox_cell(view, &server["sandbox"]),
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
