//! The comparison on hand-written training steps: the retention fix, a model with one layer
//! more, a lost gradient, noise over several runs, pass-level alignment and every refusal.

mod common;

use common::{diff, diff_many, mlp_step, Step, TraceText};
use serde_json::json;
use trace_diff::{
    compare, AlignmentMode, DiffError, DiffOptions, GradientVerdict, RefusalCode, SpanMetric,
    Verdict,
};
use trace_schema::{MemoryCategory, Pass};

fn codes(d: &trace_diff::TraceDiff) -> Vec<RefusalCode> {
    d.identity.refusals.iter().map(|r| r.code).collect()
}

#[test]
fn the_retention_fix_lowers_the_peak_and_the_activations_leave_the_live_set() {
    let base = mlp_step(Step::default()).load();
    let fix = mlp_step(Step {
        drop_loss_before_step: true,
        ..Step::default()
    })
    .load();
    let d = diff(&base, &fix);
    assert!(d.identity.timing_comparable, "{:?}", d.identity.refusals);
    assert_eq!(d.alignment.mode, AlignmentMode::SpanPaths);
    assert!(d.alignment.baseline_only.is_empty() && d.alignment.candidate_only.is_empty());
    // 8 KiB parameters + 2 KiB activations + 8 KiB gradients + 16 KiB optimizer state
    let m = d.memory.as_ref().unwrap();
    assert_eq!(m.peak_bytes.baseline.unwrap().median, 34_816);
    assert_eq!(m.peak_bytes.candidate.unwrap().median, 32_768);
    assert_eq!(
        (m.peak_bytes.delta, m.peak_bytes.verdict),
        (Some(-2048), Verdict::Decreased)
    );
    let cpu = &m.devices[0];
    assert_eq!(cpu.device, "cpu");
    assert_eq!(cpu.baseline_peaks[0].pass, Some(Pass::Optimizer));
    assert_eq!(cpu.candidate_peaks[0].pass, Some(Pass::Optimizer));
    assert_eq!(
        cpu.baseline_peaks[0].span_path.as_deref(),
        Some("step/optimizer")
    );
    let act = cpu
        .by_category
        .iter()
        .find(|c| c.category == MemoryCategory::Activation)
        .unwrap();
    assert_eq!(
        (
            act.bytes.baseline.unwrap().median,
            act.bytes.candidate.unwrap().median
        ),
        (2048, 0)
    );
    let live = cpu.live_at_peak.as_ref().unwrap();
    assert_eq!(
        (live.baseline_only_count, live.baseline_only_bytes),
        (2, 2048)
    );
    assert_eq!((live.candidate_only_count, live.matched_count), (0, 6));
    let paths: Vec<&str> = live
        .baseline_only
        .iter()
        .map(|g| g.span_path.as_deref().unwrap())
        .collect();
    assert_eq!(paths, ["step/forward/linear#1", "step/forward/linear#2"]);
    assert!(live
        .baseline_only
        .iter()
        .all(|g| g.category == MemoryCategory::Activation && g.pass == Some(Pass::Forward)));
    // spans: same times; the root's subtree peak dropped by the activations
    let top = &d.spans[0];
    assert_eq!(top.path, "step");
    assert_eq!(top.impact_metric, Some(SpanMetric::SubtreePeak));
    assert_eq!(top.subtree_peak_bytes.delta, Some(-2048));
    assert!(d.spans[1..].iter().all(|r| !r.changed()), "{:#?}", d.spans);
    assert_eq!(d.wall_time_ns.verdict, Verdict::Unchanged);
    // gradients unchanged
    let g = d.gradients.as_ref().unwrap();
    assert_eq!((g.compared, g.unchanged), (2, 2));
    assert!(g.verdict_changes.is_empty() && g.norm_changes.is_empty());
    assert_eq!(g.extreme_norm_ratio, Some(1.0));
    // per pass: only the optimizer pass peak moved
    let peaks: Vec<(Pass, Option<i128>)> = d
        .passes
        .iter()
        .map(|p| (p.pass, p.peak_bytes.delta))
        .collect();
    assert_eq!(
        peaks,
        [
            (Pass::Forward, Some(0)),
            (Pass::Backward, Some(0)),
            (Pass::Optimizer, Some(-2048))
        ]
    );
}

#[test]
fn a_model_with_one_layer_more_lists_the_new_span_and_parameter() {
    let base = mlp_step(Step::default()).load();
    let deeper = mlp_step(Step {
        layers: 3,
        ..Step::default()
    })
    .load();
    let d = diff(&base, &deeper);
    assert!(d.identity.timing_comparable, "{:?}", d.identity.refusals);
    assert_eq!(d.alignment.mode, AlignmentMode::SpanPaths);
    assert!(d.alignment.baseline_only.is_empty());
    let extra: Vec<&str> = d
        .alignment
        .candidate_only
        .iter()
        .map(|s| s.path.as_str())
        .collect();
    assert_eq!(extra, ["step/forward/linear#3"]);
    assert_eq!(d.alignment.candidate_only[0].descendants, 0);
    assert_eq!(
        d.alignment.candidate_only[0].total_time_ns.unwrap().median,
        5
    );
    // the forward pass is 10 ns longer, and everything after it moves
    let forward = d.spans.iter().find(|r| r.path == "step/forward").unwrap();
    assert_eq!(forward.total_time_ns.delta, Some(10));
    assert_eq!(forward.direct_allocated_bytes.delta, Some(0));
    assert_eq!(forward.subtree_peak_bytes.delta, Some(1024));
    assert_eq!(d.wall_time_ns.delta, Some(10));
    let m = d.memory.as_ref().unwrap();
    // + 4 KiB parameter + 1 KiB activation + 4 KiB gradient + 8 KiB state
    assert_eq!(m.peak_bytes.delta, Some(17_408));
    let g = d.gradients.as_ref().unwrap();
    assert_eq!(g.candidate_only, ["model/layer2.weight"]);
    assert_eq!(g.compared, 2);
}

#[test]
fn a_lost_gradient_is_a_verdict_change() {
    let base = mlp_step(Step::default()).load();
    let lost = mlp_step(Step {
        lost_gradient: Some(1),
        ..Step::default()
    })
    .load();
    let d = diff(&base, &lost);
    let g = d.gradients.as_ref().unwrap();
    assert_eq!(g.verdict_changes.len(), 1);
    let c = &g.verdict_changes[0];
    assert_eq!(c.parameter, "model/layer1.weight");
    assert_eq!(
        (c.baseline.as_slice(), c.candidate.as_slice()),
        (
            [GradientVerdict::Present].as_slice(),
            [GradientVerdict::Missing].as_slice()
        )
    );
    assert_eq!(g.unchanged, 1);
}

#[test]
fn norm_ratios_beyond_the_threshold_are_listed() {
    let base = mlp_step(Step::default()).load();
    // layer0: 1 → 3 (×3, beyond 2); layer1: 2 → 3 (×1.5, within)
    let text = mlp_step(Step::default())
        .text()
        .replace(r#""norm":1.0"#, r#""norm":3.0"#)
        .replace(r#""norm":2.0"#, r#""norm":3.0"#);
    let scaled = common::Loaded::of(trace_schema::load_str(&text).unwrap());
    let d = diff(&base, &scaled);
    let g = d.gradients.as_ref().unwrap();
    assert_eq!(g.norm_changes.len(), 1);
    assert_eq!(g.norm_changes[0].parameter, "model/layer0.weight");
    assert_eq!(g.norm_changes[0].ratio, 3.0);
    assert_eq!(g.extreme_norm_ratio, Some(3.0));
    assert_eq!(g.unchanged, 1);
}

#[test]
fn differences_inside_the_run_to_run_spread_are_noise() {
    let runs = |slower: &[u64]| -> Vec<common::Loaded> {
        slower
            .iter()
            .map(|&s| {
                mlp_step(Step {
                    slower_by_ns: s,
                    ..Step::default()
                })
                .load()
            })
            .collect()
    };
    // overlapping: noise
    let d = diff_many(&runs(&[0, 4, 8]), &runs(&[2, 6, 10]));
    assert!(d.spread_known);
    assert_eq!(d.wall_time_ns.verdict, Verdict::WithinNoise);
    assert_eq!(d.wall_time_ns.delta, Some(6));
    let forward = d.spans.iter().find(|r| r.path == "step/forward").unwrap();
    assert_eq!(forward.total_time_ns.verdict, Verdict::WithinNoise);
    assert_eq!(forward.impact, 0.0);
    let w = d.wall_time_ns.baseline.unwrap();
    assert_eq!((w.runs, w.median, w.min, w.max), (3, 122, 110, 134));
    // separated: a change
    let d = diff_many(&runs(&[0, 1, 2]), &runs(&[20, 21, 22]));
    assert_eq!(d.wall_time_ns.verdict, Verdict::Increased);
    assert_eq!(d.wall_time_ns.delta, Some(60));
    let top = &d.spans[0];
    assert_eq!(top.path, "step");
    assert_eq!(top.impact_metric, Some(SpanMetric::SelfTime));
    // one run per side: the spread is unknown, a difference is reported as a change
    let d = diff_many(&runs(&[0]), &runs(&[2]));
    assert!(!d.spread_known);
    assert_eq!(d.wall_time_ns.verdict, Verdict::Increased);
}

/// With several runs a side, the findings are those of each side's median run by wall time, not
/// its first: an outlier first run does not speak for the side.
#[test]
fn several_runs_compare_the_findings_of_the_median_run() {
    let run = |s: u64| {
        mlp_step(Step {
            slower_by_ns: s,
            ..Step::default()
        })
        .load()
    };
    let self_time = |d: &trace_diff::TraceDiff| {
        d.findings
            .iter()
            .find(|f| f.code == trace_graph::FindingCode::LargestHostSelfTime)
            .and_then(|f| f.baseline.as_ref())
            .and_then(|b| b.duration_ns)
            .expect("largest_host_self_time on the baseline")
    };
    // baseline: an outlier first (slower by 40), then 0 and 4: the median is the run slower by 4
    let many = diff_many(&[run(40), run(0), run(4)], &[run(2), run(6), run(10)]);
    let median_alone = diff_many(&[run(4)], &[run(6)]);
    let outlier_alone = diff_many(&[run(40)], &[run(6)]);
    assert_eq!(self_time(&many), self_time(&median_alone));
    assert_ne!(self_time(&many), self_time(&outlier_alone));
}

/// Against a trace that is not structurally valid (a span that never ends) the analyzer computes
/// no findings for it: the diff says findings are not compared, instead of calling every finding
/// of the valid side "disappeared".
#[test]
fn an_invalid_side_has_its_findings_not_compared() {
    let good = mlp_step(Step::default());
    let text = good.text();
    let mut cut = false;
    let broken: String = text
        .lines()
        .filter(|l| {
            let drop = !cut && l.contains(r#""kind":"span_end""#);
            cut |= drop;
            !drop
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(cut);
    let bad = common::Loaded::of(trace_schema::load_str(&broken).expect("loads"));
    assert!(!bad.analysis.health.structurally_valid);
    let good = good.load();
    assert!(!good.analysis.findings.is_empty());
    let d = diff(&good, &bad);
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let why = d.findings_unavailable.as_deref().expect("said why");
    assert!(
        why.starts_with("the candidate is not a valid trace"),
        "{why}"
    );
    let d = diff(&good, &good);
    assert_eq!(d.findings_unavailable, None);
    assert!(!d.findings.is_empty());
}

fn refused(baseline: TraceText, candidate: TraceText) -> trace_diff::TraceDiff {
    let d = diff(&baseline.load(), &candidate.load());
    assert!(!d.identity.timing_comparable);
    // timing is not compared, its figures are kept; memory and gradients still are
    assert_eq!(d.wall_time_ns.verdict, Verdict::NotCompared);
    assert_eq!(d.wall_time_ns.delta, None);
    assert!(d
        .spans
        .iter()
        .all(|r| r.total_time_ns.verdict == Verdict::NotCompared
            && r.self_time_ns.verdict == Verdict::NotCompared));
    assert!(d
        .passes
        .iter()
        .all(|p| p.time_ns.verdict == Verdict::NotCompared));
    assert!(d.memory.is_some(), "{:?}", d.memory_unavailable);
    assert!(d.gradients.is_some(), "{:?}", d.gradients_unavailable);
    d
}

#[test]
fn runs_on_different_devices_or_timing_modes_refuse_timing() {
    let d = refused(
        mlp_step(Step::default()),
        mlp_step(Step::default()).set("device", json!("cuda:0")),
    );
    assert_eq!(
        codes(&d),
        [
            RefusalCode::DeviceDiffers,
            RefusalCode::UnsynchronizedDeviceTiming
        ]
    );
    assert_eq!(
        d.identity.refusals[0].message,
        "device differs: baseline cpu, candidate cuda:0"
    );
    let d = refused(
        mlp_step(Step::default()),
        mlp_step(Step::default()).set("timing_mode", json!("device_synchronized")),
    );
    assert_eq!(codes(&d), [RefusalCode::TimingModeDiffers]);
    let d = refused(
        mlp_step(Step::default()),
        mlp_step(Step::default()).set("warmup_steps", json!(0)),
    );
    assert_eq!(codes(&d), [RefusalCode::WarmupDiffers]);
}

#[test]
fn different_contracts_and_passes_refuse_timing() {
    let mut contract = mlp_step(Step::default());
    contract.meta["capture_contract"]["logical_memory"] = json!("partial");
    let d = refused(mlp_step(Step::default()), contract);
    assert_eq!(codes(&d), [RefusalCode::CaptureContractDiffers]);
    assert_eq!(
        d.identity.refusals[0].message,
        "capture contract differs: logical_memory baseline complete candidate partial"
    );
    // no optimizer pass on the candidate
    let text = mlp_step(Step::default())
        .text()
        .replace(r#","step":"optimizer""#, "");
    let no_opt = common::Loaded::of(trace_schema::load_str(&text).unwrap());
    let d = diff(&mlp_step(Step::default()).load(), &no_opt);
    assert_eq!(codes(&d), [RefusalCode::PassesDiffer]);
    assert_eq!(
        d.identity.refusals[0].message,
        "passes differ: baseline forward+backward+optimizer, candidate forward+backward"
    );
    let opt = d.passes.iter().find(|p| p.pass == Pass::Optimizer).unwrap();
    assert_eq!(opt.peak_bytes.verdict, Verdict::Unobserved);
}

#[test]
fn failed_and_cut_short_captures_refuse_timing() {
    let mut failed = mlp_step(Step::default());
    failed.failed = Some("out of memory".into());
    let d = refused(mlp_step(Step::default()), failed);
    assert_eq!(codes(&d), [RefusalCode::InvalidCapture]);
    assert_eq!(
        d.identity.refusals[0].message,
        "candidate candidate.jsonl: the capture failed"
    );
    let mut cut = mlp_step(Step::default());
    cut.truncated = true;
    let d = refused(mlp_step(Step::default()), cut);
    assert_eq!(codes(&d), [RefusalCode::IncompleteCapture]);
    assert!(d.memory.as_ref().unwrap().lower_bound);
}

#[test]
fn comparison_identities_with_different_conditions_refuse_timing() {
    let identity = |batch: u64| {
        json!({"workload_id": "w", "model_id": "m", "config_id": "c", "data_id": "d",
            "seed_policy": "fixed", "physical_batch": batch, "accumulation_steps": 1,
            "precision": "f32", "device_state": "warm"})
    };
    let d = refused(
        mlp_step(Step::default()).set("comparison_identity", identity(8)),
        mlp_step(Step::default()).set("comparison_identity", identity(16)),
    );
    assert_eq!(codes(&d), [RefusalCode::IdentityConditionsDiffer]);
    let same = diff(
        &mlp_step(Step::default())
            .set("comparison_identity", identity(8))
            .load(),
        &mlp_step(Step::default())
            .set("comparison_identity", identity(8))
            .load(),
    );
    assert!(same.identity.timing_comparable);
}

#[test]
fn unrelated_span_trees_fall_back_to_the_passes() {
    let base = mlp_step(Step::default());
    let text = base
        .text()
        .replace(r#""name":"linear""#, r#""name":"aten::addmm""#)
        .replace(r#""name":"forward""#, r#""name":"fwd""#)
        .replace(r#""name":"backward""#, r#""name":"autograd""#)
        .replace(
            r#""name":"optimizer""#,
            r#""name":"Optimizer.step#AdamW.step""#,
        );
    let other = common::Loaded::of(trace_schema::load_str(&text).unwrap());
    let d = diff(&base.load(), &other);
    assert_eq!(d.alignment.mode, AlignmentMode::Passes);
    assert_eq!(d.alignment.aligned, 1); // the measured roots, by role
    assert_eq!(d.alignment.baseline_only.len(), 3);
    assert_eq!(d.passes.len(), 3);
    assert!(d
        .passes
        .iter()
        .all(|p| p.time_ns.verdict == Verdict::Unchanged
            && p.peak_bytes.verdict == Verdict::Unchanged));
    // storages matched by pass: nothing one-sided
    let live = d.memory.as_ref().unwrap().devices[0]
        .live_at_peak
        .clone()
        .unwrap();
    assert_eq!(
        (live.baseline_only_count, live.candidate_only_count),
        (0, 0)
    );
    assert_eq!(
        d.memory.as_ref().unwrap().storages_matched_by,
        AlignmentMode::Passes
    );
}

#[test]
fn measured_roots_align_by_role_under_different_names() {
    let base = mlp_step(Step::default());
    let text = base
        .text()
        .replace(r#""name":"step""#, r#""name":"other::train_step""#);
    let other = common::Loaded::of(trace_schema::load_str(&text).unwrap());
    let d = diff(&base.load(), &other);
    assert_eq!(d.alignment.mode, AlignmentMode::SpanPaths);
    assert!(d.alignment.candidate_only.is_empty());
    assert!(d
        .spans
        .iter()
        .any(|r| r.path == "step|other::train_step/forward/linear#2"));
}

#[test]
fn missing_planes_are_not_compared_and_bad_options_are_errors() {
    let base = mlp_step(Step::default()).load();
    let mut bare = TraceText::new();
    bare.span("s1", None, "step", 0, 10, None);
    let bare = bare.load();
    let d = diff(&base, &bare);
    assert!(d.memory.is_none());
    assert_eq!(
        d.memory_unavailable.as_deref(),
        Some("candidate candidate.jsonl: no memory events")
    );
    assert!(d.gradients.is_none());
    assert!(d.gradients_unavailable.is_some());
    let run = base.run("b");
    assert_eq!(
        compare(&[], &[run], &DiffOptions::default()).unwrap_err(),
        DiffError::EmptySide { side: "baseline" }
    );
    let bad = DiffOptions {
        norm_ratio_threshold: 0.5,
        ..DiffOptions::default()
    };
    assert!(matches!(
        compare(&[run], &[run], &bad),
        Err(DiffError::InvalidThreshold(_))
    ));
}

/// Per category, the live sets add up: entered − left + the change of the storages live at both
/// peaks is the category's change at the peak, to the byte; the baseline side of each is the
/// baseline's bytes; the groups listed sum to the entered and left figures.
fn assert_live_sets_add_up(d: &trace_diff::TraceDiff) {
    let m = d.memory.as_ref().expect("memory compared");
    for dev in &m.devices {
        let live = dev.live_at_peak.as_ref().expect("both sides peak");
        for cat in &dev.by_category {
            let (b, c) = (
                cat.bytes.baseline.unwrap().median,
                cat.bytes.candidate.unwrap().median,
            );
            let l = live.by_category.iter().find(|l| l.category == cat.category);
            let (lb, lc, change) = l.map_or((0, 0, 0), |l| {
                (l.baseline_bytes(), l.candidate_bytes(), l.change_bytes())
            });
            assert_eq!((lb, lc), (b, c), "{:?} at the peaks", cat.category);
            assert_eq!(
                change,
                cat.bytes.delta.unwrap(),
                "{:?} change",
                cat.category
            );
            let group_sum = |groups: &[trace_diff::StorageGroup]| -> u64 {
                groups
                    .iter()
                    .filter(|g| g.category == cat.category)
                    .map(|g| g.bytes)
                    .sum()
            };
            if let Some(l) = l {
                assert_eq!(group_sum(&live.baseline_only), l.left_bytes);
                assert_eq!(group_sum(&live.candidate_only), l.entered_bytes);
            }
        }
        let matched_b: u64 = live
            .by_category
            .iter()
            .map(|l| l.matched_baseline_bytes)
            .sum();
        assert_eq!(matched_b, live.matched_baseline_bytes);
        let peak_b: u64 = live.by_category.iter().map(|l| l.baseline_bytes()).sum();
        assert_eq!(
            peak_b,
            dev.peak_bytes.baseline.unwrap().median,
            "baseline peak"
        );
    }
}

#[test]
fn the_live_sets_add_up_to_each_category_change() {
    let with_buffer = |o: Step, buffer: u64| {
        let mut t = mlp_step(o);
        // an `other` storage without a shape, live at the peak on both sides, whose size
        // differs: matched, so its change is under "live at both peaks"
        t.untyped(90, "buffer", buffer, "s4");
        t.load()
    };
    let pairs = [
        (
            Step::default(),
            Step {
                drop_loss_before_step: true,
                ..Step::default()
            },
            3000,
            3000,
        ),
        (
            Step::default(),
            Step {
                layers: 3,
                ..Step::default()
            },
            3000,
            5000,
        ),
        (
            Step::default(),
            Step {
                batch: 32,
                ..Step::default()
            },
            5000,
            3000,
        ),
    ];
    for (b, c, bb, cb) in pairs {
        let d = diff(&with_buffer(b, bb), &with_buffer(c, cb));
        assert_live_sets_add_up(&d);
        let cpu = &d.memory.as_ref().unwrap().devices[0];
        let other = cpu.live_at_peak.as_ref().unwrap().by_category.iter();
        let other = other
            .clone()
            .find(|l| l.category == MemoryCategory::Other)
            .unwrap();
        assert_eq!(
            (other.matched_baseline_bytes, other.matched_candidate_bytes),
            (bb, cb)
        );
    }
}

#[test]
fn a_batch_change_is_split_into_batch_scaled_and_fixed_parts() {
    let identity = |batch: u64| {
        json!({"workload_id": "w", "model_id": "m", "config_id": "c", "data_id": "d",
            "seed_policy": "fixed", "physical_batch": batch, "accumulation_steps": 1,
            "precision": "f32", "device_state": "warm"})
    };
    let run = |batch: u64| {
        mlp_step(Step {
            batch,
            ..Step::default()
        })
        .set("comparison_identity", identity(batch))
        .load()
    };
    let d = diff(&run(16), &run(32));
    assert_eq!(d.identity.baseline[0].physical_batch, Some(16));
    assert_eq!(d.identity.candidate[0].physical_batch, Some(32));
    let cpu = &d.memory.as_ref().unwrap().devices[0];
    // 2 layers: activations 2 × 1 KiB → 2 × 2 KiB; parameters 8 KiB, gradients 8 KiB and
    // optimizer state 16 KiB on both sides
    assert_eq!(cpu.batch_scaled_bytes.baseline.unwrap().median, 2048);
    assert_eq!(cpu.batch_scaled_bytes.delta, Some(2048));
    assert_eq!(cpu.fixed_bytes.baseline.unwrap().median, 32_768);
    assert_eq!(cpu.fixed_bytes.delta, Some(0));
    assert_eq!(
        cpu.peak_bytes.delta,
        Some(cpu.batch_scaled_bytes.delta.unwrap() + cpu.fixed_bytes.delta.unwrap())
    );
    assert_live_sets_add_up(&d);
}
