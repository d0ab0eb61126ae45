//! The skill catalog in one SQLite file (or in memory): what `index_dir` writes and
//! `load_catalog` reads (see [`crate::store::CatalogStore`]).

use std::collections::HashMap;
use std::path::Path;

use roster_core::skills::SkillSource;
use rusqlite::{Connection, params};

use crate::store::{CatalogStore, IndexStats, StoreError};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS skill_source (
    dir  TEXT PRIMARY KEY NOT NULL,
    text TEXT NOT NULL,
    hash INTEGER NOT NULL
) WITHOUT ROWID;
";

/// A catalog store in one SQLite file (or in memory).
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    path: String,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let (conn, path) = crate::store::open_sqlite(Some(path), SCHEMA)?;
        Ok(SqliteStore { conn, path })
    }

    /// A store that lives as long as this value.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        let (conn, path) = crate::store::open_sqlite(None, SCHEMA)?;
        Ok(SqliteStore { conn, path })
    }

    fn error(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }
}

fn hash(text: &str) -> i64 {
    // Stored as SQLite's signed 64-bit integer; only equality matters.
    xxhash_rust::xxh3::xxh3_64(text.as_bytes()) as i64
}

impl CatalogStore for SqliteStore {
    fn replace_all(&mut self, sources: &[SkillSource]) -> Result<IndexStats, StoreError> {
        let path = self.path.clone();
        let error = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(error)?;
        let mut stats = IndexStats::default();
        {
            let mut stored: HashMap<String, i64> = HashMap::new();
            let mut select = tx
                .prepare("SELECT dir, hash FROM skill_source")
                .map_err(error)?;
            let rows = select
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(error)?;
            for row in rows {
                let (dir, hash) = row.map_err(error)?;
                stored.insert(dir, hash);
            }
            let mut upsert = tx
                .prepare("INSERT INTO skill_source (dir, text, hash) VALUES (?1, ?2, ?3) ON CONFLICT(dir) DO UPDATE SET text = excluded.text, hash = excluded.hash")
                .map_err(error)?;
            for source in sources {
                let new = hash(&source.text);
                match stored.remove(&source.dir) {
                    Some(old) if old == new => {
                        stats.unchanged += 1;
                        continue;
                    }
                    Some(_) => stats.updated += 1,
                    None => stats.added += 1,
                }
                upsert
                    .execute(params![source.dir, source.text, new])
                    .map_err(error)?;
            }
            let mut delete = tx
                .prepare("DELETE FROM skill_source WHERE dir = ?1")
                .map_err(error)?;
            for dir in stored.keys() {
                delete.execute([dir]).map_err(error)?;
                stats.removed += 1;
            }
        }
        tx.commit().map_err(error)?;
        Ok(stats)
    }

    fn sources(&self) -> Result<Vec<SkillSource>, StoreError> {
        let mut select = self
            .conn
            .prepare("SELECT dir, text FROM skill_source ORDER BY dir")
            .map_err(|e| self.error(e))?;
        let rows = select
            .query_map([], |row| {
                Ok(SkillSource::new(
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                ))
            })
            .map_err(|e| self.error(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.error(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(dir: &str, description: &str) -> SkillSource {
        let name = dir.rsplit('/').next().unwrap_or(dir);
        SkillSource::new(
            dir,
            format!("---\nname: {name}\ndescription: {description}\n---\n"),
        )
    }

    #[test]
    fn replace_all_adds_updates_removes_and_keeps() {
        let mut store = SqliteStore::open_in_memory().expect("in-memory sqlite");
        let stats = store
            .replace_all(&[source("a", "one"), source("ns/b", "two")])
            .expect("first index");
        assert_eq!(
            stats,
            IndexStats {
                added: 2,
                ..IndexStats::default()
            }
        );
        let stats = store
            .replace_all(&[source("ns/b", "changed"), source("c", "three")])
            .expect("second index");
        assert_eq!(
            stats,
            IndexStats {
                added: 1,
                updated: 1,
                removed: 1,
                unchanged: 0
            }
        );
        let stats = store
            .replace_all(&[source("ns/b", "changed"), source("c", "three")])
            .expect("third index");
        assert_eq!(
            stats,
            IndexStats {
                unchanged: 2,
                ..IndexStats::default()
            }
        );
        assert_eq!(
            store.sources().expect("read"),
            vec![source("c", "three"), source("ns/b", "changed")]
        );
    }

    #[test]
    fn a_file_store_survives_reopening() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("catalog.sqlite");
        SqliteStore::open(&path)
            .expect("open")
            .replace_all(&[source("a", "one")])
            .expect("index");
        assert_eq!(
            SqliteStore::open(&path)
                .expect("reopen")
                .sources()
                .expect("read"),
            vec![source("a", "one")]
        );
    }

    #[test]
    fn a_database_that_cannot_be_opened_names_its_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        let error = SqliteStore::open(&dir.path().join("missing/dir/catalog.sqlite"))
            .expect_err("cannot open");
        assert!(
            error.to_string().contains("missing/dir/catalog.sqlite"),
            "{error}"
        );
    }
}
