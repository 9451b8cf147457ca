//! The advice findings on real Candle training loops (tracking allocator installed, as in the
//! examples and the demo; the llama-style demo, the MLP and issue 20's CNN): who holds the
//! activations still live when the optimizer starts
//! (`activations_retained_into_optimizer`), the capture without warm-up
//! (`captured_without_warm_up`). A capture step never reached (`capture_not_started`, listed
//! first) is tested through `candle-graph check` (trace-cli's `tests/cli/check.rs`).

use std::sync::Mutex;

use candle_graph_examples::cnn::{train_cnn, CnnRun};
use candle_graph_examples::{train, ModelKind, TrainConfig, UpdateStyle};
use trace_graph::{Analysis, Finding, FindingCode, Holder};

#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();

/// The allocator's capture is process-wide: one training run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn analyze(model: ModelKind, update: UpdateStyle, steps: u64, capture_step: u64) -> Analysis {
    analyze_in(model, update, steps, capture_step, false)
}

fn analyze_in(
    model: ModelKind,
    update: UpdateStyle,
    steps: u64,
    capture_step: u64,
    deterministic: bool,
) -> Analysis {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut config = TrainConfig::new(model, dir.path());
    config.update = update;
    config.steps = steps;
    config.capture_step = capture_step;
    config.deterministic = deterministic;
    let report = train(&config).unwrap();
    let doc = trace_schema::load_path(&report.trace_path).unwrap();
    let a = trace_graph::analyze(&doc);
    assert!(a.health.structurally_valid, "{:#?}", a.health.issues);
    assert!(a.health.capture_complete);
    a
}

fn finding(a: &Analysis, code: FindingCode) -> Option<&Finding> {
    a.findings.iter().find(|f| f.code == code)
}

fn retention(a: &Analysis) -> Option<&Finding> {
    finding(a, FindingCode::ActivationsRetainedIntoOptimizer)
}

fn holders(f: &Finding) -> Vec<Holder> {
    f.evidence.held_by.iter().map(|h| h.holder).collect()
}

/// (a) `opt.backward_step(&loss)`: the loss is live through the step and holds its graph.
#[test]
fn plain_llama_loop_the_loss_holds_the_graph() {
    let a = analyze(ModelKind::Llama, UpdateStyle::BackwardStep, 3, 2);
    let f = retention(&a).expect("retention finding");
    let s = &f.summary;
    assert!(s.contains("the loss is still live then"), "{s}");
    assert!(s.contains("run backward, drop the loss, then step"), "{s}");
    assert!(!s.contains("the gradient store holds them"), "{s}");
    assert_eq!(holders(f)[0], Holder::Loss, "{:#?}", f.evidence.held_by);
    let loss = &f.evidence.held_by[0];
    assert!(loss.count > 0 && loss.bytes.is_some_and(|b| b > 0));
    assert!(
        loss.released_ns.is_some(),
        "the loss is freed after the step"
    );
    // The holdings partition the retained activations.
    let count: u64 = f.evidence.held_by.iter().map(|h| h.count).sum();
    assert_eq!(Some(count), f.evidence.count);
}

/// (b) backward, drop the loss, step: what stays live is freed only with the gradients.
#[test]
fn llama_with_the_loss_dropped_names_the_gradient_store() {
    let a = analyze(ModelKind::Llama, UpdateStyle::DropLossBeforeStep, 3, 2);
    let f = retention(&a).expect("llama keeps activations past the drop-loss fix");
    let s = &f.summary;
    assert!(s.contains("though the loss was dropped before it"), "{s}");
    assert!(s.contains("the gradient store holds them"), "{s}");
    assert!(!s.contains("run backward, drop the loss, then step"), "{s}");
    let store = f
        .evidence
        .held_by
        .iter()
        .find(|h| h.holder == Holder::GradientStore)
        .expect("gradient store holding");
    // every retained storage: nothing else holds any
    assert_eq!(holders(f), [Holder::GradientStore], "{s}");
    assert_eq!(Some(store.count), f.evidence.count);
    assert_eq!(store.bytes, f.evidence.bytes);
    assert!(store
        .released_ns
        .is_some_and(|t| t > f.evidence.timestamp_ns.unwrap()));
    let count: u64 = f.evidence.held_by.iter().map(|h| h.count).sum();
    assert_eq!(Some(count), f.evidence.count);
}

/// The probe's deterministic mode (logical clock; each run of frees ordered by storage id)
/// keeps every free in its run: the same holders as on the host clock.
#[test]
fn deterministic_traces_name_the_same_holders() {
    for (update, holder) in [
        (UpdateStyle::BackwardStep, Holder::Loss),
        (UpdateStyle::DropLossBeforeStep, Holder::GradientStore),
    ] {
        let host = analyze_in(ModelKind::Llama, update, 3, 2, false);
        let logical = analyze_in(ModelKind::Llama, update, 3, 2, true);
        let (h, l) = (retention(&host).unwrap(), retention(&logical).unwrap());
        assert_eq!(holders(h)[0], holder, "{}", h.summary);
        let figures = |f: &Finding| -> Vec<(Holder, u64, Option<u64>)> {
            f.evidence
                .held_by
                .iter()
                .map(|x| (x.holder, x.count, x.bytes))
                .collect()
        };
        assert_eq!(figures(h), figures(l), "{update:?}");
    }
}

/// (c) backward, drop the loss, keep only the parameters' gradients (detached) and drop the
/// original store before the step: nothing is retained, on both models.
#[test]
fn dropping_the_store_before_the_step_leaves_nothing_retained() {
    for model in [ModelKind::Llama, ModelKind::Mlp] {
        let a = analyze(model, UpdateStyle::DetachedParameterGradients, 3, 2);
        assert!(
            retention(&a).is_none(),
            "{model}: {:?}",
            retention(&a).map(|f| &f.summary)
        );
        // The step still trains every parameter.
        assert_eq!(
            a.gradients.counts.present,
            a.gradients.parameter_count(),
            "{model}"
        );
    }
    // The MLP's activations are all released with the loss: the drop-loss fix is enough.
    let a = analyze(ModelKind::Mlp, UpdateStyle::DropLossBeforeStep, 3, 2);
    assert!(
        retention(&a).is_none(),
        "{:?}",
        retention(&a).map(|f| &f.summary)
    );
}

/// A capture of step 1 has no warm-up before it; a capture of step 2 has one.
#[test]
fn a_first_step_capture_says_it_has_no_warm_up() {
    let a = analyze(ModelKind::Mlp, UpdateStyle::BackwardStep, 1, 1);
    let f = finding(&a, FindingCode::CapturedWithoutWarmUp).expect("warm-up finding");
    assert!(
        f.summary
            .starts_with("step 1 was captured with no warm-up step"),
        "{}",
        f.summary
    );
    assert!(f.summary.contains("one-time costs"), "{}", f.summary);
    assert_eq!(a.findings[0].code, FindingCode::CapturedWithoutWarmUp);
    let a = analyze(ModelKind::Mlp, UpdateStyle::BackwardStep, 2, 2);
    assert!(finding(&a, FindingCode::CapturedWithoutWarmUp).is_none());
}

fn analyze_cnn(update: UpdateStyle) -> Analysis {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut run = CnnRun::new(dir.path());
    run.update = update;
    let report = train_cnn(&run).unwrap();
    let doc = trace_schema::load_path(&report.trace_path).unwrap();
    let a = trace_graph::analyze(&doc);
    assert!(a.health.structurally_valid, "{:#?}", a.health.issues);
    assert!(a.health.capture_complete);
    a
}

/// (d) issue 20's CNN: with `drop((loss, logits))` before the step, four first-layer
/// activations are freed only when the gradient store is dropped; `backward_step` keeps the
/// loss live; keeping only the parameters' detached gradients leaves nothing retained.
#[test]
fn cnn_with_the_loss_dropped_names_the_gradient_store() {
    let a = analyze_cnn(UpdateStyle::BackwardStep);
    let f = retention(&a).expect("retention finding");
    assert_eq!(holders(f), [Holder::Loss], "{}", f.summary);
    assert!(
        f.summary.contains("the loss is still live then"),
        "{}",
        f.summary
    );

    let a = analyze_cnn(UpdateStyle::DropLossBeforeStep);
    let f = retention(&a).expect("retention finding");
    let s = &f.summary;
    assert_eq!(holders(f), [Holder::GradientStore], "{s}");
    // conv1's output, its relu, … ([64, 8, 16, 16] f32) and the first pool ([64, 8, 8, 8] f32)
    let conv = 64 * 8 * 16 * 16 * 4;
    let pool = 64 * 8 * 8 * 8 * 4;
    let store = &f.evidence.held_by[0];
    assert_eq!(store.count, 4, "{s}");
    assert_eq!(store.bytes, Some(3 * conv + pool), "{s}");
    assert_eq!(f.evidence.bytes, Some(3 * conv + pool), "{s}");
    assert!(s.contains("1.62 MiB (4 storages) of them are freed only with the gradients, when the gradient store is dropped"), "{s}");
    assert!(
        s.contains("[64, 8, 16, 16] f32 (512.00 KiB, activation"),
        "{s}"
    );
    assert!(
        s.contains("[64, 8, 8, 8] f32 (128.00 KiB, activation"),
        "{s}"
    );
    assert!(s.contains("though the loss was dropped before it"), "{s}");
    assert!(!s.contains("run backward, drop the loss, then step"), "{s}");
    assert!(store
        .released_ns
        .is_some_and(|t| t > f.evidence.timestamp_ns.unwrap()));

    let a = analyze_cnn(UpdateStyle::DetachedParameterGradients);
    assert!(
        retention(&a).is_none(),
        "{:?}",
        retention(&a).map(|f| &f.summary)
    );
    assert_eq!(a.gradients.counts.present, 6);
}

/// The what-if of the retention advice on the llama demo against the demo with the advice
/// applied (`demo --drop-loss-before-step`): the loss is freed in one run of frees with the
/// gradients, so the what-if is a bound — the advised run's peaks are never below it — and the
/// run's peak, which moves to the backward pass, is predicted to the byte.
#[test]
fn llama_what_if_of_dropping_the_loss_bounds_the_advised_run() {
    let plain = analyze(ModelKind::Llama, UpdateStyle::BackwardStep, 3, 2);
    let f = retention(&plain).expect("retention finding");
    let w = f.evidence.what_if.as_ref().expect("what-if");
    assert!(!w.exact, "{}", f.summary);
    assert_eq!(w.run_peak_pass, Some(trace_schema::Pass::Backward));
    let advised = analyze(ModelKind::Llama, UpdateStyle::DropLossBeforeStep, 3, 2);
    let l = advised.memory.logical.as_ref().unwrap();
    let measured_run = l.peak.as_ref().unwrap().live_bytes;
    let measured_opt = l
        .pass_peaks
        .iter()
        .find(|p| p.pass == trace_schema::Pass::Optimizer)
        .unwrap()
        .peak
        .live_bytes;
    let predicted_opt = w
        .pass_peaks
        .iter()
        .find(|p| p.pass == trace_schema::Pass::Optimizer)
        .unwrap()
        .live_bytes;
    assert!(
        predicted_opt <= measured_opt,
        "{predicted_opt} > {measured_opt}"
    );
    assert!(
        measured_opt
            < w.baseline_pass_peaks
                .iter()
                .find(|p| p.pass == trace_schema::Pass::Optimizer)
                .unwrap()
                .live_bytes
    );
    // the run's peak is the backward pass's, which the advice does not touch
    assert_eq!(w.run_peak_bytes, measured_run, "{w:?}");
}
