//! Durable backends. The hub keeps every object in memory and serves reads and
//! watches from there; a backend only has to load everything at start and
//! commit batches of mutations durably. That narrow contract is what lets an
//! etcd backend be added later.

use std::path::Path;

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
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS objects (
                cluster TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL,
                name TEXT NOT NULL, rv INTEGER NOT NULL, value BLOB NOT NULL,
                PRIMARY KEY (cluster, resource, namespace, name)) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);",
        )?;
        Ok(SqliteBackend { conn })
    }
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
            loaded.objects.push(row?);
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
                "INSERT OR REPLACE INTO objects (cluster, resource, namespace, name, rv, value)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
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
                            value.as_ref()
                        ])?;
                    }
                    Mutation::Delete { key } => {
                        del.execute(params![key.cluster, key.resource, key.namespace, key.name])?;
                    }
                }
            }
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('resource_version', ?1)",
                params![resource_version as i64],
            )?;
        }
        tx.commit()?;
        Ok(())
    }
}
