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

/// Refuses an `output` that would overwrite or change the `input` it is made from: the input
/// file itself, a file inside the input directory (a run directory's `run.json`, a bundle's
/// files), or a file inside the bundle an input trace is in (a bundle holds only its listed
/// files). Compared canonicalised (the output's directory when the output does not exist yet);
/// a path that cannot be resolved is not refused here (writing it reports its own error).
///
/// # Errors
/// The refusal, naming both paths.
pub fn refuse_input(output: &Path, input: &Path) -> Result<()> {
    let Ok(input) = input.canonicalize() else {
        return Ok(());
    };
    let out = match output.canonicalize() {
        Ok(p) => p,
        Err(_) => {
            let parent = output
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            match (parent.canonicalize(), output.file_name()) {
                (Ok(p), Some(name)) => p.join(name),
                _ => return Ok(()),
            }
        }
    };
    let protected = if input.is_dir() {
        Some(input.clone())
    } else {
        input
            .parent()
            .filter(|d| d.join(trace_views::bundle::MANIFEST_FILE).is_file())
            .map(Path::to_path_buf)
    };
    if out == input {
        anyhow::bail!(
            "will not write {}: it is the input; give another -o",
            output.display()
        );
    }
    if let Some(dir) = protected.filter(|d| out.starts_with(d)) {
        anyhow::bail!(
            "will not write {} inside {}: it would change the input (a run directory or a bundle holds only what the run wrote); give a path outside it",
            output.display(),
            dir.display()
        );
    }
    Ok(())
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
    fn an_output_over_its_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace.jsonl");
        std::fs::write(&trace, "x").unwrap();
        let err = refuse_input(&trace, &trace).unwrap_err();
        assert!(format!("{err:#}").contains("it is the input"), "{err:#}");
        // a run directory's files and new files inside it
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("run.json"), "{}").unwrap();
        for out in [run.join("run.json"), run.join("page.html")] {
            let err = refuse_input(&out, &run).unwrap_err();
            assert!(format!("{err:#}").contains("inside"), "{err:#}");
        }
        // a trace inside a bundle: the bundle's directory is the input's too
        let bundle = dir.path().join("step-00000002");
        std::fs::create_dir(&bundle).unwrap();
        std::fs::write(bundle.join("bundle.json"), "{}").unwrap();
        std::fs::write(bundle.join("trace.jsonl"), "x").unwrap();
        let err = refuse_input(&bundle.join("page.html"), &bundle.join("trace.jsonl")).unwrap_err();
        assert!(format!("{err:#}").contains("inside"), "{err:#}");
        // beside the input is fine
        refuse_input(&dir.path().join("page.html"), &run).unwrap();
        refuse_input(&dir.path().join("page.html"), &trace).unwrap();
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
