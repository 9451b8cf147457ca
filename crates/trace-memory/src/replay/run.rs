//! The replay over a document's memory events in replay order, and the overflow check of its
//! byte sums.

use super::entries::*;
use super::record::*;
use super::state::*;
use super::tracker::*;
use super::*;
use crate::timeline::TimelineLog;
use rustc_hash::FxHashMap;
use trace_schema::{MemoryAction, MemoryItem, TraceDocument};

/// Runs the pass over the memory events of `doc` (see the module docs).
pub(crate) fn replay(
    doc: &TraceDocument,
    watch: Watch,
    detail: Detail,
    top: usize,
    observe: &mut dyn FnMut(&MemoryItem<'_>),
) -> Replay {
    let mut marks: Vec<(u64, u8)> = Vec::new();
    let mut passes: [Option<PassTrack>; 3] = Default::default();
    for (i, p) in watch.passes.into_iter().enumerate() {
        if let Some((intervals, span_count)) = p {
            marks.extend(intervals.iter().map(|&(s, _)| (s, i as u8)));
            passes[i] = Some(PassTrack {
                intervals,
                span_count,
                crossed: 0,
                best: None,
                tracker: Tracker::new(Keep::Top(crate::passes::PASS_PEAK_TOP), None),
            });
        }
    }
    let mut spans: [Option<SpanWatch>; 2] = Default::default();
    for (k, s) in watch.spans.into_iter().enumerate() {
        if let Some((start_ns, end_ns)) = s {
            marks.push((start_ns, 3 + k as u8));
            spans[k] = Some(SpanWatch {
                end_ns,
                ..SpanWatch::default()
            });
        }
    }
    marks.sort_by_key(|&(t, what)| (t, what));
    let (log, peak_keep, device_keep) = match detail {
        Detail::Full => (None, Keep::All, Keep::Counts),
        Detail::Summary => (Some(TimelineLog::default()), Keep::Top(top), Keep::Top(top)),
    };
    let mut st = State {
        doc,
        r: Replay {
            detail,
            devices: Vec::new(),
            device_acc: Vec::new(),
            categories: Default::default(),
            life_count: 0,
            end: Vec::new(),
            end_lifetimes: Vec::new(),
            end_stats: EndStats::default(),
            peak: None,
            peak_set: Tracker::new(peak_keep, None),
            device_sets: Vec::new(),
            passes,
            spans,
            span_alloc: FxHashMap::default(),
            unmatched: Vec::new(),
            mismatches: Vec::new(),
            duplicates: Vec::new(),
            alias_event_count: 0,
            unidentified_alloc_count: 0,
            alloc_without_bytes_count: 0,
            aliases_detectable: true,
            overflowed: false,
            first_ns: 0,
            last_ns: 0,
            events: 0,
            lives: Vec::new(),
            lifetimes: Vec::new(),
            order: Vec::new(),
            times: Vec::new(),
            totals: Vec::new(),
            changes: Vec::new(),
            log,
        },
        device_of_sym: FxHashMap::default(),
        names: Vec::new(),
        live: LiveSet::default(),
        unidentified: Vec::new(),
        cells: Vec::new(),
        live_count: Vec::new(),
        total: 0,
        alloc_sum: 0,
        seq: 0,
        marks,
        next_mark: 0,
        device_keep,
    };
    doc.for_each_memory_pipelined(trace_schema::MemoryOrder::Replay, |m| {
        observe(m);
        st.apply(m);
    });
    st.finish()
}

/// The first alloc event (index among the memory events, file order) at which the sizes of all
/// allocs, in file order, add up past `u64::MAX`; `None` when every sum of the trace's byte
/// counts fits.
///
/// Every live, category, device, total and timeline figure is a sum of distinct allocs' bytes,
/// so when this is `None` none of them can overflow.
pub fn alloc_bytes_overflow(doc: &TraceDocument) -> Option<usize> {
    let mut total = 0u64;
    let mut at: Option<usize> = None;
    doc.for_each_memory(trace_schema::MemoryOrder::File, |m| {
        if at.is_some() || m.action != MemoryAction::Alloc {
            return;
        }
        match total.checked_add(m.bytes.unwrap_or(0)) {
            Some(t) => total = t,
            None => at = Some(m.index as usize),
        }
    });
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The same order as a stable sort by the key.
        #[test]
        fn sort_moving_once_is_a_stable_sort(keys in proptest::collection::vec(0u32..20, 0..300)) {
            let mut items: Vec<(u32, usize)> = keys.iter().copied().zip(0..).collect();
            let mut want = items.clone();
            want.sort_by_key(|x| x.0);
            sort_moving_once(&mut items, |x| x.0);
            prop_assert_eq!(items, want);
        }
    }
}
