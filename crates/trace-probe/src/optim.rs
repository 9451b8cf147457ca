//! [`ProbedOptimizer`]: any `candle_nn::Optimizer`, plus backward and optimizer spans and
//! gradient facts, with no user markers.

use candle_core::{Tensor, Var};
use candle_nn::{Optimizer, VarMap};
use trace_schema::{ExecutionStep, GradientContract};

use crate::error::ProbeError;
use crate::session::TraceSession;

/// The root under which VarMap parameters are named in gradient facts by default.
pub const DEFAULT_PARAMETER_ROOT: &str = "model";

/// `(root, key)` of every VarMap parameter, sorted by key: the manifest order of
/// [`GradientContract::all_active`]. Use it to build a contract for frozen parameters.
pub fn varmap_manifest(root: &str, varmap: &VarMap) -> Vec<(String, String)> {
    sorted_vars(varmap)
        .into_iter()
        .map(|(key, _)| (root.to_string(), key))
        .collect()
}

fn sorted_vars(varmap: &VarMap) -> Vec<(String, Var)> {
    let data = varmap
        .data()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut vars: Vec<(String, Var)> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars
}

/// Wraps an optimizer `O`, built from the session, the `VarMap` and `O`'s config
/// (`Optimizer::new` receives no names, so a pure drop-in could not name parameters).
///
/// - [`ProbedOptimizer::backward_step`] runs `loss.backward()` in a `backward` span, records a
///   gradient fact for every VarMap parameter and every non-parameter gradient, then runs
///   `O::step` in an `optimizer` span. Outside the captured step it is `O::backward_step` plus
///   one atomic load.
/// - Construction declares gradient coverage `complete` with
///   [`GradientContract::all_active`] over the sorted VarMap keys (one `active` family per
///   root, `min_present` = its member count), unless the run's contract carries a user gradient
///   contract (frozen parameters: build one from [`varmap_manifest`]).
/// - The inner optimizer is constructed inside the wrapper (`O::new(vars, config)`, vars in
///   sorted key order), so capture plug-ins can observe the state it allocates (AdamW's
///   moments).
///
/// ```
/// use candle_core::{DType, Device, Module, Tensor};
/// use candle_nn::{AdamW, ParamsAdamW, VarBuilder, VarMap};
/// use trace_probe::{ProbedOptimizer, ProfileRun, TraceSession};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let session = TraceSession::new(ProfileRun::training("demo", 1), std::io::sink())?;
/// let varmap = VarMap::new();
/// let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
/// let fc = candle_nn::linear(4, 2, vb.pp("fc"))?;
/// let mut opt = ProbedOptimizer::<AdamW>::new(&session, &varmap, ParamsAdamW::default())?;
/// let _step = session.step(1);
/// let loss = fc.forward(&Tensor::ones((3, 4), DType::F32, &Device::Cpu)?)?.sqr()?.mean_all()?;
/// opt.backward_step(&loss)?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ProbedOptimizer<O: Optimizer> {
    inner: O,
    session: TraceSession,
    root: String,
    params: Vec<(String, Var)>,
}

impl<O: Optimizer> ProbedOptimizer<O> {
    /// Builds `O` over every VarMap parameter, named under [`DEFAULT_PARAMETER_ROOT`].
    ///
    /// # Errors
    /// [`ProbeError::Candle`] when `O::new` fails; [`ProbeError::InvalidGradientContract`]
    /// (e.g. an empty VarMap).
    pub fn new(
        session: &TraceSession,
        varmap: &VarMap,
        config: O::Config,
    ) -> Result<Self, ProbeError> {
        Self::with_root(session, DEFAULT_PARAMETER_ROOT, varmap, config)
    }

    /// Like [`ProbedOptimizer::new`] with parameters named under `root`.
    ///
    /// # Errors
    /// As [`ProbedOptimizer::new`].
    pub fn with_root(
        session: &TraceSession,
        root: &str,
        varmap: &VarMap,
        config: O::Config,
    ) -> Result<Self, ProbeError> {
        let params = sorted_vars(varmap);
        let vars: Vec<Var> = params.iter().map(|(_, v)| v.clone()).collect();
        for hook in session.hooks() {
            hook.on_parameters(&params);
        }
        let inner = construct::<O>(session, vars, config)?;
        session.declare_gradient_contract(GradientContract::all_active(
            params.iter().map(|(k, _)| (root.to_string(), k.clone())),
        ))?;
        Ok(Self {
            inner,
            session: session.clone(),
            root: root.to_string(),
            params,
        })
    }

    /// `loss.backward()` then `O::step`, with `backward` and `optimizer` spans and gradient
    /// facts inside the captured step.
    ///
    /// A failure to compute gradient facts does not fail the step: it is kept and returned by
    /// [`TraceSession::finish`].
    ///
    /// # Errors
    /// Candle errors of `backward` or `step`.
    pub fn backward_step(&mut self, loss: &Tensor) -> candle_core::Result<()> {
        if !self.session.is_capturing() {
            return self.inner.backward_step(loss);
        }
        for hook in self.session.hooks() {
            hook.on_loss(&self.session.inner.hook_context(), loss);
        }
        let grads = {
            let _backward = self.session.step_span("backward", ExecutionStep::Backward);
            loss.backward()?
        };
        for hook in self.session.hooks() {
            hook.on_gradients(&self.session.inner.hook_context(), &grads);
        }
        if let Err(err) = self
            .session
            .gradient_facts(&self.root, &self.params, &grads)
        {
            self.session.inner.record_error(err);
        }
        let _optimizer = self
            .session
            .step_span("optimizer", ExecutionStep::Optimizer);
        self.inner.step(&grads)
    }

    /// `O::step` in an `optimizer` span, with gradient facts first (for loops that call
    /// `backward` themselves).
    ///
    /// # Errors
    /// Candle errors of `step`.
    pub fn step(&mut self, grads: &candle_core::backprop::GradStore) -> candle_core::Result<()> {
        if !self.session.is_capturing() {
            return self.inner.step(grads);
        }
        if let Err(err) = self.session.gradient_facts(&self.root, &self.params, grads) {
            self.session.inner.record_error(err);
        }
        let _optimizer = self
            .session
            .step_span("optimizer", ExecutionStep::Optimizer);
        self.inner.step(grads)
    }

    /// The inner optimizer.
    pub fn inner(&self) -> &O {
        &self.inner
    }

    /// The inner optimizer, mutably.
    pub fn inner_mut(&mut self) -> &mut O {
        &mut self.inner
    }

    /// `O::learning_rate`.
    pub fn learning_rate(&self) -> f64 {
        self.inner.learning_rate()
    }

    /// `O::set_learning_rate`.
    pub fn set_learning_rate(&mut self, lr: f64) {
        self.inner.set_learning_rate(lr)
    }

    /// The parameters, sorted by key.
    pub fn parameters(&self) -> &[(String, Var)] {
        &self.params
    }
}

/// Builds the inner optimizer, letting every capture plug-in wrap the construction (the
/// allocator plug-in arms itself around it to see the optimizer state allocated in `new`).
fn construct<O: Optimizer>(
    session: &TraceSession,
    vars: Vec<Var>,
    config: O::Config,
) -> Result<O, ProbeError> {
    let mut args = Some((vars, config));
    let mut built: Option<candle_core::Result<O>> = None;
    let mut build = || {
        if let Some((vars, config)) = args.take() {
            built = Some(O::new(vars, config));
        }
    };
    let hooks = session.hooks();
    match hooks {
        [] => build(),
        // Nest the plug-ins: the first wraps the second, and so on.
        [first, rest @ ..] => nest(first, rest, &mut build),
    }
    match built {
        Some(result) => result.map_err(ProbeError::candle("constructing the inner optimizer")),
        None => Err(ProbeError::Candle {
            context: "constructing the inner optimizer",
            source: candle_core::Error::Msg(
                "a capture plug-in did not run the optimizer construction".to_string(),
            ),
        }),
    }
}

fn nest(
    first: &std::sync::Arc<dyn crate::capture::CaptureHook>,
    rest: &[std::sync::Arc<dyn crate::capture::CaptureHook>],
    build: &mut dyn FnMut(),
) {
    match rest {
        [] => first.around_optimizer_construction(build),
        [next, tail @ ..] => first.around_optimizer_construction(&mut || nest(next, tail, build)),
    }
}
