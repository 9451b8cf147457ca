//! An export written whole or not at all ([`Staging`]): its files are written into a fresh
//! hidden directory beside the output, then moved into the output by [`Staging::commit`]. A
//! failure before the commit leaves the output as it was (the hidden directory and any
//! directory this export created are removed); a failure during the commit undoes what the
//! commit moved (files it replaced are put back). Nothing that was in the output before is
//! removed.

use std::path::{Path, PathBuf};

use crate::ExportError;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// An export being written beside its output (see the module docs). Dropped without
/// [`Staging::commit`], it removes what it wrote.
#[derive(Debug)]
pub struct Staging {
    target: PathBuf,
    staging: PathBuf,
    /// Directories this export created (the output's missing ancestors first), removed again
    /// when empty after a failure.
    created: Vec<PathBuf>,
    committed: bool,
}

impl Staging {
    /// Starts an export into the directory `target`: creates its missing parents (recorded)
    /// and a new hidden directory beside it to write into.
    ///
    /// # Errors
    /// [`ExportError::Io`] when `target` exists and is not a directory, or a directory cannot
    /// be created.
    pub fn new(target: &Path) -> Result<Self, ExportError> {
        if target.exists() && !target.is_dir() {
            return Err(ExportError::Io {
                path: target.to_path_buf(),
                source: std::io::Error::other("not a directory: the export writes a directory"),
            });
        }
        let mut s = Self {
            target: target.to_path_buf(),
            staging: PathBuf::new(),
            created: Vec::new(),
            committed: false,
        };
        let (beside, name) = match (target.parent(), target.file_name()) {
            (Some(p), Some(n)) => (
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                },
                n.to_string_lossy().into_owned(),
            ),
            // `/`, `.`, `..`: the hidden directory goes inside the target
            _ => (target, "export".into()),
        };
        s.create_dirs(beside)?;
        for n in 0u32.. {
            let staging = beside.join(format!(".{name}.partial-{}-{n}", std::process::id()));
            match std::fs::create_dir(&staging) {
                Ok(()) => {
                    s.staging = staging;
                    return Ok(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => {}
                Err(e) => return Err(io(&staging)(e)),
            }
        }
        unreachable!("the loop returns")
    }

    /// Where to write the export (its layout is the output's).
    pub fn dir(&self) -> &Path {
        &self.staging
    }

    /// The output directory.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Where `path`, written under [`Staging::dir`], lands in the output.
    pub fn final_path(&self, path: &Path) -> PathBuf {
        path.strip_prefix(&self.staging)
            .map_or_else(|_| path.to_path_buf(), |rel| self.target.join(rel))
    }

    /// Creates `dir` and its missing ancestors, recording each one created.
    fn create_dirs(&mut self, dir: &Path) -> Result<(), ExportError> {
        let missing: Vec<&Path> = dir
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
            .collect();
        for d in missing.into_iter().rev() {
            match std::fs::create_dir(d) {
                Ok(()) => self.created.push(d.to_path_buf()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
                Err(e) => return Err(io(d)(e)),
            }
        }
        Ok(())
    }

    /// Moves every file written into the output at its place. With `replace`, a file already
    /// there is replaced (kept aside until every file is in place, put back on failure);
    /// without, a file already there refuses the commit before anything moves. Returns the
    /// files replaced (paths relative to the output), for the caller to say so.
    ///
    /// # Errors
    /// [`ExportError::Io`] naming the file or directory that failed; the output is then as it
    /// was before the export.
    pub fn commit(mut self, replace: bool) -> Result<Vec<PathBuf>, ExportError> {
        let mut files = Vec::new();
        list_files(&self.staging, Path::new(""), &mut files)?;
        if !replace {
            if let Some(rel) = files.iter().find(|r| self.target.join(r).exists()) {
                return Err(ExportError::Io {
                    path: self.target.join(rel),
                    source: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "exists already: an export replaces nothing",
                    ),
                });
            }
        }
        let aside = self.staging.join(".replaced");
        let mut moved: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
        let mut result = Ok(());
        for rel in &files {
            if let Err(e) = self.move_one(rel, &aside, &mut moved) {
                result = Err(e);
                break;
            }
        }
        if let Err(e) = result {
            // undo in reverse: the new file out, the replaced one back
            for (to, old) in moved.iter().rev() {
                let _ = std::fs::remove_file(to);
                if let Some(old) = old {
                    let _ = std::fs::rename(old, to);
                }
            }
            return Err(e);
        }
        self.committed = true;
        Ok(files
            .iter()
            .zip(&moved)
            .filter(|(_, (_, old))| old.is_some())
            .map(|(rel, _)| rel.clone())
            .collect())
    }

    fn move_one(
        &mut self,
        rel: &Path,
        aside: &Path,
        moved: &mut Vec<(PathBuf, Option<PathBuf>)>,
    ) -> Result<(), ExportError> {
        let to = self.target.join(rel);
        if let Some(parent) = to.parent() {
            self.create_dirs(parent)?;
        }
        let mut old = None;
        if std::fs::symlink_metadata(&to).is_ok() {
            let keep = aside.join(rel);
            if let Some(parent) = keep.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            std::fs::rename(&to, &keep).map_err(io(&to))?;
            old = Some(keep);
        }
        let from = self.staging.join(rel);
        if let Err(e) = std::fs::rename(&from, &to) {
            if let Some(old) = &old {
                let _ = std::fs::rename(old, &to);
            }
            return Err(io(&to)(e));
        }
        moved.push((to, old));
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.staging.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
        if !self.committed {
            // only the directories this export created, and only when empty again
            for d in self.created.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
}

/// Every file under `dir` (relative to it, `rel` the prefix), sorted; links and special files
/// are refused (an export writes plain files).
fn list_files(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> Result<(), ExportError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<Result<_, _>>()
        .map_err(io(dir))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let kind = e.file_type().map_err(io(&path))?;
        let r = rel.join(e.file_name());
        if kind.is_dir() {
            list_files(&path, &r, out)?;
        } else if kind.is_file() {
            out.push(r);
        } else {
            return Err(ExportError::Io {
                path,
                source: std::io::Error::other("not a plain file"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Every path under `dir` with the text of each file.
    fn tree(dir: &Path) -> Vec<(String, Option<String>)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                if p.is_dir() {
                    out.push((rel, None));
                    stack.push(p);
                } else {
                    out.push((rel, std::fs::read_to_string(&p).ok()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn an_abandoned_export_leaves_nothing_and_a_commit_moves_every_file() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("a").join("tables");
        let s = Staging::new(&target).unwrap();
        write(
            &s.dir().join("runs").join("run=x").join("part-0.parquet"),
            "x",
        );
        drop(s);
        // the parents it created are gone too
        assert_eq!(tree(tmp.path()), []);

        let s = Staging::new(&target).unwrap();
        let file = s.dir().join("runs").join("run=x").join("part-0.parquet");
        write(&file, "x");
        assert_eq!(
            s.final_path(&file),
            target.join("runs/run=x/part-0.parquet")
        );
        s.commit(false).unwrap();
        assert_eq!(
            tree(&target),
            [
                ("runs".to_string(), None),
                ("runs/run=x".into(), None),
                ("runs/run=x/part-0.parquet".into(), Some("x".into())),
            ]
        );
        // no hidden directory is left beside it
        assert_eq!(tree(&tmp.path().join("a")).len(), 4);
    }

    #[test]
    fn a_failed_commit_puts_the_output_back_as_it_was() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("out");
        write(&target.join("mine.txt"), "mine");
        write(&target.join("runs.parquet"), "old runs");
        // `spans` is a file where the export needs a directory: the commit fails there, after
        // `new/part-0.parquet` was moved in and `runs.parquet` replaced (files go by name)
        write(&target.join("spans"), "a file");
        let before = tree(&target);
        let s = Staging::new(&target).unwrap();
        write(&s.dir().join("runs.parquet"), "new runs");
        write(&s.dir().join("new").join("part-0.parquet"), "new");
        write(&s.dir().join("spans").join("part-0.parquet"), "new spans");
        assert!(s.commit(true).is_err());
        assert_eq!(tree(&target), before);
        assert_eq!(
            tree(tmp.path()).len(),
            before.len() + 1,
            "{:?}",
            tree(tmp.path())
        );

        // without replace, a file already there refuses the commit before anything moves
        let s = Staging::new(&target).unwrap();
        write(&s.dir().join("new.parquet"), "new");
        write(&s.dir().join("runs.parquet"), "new runs");
        let err = s.commit(false).unwrap_err().to_string();
        assert!(err.contains("runs.parquet: exists already"), "{err}");
        assert_eq!(tree(&target), before);
    }
}
