//! The text analysis skill search and tool search share: words split on anything not a letter
//! or digit and at camelCase humps, lower-cased, a small stop-word list dropped, light suffix
//! stemming (plurals, `-ing`, `-ed`, a final `e`) — applied to documents and queries alike — and,
//! for queries only, [`related`] words: the everyday word a person asks with beside the word a
//! tool is described with (`folder` / `directory`).

use std::collections::HashMap;
use std::sync::OnceLock;

/// Words too common to say anything (none is longer than four bytes).
const STOP_WORDS: [&str; 23] = [
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "if", "in", "into", "is", "it",
    "of", "on", "or", "that", "the", "this", "to", "with",
];

/// A word of at most four bytes packed into an integer, so the stop-word test is integer
/// compares rather than a string compare per candidate.
const fn pack(word: &[u8]) -> u32 {
    let mut packed = 0u32;
    let mut at = 0;
    while at < word.len() {
        packed = packed << 8 | word[at] as u32;
        at += 1;
    }
    packed
}

const PACKED_STOP_WORDS: [u32; 23] = {
    let mut packed = [0u32; 23];
    let mut at = 0;
    while at < STOP_WORDS.len() {
        packed[at] = pack(STOP_WORDS[at].as_bytes());
        at += 1;
    }
    packed
};

fn is_stop_word(word: &str) -> bool {
    word.len() <= 4 && PACKED_STOP_WORDS.contains(&pack(word.as_bytes()))
}

/// Whether `word` ends with `suffix`, as a fixed-size compare (no `memcmp` call per test).
fn ends<const N: usize>(word: &[u8], suffix: &[u8; N]) -> bool {
    word.len() >= N
        && <[u8; N]>::try_from(&word[word.len() - N..]).is_ok_and(|tail| tail == *suffix)
}

/// Splits `text` into lower-cased, stemmed terms (stop words dropped), calling `emit` for each;
/// `buffer` is scratch space reused across calls. An ASCII word with camelCase humps
/// (`getFileInfo`) gives its parts (`get`, `file`, `info`) and then the whole word.
pub(crate) fn analyze(text: &str, buffer: &mut String, mut emit: impl FnMut(&str)) {
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        if word.is_ascii() {
            let bytes = word.as_bytes();
            let mut start = 0;
            for at in 1..bytes.len() {
                if bytes[at].is_ascii_uppercase() && bytes[at - 1].is_ascii_lowercase() {
                    term(&word[start..at], buffer, &mut emit);
                    start = at;
                }
            }
            if start > 0 {
                term(&word[start..], buffer, &mut emit);
            }
        }
        term(word, buffer, &mut emit);
    }
}

/// One word as a term: lower-cased, dropped when a stop word, stemmed.
fn term(word: &str, buffer: &mut String, emit: &mut impl FnMut(&str)) {
    buffer.clear();
    if word.is_ascii() {
        buffer.push_str(word);
        buffer.make_ascii_lowercase();
    } else {
        for c in word.chars() {
            buffer.extend(c.to_lowercase());
        }
    }
    if is_stop_word(buffer) {
        return;
    }
    stem(buffer);
    emit(buffer);
}

/// Groups of words that ask for the same thing, as people and tool descriptions say it. Every
/// word of a group is related to the others. General vocabulary of files, data, version control,
/// the web and time — never a particular server's tool names.
const RELATED: &[&str] = &[
    "folder directory dir",
    "read open view show display inside content cat load look",
    "write save store put overwrite",
    "edit modify change update replace patch alter",
    "delete remove drop erase forget purge",
    "create make new add",
    "move rename relocate",
    "list enumerate ls",
    "search find lookup query locate grep",
    "tree hierarchy structure nested",
    "size big large bigger largest",
    "info metadata stat detail modified",
    "allow permit access",
    "memory remember recall know knowledge memorize memories",
    "entity person people thing",
    "relation link relationship connection",
    "observation fact note",
    "graph knowledge",
    "echo repeat",
    "sum add plus total addition",
    "env environment variable",
    "image picture photo png jpeg screenshot",
    "compress gzip zip",
    "log logging message",
    "time clock date hour",
    "timezone zone",
    "convert translate",
    "diff change compare difference uncommitted edit",
    "status changed state",
    "stage add index",
    "unstage reset",
    "commit history log",
    "checkout switch",
    "fetch download browse url web http https page website internet",
];

/// Words of a request that say nothing about which tool answers it ("what", "my", "please",
/// "everything"): left out of a tool-search query (documents keep them).
const QUERY_STOP_WORDS: &str = "about all also any can could do does every everything give here \
     how i just let me my need one our please some there these those up us want we what when \
     where which who why would you your";

/// Whether `term` (analysed) is a word of a request that says nothing about the tool.
pub(crate) fn is_query_stop_word(term: &str) -> bool {
    static SET: OnceLock<Vec<Box<str>>> = OnceLock::new();
    SET.get_or_init(|| {
        let mut set = Vec::new();
        analyze(QUERY_STOP_WORDS, &mut String::new(), |t| set.push(t.into()));
        set
    })
    .iter()
    .any(|stop| &**stop == term)
}

/// The terms related to `term` (an analysed term), for expanding a query; empty for most.
pub(crate) fn related(term: &str) -> &'static [Box<str>] {
    static TABLE: OnceLock<HashMap<Box<str>, Vec<Box<str>>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table: HashMap<Box<str>, Vec<Box<str>>> = HashMap::new();
        let mut buffer = String::new();
        for group in RELATED {
            let mut terms: Vec<Box<str>> = Vec::new();
            analyze(group, &mut buffer, |t| {
                if !terms.iter().any(|known| &**known == t) {
                    terms.push(t.into());
                }
            });
            for t in &terms {
                let entry = table.entry(t.clone()).or_default();
                for other in &terms {
                    if other != t && !entry.contains(other) {
                        entry.push(other.clone());
                    }
                }
            }
        }
        table
    });
    table.get(term).map_or(&[], Vec::as_slice)
}

/// Light suffix stemming, enough for plurals and common verb forms to meet: `notes`/`note`,
/// `queries`/`query`, `writing`/`write`, `created`/`create`. Only ASCII words are touched.
pub(crate) fn stem(word: &mut String) {
    if word.len() <= 3 || !word.is_ascii() {
        return;
    }
    let b = word.as_bytes();
    if ends(b, b"ies") && b.len() > 4 {
        word.truncate(word.len() - 3);
        word.push('y');
    } else if ends(b, b"sses") {
        word.truncate(word.len() - 2);
    } else if ends(b, b"s") && !(ends(b, b"ss") || ends(b, b"us") || ends(b, b"is")) {
        word.pop();
    }
    let b = word.as_bytes();
    let suffix = if ends(b, b"ing") && b.len() >= 6 {
        3
    } else if ends(b, b"ed") && b.len() >= 5 {
        2
    } else {
        0
    };
    if suffix > 0 {
        word.truncate(word.len() - suffix);
        let bytes = word.as_bytes();
        let n = bytes.len();
        // running → run, but keep ss/ll/zz (passed → pass).
        if n >= 2 && bytes[n - 1] == bytes[n - 2] && !b"aeiouslz".contains(&bytes[n - 1]) {
            word.pop();
        }
    }
    if ends(word.as_bytes(), b"e") && word.len() > 4 {
        word.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        analyze(text, &mut String::new(), |t| out.push(t.to_owned()));
        out
    }

    #[test]
    fn words_are_split_lowered_stemmed_and_stop_words_dropped() {
        assert_eq!(
            terms("Reading the Files_of a-tree"),
            ["read", "file", "tree"]
        );
        assert_eq!(terms("queries"), ["query"]);
    }

    #[test]
    fn camel_case_gives_its_parts_then_the_whole() {
        assert_eq!(terms("getFileInfo"), ["get", "file", "info", "getfileinfo"]);
        assert_eq!(terms("HTTPServer"), ["httpserver"]);
    }

    #[test]
    fn related_words_go_both_ways_and_are_analysed() {
        assert!(related("folder").iter().any(|t| &**t == "directory"));
        assert!(related("directory").iter().any(|t| &**t == "folder"));
        // "memories" was stemmed to "memory" and so met its group's other words.
        assert!(related("remember").iter().any(|t| &**t == "memory"));
        assert!(related("zebra").is_empty());
    }

    #[test]
    fn stemming_joins_common_forms() {
        let stemmed = |w: &str| {
            let mut s = w.to_owned();
            stem(&mut s);
            s
        };
        for (a, b) in [
            ("notes", "note"),
            ("queries", "query"),
            ("writing", "write"),
            ("created", "create"),
            ("running", "run"),
            ("passed", "pass"),
            ("tags", "tag"),
        ] {
            assert_eq!(stemmed(a), stemmed(b), "{a} vs {b}");
        }
        assert_ne!(stemmed("notes"), stemmed("nodes"));
    }
}
