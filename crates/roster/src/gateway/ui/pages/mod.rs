//! The dashboard's pages as HTML: each page function gives its title and its `<main>`;
//! [`layout`] puts the header, navigation and the last action's message around it. Every text
//! from outside (server names, tool definitions, inbox params) is escaped.
//!
//! This file holds what every page shares (the view, escaping, time words, buttons, the
//! layout) and the login page; each page of the navigation is a file of its own.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use rust_i18n::t;

use super::{Flash, Gateway};

mod changes;
mod inbox;
mod servers;
mod skills;
mod tools;

pub(super) use changes::changes;
pub(super) use inbox::{clear_confirmation, inbox};
pub(super) use servers::servers;
pub(super) use skills::skills;
pub(super) use tools::{decide, tool, tools};

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

/// A state word in the page's language, or as it is when the catalogue has none.
fn state_word(view: &View<'_>, group: &str, word: &str) -> String {
    let key = format!("ui.{group}.{}", word.replace('-', "_"));
    let text = view.t(&key);
    if text == key { word.to_owned() } else { text }
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
