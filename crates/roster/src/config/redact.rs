//! URLs fit to show in errors and logs: userinfo and query strings may hold secrets.

/// A URL fit to show: userinfo (`user:secret@`) and the query string (`?api_key=…`) are
/// replaced, since either may hold a secret; what is left still says which server it is.
/// A string that does not parse as a URL is cut at its first `?` and `@`-userinfo all the same.
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) if parsed.has_host() => {
            let had_userinfo = !parsed.username().is_empty() || parsed.password().is_some();
            let had_query = parsed.query().is_some();
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            let mut shown = parsed.to_string();
            if had_userinfo && let Some(at) = shown.find("://") {
                shown.insert_str(at + 3, "***@");
            }
            if had_query {
                shown.push_str("?***");
            }
            shown
        }
        _ => {
            let (base, query) = match url.split_once('?') {
                Some((base, _)) => (base, "?***"),
                None => (url, ""),
            };
            let base = match (base.find("://"), base.rfind('@')) {
                (Some(scheme), Some(at)) if at > scheme => {
                    format!("{}***@{}", &base[..scheme + 3], &base[at + 1..])
                }
                _ => base.to_owned(),
            };
            format!("{base}{query}")
        }
    }
}

/// `text` (an error message, a log line) with the userinfo and query string of every URL in it
/// masked: each `scheme://…` URL that holds either is passed through [`redact_url`] (any scheme:
/// `postgres://user:secret@…` as much as `https://…?api_key=…`), and so is a URL written as
/// `url::Url`'s `Debug` form (`Url { …, password: Some("…"), query: Some("…"), … }`). A URL
/// ends at whitespace, a quote, `<`, `>`, a backtick or a control character (an ANSI colour
/// code after it stays); other text is left exactly as it was.
pub fn redact_urls(text: &str) -> String {
    let text = redact_url_structs(text);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(sep) = rest.find("://") {
        let start = scheme_start(&rest[..sep]);
        let len = rest[sep..]
            .find(|c: char| {
                c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '<' | '>' | '`')
            })
            .unwrap_or(rest.len() - sep);
        // A URL at the end of a sentence or in brackets leaves its punctuation outside.
        let end = sep
            + rest[sep..sep + len]
                .trim_end_matches(['.', ',', ';', ':', '!', ')', ']'])
                .len();
        let url = &rest[start..end];
        out.push_str(&rest[..start]);
        if start < sep && (url.contains('?') || url.contains('@')) {
            out.push_str(&redact_url(url));
        } else {
            out.push_str(url);
        }
        rest = &rest[end.max(sep + 3)..];
    }
    out.push_str(rest);
    out
}

/// Where the URL scheme that ends `before` starts (`before.len()` when there is none): letters,
/// digits, `+`, `-` and `.`, beginning with a letter.
fn scheme_start(before: &str) -> usize {
    let start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        .last()
        .map_or(before.len(), |(at, _)| at);
    // The scheme begins at its first letter (`1http://` is no scheme `1http`).
    match before[start..].find(|c: char| c.is_ascii_alphabetic()) {
        Some(letter) => start + letter,
        None => before.len(),
    }
}

/// `text` with the secrets of every `url::Url` written in its `Debug` form masked: its
/// `username`, `password` and `query`.
fn redact_url_structs(text: &str) -> String {
    if !text.contains("Url {") {
        return text.to_owned();
    }
    let mut text = text.to_owned();
    for field in ["username: \"", "password: Some(\"", "query: Some(\""] {
        let mut from = 0;
        while let Some(at) = text[from..].find(field) {
            let open = from + at + field.len();
            let close = closing_quote(&text[open..]).map_or(text.len(), |end| open + end);
            if close > open {
                text.replace_range(open..close, "***");
            }
            from = open + if close > open { 3 } else { 0 } + 1;
            if from >= text.len() {
                break;
            }
        }
    }
    text
}

/// The byte offset of the quote that ends a Rust `Debug` string starting at `text` (after its
/// opening quote): the first `"` not escaped by a backslash.
fn closing_quote(text: &str) -> Option<usize> {
    let mut escaped = false;
    for (at, c) in text.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(at),
            _ => escaped = false,
        }
    }
    None
}

/// `text` with every spelling of `url` (as configured, and as the URL parser writes it), and
/// its query string alone, replaced by [`redact_url`]'s form: for errors of HTTP libraries
/// that quote the URL they were given.
pub fn redact_url_in(text: &str, url: &str) -> String {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return text.to_owned();
    };
    let shown = redact_url(url);
    let mut out = text.replace(url, &shown).replace(parsed.as_str(), &shown);
    if let Some(query) = parsed.query().filter(|q| !q.is_empty()) {
        out = out.replace(query, "…");
    }
    if let Some(password) = parsed.password().filter(|p| !p.is_empty()) {
        out = out.replace(password, "…");
    }
    out
}
