//! The storage checks: every parameter and gradient allocated on the device with its bytes
//! (and freed or not, as each should be), the AdamW moments and the update's temporaries.

use std::collections::BTreeMap;

use trace_format::bytes;
use trace_schema::{MemoryAction, MemoryCategory, MemoryRecord, Pass, TraceDocument};

use super::Parameter;

/// Escapes trace text for the terminal (control and bidirectional characters).
pub(super) fn safe(s: &str) -> String {
    trace_format::escape(s).into_owned()
}

/// The memory events on `device`.
pub(super) fn memory_on<'a>(doc: &'a TraceDocument, device: &str) -> Vec<&'a MemoryRecord> {
    match doc.sym(device) {
        Some(sym) => doc.memory.iter().filter(|m| m.device == sym).collect(),
        None => Vec::new(),
    }
}

fn label<'a>(doc: &'a TraceDocument, m: &MemoryRecord) -> Option<&'a str> {
    m.label.map(|l| doc.str(l))
}

/// Whether the storage of `alloc` has a `free` among `events`.
fn is_freed(events: &[&MemoryRecord], alloc: &MemoryRecord) -> bool {
    alloc.storage.is_some_and(|id| {
        events
            .iter()
            .any(|m| m.action == MemoryAction::Free && m.storage == Some(id))
    })
}

/// Per expected storage (`name`, bytes): found, size equal, freed.
struct Labelled {
    expected: usize,
    found: usize,
    bytes_equal: usize,
    freed: usize,
    total_bytes: u64,
    first_problem: Option<String>,
}

fn labelled(
    doc: &TraceDocument,
    device: &str,
    expected: impl Iterator<Item = (String, u64)>,
) -> Labelled {
    let events = memory_on(doc, device);
    let mut allocs: BTreeMap<&str, &MemoryRecord> = BTreeMap::new();
    for m in events.iter().filter(|m| m.action == MemoryAction::Alloc) {
        if let Some(l) = label(doc, m) {
            allocs.entry(l).or_insert(m);
        }
    }
    let mut r = Labelled {
        expected: 0,
        found: 0,
        bytes_equal: 0,
        freed: 0,
        total_bytes: 0,
        first_problem: None,
    };
    for (name, want) in expected {
        r.expected += 1;
        r.total_bytes = r.total_bytes.saturating_add(want);
        let Some(alloc) = allocs.get(name.as_str()) else {
            r.first_problem
                .get_or_insert_with(|| format!("no alloc labelled {name} on {device}"));
            continue;
        };
        r.found += 1;
        if alloc.bytes == Some(want) {
            r.bytes_equal += 1;
        } else {
            r.first_problem.get_or_insert_with(|| {
                format!(
                    "{name}: {} in the trace, {want} B expected",
                    alloc
                        .bytes
                        .map(|b| format!("{b} B"))
                        .unwrap_or_else(|| "no bytes".into())
                )
            });
        }
        if is_freed(&events, alloc) {
            r.freed += 1;
        }
    }
    r
}

pub(super) fn check_parameters(
    doc: &TraceDocument,
    device: &str,
    params: &[Parameter],
) -> (bool, String) {
    let r = labelled(
        doc,
        device,
        params.iter().map(|p| (p.name.clone(), p.bytes)),
    );
    let passed =
        r.expected > 0 && r.found == r.expected && r.bytes_equal == r.expected && r.freed == 0;
    let mut figures = format!(
        "{}/{} parameters allocated on {device}, bytes = numel × dtype size for {}/{} ({} in all), {} freed (persistent: 0 expected)",
        r.found, r.expected, r.bytes_equal, r.expected, bytes(r.total_bytes), r.freed
    );
    if let Some(p) = r.first_problem {
        figures.push_str(&format!("; first problem: {p}"));
    }
    (passed, figures)
}

pub(super) fn check_gradients(
    doc: &TraceDocument,
    device: &str,
    params: &[Parameter],
) -> (bool, String) {
    let r = labelled(
        doc,
        device,
        params.iter().map(|p| (format!("{}.grad", p.name), p.bytes)),
    );
    let passed = r.expected > 0
        && r.found == r.expected
        && r.bytes_equal == r.expected
        && r.freed == r.expected;
    let mut figures = format!(
        "{}/{} parameter gradients allocated on {device}, bytes = the parameter's for {}/{} ({} in all), {}/{} freed inside the step",
        r.found, r.expected, r.bytes_equal, r.expected, bytes(r.total_bytes), r.freed, r.expected
    );
    if let Some(p) = r.first_problem {
        figures.push_str(&format!("; first problem: {p}"));
    }
    (passed, figures)
}

/// Whether the span `m` is attributed to has the optimizer pass (own or inherited from the
/// nearest ancestor with one).
pub fn in_optimizer_span(doc: &TraceDocument, m: &MemoryRecord) -> bool {
    let mut span = m.span.and_then(|s| doc.span(s));
    // Bounded walk up the parents (a hostile trace may have a parent cycle).
    for _ in 0..doc.spans.len() {
        let Some(s) = span else { return false };
        if let Some(pass) = s.pass {
            return pass == Pass::Optimizer;
        }
        span = s.parent.and_then(|p| doc.span(p));
    }
    false
}

pub(super) fn check_adamw_state(
    doc: &TraceDocument,
    device: &str,
    params: &[Parameter],
) -> (bool, String) {
    let events = memory_on(doc, device);
    let allocs: Vec<&MemoryRecord> = events
        .iter()
        .copied()
        .filter(|m| m.action == MemoryAction::Alloc)
        .collect();
    // AdamW keeps two moments per float parameter, each of the parameter's shape and dtype.
    let mut expected: Vec<u64> = params
        .iter()
        .filter(|p| p.float)
        .flat_map(|p| [p.bytes, p.bytes])
        .collect();
    expected.sort_unstable();
    let moments: Vec<&MemoryRecord> = allocs
        .iter()
        .copied()
        .filter(|m| m.category == MemoryCategory::Optimizer && m.pre_existing)
        .collect();
    let mut found: Vec<u64> = moments.iter().map(|m| m.bytes.unwrap_or(0)).collect();
    found.sort_unstable();
    let moments_freed = moments.iter().filter(|m| is_freed(&events, m)).count();
    let temporaries: Vec<&MemoryRecord> = allocs
        .iter()
        .copied()
        .filter(|m| !m.pre_existing && in_optimizer_span(doc, m))
        .collect();
    let temporaries_freed = temporaries.iter().filter(|m| is_freed(&events, m)).count();
    let param_sizes: std::collections::BTreeSet<u64> = params.iter().map(|p| p.bytes).collect();
    let parameter_sized = temporaries
        .iter()
        .filter(|m| m.bytes.is_some_and(|b| param_sizes.contains(&b)))
        .count();
    let passed = !expected.is_empty()
        && found == expected
        && moments_freed == 0
        && !temporaries.is_empty()
        && temporaries_freed == temporaries.len();
    let mut figures = format!(
        "moments: {} on {device} ({}), {} expected (2 × {} parameters, {}){}, {} freed; update temporaries: {} allocated in the optimizer span ({} of a parameter's size), {}/{} freed",
        found.len(),
        bytes(found.iter().fold(0u64, |a, b| a.saturating_add(*b))),
        expected.len(),
        expected.len() / 2,
        bytes(expected.iter().fold(0u64, |a, b| a.saturating_add(*b))),
        if found == expected {
            ", sizes equal"
        } else {
            ", sizes differ"
        },
        moments_freed,
        temporaries.len(),
        parameter_sized,
        temporaries_freed,
        temporaries.len(),
    );
    if !passed {
        if let Some(reason) = doc
            .meta
            .capture_contract
            .as_ref()
            .and_then(|c| c.reasons.get("logical_memory"))
        {
            figures.push_str(&format!(
                "; the trace's logical-memory reason: {}",
                safe(reason)
            ));
        }
    }
    (passed, figures)
}
