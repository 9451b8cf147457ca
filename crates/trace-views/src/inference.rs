//! `demo --inference`'s figures, read from the trace: `prefill` vs `decode` time, the storages
//! live at the end (the KV cache) and how live memory grows per decoded token.

use trace_memory::{StorageMap, StorageRef};

/// What an inference trace says about its forward calls: `prefill` vs `decode` time, the
/// storages live at the end (the KV cache) and how live memory grows per decoded token, read
/// from the trace (spans, memory events), never from the run.
#[derive(Debug, Clone, PartialEq)]
pub struct InferenceFigures {
    /// `prefill` spans' total duration, ns.
    pub prefill_ns: Option<u64>,
    /// `decode` spans: count, and their durations (ns), in order.
    pub decode_ns: Vec<u64>,
    /// Storages allocated in the capture and live at its end, and their bytes.
    pub live_at_end: (u64, u64),
    /// Live bytes at the end of each `decode` span, in order.
    pub live_after_decode: Vec<u64>,
}

impl InferenceFigures {
    /// Reads them from `doc` (one replay of the memory events, O(n log n) for the sorts).
    pub fn of(doc: &trace_schema::TraceDocument) -> Self {
        let name_of = |s: &trace_schema::SpanRecord| doc.str(s.name);
        let mut prefill_ns = None;
        let mut decodes: Vec<(u64, u64)> = Vec::new();
        for s in &doc.spans {
            match (name_of(s), s.duration_ns) {
                ("prefill", Some(d)) => {
                    prefill_ns = Some(prefill_ns.unwrap_or(0u64).saturating_add(d));
                }
                ("decode", Some(d)) => decodes.push((s.start_ns, d)),
                _ => {}
            }
        }
        decodes.sort_unstable();
        let mut ends: Vec<u64> = decodes
            .iter()
            .map(|&(start, d)| start.saturating_add(d))
            .collect();
        ends.sort_unstable();
        // Replay: live bytes after every event; sample at each decode end.
        // live storages: bytes, and whether this run allocated them (not pre-existing);
        // an alloc without an identity stays live (the logical replay's rule)
        let mut live: StorageMap<(u64, bool)> = StorageMap::new();
        let mut unnamed = (0u64, 0u64);
        let mut total = 0u64;
        let mut next_end = 0usize;
        let mut live_after_decode = Vec::with_capacity(ends.len());
        doc.for_each_memory(trace_schema::MemoryOrder::Replay, |m| {
            while next_end < ends.len() && m.timestamp_ns > ends[next_end] {
                live_after_decode.push(total);
                next_end += 1;
            }
            let key = StorageRef::of(m);
            match m.action {
                trace_schema::MemoryAction::Alloc => {
                    let b = m.bytes.unwrap_or(0);
                    let fresh = !m.pre_existing;
                    match key {
                        Some(k) => {
                            if let Some((old, _)) = live.insert(k, (b, fresh)) {
                                total = total.saturating_sub(old);
                            }
                        }
                        None if fresh => unnamed = (unnamed.0 + 1, unnamed.1.saturating_add(b)),
                        None => {}
                    }
                    total = total.saturating_add(b);
                }
                trace_schema::MemoryAction::Free => {
                    if let Some((old, _)) = key.and_then(|k| live.remove(k)) {
                        total = total.saturating_sub(old);
                    }
                }
            }
        });
        while next_end < ends.len() {
            live_after_decode.push(total);
            next_end += 1;
        }
        let live_at_end = live
            .values()
            .filter(|(_, fresh)| *fresh)
            .fold(unnamed, |(n, b), &(bytes, _)| {
                (n + 1, b.saturating_add(bytes))
            });
        Self {
            prefill_ns,
            decode_ns: decodes.iter().map(|&(_, d)| d).collect(),
            live_at_end,
            live_after_decode,
        }
    }

    /// Mean growth of live bytes per decoded token between the first and the last decode's
    /// end; `None` with fewer than two decodes.
    pub fn growth_per_token_bytes(&self) -> Option<f64> {
        let (first, last) = (
            self.live_after_decode.first()?,
            self.live_after_decode.last()?,
        );
        let steps = self
            .live_after_decode
            .len()
            .checked_sub(1)
            .filter(|n| *n > 0)?;
        Some((*last as f64 - *first as f64) / steps as f64)
    }

    /// The lines `demo --inference` prints before the summary.
    pub fn render(&self) -> String {
        use trace_format::{bytes, duration};
        let mut out = String::from("inference (from the trace)\n");
        match self.prefill_ns {
            Some(p) => out.push_str(&format!("  prefill       {}\n", duration(p))),
            None => out.push_str("  prefill       no prefill span\n"),
        }
        if self.decode_ns.is_empty() {
            out.push_str("  decode        no decode span\n");
        } else {
            let sum: u64 = self
                .decode_ns
                .iter()
                .fold(0u64, |s, d| s.saturating_add(*d));
            let mean = sum / self.decode_ns.len() as u64;
            out.push_str(&format!(
                "  decode        {} calls, {} in all, {} per token\n",
                self.decode_ns.len(),
                duration(sum),
                duration(mean)
            ));
        }
        out.push_str(&format!(
            "  live at end   {} in {} storages allocated in the call (the KV cache and its mask)\n",
            bytes(self.live_at_end.1),
            self.live_at_end.0
        ));
        if let Some(g) = self.growth_per_token_bytes() {
            out.push_str(&format!(
                "  growth        {} per decoded token (live bytes at the end of each decode call)\n",
                bytes(g.max(0.0).round() as u64)
            ));
        }
        out
    }
}
