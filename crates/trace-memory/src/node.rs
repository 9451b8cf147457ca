//! Per-node memory metrics for spans and operations.
//!
//! # Definitions
//! For a node with interval `[s, e)` (a span: `start_ns .. start_ns + duration_ns`; an operation:
//! `timestamp_ns .. timestamp_ns + duration_ns`; a span never closed runs to the end of the
//! trace), over storage lifetimes that are not pre-existing:
//! - `direct_allocated_bytes`: bytes of the storages whose alloc event names this span (a span
//!   counts its operations' allocations too). An operation gets an allocation only when the
//!   event's `op_name` names exactly one operation of the event's span; otherwise the allocation
//!   stays at span level and the operation's direct figure is `None` (ambiguous, not zero).
//! - `subtree_peak_live_bytes`: the highest, over the events at times in `[s, e)` (applied one
//!   at a time, as everywhere in this crate), of the bytes of storages allocated at or after
//!   `s` and live after the event — "allocated during the interval", clipped to the interval. It starts from zero: storages already live when the
//!   node began are not the node's (they are in the step peak).
//! - `subtree_residual_bytes`: bytes of storages allocated in `[s, e)` and not freed by `e`
//!   (free after `e`, or never); `None` for a span never closed.
//! - `output_dense_bytes`: an operation's output element count × dtype size.
//!
//! For well-nested spans with sequential execution (children inside parents, siblings
//! disjoint), "allocated during the interval" is exactly "allocated by the node's subtree".
//! Where that does not hold the interval definition is the one used: allocations of concurrent
//! work (another thread's spans) that fall inside the interval count toward the node; a child
//! that outlives its parent contributes only what it allocated before the parent's end; an
//! allocation of the subtree stamped outside the interval is clipped away.
//!
//! # Coverage
//! Under `capture_contract.logical_memory == complete` a node without evidence has known zeros.
//! A trace whose logical profile is refused (allocation sizes adding past 2^64) has no known
//! figure at all: every node's is `None`, whatever the contract.
//! Otherwise (partial or undeclared) a node is `None` unless something was observed: direct
//! figures need an allocation attributed to the node; interval figures need an allocation
//! inside the interval.
//!
//! # Cost
//! One sweep over lifetimes in alloc order, with a range-add / range-max segment tree over the
//! alloc events (subtree peaks; a live total is highest right after an alloc), and one sweep by
//! free time with a Fenwick tree (residuals): O((L + N) log L) for L lifetimes and N nodes.

use serde::Serialize;
use trace_schema::{CoverageLevel, Sym, TraceDocument};

use rustc_hash::FxHashMap;

use crate::logical::LogicalMemoryProfile;
use crate::replay::{Life, OPEN};
use crate::segtree::{Fenwick, MaxAddTree};

/// Memory metrics of one span or operation; `None` = not observed (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodeMemoryMetrics {
    /// Bytes allocated by the node itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct_allocated_bytes: Option<u64>,
    /// Peak live bytes of what was allocated during the node's interval, clipped to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtree_peak_live_bytes: Option<u64>,
    /// Bytes allocated during the interval and still live at its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtree_residual_bytes: Option<u64>,
    /// Output dense bytes (operations only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_dense_bytes: Option<u64>,
}

/// Metrics of every node: `spans[i]` for `doc.spans[i]`, `ops[j]` for `doc.ops[j]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodeMetrics {
    /// Same index as `doc.spans`.
    pub spans: Vec<NodeMemoryMetrics>,
    /// Same index as `doc.ops`.
    pub ops: Vec<NodeMemoryMetrics>,
}

#[derive(Clone, Copy)]
enum OpSlot {
    Unique(u32),
    Ambiguous,
}

/// Computes the per-node metrics. Pass the document's logical profile when you have it;
/// `None` (or a [`crate::Detail::Summary`] profile, which does not keep every lifetime)
/// recomputes it in full detail (the result is the same).
pub fn node_memory_metrics(
    doc: &TraceDocument,
    logical: Option<&LogicalMemoryProfile>,
) -> NodeMetrics {
    let owned;
    let logical = match logical {
        Some(l) if l.detail == crate::Detail::Full => Some(l),
        _ => {
            owned = crate::analyze_memory(doc).logical;
            owned.as_ref()
        }
    };
    let empty: Vec<Life> = Vec::new();
    let all = logical.map_or(&empty, |l| &l.compact.lives);
    // No profile of a trace with memory events: the replay refused it (sizes adding past
    // 2^64), and every figure is unknown, not a known zero of a complete contract.
    let refused = logical.is_none() && doc.memory_len() > 0;
    let complete = !refused
        && doc
            .effective_contract()
            .is_some_and(|c| c.logical_memory == CoverageLevel::Complete);

    // Lifetimes that are allocations (not pre-existing), already in alloc-time order.
    let lives: Vec<&Life> = all.iter().filter(|l| !l.pre_existing).collect();
    debug_assert!(lives.windows(2).all(|w| w[0].start_seq < w[1].start_seq));

    // Direct attribution.
    let mut op_slot: FxHashMap<(Sym, Sym), OpSlot> = FxHashMap::default();
    for (j, op) in doc.ops.iter().enumerate() {
        op_slot
            .entry((op.span, op.op_name))
            .and_modify(|s| *s = OpSlot::Ambiguous)
            .or_insert(OpSlot::Unique(j as u32));
    }
    let mut span_direct: Vec<Option<u64>> = vec![None; doc.spans.len()];
    let mut op_direct: Vec<Option<u64>> = vec![None; doc.ops.len()];
    // Sums of distinct lifetimes: bounded by the trace's checked total.
    let add = |slot: &mut Option<u64>, b: u64| *slot = Some(slot.unwrap_or(0) + b);
    for l in &lives {
        let Some(span) = l.span else { continue };
        if let Some(i) = doc.span_index(span) {
            add(&mut span_direct[i], l.bytes);
        }
        if let Some(OpSlot::Unique(j)) = l.op_name.and_then(|o| op_slot.get(&(span, o))) {
            add(&mut op_direct[*j as usize], l.bytes);
        }
    }

    // Nodes as intervals: spans first, then ops.
    let ns = doc.spans.len();
    let mut nodes: Vec<(u64, u64)> = doc
        .spans
        .iter()
        .map(|s| (s.start_ns, s.end_ns().unwrap_or(OPEN)))
        .collect();
    nodes.extend(
        doc.ops
            .iter()
            .map(|o| (o.timestamp_ns, o.timestamp_ns.saturating_add(o.duration_ns))),
    );

    // Positions: the alloc events of `lives`, in the order they apply. A lifetime covers the
    // positions from its own to the last alloc before its free.
    let n = lives.len();
    let lb = |x: u64| -> usize {
        if x == OPEN {
            n
        } else {
            lives.partition_point(|l| l.start_ns < x)
        }
    };
    let cover_end = |l: &Life| lives.partition_point(|m| m.start_seq < l.end_seq);

    // Subtree peaks: nodes by start descending; lifetimes with start >= s are in the tree.
    let mut peak = vec![0u64; nodes.len()];
    let mut observed = vec![false; nodes.len()];
    let mut by_start: Vec<u32> = (0..nodes.len() as u32).collect();
    by_start.sort_unstable_by_key(|&q| std::cmp::Reverse(nodes[q as usize].0));
    let mut tree = MaxAddTree::new(n);
    let mut p = n;
    for &q in &by_start {
        let (s, e) = nodes[q as usize];
        while p > 0 && lives[p - 1].start_ns >= s {
            p -= 1;
            let l = lives[p];
            tree.add(p, cover_end(l), l.bytes);
        }
        let (lo, hi) = (lb(s), lb(e).max(lb(s)));
        observed[q as usize] = hi > lo;
        peak[q as usize] = tree.max(lo, hi);
    }

    // Residuals: closed nodes by end descending; lifetimes with end > e are in the Fenwick tree.
    let mut residual = vec![0u64; nodes.len()];
    let mut by_end: Vec<u32> = (0..nodes.len() as u32)
        .filter(|&q| nodes[q as usize].1 != OPEN)
        .collect();
    by_end.sort_unstable_by_key(|&q| std::cmp::Reverse(nodes[q as usize].1));
    let mut lives_by_end: Vec<u32> = (0..lives.len() as u32).collect();
    lives_by_end.sort_unstable_by_key(|&i| std::cmp::Reverse(lives[i as usize].end_ns));
    let mut fen = Fenwick::new(n);
    let mut p = 0usize;
    for &q in &by_end {
        let (s, e) = nodes[q as usize];
        while p < lives_by_end.len() && lives[lives_by_end[p] as usize].end_ns > e {
            let i = lives_by_end[p] as usize;
            fen.add(i, lives[i].bytes);
            p += 1;
        }
        residual[q as usize] = fen.sum(lb(s), lb(e));
    }

    let known = |v: Option<u64>| if complete { Some(v.unwrap_or(0)) } else { v };
    let interval = |q: usize| -> (Option<u64>, Option<u64>) {
        if !(complete || observed[q]) {
            return (None, None);
        }
        let closed = nodes[q].1 != OPEN;
        (Some(peak[q]), closed.then_some(residual[q]))
    };
    let spans = (0..ns)
        .map(|i| {
            let (subtree_peak_live_bytes, subtree_residual_bytes) = interval(i);
            NodeMemoryMetrics {
                direct_allocated_bytes: known(span_direct[i]),
                subtree_peak_live_bytes,
                subtree_residual_bytes,
                output_dense_bytes: None,
            }
        })
        .collect();
    let ops = doc
        .ops
        .iter()
        .enumerate()
        .map(|(j, op)| {
            let (subtree_peak_live_bytes, subtree_residual_bytes) = interval(ns + j);
            let ambiguous = matches!(op_slot.get(&(op.span, op.op_name)), Some(OpSlot::Ambiguous));
            NodeMemoryMetrics {
                direct_allocated_bytes: if ambiguous { None } else { known(op_direct[j]) },
                subtree_peak_live_bytes,
                subtree_residual_bytes,
                output_dense_bytes: op.output_dense_bytes,
            }
        })
        .collect();
    NodeMetrics { spans, ops }
}
