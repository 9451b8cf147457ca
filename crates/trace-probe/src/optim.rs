//! [`ProbedOptimizer`]: any `candle_nn::Optimizer`, plus backward and optimizer passes and
//! gradient facts, with no user markers. A drop-in: it implements `Optimizer` itself.

use std::collections::HashMap;

use candle_core::backprop::GradStore;
use candle_core::{Tensor, TensorId, Var};
use candle_nn::{Optimizer, VarMap};
use trace_wire::{ExecutionStep as Pass, GradientContract};

use crate::error::ProbeError;
use crate::session::TraceSession;
use crate::tensor_id::tensor_number;

/// `(root, key)` of every VarMap parameter, sorted by key: the manifest order of
/// [`GradientContract::all_active`]. Use it to build a contract for frozen parameters.
pub fn varmap_manifest(root: &str, varmap: &VarMap) -> Vec<(String, String)> {
    let data = varmap.data().lock().unwrap_or_else(|e| e.into_inner());
    let mut keys: Vec<String> = data.keys().cloned().collect();
    keys.sort();
    keys.into_iter()
        .map(|key| (root.to_string(), key))
        .collect()
}

/// An optimizer `O` that reports to the running [`crate::Profiler`]: `O` with
/// `type Config = O::Config`, so `fn train<O: Optimizer>(..)` code and
/// `ProbedOptimizer::<AdamW>::new(varmap.all_vars(), config)` work unchanged.
///
/// - `new` (through `Optimizer::new`) finds the session of the live profiler started on this
///   thread (on another thread use [`ProbedOptimizer::for_session`]) and names each variable after its key in the
///   `VarMap` given to [`crate::ProfileRun::varmap`] (`unnamed/t<n>` otherwise); it declares
///   gradient coverage `complete` over those names ([`GradientContract::all_active`]) unless
///   the run carries a user gradient contract; it builds `O` itself, variables sorted by name,
///   so the storage capture sees the state `O` allocates (AdamW's moments). With no live
///   profiler it is plain `O`.
/// - [`Optimizer::backward_step`] closes the forward pass the step guard opened, runs
///   `loss.backward()` in a `backward` pass, records a gradient fact for every parameter and
///   every non-parameter gradient (in a capture of several steps, in its last step only), then
///   runs `O::step` in an `optimizer` pass.
///   [`Optimizer::step`] (for loops that call `backward` themselves) records the facts and runs
///   `O::step` in an `optimizer` pass. Outside the captured step each is `O`'s plus one atomic
///   load.
///
/// A failure to compute gradient facts does not fail the step: it is kept and returned by
/// [`TraceSession::finish`].
#[derive(Debug)]
pub struct ProbedOptimizer<O: Optimizer> {
    inner: O,
    probe: Option<Probe>,
}

#[derive(Debug)]
struct Probe {
    session: TraceSession,
    root: String,
    params: Vec<(String, Var)>,
}

impl<O: Optimizer> ProbedOptimizer<O> {
    /// Builds `O` over `vars` reporting to `session` (what `Optimizer::new` does with the
    /// live profiler's session).
    ///
    /// # Errors
    /// [`ProbeError::Candle`] when `O::new` fails.
    pub fn for_session(
        session: &TraceSession,
        vars: Vec<Var>,
        config: O::Config,
    ) -> Result<Self, ProbeError> {
        let (root, params) = named(session, vars);
        // The helper thread that computes the gradient facts beside the optimizer step,
        // started here, outside any captured step.
        crate::beside::start();
        session.announce_parameters(&params);
        let inner = construct::<O>(session, &params, config)?;
        if !params.is_empty() {
            session.declare_gradient_contract(GradientContract::all_active(
                params.iter().map(|(k, _)| (root.clone(), k.clone())),
            ))?;
        }
        Ok(Self {
            inner,
            probe: Some(Probe {
                session: session.clone(),
                root,
                params,
            }),
        })
    }

    /// The inner optimizer.
    pub fn inner(&self) -> &O {
        &self.inner
    }

    /// The inner optimizer, mutably.
    pub fn inner_mut(&mut self) -> &mut O {
        &mut self.inner
    }

    /// The inner optimizer, consuming the wrapper.
    pub fn into_inner(self) -> O {
        self.inner
    }

    /// The parameters as named in gradient facts, sorted by name (empty without a profiler).
    pub fn parameters(&self) -> &[(String, Var)] {
        self.probe.as_ref().map_or(&[], |p| p.params.as_slice())
    }

    /// `session`: the probe's session as resolved for this step (a scheduled profiler's open
    /// capture session).
    fn facts_and_step(
        probe: &Probe,
        session: &TraceSession,
        inner: &mut O,
        grads: &GradStore,
    ) -> candle_core::Result<()> {
        // One fact per parameter: a capture of several steps records the last step's. On the
        // CPU they are computed on the helper thread while the optimizer steps (it only reads
        // the gradients) and joined after the step, while `grads` is still held.
        let last = session.inner.in_last_captured_step();
        let beside = if last {
            session.gradient_facts_beside(&probe.params, grads)
        } else {
            None
        };
        if last && beside.is_none() {
            if let Err(err) = session.gradient_facts(&probe.root, &probe.params, grads) {
                session.inner.record_error(err);
            }
        }
        let stepped = {
            let _optimizer = session.pass(Pass::Optimizer);
            inner.step(grads)
        };
        if let Some(beside) = beside {
            if let Err(err) =
                session.gradient_facts_joined(&probe.root, &probe.params, grads, beside)
            {
                session.inner.record_error(err);
            }
        }
        stepped
    }
}

impl<O: Optimizer> Optimizer for ProbedOptimizer<O> {
    type Config = O::Config;

    fn new(vars: Vec<Var>, config: O::Config) -> candle_core::Result<Self> {
        match crate::profiler::active::current() {
            Some(session) => Ok(Self::for_session(&session, vars, config)?),
            None => Ok(Self {
                inner: O::new(vars, config)?,
                probe: None,
            }),
        }
    }

    fn step(&mut self, grads: &GradStore) -> candle_core::Result<()> {
        match &self.probe {
            Some(probe) if probe.session.is_capturing() => {
                let session = probe.session.current_session();
                for plugin in &session.inner.plugins {
                    plugin.on_gradients(&session.inner.plugin_context(), grads);
                }
                Self::facts_and_step(probe, &session, &mut self.inner, grads)
            }
            _ => self.inner.step(grads),
        }
    }

    fn backward_step(&mut self, loss: &Tensor) -> candle_core::Result<()> {
        let probe = match &self.probe {
            Some(probe) if probe.session.is_capturing() => probe,
            _ => return self.inner.backward_step(loss),
        };
        let session = &probe.session.current_session();
        for plugin in &session.inner.plugins {
            plugin.on_loss(&session.inner.plugin_context(), loss);
        }
        let grads = {
            let _backward = session.pass(Pass::Backward);
            let grads = loss.backward();
            // The backward call returned: backward module spans still open end here, exactly.
            for plugin in &session.inner.plugins {
                plugin.on_backward_end(true);
            }
            grads?
        };
        for plugin in &session.inner.plugins {
            plugin.on_gradients(&session.inner.plugin_context(), &grads);
        }
        Self::facts_and_step(probe, session, &mut self.inner, &grads)
    }

    fn learning_rate(&self) -> f64 {
        self.inner.learning_rate()
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.inner.set_learning_rate(lr)
    }
}

/// The parameter root and every variable named (VarMap key, else `unnamed/t<n>`), sorted:
/// named ones by name, then unnamed ones in creation order.
fn named(session: &TraceSession, vars: Vec<Var>) -> (String, Vec<(String, Var)>) {
    let (root, keys): (String, HashMap<TensorId, String>) = match &session.run().parameters {
        Some(p) => {
            let data = p.varmap.data().lock().unwrap_or_else(|e| e.into_inner());
            let keys = data.iter().map(|(k, v)| (v.id(), k.clone())).collect();
            (p.root.clone(), keys)
        }
        None => (
            crate::run::DEFAULT_PARAMETER_ROOT.to_string(),
            HashMap::new(),
        ),
    };
    let mut named: Vec<(String, Var)> = Vec::new();
    let mut unnamed: Vec<Var> = Vec::new();
    for var in vars {
        match keys.get(&var.id()) {
            Some(key) => named.push((key.clone(), var)),
            None => unnamed.push(var),
        }
    }
    named.sort_by(|a, b| a.0.cmp(&b.0));
    unnamed.sort_by_key(|v| tensor_number(v.id()));
    for var in unnamed {
        let id = session.inner.ids.tensor_wire_id(var.id());
        named.push((format!("unnamed/{id}"), var));
    }
    (root, named)
}

/// Builds the inner optimizer over `params`' variables (in that order), letting every capture
/// plug-in wrap the construction (the storage plug-in arms the allocator around it to see the
/// optimizer state allocated in `new`, tied to `params` by `O`'s known state layout).
fn construct<O: Optimizer>(
    session: &TraceSession,
    params: &[(String, Var)],
    config: O::Config,
) -> Result<O, ProbeError> {
    let vars: Vec<Var> = params.iter().map(|(_, v)| v.clone()).collect();
    let layout = crate::optim_state::state_layout::<O>(params);
    let mut args = Some((vars, config));
    let mut built: Option<candle_core::Result<O>> = None;
    let mut build = || {
        if let Some((vars, config)) = args.take() {
            built = Some(O::new(vars, config));
        }
    };
    match &*session.plugins() {
        [] => build(),
        // Nest the plug-ins: the first wraps the second, and so on.
        [first, rest @ ..] => nest(first, rest, layout.as_deref(), &mut build),
    }
    match built {
        Some(result) => result.map_err(ProbeError::candle("constructing the inner optimizer")),
        None => Err(ProbeError::PluginSkippedConstruction),
    }
}

fn nest(
    first: &std::sync::Arc<dyn crate::session::plugin::CapturePlugin>,
    rest: &[std::sync::Arc<dyn crate::session::plugin::CapturePlugin>],
    layout: Option<&[crate::optim_state::StateSlot]>,
    build: &mut dyn FnMut(),
) {
    match rest {
        [] => first.around_optimizer_construction(layout, build),
        [next, tail @ ..] => {
            first.around_optimizer_construction(layout, &mut || nest(next, tail, layout, build))
        }
    }
}
