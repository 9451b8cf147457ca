//! Part 2 on the MLP: the optimizer wrapper marks backward and optimizer spans and records
//! gradient facts without user markers; probed modules record module spans.

mod common;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{loss, AdamW, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::{
    probed, varmap_manifest, CaptureContract, CoverageLevel, ExecutionStep, GradientContract,
    ProbedOptimizer, ProfileRun, SpanKind, TraceSession, NON_PARAMETER_ROOT,
};
use trace_schema::{ExpectedGradient, GradientExpectation, GradientFamilyContract, GradientState};

struct ProbedMlp {
    fc1: trace_probe::Probed<candle_nn::Linear>,
    fc2: trace_probe::Probed<candle_nn::Linear>,
}

impl ProbedMlp {
    fn new(session: &TraceSession, varmap: &VarMap) -> candle_core::Result<Self> {
        let vb = VarBuilder::from_varmap(varmap, DType::F32, &Device::Cpu);
        let fc1 = probed::linear(session, common::IN, common::HIDDEN, vb.pp("fc1"))?;
        let fc2 = probed::linear(session, common::HIDDEN, common::CLASSES, vb.pp("fc2"))?;
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

fn train(
    session: &TraceSession,
    steps: u64,
    freeze_fc1: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let varmap = VarMap::new();
    let mlp = ProbedMlp::new(session, &varmap)?;
    common::reseed(&varmap, 5)?;
    let mut opt = ProbedOptimizer::<AdamW>::new(session, &varmap, ParamsAdamW::default())?;
    for step in 1..=steps {
        let (x, y) = common::batch(step)?;
        let _step = session.step(step);
        session.tensor("batch.x", &x);
        let logits = {
            let _fwd = session.step_span("forward", ExecutionStep::Forward);
            mlp.forward(&x, freeze_fc1)?
        };
        let l = loss::cross_entropy(&logits, &y)?;
        opt.backward_step(&l)?;
    }
    Ok(())
}

#[test]
fn optimizer_wrapper_records_phases_and_gradients() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let session = TraceSession::create(ProfileRun::training("mlp::train_step", 2), &path)?;
    train(&session, 3, false)?;
    session.finish()?;
    let doc = trace_schema::load_path(&path)?;
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);

    for step in [
        ExecutionStep::Forward,
        ExecutionStep::Backward,
        ExecutionStep::Optimizer,
    ] {
        assert_eq!(
            doc.spans.iter().filter(|s| s.pass == Some(step)).count(),
            1,
            "{step:?}"
        );
    }
    let modules: Vec<_> = doc
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Module)
        .collect();
    assert_eq!(modules.len(), 2);
    let paths: Vec<&str> = modules
        .iter()
        .map(|s| doc.str(s.module_path.expect("module path")))
        .collect();
    assert_eq!(paths, ["fc1", "fc2"]);
    assert!(modules.iter().all(|s| s.instance_key.is_some()));

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
    let others: Vec<_> = doc.gradients.iter().filter(|g| !g.parameter).collect();
    let batch_grad = others
        .iter()
        .find(|g| g.tensor_id.as_deref() == Some(doc.str(batch_fact.tensor_id)))
        .expect("the input batch has a non-parameter gradient");
    assert_eq!(batch_grad.root, NON_PARAMETER_ROOT);
    assert_eq!(batch_grad.key, "batch.x");
    assert_eq!(
        batch_grad.bytes,
        Some((common::BATCH * common::IN * 4) as u64)
    );

    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.health.structurally_valid,
        "{:#?}",
        analysis.health.issues
    );
    assert_eq!(analysis.gradients.counts.present, 4);
    assert!(analysis.gradients.without_gradient.is_empty());
    assert!(!analysis.gradients.non_parameter.is_empty());
    Ok(())
}

#[test]
fn frozen_parameters_with_a_user_contract_raise_no_warning(
) -> Result<(), Box<dyn std::error::Error>> {
    // fc1 is frozen (its output is detached): its family is declared inactive.
    let varmap_for_names = VarMap::new();
    let session_probe = TraceSession::new(ProfileRun::training("names", 1), std::io::sink())?;
    ProbedMlp::new(&session_probe, &varmap_for_names)?;
    let _ = session_probe.finish();
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
    let run = ProfileRun::training("mlp::frozen", 1).capture_contract(contract.clone());
    let session = TraceSession::create(run, &path)?;
    train(&session, 1, true)?;
    session.finish()?;
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
fn probed_module_t_records_one_span_per_forward() -> Result<(), Box<dyn std::error::Error>> {
    use candle_core::ModuleT;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let session = TraceSession::create(ProfileRun::inference("dropout", 1), &path)?;
    let dropout = trace_probe::ProbedT::new(&session, "dropout", candle_nn::Dropout::new(0.5));
    let (x, _) = common::batch(9)?;
    {
        let _step = session.step(1);
        let y = dropout.forward_t(&x, false)?;
        assert_eq!(y.dims(), x.dims());
        dropout.forward_t(&x, true)?;
    }
    session.finish()?;
    let doc = trace_schema::load_path(&path)?;
    let spans: Vec<_> = doc
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Module)
        .collect();
    assert_eq!(spans.len(), 2);
    assert!(spans
        .iter()
        .all(|s| s.module_path.map(|p| doc.str(p)) == Some("dropout")));
    assert_eq!(spans[0].instance_key, spans[1].instance_key);
    Ok(())
}
