//! Durable backends. The hub keeps every object in memory and serves reads and
//! watches from there; a backend only has to load everything at start and
//! commit batches of mutations durably. That narrow contract is what lets an
//! etcd backend be added later.

use std::path::Path;

use anyhow::Context;
use rusqlite::{params, Connection};

use super::ObjectKey;

/// One change to persist.
#[derive(Debug, Clone)]
pub enum Mutation {
    Put {
        key: ObjectKey,
        rv: u64,
        value: bytes::Bytes,
    },
    Delete {
        key: ObjectKey,
    },
}

/// Everything a backend holds, as loaded at start.
#[derive(Debug, Default)]
pub struct Loaded {
    pub objects: Vec<(ObjectKey, u64, Vec<u8>)>,
    /// The highest resourceVersion ever committed (deletions included).
    pub resource_version: u64,
}

/// A durable store of objects.
pub trait Backend: Send + 'static {
    /// Read every object and the current resourceVersion.
    fn load(&mut self) -> anyhow::Result<Loaded>;
    /// Apply a batch atomically and durably; `resource_version` is the highest
    /// revision in the batch. Returns only once the batch survives a crash.
    fn commit(&mut self, batch: &[Mutation], resource_version: u64) -> anyhow::Result<()>;
}

/// Keeps nothing: for tests and benchmarks that measure everything but the disk.
#[derive(Debug, Default)]
pub struct MemoryBackend;

impl Backend for MemoryBackend {
    fn load(&mut self) -> anyhow::Result<Loaded> {
        Ok(Loaded::default())
    }
    fn commit(&mut self, _batch: &[Mutation], _resource_version: u64) -> anyhow::Result<()> {
        Ok(())
    }
}

/// SQLite in WAL mode with `synchronous=FULL`: a committed transaction survives
/// power loss, and batching many writes per transaction keeps that cheap.
pub struct SqliteBackend {
    conn: Connection,
}

impl SqliteBackend {
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS objects ({OBJECTS_COLUMNS});
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
        ))?;
        move_to_rowid_table(&conn)?;
        Ok(SqliteBackend { conn })
    }
}

/// First byte of a stored value that is an LZ4 block (the JSON's length in
/// front); any other value is the JSON itself, which starts with `{`. An
/// object's JSON compresses to a half or less (managedFields, repeated key
/// names), and what is stored is read back only when the hub starts.
const LZ4: u8 = 0x04;

/// What is stored for an object's JSON: compressed when that is shorter.
fn encode(json: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let compressed = lz4_flex::block::compress_prepend_size(json);
    if compressed.len() + 1 < json.len() {
        let mut value = Vec::with_capacity(compressed.len() + 1);
        value.push(LZ4);
        value.extend_from_slice(&compressed);
        value.into()
    } else {
        json.into()
    }
}

/// The JSON a stored value holds.
fn decode(value: Vec<u8>) -> anyhow::Result<Vec<u8>> {
    match value.split_first() {
        Some((&LZ4, block)) => Ok(lz4_flex::block::decompress_size_prepended(block)?),
        _ => Ok(value),
    }
}

/// The objects table's columns. A table with rowids: its leaf pages hold rows of up
/// to ~4 KB in place, where a `WITHOUT ROWID` table (what hubs before made) sends
/// the part of any row over ~1 KB to an overflow page of its own — a whole 4 KiB
/// page for most objects, three quarters of a fresh workspace's bytes on disk.
const OBJECTS_COLUMNS: &str = "cluster TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL,
    name TEXT NOT NULL, rv INTEGER NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (cluster, resource, namespace, name)";

/// A database made by an earlier hub keeps its objects in a `WITHOUT ROWID`
/// table: copy them into a table with rowids, in one transaction (a crash
/// leaves the old table as it was).
fn move_to_rowid_table(conn: &Connection) -> anyhow::Result<()> {
    let sql: String = conn.query_row(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'objects'",
        [],
        |r| r.get(0),
    )?;
    if !sql.to_ascii_uppercase().contains("WITHOUT ROWID") {
        return Ok(());
    }
    conn.execute_batch(&format!(
        "BEGIN;
         ALTER TABLE objects RENAME TO objects_without_rowid;
         CREATE TABLE objects ({OBJECTS_COLUMNS});
         INSERT INTO objects SELECT cluster, resource, namespace, name, rv, value FROM objects_without_rowid;
         DROP TABLE objects_without_rowid;
         COMMIT;
         VACUUM;"
    ))?;
    Ok(())
}

impl Backend for SqliteBackend {
    fn load(&mut self) -> anyhow::Result<Loaded> {
        let mut loaded = Loaded::default();
        let mut stmt = self
            .conn
            .prepare("SELECT cluster, resource, namespace, name, rv, value FROM objects")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                ObjectKey {
                    cluster: r.get(0)?,
                    resource: r.get(1)?,
                    namespace: r.get(2)?,
                    name: r.get(3)?,
                },
                r.get::<_, i64>(4)? as u64,
                r.get::<_, Vec<u8>>(5)?,
            ))
        })?;
        for row in rows {
            let (key, rv, value) = row?;
            let value = decode(value)
                .with_context(|| format!("reading {}/{} of {}", key.resource, key.name, key.cluster))?;
            loaded.objects.push((key, rv, value));
        }
        let rv: Option<i64> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'resource_version'", [], |r| {
                r.get(0)
            })
            .ok();
        loaded.resource_version = rv.unwrap_or(0) as u64;
        Ok(loaded)
    }

    fn commit(&mut self, batch: &[Mutation], resource_version: u64) -> anyhow::Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut put = tx.prepare_cached(
                // An update keeps the row's rowid, so it stays in its page when it fits
                // (a replace would leave a hole there and append the row at the end).
                "INSERT INTO objects (cluster, resource, namespace, name, rv, value)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (cluster, resource, namespace, name)
                 DO UPDATE SET rv = excluded.rv, value = excluded.value",
            )?;
            let mut del = tx.prepare_cached(
                "DELETE FROM objects WHERE cluster = ?1 AND resource = ?2 AND namespace = ?3 AND name = ?4",
            )?;
            for m in batch {
                match m {
                    Mutation::Put { key, rv, value } => {
                        put.execute(params![
                            key.cluster,
                            key.resource,
                            key.namespace,
                            key.name,
                            *rv as i64,
                            encode(value).as_ref()
                        ])?;
                    }
                    Mutation::Delete { key } => {
                        del.execute(params![key.cluster, key.resource, key.namespace, key.name])?;
                    }
                }
            }
            // Cached like the two above: preparing it anew was 1–2% of a busy hub's time.
            tx.prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES ('resource_version', ?1)")?
                .execute(params![resource_version as i64])?;
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::key;

    fn put(name: &str, rv: u64, value: &str) -> Mutation {
        Mutation::Put {
            key: key(name),
            rv,
            value: bytes::Bytes::from(value.to_string()),
        }
    }

    fn schema(path: &Path) -> String {
        Connection::open(path)
            .unwrap()
            .query_row("SELECT sql FROM sqlite_master WHERE name = 'objects'", [], |r| {
                r.get(0)
            })
            .unwrap()
    }

    #[test]
    fn a_database_of_an_earlier_hub_keeps_its_objects_in_a_rowid_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.db");
        {
            // The schema hubs made before.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE objects (
                    cluster TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL,
                    name TEXT NOT NULL, rv INTEGER NOT NULL, value BLOB NOT NULL,
                    PRIMARY KEY (cluster, resource, namespace, name)) WITHOUT ROWID;
                 CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
                 INSERT INTO objects VALUES ('root', '/configmaps', 'default', 'a', 7, x'7b7d');
                 INSERT INTO meta VALUES ('resource_version', 9);",
            )
            .unwrap();
        }
        let mut backend = SqliteBackend::open(&path).unwrap();
        let loaded = backend.load().unwrap();
        assert_eq!(loaded.objects, vec![(key("a"), 7, b"{}".to_vec())]);
        assert_eq!(loaded.resource_version, 9);
        assert!(
            !schema(&path).to_ascii_uppercase().contains("WITHOUT ROWID"),
            "{}",
            schema(&path)
        );
        // It takes writes as any database does, and opens again as it is.
        backend
            .commit(&[put("a", 10, "{\"v\":2}"), put("b", 11, "{}")], 11)
            .unwrap();
        drop(backend);
        let loaded = SqliteBackend::open(&path).unwrap().load().unwrap();
        assert_eq!(loaded.objects.len(), 2);
        assert!(loaded.objects.contains(&(key("a"), 10, b"{\"v\":2}".to_vec())));
        assert_eq!(loaded.resource_version, 11);
    }

    #[test]
    fn object_json_is_stored_compressed_and_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.db");
        let mut backend = SqliteBackend::open(&path).unwrap();
        let managed =
            r#"{"manager":"ferry-hub","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1"}"#;
        let big = format!(
            r#"{{"metadata":{{"name":"a","managedFields":[{}]}}}}"#,
            [managed; 8].join(",")
        );
        let tiny = r#"{}"#;
        backend
            .commit(&[put("a", 1, &big), put("b", 2, tiny)], 2)
            .unwrap();
        let stored = |name: &str| -> Vec<u8> {
            backend
                .conn
                .query_row("SELECT value FROM objects WHERE name = ?1", [name], |r| r.get(0))
                .unwrap()
        };
        let (a, b) = (stored("a"), stored("b"));
        assert_eq!(a[0], LZ4);
        assert!(
            a.len() * 2 < big.len(),
            "{} bytes stored for {}",
            a.len(),
            big.len()
        );
        assert_eq!(b, tiny.as_bytes(), "what does not shrink is stored as it is");
        let mut loaded = backend.load().unwrap().objects;
        loaded.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(
            loaded,
            vec![
                (key("a"), 1, big.into_bytes()),
                (key("b"), 2, tiny.as_bytes().to_vec())
            ]
        );
    }

    #[test]
    fn an_update_replaces_the_row_in_place_and_a_delete_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.db");
        let mut backend = SqliteBackend::open(&path).unwrap();
        backend
            .commit(&[put("a", 1, "{}"), put("b", 2, "{}")], 2)
            .unwrap();
        let rowid = |b: &SqliteBackend| -> i64 {
            b.conn
                .query_row("SELECT rowid FROM objects WHERE name = 'a'", [], |r| r.get(0))
                .unwrap()
        };
        let before = rowid(&backend);
        backend.commit(&[put("a", 3, "{\"v\":2}")], 3).unwrap();
        assert_eq!(rowid(&backend), before);
        backend.commit(&[Mutation::Delete { key: key("b") }], 4).unwrap();
        let loaded = backend.load().unwrap();
        assert_eq!(loaded.objects, vec![(key("a"), 3, b"{\"v\":2}".to_vec())]);
        assert_eq!(loaded.resource_version, 4);
    }
}
