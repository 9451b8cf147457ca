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
use trace_schema::{FrameEvent, MemoryAction, MemoryOrder, Pass, Sym, TraceDocument};

use crate::classify::{classify_roles, OpKind, StackClass};
use crate::profile::ModuleSource;
use crate::rules::FrameRole;

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
        let sites = &doc.sites;
        if sites.storages.is_empty() {
            return None;
        }
        let table = &doc.samples;
        // every site's stack classified once (a frame's role once per site frame)
        let mut role_cache: HashMap<u32, FrameRole> = HashMap::default();
        let mut classes = Vec::with_capacity(sites.sites.len());
        // the op frame and every frame outside it: the call's context, interned per site
        let mut contexts: Vec<u32> = Vec::with_capacity(sites.sites.len());
        let mut context_ids: HashMap<(u32, Vec<u32>), u32> = HashMap::default();
        let mut fn_ids: HashMap<(Option<&str>, Option<&str>, String), u32> = HashMap::default();
        let mut frames_buf: Vec<&FrameEvent> = Vec::new();
        let mut roles_buf: Vec<FrameRole> = Vec::new();
        for site in &sites.sites {
            let stack = &table.stacks[site.stack as usize];
            frames_buf.clear();
            roles_buf.clear();
            for &f in stack.frames.iter() {
                let frame = &table.frames[f as usize];
                frames_buf.push(frame);
                let role = role_cache
                    .entry(f)
                    .or_insert_with(|| FrameRole::of(frame))
                    .clone();
                roles_buf.push(role);
            }
            // The allocator hook's own frames (the probe's walk, the hook, the global
            // allocator and `RawVec`) are innermost: the site is what called the allocator, so
            // the innermost run of probe and system frames goes when it holds a probe frame.
            let start = hook_frames(&roles_buf);
            let mut class = classify_roles(&frames_buf[start..], &roles_buf[start..]);
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

        let mut modules = crate::modules::Modules::new(doc, spans);
        let stack_modules: Vec<Option<u32>> = classes
            .iter()
            .map(|c| c.stack_module.as_deref().map(|m| modules.intern(m)))
            .collect();

        let region = spans
            .measured_region(doc)
            .and_then(|(s, e)| e.map(|e| (s, e)));
        // every span boundary, sorted: an interval ends at the next one
        let mut boundaries: Vec<u64> = Vec::with_capacity(doc.spans.len() * 2);
        for s in &doc.spans {
            boundaries.push(s.start_ns);
            boundaries.extend(s.end_ns());
        }
        boundaries.sort_unstable();
        boundaries.dedup();

        // rows keyed like the op profile's finest rows
        type Key = (
            Option<u64>,
            u32,
            Option<Pass>,
            Option<u32>,
            Option<ModuleSource>,
        );
        let mut row_of: HashMap<Key, u32> = HashMap::default();
        let mut keys: Vec<Key> = Vec::new();
        let mut rows: Vec<SiteOpRow> = Vec::new();
        // op identity: name and kind
        let mut op_ids: HashMap<(&str, OpKind), u32> = HashMap::default();
        let site_ops: Vec<u32> = classes
            .iter()
            .map(|c| {
                let next = op_ids.len() as u32;
                *op_ids.entry((c.op.as_str(), c.kind)).or_insert(next)
            })
            .collect();

        /// A thread's open allocation: its start and row, and its current call.
        struct Open {
            start_ns: u64,
            row: u32,
            span: Option<Sym>,
            context: u32,
            sites: Vec<u32>,
        }
        let mut open: HashMap<u64, Open> = HashMap::default();
        let mut clocked: Vec<u64> = Vec::new();
        let mut clocked_any: Vec<bool> = Vec::new();
        let clip = |start: u64, end: u64| -> u64 {
            let mut end = end;
            if let Some((_, e)) = region {
                end = end.min(e);
            }
            let i = boundaries.partition_point(|&b| b <= start);
            if let Some(&b) = boundaries.get(i) {
                end = end.min(b);
            }
            end.saturating_sub(start)
        };
        let mut storages: Vec<StorageOp> = Vec::with_capacity(sites.storages.len());
        doc.for_each_memory(MemoryOrder::Replay, |m| {
            if m.action != MemoryAction::Alloc {
                return;
            }
            let Some(s) = sites.of_memory(m.index) else {
                return;
            };
            let (pass, span_module) = match m.span {
                Some(sym) => modules.of(doc, spans, sym),
                None => (None, None),
            };
            let (module, source) = match (span_module, stack_modules[s.site as usize]) {
                (Some(x), _) => (Some(x), Some(ModuleSource::Span)),
                (None, Some(x)) => (Some(x), Some(ModuleSource::Stack)),
                (None, None) => (None, None),
            };
            let thread = s.thread;
            let key: Key = (thread, site_ops[s.site as usize], pass, module, source);
            let row = *row_of.entry(key).or_insert_with(|| {
                keys.push(key);
                let c = &classes[s.site as usize];
                rows.push(SiteOpRow {
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
                clocked.push(0);
                clocked_any.push(false);
                (rows.len() - 1) as u32
            });
            let r = &mut rows[row as usize];
            r.allocs += 1;
            r.bytes = r.bytes.saturating_add(m.bytes.unwrap_or(0));
            storages.push(StorageOp {
                memory: m.index,
                site: s.site,
                module,
                module_source: source,
                pass,
                thread,
                row,
            });
            let inside = region.is_none_or(|(a, b)| a <= m.timestamp_ns && m.timestamp_ns < b);
            // without its thread an allocation neither ends nor starts a thread's interval
            let Some(thread) = thread else {
                return;
            };
            // the previous allocation on this thread ends here
            let prev = open.remove(&thread);
            if let Some(p) = &prev {
                let ns = clip(p.start_ns, m.timestamp_ns);
                clocked[p.row as usize] = clocked[p.row as usize].saturating_add(ns);
                clocked_any[p.row as usize] = true;
            }
            if !inside {
                return;
            }
            let context = contexts[s.site as usize];
            let (continues, mut call_sites) = match prev {
                Some(p)
                    if p.span == m.span
                        && p.context == context
                        && !p.sites.contains(&s.site)
                        && boundaries[boundaries.partition_point(|&b| b <= p.start_ns)..]
                            .first()
                            .is_none_or(|&b| b > m.timestamp_ns) =>
                {
                    (true, p.sites)
                }
                Some(mut p) => {
                    p.sites.clear();
                    (false, p.sites)
                }
                None => (false, Vec::new()),
            };
            // an inner op of the same call has the call's op frame, so the call's row
            if !continues {
                rows[row as usize].calls += 1;
            }
            call_sites.push(s.site);
            open.insert(
                thread,
                Open {
                    start_ns: m.timestamp_ns,
                    row,
                    span: m.span,
                    context,
                    sites: call_sites,
                },
            );
        });
        // the last allocation of each thread runs to the region's end (or the next boundary)
        let mut last: Vec<(u64, Open)> = open.into_iter().collect();
        last.sort_unstable_by_key(|(t, _)| *t);
        for (_, p) in last {
            if let Some((_, e)) = region {
                let ns = clip(p.start_ns, e);
                clocked[p.row as usize] = clocked[p.row as usize].saturating_add(ns);
                clocked_any[p.row as usize] = true;
            }
        }
        for (i, r) in rows.iter_mut().enumerate() {
            let (_, _, _, module, _) = keys[i];
            r.module = module.map(|m| modules.names[m as usize].clone());
            r.alloc_clocked_ns = clocked_any[i].then_some(clocked[i]);
        }
        // most bytes first; remap the storages' rows
        let mut order: Vec<u32> = (0..rows.len() as u32).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&rows[a as usize], &rows[b as usize]);
            y.bytes
                .cmp(&x.bytes)
                .then_with(|| x.op.cmp(&y.op))
                .then_with(|| x.pass.cmp(&y.pass))
                .then_with(|| x.module.cmp(&y.module))
                .then_with(|| x.thread.cmp(&y.thread))
        });
        let mut new_index = vec![0u32; rows.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old as usize] = new as u32;
        }
        let mut slots: Vec<Option<SiteOpRow>> = rows.into_iter().map(Some).collect();
        let rows: Vec<SiteOpRow> = order
            .iter()
            .map(|&o| slots[o as usize].take().expect("each row once"))
            .collect();
        for s in &mut storages {
            s.row = new_index[s.row as usize];
        }
        storages.sort_unstable_by_key(|s| s.memory);
        let account = sites.account.as_ref();
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
        Some(Self {
            classes,
            modules: modules.names,
            storages,
            rows,
            totals,
        })
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
