//! Issue 20's CNN as an example (tracking allocator installed, as in `--example cnn`): the
//! trace is valid and complete, every parameter gets a gradient, and the input batch made
//! before the captured step — never labelled — is in the memory plane as `pre_existing`
//! storages of exactly 65,536 + 256 = 65,792 bytes; the `drop((loss, logits))` loop too.

use candle_graph_examples::cnn::{train_cnn, CnnConfig, CnnRun};
use candle_graph_examples::UpdateStyle;
use trace_schema::{CoverageLevel, MemoryAction, MemoryCategory, TraceDocument};

#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();

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
fn the_input_batch_made_before_the_step_is_pre_existing_with_its_bytes() {
    // One test: which tensors existed before a session is a fact about the whole process.
    let batch = CnnConfig::default().input_batch_bytes();
    assert_eq!(batch, 65_792);

    let (doc, losses) = run(UpdateStyle::BackwardStep);
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    let contract = doc.meta.capture_contract.clone().expect("contract");
    assert_eq!(
        contract.logical_memory,
        CoverageLevel::Complete,
        "{:?}",
        contract.reasons
    );
    let inputs = pre_existing(&doc, MemoryCategory::Other);
    assert_eq!(
        inputs,
        vec![256, 65_536],
        "labels (64 × u32), images (64×1×16×16 f32)"
    );
    assert_eq!(inputs.iter().sum::<u64>(), batch);
    // conv1 8×1×3×3 + 8, conv2 16×8×3×3 + 16, fc 10×256 + 10 (f32).
    let params = pre_existing(&doc, MemoryCategory::Parameter);
    assert_eq!(params, vec![32, 40, 64, 288, 4608, 10_240]);
    let moments: u64 = pre_existing(&doc, MemoryCategory::Optimizer).iter().sum();
    assert_eq!(
        moments,
        2 * params.iter().sum::<u64>(),
        "two AdamW moments each"
    );

    // The issue's loop: backward, drop((loss, logits)), step. A second session of the process
    // (the first one's tensors existed before it): the batch is still known, the contract
    // says older storages are not.
    let (doc, _) = run(UpdateStyle::DropLossBeforeStep);
    let contract = doc.meta.capture_contract.clone().expect("contract");
    assert_eq!(contract.logical_memory, CoverageLevel::Partial);
    assert_eq!(pre_existing(&doc, MemoryCategory::Other), vec![256, 65_536]);
}
