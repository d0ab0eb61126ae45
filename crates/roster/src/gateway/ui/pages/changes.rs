//! The Changes page: the recent deltas of every server, newest first.

use std::fmt::Write as _;

use super::{View, esc, stamp};

/// The recent changes, newest first.
pub(in crate::gateway::ui) fn changes(view: &View<'_>) -> (String, String) {
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
