//! `demo --inference`'s figures, read from the trace: `prefill` vs `decode` time, the storages
//! live at the end (the KV cache) and how live memory grows per decoded token.

use serde::Serialize;
use trace_memory::{StorageMap, StorageRef};

/// `summary --json`'s `inference`: the prefill/decode split and what the call keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InferenceRecord {
    /// `prefill` spans' total duration, ns (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_ns: Option<u64>,
    /// `decode` spans.
    pub decode_calls: u64,
    /// Their total duration, ns (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_ns: Option<u64>,
    /// Their mean duration, ns: the time per decoded token (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_per_token_ns: Option<u64>,
    /// Storages allocated in the capture and live at its end (a decoder's KV cache).
    pub live_at_end_storages: u64,
    /// Their bytes.
    pub live_at_end_bytes: u64,
    /// Mean growth of live bytes per decoded token, bytes (absent with fewer than two
    /// decode calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub growth_per_token_bytes: Option<u64>,
}

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

    /// The figures of an inference trace (one with a `prefill` or `decode` span), else
    /// `None`: no other trace pays for the extra replay.
    pub fn of_inference(doc: &trace_schema::TraceDocument) -> Option<Self> {
        let forward =
            |s: &trace_schema::SpanRecord| matches!(doc.str(s.name), "prefill" | "decode");
        doc.spans.iter().any(forward).then(|| Self::of(doc))
    }

    /// The JSON record (`summary --json`'s `inference`).
    pub fn record(&self) -> InferenceRecord {
        let sum = self
            .decode_ns
            .iter()
            .fold(0u64, |s, d| s.saturating_add(*d));
        let n = self.decode_ns.len() as u64;
        InferenceRecord {
            prefill_ns: self.prefill_ns,
            decode_calls: n,
            decode_ns: (n > 0).then_some(sum),
            decode_per_token_ns: sum.checked_div(n),
            live_at_end_storages: self.live_at_end.0,
            live_at_end_bytes: self.live_at_end.1,
            growth_per_token_bytes: self
                .growth_per_token_bytes()
                .map(|g| g.max(0.0).round() as u64),
        }
    }

    /// The lines `demo --inference` and `summary` print: a forward without decode calls (an
    /// encoder's, or one pass) reads as one forward call, not as a prefill.
    pub fn render(&self) -> String {
        render_record(&self.record())
    }
}

/// The lines of [`InferenceFigures::render`], from the record.
pub fn render_record(r: &InferenceRecord) -> String {
    use trace_format::{bytes, count, duration};
    let mut out = String::from("inference (from the trace)\n");
    match (r.prefill_ns, r.decode_calls) {
        (Some(p), 0) => out.push_str(&format!(
            "  forward       1 call, {} (no decode calls: a single forward pass)\n",
            duration(p)
        )),
        (Some(p), _) => out.push_str(&format!("  prefill       {}\n", duration(p))),
        (None, _) => out.push_str("  prefill       no prefill span\n"),
    }
    match (r.decode_ns, r.decode_per_token_ns) {
        (Some(sum), Some(mean)) => out.push_str(&format!(
            "  decode        {}, {} in all, {} per token\n",
            count(r.decode_calls, "call", "calls"),
            duration(sum),
            duration(mean)
        )),
        _ if r.prefill_ns.is_some() => {}
        _ => out.push_str("  decode        no decode span\n"),
    }
    out.push_str(&format!(
        "  live at end   {} in {} allocated in the call{}\n",
        bytes(r.live_at_end_bytes),
        count(r.live_at_end_storages, "storage", "storages"),
        kept_note(r)
    ));
    if let Some(g) = r.growth_per_token_bytes {
        out.push_str(&format!(
            "  growth        {} per decoded token (live bytes at the end of each decode call)\n",
            bytes(g)
        ));
    }
    out
}

/// What the live-at-end figure is, said after it: a decoder keeps its KV cache across the
/// decode calls.
fn kept_note(r: &InferenceRecord) -> &'static str {
    if r.decode_calls > 0 {
        " (kept across the decode calls: a decoder's KV cache)"
    } else {
        ""
    }
}

/// The report page's `inference` fact: the prefill/decode split and what the call keeps, the
/// figures as data attributes (`data-prefill-ns`, `data-decode-calls`, …) for scripts.
pub fn fact(r: &InferenceRecord) -> trace_report::page::Fact {
    use trace_format::{bytes, count, duration};
    let mut parts = Vec::new();
    match (r.prefill_ns, r.decode_calls) {
        (Some(p), 0) => parts.push(format!(
            "one forward call, {} (no decode calls)",
            duration(p)
        )),
        (Some(p), _) => parts.push(format!("prefill {}", duration(p))),
        (None, _) => {}
    }
    if let (Some(sum), Some(mean)) = (r.decode_ns, r.decode_per_token_ns) {
        parts.push(format!(
            "decode {}, {} in all, {} per token",
            count(r.decode_calls, "call", "calls"),
            duration(sum),
            duration(mean)
        ));
    }
    parts.push(format!(
        "live at the end {} in {}{}",
        bytes(r.live_at_end_bytes),
        count(r.live_at_end_storages, "storage", "storages"),
        kept_note(r)
    ));
    if let Some(g) = r.growth_per_token_bytes {
        parts.push(format!("growth {} per decoded token", bytes(g)));
    }
    let mut data = vec![
        ("decode-calls".to_string(), r.decode_calls.to_string()),
        (
            "live-at-end-bytes".to_string(),
            r.live_at_end_bytes.to_string(),
        ),
    ];
    data.extend(
        r.prefill_ns
            .map(|p| ("prefill-ns".to_string(), p.to_string())),
    );
    data.extend(
        r.growth_per_token_bytes
            .map(|g| ("growth-per-token-bytes".to_string(), g.to_string())),
    );
    trace_report::page::Fact {
        label: "inference".into(),
        value: trace_report::page::Text::from(parts.join(" · ")),
        data,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(prefill: Option<u64>, decodes: u64) -> InferenceRecord {
        InferenceRecord {
            prefill_ns: prefill,
            decode_calls: decodes,
            decode_ns: (decodes > 0).then_some(decodes * 2_000),
            decode_per_token_ns: (decodes > 0).then_some(2_000),
            live_at_end_storages: 1,
            live_at_end_bytes: 4096,
            growth_per_token_bytes: (decodes > 1).then_some(512),
        }
    }

    #[test]
    fn a_decoder_reads_prefill_decode_and_its_cache() {
        let text = render_record(&record(Some(1_500_000), 15));
        assert!(text.contains("  prefill       1.50 ms\n"), "{text}");
        assert!(
            text.contains("  decode        15 calls, 30.0 µs in all, 2.0 µs per token\n"),
            "{text}"
        );
        assert!(
            text.contains("  live at end   4.00 KiB in 1 storage allocated in the call (kept across the decode calls: a decoder's KV cache)\n"),
            "{text}"
        );
        assert!(
            text.contains("  growth        512 B per decoded token"),
            "{text}"
        );
        let f = fact(&record(Some(1_500_000), 15));
        assert!(f
            .value
            .0
            .starts_with("prefill 1.50 ms · decode 15 calls, 30.0 µs in all"));
        assert!(f
            .data
            .contains(&("decode-calls".to_string(), "15".to_string())));
    }

    #[test]
    fn an_encoders_only_forward_is_not_a_prefill() {
        let r = record(Some(1_500_000), 0);
        let text = render_record(&r);
        assert!(
            text.contains(
                "  forward       1 call, 1.50 ms (no decode calls: a single forward pass)\n"
            ),
            "{text}"
        );
        assert!(
            !text.contains("prefill") && !text.contains("decode  "),
            "{text}"
        );
        assert!(!text.contains("KV cache"), "{text}");
        assert_eq!(
            fact(&r).value.0,
            "one forward call, 1.50 ms (no decode calls) · live at the end 4.00 KiB in 1 storage"
        );
        // one decode call: singular, no growth (it needs two)
        let one = render_record(&record(Some(10), 1));
        assert!(one.contains("decode        1 call, "), "{one}");
        assert!(!one.contains("growth"), "{one}");
    }
}
