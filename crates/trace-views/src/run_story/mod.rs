//! The run's story (`candle-graph series RUN_DIR`): the captures of one run side by side —
//! per capture the step time, pass times, the peak and where it was, what was live after the
//! step, the op shares with their 95% intervals — and the [`findings`] across them (memory that
//! grows between captures, a step-time or op-share change beyond noise, a peak that moves to
//! another pass). Built from a verified [`Series`] (trace-bundle) and each bundle's trace
//! (read once, its bytes checked against the manifest), plus the run directory's log of what
//! was dropped or failed. [`text`] renders it; [`html`] makes the page.

pub mod findings;
pub mod html;
pub mod text;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use trace_bundle::run::{CaptureRecord, CaptureState, LeftOut, RunLog, RunSchedule, Unbundled};
use trace_bundle::{digest_reader, Series, TRACE_FILE};
use trace_graph::Detail;
use trace_ops::GroupBy;
use trace_schema::{MemoryCategory, Pass};

pub use findings::RunFinding;

/// Schema of [`RunStory`].
pub const RUN_STORY_SCHEMA: &str = "candle-graph/run-story/1";

/// Op rows kept per capture (the rest summed in [`CaptureOps::other_samples`]).
pub const OPS_PER_CAPTURE: usize = 40;

/// One op's share of one capture's sampled step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpShare {
    /// The op (`matmul`, `matmul.backward`) or a non-op function's path.
    pub op: String,
    /// Its pass, when inside one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<Pass>,
    /// Samples.
    pub samples: u64,
    /// Share of the capturing thread's samples, in [0, 1].
    pub share: f64,
    /// 95% Wilson interval, lower bound.
    pub share_low: f64,
    /// Upper bound.
    pub share_high: f64,
}

/// The sampled ops of one capture (its capturing thread: the one with the most samples).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaptureOps {
    /// The thread's samples in the measured region.
    pub samples: u64,
    /// The op rows (op and pass), most samples first, at most [`OPS_PER_CAPTURE`].
    pub rows: Vec<OpShare>,
    /// Samples of the rows left out.
    pub other_samples: u64,
}

/// One capture of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaptureRow {
    /// The captured step.
    pub step: u64,
    /// The bundle directory.
    pub bundle: String,
    /// The trace's run id.
    pub run_id: String,
    /// Wall time of the measured step, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_time_ns: Option<u64>,
    /// Per pass, ns.
    pub pass_time_ns: BTreeMap<Pass, u64>,
    /// The logical peak, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<u64>,
    /// The pass that held it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_pass: Option<Pass>,
    /// The span that held it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_span: Option<String>,
    /// The category with the most bytes at the peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_category: Option<MemoryCategory>,
    /// Logical bytes live when the trace ended (after the step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_end_bytes: Option<u64>,
    /// The process's live heap at the step's end (counting allocator), absolute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heap_end_bytes: Option<u64>,
    /// The process's resident bytes at the step's end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident_end_bytes: Option<u64>,
    /// The op shares, when the capture sampled stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops: Option<CaptureOps>,
    /// Why there are no op shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops_unavailable: Option<String>,
}

/// The run's story (`candle-graph/run-story/1`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunStory {
    /// [`RUN_STORY_SCHEMA`].
    pub schema: &'static str,
    /// The run's entrypoint.
    pub entrypoint: String,
    /// Its phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Its device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The schedule of the run directory, when it has a log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<RunSchedule>,
    /// The captures with a bundle, by step.
    pub captures: Vec<CaptureRow>,
    /// Captures the log lists without a bundle here: dropped to bound the directory (their
    /// figures kept) or failed (why).
    pub not_kept: Vec<CaptureRecord>,
    /// The `step-*` entries of the run directory that are not the run's bundles (a symbolic
    /// link, a bundle of another run, one `run.json` does not record as kept), left out of the
    /// story, each with why (empty for a story of bundles named one by one).
    pub left_out: Vec<LeftOut>,
    /// The capture traces in `.captures` never bundled: the process ended (killed) before
    /// bundling them, or it is still running.
    pub unbundled_captures: Vec<Unbundled>,
    /// Findings across the captures.
    pub findings: Vec<RunFinding>,
}

impl RunStory {
    /// Sets the `step-*` entries the scan of the run directory left out. A capture the log
    /// records as kept whose step's entry is among them (a bundle of another run or capture, or
    /// a link, put where the run's bundle was) is said once: left out, with the reason and that
    /// the run's own capture is not in the directory — not a second time as missing in
    /// [`RunStory::not_kept`].
    pub fn set_left_out(&mut self, mut left_out: Vec<LeftOut>) {
        let mut said = std::collections::BTreeSet::new();
        for l in &mut left_out {
            let Some(step) = trace_bundle::run::step_of_dir_name(&l.name) else {
                continue;
            };
            let missing = self
                .not_kept
                .iter()
                .any(|r| r.step == step && r.state == CaptureState::Kept);
            if missing && said.insert(step) {
                l.reason.push_str(&format!(
                    "; the run's own capture of step {step} is not in the directory"
                ));
            }
        }
        self.not_kept
            .retain(|r| r.state != CaptureState::Kept || !said.contains(&r.step));
        self.left_out = left_out;
    }
}

/// Why a run's story cannot be told.
#[derive(Debug, thiserror::Error)]
pub enum StoryError {
    /// A bundle's trace could not be read back (changed since verified, unreadable).
    #[error("{bundle}: {reason}")]
    Trace {
        /// The bundle.
        bundle: String,
        /// Why.
        reason: String,
    },
}

/// The story of `series`, with the run directory's `log` when there is one (the caller that
/// scanned the directory sets [`RunStory::left_out`] and [`RunStory::unbundled_captures`]).
///
/// # Errors
/// [`StoryError::Trace`] when a bundle's trace no longer matches its manifest or does not load.
pub fn build(series: &Series, log: Option<&RunLog>) -> Result<RunStory, StoryError> {
    let mut captures = Vec::with_capacity(series.steps.len());
    for s in &series.steps {
        captures.push(capture_row(s)?);
    }
    let kept: std::collections::BTreeSet<u64> = captures.iter().map(|c| c.step).collect();
    let not_kept: Vec<CaptureRecord> = log
        .map(|l| {
            l.captures
                .iter()
                .filter(|c| c.state != CaptureState::Kept || !kept.contains(&c.step))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let findings = find(&captures, &not_kept);
    Ok(RunStory {
        schema: RUN_STORY_SCHEMA,
        entrypoint: series.entrypoint.clone(),
        phase: series.phase.clone(),
        device: series.device.clone(),
        schedule: log.map(|l| l.schedule),
        captures,
        not_kept,
        left_out: Vec::new(),
        unbundled_captures: Vec::new(),
        findings,
    })
}

/// Every finding across the captures (dropped captures keep their memory figures in the log,
/// so the growth counts them too).
pub fn find(captures: &[CaptureRow], not_kept: &[CaptureRecord]) -> Vec<RunFinding> {
    let mut out = Vec::new();
    // growth: the process heap when every capture counted it, else logical live at the end
    let mut heap: Vec<(u64, u64)> = captures
        .iter()
        .filter_map(|c| c.heap_end_bytes.map(|b| (c.step, b)))
        .chain(
            not_kept
                .iter()
                .filter(|r| r.state == CaptureState::Dropped)
                .filter_map(|r| r.heap_end_bytes.map(|b| (r.step, b))),
        )
        .collect();
    heap.sort();
    let growth = if heap.len() >= 3 {
        findings::memory_growth(&heap, "the process heap (live bytes of every allocation but the probe's symbol cache and bundler)")
    } else {
        let live: Vec<(u64, u64)> = captures
            .iter()
            .filter_map(|c| c.live_end_bytes.map(|b| (c.step, b)))
            .collect();
        findings::memory_growth(&live, "logical memory live after the step")
    };
    out.extend(growth);
    let walls: Vec<(u64, u64)> = captures
        .iter()
        .filter_map(|c| c.wall_time_ns.map(|w| (c.step, w)))
        .collect();
    out.extend(findings::step_time_change(&walls));
    out.extend(findings::op_share_changes(&op_points(captures)));
    let peaks: Vec<(u64, Pass, u64)> = captures
        .iter()
        .filter_map(|c| Some((c.step, c.peak_pass?, c.peak_bytes?)))
        .collect();
    out.extend(findings::peak_moved(&peaks));
    out
}

/// Each op's samples per capture that sampled (an op absent from a capture that sampled has 0
/// samples there: the capture saw its thread and not the op).
fn op_points(captures: &[CaptureRow]) -> BTreeMap<(String, Option<Pass>), Vec<findings::OpPoint>> {
    let mut keys: std::collections::BTreeSet<(String, Option<Pass>)> = Default::default();
    for c in captures {
        for r in c.ops.iter().flat_map(|o| &o.rows) {
            keys.insert((r.op.clone(), r.pass));
        }
    }
    keys.into_iter()
        .map(|key| {
            let points = captures
                .iter()
                .filter_map(|c| {
                    let ops = c.ops.as_ref()?;
                    let k = ops
                        .rows
                        .iter()
                        .find(|r| r.op == key.0 && r.pass == key.1)
                        .map_or(0, |r| r.samples);
                    Some((c.step, k, ops.samples))
                })
                .collect();
            (key, points)
        })
        .collect()
}

fn capture_row(s: &trace_bundle::SeriesStep) -> Result<CaptureRow, StoryError> {
    let fail = |reason: String| StoryError::Trace {
        bundle: s.bundle.display().to_string(),
        reason,
    };
    let doc = read_trace(&s.bundle).map_err(fail)?;
    let analysis = trace_graph::analyze_with(&doc, Detail::Summary);
    let f = &s.figures;
    let logical = analysis.memory.logical.as_ref();
    let (ops, ops_unavailable) = match trace_ops::OpProfile::from_document(&doc) {
        Ok(p) => (capture_ops(&p), None),
        Err(u) => (None, Some(u.reason)),
    };
    let last = |get: fn(&trace_schema::DeviceMemoryRecord) -> Option<u64>| {
        doc.device_memory.iter().rev().find_map(get)
    };
    Ok(CaptureRow {
        step: s.step,
        bundle: s.bundle.display().to_string(),
        run_id: s.run_id.clone(),
        wall_time_ns: f.outer_wall_time_ns,
        pass_time_ns: f.pass_time_ns.clone(),
        peak_bytes: f.logical_peak_bytes,
        peak_pass: f.logical_peak_pass,
        peak_span: f.logical_peak_span.clone(),
        peak_category: f.logical_peak_dominant_category,
        live_end_bytes: logical.map(|l| l.live_at_end.bytes),
        heap_end_bytes: last(|d| d.used_bytes),
        resident_end_bytes: last(|d| d.resident_bytes),
        ops,
        ops_unavailable,
    })
}

fn capture_ops(p: &trace_ops::OpProfile) -> Option<CaptureOps> {
    let thread = p.totals.threads.iter().max_by_key(|t| t.samples)?;
    let mut rows: Vec<OpShare> = p
        .rows_by(GroupBy::OpPass)
        .into_iter()
        .filter(|r| r.thread == thread.thread)
        // the probe's own frames are its cost, not one of the user's ops: never ranked, never
        // a finding (their samples stay in the step's count, as in `ops`)
        .filter(|r| r.kind != Some(trace_ops::OpKind::Probe))
        .filter_map(|r| {
            Some(OpShare {
                op: r.op?,
                pass: r.pass,
                samples: r.samples,
                share: r.share,
                share_low: r.share_low,
                share_high: r.share_high,
            })
        })
        .collect();
    rows.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.op.cmp(&b.op)));
    let other_samples = rows
        .iter()
        .skip(OPS_PER_CAPTURE)
        .map(|r| r.samples)
        .fold(0u64, u64::saturating_add);
    rows.truncate(OPS_PER_CAPTURE);
    Some(CaptureOps {
        samples: thread.samples,
        rows,
        other_samples,
    })
}

/// Reads a bundle's trace once, checks those bytes against its manifest, and loads them.
fn read_trace(bundle: &Path) -> Result<trace_schema::TraceDocument, String> {
    let v = trace_bundle::verify(bundle).map_err(|e| e.to_string())?;
    let entry = v
        .manifest
        .as_ref()
        .and_then(|m| m.files.iter().find(|f| f.path == TRACE_FILE))
        .ok_or_else(|| format!("{TRACE_FILE} is not in the bundle"))?;
    let bytes = std::fs::read(bundle.join(TRACE_FILE)).map_err(|e| e.to_string())?;
    let (_, sha) = digest_reader(bytes.as_slice()).map_err(|e| e.to_string())?;
    if sha != entry.sha256 {
        return Err(format!("{TRACE_FILE} changed since it was verified"));
    }
    trace_schema::load_reader(bytes.as_slice()).map_err(|e| e.to_string())
}
