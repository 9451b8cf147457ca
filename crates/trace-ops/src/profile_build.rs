//! The steps of [`OpProfile::from_document_with`](crate::OpProfile::from_document_with): the
//! stacks classified, the samples counted per row, then the thread totals, each row's most
//! frequent inner op and the file-I/O rows from those counts.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use trace_memory::SpanIndex;
use trace_schema::sampling::SamplerEvent;
use trace_schema::{Pass, SampleTable, TraceDocument};

use crate::availability::{cut_before_account, no_sample_in_region, unavailable, Dropped};
use crate::classify::{function_path, OpKind, StackClass};
use crate::interval::Share;
use crate::modules::ModuleSource;
use crate::modules::Modules;
use crate::profile::{
    cmp_rows, make_row, FileIoRow, IoKey, OpProfile, OpRow, SampleTotals, SortBy, ThreadTotals,
    Unavailable, FEW_SAMPLES,
};
use crate::rules::FrameRole;
use crate::shared_steps::{closed_region, op_ids, sort_remembering, stack_modules};
use crate::shared_steps::{module_of, StackFrames};

impl OpProfile {
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
        let (roles, stack_classes) = classify_stacks(table);
        let io_paths = io_paths(table, &stack_classes, &roles);
        let region = closed_region(doc, spans);
        let sampler = table.sampler.as_ref();
        let mut modules = crate::modules::Modules::new(doc, spans);
        let stack_module_ids = stack_modules(&mut modules, &stack_classes);
        // rows key on the op's name and kind, not the stack: distinct stacks of one op merge
        let (op_ids, op_names) = op_ids(&stack_classes);
        let stacks = Stacks {
            classes: &stack_classes,
            modules: &stack_module_ids,
            op_ids: &op_ids,
            io_paths: &io_paths,
        };
        let counts = SampleCounts::count(doc, spans, &mut modules, region, &stacks);
        let threads = thread_totals(&counts.threads, sampler, region);
        let inner_best = inner_best(&counts.inner, &stack_classes);
        let rows: Vec<OpRow> = counts
            .keys
            .iter()
            .enumerate()
            .map(|(i, &(thread, op, pass, module, source))| {
                let (name, kind) = &op_names[op as usize];
                let t = threads.iter().find(|x| x.thread == thread);
                let mut row = make_row(counts.counts[i], t);
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
        let (rows, new_index) = sort_remembering(rows, |a, b| cmp_rows(a, b, SortBy::Samples));
        let mut sample_rows = counts.sample_rows;
        for r in sample_rows.iter_mut().flatten() {
            *r = new_index[*r as usize];
        }
        let file_io = file_io_rows(&counts.io, &stacks, &rows, &threads);

        let counted = sample_rows.iter().filter(|r| r.is_some()).count() as u64;
        if counted == 0 {
            return Err(no_sample_in_region(doc, region, counts.outside));
        }
        let dropped = Dropped::of(doc);
        let totals = SampleTotals {
            samples: table.samples.len() as u64,
            counted,
            outside_region: counts.outside,
            lost: sampler.map(|s| s.lost()),
            hz: sampler.map(|s| s.hz),
            period_ns: sampler.map(|s| s.period_ns),
            unwinder: sampler.map(|s| s.unwinder.clone()),
            symbols: sampler.map(|s| s.symbols),
            region,
            few_samples: threads.iter().any(|t| t.samples < FEW_SAMPLES) || threads.is_empty(),
            threads,
            backward_line_unknown: counts.backward_line_unknown,
            dropped,
        };
        Ok(Self {
            totals,
            rows,
            file_io,
            stack_classes,
            sample_rows,
            sample_passes: counts.sample_passes,
        })
    }
}

/// A file-I/O stack's path: the functions between its op and its I/O frame (outermost
/// first), and its outermost I/O function.
pub(crate) type IoPath = (Vec<String>, String);

/// A row's key: thread, op id, pass, module id, module source.
pub(crate) type SampleKey = (u64, u32, Option<Pass>, Option<u32>, Option<ModuleSource>);

/// Every frame's role (once), then every stack's class.
pub(crate) fn classify_stacks(table: &SampleTable) -> (Vec<FrameRole>, Vec<StackClass>) {
    let roles: Vec<FrameRole> = table.frames.iter().map(FrameRole::of).collect();
    let mut buf = StackFrames::default();
    let classes = table
        .stacks
        .iter()
        .map(|s| {
            buf.fill(table, &s.frames, |f, _| roles[f as usize].clone());
            buf.classify_from(0)
        })
        .collect();
    (roles, classes)
}

/// Per stack: its file-I/O path, when it reads or opens files inside an op.
pub(crate) fn io_paths(
    table: &SampleTable,
    classes: &[StackClass],
    roles: &[FrameRole],
) -> Vec<Option<IoPath>> {
    table
        .stacks
        .iter()
        .zip(classes)
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
        .collect()
}

/// What the stacks' classes say, for counting samples.
pub(crate) struct Stacks<'a> {
    /// Per stack: its class.
    pub(crate) classes: &'a [StackClass],
    /// Per stack: its model module's id.
    pub(crate) modules: &'a [Option<u32>],
    /// Per stack: its op id.
    pub(crate) op_ids: &'a [u32],
    /// Per stack: its file-I/O path.
    pub(crate) io_paths: &'a [Option<IoPath>],
}

/// The samples counted: rows by key, with what the rows, threads and file-I/O rows are made of.
pub(crate) struct SampleCounts {
    /// Each row's key, in order of first sample.
    pub(crate) keys: Vec<SampleKey>,
    /// Each row's samples.
    pub(crate) counts: Vec<u64>,
    /// Samples per (row, stack) of stacks with an inner op.
    pub(crate) inner: HashMap<(u32, u32), u64>,
    /// Samples per thread.
    pub(crate) threads: BTreeMap<u64, u64>,
    /// Samples per (thread, stack) of stacks with a file-I/O path.
    pub(crate) io: HashMap<(u64, u32), u64>,
    /// Per sample: its row, `None` outside the region.
    pub(crate) sample_rows: Vec<Option<u32>>,
    /// Per sample: the pass of its span.
    pub(crate) sample_passes: Vec<Option<Pass>>,
    /// Samples outside the region.
    pub(crate) outside: u64,
    /// Samples of `Tensor::backward` at an unknown line.
    pub(crate) backward_line_unknown: u64,
}

impl SampleCounts {
    /// Counts every sample of `doc` inside `region` (all of them without one) in its row.
    pub(crate) fn count(
        doc: &TraceDocument,
        spans: &SpanIndex,
        modules: &mut Modules,
        region: Option<(u64, u64)>,
        stacks: &Stacks<'_>,
    ) -> Self {
        let table = &doc.samples;
        let mut c = Self {
            keys: Vec::new(),
            counts: Vec::new(),
            inner: HashMap::default(),
            threads: BTreeMap::new(),
            io: HashMap::default(),
            sample_rows: Vec::with_capacity(table.samples.len()),
            sample_passes: Vec::with_capacity(table.samples.len()),
            outside: 0,
            backward_line_unknown: 0,
        };
        let mut row_of: HashMap<SampleKey, u32> = HashMap::default();
        for sample in &table.samples {
            let (pass, span_module) = match sample.span {
                Some(sym) => modules.of(doc, spans, sym),
                None => (None, None),
            };
            c.sample_passes.push(pass);
            let inside = match region {
                Some((s, e)) => s <= sample.timestamp_ns && sample.timestamp_ns < e,
                None => true,
            };
            if !inside {
                c.outside += 1;
                c.sample_rows.push(None);
                continue;
            }
            let stack = sample.stack as usize;
            let class = &stacks.classes[stack];
            if class.backward_line_unknown {
                c.backward_line_unknown += 1;
            }
            // The probe's row of a pass has no module: its cost is the probe's, not a layer's.
            let (module, source) = match class.kind {
                OpKind::Probe => (None, None),
                _ => module_of(span_module, stacks.modules[stack]),
            };
            let key: SampleKey = (sample.thread, stacks.op_ids[stack], pass, module, source);
            let next = c.keys.len() as u32;
            let row = *row_of.entry(key).or_insert_with(|| {
                c.keys.push(key);
                c.counts.push(0);
                next
            });
            c.counts[row as usize] += 1;
            if class.inner_op.is_some() {
                *c.inner.entry((row, sample.stack)).or_insert(0) += 1;
            }
            *c.threads.entry(sample.thread).or_insert(0) += 1;
            if stacks.io_paths[stack].is_some() {
                *c.io.entry((sample.thread, sample.stack)).or_insert(0) += 1;
            }
            c.sample_rows.push(Some(row));
        }
        c
    }
}

/// Each sampled thread's totals, with the sampler's account of it.
pub(crate) fn thread_totals(
    counts: &BTreeMap<u64, u64>,
    sampler: Option<&SamplerEvent>,
    region: Option<(u64, u64)>,
) -> Vec<ThreadTotals> {
    counts
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
        .collect()
}

/// The most frequent inner op per row (ties: the first name), linear in the (row, stack)
/// pairs.
pub(crate) fn inner_best<'a>(
    inner: &HashMap<(u32, u32), u64>,
    classes: &'a [StackClass],
) -> HashMap<u32, (u64, &'a str)> {
    let mut best: HashMap<u32, (u64, &str)> = HashMap::default();
    let mut by_name: HashMap<(u32, &str), u64> = HashMap::default();
    for (&(row, stack), &n) in inner {
        if let Some(inner) = classes[stack as usize].inner_op.as_deref() {
            *by_name.entry((row, inner)).or_insert(0) += n;
        }
    }
    for (&(row, name), &n) in &by_name {
        let e = best.entry(row).or_insert((0, name));
        if n > e.0 || (n == e.0 && name < e.1) {
            *e = (n, name);
        }
    }
    best
}

/// File I/O per (thread, op, path), most samples first.
pub(crate) fn file_io_rows(
    io: &HashMap<(u64, u32), u64>,
    stacks: &Stacks<'_>,
    rows: &[OpRow],
    threads: &[ThreadTotals],
) -> Vec<FileIoRow> {
    let mut io_rows: HashMap<IoKey, (OpKind, u64)> = HashMap::default();
    for (&(thread, stack), &n) in io {
        let class = &stacks.classes[stack as usize];
        let (via, io) = stacks.io_paths[stack as usize]
            .clone()
            .expect("counted only with a path");
        io_rows
            .entry((thread, class.op.clone(), via, io))
            .or_insert((class.kind, 0))
            .1 += n;
    }
    let mut op_samples: HashMap<(u64, &str), u64> = HashMap::default();
    for r in rows {
        if let Some(op) = r.op.as_deref() {
            *op_samples.entry((r.thread, op)).or_insert(0) += r.samples;
        }
    }
    let mut file_io: Vec<FileIoRow> = io_rows
        .into_iter()
        .map(|((thread, op, via, io_function), (kind, samples))| {
            let n = threads
                .iter()
                .find(|x| x.thread == thread)
                .map_or(0, |t| t.samples);
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
    file_io
}
