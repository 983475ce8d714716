//! etcd as the hub's storage, as kube-apiserver uses it: every object is one
//! key, `<prefix>/<cluster>/<group>/<plural>/<namespace>/<name>` (empty
//! group and namespace segments for the core group and cluster-scoped
//! objects); the resourceVersion the hub serves is the key's mod revision;
//! every write is a transaction that compares the key's mod revision (or, for
//! a create, that it has none), so two hubs on one etcd can never lose each
//! other's updates. The value is the object's JSON without its
//! resourceVersion (etcd's revision is the one truth).
//!
//! The store keeps serving reads and watches from memory: it loads the
//! prefix once, then follows one etcd watch from the revision it read
//! ([`super::Store::open_etcd`]).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, Identity, TlsOptions,
    Txn, TxnOp, TxnOpResponse, WatchOptions, WatchStream,
};

use super::{Expect, ObjectKey};

/// How a hub reaches etcd (`--etcd-servers`, `--etcd-prefix`, `--etcd-cafile`,
/// `--etcd-certfile`, `--etcd-keyfile`, as kube-apiserver names them).
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// `http://host:port` or `https://host:port`, one per member.
    pub servers: Vec<String>,
    /// Every key the hub writes starts with this (no trailing `/`).
    pub prefix: String,
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

/// kube-apiserver's default `--etcd-prefix` is `/registry`; Ferry's own.
pub const DEFAULT_PREFIX: &str = "/ferry";

impl EtcdOptions {
    pub fn new(servers: Vec<String>) -> Self {
        EtcdOptions {
            servers,
            prefix: DEFAULT_PREFIX.to_string(),
            ca_file: None,
            cert_file: None,
            key_file: None,
        }
    }
}

/// How long one etcd request may take before the hub answers 503.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Objects per page when loading the prefix (bounded gRPC messages).
const LOAD_PAGE: i64 = 1000;

/// A connected etcd client and the hub's key layout in it.
#[derive(Clone)]
pub struct Etcd {
    client: Client,
    prefix: String,
}

/// One object as etcd holds it.
pub(crate) struct EtcdObject {
    pub key: ObjectKey,
    pub mod_revision: u64,
    pub value: Vec<u8>,
}

/// Why etcd refused a write: what the key held instead of what was expected.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The key exists (create), at this mod revision.
    AlreadyExists { mod_revision: u64 },
    /// The key does not exist.
    NotFound,
    /// The key exists at another mod revision.
    Conflict { mod_revision: u64 },
    /// etcd could not be reached or answered an error.
    Unavailable(String),
}

/// A write etcd accepted.
pub(crate) struct Accepted {
    /// The revision the transaction created: the object's resourceVersion.
    pub revision: u64,
    /// For a delete: the value the key held.
    pub previous: Option<Vec<u8>>,
}

fn unavailable(e: impl std::fmt::Display) -> Refused {
    Refused::Unavailable(format!("etcd: {e}"))
}

/// How often a request that never reached etcd is sent again.
const UNSENT_RETRIES: usize = 6;

/// Whether the request never reached etcd: the client spreads requests over
/// `--etcd-servers` and keeps picking a member that is down, whose connection
/// is refused. Sending such a request again is safe (nothing was written),
/// and the next pick is another member — so a dead member of three costs a
/// retry, not a 503. A request that reached etcd and then failed is never
/// sent again: a transaction that may have committed would then be refused
/// by its own write.
fn not_sent(e: &etcd_client::Error) -> bool {
    let text = format!("{e:?}");
    text.contains("ConnectError") || text.contains("tcp connect error")
}

/// `call`, again while it fails without reaching etcd.
async fn unless_unsent<T, F, Fut>(mut call: F) -> Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
{
    let mut attempt = 0;
    loop {
        match call().await {
            Err(e) if attempt < UNSENT_RETRIES && not_sent(&e) => attempt += 1,
            other => return other,
        }
    }
}

impl Etcd {
    /// Connect and check that etcd answers, so a wrong `--etcd-servers` fails
    /// the start with a message instead of every request later.
    pub async fn connect(opts: &EtcdOptions) -> anyhow::Result<Etcd> {
        if opts.servers.is_empty() {
            anyhow::bail!(
                "--storage etcd needs --etcd-servers (for example --etcd-servers http://127.0.0.1:2379)"
            );
        }
        let prefix = opts.prefix.trim_end_matches('/').to_string();
        if !prefix.starts_with('/') {
            anyhow::bail!(
                "--etcd-prefix {:?} must start with '/' (for example {DEFAULT_PREFIX})",
                opts.prefix
            );
        }
        let mut connect = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT)
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
            .with_keep_alive_while_idle(true);
        if opts.ca_file.is_some() || opts.cert_file.is_some() || opts.key_file.is_some() {
            let read = |f: &Option<PathBuf>, flag: &str| -> anyhow::Result<Option<Vec<u8>>> {
                f.as_ref()
                    .map(|p| std::fs::read(p).with_context(|| format!("reading {flag} {}", p.display())))
                    .transpose()
            };
            let mut tls = TlsOptions::new();
            if let Some(ca) = read(&opts.ca_file, "--etcd-cafile")? {
                tls = tls.ca_certificate(Certificate::from_pem(ca));
            }
            match (
                read(&opts.cert_file, "--etcd-certfile")?,
                read(&opts.key_file, "--etcd-keyfile")?,
            ) {
                (Some(cert), Some(key)) => tls = tls.identity(Identity::from_pem(cert, key)),
                (None, None) => {}
                _ => anyhow::bail!("--etcd-certfile and --etcd-keyfile must be given together"),
            }
            connect = connect.with_tls(tls);
        }
        let client = Client::connect(&opts.servers, Some(connect))
            .await
            .with_context(|| format!("connecting to etcd at {}", opts.servers.join(",")))?;
        let etcd = Etcd { client, prefix };
        etcd.ping().await.with_context(|| {
            format!(
                "etcd at {} does not answer; check --etcd-servers and that etcd is running",
                opts.servers.join(",")
            )
        })?;
        Ok(etcd)
    }

    /// One cheap read: whether etcd answers now.
    pub async fn ping(&self) -> anyhow::Result<()> {
        self.revision().await.map(|_| ())
    }

    /// etcd's current revision (of the whole store, not only the prefix).
    pub async fn revision(&self) -> anyhow::Result<u64> {
        let check = unless_unsent(|| {
            let mut kv = self.client.kv_client();
            let prefix = self.prefix.clone();
            async move { kv.get(prefix, Some(GetOptions::new().with_count_only())).await }
        });
        let response = tokio::time::timeout(Duration::from_secs(2), check)
            .await
            .map_err(|_| anyhow::anyhow!("no answer within 2s"))??;
        Ok(response.header().map(|h| h.revision()).unwrap_or(0).max(0) as u64)
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The etcd key of an object.
    pub(crate) fn key(&self, key: &ObjectKey) -> String {
        object_key(&self.prefix, key)
    }

    /// The object an etcd key names, if it names one.
    pub(crate) fn parse_key(&self, raw: &[u8]) -> Option<ObjectKey> {
        parse_object_key(&self.prefix, raw)
    }

    /// The key range every object key is in.
    fn range(&self) -> (Vec<u8>, Vec<u8>) {
        let start = format!("{}/", self.prefix).into_bytes();
        let mut end = start.clone();
        // '/' + 1 = '0': the first key after every `<prefix>/...`.
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        (start, end)
    }

    /// Every object under the prefix, read at one revision, and that revision.
    pub(crate) async fn load(&self) -> anyhow::Result<(Vec<EtcdObject>, u64)> {
        let kv = self.client.kv_client();
        let (mut from, end) = self.range();
        let mut revision = 0i64;
        let mut objects = Vec::new();
        loop {
            let mut options = GetOptions::new().with_range(end.clone()).with_limit(LOAD_PAGE);
            if revision > 0 {
                options = options.with_revision(revision);
            }
            let page = unless_unsent(|| {
                let (mut kv, from, options) = (kv.clone(), from.clone(), options.clone());
                async move { kv.get(from, Some(options)).await }
            })
            .await
            .context("reading objects from etcd")?;
            if revision == 0 {
                revision = page.header().map(|h| h.revision()).unwrap_or(0);
            }
            for item in page.kvs() {
                if let Some(key) = self.parse_key(item.key()) {
                    objects.push(EtcdObject {
                        key,
                        mod_revision: item.mod_revision() as u64,
                        value: item.value().to_vec(),
                    });
                }
            }
            match page.kvs().last() {
                Some(last) if page.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => break,
            }
        }
        Ok((objects, revision.max(0) as u64))
    }

    /// Write `value` at `key` (`None`: delete it) if the key is as `expect`
    /// says, in one transaction; when it is not, read what it is instead.
    pub(crate) async fn write(
        &self,
        key: &ObjectKey,
        expect: Expect,
        value: Option<Vec<u8>>,
    ) -> Result<Accepted, Refused> {
        let k = self.key(key);
        let compare = match expect {
            Expect::Absent => Compare::version(k.clone(), CompareOp::Equal, 0),
            Expect::Exists => Compare::version(k.clone(), CompareOp::Greater, 0),
            Expect::Version(rv) => Compare::mod_revision(k.clone(), CompareOp::Equal, rv as i64),
        };
        let is_delete = value.is_none();
        let op = match value {
            Some(v) => TxnOp::put(k.clone(), v, None),
            None => TxnOp::delete(k.clone(), Some(DeleteOptions::new().with_prev_key())),
        };
        let txn = Txn::new()
            .when(vec![compare])
            .and_then(vec![op])
            .or_else(vec![TxnOp::get(k, Some(GetOptions::new().with_keys_only()))]);
        let send = unless_unsent(|| {
            let (mut kv, txn) = (self.client.kv_client(), txn.clone());
            async move { kv.txn(txn).await }
        });
        let response = tokio::time::timeout(REQUEST_TIMEOUT, send)
            .await
            .map_err(|_| unavailable(format!("no answer within {REQUEST_TIMEOUT:?}")))?
            .map_err(unavailable)?;
        let revision = response.header().map(|h| h.revision()).unwrap_or(0).max(0) as u64;
        let responses = response.op_responses();
        if response.succeeded() {
            let previous = match responses.into_iter().next() {
                Some(TxnOpResponse::Delete(d)) => d.prev_kvs().first().map(|kv| kv.value().to_vec()),
                _ => None,
            };
            if is_delete && previous.is_none() {
                // Deleted between the compare and the delete cannot happen in
                // one transaction; a key without a value is not ours.
                return Err(Refused::NotFound);
            }
            return Ok(Accepted { revision, previous });
        }
        let current = match responses.into_iter().next() {
            Some(TxnOpResponse::Get(g)) => g.kvs().first().map(|kv| kv.mod_revision() as u64),
            _ => None,
        };
        Err(match (expect, current) {
            (Expect::Absent, Some(mod_revision)) => Refused::AlreadyExists { mod_revision },
            (_, None) => Refused::NotFound,
            (_, Some(mod_revision)) => Refused::Conflict { mod_revision },
        })
    }

    /// A watch on every key under the prefix, from `revision` on.
    pub(crate) async fn watch_from(&self, revision: u64) -> Result<WatchStream, etcd_client::Error> {
        let (start, end) = self.range();
        let mut watch = self.client.watch_client();
        watch
            .watch(
                start,
                Some(
                    WatchOptions::new()
                        .with_range(end)
                        .with_start_revision(revision as i64)
                        .with_progress_notify(),
                ),
            )
            .await
    }

    /// The value at `<prefix>/<name>` if absent put `value` there; returns
    /// what the key holds afterwards (ours, or the one another hub put first).
    pub async fn put_once(&self, name: &str, value: Vec<u8>) -> anyhow::Result<Vec<u8>> {
        let k = format!("{}/{name}", self.prefix);
        let txn = Txn::new()
            .when(vec![Compare::version(k.clone(), CompareOp::Equal, 0)])
            .and_then(vec![TxnOp::put(k.clone(), value.clone(), None)])
            .or_else(vec![TxnOp::get(k.clone(), None)]);
        let mut kv = self.client.kv_client();
        let response = kv
            .txn(txn)
            .await
            .with_context(|| format!("writing {k} to etcd"))?;
        if response.succeeded() {
            return Ok(value);
        }
        match response.op_responses().into_iter().next() {
            Some(TxnOpResponse::Get(g)) => g
                .kvs()
                .first()
                .map(|kv| kv.value().to_vec())
                .ok_or_else(|| anyhow::anyhow!("{k} vanished while it was read")),
            _ => anyhow::bail!("etcd answered the read of {k} with something else"),
        }
    }

    /// etcd's client, for tests that drive etcd directly (compaction).
    pub fn client(&self) -> Client {
        self.client.clone()
    }
}

/// `<prefix>/<cluster>/<group>/<plural>/<namespace>/<name>`.
fn object_key(prefix: &str, key: &ObjectKey) -> String {
    format!(
        "{prefix}/{}/{}/{}/{}",
        key.cluster, key.resource, key.namespace, key.name
    )
}

/// The object an etcd key names; `None` for keys that are not objects (the
/// hub's own records under the prefix, another prefix's keys).
fn parse_object_key(prefix: &str, raw: &[u8]) -> Option<ObjectKey> {
    let rest = std::str::from_utf8(raw)
        .ok()?
        .strip_prefix(prefix)?
        .strip_prefix('/')?;
    let parts: Vec<&str> = rest.split('/').collect();
    let [cluster, group, plural, namespace, name] = parts[..] else {
        return None;
    };
    if cluster.is_empty() || plural.is_empty() || name.is_empty() {
        return None;
    }
    Some(ObjectKey {
        cluster: cluster.to_string(),
        resource: format!("{group}/{plural}"),
        namespace: namespace.to_string(),
        name: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_keys_round_trip_and_other_keys_are_not_objects() {
        let cm = ObjectKey {
            cluster: "root:org".into(),
            resource: "/configmaps".into(),
            namespace: "".into(),
            name: "a".into(),
        };
        assert_eq!(object_key("/ferry", &cm), "/ferry/root:org//configmaps//a");
        assert_eq!(
            parse_object_key("/ferry", b"/ferry/root:org//configmaps//a"),
            Some(cm)
        );
        let deploy = ObjectKey {
            cluster: "root".into(),
            resource: "apps/deployments".into(),
            namespace: "default".into(),
            name: "web".into(),
        };
        let k = object_key("/ferry", &deploy);
        assert_eq!(parse_object_key("/ferry", k.as_bytes()), Some(deploy));
        assert_eq!(parse_object_key("/ferry", b"/ferry/hub/identity"), None);
        assert_eq!(parse_object_key("/ferry", b"/ferryx/root//configmaps//a"), None);
        assert_eq!(
            parse_object_key("/ferry", b"/ferry/root//configmaps/default/a/extra"),
            None
        );
    }
}
