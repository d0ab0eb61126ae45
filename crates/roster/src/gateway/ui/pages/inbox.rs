//! The Inbox page (unread count, pending confirmations, the newest entries, ack) and what
//! clearing it will take away.

use std::fmt::Write as _;

use rust_i18n::t;
use serde_json::Value;

use super::{View, button, esc, state_word};

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
pub(in crate::gateway::ui) fn inbox(view: &View<'_>) -> (String, String) {
    let title = view.t("ui.nav.inbox");
    let mut out = format!("<h1>{}</h1>", esc(&title));
    let Some(inbox) = view.gateway.inbox() else {
        let _ = write!(
            out,
            "<p class=\"flash error\">{}</p>",
            esc(crate::gateway::inbox_request::NO_INBOX)
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
pub(in crate::gateway::ui) fn clear_confirmation(view: &View<'_>) -> (String, String) {
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
