//! The Tools page and a tool's own page: what waits for a person's decision on the pins (with
//! approve and reject), the live tools with their pin state, and the decision itself.

use std::fmt::Write as _;

use rust_i18n::t;

use super::{View, button, esc, query_escape, state_word};
use crate::gateway::Gateway;
use crate::store::{Decision, PinBook};

/// The pin store this gateway decides in, read now (`None`: pins live in memory or nothing
/// was stored yet).
fn pin_book(view: &View<'_>) -> (Option<PinBook>, roster_core::NamingConfig) {
    let roster = view.gateway.roster();
    let book = roster
        .stores()
        .pins_existing()
        .ok()
        .flatten()
        .and_then(|store| store.load().ok());
    (book, roster.naming())
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
pub(in crate::gateway::ui) fn tools(view: &View<'_>) -> (String, String) {
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
pub(in crate::gateway::ui) fn tool(view: &View<'_>) -> (String, String) {
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
pub(in crate::gateway::ui) fn decide(
    gateway: &Gateway,
    lang: &'static str,
    decision: Decision,
    name: &str,
) -> Result<String, String> {
    let roster = gateway.roster();
    let stores = roster.stores();
    if stores.is_in_memory() {
        return Err("this gateway keeps its pins in memory; nothing can be decided here".into());
    }
    let naming = roster.naming();
    let done = crate::reviews::decide(stores, &naming, decision, &[name.to_owned()], &[], false)
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
