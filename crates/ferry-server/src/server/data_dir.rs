//! The data directory holds every Secret, the CA key and the admin token:
//! only its owner may read it. It is created `0700` with every file in it
//! `0600`, and a directory left looser (by an older hub, a copy, a umask) is
//! tightened when the hub starts, with one log line saying what changed.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// Mode of the data directory and every directory in it.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file in the data directory.
pub const FILE_MODE: u32 = 0o600;

/// Create `dir` (and its `pki` directory) owner-only, make everything
/// already in it owner-only, and create the SQLite database file `db` `0600`
/// before SQLite opens it (its `-wal` and `-shm` files take the database's
/// mode). Returns what was tightened, as `(path, old mode)`.
pub fn prepare(dir: &Path, db: Option<&Path>) -> anyhow::Result<Vec<(PathBuf, u32)>> {
    create_private_dir(dir)?;
    let mut changed = Vec::new();
    tighten(dir, &mut changed).with_context(|| format!("restricting the modes in {}", dir.display()))?;
    create_private_dir(&dir.join("pki"))?;
    if let Some(db) = db {
        create_private_file(db)?;
    }
    if !changed.is_empty() {
        let list: Vec<String> = changed
            .iter()
            .map(|(p, mode)| {
                let shown = p.strip_prefix(dir).unwrap_or(p);
                let shown = if shown.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    shown
                };
                format!("{} (was {mode:04o})", shown.display())
            })
            .collect();
        tracing::warn!(
            "data directory {} was readable by others; made it owner-only ({DIR_MODE:04o} directories, {FILE_MODE:04o} files): {}",
            dir.display(),
            list.join(", ")
        );
    }
    Ok(changed)
}

/// Create `dir` and its missing parents owner-only (`0700`), as everything
/// in a data directory must be.
pub fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(DIR_MODE);
    }
    builder
        .create(dir)
        .with_context(|| format!("creating the data directory {}", dir.display()))
}

fn create_private_file(path: &Path) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(FILE_MODE);
    }
    options
        .open(path)
        .map(drop)
        .with_context(|| format!("creating {}", path.display()))
}

/// Remove group and other permissions from `path` and, for a directory,
/// everything below it. Symbolic links are left alone (their modes mean
/// nothing, and what they point at is not the hub's).
#[cfg(unix)]
fn tighten(path: &Path, changed: &mut Vec<(PathBuf, u32)>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mode = meta.permissions().mode() & 0o7777;
    let wanted = if meta.is_dir() { DIR_MODE } else { FILE_MODE };
    if mode & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(wanted))?;
        changed.push((path.to_path_buf(), mode));
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            tighten(&entry?.path(), changed)?;
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn tighten(_path: &Path, _changed: &mut Vec<(PathBuf, u32)>) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_data_directory_is_owner_only() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let changed = prepare(&dir, Some(&dir.join("hub.db"))).unwrap();
        assert!(changed.is_empty());
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("pki")), 0o700);
        assert_eq!(mode(&dir.join("hub.db")), 0o600);
    }

    #[test]
    fn loose_modes_are_tightened_and_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        std::fs::create_dir_all(dir.join("pki")).unwrap();
        std::fs::write(dir.join("hub.db"), b"").unwrap();
        std::fs::write(dir.join("pki/ca.key"), b"key").unwrap();
        std::fs::write(dir.join("private"), b"").unwrap();
        for (p, m) in [
            ("", 0o755),
            ("pki", 0o775),
            ("hub.db", 0o644),
            ("pki/ca.key", 0o640),
            ("private", 0o600),
        ] {
            std::fs::set_permissions(dir.join(p), std::fs::Permissions::from_mode(m)).unwrap();
        }
        let changed = prepare(&dir, None).unwrap();
        let mut names: Vec<(String, u32)> = changed
            .iter()
            .map(|(p, m)| (p.strip_prefix(&dir).unwrap().display().to_string(), *m))
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![
                (String::new(), 0o755),
                ("hub.db".into(), 0o644),
                ("pki".into(), 0o775),
                ("pki/ca.key".into(), 0o640),
            ]
        );
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("pki")), 0o700);
        assert_eq!(mode(&dir.join("hub.db")), 0o600);
        assert_eq!(mode(&dir.join("pki/ca.key")), 0o600);
        assert!(prepare(&dir, None).unwrap().is_empty(), "nothing left to change");
    }
}
