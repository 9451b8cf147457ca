//! Issue 20's CNN as an example (tracking allocator installed, as in `--example cnn`): the
//! trace is valid and complete, every parameter gets a gradient, the parameters and AdamW's
//! moments are in the memory plane with their exact bytes, for `backward_step` and for the
//! issue's `drop((loss, logits))` loop.

use candle_graph_examples::cnn::{train_cnn, CnnConfig, CnnRun};
use candle_graph_examples::UpdateStyle;
use trace_schema::{MemoryAction, MemoryCategory, TraceDocument};

#[global_allocator]
static ALLOC: trace_probe::alloc::Tracking = trace_probe::alloc::Tracking::system();

fn pre_existing(doc: &TraceDocument, category: MemoryCategory) -> Vec<u64> {
    let mut v: Vec<u64> = doc
        .memory
        .iter()
        .filter(|m| m.action == MemoryAction::Alloc && m.pre_existing && m.category == category)
        .map(|m| m.bytes.expect("bytes"))
        .collect();
    v.sort_unstable();
    v
}

fn run(update: UpdateStyle) -> (TraceDocument, Vec<f32>) {
    let dir = tempfile::tempdir().unwrap();
    let mut run = CnnRun::new(dir.path());
    run.update = update;
    let report = train_cnn(&run).unwrap();
    assert_eq!(report.parameter_tensors, 6);
    let doc = trace_schema::load_path(&report.trace_path).unwrap();
    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.health.structurally_valid,
        "{:?}",
        analysis.health.issues
    );
    assert_eq!(analysis.gradients.counts.present, 6);
    (doc, report.losses)
}

#[test]
fn cnn_steps_are_captured_with_parameters_and_optimizer_state() {
    // One test: the allocator's capture is process-wide.
    assert_eq!(CnnConfig::default().input_batch_bytes(), 65_792);
    for update in [UpdateStyle::BackwardStep, UpdateStyle::DropLossBeforeStep] {
        let (doc, losses) = run(update);
        assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
        // conv1 8×1×3×3 + 8, conv2 16×8×3×3 + 16, fc 10×256 + 10 (f32).
        let params = pre_existing(&doc, MemoryCategory::Parameter);
        assert_eq!(params, vec![32, 40, 64, 288, 4608, 10_240], "{update:?}");
        let moments: u64 = pre_existing(&doc, MemoryCategory::Optimizer).iter().sum();
        assert_eq!(
            moments,
            2 * params.iter().sum::<u64>(),
            "two AdamW moments each"
        );
    }
}
