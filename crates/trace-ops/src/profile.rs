//! [`OpProfile`]: the sampled stacks of a trace as a per-operation table — samples, share of
//! the measured region with its 95% Wilson interval, estimated self time — per op, pass and
//! module, with totals, grouping, filters and sorting.
//!
//! Built in one pass over the stacks (each classified once, [`crate::classify`]) and one over
//! the samples (a hash lookup each): O(frames in stacks + samples + spans × depth).
//!
//! # What the figures are
//! - `share` = the row's samples / all samples of its thread inside the measured region
//!   (the span marked `measured`; without a closed one, the thread's sampled window);
//! - `self_ns` = `share` × the region's duration, `self_ns_low`/`_high` = the interval's bounds
//!   × the duration. An estimate, never a measurement: rows say how many samples they rest on,
//!   and a profile of fewer than [`FEW_SAMPLES`] samples says "few samples";
//! - module: the innermost span with a module path around the sample (`module_source: span`),
//!   else the stack's model `forward` frames (`module_source: stack`), else none;
//! - pass: the pass of the sample's span (its own or an ancestor's).

use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use trace_memory::SpanIndex;
use trace_schema::{Pass, SymbolQuality, TraceDocument};

use crate::availability::Dropped;
pub use crate::availability::Unavailable;
use crate::classify::{OpKind, StackClass};
use crate::interval::Share;
pub use crate::modules::ModuleSource;

/// A profile of fewer samples than this (on a thread) is flagged "few samples": too few to
/// rank ops (issue 27: the demo's 12 ms step at 1 kHz gives ~12).
pub const FEW_SAMPLES: u64 = 100;

/// How rows are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum GroupBy {
    /// One row per op (and kind), pass and module: the finest.
    #[default]
    OpPassModule,
    /// One row per op (and kind) and pass, every module together.
    OpPass,
    /// One row per op (and kind), every pass and module together.
    Op,
    /// One row per module (samples outside any module: one row with no module).
    Module,
    /// One row per pass.
    Pass,
}

impl GroupBy {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// How rows are sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortBy {
    /// Most samples first (ties: op, pass, module by name).
    #[default]
    Samples,
    /// By op name.
    Op,
    /// By pass (forward, backward, optimizer, none), then samples.
    Pass,
    /// By module path, then samples.
    Module,
}

/// One row: a group of samples of one thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpRow {
    /// The op (`matmul`, `matmul.backward`, `grad_accumulate`) or a non-op function's path;
    /// `None` when op is not a grouping key.
    pub op: Option<String>,
    /// What kind of thing `op` is; `None` when op is not a grouping key.
    pub kind: Option<OpKind>,
    /// Pass; `None` outside any pass, or when pass is not a grouping key.
    pub pass: Option<Pass>,
    /// Module path; `None` outside any module, or when module is not a grouping key.
    pub module: Option<String>,
    /// Where `module` comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module_source: Option<ModuleSource>,
    /// The sampled thread's key.
    pub thread: u64,
    /// Samples in this row.
    pub samples: u64,
    /// Share of the thread's samples in the measured region, in [0, 1].
    pub share: f64,
    /// 95% Wilson interval of `share`: lower bound.
    pub share_low: f64,
    /// Upper bound.
    pub share_high: f64,
    /// Estimated self time, ns: `share` × the region's duration (`None` without a duration).
    pub self_ns: Option<u64>,
    /// Its 95% interval, lower bound, ns.
    pub self_ns_low: Option<u64>,
    /// Upper bound, ns.
    pub self_ns_high: Option<u64>,
    /// The most frequent innermost op frame under `op` when it differs from it (`matmul`
    /// under `matmul.backward`, `add` under `broadcast_add`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inner_op: Option<String>,
    /// The thread's profile rests on fewer than [`FEW_SAMPLES`] samples.
    pub few_samples: bool,
    /// Allocating calls, exact (from the allocation sites, trace/13: calls that allocate at
    /// least the capture's threshold, see [`crate::sites`]); `None` without sites, or when no
    /// call of the row allocated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// Alloc-clocked time, ns: a second time source, measured from the allocation sites (each
    /// allocating call's start to the thread's next one, see [`crate::sites`]), beside the
    /// sampled `self_ns`; `None` without sites.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alloc_clocked_ns: Option<u64>,
}

/// One sampled thread's totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadTotals {
    /// The thread's key.
    pub thread: u64,
    /// Its name, when the sampler gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Samples counted (inside the region).
    pub samples: u64,
    /// Duration the shares are of, ns: the measured region's, else the thread's sampled
    /// window; `None` when neither is known.
    pub region_ns: Option<u64>,
    /// Timer expirations that gave no sample (overrun, full buffer), per the sampler.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
}

/// Totals of a profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleTotals {
    /// Samples in the trace.
    pub samples: u64,
    /// Samples counted in rows (inside the measured region).
    pub counted: u64,
    /// Samples outside the measured region (before or after it), not in any row.
    pub outside_region: u64,
    /// Samples lost (overrun, full buffer), all threads, per the sampler event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// Requested rate, Hz.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hz: Option<u64>,
    /// Timer period, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_ns: Option<u64>,
    /// How stacks were walked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unwinder: Option<String>,
    /// How well they were symbolised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbols: Option<SymbolQuality>,
    /// Measured region `[start, end)`, ns since session start, when closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<(u64, u64)>,
    /// Per thread.
    pub threads: Vec<ThreadTotals>,
    /// Backward samples whose arm could not be read (no line tables, another Candle version):
    /// counted as `backward`.
    pub backward_line_unknown: u64,
    /// Some thread's profile rests on fewer than [`FEW_SAMPLES`] samples.
    pub few_samples: bool,
    /// Samples the loader dropped (their stack undefined or rejected) or the sampler's account
    /// counts but the trace lacks: in no row, the figures rest on the kept ones; `biased` past
    /// [`crate::availability::BIASED_SHARE`] (the capability is then lowered to partial).
    pub dropped: Dropped,
}

/// File I/O inside an op: samples of one op whose stack reads or opens a file below it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileIoRow {
    /// The op.
    pub op: String,
    /// Its kind.
    pub kind: OpKind,
    /// Thread.
    pub thread: u64,
    /// The functions between the op and the I/O, outermost first
    /// (`candle_core::utils::get_num_threads`, `num_cpus::get_physical`, …).
    pub via: Vec<String>,
    /// The innermost I/O function (`__libc_read`, `std::fs::read_to_string`).
    pub io_function: String,
    /// Samples.
    pub samples: u64,
    /// Share of the thread's samples with its interval.
    pub share: Share,
    /// Samples of the op itself (all of its samples, I/O or not).
    pub op_samples: u64,
}

/// The sampled operations of one trace.
#[derive(Debug, Clone)]
pub struct OpProfile {
    /// Totals.
    pub totals: SampleTotals,
    /// Finest rows ([`GroupBy::OpPassModule`]), most samples first.
    pub rows: Vec<OpRow>,
    /// File I/O inside ops, most samples first.
    pub file_io: Vec<FileIoRow>,
    /// The class of every stack, by index into `doc.samples.stacks`.
    pub stack_classes: Vec<StackClass>,
    /// Per sample (index into `doc.samples.samples`): its row in `rows`, `None` outside the
    /// measured region.
    pub(crate) sample_rows: Vec<Option<u32>>,
    /// Per sample: its pass (for flame trees), `None` outside a pass.
    pub(crate) sample_passes: Vec<Option<Pass>>,
}

/// A file-I/O group: thread, op, path from the op, I/O function.
pub(crate) type IoKey = (u64, String, Vec<String>, String);

/// Pass order for sorting: forward, backward, optimizer, none.
pub(crate) fn pass_rank(p: Option<Pass>) -> u8 {
    match p {
        Some(Pass::Forward) => 0,
        Some(Pass::Backward) => 1,
        Some(Pass::Optimizer) => 2,
        None => 3,
    }
}

impl OpProfile {
    /// The profile of `doc` (its span hierarchy resolved here).
    ///
    /// # Errors
    /// [`Unavailable`] when the trace has no sample, with the producer's reason when it gave
    /// one.
    pub fn from_document(doc: &TraceDocument) -> Result<Self, Unavailable> {
        Self::from_document_with(doc, &SpanIndex::build(doc))
    }

    /// The row a sample (index into `doc.samples.samples`) is counted in; `None` outside the
    /// measured region or for an index out of range.
    pub fn row_of_sample(&self, sample: usize) -> Option<&OpRow> {
        self.sample_rows
            .get(sample)
            .copied()
            .flatten()
            .map(|r| &self.rows[r as usize])
    }

    /// The pass of a sample (index into `doc.samples.samples`), from its span.
    pub fn pass_of_sample(&self, sample: usize) -> Option<Pass> {
        self.sample_passes.get(sample).copied().flatten()
    }

    /// The finest rows grouped `by`; keys that are not grouped are `None` in the result;
    /// shares and intervals recomputed from the summed samples. Most samples first.
    pub fn rows_by(&self, by: GroupBy) -> Vec<OpRow> {
        self.rows_by_where(by, |_| true)
    }

    /// [`Self::rows_by`] over the finest rows that `keep` accepts (e.g. one pass): shares stay
    /// shares of the thread's samples.
    pub fn rows_by_where(&self, by: GroupBy, keep: impl Fn(&OpRow) -> bool) -> Vec<OpRow> {
        if by == GroupBy::OpPassModule {
            return self.rows.iter().filter(|r| keep(r)).cloned().collect();
        }
        type Key = (
            u64,
            Option<String>,
            Option<OpKind>,
            Option<Pass>,
            Option<String>,
            Option<ModuleSource>,
        );
        let mut index: HashMap<Key, usize> = HashMap::default();
        type Sums = (u64, HashMap<String, u64>, Option<u64>, Option<u64>);
        let mut out: Vec<(Key, Sums)> = Vec::new();
        for r in self.rows.iter().filter(|r| keep(r)) {
            let key: Key = match by {
                GroupBy::Op => (r.thread, r.op.clone(), r.kind, None, None, None),
                GroupBy::OpPass => (r.thread, r.op.clone(), r.kind, r.pass, None, None),
                GroupBy::Module => (
                    r.thread,
                    None,
                    None,
                    None,
                    r.module.clone(),
                    r.module_source,
                ),
                GroupBy::Pass => (r.thread, None, None, r.pass, None, None),
                GroupBy::OpPassModule => unreachable!("returned above"),
            };
            let i = *index.entry(key.clone()).or_insert_with(|| {
                out.push((key, (0, HashMap::default(), None, None)));
                out.len() - 1
            });
            let sums = &mut out[i].1;
            sums.0 += r.samples;
            sums.2 = add_opt(sums.2, r.calls);
            sums.3 = add_opt(sums.3, r.alloc_clocked_ns);
            if matches!(by, GroupBy::Op | GroupBy::OpPass) {
                if let Some(inner) = &r.inner_op {
                    *sums.1.entry(inner.clone()).or_insert(0) += r.samples;
                }
            }
        }
        let mut rows: Vec<OpRow> = out
            .into_iter()
            .map(
                |((thread, op, kind, pass, module, source), (samples, inner, calls, clocked))| {
                    let t = self.totals.threads.iter().find(|t| t.thread == thread);
                    let mut row = make_row(samples, t);
                    row.op = op;
                    row.kind = kind;
                    row.pass = pass;
                    row.module = module;
                    row.module_source = source;
                    row.inner_op = inner
                        .into_iter()
                        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
                        .map(|(n, _)| n);
                    row.calls = calls;
                    row.alloc_clocked_ns = clocked;
                    row
                },
            )
            .collect();
        sort_rows(&mut rows, SortBy::Samples);
        rows
    }

    /// Adds the allocation sites' exact call counts and alloc-clocked times
    /// ([`crate::SiteProfile`]) to the rows of the same thread, op, kind, pass and module; a
    /// site row without a sampled row becomes a row of 0 samples (its share an estimate with
    /// its interval, as every row's). Rows are sorted again (most samples first).
    pub fn attach_sites(&mut self, sites: &crate::SiteProfile) {
        type RowKey<'a> = (u64, &'a str, OpKind, Option<Pass>, Option<&'a str>);
        let mut index: HashMap<RowKey<'_>, usize> = HashMap::default();
        for (i, r) in self.rows.iter().enumerate() {
            if let (Some(op), Some(kind)) = (r.op.as_deref(), r.kind) {
                index.insert((r.thread, op, kind, r.pass, r.module.as_deref()), i);
            }
        }
        let mut found: Vec<(usize, u64, Option<u64>)> = Vec::new();
        let mut extra: Vec<OpRow> = Vec::new();
        for s in &sites.rows {
            // a site row without its thread has no counted calls and no clock: nothing to add
            let Some(thread) = s.thread else {
                continue;
            };
            let key = (thread, s.op.as_str(), s.kind, s.pass, s.module.as_deref());
            match index.get(&key) {
                Some(&i) => found.push((i, s.calls, s.alloc_clocked_ns)),
                None => {
                    let t = self.totals.threads.iter().find(|t| t.thread == thread);
                    let mut row = make_row(0, t);
                    row.thread = thread;
                    row.op = Some(s.op.clone());
                    row.kind = Some(s.kind);
                    row.pass = s.pass;
                    row.module = s.module.clone();
                    row.module_source = s.module_source;
                    row.calls = Some(s.calls);
                    row.alloc_clocked_ns = s.alloc_clocked_ns;
                    extra.push(row);
                }
            }
        }
        for (i, calls, clocked) in found {
            let r = &mut self.rows[i];
            r.calls = add_opt(r.calls, Some(calls));
            r.alloc_clocked_ns = add_opt(r.alloc_clocked_ns, clocked);
        }
        if extra.is_empty() {
            return;
        }
        // rows gain entries: the per-sample row indices are remapped after the sort
        let old = self.rows.len();
        self.rows.extend(extra);
        let mut order: Vec<u32> = (0..self.rows.len() as u32).collect();
        order.sort_by(|&a, &b| {
            cmp_rows(
                &self.rows[a as usize],
                &self.rows[b as usize],
                SortBy::Samples,
            )
        });
        let mut new_index = vec![0u32; self.rows.len()];
        for (new, &o) in order.iter().enumerate() {
            new_index[o as usize] = new as u32;
        }
        let mut slots: Vec<Option<OpRow>> = self.rows.drain(..).map(Some).collect();
        self.rows = order
            .iter()
            .map(|&o| slots[o as usize].take().expect("each row once"))
            .collect();
        for r in self.sample_rows.iter_mut().flatten() {
            debug_assert!((*r as usize) < old);
            *r = new_index[*r as usize];
        }
    }

    /// Samples of the rows matching `keep` (all threads).
    pub fn samples_where(&self, keep: impl Fn(&OpRow) -> bool) -> u64 {
        self.rows
            .iter()
            .filter(|r| keep(r))
            .map(|r| r.samples)
            .sum()
    }

    /// The estimated duration of `samples` samples of `thread`, ns: their share of the
    /// thread's samples × its region (`None` without a duration or samples).
    pub fn estimate_ns(&self, thread: u64, samples: u64) -> Option<u64> {
        let t = self.totals.threads.iter().find(|t| t.thread == thread)?;
        let share = Share::of(samples, t.samples)?;
        t.region_ns.map(|d| share.of_duration(d).0)
    }
}

/// A row of `samples` of thread `t` with its share, interval and estimate.
pub(crate) fn make_row(samples: u64, t: Option<&ThreadTotals>) -> OpRow {
    let n = t.map_or(0, |t| t.samples);
    let share = Share::of(samples, n);
    let est = match (share, t.and_then(|t| t.region_ns)) {
        (Some(s), Some(d)) => Some(s.of_duration(d)),
        _ => None,
    };
    OpRow {
        op: None,
        kind: None,
        pass: None,
        module: None,
        module_source: None,
        thread: t.map_or(0, |t| t.thread),
        samples,
        share: share.map_or(0.0, |s| s.share),
        share_low: share.map_or(0.0, |s| s.low),
        share_high: share.map_or(0.0, |s| s.high),
        self_ns: est.map(|e| e.0),
        self_ns_low: est.map(|e| e.1),
        self_ns_high: est.map(|e| e.2),
        inner_op: None,
        few_samples: n < FEW_SAMPLES,
        calls: None,
        alloc_clocked_ns: None,
    }
}

/// `a + b` of two optional counts: `None` only when both are.
fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

/// Compares two rows for `by`.
pub fn cmp_rows(a: &OpRow, b: &OpRow, by: SortBy) -> std::cmp::Ordering {
    let names = |a: &OpRow, b: &OpRow| {
        a.op.cmp(&b.op)
            .then_with(|| pass_rank(a.pass).cmp(&pass_rank(b.pass)))
            .then_with(|| a.module.cmp(&b.module))
            .then_with(|| a.thread.cmp(&b.thread))
            .then_with(|| a.kind.cmp(&b.kind))
    };
    let samples = |a: &OpRow, b: &OpRow| b.samples.cmp(&a.samples);
    match by {
        SortBy::Samples => samples(a, b).then_with(|| names(a, b)),
        SortBy::Op => names(a, b).then_with(|| samples(a, b)),
        SortBy::Pass => pass_rank(a.pass)
            .cmp(&pass_rank(b.pass))
            .then_with(|| samples(a, b))
            .then_with(|| names(a, b)),
        SortBy::Module => a
            .module
            .cmp(&b.module)
            .then_with(|| samples(a, b))
            .then_with(|| names(a, b)),
    }
}

/// Sorts rows for `by` (stable; O(r log r)).
pub fn sort_rows(rows: &mut [OpRow], by: SortBy) {
    rows.sort_by(|a, b| cmp_rows(a, b, by));
}

/// Keeps the rows of `pass` (`None`: every row).
pub fn filter_pass(rows: &mut Vec<OpRow>, pass: Option<Pass>) {
    if let Some(p) = pass {
        rows.retain(|r| r.pass == Some(p));
    }
}
