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

/// `text` (an error message, a log line) with every `http://` or `https://` URL in it passed
/// through [`redact_url`].
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = ["http://", "https://"]
        .iter()
        .filter_map(|scheme| rest.find(scheme))
        .min()
    {
        out.push_str(&rest[..at]);
        let len = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .unwrap_or(rest.len() - at);
        // A URL at the end of a sentence or in brackets leaves its punctuation outside.
        let url = rest[at..at + len].trim_end_matches(['.', ',', ';', ':', '!', ')', ']']);
        out.push_str(&redact_url(url));
        rest = &rest[at + url.len()..];
    }
    out.push_str(rest);
    out
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
