//! The user-facing API on the MLP: the profiler guard, the optimizer wrapper as a drop-in
//! `candle_nn::Optimizer` (AdamW and SGD, through a generic `fn train<O: Optimizer>`), probed
//! constructors with module spans: passes, gradient facts and module spans without user markers.

mod common;

use candle_core::{DType, Device, Module, ModuleT, Tensor};
use candle_nn::{loss, AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap, SGD};
use trace_probe::nn::{self, Traced};
use trace_probe::{
    varmap_manifest, CaptureContract, CoverageLevel, GradientContract, Pass, ProbedOptimizer,
    ProfileRun, Profiler, SpanKind, TerminalOutcome, NON_PARAMETER_ROOT,
};
use trace_schema::{
    ExpectedGradient, GradientExpectation, GradientFamilyContract, GradientState, TraceDocument,
};

struct ProbedMlp {
    fc1: Traced<candle_nn::Linear>,
    fc2: Traced<candle_nn::Linear>,
}

impl ProbedMlp {
    fn new(varmap: &VarMap) -> candle_core::Result<Self> {
        let vb = VarBuilder::from_varmap(varmap, DType::F32, &Device::Cpu);
        let fc1 = nn::linear(common::IN, common::HIDDEN, vb.pp("fc1"))?;
        let fc2 = nn::linear(common::HIDDEN, common::CLASSES, vb.pp("fc2"))?;
        Ok(Self { fc1, fc2 })
    }

    fn forward(&self, x: &Tensor, freeze_fc1: bool) -> candle_core::Result<Tensor> {
        let mut h = self.fc1.forward(x)?.relu()?;
        if freeze_fc1 {
            h = h.detach();
        }
        self.fc2.forward(&h)
    }
}

/// A training loop generic over the optimizer, as user code is: nothing in it knows the probe
/// except the step guard.
fn train<O: Optimizer>(
    profiler: &Profiler,
    varmap: &VarMap,
    config: O::Config,
    steps: u64,
    freeze_fc1: bool,
) -> candle_core::Result<()> {
    let mlp = ProbedMlp::new(varmap)?;
    common::reseed(varmap, 5)?;
    let mut opt = O::new(varmap.all_vars(), config)?;
    for step in 1..=steps {
        let (x, y) = common::batch(step)?;
        let _step = profiler.step(step);
        profiler.tensor("batch.x", &x);
        let logits = mlp.forward(&x, freeze_fc1)?;
        let l = loss::cross_entropy(&logits, &y)?;
        opt.backward_step(&l)?;
    }
    Ok(())
}

fn profile<O: Optimizer>(config: O::Config) -> Result<TraceDocument, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("nested/dir/trace.jsonl"); // parent directories are created
    let varmap = VarMap::new();
    let profiler = ProfileRun::training("mlp::train_step", 2)
        .varmap(&varmap)
        .start(&path)?;
    train::<ProbedOptimizer<O>>(&profiler, &varmap, config, 3, false)?;
    let summary = profiler.finish()?;
    assert_eq!(summary.outcome, TerminalOutcome::Complete);
    Ok(trace_schema::load_path(&path)?)
}

fn check_passes_gradients_and_modules(doc: &TraceDocument) {
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    for pass in [Pass::Forward, Pass::Backward, Pass::Optimizer] {
        assert_eq!(
            doc.spans.iter().filter(|s| s.pass == Some(pass)).count(),
            1,
            "{pass:?}"
        );
    }
    let forward = doc
        .spans
        .iter()
        .find(|s| s.pass == Some(Pass::Forward))
        .expect("the step guard opened the forward pass");
    let modules: Vec<_> = doc
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Module)
        .collect();
    assert_eq!(modules.len(), 2);
    assert!(modules.iter().all(|s| s.parent == Some(forward.id)));
    let paths: Vec<&str> = modules
        .iter()
        .map(|s| doc.str(s.module_path.expect("module path")))
        .collect();
    // Named by their VarBuilder path, their kind recorded beside.
    assert_eq!(paths, ["fc1", "fc2"]);
    assert!(modules
        .iter()
        .all(|s| s.module_kind.map(|k| doc.str(k)) == Some("linear")));
    assert!(modules.iter().all(|s| s.instance_key.is_some()));
    assert_ne!(modules[0].instance_key, modules[1].instance_key);

    // The contract: complete, sorted VarMap keys under `model`.
    let contract = doc.meta.capture_contract.as_ref().expect("contract");
    assert_eq!(contract.gradients, CoverageLevel::Complete);
    let keys: Vec<&str> = contract
        .gradient_contract
        .as_ref()
        .expect("gradient contract")
        .expected
        .iter()
        .map(|e| e.key.as_str())
        .collect();
    assert_eq!(keys, ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]);

    let params: Vec<_> = doc.gradients.iter().filter(|g| g.parameter).collect();
    assert_eq!(params.len(), 4);
    for g in &params {
        assert_eq!(g.state, GradientState::Present, "{}", g.key);
        assert!(
            g.norm.is_some_and(|n| n.is_finite() && n > 0.0),
            "{}",
            g.key
        );
        assert_eq!(g.non_finite_elements, Some(0));
    }
    // The input batch's gradient: a non-parameter gradient, labelled, with its bytes.
    let batch_fact = doc
        .tensors
        .iter()
        .find(|t| t.label.is_some())
        .expect("batch fact");
    let batch_grad = doc
        .gradients
        .iter()
        .filter(|g| !g.parameter)
        .find(|g| g.tensor_id.as_deref() == Some(doc.str(batch_fact.tensor_id)))
        .expect("the input batch has a non-parameter gradient");
    assert_eq!(batch_grad.root, NON_PARAMETER_ROOT);
    assert_eq!(batch_grad.key, "batch.x");
    assert_eq!(
        batch_grad.bytes,
        Some((common::BATCH * common::IN * 4) as u64)
    );

    let analysis = trace_graph::analyze(doc);
    assert!(
        analysis.health.structurally_valid,
        "{:#?}",
        analysis.health.issues
    );
    assert_eq!(analysis.gradients.counts.present, 4);
    assert!(analysis.gradients.without_gradient.is_empty());
    assert!(!analysis.gradients.non_parameter.is_empty());
}

#[test]
fn adamw_through_the_optimizer_trait() -> Result<(), Box<dyn std::error::Error>> {
    check_passes_gradients_and_modules(&profile::<AdamW>(ParamsAdamW::default())?);
    Ok(())
}

#[test]
fn sgd_through_the_optimizer_trait() -> Result<(), Box<dyn std::error::Error>> {
    check_passes_gradients_and_modules(&profile::<SGD>(0.05)?);
    Ok(())
}

#[test]
fn without_a_profiler_the_wrapper_is_the_inner_optimizer() -> candle_core::Result<()> {
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let fc = nn::linear(4, 2, vb.pp("fc"))?;
    let mut opt = ProbedOptimizer::<SGD>::new(varmap.all_vars(), 0.1)?;
    assert!(opt.parameters().is_empty());
    let before = fc.weight().sum_all()?.to_scalar::<f32>()?;
    let loss = fc
        .forward(&Tensor::ones((3, 4), DType::F32, &Device::Cpu)?)?
        .sum_all()?;
    opt.backward_step(&loss)?;
    assert_ne!(fc.weight().sum_all()?.to_scalar::<f32>()?, before);
    assert_eq!(opt.learning_rate(), 0.1);
    Ok(())
}

#[test]
fn a_dropped_profiler_finishes_the_trace() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    {
        let varmap = VarMap::new();
        let profiler = ProfileRun::training("mlp::train_step", 1)
            .varmap(&varmap)
            .start(&path)?;
        train::<ProbedOptimizer<SGD>>(&profiler, &varmap, 0.05, 1, false)?;
        // no finish(): the guard's drop writes the terminal
    }
    let doc = trace_schema::load_path(&path)?;
    assert!(doc.truncation.is_none(), "{:?}", doc.truncation);
    assert_eq!(
        doc.terminal.map(|t| t.outcome),
        Some(TerminalOutcome::Complete)
    );
    Ok(())
}

#[test]
fn step_guard_takes_any_integer_type() -> Result<(), Box<dyn std::error::Error>> {
    let profiler = ProfileRun::inference("e", 2).start_with_writer(std::io::sink())?;
    assert!(!profiler.step(1i32).is_active());
    assert!(!profiler.step(-2i64).is_active());
    assert!(profiler.step(2usize).is_active());
    Ok(())
}

#[test]
fn frozen_parameters_with_a_user_contract_raise_no_warning(
) -> Result<(), Box<dyn std::error::Error>> {
    // fc1 is frozen (its output is detached): its family is declared inactive.
    let varmap_for_names = VarMap::new();
    ProbedMlp::new(&varmap_for_names)?;
    let expected: Vec<ExpectedGradient> = varmap_manifest("model", &varmap_for_names)
        .into_iter()
        .map(|(root, key)| ExpectedGradient {
            family: key.split('.').next().unwrap_or_default().to_string(),
            root,
            key,
        })
        .collect();
    let families = vec![
        GradientFamilyContract {
            family: "fc1".into(),
            expectation: GradientExpectation::Inactive,
            min_present: 0,
        },
        GradientFamilyContract {
            family: "fc2".into(),
            expectation: GradientExpectation::Active,
            min_present: 2,
        },
    ];
    let contract = CaptureContract {
        gradients: CoverageLevel::Complete,
        gradient_contract: Some(GradientContract::new(expected, families)),
        ..CaptureContract::default()
    };

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let varmap = VarMap::new();
    let profiler = ProfileRun::training("mlp::frozen", 1)
        .capture_contract(contract.clone())
        .varmap(&varmap)
        .start(&path)?;
    train::<ProbedOptimizer<AdamW>>(&profiler, &varmap, ParamsAdamW::default(), 1, true)?;
    profiler.finish()?;
    let doc = trace_schema::load_path(&path)?;
    assert_eq!(
        doc.meta
            .capture_contract
            .as_ref()
            .and_then(|c| c.gradient_contract.as_ref()),
        contract.gradient_contract.as_ref(),
        "the user contract wins"
    );
    let state = |key: &str| {
        doc.gradients
            .iter()
            .find(|g| g.parameter && g.key == key)
            .map(|g| g.state)
    };
    assert_eq!(state("fc1.weight"), Some(GradientState::Missing));
    assert_eq!(state("fc2.weight"), Some(GradientState::Present));

    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.health.structurally_valid,
        "{:#?}",
        analysis.health.issues
    );
    let gradient_issues: Vec<_> = analysis
        .health
        .issues
        .iter()
        .filter(|i| format!("{:?}", i.code).starts_with("Gradient"))
        .collect();
    assert!(gradient_issues.is_empty(), "{gradient_issues:#?}");
    Ok(())
}

#[test]
fn probed_constructors_cover_candle_nn_layers() -> Result<(), Box<dyn std::error::Error>> {
    use candle_nn::rnn::RNN;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let profiler = ProfileRun::inference("layers", 1).start(&path)?;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let dev = Device::Cpu;
    let conv1 = nn::conv1d(2, 3, 3, Default::default(), vb.pp("c1"))?;
    let convt1 = nn::conv_transpose1d(3, 2, 3, Default::default(), vb.pp("ct1"))?;
    let conv2 = nn::conv2d(2, 3, 3, Default::default(), vb.pp("c2"))?;
    let convt2 = nn::conv_transpose2d(3, 2, 3, Default::default(), vb.pp("ct2"))?;
    let pool = nn::max_pool2d(2);
    let avg = nn::avg_pool2d(2);
    let bn = nn::batch_norm(2, 1e-5, vb.pp("bn"))?;
    let ln = nn::layer_norm(4, 1e-5, vb.pp("ln"))?;
    let rms = nn::rms_norm(4, 1e-5, vb.pp("rms"))?;
    let emb = nn::embedding(10, 4, vb.pp("emb"))?;
    let lstm = nn::lstm(4, 5, Default::default(), vb.pp("lstm"))?;
    let gru = nn::gru(4, 5, Default::default(), vb.pp("gru"))?;
    let drop = nn::dropout(0.5);
    {
        let _step = profiler.step(1);
        let x1 = Tensor::ones((1, 2, 8), DType::F32, &dev)?;
        convt1.forward(&conv1.forward(&x1)?)?;
        let x2 = Tensor::ones((1, 2, 8, 8), DType::F32, &dev)?;
        avg.forward(&pool.forward(&convt2.forward(&conv2.forward(&x2)?)?)?)?;
        bn.forward_t(&x2, false)?;
        let tokens = emb.forward(&Tensor::new(&[[1u32, 2, 3]], &dev)?)?; // (1, 3, 4)
        rms.forward_diff(&ln.forward(&tokens)?)?;
        lstm.seq(&tokens)?;
        gru.seq(&tokens)?;
        drop.forward_t(&tokens, true)?;
    }
    profiler.finish()?;
    let doc = trace_schema::load_path(&path)?;
    // Named by their VarBuilder path with the kind beside; pooling and dropout (no builder)
    // are named after their kind.
    let mut names: Vec<(&str, Option<&str>)> = doc
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Module)
        .map(|s| (doc.str(s.name), s.module_kind.map(|k| doc.str(k))))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            ("avg-pool2d", None),
            ("bn", Some("batch-norm")),
            ("c1", Some("conv1d")),
            ("c2", Some("conv2d")),
            ("ct1", Some("conv-transpose1d")),
            ("ct2", Some("conv-transpose2d")),
            ("dropout", None),
            ("emb", Some("embedding")),
            ("gru", Some("gru")),
            ("ln", Some("layer-norm")),
            ("lstm", Some("lstm")),
            ("max-pool2d", None),
            ("rms", Some("rms-norm")),
        ]
    );
    Ok(())
}

/// One thread's run for [`two_live_sessions_write_only_their_own_storages`]: a linear layer under
/// `name`, its optimizer built (its parameters registered), then a wait for the other thread
/// to have done the same before the three steps.
fn run_beside(
    name: &'static str,
    path: std::path::PathBuf,
    barrier: std::sync::Arc<std::sync::Barrier>,
) -> Result<TraceDocument, String> {
    let inner = || -> Result<TraceDocument, Box<dyn std::error::Error>> {
        let varmap = VarMap::new();
        let profiler = ProfileRun::training(name, 2).varmap(&varmap).start(&path)?;
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let fc = candle_nn::linear(common::IN, common::CLASSES, vb.pp(name))?;
        let mut opt = ProbedOptimizer::<SGD>::new(varmap.all_vars(), 0.05)?;
        barrier.wait();
        for step in 1..=3 {
            let (x, y) = common::batch(step)?;
            let _step = profiler.step(step);
            let l = loss::cross_entropy(&fc.forward(&x)?, &y)?;
            opt.backward_step(&l)?;
            // The two capture starts meet: each one's start is between the other's.
            barrier.wait();
        }
        profiler.finish()?;
        Ok(trace_schema::load_path(&path)?)
    };
    inner().map_err(|e| e.to_string())
}

/// Two profilers live at once on two threads (as these tests run): the storage registry is the
/// process's, yet each trace holds its own parameters only, each once.
#[test]
fn two_live_sessions_write_only_their_own_storages() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let (pa, pb) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    let b = barrier.clone();
    let other = std::thread::spawn(move || run_beside("beta", pb, b));
    let alpha = run_beside("alpha", pa, barrier)?;
    let beta = other.join().expect("the other thread")?;
    for (doc, own, foreign) in [(&alpha, "alpha", "beta"), (&beta, "beta", "alpha")] {
        let labels: Vec<&str> = doc
            .memory
            .iter()
            .filter(|m| m.pre_existing)
            .filter_map(|m| m.label.map(|l| doc.str(l)))
            .collect();
        assert!(
            labels.iter().all(|l| !l.starts_with(foreign)),
            "{own}: {labels:?}"
        );
        let mut params: Vec<&str> = labels
            .iter()
            .copied()
            .filter(|l| l.starts_with(own))
            .collect();
        params.sort_unstable();
        assert_eq!(
            params,
            [format!("{own}.bias"), format!("{own}.weight")],
            "{own}"
        );
        let analysis = trace_graph::analyze(doc);
        assert!(
            analysis.health.structurally_valid,
            "{own}: {:#?}",
            analysis.health.issues
        );
    }
    Ok(())
}
