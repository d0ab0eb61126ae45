//! Words for people in three languages: English, Portuguese (Brazil) and Spanish.
//!
//! The catalogues are `crates/roster/locales/{en,pt-BR,es}.yml`, one file per language, built
//! into the binary by `rust-i18n`; English is the fallback for a missing key or an unknown
//! language. Keys under `cli.` are the terminal's (status headers, inbox rendering, prompts,
//! completion descriptions); keys under `ui.` are the dashboard's. JSON output, MCP-facing text
//! and logs stay English and never pass through here.
//!
//! The terminal's language comes from `ROSTER_LANG`, then the POSIX variables `LC_ALL`,
//! `LC_MESSAGES`, `LANG` ([`cli_locale`]); the dashboard's from the browser's
//! `Accept-Language` ([`from_accept_language`]).

/// The languages roster speaks, English first (the fallback).
pub const LOCALES: [&str; 3] = ["en", "pt-BR", "es"];

/// The fallback language.
pub const FALLBACK: &str = "en";

/// The language a locale name asks for, when roster has it: `pt_BR.UTF-8`, `pt-br`, `pt`
/// → `pt-BR`; `es_MX`, `es` → `es`; `en_US`, `C`, `POSIX` → `en`; anything else → `None`.
pub fn supported(name: &str) -> Option<&'static str> {
    // `pt_BR.UTF-8@euro`: the language and region before any codeset or modifier.
    let name = name.split(['.', '@']).next().unwrap_or_default().trim();
    let language = name
        .split(['_', '-'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match language.as_str() {
        "pt" => Some("pt-BR"),
        "es" => Some("es"),
        "en" | "c" | "posix" => Some("en"),
        _ => None,
    }
}

/// The terminal's language from these variables' values (`get` reads one): the first that is
/// set and not empty among `ROSTER_LANG`, `LC_ALL`, `LC_MESSAGES`, `LANG` decides (as POSIX
/// does); a language roster lacks gives English.
pub fn locale_from(get: impl Fn(&str) -> Option<String>) -> &'static str {
    ["ROSTER_LANG", "LC_ALL", "LC_MESSAGES", "LANG"]
        .into_iter()
        .filter_map(|var| get(var).filter(|v| !v.trim().is_empty()))
        .map(|value| supported(&value).unwrap_or(FALLBACK))
        .next()
        .unwrap_or(FALLBACK)
}

/// The terminal's language, from the process environment (see [`locale_from`]).
pub fn cli_locale() -> &'static str {
    locale_from(|var| std::env::var(var).ok())
}

/// Sets the language `t!` uses without a `locale =` argument to the terminal's; `main` calls it
/// once before anything is printed.
pub fn init_cli() {
    rust_i18n::set_locale(cli_locale());
}

/// Whether the language [`init_cli`] chose is English (so clap's own text can stay as it is).
pub fn cli_locale_is_english() -> bool {
    &*rust_i18n::locale() == FALLBACK
}

/// The terminal's words for `key` (a `cli.` key) in the language [`init_cli`] chose, English
/// when that catalogue lacks the key, with each `%{name}` filled from `args`. The one way the
/// library and `main.rs` alike print words for people; JSON, MCP-facing text and logs never
/// come through here.
pub fn text(key: &str, args: &[(&str, &dyn std::fmt::Display)]) -> String {
    let template = try_text(key).unwrap_or_else(|| key.to_owned());
    if args.is_empty() {
        return template;
    }
    let names: Vec<&str> = args.iter().map(|(name, _)| *name).collect();
    let values: Vec<String> = args.iter().map(|(_, value)| value.to_string()).collect();
    rust_i18n::replace_patterns(&template, &names, &values)
}

/// The text of `key` in the terminal's language (or English), unfilled; `None` when no
/// catalogue has it.
pub fn try_text(key: &str) -> Option<String> {
    crate::_rust_i18n_try_translate(&rust_i18n::locale(), key).map(|text| text.into_owned())
}

/// The best of roster's languages for an `Accept-Language` header (RFC 9110 §12.5.4): the
/// highest `q` wins, ties in the order given, `q=0` never; English when nothing matches.
pub fn from_accept_language(header: Option<&str>) -> &'static str {
    let Some(header) = header else {
        return FALLBACK;
    };
    let mut best: Option<(f32, &'static str)> = None;
    for range in header.split(',').take(32) {
        let mut parts = range.split(';');
        let tag = parts.next().unwrap_or_default().trim();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .filter_map(|q| q.trim().parse::<f32>().ok())
            .next()
            .unwrap_or(1.0);
        if q <= 0.0 {
            continue;
        }
        let Some(locale) = supported(tag) else {
            continue;
        };
        if best.is_none_or(|(best_q, _)| q > best_q) {
            best = Some((q, locale));
        }
    }
    best.map_or(FALLBACK, |(_, locale)| locale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn locale_names_map_to_the_three_languages() {
        assert_eq!(supported("pt_BR.UTF-8"), Some("pt-BR"));
        assert_eq!(supported("pt-br"), Some("pt-BR"));
        assert_eq!(supported("es_MX.utf8@euro"), Some("es"));
        assert_eq!(supported("en_US.UTF-8"), Some("en"));
        assert_eq!(supported("C"), Some("en"));
        assert_eq!(supported("de_DE.UTF-8"), None);
    }

    #[test]
    fn the_first_set_variable_decides_as_posix_says() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |var: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == var)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(locale_from(env(&[])), "en");
        assert_eq!(locale_from(env(&[("LANG", "es_ES.UTF-8")])), "es");
        assert_eq!(
            locale_from(env(&[("LANG", "es_ES.UTF-8"), ("LC_ALL", "pt_BR.UTF-8")])),
            "pt-BR"
        );
        assert_eq!(
            locale_from(env(&[("LC_ALL", "pt_BR.UTF-8"), ("ROSTER_LANG", "es")])),
            "es"
        );
        // An empty variable is unset; a language roster lacks is English, not the next one.
        assert_eq!(
            locale_from(env(&[("LC_ALL", ""), ("LANG", "es_ES.UTF-8")])),
            "es"
        );
        assert_eq!(
            locale_from(env(&[("LC_ALL", "de_DE.UTF-8"), ("LANG", "es_ES.UTF-8")])),
            "en"
        );
    }

    #[test]
    fn accept_language_takes_the_best_weighted_language() {
        assert_eq!(from_accept_language(None), "en");
        assert_eq!(
            from_accept_language(Some("pt-BR,pt;q=0.9,en;q=0.8")),
            "pt-BR"
        );
        assert_eq!(
            from_accept_language(Some("de-DE, es;q=0.5, en;q=0.4")),
            "es"
        );
        assert_eq!(from_accept_language(Some("en;q=0.2, es;q=0.9")), "es");
        assert_eq!(from_accept_language(Some("es;q=0, fr")), "en");
        assert_eq!(from_accept_language(Some("*")), "en");
    }

    /// Every key of a catalogue, dotted, with the `%{placeholders}` its text uses.
    fn keys(locale: &str) -> BTreeMap<String, Vec<String>> {
        fn walk(prefix: &str, value: &serde_json::Value, out: &mut BTreeMap<String, Vec<String>>) {
            match value {
                serde_json::Value::Object(map) => {
                    for (k, v) in map {
                        let key = if prefix.is_empty() {
                            k.clone()
                        } else {
                            format!("{prefix}.{k}")
                        };
                        walk(&key, v, out);
                    }
                }
                serde_json::Value::String(text) => {
                    let mut names: Vec<String> = text
                        .split("%{")
                        .skip(1)
                        .filter_map(|rest| rest.split_once('}').map(|(n, _)| n.to_owned()))
                        .collect();
                    names.sort();
                    out.insert(prefix.to_owned(), names);
                }
                other => panic!("{prefix} is {other}, not text"),
            }
        }
        let path = format!("{}/locales/{locale}.yml", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("read a catalogue");
        let value: serde_json::Value = serde_saphyr::from_str(&text).expect("parse a catalogue");
        let mut out = BTreeMap::new();
        walk("", &value, &mut out);
        out
    }

    #[test]
    fn every_key_is_in_all_three_catalogues_with_the_same_placeholders() {
        let english = keys("en");
        assert!(english.len() > 10, "the English catalogue is nearly empty");
        for locale in &LOCALES[1..] {
            let other = keys(locale);
            let missing: Vec<&String> =
                english.keys().filter(|k| !other.contains_key(*k)).collect();
            let extra: Vec<&String> = other.keys().filter(|k| !english.contains_key(*k)).collect();
            assert!(missing.is_empty(), "{locale} lacks {missing:?}");
            assert!(
                extra.is_empty(),
                "{locale} has keys English lacks: {extra:?}"
            );
            for (key, names) in &english {
                assert_eq!(
                    &other[key], names,
                    "{locale}: {key} uses other placeholders"
                );
            }
        }
    }

    #[test]
    fn text_fills_placeholders_and_names_a_missing_key() {
        // Unit tests never call `init_cli`: the language is rust-i18n's default, English.
        assert_eq!(
            text(
                "cli.inbox.decided",
                &[("id", &7), ("decision", &"confirmed")]
            ),
            "request 7: confirmed"
        );
        assert_eq!(text("cli.no.such.key", &[]), "cli.no.such.key");
        assert_eq!(try_text("cli.no.such.key"), None);
    }

    #[test]
    fn t_reads_each_catalogue_and_falls_back_to_english() {
        assert_eq!(rust_i18n::t!("ui.nav.servers", locale = "en"), "Servers");
        assert_eq!(
            rust_i18n::t!("ui.nav.servers", locale = "pt-BR"),
            "Servidores"
        );
        assert_eq!(rust_i18n::t!("ui.nav.servers", locale = "es"), "Servidores");
        assert_eq!(rust_i18n::t!("ui.nav.tools", locale = "de"), "Tools");
    }
}
