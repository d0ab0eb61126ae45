//! The Skills page: each skill's kind, visibility and availability, and the last refresh.

use std::fmt::Write as _;

use rust_i18n::t;

use super::{View, esc, stamp, state_word};

/// Skills: each one's kind, visibility and availability; the last refresh's summary.
pub(in crate::gateway::ui) fn skills(view: &View<'_>) -> (String, String) {
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
