//! The `optimizer_temporaries` finding: storages allocated in the optimizer pass and freed in
//! it — an out-of-place update's temporaries (AdamW's `m`, `v`, `sqr`, `sqrt`, `div` results
//! before they are assigned). Their bytes at the run's peak, their ratio to the parameters'
//! bytes, their part of the peak, and what an in-place or fused update would remove: the
//! lifetimes are replayed with those temporaries removed (the new run peak and where it
//! moves), not guessed.
//!
//! A temporary is tied to the parameter it updates where its bytes equal exactly one
//! parameter's bytes ("by size"; the stack names the op, not the parameter). Its op comes from
//! its allocation site ([`trace_ops::SiteProfile`]) when the trace has sites.
//!
//! Two passes over the memory events in replay order: O(n log n) for the sort, O(n) after. In
//! [`crate::analyze`] the first rides along the memory replay ([`TemporaryMarks`]).

use rustc_hash::FxHashMap;
use trace_format::bytes as human_bytes;
use trace_memory::{StorageMap, StorageRef};
use trace_schema::{
    MemoryAction, MemoryCategory, MemoryItem, MemoryOrder, Pass, Sym, TraceDocument,
};

use crate::capability::{CapabilityKind, CapabilityMatrix};
use crate::findings::{Evidence, Finding, FindingCode};
use crate::health::Severity;

/// The optimizer temporaries found in a trace, with the replay that removes them.
#[derive(Debug, Clone, PartialEq)]
pub struct OptimizerTemporaries {
    /// How many storages were allocated and freed inside the optimizer pass.
    pub count: u64,
    /// Their bytes, all of them (saturating).
    pub allocated_bytes: u64,
    /// The run's peak (live bytes, all devices), and when.
    pub peak_bytes: u64,
    /// When it was first reached, ns.
    pub peak_ns: u64,
    /// Temporaries' bytes live at that peak.
    pub at_peak_bytes: u64,
    /// Temporaries live at that peak.
    pub at_peak_count: u64,
    /// Bytes of the parameters (category `parameter`) live at the peak.
    pub parameter_bytes: u64,
    /// The run's peak replayed without the temporaries, and when it is reached.
    pub replayed_peak_bytes: u64,
    /// When, ns.
    pub replayed_peak_ns: u64,
    /// The pass of the span open at the replayed peak's event.
    pub replayed_peak_pass: Option<Pass>,
    /// The temporaries live at the peak, largest first: `(memory index, bytes, parameter tied
    /// by size)`.
    pub at_peak: Vec<(u32, u64, Option<String>)>,
    /// Every temporary's alloc event (file index among the memory events).
    pub allocs: Vec<u32>,
}

impl OptimizerTemporaries {
    /// Finds the optimizer temporaries of `doc`; `None` without any. `pass_of` gives a
    /// span's pass (its own or inherited). Two passes over the memory events.
    pub fn find(doc: &TraceDocument, pass_of: impl Fn(Sym) -> Option<Pass>) -> Option<Self> {
        let mut marks = TemporaryMarks::new(doc);
        doc.for_each_memory(MemoryOrder::Replay, |m| marks.observe(doc, m, &pass_of));
        Self::from_marks(doc, marks, pass_of)
    }

    /// [`find`](Self::find) after its first pass, made by `marks` riding along another pass
    /// over the memory events in replay order: one pass of its own.
    pub(crate) fn from_marks(
        doc: &TraceDocument,
        marks: TemporaryMarks,
        pass_of: impl Fn(Sym) -> Option<Pass>,
    ) -> Option<Self> {
        let TemporaryMarks {
            temporary,
            param_sizes,
            any,
            mut pass_cache,
            ..
        } = marks;
        if !any {
            return None;
        }
        let mut r = replay_without(doc, &temporary);
        let (at_peak, parameter_bytes) =
            live_at_peak(&r.seq[..r.peak_seq], &temporary, &param_sizes);
        drop(std::mem::take(&mut r.seq));
        let at_peak_bytes = at_peak.iter().fold(0u64, |s, x| s.saturating_add(x.1));
        let replayed_peak_pass = r
            .re_span
            .and_then(|s| *pass_cache.entry(s).or_insert_with(|| pass_of(s)));
        Some(Self {
            count: r.count,
            allocated_bytes: r.allocated,
            peak_bytes: r.peak,
            peak_ns: r.peak_ns,
            at_peak_bytes,
            at_peak_count: at_peak.len() as u64,
            parameter_bytes,
            replayed_peak_bytes: r.re_peak,
            replayed_peak_ns: r.re_ns,
            replayed_peak_pass,
            at_peak,
            allocs: temporary
                .iter()
                .enumerate()
                .filter(|(_, &t)| t)
                .map(|(i, _)| i as u32)
                .collect(),
        })
    }
}

/// A live optimizer allocation (pass 1).
struct Open {
    index: u32,
    bytes: u64,
}

/// Pass 1, fed one memory event at a time in replay order (on its own or riding along the
/// memory replay): allocs matched to frees; a temporary is allocated and freed in the
/// optimizer. Keeps which memory events allocate a temporary and the parameters' names by
/// size.
pub(crate) struct TemporaryMarks {
    open: StorageMap<Open>,
    temporary: Vec<bool>,
    param_sizes: FxHashMap<u64, Vec<String>>,
    any: bool,
    pass_cache: FxHashMap<Sym, Option<Pass>>,
}

impl TemporaryMarks {
    /// No event seen yet (a flag per memory event of `doc`).
    pub(crate) fn new(doc: &TraceDocument) -> Self {
        Self {
            open: StorageMap::new(),
            temporary: vec![false; doc.memory_len()],
            param_sizes: FxHashMap::default(),
            any: false,
            pass_cache: FxHashMap::default(),
        }
    }

    /// Sees the next event in replay order; `pass_of` gives a span's pass.
    pub(crate) fn observe(
        &mut self,
        doc: &TraceDocument,
        m: &MemoryItem<'_>,
        pass_of: &impl Fn(Sym) -> Option<Pass>,
    ) {
        let cache = &mut self.pass_cache;
        let mut pass = |s: Option<Sym>| -> Option<Pass> {
            let s = s?;
            *cache.entry(s).or_insert_with(|| pass_of(s))
        };
        let key = StorageRef::of(m);
        match m.action {
            MemoryAction::Alloc => {
                if m.category == MemoryCategory::Parameter {
                    let name = m.label.map_or_else(
                        || m.storage.or(m.tensor).unwrap_or("").to_string(),
                        |l| doc.str(l).to_string(),
                    );
                    let bytes = m.bytes.unwrap_or(0);
                    self.param_sizes.entry(bytes).or_default().push(name);
                }
                let optimizer = !m.pre_existing && pass(m.span) == Some(Pass::Optimizer);
                if let Some(k) = key {
                    // Only the optimizer's allocations can be temporaries: the map holds
                    // those alone (a few, not every live storage of a large trace), and an
                    // other allocation at a live key ends the one it replaces.
                    if optimizer {
                        self.open.insert(
                            k,
                            Open {
                                index: m.index,
                                bytes: m.bytes.unwrap_or(0),
                            },
                        );
                    } else if !self.open.is_empty() {
                        self.open.remove(k);
                    }
                }
            }
            MemoryAction::Free => {
                if let Some(o) = key.and_then(|k| self.open.remove(k)) {
                    if pass(m.span) == Some(Pass::Optimizer) && o.bytes > 0 {
                        self.temporary[o.index as usize] = true;
                        self.any = true;
                    }
                }
            }
        }
    }
}

/// The sequence of the temporaries' and parameters' allocations (memory index, bytes,
/// parameter) and ends (`None`): what the figures at the peak need of its live set.
struct Step {
    index: u32,
    alloc: Option<(u64, bool)>,
}

/// What pass 2 found: the run's peak (and the position in `seq` it was reached at) and the
/// peak replayed without the temporaries; the temporaries' count and bytes.
struct Replayed {
    seq: Vec<Step>,
    peak: u64,
    peak_ns: u64,
    peak_seq: usize,
    re_peak: u64,
    re_ns: u64,
    re_span: Option<Sym>,
    count: u64,
    allocated: u64,
}

/// Pass 2: the replay, with and without the temporaries.
fn replay_without(doc: &TraceDocument, temporary: &[bool]) -> Replayed {
    let mut live_bytes: StorageMap<(u32, u64, bool, bool)> = StorageMap::new();
    let (mut all, mut without) = (0u64, 0u64);
    let (mut peak, mut peak_ns, mut peak_seq) = (0u64, 0u64, 0usize);
    let (mut re_peak, mut re_ns) = (0u64, 0u64);
    let mut re_span: Option<Sym> = None;
    let mut count = 0u64;
    let mut allocated = 0u64;
    let mut seq: Vec<Step> = Vec::new();
    doc.for_each_memory(MemoryOrder::Replay, |m| {
        let key = StorageRef::of(m);
        match m.action {
            MemoryAction::Alloc => {
                let b = m.bytes.unwrap_or(0);
                let temp = temporary[m.index as usize];
                let param = m.category == MemoryCategory::Parameter;
                let old = key.and_then(|k| live_bytes.insert(k, (m.index, b, temp, param)));
                if let Some(old) = old {
                    // a re-alloc of a live key: the old one ends here
                    if old.2 || old.3 {
                        seq.push(Step {
                            index: old.0,
                            alloc: None,
                        });
                    }
                    all = all.saturating_sub(old.1);
                    if !old.2 {
                        without = without.saturating_sub(old.1);
                    }
                }
                all = all.saturating_add(b);
                if temp {
                    count += 1;
                    allocated = allocated.saturating_add(b);
                } else {
                    without = without.saturating_add(b);
                }
                if temp || param {
                    seq.push(Step {
                        index: m.index,
                        alloc: Some((b, param)),
                    });
                }
            }
            MemoryAction::Free => {
                if let Some(old) = key.and_then(|k| live_bytes.remove(k)) {
                    all = all.saturating_sub(old.1);
                    if !old.2 {
                        without = without.saturating_sub(old.1);
                    }
                    if old.2 || old.3 {
                        seq.push(Step {
                            index: old.0,
                            alloc: None,
                        });
                    }
                }
            }
        }
        if all > peak {
            (peak, peak_ns, peak_seq) = (all, m.timestamp_ns, seq.len());
        }
        if without > re_peak {
            (re_peak, re_ns, re_span) = (without, m.timestamp_ns, m.span);
        }
    });
    Replayed {
        seq,
        peak,
        peak_ns,
        peak_seq,
        re_peak,
        re_ns,
        re_span,
        count,
        allocated,
    }
}

/// The temporaries live at the peak, largest first (each with the parameter its size ties it
/// to, when only one has it), and the parameters' bytes there: the sequence replayed up to the
/// peak (no further pass over the events: each allocation's step carries its bytes and whether
/// it is a parameter).
fn live_at_peak(
    steps: &[Step],
    temporary: &[bool],
    param_sizes: &FxHashMap<u64, Vec<String>>,
) -> (Vec<(u32, u64, Option<String>)>, u64) {
    let mut live: FxHashMap<u32, (u64, bool)> = FxHashMap::default();
    for step in steps {
        match step.alloc {
            Some(facts) => live.insert(step.index, facts),
            None => live.remove(&step.index),
        };
    }
    let mut at_peak: Vec<(u32, u64, Option<String>)> = Vec::new();
    let mut parameter_bytes = 0u64;
    for (&index, &(b, param)) in &live {
        if param {
            parameter_bytes = parameter_bytes.saturating_add(b);
        }
        if temporary[index as usize] {
            let tie = param_sizes
                .get(&b)
                .filter(|names| names.len() == 1)
                .map(|names| names[0].clone());
            at_peak.push((index, b, tie));
        }
    }
    at_peak.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    (at_peak, parameter_bytes)
}

/// The finding, when the trace has optimizer temporaries (a warning when those live at the
/// run's peak make at least 10% of it, else info).
/// `marks` is the first pass, made riding along the memory replay (`None` when the trace has no
/// optimizer pass).
#[allow(clippy::too_many_arguments)]
pub(crate) fn finding(
    doc: &TraceDocument,
    spans: &trace_memory::SpanIndex,
    marks: Option<TemporaryMarks>,
    sites: Option<&trace_ops::SiteProfile>,
    caps: &CapabilityMatrix,
    lower_bound: bool,
    what_ifs: &mut crate::what_if::WhatIfs,
    out: &mut Vec<Finding>,
) {
    let requires = vec![CapabilityKind::LogicalMemory];
    if !caps.allows(&requires) {
        return;
    }
    // no optimizer pass: nothing to replay
    let Some(marks) = marks else {
        return;
    };
    let pass_of = |s: Sym| doc.span_index(s).and_then(|i| spans.pass[i]);
    let Some(t) = OptimizerTemporaries::from_marks(doc, marks, pass_of) else {
        return;
    };
    let ratio = if t.parameter_bytes > 0 {
        format!(
            ", {:.1}× the parameters' {}",
            t.at_peak_bytes as f64 / t.parameter_bytes as f64,
            human_bytes(t.parameter_bytes)
        )
    } else {
        String::new()
    };
    let share = if t.peak_bytes > 0 {
        t.at_peak_bytes as f64 * 100.0 / t.peak_bytes as f64
    } else {
        0.0
    };
    let removed = t.peak_bytes.saturating_sub(t.replayed_peak_bytes);
    let moved = match t.replayed_peak_pass {
        Some(p) => format!(" in the {} pass", p.as_str()),
        None => String::new(),
    };
    let summary = if t.at_peak_count > 0 {
        format!(
            "the optimizer's out-of-place update allocates {} temporaries ({}, freed within the pass); {} of them are live at the run's peak: {}{ratio}, {share:.1}% of the {} peak. An in-place or fused update would remove {}: replayed without them the run peaks at {}{moved}",
            t.count,
            human_bytes(t.allocated_bytes),
            t.at_peak_count,
            human_bytes(t.at_peak_bytes),
            human_bytes(t.peak_bytes),
            human_bytes(removed),
            human_bytes(t.replayed_peak_bytes),
        )
    } else {
        format!(
            "the optimizer's out-of-place update allocates {} temporaries ({}, freed within the pass), none live at the run's peak: an in-place update would not lower it",
            t.count,
            human_bytes(t.allocated_bytes),
        )
    };
    let ties: Vec<String> = t
        .at_peak
        .iter()
        .map(|&(index, bytes, ref param)| {
            let op = sites
                .and_then(|s| s.of_memory(index))
                .map(|l| l.op.to_string());
            let what = match (op, param) {
                (Some(op), Some(p)) => format!("{op} · update of {p} (by size) · optimizer"),
                (Some(op), None) => format!("{op} · optimizer"),
                (None, Some(p)) => format!("update of {p} (by size) · optimizer"),
                (None, None) => "optimizer".to_string(),
            };
            format!("{} {what}", human_bytes(bytes))
        })
        .collect();
    // an update without temporaries: replayed with every other what-if (a bound: a fused
    // update may keep some)
    let plan = (t.at_peak_count > 0).then(|| {
        let mut plan = trace_memory::ReleasePlan::new();
        for &i in &t.allocs {
            plan.never_allocate(i);
        }
        plan
    });
    let evidence = Evidence {
        bytes: Some(t.at_peak_bytes),
        count: Some(t.at_peak_count),
        of_count: Some(t.count),
        pass: Some(Pass::Optimizer),
        timestamp_ns: Some(t.peak_ns),
        of_bytes: Some(t.peak_bytes),
        parameter_bytes: Some(t.parameter_bytes),
        allocated_bytes: Some(t.allocated_bytes),
        replayed_peak_bytes: Some(t.replayed_peak_bytes),
        replayed_peak_ns: Some(t.replayed_peak_ns),
        replayed_peak_pass: t.replayed_peak_pass,
        temporaries: ties,
        lower_bound,
        ..Evidence::default()
    };
    out.push(Finding {
        code: FindingCode::OptimizerTemporaries,
        // a warning when they make a tenth of the peak or more
        severity: if share >= 10.0 {
            Severity::Warning
        } else {
            Severity::Info
        },
        summary,
        evidence,
        requires,
    });
    if let Some(plan) = plan {
        let action = "update in place (no optimizer temporaries)";
        what_ifs.request(out.len() - 1, plan, action, false, false);
    }
}
