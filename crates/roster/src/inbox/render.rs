//! Text for the model's `channels` tool and for `roster inbox`: one code path, so both show the
//! same thing and the same caps apply. Only the words differ ([`Reader`]): the model's stay the
//! English written here, a person's (state, "no entries", "… N more") come from the catalogues.

use std::fmt::Write as _;

use serde_json::Value;

use super::Entry;

/// Start of the last line when entries were left out: `… N more`.
pub const MORE_PREFIX: &str = "… ";

/// What [`render`] says for no entries.
pub const NO_ENTRIES: &str = "(no entries)";

/// How many entries `channels list` and `roster inbox list` show when not told.
pub const DEFAULT_LIST_LIMIT: usize = 20;

/// The character cap the model's `channels` tool applies when not told.
pub const DEFAULT_MAX_CHARS: usize = 8_000;

/// No single entry's line is longer than this (in characters), so one huge notification cannot
/// crowd out the rest.
pub const LINE_MAX_CHARS: usize = 400;

/// Who reads the rendered text: the model (the `channels` tool, always English, never
/// translated) or a person at the terminal (`roster inbox`, in the terminal's language).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// The model, over MCP: English, as written here.
    Model,
    /// A person: the words come from the `cli.inbox.` keys of the catalogues.
    Person,
}

/// Renders `entries` for the model; see [`render_for`].
pub fn render(entries: &[Entry], limit: usize, max_chars: usize) -> String {
    render_for(Reader::Model, entries, limit, max_chars)
}

/// Renders `entries` in the order given, one line each (`#seq at channel method state params`),
/// stopping after `limit` lines or before the text would pass `max_chars` characters; then a
/// `… N more` line says how many were left out. The whole text stays within `max_chars` as long
/// as `max_chars` leaves room for that last line.
pub fn render_for(reader: Reader, entries: &[Entry], limit: usize, max_chars: usize) -> String {
    if entries.is_empty() {
        let none = match reader {
            Reader::Model => NO_ENTRIES.to_owned(),
            Reader::Person => crate::i18n::text("cli.inbox.no_entries", &[]),
        };
        return none.chars().take(max_chars).collect();
    }
    // Room for the "more" line is kept whenever entries might be left out; counting digits of
    // the total keeps the reservation an upper bound.
    let footer_room = more_line(reader, entries.len()).chars().count() + 1;
    let mut out = String::new();
    let mut used = 0;
    let mut shown = 0;
    for (i, entry) in entries.iter().enumerate() {
        if shown == limit {
            break;
        }
        let line = entry_line(reader, entry);
        let line_chars = line.chars().count();
        let separator = usize::from(shown > 0);
        let more_after = i + 1 < entries.len();
        let reserve = if more_after { footer_room } else { 0 };
        if used + separator + line_chars + reserve > max_chars {
            break;
        }
        if shown > 0 {
            out.push('\n');
        }
        out.push_str(&line);
        used += separator + line_chars;
        shown += 1;
    }
    let left_out = entries.len() - shown;
    if left_out > 0 {
        if shown > 0 {
            out.push('\n');
        }
        out.push_str(&more_line(reader, left_out));
    }
    out
}

fn more_line(reader: Reader, n: usize) -> String {
    match reader {
        Reader::Model => format!("{MORE_PREFIX}{n} more"),
        Reader::Person => format!(
            "{MORE_PREFIX}{}",
            crate::i18n::text("cli.inbox.more", &[("count", &n)])
        ),
    }
}

fn entry_line(reader: Reader, entry: &Entry) -> String {
    let state = match reader {
        Reader::Model => entry.state.as_str().to_owned(),
        Reader::Person => crate::i18n::text(&format!("cli.inbox.state.{}", entry.state), &[]),
    };
    let mut line = String::new();
    let _ = write!(
        line,
        "#{} {} {} {} {}",
        entry.seq, entry.at, entry.channel, entry.method, state
    );
    let params_empty = match &entry.params {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        _ => false,
    };
    if !params_empty {
        line.push(' ');
        line.push_str(&entry.params.to_string());
    }
    truncate_chars(line, LINE_MAX_CHARS)
}

fn truncate_chars(line: String, max: usize) -> String {
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::EntryState;
    use serde_json::json;

    fn entry(seq: u64, params: Value) -> Entry {
        Entry {
            seq,
            at: "2026-12-02T12:00:00.000Z".into(),
            channel: "files".into(),
            method: "notifications/message".into(),
            params,
            state: EntryState::Unread,
            owners: Vec::new(),
        }
    }

    #[test]
    fn shows_every_entry_when_within_caps() {
        let entries: Vec<Entry> = (1..=3).map(|s| entry(s, json!({"n": s}))).collect();
        let text = render(&entries, 10, 10_000);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            "#1 2026-12-02T12:00:00.000Z files notifications/message unread {\"n\":1}"
        );
        assert!(!text.contains(MORE_PREFIX));
    }

    #[test]
    fn limit_cuts_and_says_how_many_more() {
        let entries: Vec<Entry> = (1..=5).map(|s| entry(s, Value::Null)).collect();
        let text = render(&entries, 2, 10_000);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("#2 "));
        assert_eq!(lines[2], "… 3 more");
    }

    #[test]
    fn char_cap_is_never_passed() {
        let entries: Vec<Entry> = (1..=50)
            .map(|s| entry(s, json!({"text": "é".repeat(30)})))
            .collect();
        for max in [20, 100, 333, 1000, 5000] {
            let text = render(&entries, 1000, max);
            assert!(
                text.chars().count() <= max,
                "{max}: {}",
                text.chars().count()
            );
            let shown = text.lines().filter(|l| l.starts_with('#')).count();
            let more = text
                .lines()
                .last()
                .and_then(|l| l.strip_prefix(MORE_PREFIX));
            assert_eq!(more, Some(format!("{} more", 50 - shown).as_str()));
        }
    }

    #[test]
    fn one_huge_entry_is_truncated_to_the_line_cap() {
        let entries = vec![entry(1, json!({"blob": "x".repeat(5000)}))];
        let text = render(&entries, 10, 10_000);
        assert_eq!(text.chars().count(), LINE_MAX_CHARS);
        assert!(text.ends_with('…'));
    }

    #[test]
    fn empty_says_so() {
        assert_eq!(render(&[], 10, 1000), NO_ENTRIES);
    }
}
