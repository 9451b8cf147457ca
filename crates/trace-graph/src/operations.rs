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
    let (thread, n, region_ns) = (main.thread, main.samples, main.region_ns);
    let of_duration = |s: &Share| region_ns.map(|d| s.of_duration(d));
    let estimate = |s: &Share| match (of_duration(s), region_ns) {
        (Some((e, _, _)), Some(d)) => {
            format!("; est. {} of the {} region", duration(e), duration(d))
        }
        _ => String::new(),
    };
    // What every operation finding's evidence says: the count and share it states, with their
    // interval, and the estimated duration of `timed` (a share of the step) with its interval.
    let sampled = |share: &Share, k: u64, of: u64, timed: &Share| {
        let d = of_duration(timed);
        Evidence {
            count: Some(k),
            of_count: Some(of),
            share: Some(share.share),
            share_low: Some(share.low),
            share_high: Some(share.high),
            duration_ns: d.map(|x| x.0),
            duration_low_ns: d.map(|x| x.1),
            duration_high_ns: d.map(|x| x.2),
            of_duration_ns: region_ns,
            ..Evidence::default()
        }
    };
    let few = if p.totals.few_samples {
        " — few samples: a rough estimate"
    } else {
        ""
    };
    let finest: Vec<&OpRow> = p.rows.iter().filter(|r| r.thread == thread).collect();

    // an op or function with a large share
    let by_op: Vec<OpRow> = p
        .rows_by(GroupBy::Op)
        .into_iter()
        .filter(|r| r.thread == thread)
        .collect();
    for r in by_op
        .iter()
        .filter(|r| r.share >= LARGE_SHARE)
        .take(LARGE_SHARE_TOP)
    {
        let (Some(op), Some(kind)) = (r.op.as_deref(), r.kind) else {
            continue;
        };
        let Some(share) = Share::of(r.samples, n) else {
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
            OpKind::Probe => format!("the probe ({op})"),
        };
        let wheres: Vec<&str> = passes.iter().map(|&p| pass_words(p)).collect();
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
                "{what} takes {} of the sampled step{}, in {}{}{few}",
                share_text(&share, r.samples, n),
                estimate(&share),
                wheres.join(" and "),
                module.unwrap_or_default()
            ),
            evidence: Evidence {
                operation: Some(op.to_string()),
                operation_kind: Some(kind),
                module: modules.first().map(|m| m.0.to_string()),
                pass: (passes.len() == 1).then_some(passes[0]).flatten(),
                ..sampled(&share, r.samples, n, &share)
            },
            requires: requires.clone(),
        });
    }

    // file I/O inside an op
    // one group per op and path (the I/O functions of a path together)
    struct IoGroup<'a> {
        op: &'a str,
        kind: OpKind,
        via: &'a [String],
        io_fns: Vec<&'a str>,
        samples: u64,
        op_samples: u64,
    }
    let mut io: Vec<IoGroup<'_>> = Vec::new();
    for f in p.file_io.iter().filter(|f| f.thread == thread) {
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
        let Some(share) = Share::of(k, n) else {
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
                share_text(&share, k, n),
                100.0 * of_op,
                estimate(&share),
                io_fns.join(", "),
            ),
            evidence: Evidence {
                operation: Some(op.to_string()),
                operation_kind: Some(kind),
                frames,
                ..sampled(&share, k, n, &share)
            },
            requires: requires.clone(),
        });
    }

    // gradient accumulation's share of backward
    let in_backward =
        |r: &&&OpRow| r.pass == Some(Pass::Backward) || r.kind == Some(OpKind::BackwardOp);
    let backward: u64 = finest.iter().filter(in_backward).map(|r| r.samples).sum();
    let accumulate: u64 = finest
        .iter()
        .filter(|r| r.op.as_deref() == Some(trace_ops::rules::GRAD_ACCUMULATE))
        .map(|r| r.samples)
        .sum();
    if let (Some(of_backward), true) = (Share::of(accumulate, backward), accumulate > 0) {
        if of_backward.share >= ACCUMULATION_SHARE {
            let of_step = Share::of(accumulate, n).expect("counted samples");
            out.push(Finding {
                code: FindingCode::GradientAccumulationShare,
                severity: Severity::Info,
                summary: format!(
                    "gradient accumulation (candle-core's backward makes zeros for each new accumulator, then adds into it) takes {} of the backward pass, {:.1}% of the sampled step{}{few}",
                    share_text(&of_backward, accumulate, backward),
                    100.0 * of_step.share,
                    estimate(&of_step),
                ),
                evidence: Evidence {
                    operation: Some(trace_ops::rules::GRAD_ACCUMULATE.to_string()),
                    operation_kind: Some(OpKind::BackwardOp),
                    pass: Some(Pass::Backward),
                    ..sampled(&of_backward, accumulate, backward, &of_step)
                },
                requires,
            });
        }
    }
}
