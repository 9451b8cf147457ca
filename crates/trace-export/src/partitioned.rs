//! Hive-style partitions ([`export_partition`]): one trace's tables written as
//! `DIR/<table>/<key>=<value>/…/part-0.parquet`, so that an engine reading `DIR/<table>/`
//! with hive partitioning (DuckDB's `read_parquet(…, hive_partitioning = true)`, DataFusion's
//! `PARTITIONED BY`, Spark's partition discovery) gets every key as a column — a run
//! directory's captures exported with `run=<name>/step=<n>`.

use std::path::{Path, PathBuf};

use trace_graph::Analysis;
use trace_schema::TraceDocument;

use crate::tables::TABLES;
use crate::{ExportError, ParquetExport};

/// File name of each partition's table.
pub const PART_FILE: &str = "part-0.parquet";

/// A partition value made safe for a path: ASCII letters, digits, `.`, `_` and `-` kept,
/// anything else `_` (at most 100 bytes; empty becomes `_`).
pub fn partition_value(s: &str) -> String {
    let v: String = s
        .chars()
        .take(100)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if v.is_empty() || v.chars().all(|c| c == '.') {
        "_".into()
    } else {
        v
    }
}

/// Writes the tables of one trace into `dir/<table>/<k1>=<v1>/<k2>=<v2>…/`[`PART_FILE`] (the
/// values through [`partition_value`]); returns the files with their rows. The tables are
/// written beside, then renamed into place.
///
/// # Errors
/// [`ExportError::Io`] when a partition already exists or cannot be written; the export's own
/// errors (the temporary files removed).
pub fn export_partition(
    dir: &Path,
    partition: &[(&str, &str)],
    source: &str,
    doc: &TraceDocument,
    analysis: &Analysis,
) -> Result<Vec<(PathBuf, u64)>, ExportError> {
    let mut rel = PathBuf::new();
    for (k, v) in partition {
        rel.push(format!("{}={}", partition_value(k), partition_value(v)));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ExportError::Io { path, source }
    };
    for t in TABLES {
        let target = dir.join(t.name).join(&rel).join(PART_FILE);
        if target.exists() {
            return Err(ExportError::Io {
                path: target,
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "this partition was exported already",
                ),
            });
        }
    }
    let staging = dir.join(format!(
        ".staging-{}-{}",
        std::process::id(),
        partition_value(&rel.to_string_lossy())
    ));
    let mut export = ParquetExport::create(&staging)?;
    if let Err(e) = export.add(source, doc, analysis) {
        export.abandon();
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    let written = export.finish();
    let result = written.and_then(|w| {
        let mut files = Vec::with_capacity(TABLES.len());
        for t in TABLES {
            let to_dir = dir.join(t.name).join(&rel);
            std::fs::create_dir_all(&to_dir).map_err(io(&to_dir))?;
            let from = staging.join(format!("{}.parquet", t.name));
            let rows = w
                .tables
                .iter()
                .find(|(p, _)| p.file_name() == from.file_name())
                .map_or(0, |&(_, rows)| rows);
            let to = to_dir.join(PART_FILE);
            std::fs::rename(&from, &to).map_err(io(&to))?;
            files.push((to, rows));
        }
        Ok(files)
    });
    let _ = std::fs::remove_dir_all(&staging);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_are_path_safe() {
        assert_eq!(partition_value("run-a_1.x"), "run-a_1.x");
        assert_eq!(partition_value("../etc"), ".._etc");
        assert_eq!(partition_value(".."), "_");
        assert_eq!(partition_value("a/b=c d"), "a_b_c_d");
        assert_eq!(partition_value(""), "_");
    }
}
