//! The budget file (`candle-graph check TRACE --budget budget.toml`), version 1: the same
//! budgets as [`crate::Budgets`], in TOML.
//!
//! ```toml
//! # budget.toml — candle-graph budgets, file version 1
//! version = 1
//!
//! [memory]
//! peak = "6 MiB"                  # the run's logical peak, all devices
//! optimizer_temporaries = "1 MiB" # storages allocated and freed in the optimizer pass
//!
//! [memory.pass]                   # the peak inside a pass: forward, backward, optimizer
//! backward = "5.5 MiB"
//!
//! [memory.category]               # bytes of a category live at the peak
//! optimizer = "1 MiB"             # parameter, activation, gradient, optimizer, other
//!
//! [leaks]                         # no growth across `steps` captured steps after `warmup`
//! steps = 5
//! warmup = 1
//! max_growth_per_step = "0 B"     # optional, default 0
//!
//! [[ops]]                         # exact allocating calls (allocation sites)
//! op = "matmul.backward"
//! calls = 38                      # or max_calls = 40
//!
//! [[ops]]                         # a share of a pass's samples, at the 95% interval's low end
//! op = "matmul.backward"
//! pass = "backward"               # optional: of the measured region without it
//! max_share = "40%"
//! ```
//!
//! Sizes are strings with a unit (`B`, `KiB`, `MiB`, `GiB`, `TiB`, or decimal `KB`, `MB`, `GB`,
//! `TB`) or integers of bytes. Unknown keys are errors. Every error names the file and line.

use serde::de::{self, Deserializer};
use serde::Deserialize;
use toml::Spanned;
use trace_schema::{MemoryCategory, Pass};

use crate::budget::{Budget, Budgets, Cmp};
use crate::units::{parse_percent, parse_size};

/// The file version this crate reads.
pub const BUDGET_FILE_VERSION: u32 = 1;

/// A budget file that could not be read: the file, the line (when known) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}{}: {message}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub struct FileError {
    /// The file as given.
    pub path: String,
    /// One-based line of the error.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// A budget file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetFile {
    /// Its version.
    pub version: u32,
    /// The budgets it declares, in file order (memory, leaks, then ops).
    pub budgets: Budgets,
}

/// A size: a string with a unit or an integer of bytes.
#[derive(Debug, Clone, Copy)]
struct Size(u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a size such as \"6 MiB\" or an integer of bytes")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom(format!("{v} is a negative size")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                parse_size(v).map(Size).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A percentage string (`"40%"`).
#[derive(Debug, Clone, Copy)]
struct Percent(f64);

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_percent(&s).map(Percent).map_err(de::Error::custom)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    version: Spanned<u32>,
    #[serde(default)]
    memory: Option<RawMemory>,
    #[serde(default)]
    leaks: Option<Spanned<RawLeaks>>,
    #[serde(default)]
    ops: Vec<Spanned<RawOp>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemory {
    peak: Option<Size>,
    optimizer_temporaries: Option<Size>,
    #[serde(default)]
    pass: RawPasses,
    #[serde(default)]
    category: RawCategories,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPasses {
    forward: Option<Size>,
    backward: Option<Size>,
    optimizer: Option<Size>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCategories {
    parameter: Option<Size>,
    activation: Option<Size>,
    gradient: Option<Size>,
    optimizer: Option<Size>,
    other: Option<Size>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLeaks {
    steps: u64,
    #[serde(default = "one")]
    warmup: u64,
    max_growth_per_step: Option<Size>,
}

fn one() -> u64 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOp {
    op: String,
    pass: Option<Pass>,
    calls: Option<u64>,
    max_calls: Option<u64>,
    max_share: Option<Percent>,
}

impl BudgetFile {
    /// Reads the budget file at `path`.
    ///
    /// # Errors
    /// The file cannot be read, or [`BudgetFile::parse`]'s errors.
    pub fn read(path: &std::path::Path) -> Result<Self, FileError> {
        let shown = path.display().to_string();
        // A budget file is a few lines; more than 1 MiB is not one.
        let meta = std::fs::metadata(path).map_err(|e| FileError {
            path: shown.clone(),
            line: None,
            message: format!("cannot read it: {e}"),
        })?;
        if meta.len() > 1 << 20 {
            return Err(FileError {
                path: shown,
                line: None,
                message: format!("{} bytes: not a budget file (at most 1 MiB)", meta.len()),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|e| FileError {
            path: shown.clone(),
            line: None,
            message: format!("cannot read it: {e}"),
        })?;
        Self::parse(&text, &shown)
    }

    /// Parses a budget file's text; `path` names it in errors.
    ///
    /// # Errors
    /// TOML syntax, an unknown key, a bad size or percentage, a wrong version, an `[[ops]]`
    /// entry with no or several limits, a leak budget of fewer than 2 steps or whose
    /// `warmup + steps` overflows: each naming the line.
    pub fn parse(text: &str, path: &str) -> Result<Self, FileError> {
        let line_of =
            |offset: usize| Some(text[..offset.min(text.len())].matches('\n').count() + 1);
        let err = |span: Option<std::ops::Range<usize>>, message: String| FileError {
            path: path.to_string(),
            line: span.and_then(|s| line_of(s.start)),
            message,
        };
        let raw: Raw = toml::from_str(text).map_err(|e| err(e.span(), e.message().to_string()))?;
        if *raw.version.get_ref() != BUDGET_FILE_VERSION {
            return Err(err(
                Some(raw.version.span()),
                format!(
                    "version {} is not supported (this candle-graph reads budget files of version {BUDGET_FILE_VERSION})",
                    raw.version.get_ref()
                ),
            ));
        }
        let mut budgets = Budgets::new();
        if let Some(m) = raw.memory {
            budgets = memory_budgets(budgets, m);
        }
        if let Some(l) = raw.leaks {
            let span = l.span();
            let l = l.into_inner();
            if l.steps < 2 {
                return Err(err(
                    Some(span),
                    format!(
                        "[leaks] steps = {}: growth needs at least 2 captured steps",
                        l.steps
                    ),
                ));
            }
            if l.warmup.checked_add(l.steps).is_none() {
                // the line of `warmup` (else `steps`) inside the table
                // (the table's span may cover only its header: read on to the next table)
                let body = text.get(span.start..).unwrap_or("");
                let end = body
                    .get(1..)
                    .and_then(|b| b.find("\n["))
                    .map_or(body.len(), |i| i + 1);
                let body = &body[..end];
                let key = |k: &str| body.find(&format!("\n{k}")).map(|i| span.start + i + 1);
                let at = key("warmup").or_else(|| key("steps")).unwrap_or(span.start);
                return Err(err(
                    Some(at..at),
                    format!(
                        "[leaks] warmup = {} and steps = {}: the last captured step, warmup + steps, does not fit a step number (at most {})",
                        l.warmup,
                        l.steps,
                        u64::MAX
                    ),
                ));
            }
            budgets = budgets.with(Budget::NoGrowth {
                steps: l.steps,
                warmup: l.warmup,
                max_bytes_per_step: l.max_growth_per_step.map_or(0, |s| s.0),
            });
        }
        for op in raw.ops {
            let span = op.span();
            let op = op.into_inner();
            let budget = match (op.calls, op.max_calls, op.max_share) {
                (Some(calls), None, None) => Budget::OpCalls {
                    op: op.op,
                    pass: op.pass,
                    cmp: Cmp::Eq,
                    calls,
                },
                (None, Some(calls), None) => Budget::OpCalls {
                    op: op.op,
                    pass: op.pass,
                    cmp: Cmp::AtMost,
                    calls,
                },
                (None, None, Some(share)) => Budget::OpShare {
                    op: op.op,
                    pass: op.pass,
                    max_share: share.0,
                },
                _ => {
                    return Err(err(
                        Some(span),
                        format!(
                            "[[ops]] {:?} needs exactly one of calls, max_calls, max_share",
                            op.op
                        ),
                    ))
                }
            };
            budgets = budgets.with(budget);
        }
        Ok(Self {
            version: BUDGET_FILE_VERSION,
            budgets,
        })
    }
}

fn memory_budgets(mut budgets: Budgets, m: RawMemory) -> Budgets {
    if let Some(s) = m.peak {
        budgets = budgets.peak_at_most(s.0);
    }
    for (pass, size) in [
        (Pass::Forward, m.pass.forward),
        (Pass::Backward, m.pass.backward),
        (Pass::Optimizer, m.pass.optimizer),
    ] {
        if let Some(s) = size {
            budgets = budgets.with(Budget::PassPeak {
                pass,
                max_bytes: s.0,
            });
        }
    }
    let c = m.category;
    for (category, size) in [
        (MemoryCategory::Parameter, c.parameter),
        (MemoryCategory::Activation, c.activation),
        (MemoryCategory::Gradient, c.gradient),
        (MemoryCategory::Optimizer, c.optimizer),
        (MemoryCategory::Other, c.other),
    ] {
        if let Some(s) = size {
            budgets = budgets.category_at_most(category, s.0);
        }
    }
    if let Some(s) = m.optimizer_temporaries {
        budgets = budgets.optimizer_temporaries_at_most(s.0);
    }
    budgets
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the module docs.
    const EXAMPLE: &str = r#"# budget.toml
version = 1

[memory]
peak = "6 MiB"
optimizer_temporaries = "1 MiB"

[memory.pass]
backward = "5.5 MiB"

[memory.category]
optimizer = "1 MiB"

[leaks]
steps = 5
warmup = 1

[[ops]]
op = "matmul.backward"
calls = 38

[[ops]]
op = "matmul.backward"
pass = "backward"
max_share = "40%"
"#;

    #[test]
    fn the_documented_file_reads_into_its_budgets() {
        let f = BudgetFile::parse(EXAMPLE, "budget.toml").unwrap();
        let described: Vec<String> = f.budgets.budgets.iter().map(Budget::describe).collect();
        assert_eq!(
            described,
            [
                "peak ≤ 6.00 MiB",
                "backward pass peak ≤ 5.50 MiB",
                "optimizer at the peak ≤ 1.00 MiB",
                "optimizer temporaries ≤ 1.00 MiB",
                "no growth across 5 steps after 1 warm-up",
                "calls of matmul.backward == 38",
                "backward share of matmul.backward ≤ 40.0% (95% interval's low end)",
            ]
        );
    }

    fn error(text: &str) -> FileError {
        BudgetFile::parse(text, "b.toml").unwrap_err()
    }

    #[test]
    fn bad_files_name_the_line_and_what_is_wrong() {
        let e = error("version = 1\n[memory]\npeek = \"6 MiB\"\n");
        assert_eq!(e.line, Some(3), "{e}");
        assert!(
            e.to_string()
                .starts_with("b.toml line 3: unknown field `peek`"),
            "{e}"
        );
        let e = error("version = 1\n\n[memory]\npeak = \"6 MiX\"\n");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("unknown unit \"MiX\""), "{e}");
        let e = error("version = 2\n");
        assert_eq!(e.line, Some(1), "{e}");
        assert!(e.message.contains("version 2 is not supported"), "{e}");
        let e = error("version = 1\n[[ops]]\nop = \"matmul\"\n");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(
            e.message
                .contains("exactly one of calls, max_calls, max_share"),
            "{e}"
        );
        let e = error("version = 1\n[memory\n");
        assert_eq!(e.line, Some(2), "{e}");
        let e = error("version = 1\n[leaks]\nsteps = 1\n");
        assert!(e.message.contains("at least 2 captured steps"), "{e}");
        let e = error("version = 1\n[[ops]]\nop = \"m\"\nmax_share = \"40\"\n");
        assert_eq!(e.line, Some(4), "{e}");
        let e = error("[memory]\npeak = 5\n");
        assert!(e.message.contains("missing field `version`"), "{e}");
    }

    /// `warmup + steps` of a hostile file overflows u64: an error naming the line, not a
    /// panic (debug) or a wrapped step number (release) when the check reports it.
    #[test]
    fn a_leak_budget_whose_last_step_overflows_names_its_line() {
        let e = error("version = 1\n\n[leaks]\nsteps = 2\nwarmup = 18446744073709551615\n");
        assert_eq!(
            e.to_string(),
            "b.toml line 5: [leaks] warmup = 18446744073709551615 and steps = 2: the last \
             captured step, warmup + steps, does not fit a step number (at most \
             18446744073709551615)"
        );
        // the largest that fits reads
        let f = BudgetFile::parse(
            "version = 1\n[leaks]\nsteps = 2\nwarmup = 18446744073709551613\n",
            "b.toml",
        )
        .unwrap();
        assert_eq!(f.budgets.budgets.len(), 1);
    }
}
