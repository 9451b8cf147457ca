//! The speedscope export (`candle-graph export TRACE --format speedscope`): the sampled call
//! stacks of a trace in speedscope's JSON file format
//! (<https://www.speedscope.app/file-format-schema.json>), which speedscope.app opens as a
//! flame graph ("left heavy"), a time order ("time order") and a sandwich view.
//!
//! What goes where:
//! - `shared.frames`: one frame per distinct (function, file, line) of the trace's symbol
//!   table — `name` is the function (else the address, else `?`), elided in the middle to
//!   [`NAME_CHARS`] characters; `file` and `line` when the trace has them;
//! - `profiles`: one `sampled` profile per sampled thread (in the sampler's order), `unit`
//!   `nanoseconds`, `startValue`/`endValue` the thread's timer window (ns since the session
//!   start), `samples` the stacks as frame indices **outermost first** (speedscope's order),
//!   `weights` the sample period in ns (each sample stands for one period of wall time; a trace
//!   without a `sampler` event has no period: weights 1, unit `none`);
//! - `name` the run's entrypoint, `exporter` `candle-graph@<version>`, `activeProfileIndex` 0.
//!
//! Strings are written as they are in the trace (elided), escaped per JSON by serde_json.
//! Output is streamed profile by profile; the frame table is the only thing held.

use std::collections::HashMap;
use std::io::Write;

use serde::Serialize;
use trace_schema::{SampleTable, TraceDocument};

/// The `$schema` speedscope checks.
pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// Characters kept of a frame's name and file.
pub const NAME_CHARS: usize = 500;

/// Frames written of one sample's stack: speedscope lists every sample's whole stack, so a
/// deeper one keeps its outermost and innermost halves around one [`ELIDED_FRAMES`] frame
/// (the output stays linear in the samples, whatever the depth).
pub const MAX_STACK_FRAMES: usize = 256;

/// The name of the frame that stands for the middle of a stack deeper than
/// [`MAX_STACK_FRAMES`].
pub const ELIDED_FRAMES: &str = "… frames left out (stack deeper than 256) …";

/// Why the export could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SpeedscopeError {
    /// The trace has no sampled stacks, and why ([`trace_ops::unavailable`]: not sampled, cut
    /// short before any sample, every sample dropped).
    #[error("the trace has no sampled call stacks ({0}), so there is no profile to export")]
    NoSamples(String),
    /// Writing failed.
    #[error("cannot write the export: {0}")]
    Io(#[from] std::io::Error),
    /// Serializing failed (not expected for these types).
    #[error("cannot serialize the export: {0}")]
    Json(#[from] serde_json::Error),
}

impl SpeedscopeError {
    /// [`Self::NoSamples`] with `doc`'s reason.
    pub fn no_samples(doc: &TraceDocument) -> Self {
        let reason = trace_ops::unavailable(doc).reason;
        Self::NoSamples(match reason.strip_prefix("not captured") {
            Some(rest) => format!("operations were not sampled{rest}"),
            None => reason,
        })
    }
}

/// Counts of what was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SpeedscopeStats {
    /// Entries of `shared.frames`.
    pub frames: u64,
    /// Profiles (sampled threads).
    pub profiles: u64,
    /// Samples, all profiles.
    pub samples: u64,
}

#[derive(Serialize, PartialEq, Eq, Hash, Clone)]
struct Frame {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

/// A sampled thread: its key, name and timer window (ns), as far as the sampler says.
type ThreadInfo<'a> = (u64, Option<&'a str>, Option<(u64, u64)>);

#[derive(Serialize)]
struct ProfileHead<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    unit: &'static str,
    #[serde(rename = "startValue")]
    start_value: u64,
    #[serde(rename = "endValue")]
    end_value: u64,
}

/// Writes the speedscope file of `doc`'s samples to `w` (not flushed). `exporter` is
/// `name@version` of the tool.
///
/// # Errors
/// [`SpeedscopeError::NoSamples`] when the trace has no samples; I/O errors.
pub fn write_speedscope<W: Write>(
    doc: &TraceDocument,
    exporter: &str,
    mut w: W,
) -> Result<SpeedscopeStats, SpeedscopeError> {
    let table = &doc.samples;
    if table.samples.is_empty() {
        return Err(SpeedscopeError::no_samples(doc));
    }
    let (frames, index, elided) = shared_frames(table);
    let (threads, mut by_thread) = threads_of(table);
    let period = table.sampler.as_ref().map_or(0, |s| s.period_ns);
    // Without a sampler event the period is unknown: each sample weighs 1, unit `none`.
    let (weight, unit) = if period > 0 {
        (period, "nanoseconds")
    } else {
        (1, "none")
    };

    let mut stats = SpeedscopeStats {
        frames: frames.len() as u64,
        ..SpeedscopeStats::default()
    };
    w.write_all(b"{\"$schema\":")?;
    serde_json::to_writer(&mut w, SCHEMA)?;
    w.write_all(b",\"exporter\":")?;
    serde_json::to_writer(&mut w, exporter)?;
    w.write_all(b",\"name\":")?;
    serde_json::to_writer(
        &mut w,
        &trace_format::elide_middle(&doc.meta.entrypoint, NAME_CHARS),
    )?;
    w.write_all(b",\"activeProfileIndex\":0,\"shared\":{\"frames\":")?;
    serde_json::to_writer(&mut w, &frames)?;
    w.write_all(b"},\"profiles\":[")?;
    let mut first_profile = true;
    for (k, list) in by_thread.iter_mut().enumerate() {
        if list.is_empty() {
            continue;
        }
        list.sort_by_key(|&i| (table.samples[i].timestamp_ns, i));
        let (thread, name, window) = threads[k];
        let first = table.samples[list[0]].timestamp_ns;
        let last = table.samples[list[list.len() - 1]].timestamp_ns;
        let (start, end) = window.unwrap_or((first, last.saturating_add(period)));
        let label = match name {
            Some(n) => format!(
                "thread {thread} ({}) · {}",
                trace_format::elide_middle(n, 60),
                trace_format::elide_middle(&doc.meta.entrypoint, 120)
            ),
            None => format!(
                "thread {thread} · {}",
                trace_format::elide_middle(&doc.meta.entrypoint, 120)
            ),
        };
        if !first_profile {
            w.write_all(b",")?;
        }
        first_profile = false;
        // the head's fields, then the two arrays, in one object
        let head = serde_json::to_string(&ProfileHead {
            kind: "sampled",
            name: &label,
            unit,
            start_value: start.min(first),
            end_value: end.max(last),
        })?;
        w.write_all(&head.as_bytes()[..head.len() - 1])?;
        w.write_all(b",\"samples\":[")?;
        for (j, &i) in list.iter().enumerate() {
            if j > 0 {
                w.write_all(b",")?;
            }
            write_stack(&mut w, table, table.samples[i].stack, &index, elided)?;
        }
        w.write_all(b"],\"weights\":[")?;
        for j in 0..list.len() {
            if j > 0 {
                w.write_all(b",")?;
            }
            write!(w, "{weight}")?;
        }
        w.write_all(b"]}")?;
        stats.profiles += 1;
        stats.samples += list.len() as u64;
    }
    w.write_all(b"]}\n")?;
    Ok(stats)
}

/// The shared frames, deduplicated by content, `index[f]` for each frame of the table, and
/// the elision frame (added when some stack is deeper than [`MAX_STACK_FRAMES`]).
fn shared_frames(table: &SampleTable) -> (Vec<Frame>, Vec<u32>, Option<u32>) {
    let mut frames: Vec<Frame> = Vec::new();
    let mut seen: HashMap<Frame, u32> = HashMap::new();
    let index: Vec<u32> = table
        .frames
        .iter()
        .map(|f| {
            let name = f
                .function
                .as_deref()
                .or(f.address.as_deref())
                .unwrap_or("?");
            let frame = Frame {
                name: trace_format::elide_middle(name, NAME_CHARS).into_owned(),
                file: f
                    .file
                    .as_deref()
                    .map(|x| trace_format::elide_middle(x, NAME_CHARS).into_owned()),
                line: f.line,
            };
            *seen.entry(frame.clone()).or_insert_with(|| {
                frames.push(frame);
                (frames.len() - 1) as u32
            })
        })
        .collect();
    let elided = table
        .stacks
        .iter()
        .any(|s| s.frames.len() > MAX_STACK_FRAMES)
        .then(|| {
            frames.push(Frame {
                name: ELIDED_FRAMES.to_string(),
                file: None,
                line: None,
            });
            (frames.len() - 1) as u32
        });
    (frames, index, elided)
}

/// The threads (the sampler's, in its order, then any other key seen in the samples) and the
/// samples of each.
fn threads_of(table: &SampleTable) -> (Vec<ThreadInfo<'_>>, Vec<Vec<usize>>) {
    let mut threads: Vec<ThreadInfo<'_>> = table
        .sampler
        .as_ref()
        .map(|s| {
            s.threads
                .iter()
                .map(|t| (t.thread, t.name.as_deref(), Some((t.start_ns, t.end_ns))))
                .collect()
        })
        .unwrap_or_default();
    let mut pos: HashMap<u64, usize> = threads.iter().enumerate().map(|(k, t)| (t.0, k)).collect();
    let mut by_thread: Vec<Vec<usize>> = vec![Vec::new(); threads.len()];
    for (i, s) in table.samples.iter().enumerate() {
        let k = *pos.entry(s.thread).or_insert_with(|| {
            threads.push((s.thread, None, None));
            by_thread.push(Vec::new());
            threads.len() - 1
        });
        by_thread[k].push(i);
    }
    (threads, by_thread)
}

/// One sample's stack as frame indices, outermost first; the middle of a deep stack is one
/// elision frame.
fn write_stack<W: Write>(
    w: &mut W,
    table: &SampleTable,
    stack: u32,
    index: &[u32],
    elided: Option<u32>,
) -> Result<(), SpeedscopeError> {
    w.write_all(b"[")?;
    let frames = table
        .stacks
        .get(stack as usize)
        .map_or(&[][..], |s| &s.frames[..]);
    // outermost first; the middle of a deep stack is one elision frame
    let (outer, inner) = match elided {
        Some(_) if frames.len() > MAX_STACK_FRAMES => {
            let keep = (MAX_STACK_FRAMES - 1) / 2;
            (keep, MAX_STACK_FRAMES - 1 - keep)
        }
        _ => (frames.len(), 0),
    };
    let outermost = frames.iter().rev().take(outer).map(|&f| index[f as usize]);
    let middle = elided.filter(|_| inner > 0);
    let innermost = frames[..inner].iter().rev().map(|&f| index[f as usize]);
    for (n, i) in outermost.chain(middle).chain(innermost).enumerate() {
        if n > 0 {
            w.write_all(b",")?;
        }
        write!(w, "{i}")?;
    }
    w.write_all(b"]")?;
    Ok(())
}
