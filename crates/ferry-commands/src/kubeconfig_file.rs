//! Kubeconfig files as kubectl reads and writes them: `--kubeconfig FILE`, or
//! every file in `$KUBECONFIG`, or `~/.kube/config`, merged first-wins; edits
//! go back to the file that holds the entry (new entries to the first file),
//! as client-go's `ModifyConfig` does. Every other field of every file is
//! kept as it was (comments aside).
//!
//! Reading for requests (credentials, CA) is kube-rs's job: [`KubeconfigFiles::client_config`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{json, Map, Value};

/// The kubeconfig files in effect and what they hold.
pub struct KubeconfigFiles {
    files: Vec<File>,
}

struct File {
    path: PathBuf,
    exists: bool,
    /// The file as a JSON value (an object; `{}` for a missing or empty file).
    doc: Value,
    changed: bool,
}

/// The entries of all files merged as kubectl sees them: the first file to
/// name a cluster, context or current context wins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Merged {
    pub clusters: BTreeMap<String, Value>,
    pub contexts: BTreeMap<String, Value>,
    pub current_context: String,
}

/// One change to the merged kubeconfig.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// Add or replace cluster entry `name` (the body under `cluster:`).
    Cluster(String, Value),
    /// Add or replace context entry `name` (the body under `context:`).
    Context(String, Value),
    /// Set `current-context`.
    CurrentContext(String),
}

impl KubeconfigFiles {
    /// The files kubectl would use: `explicit`, else `$KUBECONFIG`'s
    /// (missing ones skipped, as kubectl does), else `~/.kube/config`.
    pub fn load(explicit: Option<&Path>) -> anyhow::Result<Self> {
        let paths: Vec<(PathBuf, bool)> = match explicit {
            Some(p) => {
                if !p.exists() {
                    bail!("kubeconfig {} does not exist", p.display());
                }
                vec![(p.to_path_buf(), true)]
            }
            None => match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
                Some(list) => std::env::split_paths(&list)
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(|p| (p, false))
                    .collect(),
                None => {
                    let home = std::env::var_os("HOME")
                        .context("no kubeconfig: set KUBECONFIG, pass --kubeconfig, or set HOME")?;
                    vec![(PathBuf::from(home).join(".kube").join("config"), false)]
                }
            },
        };
        let mut files = Vec::new();
        for (path, _) in paths {
            let exists = path.exists();
            let doc = if exists {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                parse(&text).with_context(|| format!("parsing kubeconfig {}", path.display()))?
            } else {
                json!({})
            };
            files.push(File {
                path,
                exists,
                doc,
                changed: false,
            });
        }
        if !files.iter().any(|f| f.exists) {
            let names: Vec<String> = files.iter().map(|f| f.path.display().to_string()).collect();
            bail!(
                "no kubeconfig found (looked at {}); set KUBECONFIG or pass --kubeconfig",
                names.join(", ")
            );
        }
        Ok(KubeconfigFiles { files })
    }

    /// The merged entries.
    pub fn merged(&self) -> Merged {
        let mut m = Merged::default();
        for f in &self.files {
            for (list, key, into) in [
                ("clusters", "cluster", &mut m.clusters),
                ("contexts", "context", &mut m.contexts),
            ] {
                for entry in f.doc.get(list).and_then(Value::as_array).into_iter().flatten() {
                    let Some(name) = entry.get("name").and_then(Value::as_str) else {
                        continue;
                    };
                    into.entry(name.to_string())
                        .or_insert_with(|| entry.get(key).cloned().unwrap_or_else(|| json!({})));
                }
            }
            if m.current_context.is_empty() {
                if let Some(c) = f.doc.get("current-context").and_then(Value::as_str) {
                    m.current_context = c.to_string();
                }
            }
        }
        m
    }

    /// Apply `edits` to the files they belong in (not yet written; see [`Self::save`]).
    pub fn apply(&mut self, edits: &[Edit]) {
        for edit in edits {
            match edit {
                Edit::Cluster(name, body) => self.set_entry("clusters", "cluster", name, body),
                Edit::Context(name, body) => self.set_entry("contexts", "context", name, body),
                Edit::CurrentContext(name) => {
                    let i = self
                        .files
                        .iter()
                        .position(|f| {
                            f.doc
                                .get("current-context")
                                .and_then(Value::as_str)
                                .is_some_and(|c| !c.is_empty())
                        })
                        .unwrap_or_else(|| self.default_file());
                    let f = &mut self.files[i];
                    object(&mut f.doc).insert("current-context".into(), json!(name));
                    f.changed = true;
                }
            }
        }
    }

    /// Write the files [`Self::apply`] changed, each replaced at once (a
    /// reader never sees half a file), keeping its permissions.
    pub fn save(&mut self) -> anyhow::Result<()> {
        for f in self.files.iter_mut().filter(|f| f.changed) {
            // Plain scalars: no folded `>-` blocks for long certificates.
            let options = serde_saphyr::ser_options! { prefer_block_scalars: false };
            let text =
                serde_saphyr::to_string_with_options(&f.doc, options).context("rendering the kubeconfig")?;
            write_atomically(&f.path, text.as_bytes())
                .with_context(|| format!("writing kubeconfig {}", f.path.display()))?;
            f.changed = false;
            f.exists = true;
        }
        Ok(())
    }

    /// A kube-rs configuration for `context` of the merged files (the
    /// credentials and CA for requests; callers point it at a workspace).
    pub async fn client_config(&self, context: &str) -> anyhow::Result<kube::Config> {
        let mut merged: Option<Kubeconfig> = None;
        for f in self.files.iter().filter(|f| f.exists) {
            let kc = Kubeconfig::read_from(&f.path)
                .with_context(|| format!("reading kubeconfig {}", f.path.display()))?;
            merged = Some(match merged {
                Some(m) => m.merge(kc)?,
                None => kc,
            });
        }
        let options = KubeConfigOptions {
            context: Some(context.to_string()),
            ..Default::default()
        };
        kube::Config::from_custom_kubeconfig(merged.unwrap_or_default(), &options)
            .await
            .with_context(|| format!("using context {context:?} of the kubeconfig"))
    }

    /// Where new entries go: the first file that exists (client-go's default file).
    fn default_file(&self) -> usize {
        self.files.iter().position(|f| f.exists).unwrap_or(0)
    }

    fn set_entry(&mut self, list: &str, key: &str, name: &str, body: &Value) {
        let holds = |f: &File| {
            f.doc.get(list).and_then(Value::as_array).is_some_and(|l| {
                l.iter()
                    .any(|e| e.get("name").and_then(Value::as_str) == Some(name))
            })
        };
        let i = self
            .files
            .iter()
            .position(holds)
            .unwrap_or_else(|| self.default_file());
        let f = &mut self.files[i];
        let entries = object(&mut f.doc).entry(list).or_insert_with(|| json!([]));
        if !entries.is_array() {
            *entries = json!([]);
        }
        let entries = entries.as_array_mut().expect("just made an array");
        let mut entry = Map::new();
        entry.insert("name".into(), json!(name));
        entry.insert(key.into(), body.clone());
        match entries
            .iter_mut()
            .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
        {
            Some(existing) => *existing = Value::Object(entry),
            None => entries.push(Value::Object(entry)),
        }
        f.changed = true;
    }
}

fn parse(text: &str) -> anyhow::Result<Value> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    let v: Value = serde_saphyr::from_str(text)?;
    match v {
        Value::Object(_) => Ok(v),
        Value::Null => Ok(json!({})),
        _ => bail!("a kubeconfig is a YAML mapping (apiVersion, clusters, contexts, users, ...)"),
    }
}

fn object(doc: &mut Value) -> &mut Map<String, Value> {
    if !doc.is_object() {
        *doc = json!({});
    }
    doc.as_object_mut().expect("just made an object")
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.as_file().sync_all()?;
    // Kubeconfigs hold credentials: a new one is private, an existing one
    // keeps its mode.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map(|m| m.permissions().mode())
            .unwrap_or(0o600);
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode))?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "apiVersion: v1
kind: Config
clusters:
- name: hub
  cluster:
    server: https://127.0.0.1:6443/clusters/root
    certificate-authority-data: QUJD
contexts:
- name: admin
  context:
    cluster: hub
    user: admin
current-context: admin
users:
- name: admin
  user:
    token: \"0123\"
preferences: {}
";

    const B: &str = "clusters:
- name: other
  cluster:
    server: https://10.0.0.1
- name: hub
  cluster:
    server: https://shadowed
contexts:
- name: kind
  context:
    cluster: other
    user: kind
current-context: kind
";

    fn files(docs: &[&str]) -> (tempfile::TempDir, KubeconfigFiles) {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for (i, d) in docs.iter().enumerate() {
            let path = dir.path().join(format!("k{i}"));
            std::fs::write(&path, d).unwrap();
            files.push(File {
                path,
                exists: true,
                doc: parse(d).unwrap(),
                changed: false,
            });
        }
        (dir, KubeconfigFiles { files })
    }

    #[test]
    fn merges_first_wins() {
        let (_d, k) = files(&[A, B]);
        let m = k.merged();
        assert_eq!(m.current_context, "admin");
        assert_eq!(
            m.clusters["hub"]["server"],
            "https://127.0.0.1:6443/clusters/root"
        );
        assert_eq!(m.clusters["other"]["server"], "https://10.0.0.1");
        assert_eq!(m.contexts.len(), 2);
    }

    #[test]
    fn edits_go_to_the_file_holding_the_entry_and_keep_the_rest() {
        let (_d, mut k) = files(&[A, B]);
        k.apply(&[
            Edit::Cluster("other".into(), json!({"server": "https://10.0.0.2"})),
            Edit::Cluster("new".into(), json!({"server": "https://new"})),
            Edit::CurrentContext("kind".into()),
        ]);
        k.save().unwrap();
        let a = parse(&std::fs::read_to_string(&k.files[0].path).unwrap()).unwrap();
        let b = parse(&std::fs::read_to_string(&k.files[1].path).unwrap()).unwrap();
        assert_eq!(a["current-context"], "kind");
        assert_eq!(a["clusters"][1]["name"], "new");
        // Untouched fields survive, strings that look like numbers stay strings.
        assert_eq!(a["users"][0]["user"]["token"], "0123");
        assert_eq!(a["clusters"][0]["cluster"]["certificate-authority-data"], "QUJD");
        assert_eq!(b["clusters"][0]["cluster"]["server"], "https://10.0.0.2");
        assert_eq!(b["current-context"], "kind");
        assert_eq!(b["clusters"][1]["cluster"]["server"], "https://shadowed");
    }

    #[test]
    fn long_values_stay_on_one_line() {
        let long = "QUJD".repeat(100);
        let (_d, mut k) = files(&[A]);
        k.apply(&[Edit::Cluster(
            "x".into(),
            json!({"certificate-authority-data": long}),
        )]);
        k.save().unwrap();
        let text = std::fs::read_to_string(&k.files[0].path).unwrap();
        assert!(
            text.contains(&format!("certificate-authority-data: {long}\n")),
            "{text}"
        );
    }
}
