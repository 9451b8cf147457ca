//! Writing an output file so that nobody sees half of it: the bytes go to a temporary file
//! beside the output (same file system), which is renamed over the output when complete and
//! removed when anything fails.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// `dir/.name.tmp` beside `output`; `fallback` names it when `output` has no file name.
pub fn temporary_name(output: &Path, fallback: &str) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| fallback.to_string());
    output.with_file_name(format!(".{name}.tmp"))
}

/// Renames the complete temporary file `tmp` to `output` (removing `tmp` when that fails).
///
/// # Errors
/// The rename's I/O error, naming both paths.
pub fn commit(tmp: &Path, output: &Path) -> Result<()> {
    std::fs::rename(tmp, output).with_context(|| {
        let _ = std::fs::remove_file(tmp);
        let why = if output.is_dir() {
            " (it is a directory: give a file name)"
        } else {
            ""
        };
        format!(
            "cannot write {}{why} (renaming the complete temporary file {} to it failed)",
            output.display(),
            tmp.display()
        )
    })
}

/// Writes `bytes` to `output` through a temporary file (see the module docs).
///
/// # Errors
/// I/O errors naming the file.
pub fn write(output: &Path, bytes: &[u8], fallback: &str) -> Result<()> {
    let tmp = temporary_name(output, fallback);
    if let Err(e) = std::fs::write(&tmp, bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| {
            format!(
                "cannot write {} (through the temporary file {})",
                output.display(),
                tmp.display()
            )
        });
    }
    commit(&tmp, output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("page.html");
        write(&out, b"<p>x</p>", "page.html").unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"<p>x</p>");
        assert!(!temporary_name(&out, "page.html").exists());
    }

    #[test]
    fn a_failed_write_names_the_file_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("missing-dir").join("page.html");
        let err = write(&out, b"x", "page.html").unwrap_err();
        assert!(format!("{err:#}").contains("cannot write"), "{err:#}");
        assert!(!out.exists());
    }
}
