//! Findings from the sampled operations ([`trace_ops::OpProfile`]), each found in the samples
//! (nothing is keyed on a known op): an op or non-op function with a large share of the step,
//! file I/O inside an op, and the share of backward spent accumulating gradients. Each figure
//! is an estimate and carries its sample count and 95% interval. Only the sampled thread with
//! the most samples (the capturing thread) is read.

use trace_format::duration;
use trace_ops::{GroupBy, OpKind, OpProfile, OpRow, Share};
use trace_schema::Pass;

use crate::capability::{CapabilityKind, CapabilityMatrix};
use crate::findings::{Evidence, Finding, FindingCode};
use crate::health::Severity;

/// An op (or non-op function) above this share of the step is named.
pub const LARGE_SHARE: f64 = 0.15;
/// At most this many are named, largest first.
pub const LARGE_SHARE_TOP: usize = 3;
/// File I/O inside an op is named from this share of the step, or from
/// [`FILE_IO_OF_OP`] of the op's own samples (and at least [`FILE_IO_MIN_SAMPLES`] samples).
pub const FILE_IO_SHARE: f64 = 0.01;
/// See [`FILE_IO_SHARE`].
pub const FILE_IO_OF_OP: f64 = 0.10;
/// See [`FILE_IO_SHARE`].
pub const FILE_IO_MIN_SAMPLES: u64 = 2;
/// Gradient accumulation is named from this share of the backward pass's samples.
pub const ACCUMULATION_SHARE: f64 = 0.10;

/// `34.2% (95% 30.1–38.5%, 412 of 1,204 samples)`.
fn share_text(s: &Share, k: u64, n: u64) -> String {
    format!(
        "{:.1}% (95% interval {:.1}–{:.1}%, {k} of {})",
        100.0 * s.share,
        100.0 * s.low,
        100.0 * s.high,
        trace_format::count(n, "sample", "samples")
    )
}

fn pass_words(p: Option<Pass>) -> &'static str {
    match p {
        Some(Pass::Forward) => "the forward pass",
        Some(Pass::Backward) => "the backward pass",
        Some(Pass::Optimizer) => "the optimizer pass",
        None => "no pass",
    }
}

/// Where an op's samples are, in words: its passes (`in the forward pass and the backward
/// pass`), every pass's name once (`in the forward, backward and optimizer passes`), and those
/// outside any pass last (`and outside any pass`).
fn passes_words(passes: &[Option<Pass>]) -> String {
    let named: Vec<&str> = passes
        .iter()
        .filter_map(|p| p.map(|p| &pass_words(Some(p))["the ".len()..]))
        .map(|w| w.trim_end_matches(" pass"))
        .collect();
    let outside = passes.contains(&None);
    let list = |items: &[&str]| match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    };
    match (named.len(), outside) {
        (0, _) => "outside any pass".to_string(),
        (1, false) => format!("in the {} pass", named[0]),
        (_, false) => format!("in the {} passes", list(&named)),
        (1, true) => format!("in the {} pass and outside any pass", named[0]),
        (_, true) => format!("in the {} passes and outside any pass", list(&named)),
    }
}

/// The operation findings, appended to `out` when operations are available (sampled).
pub(crate) fn operation_findings(
    profile: Option<&OpProfile>,
    caps: &CapabilityMatrix,
    out: &mut Vec<Finding>,
) {
    let requires = vec![CapabilityKind::Operations];
    let Some(p) = profile.filter(|_| caps.allows(&requires)) else {
        return;
    };
    let Some(main) = p
        .totals
        .threads
        .iter()
        .max_by_key(|t| (t.samples, std::cmp::Reverse(t.thread)))
    else {
        return;
    };
    let ctx = Sampled {
        thread: main.thread,
        n: main.samples,
        region_ns: main.region_ns,
        few: if p.totals.few_samples {
            " — few samples: a rough estimate"
        } else {
            ""
        },
    };
    let finest: Vec<&OpRow> = p.rows.iter().filter(|r| r.thread == ctx.thread).collect();
    large_share_findings(p, &ctx, &finest, out);
    file_io_findings(p, &ctx, out);
    out.extend(accumulation_finding(&ctx, &finest));
}

/// What the operation findings read of the sampled thread with the most samples.
struct Sampled {
    /// The thread.
    thread: u64,
    /// Its samples.
    n: u64,
    /// Its measured region, ns.
    region_ns: Option<u64>,
    /// The few-samples note of every summary (empty with enough samples).
    few: &'static str,
}

impl Sampled {
    fn of_duration(&self, s: &Share) -> Option<(u64, u64, u64)> {
        self.region_ns.map(|d| s.of_duration(d))
    }

    /// `; est. 12 ms of the 80 ms region` (empty without a region).
    fn estimate(&self, s: &Share) -> String {
        match (self.of_duration(s), self.region_ns) {
            (Some((e, _, _)), Some(d)) => {
                format!("; est. {} of the {} region", duration(e), duration(d))
            }
            _ => String::new(),
        }
    }

    /// What every operation finding's evidence says: the count and share it states, with
    /// their interval, and the estimated duration of `timed` (a share of the step) with its
    /// interval.
    fn evidence(&self, share: &Share, k: u64, of: u64, timed: &Share) -> Evidence {
        let d = self.of_duration(timed);
        Evidence {
            count: Some(k),
            of_count: Some(of),
            share: Some(share.share),
            share_low: Some(share.low),
            share_high: Some(share.high),
            duration_ns: d.map(|x| x.0),
            duration_low_ns: d.map(|x| x.1),
            duration_high_ns: d.map(|x| x.2),
            of_duration_ns: self.region_ns,
            ..Evidence::default()
        }
    }
}

/// `large_operation_share`: an op or non-op function above [`LARGE_SHARE`] of the step (at
/// most [`LARGE_SHARE_TOP`]), with its passes and the module holding most of its samples.
fn large_share_findings(p: &OpProfile, ctx: &Sampled, finest: &[&OpRow], out: &mut Vec<Finding>) {
    let few = ctx.few;
    let by_op: Vec<OpRow> = p
        .rows_by(GroupBy::Op)
        .into_iter()
        .filter(|r| r.thread == ctx.thread)
        .collect();
    for r in by_op
        .iter()
        .filter(|r| r.share >= LARGE_SHARE)
        .take(LARGE_SHARE_TOP)
    {
        let (Some(op), Some(kind)) = (r.op.as_deref(), r.kind) else {
            continue;
        };
        let Some(share) = Share::of(r.samples, ctx.n) else {
            continue;
        };
        let mine: Vec<&&OpRow> = finest
            .iter()
            .filter(|x| x.op.as_deref() == Some(op) && x.kind == Some(kind))
            .collect();
        let mut passes: Vec<Option<Pass>> = mine.iter().map(|x| x.pass).collect();
        passes.sort_by_key(|p| p.map(|p| p as u8));
        passes.dedup();
        // the module holding most of its samples
        let mut modules: Vec<(&str, u64)> = Vec::new();
        for x in &mine {
            if let Some(m) = x.module.as_deref() {
                match modules.iter_mut().find(|(n, _)| *n == m) {
                    Some(e) => e.1 += x.samples,
                    None => modules.push((m, x.samples)),
                }
            }
        }
        modules.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let what = match kind {
            OpKind::Op => format!("operation {op}"),
            OpKind::BackwardOp => format!("backward operation {op}"),
            OpKind::NonOp => format!("{op} (no Candle operation)"),
            OpKind::Probe => "the probe's own frames".to_string(),
        };
        let module = modules.first().map(|&(m, k)| {
            format!(
                ", mostly in {m} ({:.0}% of its samples)",
                100.0 * k as f64 / r.samples as f64
            )
        });
        out.push(Finding {
            code: FindingCode::LargeOperationShare,
            severity: if kind == OpKind::Probe {
                Severity::Warning
            } else {
                Severity::Info
            },
            summary: format!(
                "{what} {} {} of the sampled step{}, {}{}{few}",
                if kind == OpKind::Probe {
                    "take"
                } else {
                    "takes"
                },
                share_text(&share, r.samples, ctx.n),
                ctx.estimate(&share),
                passes_words(&passes),
                module.unwrap_or_default()
            ),
            evidence: Evidence {
                operation: Some(op.to_string()),
                operation_kind: Some(kind),
                module: modules.first().map(|m| m.0.to_string()),
                pass: (passes.len() == 1).then_some(passes[0]).flatten(),
                ..ctx.evidence(&share, r.samples, ctx.n, &share)
            },
            requires: vec![CapabilityKind::Operations],
        });
    }
}

/// One group of file I/O inside an op: per op and path (the I/O functions of a path together).
struct IoGroup<'a> {
    op: &'a str,
    kind: OpKind,
    via: &'a [String],
    io_fns: Vec<&'a str>,
    samples: u64,
    op_samples: u64,
}

/// `file_io_in_operation`: file I/O inside an op from [`FILE_IO_SHARE`] of the step or
/// [`FILE_IO_OF_OP`] of the op's samples.
fn file_io_findings(p: &OpProfile, ctx: &Sampled, out: &mut Vec<Finding>) {
    let few = ctx.few;
    let mut io: Vec<IoGroup<'_>> = Vec::new();
    for f in p.file_io.iter().filter(|f| f.thread == ctx.thread) {
        match io
            .iter_mut()
            .find(|e| e.op == f.op && e.via == f.via.as_slice())
        {
            Some(e) => {
                e.samples += f.samples;
                if !e.io_fns.contains(&f.io_function.as_str()) {
                    e.io_fns.push(&f.io_function);
                }
            }
            None => io.push(IoGroup {
                op: &f.op,
                kind: f.kind,
                via: &f.via,
                io_fns: vec![&f.io_function],
                samples: f.samples,
                op_samples: f.op_samples,
            }),
        }
    }
    io.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.op.cmp(b.op)));
    for g in io {
        let IoGroup {
            op,
            kind,
            via,
            io_fns,
            samples: k,
            op_samples,
        } = g;
        let Some(share) = Share::of(k, ctx.n) else {
            continue;
        };
        let of_op = k as f64 / op_samples.max(1) as f64;
        if k < FILE_IO_MIN_SAMPLES || (share.share < FILE_IO_SHARE && of_op < FILE_IO_OF_OP) {
            continue;
        }
        let path = if via.is_empty() {
            String::new()
        } else {
            format!(" via {}", via.join(" → "))
        };
        let mut frames: Vec<String> = via.to_vec();
        frames.extend(io_fns.iter().map(|s| s.to_string()));
        out.push(Finding {
            code: FindingCode::FileIoInOperation,
            severity: Severity::Warning,
            summary: format!(
                "file I/O inside {op}: {} of the sampled step ({:.0}% of {op}'s {op_samples} samples){}, in {}{path}{few}",
                share_text(&share, k, ctx.n),
                100.0 * of_op,
                ctx.estimate(&share),
                io_fns.join(", "),
            ),
            evidence: Evidence {
                operation: Some(op.to_string()),
                operation_kind: Some(kind),
                frames,
                ..ctx.evidence(&share, k, ctx.n, &share)
            },
            requires: vec![CapabilityKind::Operations],
        });
    }
}

/// `gradient_accumulation_share`: accumulating gradients from [`ACCUMULATION_SHARE`] of the
/// backward pass's samples.
fn accumulation_finding(ctx: &Sampled, finest: &[&OpRow]) -> Option<Finding> {
    let few = ctx.few;
    let in_backward =
        |r: &&&OpRow| r.pass == Some(Pass::Backward) || r.kind == Some(OpKind::BackwardOp);
    let backward: u64 = finest.iter().filter(in_backward).map(|r| r.samples).sum();
    let accumulate: u64 = finest
        .iter()
        .filter(|r| r.op.as_deref() == Some(trace_ops::rules::GRAD_ACCUMULATE))
        .map(|r| r.samples)
        .sum();
    let of_backward = Share::of(accumulate, backward).filter(|_| accumulate > 0)?;
    if of_backward.share < ACCUMULATION_SHARE {
        return None;
    }
    let of_step = Share::of(accumulate, ctx.n).expect("counted samples");
    Some(Finding {
                code: FindingCode::GradientAccumulationShare,
                severity: Severity::Info,
                summary: format!(
                    "gradient accumulation (candle-core's backward makes zeros for each new accumulator, then adds into it) takes {} of the backward pass, {:.1}% of the sampled step{}{few}",
                    share_text(&of_backward, accumulate, backward),
                    100.0 * of_step.share,
                    ctx.estimate(&of_step),
                ),
                evidence: Evidence {
                    operation: Some(trace_ops::rules::GRAD_ACCUMULATE.to_string()),
                    operation_kind: Some(OpKind::BackwardOp),
                    pass: Some(Pass::Backward),
                    ..ctx.evidence(&of_backward, accumulate, backward, &of_step)
                },
                requires: vec![CapabilityKind::Operations],
            })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_read_as_one_list() {
        let (f, b, o) = (
            Some(Pass::Forward),
            Some(Pass::Backward),
            Some(Pass::Optimizer),
        );
        assert_eq!(passes_words(&[f]), "in the forward pass");
        assert_eq!(passes_words(&[f, b]), "in the forward and backward passes");
        assert_eq!(
            passes_words(&[f, b, o]),
            "in the forward, backward and optimizer passes"
        );
        assert_eq!(
            passes_words(&[None, f, b, o]),
            "in the forward, backward and optimizer passes and outside any pass"
        );
        assert_eq!(passes_words(&[None]), "outside any pass");
        assert_eq!(
            passes_words(&[None, o]),
            "in the optimizer pass and outside any pass"
        );
    }
}
