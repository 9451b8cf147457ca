//! Checks shared by the sampler's integration tests: the accounting of the sampler event, every
//! sample inside its thread's window and attributed to the innermost span open on it then.

use std::collections::HashMap;

use trace_schema::{ExecutionStep as Pass, SamplerEvent, TraceDocument};

/// A span of the loaded trace, by wire id.
#[derive(Debug, Clone)]
pub struct Span {
    pub start_ns: u64,
    /// `None`: never closed.
    pub end_ns: Option<u64>,
    pub parent: Option<String>,
    pub pass: Option<Pass>,
}

impl Span {
    /// Open at `ts` (a span that closes at `ts` is not: the close is the later change).
    pub fn open_at(&self, ts: u64) -> bool {
        self.start_ns <= ts && self.end_ns.is_none_or(|e| ts < e)
    }
}

/// Every span by wire id.
pub fn spans(doc: &TraceDocument) -> HashMap<String, Span> {
    doc.spans
        .iter()
        .map(|s| {
            (
                doc.strings.resolve(s.id).to_string(),
                Span {
                    start_ns: s.start_ns,
                    end_ns: s.end_ns(),
                    parent: s.parent.map(|p| doc.strings.resolve(p).to_string()),
                    pass: s.pass,
                },
            )
        })
        .collect()
}

/// The pass of a span: its own or its nearest ancestor's (iterative).
pub fn pass_of(spans: &HashMap<String, Span>, id: &str) -> Option<Pass> {
    let mut at = spans.get(id);
    let mut hops = 0;
    while let Some(s) = at {
        if s.pass.is_some() {
            return s.pass;
        }
        hops += 1;
        if hops > spans.len() {
            return None;
        }
        at = s.parent.as_deref().and_then(|p| spans.get(p));
    }
    None
}

/// The sampler event, checked for consistency with the samples: per thread, samples written
/// equal the samples in the file, samples + lost = ticks, no more ticks than the window holds,
/// every sample inside its thread's window; every sample with a span names a span open at its
/// time with no child of it open then (the innermost). Returns the event.
pub fn check_samples(doc: &TraceDocument) -> SamplerEvent {
    let sampler = doc.samples.sampler.clone().expect("a sampler event");
    assert!(sampler.period_ns > 0);
    assert_eq!(sampler.period_ns, 1_000_000_000 / sampler.hz);
    assert_eq!(sampler.clock, "wall");
    let spans = spans(doc);
    for t in &sampler.threads {
        let mine: Vec<_> = doc
            .samples
            .samples
            .iter()
            .filter(|s| s.thread == t.thread)
            .collect();
        assert_eq!(
            mine.len() as u64,
            t.samples,
            "thread {}: samples in file",
            t.thread
        );
        assert_eq!(
            t.samples + t.lost_overrun + t.lost_buffer,
            t.ticks,
            "thread {}: every tick is a sample or a counted loss",
            t.thread
        );
        assert!(t.start_ns <= t.end_ns);
        let window_ticks = (t.end_ns - t.start_ns) / sampler.period_ns;
        assert!(
            t.ticks <= window_ticks + 1,
            "thread {}: {} ticks in a window of {window_ticks} periods",
            t.thread,
            t.ticks
        );
        for s in &mine {
            assert!(
                t.start_ns <= s.timestamp_ns && s.timestamp_ns <= t.end_ns,
                "sample at {} outside its thread's window {}..{}",
                s.timestamp_ns,
                t.start_ns,
                t.end_ns
            );
        }
    }
    for s in &doc.samples.samples {
        assert!(
            sampler.threads.iter().any(|t| t.thread == s.thread),
            "sample of an unlisted thread {}",
            s.thread
        );
        let Some(span) = s.span else { continue };
        let id = doc.strings.resolve(span);
        let open = spans
            .get(id)
            .unwrap_or_else(|| panic!("sample names unknown span {id}"));
        assert!(
            open.open_at(s.timestamp_ns),
            "span {id} not open at {} ({open:?})",
            s.timestamp_ns
        );
        let child_open = spans
            .iter()
            .find(|(_, c)| c.parent.as_deref() == Some(id) && c.open_at(s.timestamp_ns));
        assert!(
            child_open.is_none(),
            "span {id} is not the innermost at {}: {child_open:?}",
            s.timestamp_ns
        );
    }
    sampler
}

/// Whether stack `stack` (an index into `doc.samples.stacks`) has a frame named `function`.
pub fn stack_has(doc: &TraceDocument, stack: u32, function: &str) -> bool {
    doc.samples
        .stack_frames(stack)
        .any(|f| f.function.as_deref() == Some(function))
}

/// Samples whose stack has a frame named `function`.
pub fn samples_in(doc: &TraceDocument, function: &str) -> usize {
    doc.samples
        .samples
        .iter()
        .filter(|s| stack_has(doc, s.stack, function))
        .count()
}

/// No sampled stack keeps the sampler's own handler frames or the signal trampoline. (A sample
/// may land in the allocator hook walking an allocation site's stack: the walk's frames are
/// then the hook's, below an `alloc::sites` frame, and kept: that is the probe's cost.)
pub fn assert_handler_frames_cut(doc: &TraceDocument) {
    for s in &doc.samples.samples {
        let names: Vec<&str> = doc
            .samples
            .stack_frames(s.stack)
            .map(|f| f.function.as_deref().unwrap_or(""))
            .collect();
        for (i, name) in names.iter().enumerate() {
            assert!(
                !name.contains("sampler::signal") && !name.contains("__restore_rt"),
                "handler frame kept: {name}"
            );
            if name.contains("sampler::unwind") {
                assert!(
                    names[i..].iter().any(|n| n.contains("alloc::sites")),
                    "handler frame kept: {name} in {names:?}"
                );
            }
        }
    }
}
