//! Per-step memory of a capture of several steps (spans with a `step_index`, trace/13): each
//! step's live bytes at its start and end, its peak, what it allocated, and what it left
//! behind — the storages allocated in the step and still live at its end, grouped by
//! allocating span, op, shape and dtype — and whether memory grows from step to step
//! ([`MemoryGrowth`]).
//!
//! # Semantics
//! - Live bytes follow the logical replay's rules: events in `(timestamp_ns, file order)`, a
//!   second alloc of a live storage is an alias (bytes once), `pre_existing` storages are live
//!   from the start and are never a step's allocation. Identity is `(device, storage id)`, or
//!   `(device, tensor id)` without storage ids.
//! - A step owns the memory events whose time lies in its span's `[start, end]`; its peak is
//!   the largest live total after any of them (or at its start). A step span that never closed
//!   has no end figures (`None`), and no step after it is read.
//! - Growth: live bytes at the end of every step are strictly above those at the end of the
//!   step before (at the first step's start, for the first). Any step that ends at or below
//!   where the one before ended is a steady state (no growth), whatever the others did.
//!
//! # Cost
//! O(n log n) in memory events (the time-ordered pass) plus O(s log s) in step spans: each
//! allocation is looked at once more when its step ends.

use std::collections::BTreeMap;

use serde::Serialize;
use trace_schema::{MemoryAction, MemoryItem, MemoryOrder, ShapeId, Sym, TraceDocument};

use crate::spans::SpanIndex;
use crate::storage_map::{StorageKey, StorageMap, StorageRef};

/// How many groups of retained storages a step lists, largest first.
pub const RETAINED_GROUPS: usize = 5;

/// What one step of a multi-step capture did to memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepMemory {
    /// The step (or inference call) number, one-based, as the loop counted it.
    pub step_index: u64,
    /// The step span's id.
    pub span_id: String,
    /// Start of the step span, ns since session start.
    pub start_ns: u64,
    /// End of the step span, ns; `None` when it never closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_ns: Option<u64>,
    /// Live bytes (all devices) when the step began; `None` (null) when the trace's byte
    /// counts overflow (see [`StepMemory::forget_bytes`]).
    pub live_at_start_bytes: Option<u64>,
    /// Live bytes when it ended; `None` (null) when it never closed or the byte counts overflow.
    pub live_at_end_bytes: Option<u64>,
    /// The largest live total inside the step, bytes; `None` (null) when the byte counts
    /// overflow.
    pub peak_bytes: Option<u64>,
    /// When that peak was first reached, ns since session start; `None` (null) when the byte
    /// counts overflow (there is no peak to place).
    pub peak_timestamp_ns: Option<u64>,
    /// Storages the step allocated (aliases and `pre_existing` storages excluded).
    pub allocation_count: u64,
    /// Their bytes; `None` (null) when the byte counts overflow.
    pub allocated_bytes: Option<u64>,
    /// Storages allocated in the step and still live at its end; `None` when it never closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retained_count: Option<u64>,
    /// Their bytes; `None` (null) when it never closed or the byte counts overflow.
    pub retained_bytes: Option<u64>,
    /// They, grouped by allocating span, op, shape and dtype, largest first (at most
    /// [`RETAINED_GROUPS`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retained: Vec<RetainedGroup>,
}

impl StepMemory {
    /// Drops every byte figure of the step (they become `None`, null in JSON) and the
    /// retained groups: when the trace's byte counts add up past `u64::MAX` no live, peak or
    /// allocated figure can be real, and a saturated or wrapped sum must never be shown as one.
    /// Counts of storages stay.
    pub fn forget_bytes(&mut self) {
        self.live_at_start_bytes = None;
        self.live_at_end_bytes = None;
        self.peak_bytes = None;
        self.peak_timestamp_ns = None;
        self.allocated_bytes = None;
        self.retained_bytes = None;
        self.retained.clear();
    }

    /// Whether the step's byte figures were refused ([`StepMemory::forget_bytes`]).
    pub fn bytes_unknown(&self) -> bool {
        self.peak_bytes.is_none()
    }
}

/// Storages of one kind a step left live at its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetainedGroup {
    /// Path of the span that allocated them, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span: Option<String>,
    /// Allocating op, when the trace names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Shape, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
    /// Dtype, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// How many.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Live memory that grows at every step of a capture (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryGrowth {
    /// Steps read.
    pub steps: u64,
    /// Live bytes at the first step's start.
    pub start_bytes: u64,
    /// Live bytes at the last step's end.
    pub end_bytes: u64,
    /// Per captured step, how much higher its end is than the end of the captured step before
    /// it (the first step: than its start, which misses what the loop allocated before the
    /// first step's guard), bytes; every one above 0. With steps captured apart (1, 5, 9) an
    /// entry covers the step numbers since the one before (4 here).
    pub per_step_bytes: Vec<u64>,
    /// The step numbers read (`step_index`), in order: `[1, 5, 9]` when those were captured.
    pub step_indices: Vec<u64>,
    /// The step numbers from the first captured step's end to the last's: the sum of the gaps
    /// between captured step numbers (a gap that does not increase counts as 1); `steps - 1`
    /// when they are consecutive.
    pub steps_spanned: u64,
    /// The growth per step, bytes: from the first step's end to the last's, over the step
    /// *numbers* in between (`(end - first end) / steps_spanned`, rounded down) — whole loop
    /// iterations, what happens between two steps' guards included. Steps 1, 5 and 9 with
    /// 4,096 B kept each grow 8,192 B over 8 step numbers: 1,024 B per step (issue 46).
    pub bytes_per_step: u64,
    /// Every step after the first grew by the same number of bytes per step number.
    pub constant: bool,
}

impl MemoryGrowth {
    /// The captured step numbers are consecutive (no gap between them).
    pub fn consecutive(&self) -> bool {
        self.steps_spanned.saturating_add(1) == self.steps
    }
}

/// Group key: allocating span, op, shape, dtype.
type GroupKey = (Option<Sym>, Option<Sym>, Option<ShapeId>, Option<Sym>);

#[derive(Debug)]
struct Live {
    bytes: u64,
    /// The alloc event's index (the lifetime), for telling a freed-and-reallocated id apart.
    alloc: u32,
}

#[derive(Debug)]
struct Owned {
    /// `None`: an alloc without an identity (live to the end).
    key: Option<StorageKey>,
    alloc: u32,
    bytes: u64,
    group: GroupKey,
}

#[derive(Debug)]
struct Open {
    step: usize,
    owned: Vec<Owned>,
}

/// The step spans of `doc` (those with a `step_index`), in start order: `(span index, step)`.
pub fn step_spans(doc: &TraceDocument) -> Vec<(usize, u64)> {
    let mut steps: Vec<(usize, u64)> = doc
        .spans
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.step_index.map(|n| (i, u64::from(n.get()))))
        .collect();
    steps.sort_by_key(|&(i, n)| (doc.spans[i].start_ns, n));
    steps
}

/// The memory of every step span of `doc`, in start order; empty without step spans or
/// memory events. One pass of its own over the memory events; [`StepMemoryPass`] rides along
/// another pass in replay order instead.
pub fn step_memory(doc: &TraceDocument, spans: &SpanIndex) -> Vec<StepMemory> {
    let Some(mut pass) = StepMemoryPass::new(doc) else {
        return Vec::new();
    };
    doc.for_each_memory(MemoryOrder::Replay, |m| pass.observe(m));
    pass.finish(doc, spans)
}

/// [`step_memory`] fed one memory event at a time, in replay order (`(timestamp, file
/// order)`, as [`TraceDocument::for_each_memory`] gives them), so that it needs no pass of its
/// own: the memory replay shows it every event it applies.
#[derive(Debug)]
pub struct StepMemoryPass {
    out: Vec<StepMemory>,
    groups: Vec<BTreeMap<GroupKey, (u64, u64)>>,
    live: StorageMap<Live>,
    live_bytes: u64,
    next: usize,
    open: Option<Open>,
    /// Once a step never closed, later steps are not read (their start cannot be placed).
    stopped: bool,
    /// A byte sum passed `u64::MAX`: no step's byte figure is real.
    overflowed: bool,
}

impl StepMemoryPass {
    /// The pass over `doc`'s step spans; `None` without step spans or memory events.
    pub fn new(doc: &TraceDocument) -> Option<Self> {
        let steps = step_spans(doc);
        if steps.is_empty() || doc.memory_len() == 0 {
            return None;
        }
        let out = empty_steps(doc, &steps);
        Some(Self {
            groups: vec![BTreeMap::new(); out.len()],
            out,
            live: StorageMap::new(),
            live_bytes: 0,
            next: 0,
            open: None,
            stopped: false,
            overflowed: false,
        })
    }

    /// Places the step boundaries up to `ts`.
    fn cross(&mut self, ts: u64) {
        let Self {
            out,
            groups,
            live,
            live_bytes,
            next,
            open,
            stopped,
            overflowed,
        } = self;
        loop {
            if let Some(o) = &*open {
                if out[o.step].end_ns.is_some_and(|e| e < ts) {
                    let o = open.take().expect("open step");
                    *overflowed |= finalize(o, live, *live_bytes, out, groups);
                    continue;
                }
            }
            if !*stopped && *next < out.len() && out[*next].start_ns <= ts {
                if let Some(o) = open.take() {
                    if out[o.step].end_ns.is_none() {
                        // An unclosed step with another after it: stop reading steps.
                        *stopped = true;
                        *open = Some(o);
                        break;
                    }
                    *overflowed |= finalize(o, live, *live_bytes, out, groups);
                }
                out[*next].live_at_start_bytes = Some(*live_bytes);
                out[*next].peak_bytes = Some(*live_bytes);
                *open = Some(Open {
                    step: *next,
                    owned: Vec::new(),
                });
                *next += 1;
                continue;
            }
            break;
        }
    }

    /// Applies the next memory event (replay order).
    pub fn observe(&mut self, m: &MemoryItem<'_>) {
        let ts = m.timestamp_ns;
        self.cross(ts);
        let key = StorageRef::of(m);
        match m.action {
            MemoryAction::Alloc => {
                if key.is_some_and(|k| self.live.contains(k)) {
                    return; // an alias: one lifetime, bytes once
                }
                let bytes = m.bytes.unwrap_or(0);
                self.live_bytes = self.live_bytes.checked_add(bytes).unwrap_or_else(|| {
                    self.overflowed = true;
                    u64::MAX
                });
                if let Some(k) = key {
                    self.live.insert(
                        k,
                        Live {
                            bytes,
                            alloc: m.index,
                        },
                    );
                }
                if let Some(o) = &mut self.open {
                    if !m.pre_existing {
                        let step = &mut self.out[o.step];
                        step.allocation_count += 1;
                        step.allocated_bytes =
                            step.allocated_bytes.and_then(|a| a.checked_add(bytes));
                        self.overflowed |= step.allocated_bytes.is_none();
                        o.owned.push(Owned {
                            key: key.map(StorageRef::to_key),
                            alloc: m.index,
                            bytes,
                            group: (m.span, m.op_name, m.shape, m.dtype),
                        });
                    }
                }
            }
            MemoryAction::Free => {
                if let Some(l) = key.and_then(|k| self.live.remove(k)) {
                    self.live_bytes = self.live_bytes.saturating_sub(l.bytes);
                }
            }
        }
        if let Some(o) = &self.open {
            let step = &mut self.out[o.step];
            if step.peak_bytes.is_some_and(|p| self.live_bytes > p) {
                step.peak_bytes = Some(self.live_bytes);
                step.peak_timestamp_ns = Some(ts);
            }
        }
    }

    /// The steps' memory, once every event was observed.
    pub fn finish(mut self, doc: &TraceDocument, spans: &SpanIndex) -> Vec<StepMemory> {
        let (mut out, mut groups) = (self.out, self.groups);
        let mut stopped = self.stopped;
        if let Some(o) = self.open.take() {
            if out[o.step].end_ns.is_some() {
                self.overflowed |= finalize(o, &self.live, self.live_bytes, &mut out, &mut groups);
            } else {
                stopped = true;
            }
        }
        // Steps after the last memory event saw none: their live bytes are the last known.
        if !stopped {
            stopped = !read_tail_steps(&mut out, &mut self.next, self.live_bytes);
        }
        if stopped {
            out.truncate(self.next);
        }
        name_retained_groups(doc, spans, &mut out, groups);
        if self.overflowed {
            out.iter_mut().for_each(StepMemory::forget_bytes);
        }
        out
    }
}

/// One record per step span with nothing measured yet.
fn empty_steps(doc: &TraceDocument, steps: &[(usize, u64)]) -> Vec<StepMemory> {
    steps
        .iter()
        .map(|&(i, n)| {
            let s = &doc.spans[i];
            StepMemory {
                step_index: n,
                span_id: doc.str(s.id).to_string(),
                start_ns: s.start_ns,
                end_ns: s.end_ns(),
                live_at_start_bytes: Some(0),
                live_at_end_bytes: None,
                peak_bytes: Some(0),
                peak_timestamp_ns: Some(s.start_ns),
                allocation_count: 0,
                allocated_bytes: Some(0),
                retained_count: None,
                retained_bytes: None,
                retained: Vec::new(),
            }
        })
        .collect()
}

/// Closes the step `o`: its live bytes at the end and what it allocated that is still live
/// (counted, and added to the step's groups). True when a byte sum passed `u64::MAX`.
fn finalize(
    o: Open,
    live: &StorageMap<Live>,
    live_bytes: u64,
    out: &mut [StepMemory],
    groups: &mut [BTreeMap<GroupKey, (u64, u64)>],
) -> bool {
    let step = &mut out[o.step];
    let (mut count, mut bytes, mut overflowed) = (0u64, 0u64, false);
    for owned in o.owned {
        let still = match &owned.key {
            Some(k) => live.get(k.as_ref()).is_some_and(|l| l.alloc == owned.alloc),
            None => true,
        };
        if still {
            count += 1;
            let g = groups[o.step].entry(owned.group).or_insert((0, 0));
            g.0 += 1;
            match (bytes.checked_add(owned.bytes), g.1.checked_add(owned.bytes)) {
                (Some(b), Some(gb)) => (bytes, g.1) = (b, gb),
                _ => overflowed = true,
            }
        }
    }
    step.live_at_end_bytes = Some(live_bytes);
    step.retained_count = Some(count);
    step.retained_bytes = Some(bytes);
    overflowed
}

/// Steps after the last memory event saw none: their live bytes are the last known. Returns
/// `false` at an unclosed step (`next` is past it; later steps are not read).
fn read_tail_steps(out: &mut [StepMemory], next: &mut usize, live_bytes: u64) -> bool {
    while *next < out.len() {
        let step = &mut out[*next];
        step.live_at_start_bytes = Some(live_bytes);
        step.peak_bytes = Some(live_bytes);
        if step.end_ns.is_some() {
            step.live_at_end_bytes = Some(live_bytes);
            step.retained_count = Some(0);
            step.retained_bytes = Some(0);
        } else {
            *next += 1;
            return false;
        }
        *next += 1;
    }
    true
}

/// The largest groups of what each step allocated and left live, named.
fn name_retained_groups(
    doc: &TraceDocument,
    spans: &SpanIndex,
    out: &mut [StepMemory],
    groups: Vec<BTreeMap<GroupKey, (u64, u64)>>,
) {
    for (step, groups) in out.iter_mut().zip(groups) {
        let mut list: Vec<(GroupKey, (u64, u64))> = groups.into_iter().collect();
        list.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
        list.truncate(RETAINED_GROUPS);
        step.retained = list
            .into_iter()
            .map(|((span, op, shape, dtype), (count, bytes))| RetainedGroup {
                span: span
                    .and_then(|s| doc.span_index(s))
                    .map(|i| spans.indexed_path(doc, i)),
                op: op.map(|o| doc.str(o).to_string()),
                shape: shape.map(|s| doc.shape(s).to_vec()),
                dtype: dtype.map(|d| doc.str(d).to_string()),
                count,
                bytes,
            })
            .collect();
    }
}

/// Whether memory grows at every step (see the module docs); `None` with fewer than two
/// closed steps, or when some step does not end above the one before.
pub fn memory_growth(steps: &[StepMemory]) -> Option<MemoryGrowth> {
    if steps.len() < 2 {
        return None;
    }
    let mut before = steps[0].live_at_start_bytes?;
    let mut per_step = Vec::with_capacity(steps.len());
    for s in steps {
        let end = s.live_at_end_bytes?;
        if end <= before {
            return None;
        }
        per_step.push(end - before);
        before = end;
    }
    // Every step ended above the one before: `before` (the last end) ≥ the first end.
    let first_end = steps[0].live_at_end_bytes?;
    let n = steps.len() as u64;
    // the step numbers between consecutive captured steps; one that does not increase is 1
    let gaps: Vec<u64> = steps
        .windows(2)
        .map(|w| w[1].step_index.saturating_sub(w[0].step_index).max(1))
        .collect();
    let spanned = gaps.iter().fold(0u64, |a, &g| a.saturating_add(g));
    let bytes_per_step = (before - first_end) / spanned;
    // the same bytes per step number in every gap (exact, no rounding)
    let constant = per_step[1..]
        .iter()
        .zip(&gaps)
        .all(|(&b, &g)| bytes_per_step.checked_mul(g) == Some(b));
    Some(MemoryGrowth {
        steps: n,
        start_bytes: steps[0].live_at_start_bytes?,
        end_bytes: before,
        bytes_per_step,
        constant,
        per_step_bytes: per_step,
        step_indices: steps.iter().map(|s| s.step_index).collect(),
        steps_spanned: spanned,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(start: u64, end: Option<u64>) -> StepMemory {
        StepMemory {
            step_index: 1,
            span_id: "s2".into(),
            start_ns: 0,
            end_ns: Some(1),
            live_at_start_bytes: Some(start),
            live_at_end_bytes: end,
            peak_bytes: Some(0),
            peak_timestamp_ns: Some(0),
            allocation_count: 0,
            allocated_bytes: Some(0),
            retained_count: None,
            retained_bytes: None,
            retained: Vec::new(),
        }
    }

    const TRACE: &str = r#"{"kind":"meta","schema":"candle-graph/trace/13","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z","capture_step":2,"last_capture_step":3}
{"kind":"span_start","id":"s1","name":"e","start_ns":0,"span_kind":"function","measured":true}
{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"P","bytes":100,"category":"parameter","pre_existing":true}
{"kind":"span_start","id":"s2","parent_id":"s1","name":"step 2","start_ns":10,"span_kind":"function","step_index":2}
{"kind":"memory","timestamp_ns":12,"action":"alloc","device":"cpu","storage_id":"A","bytes":10,"span_id":"s2","shape":[2,5],"dtype":"u8"}
{"kind":"memory","timestamp_ns":13,"action":"alloc","device":"cpu","storage_id":"T","bytes":50,"span_id":"s2"}
{"kind":"memory","timestamp_ns":14,"action":"free","device":"cpu","storage_id":"T"}
{"kind":"span_end","id":"s2","duration_ns":10}
{"kind":"memory","timestamp_ns":21,"action":"alloc","device":"cpu","storage_id":"X","bytes":7,"span_id":"s1"}
{"kind":"span_start","id":"s3","parent_id":"s1","name":"step 3","start_ns":22,"span_kind":"function","step_index":3}
{"kind":"memory","timestamp_ns":23,"action":"alloc","device":"cpu","storage_id":"B","bytes":10,"span_id":"s3","shape":[2,5],"dtype":"u8"}
{"kind":"memory","timestamp_ns":24,"action":"alloc","device":"cpu","storage_id":"B","bytes":10,"span_id":"s3"}
{"kind":"memory","timestamp_ns":25,"action":"free","device":"cpu","storage_id":"X"}
{"kind":"span_end","id":"s3","duration_ns":8}
{"kind":"span_end","id":"s1","duration_ns":40}
{"kind":"terminal","outcome":"complete","timestamp_ns":40}
"#;

    #[test]
    fn each_step_has_its_figures_and_what_it_left_live() {
        let doc = trace_schema::load_str(TRACE).unwrap();
        let steps = step_memory(&doc, &SpanIndex::build(&doc));
        assert_eq!(steps.len(), 2);
        let (a, b) = (&steps[0], &steps[1]);
        assert_eq!((a.step_index, a.span_id.as_str()), (2, "s2"));
        assert_eq!(
            (a.live_at_start_bytes, a.live_at_end_bytes),
            (Some(100), Some(110))
        );
        assert_eq!((a.peak_bytes, a.peak_timestamp_ns), (Some(160), Some(13)));
        assert_eq!((a.allocation_count, a.allocated_bytes), (2, Some(60)));
        assert_eq!((a.retained_count, a.retained_bytes), (Some(1), Some(10)));
        assert_eq!(a.retained.len(), 1);
        let g = &a.retained[0];
        assert_eq!(g.span.as_deref(), Some("e/step 2"));
        assert_eq!(
            (g.shape.as_deref(), g.dtype.as_deref()),
            (Some(&[2, 5][..]), Some("u8"))
        );
        // X was allocated between the steps (in neither) and freed in step 3; B's second
        // alloc is an alias.
        assert_eq!(
            (b.live_at_start_bytes, b.live_at_end_bytes),
            (Some(117), Some(120))
        );
        assert_eq!((b.allocation_count, b.allocated_bytes), (1, Some(10)));
        assert_eq!((b.retained_count, b.retained_bytes), (Some(1), Some(10)));
        let growth = memory_growth(&steps).expect("grows");
        assert_eq!(growth.per_step_bytes, vec![10, 10]);
        assert_eq!((growth.start_bytes, growth.end_bytes), (100, 120));
    }

    #[test]
    fn growth_needs_every_step_to_end_higher() {
        let grows = [
            step(100, Some(110)),
            step(110, Some(120)),
            step(115, Some(130)),
        ];
        let g = memory_growth(&grows).expect("growth");
        assert_eq!(g.per_step_bytes, vec![10, 10, 10]);
        assert_eq!((g.bytes_per_step, g.constant), (10, true));
        // One step ending where the one before ended is a steady state.
        let steady = [step(100, Some(110)), step(110, Some(110))];
        assert_eq!(memory_growth(&steady), None);
        assert_eq!(memory_growth(&grows[..1]), None);
        assert_eq!(memory_growth(&[step(1, Some(2)), step(2, None)]), None);
        // The first step is measured from its own start: the rate is from its end on.
        let first_short = [step(5, Some(10)), step(12, Some(30)), step(30, Some(50))];
        let g = memory_growth(&first_short).expect("growth");
        assert_eq!(g.per_step_bytes, vec![5, 20, 20]);
        assert_eq!((g.bytes_per_step, g.constant), (20, true));
        let uneven = [step(0, Some(10)), step(10, Some(30)), step(30, Some(40))];
        let g = memory_growth(&uneven).expect("growth");
        assert_eq!((g.bytes_per_step, g.constant), (15, false));
    }
}
