//! The phases of a trace in order: the start, each pass (or step) and its module spans, the
//! gradient facts and the end.

use trace_schema::*;

use super::*;

impl SynthEvents {
    pub(super) fn start(&mut self) {
        let params: Vec<(String, String)> = (0..self.config.parameters)
            .map(|p| ("model".to_string(), self.param_name(p)))
            .collect();
        let gradient_contract =
            (!params.is_empty()).then(|| GradientContract::all_active(params.clone()));
        let contract = CaptureContract {
            measurement_scope: MeasurementScope::ProfiledWork,
            operations: CoverageLevel::Complete,
            tensors: CoverageLevel::None,
            gradients: if gradient_contract.is_some() {
                CoverageLevel::Complete
            } else {
                CoverageLevel::None
            },
            logical_memory: CoverageLevel::Complete,
            physical_memory: CoverageLevel::Partial,
            device_timing: CoverageLevel::None,
            tensor_stats: CoverageLevel::Partial,
            gradient_contract,
            required_semantic_labels: vec![
                "forward".to_string(),
                "backward".to_string(),
                "optimizer".to_string(),
            ],
            reasons: [(
                ContractField::PhysicalMemory.into(),
                "sampled at span starts only".to_string(),
            )]
            .into_iter()
            .collect(),
        };
        let run = RunMeta {
            run_id: format!("synth-{}", self.config.seed),
            correlation_id: Some("synth/update-2".to_string()),
            entrypoint: "synth::train_step".to_string(),
            phase: Some(ExecutionPhase::Train),
            timestamp: "2026-01-01T00:00:00.000Z".to_string(),
            capture_step: Some(2),
            warmup_steps: Some(1),
            device: Some(self.devices[0].clone()),
            measured_region_device_synchronized: self.devices.len() > 1,
            timing_mode: Some(TimingMode::Host),
            capture_contract: Some(contract),
            comparison_identity: None,
            tags: [("generator".to_string(), "trace_synth".to_string())]
                .into_iter()
                .collect(),
            candle_version: Some("0.11.1".to_string()),
            probe_version: Some(env!("CARGO_PKG_VERSION").to_string()),
            tracking_allocator_installed: Some(true),
            host: Some(HostInfo {
                os: Some("linux".to_string()),
                arch: Some("x86_64".to_string()),
                cpu_count: Some(16),
                memory_bytes: Some(64 << 30),
            }),
            rank: None,
            local_rank: None,
            world_size: None,
            last_capture_step: self
                .multi_step()
                .then(|| self.config.steps.saturating_add(1)),
        };
        self.queue.push_back(TraceEvent::Meta(MetaEvent {
            schema: WRITE_VERSION.as_str().to_string(),
            run,
        }));
        self.open_span(
            "train_step".to_string(),
            SpanKind::Function,
            0,
            None,
            None,
            SpanRole::Root,
        );
        let params = self.config.parameters.min(self.config.memory_events);
        let accelerators = self.accelerators();
        for p in 0..params {
            self.current_device = (p * accelerators / params.max(1)) as u8;
            let live = Live {
                device: self.current_device,
                slot: self.next_slot[self.current_device as usize],
                generation: 0,
                bytes: trace_schema::dense_bytes(SHAPES[2 + (p % 2) as usize], "f32").unwrap_or(4),
                tensor: self.new_tensor(),
                category: MemoryCategory::Parameter,
                allocator_only: false,
            };
            self.next_slot[self.current_device as usize] += 1;
            let label = Some(format!("model/{}", self.param_name(p)));
            self.emit_alloc(&live, 2 + (p % 2) as usize, 0, label, true);
        }
        self.current_device = 0;
    }

    pub(super) fn begin_phase(&mut self, phase: Phase) {
        self.phase = phase;
        self.visit = 0;
        self.block = 0;
        let name = match phase {
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            _ => "optimizer",
        };
        self.open_span(
            name.to_string(),
            SpanKind::Function,
            1,
            Some(phase.step()),
            None,
            SpanRole::Inner,
        );
        let i = phase.index();
        self.pass_memory_left = self.memory[i];
        if self.module_spans[i] == 0 {
            // No module spans: the step span holds the phase's work.
            self.work(self.ops[i], self.memory[i]);
        }
    }

    /// Opens the next module span of the phase (closing finished siblings), does its work.
    pub(super) fn module_visit(&mut self) {
        let i = self.phase.index();
        let (template, kind): (&[(u32, &str)], SpanKind) = match self.phase {
            Phase::Forward => (FORWARD_BLOCK, SpanKind::Module),
            Phase::Backward => (BACKWARD_BLOCK, SpanKind::Function),
            _ => (OPTIMIZER_BLOCK, SpanKind::Function),
        };
        let pos = (self.visit % template.len() as u64) as usize;
        if pos == 0 && self.visit > 0 {
            self.block += 1;
        }
        let (rel_depth, pattern) = template[pos];
        let depth = 1 + rel_depth;
        while self.stack.last().is_some_and(|s| s.depth >= depth) {
            self.close_span();
        }
        let blocks = self.module_spans[i].div_ceil(template.len() as u64).max(1);
        let layer = match self.phase {
            Phase::Backward => blocks - 1 - self.block,
            _ => self.block,
        };
        self.current_device = (layer % self.accelerators()) as u8;
        let name = pattern.replace("{}", &layer.to_string());
        let module_path = (self.phase == Phase::Forward).then(|| {
            let mut path = String::from("model");
            // Reconstruct the path from the template: the enclosing entries at lower depths.
            let mut want = rel_depth;
            let mut parts = vec![name.clone()];
            for &(d, p) in template[..pos].iter().rev() {
                if d < want {
                    parts.push(p.replace("{}", &layer.to_string()));
                    want = d;
                }
            }
            for part in parts.iter().rev() {
                path.push('/');
                path.push_str(part);
            }
            path
        });
        self.open_span(
            name,
            kind,
            depth,
            Some(self.phase.step()),
            module_path,
            SpanRole::Inner,
        );
        let ops = share(self.ops[i], self.module_spans[i], self.visit);
        let memory = share(self.memory[i], self.module_spans[i], self.visit);
        self.work(ops, memory);
        self.visit += 1;
    }

    pub(super) fn multi_step(&self) -> bool {
        self.config.steps > 1
    }

    pub(super) fn last_step(&self) -> bool {
        self.step_no + 1 >= self.config.steps
    }

    /// Sets the current step's budgets and, in a multi-step capture, opens its `step <n>` span
    /// (n from 2, as a capture from step 2 numbers them).
    pub(super) fn begin_step(&mut self) {
        let steps = self.config.steps.max(1);
        for i in 0..3 {
            self.module_spans[i] = share(self.total_module_spans[i], steps, self.step_no);
            self.ops[i] = share(self.total_ops[i], steps, self.step_no);
            self.memory[i] = share(self.total_memory[i], steps, self.step_no);
        }
        if self.multi_step() {
            let n = 2 + self.step_no;
            self.open_span(
                format!("step {n}"),
                SpanKind::Function,
                1,
                None,
                None,
                SpanRole::Step(n),
            );
        }
    }

    pub(super) fn end_phase(&mut self) {
        let pass_depth = if self.multi_step() { 3 } else { 2 };
        while self.stack.len() > pass_depth {
            self.close_span();
        }
        if self.phase == Phase::Backward && self.last_step() {
            self.gradient_facts();
        }
        self.close_span();
        self.phase = match self.phase {
            Phase::Forward => Phase::Backward,
            Phase::Backward => Phase::Optimizer,
            _ if self.multi_step() => {
                self.close_span();
                if self.last_step() {
                    Phase::Finish
                } else {
                    self.step_no += 1;
                    self.begin_step();
                    Phase::Forward
                }
            }
            _ => Phase::Finish,
        };
    }

    pub(super) fn gradient_facts(&mut self) {
        for p in 0..self.config.parameters {
            let roll = self.rng.below(100);
            let (state, norm) = match roll {
                0..=1 => (GradientState::Missing, None),
                2 => (GradientState::Zero, Some(0.0)),
                _ => (
                    GradientState::Present,
                    Some(0.001 + (self.rng.below(1_000_000) as f64) / 1e5),
                ),
            };
            self.queue.push_back(TraceEvent::Gradient(GradientEvent {
                event_id: format!("gradient-{}", p + 1),
                root: "model".to_string(),
                key: self.param_name(p),
                state,
                norm,
                parameter: true,
                tensor_id: None,
                bytes: None,
                non_finite_elements: (state != GradientState::Missing).then_some(0),
            }));
        }
    }

    pub(super) fn finish(&mut self) {
        self.queue
            .push_back(TraceEvent::TensorStats(TensorStatsEvent {
                span_id: "s1".to_string(),
                label: "loss".to_string(),
                shape: vec![],
                dtype: "f32".to_string(),
                elements: 1,
                non_finite: 0,
                rms: Some(2.5),
                abs_max: Some(2.5),
                mean: Some(2.5),
                min: Some(2.5),
                max: Some(2.5),
            }));
        self.close_span();
        let timestamp_ns = self.tick(10);
        self.queue.push_back(TraceEvent::Terminal(TerminalEvent {
            coverage_lost: Default::default(),
            outcome: TerminalOutcome::Complete,
            timestamp_ns,
            reason: None,
            dropped_events: Some(0),
        }));
    }

    /// Advances the state machine by one step, filling the queue.
    pub(super) fn step(&mut self) {
        match self.phase {
            Phase::Start => {
                self.start();
                self.begin_step();
                self.begin_phase(Phase::Forward);
            }
            Phase::Forward | Phase::Backward | Phase::Optimizer => {
                let i = self.phase.index();
                if self.visit < self.module_spans[i] {
                    self.module_visit();
                } else {
                    self.end_phase();
                    if self.phase != Phase::Finish {
                        self.begin_phase(self.phase);
                    }
                }
            }
            Phase::Finish => {
                self.finish();
                self.phase = Phase::Done;
            }
            Phase::Done => {}
        }
    }
}
