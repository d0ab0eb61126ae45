//! Tool pins in the state directory: the SQLite file `roster.sqlite3`, so they survive
//! restarts.
//!
//! `roster tools approve`/`reject` write from another process, and the gateway notices by
//! SQLite's count of commits made by other connections (`PRAGMA data_version`). The gateway
//! asks at every turn; on Linux the version is read again only when the store's files were
//! written since the last ask ([`FileWatch`]), which saves a transaction's file locks and a
//! query per turn.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use crate::store::StoreError;
use crate::store::pins::{DecidedBy, Decision, PinBook, PinWrite, Pins, now_ms};

/// The store's file in the state directory.
pub const STORE_FILE: &str = "roster.sqlite3";

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS tool_pin (
    server      TEXT NOT NULL,
    tool        TEXT NOT NULL,
    definition  TEXT NOT NULL,
    decided_by  TEXT NOT NULL,
    decided_at  INTEGER NOT NULL,
    PRIMARY KEY (server, tool)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tool_review (
    server      TEXT NOT NULL,
    tool        TEXT NOT NULL,
    definition  TEXT NOT NULL,
    withheld    INTEGER NOT NULL,
    rejected    INTEGER NOT NULL,
    seen_at     INTEGER NOT NULL,
    PRIMARY KEY (server, tool)
) WITHOUT ROWID;
";

/// The SQLite file holding pins and reviews.
#[derive(Debug)]
pub(crate) struct SqlitePins {
    conn: Connection,
    path: String,
    /// Writes to the file since the version was last read, and that version (set up at the
    /// first ask; `None` in memory or where the files cannot be watched).
    watch: Option<(FileWatch, i64)>,
}

/// Whether anything wrote a SQLite file (or its `-wal` and `-journal` files) since the last
/// ask: an inotify watch on its directory, read without waiting. The kernel queues a write's
/// event before the writer's `write` returns, so what another process committed before a turn
/// is seen at that turn.
#[derive(Debug)]
struct FileWatch {
    #[cfg(target_os = "linux")]
    inotify: inotify::Inotify,
    #[cfg(target_os = "linux")]
    name: std::ffi::OsString,
}

impl FileWatch {
    /// Watches the file at `path`; `None` where that cannot be done (then every ask reads).
    #[cfg(target_os = "linux")]
    fn new(path: &Path) -> Option<FileWatch> {
        use inotify::WatchMask;
        let name = path.file_name()?.to_owned();
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let inotify = inotify::Inotify::init().ok()?;
        let mask = WatchMask::MODIFY
            | WatchMask::CREATE
            | WatchMask::DELETE
            | WatchMask::MOVED_TO
            | WatchMask::MOVED_FROM;
        inotify
            .watches()
            .add(dir.unwrap_or(Path::new(".")), mask)
            .ok()?;
        Some(FileWatch { inotify, name })
    }

    #[cfg(not(target_os = "linux"))]
    fn new(_path: &Path) -> Option<FileWatch> {
        None
    }

    /// Whether the file was written since the last call (`true` when unsure: the queue
    /// overflowed, or it cannot be read).
    #[cfg(target_os = "linux")]
    fn written(&mut self) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let mut buffer = [0u8; 4096];
        let mut written = false;
        loop {
            match self.inotify.read_events(&mut buffer) {
                Ok(events) => {
                    for event in events {
                        let ours = event
                            .name
                            .is_none_or(|name| name.as_bytes().starts_with(self.name.as_bytes()));
                        written |= ours || event.mask.contains(inotify::EventMask::Q_OVERFLOW);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return written,
                Err(_) => return true,
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn written(&mut self) -> bool {
        true
    }
}

impl SqlitePins {
    /// The store's path in `state_dir`.
    pub(crate) fn path_in(state_dir: &Path) -> PathBuf {
        state_dir.join(STORE_FILE)
    }

    /// Opens (creating the state directory and the file if needed) the store in `state_dir`.
    pub(crate) fn open(state_dir: &Path) -> Result<SqlitePins, StoreError> {
        crate::store::ensure_state_dir(state_dir).map_err(|source| StoreError::StateDir {
            path: state_dir.to_owned(),
            source,
        })?;
        SqlitePins::connect(Some(&SqlitePins::path_in(state_dir)))
    }

    /// Opens the store in `state_dir` only if its file exists (for commands that only read).
    pub(crate) fn open_existing(state_dir: &Path) -> Result<Option<SqlitePins>, StoreError> {
        if SqlitePins::path_in(state_dir).is_file() {
            SqlitePins::open(state_dir).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A store that lives as long as this value.
    pub(crate) fn in_memory() -> Result<SqlitePins, StoreError> {
        SqlitePins::connect(None)
    }

    fn connect(path: Option<&Path>) -> Result<SqlitePins, StoreError> {
        let (conn, path) = crate::store::open_sqlite(path, SCHEMA)?;
        Ok(SqlitePins {
            conn,
            path,
            watch: None,
        })
    }
}

impl SqlitePins {
    fn error(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Every row `sql` selects, each read by `read`.
    fn rows<T>(
        &self,
        sql: &str,
        read: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, StoreError> {
        let mut select = self.conn.prepare(sql).map_err(|e| self.error(e))?;
        select
            .query_map([], read)
            .and_then(|rows| rows.collect())
            .map_err(|e| self.error(e))
    }

    fn corrupt(&self, what: &str, error: serde_json::Error) -> StoreError {
        self.error(rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            format!("{what}: {error}").into(),
        ))
    }
}

impl Pins for SqlitePins {
    fn data_version(&mut self) -> Result<i64, StoreError> {
        if let Some((watch, version)) = &mut self.watch
            && !watch.written()
        {
            return Ok(*version);
        }
        // Watched from the first ask on, before the version is read: no write between.
        if self.watch.is_none() && self.path != ":memory:" {
            self.watch = FileWatch::new(Path::new(&self.path)).map(|watch| (watch, 0));
        }
        // Asked at every turn: the statement is parsed once.
        let version = self
            .conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
            .map_err(|e| self.error(e))?;
        if let Some((_, held)) = &mut self.watch {
            *held = version;
        }
        Ok(version)
    }

    /// Everything in the store.
    fn load(&self) -> Result<PinBook, StoreError> {
        let mut book = PinBook::default();
        let unreadable = |(what, e): (String, serde_json::Error)| self.corrupt(&what, e);
        let pins = self.rows(
            "SELECT server, tool, definition, decided_by, decided_at FROM tool_pin",
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get(4)?,
                ))
            },
        )?;
        for (server, tool, definition, decided_by, at) in pins {
            book.add_pin(server, tool, &definition, &decided_by, at)
                .map_err(unreadable)?;
        }
        let reviews = self.rows(
            "SELECT server, tool, definition, withheld, rejected, seen_at FROM tool_review",
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get::<_, String>(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            },
        )?;
        for (server, tool, definition, withheld, rejected, seen) in reviews {
            book.add_review(server, tool, &definition, withheld, rejected, seen)
                .map_err(unreadable)?;
        }
        Ok(book)
    }

    fn apply_at(
        &mut self,
        server: &str,
        writes: &[PinWrite],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let now = now_ms as i64;
        let path = self.path.clone();
        let error = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(error)?;
        for write in writes {
            match write {
                PinWrite::FirstUse { tool, pin } => {
                    // Another gateway on this state directory may have pinned it first: the
                    // first pin stands.
                    tx.execute(
                        "INSERT OR IGNORE INTO tool_pin (server, tool, definition, decided_by, decided_at) \
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                        params![server, tool, pin.canonical_json(), DecidedBy::FirstUse.as_str(), now],
                    )
                    .map_err(error)?;
                }
                PinWrite::Review {
                    tool,
                    definition,
                    withheld,
                } => {
                    // Every right-hand side reads the row as it was: a rejection stands only
                    // for the definition that was rejected.
                    tx.execute(
                        "INSERT INTO tool_review (server, tool, definition, withheld, rejected, seen_at) \
                         VALUES (?1, ?2, ?3, ?4, 0, ?5) \
                         ON CONFLICT (server, tool) DO UPDATE SET \
                           rejected = CASE WHEN definition = excluded.definition THEN rejected ELSE 0 END, \
                           definition = excluded.definition, \
                           withheld = excluded.withheld, \
                           seen_at = excluded.seen_at",
                        params![server, tool, definition.canonical_json(), withheld, now],
                    )
                    .map_err(error)?;
                }
                PinWrite::Complete { tool, held, whole } => {
                    tx.execute(
                        "UPDATE tool_pin SET definition = ?3 \
                         WHERE server = ?1 AND tool = ?2 AND definition = ?4",
                        params![server, tool, whole.canonical_json(), held.canonical_json()],
                    )
                    .map_err(error)?;
                }
                PinWrite::Settled { tool } => {
                    tx.execute(
                        "DELETE FROM tool_review WHERE server = ?1 AND tool = ?2",
                        params![server, tool],
                    )
                    .map_err(error)?;
                }
            }
        }
        tx.commit().map_err(error)
    }

    /// A person's decision on the waiting definitions of `keys` (server, tool), in one
    /// transaction. Returns the keys that had a waiting definition; the others are left alone.
    fn decide(
        &mut self,
        decision: Decision,
        keys: &[(String, String)],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let now = now_ms() as i64;
        let path = self.path.clone();
        let error = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(error)?;
        let mut decided = Vec::new();
        for (server, tool) in keys {
            let definition: Option<String> = tx
                .query_row(
                    "SELECT definition FROM tool_review WHERE server = ?1 AND tool = ?2",
                    params![server, tool],
                    |row| row.get(0),
                )
                .optional()
                .map_err(error)?;
            let Some(definition) = definition else {
                continue;
            };
            match decision {
                Decision::Approve => {
                    tx.execute(
                        "INSERT INTO tool_pin (server, tool, definition, decided_by, decided_at) \
                         VALUES (?1, ?2, ?3, ?4, ?5) \
                         ON CONFLICT (server, tool) DO UPDATE SET definition = excluded.definition, \
                           decided_by = excluded.decided_by, decided_at = excluded.decided_at",
                        params![server, tool, definition, DecidedBy::Person.as_str(), now],
                    )
                    .map_err(error)?;
                    tx.execute(
                        "DELETE FROM tool_review WHERE server = ?1 AND tool = ?2",
                        params![server, tool],
                    )
                    .map_err(error)?;
                }
                Decision::Reject => {
                    tx.execute(
                        "UPDATE tool_review SET rejected = 1, withheld = 1 WHERE server = ?1 AND tool = ?2",
                        params![server, tool],
                    )
                    .map_err(error)?;
                }
            }
            decided.push((server.clone(), tool.clone()));
        }
        tx.commit().map_err(error)?;
        Ok(decided)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::pins::PinStore;
    use roster_core::pin::Pin;

    fn open_in_memory() -> Result<PinStore, StoreError> {
        SqlitePins::in_memory().map(PinStore::new)
    }

    fn open(state_dir: &Path) -> Result<PinStore, StoreError> {
        SqlitePins::open(state_dir).map(PinStore::new)
    }
    use roster_core::Tool;
    use serde_json::json;

    fn pin(description: &str) -> Pin {
        let Ok(schema) = serde_json::from_value(json!({"type": "object"})) else {
            panic!("a schema object")
        };
        Pin::of(
            &Tool::new("echo")
                .with_description(description)
                .with_input_schema(schema),
        )
    }

    fn key(server: &str, tool: &str) -> (String, String) {
        (server.to_owned(), tool.to_owned())
    }

    #[test]
    fn first_use_pins_and_a_person_approves_what_waits() {
        let mut store = open_in_memory().expect("store");
        store
            .apply(
                "a",
                &[PinWrite::FirstUse {
                    tool: "echo".into(),
                    pin: pin("v1"),
                }],
            )
            .expect("pin");
        // A second first use does not replace the pin.
        store
            .apply(
                "a",
                &[PinWrite::FirstUse {
                    tool: "echo".into(),
                    pin: pin("other"),
                }],
            )
            .expect("pin again");
        store
            .apply(
                "a",
                &[PinWrite::Review {
                    tool: "echo".into(),
                    definition: pin("v2"),
                    withheld: true,
                }],
            )
            .expect("review");
        let book = store.load().expect("load");
        let a = book.server("a").expect("server a");
        assert_eq!(a.pins["echo"].pin, pin("v1"));
        assert_eq!(a.pins["echo"].decided_by, DecidedBy::FirstUse);
        assert!(a.reviews["echo"].withheld);
        assert_eq!(book.reviews().len(), 1);

        let decided = store
            .decide(Decision::Approve, &[key("a", "echo"), key("a", "nothing")])
            .expect("approve");
        assert_eq!(decided, vec![key("a", "echo")]);
        let book = store.load().expect("load");
        let a = book.server("a").expect("server a");
        assert_eq!(a.pins["echo"].pin, pin("v2"));
        assert_eq!(a.pins["echo"].decided_by, DecidedBy::Person);
        assert!(a.reviews.is_empty());
    }

    #[test]
    fn a_rejection_stands_for_its_definition_only() {
        let mut store = open_in_memory().expect("store");
        let review = |d: &str| PinWrite::Review {
            tool: "echo".into(),
            definition: pin(d),
            withheld: false,
        };
        store.apply("a", &[review("v2")]).expect("review");
        store
            .decide(Decision::Reject, &[key("a", "echo")])
            .expect("reject");
        store.apply("a", &[review("v2")]).expect("same again");
        let rejected = |store: &PinStore| {
            store.load().expect("load").servers["a"].reviews["echo"]
                .review
                .rejected
        };
        assert!(rejected(&store), "the same definition stays rejected");
        store.apply("a", &[review("v3")]).expect("a different one");
        assert!(!rejected(&store), "a different definition asks again");
        store
            .apply(
                "a",
                &[PinWrite::Settled {
                    tool: "echo".into(),
                }],
            )
            .expect("settled");
        assert!(store.load().expect("load").reviews().is_empty());
    }

    #[test]
    fn every_commit_of_another_connection_is_seen_at_the_next_ask() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut gateway = SqlitePins::open(dir.path()).expect("open");
        let mut cli = open(dir.path()).expect("open again");
        let version = gateway.data_version().expect("version");
        #[cfg(target_os = "linux")]
        assert!(gateway.watch.is_some(), "the store's files are watched");
        // Asked again with nothing written, or only a file beside the store: the same.
        assert_eq!(gateway.data_version().expect("version"), version);
        std::fs::write(dir.path().join("inbox.jsonl"), "x").expect("write");
        assert_eq!(gateway.data_version().expect("version"), version);
        let mut last = version;
        for round in 0..3 {
            cli.apply(
                "a",
                &[PinWrite::FirstUse {
                    tool: format!("echo{round}"),
                    pin: pin("v1"),
                }],
            )
            .expect("pin");
            let now = gateway.data_version().expect("version");
            assert_ne!(now, last, "round {round}: the other connection's commit");
            assert_eq!(
                gateway.data_version().expect("version"),
                now,
                "round {round}"
            );
            last = now;
        }
        // The gateway's own writes do not change its version.
        let before = gateway.data_version().expect("version");
        gateway
            .apply_at(
                "b",
                &[PinWrite::FirstUse {
                    tool: "own".into(),
                    pin: pin("v1"),
                }],
                now_ms(),
            )
            .expect("pin");
        assert_eq!(gateway.data_version().expect("version"), before);
    }

    #[test]
    fn another_connection_s_commit_changes_the_data_version_and_survives_reopening() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut gateway = open(dir.path()).expect("open");
        let before = gateway.data_version().expect("version");
        let mut cli = open(dir.path()).expect("open again");
        cli.apply(
            "a",
            &[PinWrite::FirstUse {
                tool: "echo".into(),
                pin: pin("v1"),
            }],
        )
        .expect("pin");
        assert_ne!(gateway.data_version().expect("version"), before);
        assert_eq!(
            gateway.load().expect("load"),
            open(dir.path()).expect("reopen").load().expect("load")
        );
        let book = gateway.load().expect("load");
        assert_eq!(book.changed_servers(&PinBook::default()), vec!["a"]);
        assert!(book.changed_servers(&book).is_empty());
    }

    #[test]
    fn the_book_follows_the_same_writes_as_the_store() {
        let mut store = open_in_memory().expect("store");
        let mut book = PinBook::default();
        let steps: Vec<Vec<PinWrite>> = vec![
            vec![PinWrite::FirstUse {
                tool: "echo".into(),
                pin: pin("v1"),
            }],
            vec![PinWrite::Review {
                tool: "echo".into(),
                definition: pin("v2"),
                withheld: true,
            }],
            vec![PinWrite::Review {
                tool: "echo".into(),
                definition: pin("v3"),
                withheld: false,
            }],
            vec![PinWrite::Settled {
                tool: "echo".into(),
            }],
        ];
        for writes in steps {
            store.apply_at("a", &writes, 7).expect("apply");
            book.apply("a", &writes, 7);
            assert_eq!(book, store.load().expect("load"));
        }
        store
            .apply_at(
                "a",
                &[PinWrite::Review {
                    tool: "echo".into(),
                    definition: pin("v2"),
                    withheld: true,
                }],
                8,
            )
            .expect("apply");
        store
            .decide(Decision::Reject, &[key("a", "echo")])
            .expect("reject");
        let mut book = store.load().expect("load");
        let again = [PinWrite::Review {
            tool: "echo".into(),
            definition: pin("v2"),
            withheld: true,
        }];
        store.apply_at("a", &again, 9).expect("apply");
        book.apply("a", &again, 9);
        assert_eq!(
            book,
            store.load().expect("load"),
            "the rejection stands in both"
        );
    }

    /// `pin(description)` as an older roster stored it: description and schemas only.
    fn stored_before(description: &str) -> Pin {
        let text = format!(
            r#"{{"description":{},"inputSchema":{{"type":"object"}}}}"#,
            serde_json::to_string(description).expect("JSON")
        );
        serde_json::from_str(&text).expect("an older pin reads")
    }

    #[test]
    fn a_pin_stored_before_is_completed_unless_a_person_decided_on_it_since() {
        let mut store = SqlitePins::in_memory().expect("store");
        let held = stored_before("v1");
        store
            .conn
            .execute(
                "INSERT INTO tool_pin (server, tool, definition, decided_by, decided_at) \
                 VALUES ('a', 'echo', ?1, 'person', 5)",
                [held.canonical_json()],
            )
            .expect("an older row");
        let mut book = store.load().expect("load");
        assert_eq!(
            book.servers["a"].pins["echo"].pin, held,
            "it reads back as written"
        );
        let mut whole = pin("v1");
        whole.title = Some("Echo".to_owned());
        let complete = [PinWrite::Complete {
            tool: "echo".into(),
            held: Box::new(held.clone()),
            whole: Box::new(whole.clone()),
        }];
        store.apply_at("a", &complete, 9).expect("apply");
        book.apply("a", &complete, 9);
        assert_eq!(book, store.load().expect("load"));
        let record = &book.servers["a"].pins["echo"];
        assert_eq!(record.pin, whole);
        assert_eq!(
            (record.decided_by, record.decided_at_ms),
            (DecidedBy::Person, 5),
            "who approved it, and when, stay"
        );
        // Completed once: the same write again (a person approved something else meanwhile,
        // or another gateway completed it) changes nothing.
        let other = [PinWrite::Complete {
            tool: "echo".into(),
            held: Box::new(held),
            whole: Box::new(pin("v9")),
        }];
        store.apply_at("a", &other, 10).expect("apply");
        book.apply("a", &other, 10);
        assert_eq!(book, store.load().expect("load"));
        assert_eq!(book.servers["a"].pins["echo"].pin, whole);
    }

    #[test]
    fn a_store_that_cannot_be_opened_names_its_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "x").expect("write");
        let error = open(&file).expect_err("a file is no state directory");
        assert!(error.to_string().contains("not-a-dir"), "{error}");
    }
}
