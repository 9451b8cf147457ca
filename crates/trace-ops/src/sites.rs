//! Which operation made each byte: the allocation sites of a trace (trace/13) read as
//! operations ([`SiteProfile`]).
//!
//! For every memory event with a site, the site's stack is classified with the op rules
//! ([`crate::classify_stack`]): the op (the outermost op frame: what the model called), its
//! kind (forward op, backward arm like `matmul.backward`, `grad_accumulate`, a non-op function
//! such as `candle_nn::optim::AdamW::step`), the module (the innermost module span around the
//! event; without module spans the stack's model `forward` frames, e.g. `llama2_c::Block`) and
//! the pass (of the event's span).
//!
//! # Calls (exact)
//! Candle's CPU ops allocate their output when they start, so every allocating op call has at
//! least one allocation at or above the capture's threshold. Calls are counted exactly, per
//! thread, over the allocations in the measured region: an allocation *continues* the current
//! call when it is in the same span, its op frame is the same function as the call's (at any
//! of its lines: candle-nn's `softmax` allocates at five) and its [`CALLER_FRAMES`] nearest
//! callers are the same frames (the same op called from the same place; a site's stack is cut
//! from its outer end at the probe's frame limit, so farther frames can be missing), and its stack has not been seen yet
//! in this call (an inner op of the same call: `contiguous` inside `matmul`). Any
//! other allocation starts a new call — so a loop calling `sqr` from one line fourteen times is
//! fourteen calls. The counts cover calls that allocate at least the threshold; an op that
//! allocates nothing (a view, an in-place update) or only below it is not counted.
//!
//! A backward arm's call is one execution of the arm (one node of its op): its allocations
//! continue the call across the gradient accumulations between them (conv2d's arm computes
//! the input's gradient, adds it into the accumulator, then computes the kernel's), and a new
//! execution starts when an allocation is at an earlier statement of `Tensor::backward` than
//! the call's last one or at the call's first site again (an arm runs its statements in order;
//! [`crate::rules::generated::BACKWARD_STATEMENTS`] gives each line's statement).
//!
//! # Alloc-clocked time (a second time source)
//! Each site-carrying allocation starts an interval on its thread that ends at the next one on
//! the same thread, clipped at the measured region's end and at the next span boundary (start
//! or end of any span). The intervals are summed per op: `alloc_clocked_ns`. It bounds the op
//! call's own time plus the glue until the next allocating call; it is measured, not sampled,
//! and independent of the sample count. Where it disagrees with the sampled `self_ns`:
//! non-allocating ops and work outside ops are added to the allocating op before them;
//! in-place updates have no interval of their own; waiting (I/O, locks) counts. On devices
//! whose ops run asynchronously (CUDA) an allocation marks the launch, not the kernel.
//!
//! One pass over the sites' stacks and one over the memory events in replay order:
//! O(stack frames + events log events + spans log spans).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use trace_memory::SpanIndex;
use trace_schema::{
    document::SiteTable, MemoryAction, MemoryItem, MemoryOrder, Pass, SampleTable, Sym,
    TraceDocument,
};

use crate::classify::{OpKind, StackClass};
use crate::profile::ModuleSource;
use crate::rules::{self, FrameRole};
use crate::shared_steps::{
    closed_region, module_of, op_ids, sort_remembering, stack_modules, StackFrames,
};

/// One storage with a site: what allocated it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageOp {
    /// The memory event's index (file order; [`trace_schema::MemoryItem::index`]).
    pub memory: u32,
    /// Index into [`SiteProfile::classes`] (one per site).
    pub site: u32,
    /// Index into [`SiteProfile::modules`].
    pub module: Option<u32>,
    /// Where the module comes from.
    pub module_source: Option<ModuleSource>,
    /// Pass of the event's span.
    pub pass: Option<Pass>,
    /// The allocating thread (`None` when the trace did not record it).
    pub thread: Option<u64>,
    /// Index into [`SiteProfile::rows`].
    pub row: u32,
}

/// How many frames outside an allocation's op frame say where the op was called from (the
/// nearest callers; a site's stack is cut from its outer end at the probe's frame limit).
pub const CALLER_FRAMES: usize = 4;

/// One row: the allocating calls of one op on one thread in one pass and module.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteOpRow {
    /// The op (`matmul`, `matmul.backward`, `grad_accumulate`) or a non-op function's path.
    pub op: String,
    /// What kind of thing `op` is.
    pub kind: OpKind,
    /// Pass; `None` outside any pass.
    pub pass: Option<Pass>,
    /// Module path; `None` outside any module.
    pub module: Option<String>,
    /// Where `module` comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module_source: Option<ModuleSource>,
    /// The allocating thread's key (`None` when the trace did not record it: such allocations
    /// are named and counted in `allocs` and `bytes`, but their calls are not counted and not
    /// clocked — both need the thread's previous and next allocation).
    pub thread: Option<u64>,
    /// Allocating calls (exact; calls that allocate at least the threshold, see the module
    /// docs), inside the measured region.
    pub calls: u64,
    /// Allocations with a site (all of them, inside and outside the region).
    pub allocs: u64,
    /// Their bytes (saturating).
    pub bytes: u64,
    /// Alloc-clocked time, ns (see the module docs); `None` when no allocation of the row is
    /// inside the measured region.
    pub alloc_clocked_ns: Option<u64>,
}

/// Totals of a site profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteTotals {
    /// Memory events with a site.
    pub storages: u64,
    /// Allocating calls inside the measured region.
    pub calls: u64,
    /// Sum of the rows' alloc-clocked time, ns.
    pub alloc_clocked_ns: u64,
    /// The capture's threshold, bytes (from its account).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold_bytes: Option<u64>,
    /// Allocations at or above the threshold whose stack was lost, per the account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// Measured region `[start, end)` the calls and times cover, when closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<(u64, u64)>,
}

/// The allocation sites of one trace, as operations.
#[derive(Debug, Clone)]
pub struct SiteProfile {
    /// The class of every site's stack, by site index ([`trace_schema::SiteTable::sites`]).
    pub classes: Vec<StackClass>,
    /// Module paths referred to by [`StorageOp::module`].
    pub modules: Vec<String>,
    /// The storages with a site, by memory index.
    pub storages: Vec<StorageOp>,
    /// Rows, most bytes first.
    pub rows: Vec<SiteOpRow>,
    /// Totals.
    pub totals: SiteTotals,
}

/// What allocated one storage, for a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageLabel<'a> {
    /// The op (or non-op function path).
    pub op: &'a str,
    /// Its kind.
    pub kind: OpKind,
    /// The module, when known.
    pub module: Option<&'a str>,
    /// Where it comes from.
    pub module_source: Option<ModuleSource>,
    /// The pass, when known.
    pub pass: Option<Pass>,
    /// The site index (distinct stacks).
    pub site: u32,
}

impl StorageLabel<'_> {
    /// `op · module · pass`, absent parts left out (`matmul · model/fc1 · forward`).
    pub fn display(&self) -> String {
        let mut parts = vec![self.op.to_string()];
        parts.extend(self.module.map(str::to_string));
        parts.extend(self.pass.map(|p| p.as_str().to_string()));
        parts.join(" · ")
    }
}

impl SiteProfile {
    /// The site profile of `doc`; `None` when no memory event carries a site.
    pub fn from_document(doc: &TraceDocument) -> Option<Self> {
        Self::from_document_with(doc, &SpanIndex::build(doc))
    }

    /// [`Self::from_document`] with the span hierarchy already resolved.
    pub fn from_document_with(doc: &TraceDocument, spans: &SpanIndex) -> Option<Self> {
        let mut pass = SitePass::new(doc, spans)?;
        doc.for_each_memory(MemoryOrder::Replay, |m| pass.observe(doc, spans, m));
        Some(pass.finish(doc))
    }

    /// What allocated memory event `memory` (its index), when it carries a site. O(log n).
    pub fn of_memory(&self, memory: u32) -> Option<StorageLabel<'_>> {
        let i = self
            .storages
            .binary_search_by_key(&memory, |s| s.memory)
            .ok()?;
        let s = &self.storages[i];
        let c = &self.classes[s.site as usize];
        Some(StorageLabel {
            op: &c.op,
            kind: c.kind,
            module: s.module.map(|m| self.modules[m as usize].as_str()),
            module_source: s.module_source,
            pass: s.pass,
            site: s.site,
        })
    }

    /// The rows grouped per op and pass (every thread and module together), most bytes
    /// first: the exact call counts the `ops` table shows.
    pub fn calls_by_op_pass(&self) -> Vec<SiteOpRow> {
        let mut out: BTreeMap<(String, OpKind, Option<Pass>), SiteOpRow> = BTreeMap::new();
        for r in &self.rows {
            let e = out
                .entry((r.op.clone(), r.kind, r.pass))
                .or_insert_with(|| SiteOpRow {
                    module: None,
                    module_source: None,
                    thread: r.thread,
                    calls: 0,
                    allocs: 0,
                    bytes: 0,
                    alloc_clocked_ns: None,
                    ..r.clone()
                });
            e.calls += r.calls;
            e.allocs += r.allocs;
            e.bytes = e.bytes.saturating_add(r.bytes);
            e.alloc_clocked_ns = match (e.alloc_clocked_ns, r.alloc_clocked_ns) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                (a, b) => a.or(b),
            };
        }
        let mut rows: Vec<SiteOpRow> = out.into_values().collect();
        rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.op.cmp(&b.op)));
        rows
    }
}

/// Frames of the allocator hook at the inner end of a site's stack: the innermost run of probe
/// and system frames, when it holds at least one probe frame (else 0: nothing is dropped).
fn hook_frames(roles: &[FrameRole]) -> usize {
    let run = roles
        .iter()
        .take_while(|r| matches!(r, FrameRole::Probe | FrameRole::System))
        .count();
    if roles[..run].iter().any(|r| matches!(r, FrameRole::Probe)) {
        run
    } else {
        0
    }
}

/// Every site's stack classified once (a frame's role once per site frame), and each site's
/// call context: the op frame (by function and op) and its [`CALLER_FRAMES`] nearest callers,
/// interned.
fn classify_sites(doc: &TraceDocument) -> (Vec<StackClass>, Vec<u32>, Vec<u32>) {
    let table = &doc.samples;
    let sites = &doc.sites;
    let mut role_cache: HashMap<u32, FrameRole> = HashMap::default();
    let mut classes = Vec::with_capacity(sites.sites.len());
    // the op frame and every frame outside it: the call's context, interned per site
    let mut contexts: Vec<u32> = Vec::with_capacity(sites.sites.len());
    let mut context_ids: HashMap<(u32, Vec<u32>), u32> = HashMap::default();
    let mut fn_ids: HashMap<(Option<&str>, Option<&str>, String), u32> = HashMap::default();
    let mut buf = StackFrames::default();
    let same_as = same_source_sites(table, sites);
    for site in &sites.sites {
        let stack = &table.stacks[site.stack as usize];
        let (_, roles) = buf.fill(table, &stack.frames, |f, frame| {
            role_cache
                .entry(f)
                .or_insert_with(|| FrameRole::of(frame))
                .clone()
        });
        // The allocator hook's own frames (the probe's walk, the hook, the global
        // allocator and `RawVec`) are innermost: the site is what called the allocator, so
        // the innermost run of probe and system frames goes when it holds a probe frame.
        let start = hook_frames(roles);
        let mut class = buf.classify_from(start);
        class.op_frame = class.op_frame.map(|i| i + start);
        // the op frame by its function (not its line: one call of `softmax` allocates
        // at five lines of it), its nearest callers exactly (where it was called from)
        let outer = class.op_frame.unwrap_or(start).min(stack.frames.len());
        // ... and by the op it names: every arm of Candle's backward pass is one function
        // (`Tensor::backward`), so its arms are told apart by op (`matmul.backward`)
        let op_fn = class.op_frame.map_or(u32::MAX, |i| {
            let f = &table.frames[stack.frames[i] as usize];
            let next = fn_ids.len() as u32;
            *fn_ids
                .entry((f.function.as_deref(), f.file.as_deref(), class.op.clone()))
                .or_insert(next)
        });
        let outside = if class.op_frame.is_some() {
            outer + 1
        } else {
            outer
        };
        // the nearest callers only: a site's stack is cut at the probe's frame limit from
        // the outer end, so deeper allocations of one call keep fewer outer frames
        let from = outside.min(stack.frames.len());
        let to = from.saturating_add(CALLER_FRAMES).min(stack.frames.len());
        let key = (op_fn, stack.frames[from..to].to_vec());
        let next = context_ids.len() as u32;
        contexts.push(*context_ids.entry(key).or_insert(next));
        classes.push(class);
    }
    (classes, contexts, same_as)
}

/// A frame by where it is in the source: function, file, line.
type SourceFrame<'a> = (Option<&'a str>, Option<&'a str>, Option<u32>);

/// Per site: the first site whose stack reads the same (every frame's function, file and line
/// alike), itself when none before it does. An optimised caller holds one source line at
/// several addresses (an unrolled loop calls `softmax` from two copies of its line): each copy
/// is a site of its own, but the same place in the source, so a call meeting it again is
/// another call.
fn same_source_sites(table: &SampleTable, sites: &SiteTable) -> Vec<u32> {
    // each frame by its source identity (the frames of one address are one frame already)
    let mut frame_ids: HashMap<SourceFrame<'_>, u32> = HashMap::default();
    let source_of: Vec<u32> = table
        .frames
        .iter()
        .map(|f| {
            let next = frame_ids.len() as u32;
            *frame_ids
                .entry((f.function.as_deref(), f.file.as_deref(), f.line))
                .or_insert(next)
        })
        .collect();
    let mut first: HashMap<Vec<u32>, u32> = HashMap::default();
    sites
        .sites
        .iter()
        .enumerate()
        .map(|(i, site)| {
            let stack = &table.stacks[site.stack as usize];
            let key: Vec<u32> = stack
                .frames
                .iter()
                .map(|&f| source_of[f as usize])
                .collect();
            *first.entry(key).or_insert(i as u32)
        })
        .collect()
}

/// Every span boundary (start or end), sorted, each once: an interval ends at the next one.
fn span_boundaries(doc: &TraceDocument) -> Vec<u64> {
    let mut boundaries: Vec<u64> = Vec::with_capacity(doc.spans.len() * 2);
    for s in &doc.spans {
        boundaries.push(s.start_ns);
        boundaries.extend(s.end_ns());
    }
    boundaries.sort_unstable();
    boundaries.dedup();
    boundaries
}

/// A row's key, like the op profile's finest rows: thread, op id, pass, module id, source.
type SiteKey = (
    Option<u64>,
    u32,
    Option<Pass>,
    Option<u32>,
    Option<ModuleSource>,
);

/// What the allocation at `site` (of class `class`) is to the backward pass's call counting.
fn arm_role(doc: &TraceDocument, class: &StackClass, site: u32) -> ArmRole {
    if class.kind != OpKind::BackwardOp {
        return ArmRole::Other;
    }
    match class.op.as_str() {
        rules::GRAD_ACCUMULATE => ArmRole::Accumulation,
        rules::BACKWARD | rules::SORT_NODES => ArmRole::Other,
        _ => ArmRole::Arm(class.op_frame.and_then(|i| {
            let stack = doc
                .samples
                .stacks
                .get(doc.sites.sites.get(site as usize)?.stack as usize)?;
            let line = doc
                .samples
                .frames
                .get(*stack.frames.get(i)? as usize)?
                .line?;
            Some(rules::backward_statement(line))
        })),
    }
}

/// [`SiteProfile::from_document_with`] fed one memory event at a time in replay order
/// (`(timestamp, file order)`), so that it needs no pass of its own: the memory replay shows
/// it every event it applies.
pub struct SitePass {
    classes: Vec<StackClass>,
    modules: crate::modules::Modules,
    replay: Replay,
}

impl SitePass {
    /// The pass over `doc`'s sites; `None` when no memory event carries a site.
    pub fn new(doc: &TraceDocument, spans: &SpanIndex) -> Option<Self> {
        let sites = &doc.sites;
        if sites.storages.is_empty() {
            return None;
        }
        let (classes, contexts, same_as) = classify_sites(doc);
        let mut modules = crate::modules::Modules::new(doc, spans);
        let stack_modules = stack_modules(&mut modules, &classes);
        let region = closed_region(doc, spans);
        let boundaries = span_boundaries(doc);
        // op identity: name and kind
        let (site_ops, _) = op_ids(&classes);
        let replay = Replay {
            contexts,
            same_as,
            stack_modules,
            site_ops,
            region,
            boundaries,
            row_of: HashMap::default(),
            keys: Vec::new(),
            rows: Vec::new(),
            open: HashMap::default(),
            clocked: Vec::new(),
            clocked_any: Vec::new(),
            storages: Vec::with_capacity(sites.storages.len()),
        };
        Some(Self {
            classes,
            modules,
            replay,
        })
    }

    /// Applies the next memory event (replay order).
    pub fn observe(&mut self, doc: &TraceDocument, spans: &SpanIndex, m: &MemoryItem<'_>) {
        self.replay
            .alloc(&self.classes, doc, spans, &mut self.modules, m);
    }

    /// The profile, once every event was observed.
    pub fn finish(self, doc: &TraceDocument) -> SiteProfile {
        let Self {
            classes,
            modules,
            replay,
        } = self;
        let region = replay.region;
        let (rows, storages) = replay.finish(&modules.names);
        let account = doc.sites.account.as_ref();
        let totals = SiteTotals {
            storages: storages.len() as u64,
            calls: rows.iter().map(|r| r.calls).sum(),
            alloc_clocked_ns: rows
                .iter()
                .filter_map(|r| r.alloc_clocked_ns)
                .fold(0u64, u64::saturating_add),
            threshold_bytes: account.map(|a| a.threshold_bytes),
            lost: account.map(|a| a.lost),
            region,
        };
        SiteProfile {
            classes,
            modules: modules.names,
            storages,
            rows,
            totals,
        }
    }
}

/// A thread's open allocation: its start and row, and its current call.
struct Open {
    start_ns: u64,
    row: u32,
    span: Option<Sym>,
    context: u32,
    sites: Vec<u32>,
    /// The backward arm's call this allocation is part of: the arm's own allocation, or a
    /// gradient accumulation after it (an arm adds each gradient into its accumulator before
    /// computing the next, so its later allocations continue the call across them).
    arm: Option<ArmCall>,
}

/// One execution of a backward arm (`matmul.backward`) being counted as one call.
#[derive(Clone)]
struct ArmCall {
    /// Its last allocation's time, span, call context and statement of `Tensor::backward`
    /// (its first line, [`rules::backward_statement`]).
    last_ns: u64,
    span: Option<Sym>,
    context: u32,
    line: Option<u32>,
    /// The sites it allocated at.
    sites: Vec<u32>,
}

/// What an allocation is to the backward pass's call counting.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ArmRole {
    /// Inside an arm of `Tensor::backward` (`matmul.backward`), at this statement of it (its
    /// first line).
    Arm(Option<u32>),
    /// A gradient accumulation (`grad_accumulate`: the arm's `or_insert` zeros and `add`).
    Accumulation,
    /// Anything else.
    Other,
}

/// The memory events replayed in order: rows, calls and alloc-clocked intervals per thread.
struct Replay {
    /// Per site: its call context.
    contexts: Vec<u32>,
    /// Per site: the first site of the same source lines ([`same_source_sites`]): a call's
    /// sites are told apart by it.
    same_as: Vec<u32>,
    /// Per site: its stack's model module.
    stack_modules: Vec<Option<u32>>,
    /// Per site: its op id.
    site_ops: Vec<u32>,
    /// The closed measured region, ns.
    region: Option<(u64, u64)>,
    /// [`span_boundaries`].
    boundaries: Vec<u64>,
    row_of: HashMap<SiteKey, u32>,
    keys: Vec<SiteKey>,
    rows: Vec<SiteOpRow>,
    /// Per thread: its open allocation.
    open: HashMap<u64, Open>,
    /// Per row: its alloc-clocked ns, and whether any interval was clocked.
    clocked: Vec<u64>,
    clocked_any: Vec<bool>,
    storages: Vec<StorageOp>,
}

impl Replay {
    /// The interval from `start` to `end`, clipped at the region's end and the next span
    /// boundary after `start`, ns.
    fn clip(&self, start: u64, end: u64) -> u64 {
        let mut end = end;
        if let Some((_, e)) = self.region {
            end = end.min(e);
        }
        let i = self.boundaries.partition_point(|&b| b <= start);
        if let Some(&b) = self.boundaries.get(i) {
            end = end.min(b);
        }
        end.saturating_sub(start)
    }

    /// Adds an interval to `row`'s alloc-clocked time.
    fn clock(&mut self, row: u32, ns: u64) {
        self.clocked[row as usize] = self.clocked[row as usize].saturating_add(ns);
        self.clocked_any[row as usize] = true;
    }

    /// The row of `key` (made for site `site`, of class `classes[site]`, when new).
    fn row(&mut self, classes: &[StackClass], key: SiteKey, site: u32) -> u32 {
        let (thread, _, pass, _, source) = key;
        *self.row_of.entry(key).or_insert_with(|| {
            self.keys.push(key);
            let c = &classes[site as usize];
            self.rows.push(SiteOpRow {
                op: c.op.clone(),
                kind: c.kind,
                pass,
                module: None,
                module_source: source,
                thread,
                calls: 0,
                allocs: 0,
                bytes: 0,
                alloc_clocked_ns: None,
            });
            self.clocked.push(0);
            self.clocked_any.push(false);
            (self.rows.len() - 1) as u32
        })
    }

    /// One memory event: an allocation with a site is counted in its row, ends its thread's
    /// open interval and (inside the region) starts one, continuing the open call or not.
    fn alloc(
        &mut self,
        classes: &[StackClass],
        doc: &TraceDocument,
        spans: &SpanIndex,
        modules: &mut crate::modules::Modules,
        m: &MemoryItem<'_>,
    ) {
        if m.action != MemoryAction::Alloc {
            return;
        }
        let Some(s) = doc.sites.of_memory(m.index) else {
            return;
        };
        let (pass, span_module) = match m.span {
            Some(sym) => modules.of(doc, spans, sym),
            None => (None, None),
        };
        let (module, source) = module_of(span_module, self.stack_modules[s.site as usize]);
        let thread = s.thread;
        let key: SiteKey = (thread, self.site_ops[s.site as usize], pass, module, source);
        let row = self.row(classes, key, s.site);
        let r = &mut self.rows[row as usize];
        r.allocs += 1;
        r.bytes = r.bytes.saturating_add(m.bytes.unwrap_or(0));
        self.storages.push(StorageOp {
            memory: m.index,
            site: s.site,
            module,
            module_source: source,
            pass,
            thread,
            row,
        });
        let inside = self
            .region
            .is_none_or(|(a, b)| a <= m.timestamp_ns && m.timestamp_ns < b);
        // without its thread an allocation neither ends nor starts a thread's interval
        let Some(thread) = thread else {
            return;
        };
        // the previous allocation on this thread ends here
        let prev = self.open.remove(&thread);
        if let Some(p) = &prev {
            let ns = self.clip(p.start_ns, m.timestamp_ns);
            self.clock(p.row, ns);
        }
        if !inside {
            return;
        }
        let context = self.contexts[s.site as usize];
        let role = arm_role(doc, &classes[s.site as usize], s.site);
        let site = self.same_as[s.site as usize];
        let no_boundary_since = |from: u64| {
            self.boundaries[self.boundaries.partition_point(|&b| b <= from)..]
                .first()
                .is_none_or(|&b| b > m.timestamp_ns)
        };
        let (continues, mut call_sites, arm) = match role {
            // an arm's allocation continues the arm's call carried over the accumulations
            // since its last one (same span, context and arm, no span boundary) unless the
            // arm starts over: an arm runs its statements in order, so an allocation at an
            // earlier statement of `Tensor::backward` than the call's last one, or at the
            // call's first site again, is another execution (one statement may call the same
            // op twice, and a statement's lines may be met in any order, so a repeated site
            // or an earlier line alone is not)
            ArmRole::Arm(line) => {
                let carried = prev.and_then(|p| p.arm);
                let starts_over = |a: &ArmCall| {
                    a.sites.first() == Some(&site)
                        || matches!((a.line, line), (Some(x), Some(y)) if y < x)
                };
                let (continues, sites) = match carried {
                    Some(a)
                        if a.span == m.span
                            && a.context == context
                            && !starts_over(&a)
                            && no_boundary_since(a.last_ns) =>
                    {
                        (true, a.sites)
                    }
                    _ => (false, Vec::new()),
                };
                let arm = ArmCall {
                    last_ns: m.timestamp_ns,
                    span: m.span,
                    context,
                    line,
                    sites: Vec::new(),
                };
                (continues, sites, Some(arm))
            }
            _ => {
                let carried = match (role, &prev) {
                    (ArmRole::Accumulation, Some(p)) => p.arm.clone(),
                    _ => None,
                };
                let (continues, sites) = match prev {
                    Some(p)
                        if p.span == m.span
                            && p.context == context
                            && !p.sites.contains(&site)
                            && no_boundary_since(p.start_ns) =>
                    {
                        (true, p.sites)
                    }
                    Some(mut p) => {
                        p.sites.clear();
                        (false, p.sites)
                    }
                    None => (false, Vec::new()),
                };
                (continues, sites, carried)
            }
        };
        // an inner op of the same call has the call's op frame, so the call's row
        if !continues {
            self.rows[row as usize].calls += 1;
        }
        call_sites.push(site);
        let arm = match (role, arm) {
            (ArmRole::Arm(_), Some(mut a)) => {
                a.sites.clone_from(&call_sites);
                Some(a)
            }
            (_, a) => a,
        };
        self.open.insert(
            thread,
            Open {
                start_ns: m.timestamp_ns,
                row,
                span: m.span,
                context,
                sites: call_sites,
                arm,
            },
        );
    }

    /// The rows (most bytes first, with their module names and clocked time) and the
    /// storages (by memory event, pointing at the sorted rows), once the last allocation of
    /// each thread has run to the region's end (or the next boundary).
    fn finish(mut self, module_names: &[String]) -> (Vec<SiteOpRow>, Vec<StorageOp>) {
        let mut last: Vec<(u64, Open)> = std::mem::take(&mut self.open).into_iter().collect();
        last.sort_unstable_by_key(|(t, _)| *t);
        for (_, p) in last {
            if let Some((_, e)) = self.region {
                let ns = self.clip(p.start_ns, e);
                self.clock(p.row, ns);
            }
        }
        for (i, r) in self.rows.iter_mut().enumerate() {
            let (_, _, _, module, _) = self.keys[i];
            r.module = module.map(|m| module_names[m as usize].clone());
            r.alloc_clocked_ns = self.clocked_any[i].then_some(self.clocked[i]);
        }
        // most bytes first; remap the storages' rows
        let (rows, new_index) = sort_remembering(self.rows, |x, y| {
            y.bytes
                .cmp(&x.bytes)
                .then_with(|| x.op.cmp(&y.op))
                .then_with(|| x.pass.cmp(&y.pass))
                .then_with(|| x.module.cmp(&y.module))
                .then_with(|| x.thread.cmp(&y.thread))
        });
        let mut storages = self.storages;
        for s in &mut storages {
            s.row = new_index[s.row as usize];
        }
        storages.sort_unstable_by_key(|s| s.memory);
        (rows, storages)
    }
}
