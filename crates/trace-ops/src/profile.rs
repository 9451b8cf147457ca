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

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use trace_memory::SpanIndex;
use trace_schema::{FrameEvent, Pass, SymbolQuality, TraceDocument};

use crate::availability::{cut_before_account, no_sample_in_region, unavailable, Dropped};
use crate::classify::{classify_roles, function_path, OpKind, StackClass};
use crate::interval::Share;
use crate::rules::FrameRole;

/// A profile of fewer samples than this (on a thread) is flagged "few samples": too few to
/// rank ops (issue 27: the demo's 12 ms step at 1 kHz gives ~12).
pub const FEW_SAMPLES: u64 = 100;

/// Where a row's module comes from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ModuleSource {
    /// A module span around the sample (the probe's or the model's).
    Span,
    /// The stack's `forward` frames of model types (no module span).
    Stack,
}

impl ModuleSource {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

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

/// Why a trace has no operation profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unavailable {
    /// The reason (`not captured`, the producer's own reason).
    pub reason: String,
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
    sample_rows: Vec<Option<u32>>,
    /// Per sample: its pass (for flame trees), `None` outside a pass.
    sample_passes: Vec<Option<Pass>>,
}

/// A file-I/O group: thread, op, path from the op, I/O function.
type IoKey = (u64, String, Vec<String>, String);

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

    /// [`Self::from_document`] with the span hierarchy already resolved.
    ///
    /// # Errors
    /// As [`Self::from_document`].
    pub fn from_document_with(doc: &TraceDocument, spans: &SpanIndex) -> Result<Self, Unavailable> {
        let table = &doc.samples;
        if table.samples.is_empty() {
            return Err(unavailable(doc));
        }
        if let Some(why) = cut_before_account(doc) {
            return Err(Unavailable { reason: why });
        }
        // every frame's role once, then every stack's class
        let roles: Vec<FrameRole> = table.frames.iter().map(FrameRole::of).collect();
        let mut stack_classes = Vec::with_capacity(table.stacks.len());
        let mut frames_buf: Vec<&FrameEvent> = Vec::new();
        let mut roles_buf: Vec<FrameRole> = Vec::new();
        for s in &table.stacks {
            frames_buf.clear();
            roles_buf.clear();
            for &f in s.frames.iter() {
                frames_buf.push(&table.frames[f as usize]);
                roles_buf.push(roles[f as usize].clone());
            }
            stack_classes.push(classify_roles(&frames_buf, &roles_buf));
        }
        // per stack: the file-I/O path, interned
        let io_paths: Vec<Option<(Vec<String>, String)>> = table
            .stacks
            .iter()
            .zip(&stack_classes)
            .map(|(s, c)| {
                let &io = c.file_io_frames.last()?;
                let op_frame = c.op_frame?;
                let frame = |i: usize| &table.frames[s.frames[i] as usize];
                let mut via: Vec<String> = ((io + 1)..op_frame)
                    .rev()
                    .filter(|&i| roles[s.frames[i] as usize] == FrameRole::Other)
                    .map(|i| function_path(frame(i)))
                    .collect();
                via.dedup();
                Some((via, function_path(frame(c.file_io_frames[0]))))
            })
            .collect();

        let region = spans
            .measured_region(doc)
            .and_then(|(s, e)| e.map(|e| (s, e)));
        let sampler = table.sampler.as_ref();
        let mut modules = crate::modules::Modules::new(doc, spans);
        let stack_module_ids: Vec<Option<u32>> = stack_classes
            .iter()
            .map(|c| c.stack_module.as_deref().map(|m| modules.intern(m)))
            .collect();

        // rows key on the op's name and kind, not the stack: distinct stacks of one op merge
        let mut op_names: Vec<(String, OpKind)> = Vec::new();
        let mut op_index: HashMap<(&str, OpKind), u32> = HashMap::default();
        let op_ids: Vec<u32> = stack_classes
            .iter()
            .map(|c| {
                *op_index.entry((c.op.as_str(), c.kind)).or_insert_with(|| {
                    op_names.push((c.op.clone(), c.kind));
                    (op_names.len() - 1) as u32
                })
            })
            .collect();
        type Key = (u64, u32, Option<Pass>, Option<u32>, Option<ModuleSource>);
        let mut row_of: HashMap<Key, u32> = HashMap::default();
        let mut keys: Vec<Key> = Vec::new();
        let mut counts: Vec<u64> = Vec::new();
        let mut inner_counts: HashMap<(u32, u32), u64> = HashMap::default();
        let mut thread_counts: BTreeMap<u64, u64> = BTreeMap::new();
        let mut io_counts: HashMap<(u64, u32), u64> = HashMap::default();
        let mut sample_rows = Vec::with_capacity(table.samples.len());
        let mut sample_passes = Vec::with_capacity(table.samples.len());
        let mut outside = 0u64;
        let mut backward_line_unknown = 0u64;
        for sample in &table.samples {
            let (pass, span_module) = match sample.span {
                Some(sym) => modules.of(doc, spans, sym),
                None => (None, None),
            };
            sample_passes.push(pass);
            let inside = match region {
                Some((s, e)) => s <= sample.timestamp_ns && sample.timestamp_ns < e,
                None => true,
            };
            if !inside {
                outside += 1;
                sample_rows.push(None);
                continue;
            }
            let stack = sample.stack as usize;
            let class = &stack_classes[stack];
            if class.backward_line_unknown {
                backward_line_unknown += 1;
            }
            let (module, source) = match (span_module, stack_module_ids[stack]) {
                (Some(m), _) => (Some(m), Some(ModuleSource::Span)),
                (None, Some(m)) => (Some(m), Some(ModuleSource::Stack)),
                (None, None) => (None, None),
            };
            let key: Key = (sample.thread, op_ids[stack], pass, module, source);
            let next = keys.len() as u32;
            let row = *row_of.entry(key).or_insert_with(|| {
                keys.push(key);
                counts.push(0);
                next
            });
            counts[row as usize] += 1;
            if class.inner_op.is_some() {
                *inner_counts.entry((row, sample.stack)).or_insert(0) += 1;
            }
            *thread_counts.entry(sample.thread).or_insert(0) += 1;
            if io_paths[stack].is_some() {
                *io_counts.entry((sample.thread, sample.stack)).or_insert(0) += 1;
            }
            sample_rows.push(Some(row));
        }

        // thread totals
        let threads: Vec<ThreadTotals> = thread_counts
            .iter()
            .map(|(&thread, &samples)| {
                let st = sampler.and_then(|s| s.threads.iter().find(|t| t.thread == thread));
                ThreadTotals {
                    thread,
                    name: st.and_then(|t| t.name.clone()),
                    samples,
                    region_ns: match region {
                        Some((s, e)) => Some(e - s),
                        None => st.map(|t| t.end_ns.saturating_sub(t.start_ns)),
                    },
                    lost: st.map(|t| t.lost_overrun.saturating_add(t.lost_buffer)),
                }
            })
            .collect();
        let thread_of = |t: u64| threads.iter().find(|x| x.thread == t);

        // the most frequent inner op per row (linear in the (row, stack) pairs)
        let mut inner_best: HashMap<u32, (u64, &str)> = HashMap::default();
        let mut inner_by_name: HashMap<(u32, &str), u64> = HashMap::default();
        for (&(row, stack), &n) in &inner_counts {
            if let Some(inner) = stack_classes[stack as usize].inner_op.as_deref() {
                *inner_by_name.entry((row, inner)).or_insert(0) += n;
            }
        }
        for (&(row, name), &n) in &inner_by_name {
            let e = inner_best.entry(row).or_insert((0, name));
            if n > e.0 || (n == e.0 && name < e.1) {
                *e = (n, name);
            }
        }

        let mut rows: Vec<OpRow> = keys
            .iter()
            .enumerate()
            .map(|(i, &(thread, op, pass, module, source))| {
                let (name, kind) = &op_names[op as usize];
                let t = thread_of(thread);
                let mut row = make_row(counts[i], t);
                row.op = Some(name.clone());
                row.kind = Some(*kind);
                row.pass = pass;
                row.module = module.map(|m| modules.names[m as usize].clone());
                row.module_source = source;
                row.inner_op = inner_best
                    .get(&(i as u32))
                    .map(|&(_, n)| n.to_string())
                    .filter(|n| Some(n.as_str()) != row.op.as_deref());
                row
            })
            .collect();
        // sort, remembering where each row went for the per-sample index
        let mut order: Vec<u32> = (0..rows.len() as u32).collect();
        order.sort_by(|&a, &b| cmp_rows(&rows[a as usize], &rows[b as usize], SortBy::Samples));
        let mut new_index = vec![0u32; rows.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old as usize] = new as u32;
        }
        let mut slots: Vec<Option<OpRow>> = rows.drain(..).map(Some).collect();
        let rows: Vec<OpRow> = order
            .iter()
            .map(|&o| slots[o as usize].take().expect("each row once"))
            .collect();
        for r in sample_rows.iter_mut().flatten() {
            *r = new_index[*r as usize];
        }

        // file I/O per (thread, op, path)
        let mut io_rows: HashMap<IoKey, (OpKind, u64)> = HashMap::default();
        for (&(thread, stack), &n) in &io_counts {
            let class = &stack_classes[stack as usize];
            let (via, io) = io_paths[stack as usize]
                .clone()
                .expect("counted only with a path");
            io_rows
                .entry((thread, class.op.clone(), via, io))
                .or_insert((class.kind, 0))
                .1 += n;
        }
        let mut op_samples: HashMap<(u64, &str), u64> = HashMap::default();
        for r in &rows {
            if let Some(op) = r.op.as_deref() {
                *op_samples.entry((r.thread, op)).or_insert(0) += r.samples;
            }
        }
        let mut file_io: Vec<FileIoRow> = io_rows
            .into_iter()
            .map(|((thread, op, via, io_function), (kind, samples))| {
                let n = thread_of(thread).map_or(0, |t| t.samples);
                let op_samples = op_samples.get(&(thread, op.as_str())).copied().unwrap_or(0);
                FileIoRow {
                    share: Share::of(samples, n).expect("a counted sample makes n > 0"),
                    op,
                    kind,
                    thread,
                    via,
                    io_function,
                    samples,
                    op_samples,
                }
            })
            .collect();
        file_io.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| a.op.cmp(&b.op))
                .then_with(|| a.via.cmp(&b.via))
        });

        let counted = sample_rows.iter().filter(|r| r.is_some()).count() as u64;
        if counted == 0 {
            return Err(no_sample_in_region(doc, region, outside));
        }
        let dropped = Dropped::of(doc);
        let totals = SampleTotals {
            samples: table.samples.len() as u64,
            counted,
            outside_region: outside,
            lost: sampler.map(|s| s.lost()),
            hz: sampler.map(|s| s.hz),
            period_ns: sampler.map(|s| s.period_ns),
            unwinder: sampler.map(|s| s.unwinder.clone()),
            symbols: sampler.map(|s| s.symbols),
            region,
            few_samples: threads.iter().any(|t| t.samples < FEW_SAMPLES) || threads.is_empty(),
            threads,
            backward_line_unknown,
            dropped,
        };
        Ok(Self {
            totals,
            rows,
            file_io,
            stack_classes,
            sample_rows,
            sample_passes,
        })
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
fn make_row(samples: u64, t: Option<&ThreadTotals>) -> OpRow {
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
