//! The armed/disarmed pairs on CPU (tracking allocator installed, as in `candle-graph
//! device-check`): every pair is timed, and the training report names the held parameters.

use candle_graph_examples::{measure_overhead, train, ModelKind, TrainConfig};

#[global_allocator]
static ALLOC: trace_probe::Tracking = trace_probe::Tracking::system();

// One test: the capture window is process-wide.
#[test]
fn pairs_are_timed_and_parameters_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = TrainConfig::new(ModelKind::Mlp, dir.path());
    config.sizes.mlp.batch_size = 8;
    let report = measure_overhead(&config, 3).unwrap();
    assert_eq!(report.device, "cpu");
    assert_eq!(report.pairs.len(), 3);
    assert!(report.pairs.iter().all(|(d, a)| *d > 0 && *a > 0));
    assert_eq!(report.ratios().len(), 3);
    assert!(report.median_ratio().unwrap().is_finite());

    let trained = train(&config).unwrap();
    assert_eq!(trained.device, "cpu");
    let names: Vec<&str> = trained.parameters.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fc1.bias",
            "fc1.weight",
            "fc2.bias",
            "fc2.weight",
            "fc3.bias",
            "fc3.weight"
        ]
    );
    // 784×512 f32 = 1,605,632 B.
    assert_eq!(trained.parameters[1].bytes(), 1_605_632);
    assert_eq!(
        trained.parameter_count,
        784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10
    );
    assert!(measure_overhead(&config, 0).is_err());
}
