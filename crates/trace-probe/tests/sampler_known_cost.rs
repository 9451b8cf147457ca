//! The known-cost test (issue 27 §4): a Candle step of three ops — a large `matmul`, an `exp`, a
//! `sum_keepdim`, each repeated to ≈ 100 ms — sampled by the wall-clock sampler at 4 kHz, each
//! op's block also timed by a clock inside that sampled step. Each op's sampled share of the
//! three ops' samples must lie within its 95% Wilson score interval of the clock's share of the
//! same blocks, widened on each side by the run-to-run spread (max − min) of the clock shares
//! of the same ops timed alone before and after the step (the drift of the machine, measured).
//!
//! Why the clock inside the step: the captured, sampled step is not the same workload as the
//! ops timed alone — measured here, `matmul` takes ≈ 0.47 of the three inside the captured step
//! against ≈ 0.33 alone — so comparing with the rounds outside it failed on a quiet machine
//! (`sum_keepdim` 0.377 sampled against 0.332 alone, spread 0.007) although the samples matched
//! the step they sampled. The Wilson interval covers the sampling error of the count; the
//! spread, the drift of the clock between blocks. `RAYON_NUM_THREADS=1` keeps every op on the
//! sampled thread.
//!
//! Why the thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`) and not the wall clock: while the
//! sampled thread is off the CPU (another job on a shared machine), the timer's expirations merge
//! into the one signal delivered when it runs again (`si_overrun`, counted as lost), so the
//! samples see the time the thread ran. A block preempted for a while is longer on the wall
//! clock and not in the samples: that failed once in CI (`sum_keepdim` 0.348 sampled, 95%
//! 0.323–0.373, against a wall-clock share of 0.378 inside the step and ≈ 0.33 in the rounds).
//!
//! Samples are classified by trace-ops' rules (`trace_ops::classify_stack`: the outermost op
//! frame, what the step called); samples in none of the three (the loop, the probe) are left out
//! of the shares.
//! The Candle test is the only one in this binary that runs Candle: it sets `RAYON_NUM_THREADS`
//! before Candle reads it.
//!
//! The tracking allocator is installed, as the quick start does, so the handler walks frame
//! pointers (the walker calibration needs the hook) — also inside libm's `expf` and libc's
//! `memset`, where the handler's cost must be the same as in Rust code or the ops in the C
//! libraries would be over-sampled (measured: ≈ 40 µs a sample there by libgcc, 0.2 µs by frame
//! pointers elsewhere, exp's share 0.397 against the clock's 0.307).

// The sampler runs on Linux x86_64 / aarch64 only (cfg `stack_sampler`, set by build.rs);
// elsewhere `sampler::tests` checks the declared reason.
#![cfg(stack_sampler)]

mod common;

use std::time::Instant;

use candle_core::{Device, Tensor};
use trace_probe::{ProfileRun, TerminalOutcome, TraceSession, Tracking};

#[global_allocator]
static ALLOC: Tracking = Tracking::system();
use trace_schema::TraceDocument;

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_964;

/// The ops, as named by their frames.
const OPS: [&str; 3] = ["matmul", "exp", "sum_keepdim"];

struct Inputs {
    a: Tensor,
    b: Tensor,
    x: Tensor,
}

/// Runs op `i` `reps` times.
fn run_op(inputs: &Inputs, i: usize, reps: usize) -> candle_core::Result<()> {
    for _ in 0..reps {
        let out = match i {
            0 => inputs.a.matmul(&inputs.b)?,
            1 => inputs.x.exp()?,
            _ => inputs.x.sum_keepdim(1)?,
        };
        std::hint::black_box(out);
    }
    Ok(())
}

fn time_op(inputs: &Inputs, i: usize, reps: usize) -> candle_core::Result<f64> {
    let t = thread_cpu_s();
    run_op(inputs, i, reps)?;
    Ok(thread_cpu_s() - t)
}

/// The calling thread's CPU time, in seconds.
fn thread_cpu_s() -> f64 {
    // SAFETY: a valid out-pointer.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Wilson score interval of `k` successes in `n` trials.
fn wilson(k: usize, n: usize, z: f64) -> (f64, f64) {
    let n = n as f64;
    let p = k as f64 / n;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    (centre - half, centre + half)
}

/// The op (index into [`OPS`]) of a sample, by trace-ops' stack-to-op rules.
fn classify(doc: &TraceDocument, stack: u32) -> Option<usize> {
    let frames: Vec<_> = doc.samples.stack_frames(stack).collect();
    let class = trace_ops::classify_stack(&frames);
    (class.kind == trace_ops::OpKind::Op)
        .then(|| OPS.iter().position(|o| *o == class.op))
        .flatten()
}

#[test]
fn sampled_shares_match_the_clock() -> Result<(), Box<dyn std::error::Error>> {
    std::env::set_var("RAYON_NUM_THREADS", "1");
    let inputs = Inputs {
        a: Tensor::randn(0f32, 1.0, (256, 256), &Device::Cpu)?,
        b: Tensor::randn(0f32, 1.0, (256, 256), &Device::Cpu)?,
        x: Tensor::randn(0f32, 1.0, (512, 1024), &Device::Cpu)?,
    };
    // Repetitions that make each op last about 100 ms (after a warm-up).
    let mut reps = [0usize; 3];
    for (i, r) in reps.iter_mut().enumerate() {
        run_op(&inputs, i, 2)?;
        let started = Instant::now();
        let mut count = 0usize;
        while started.elapsed().as_secs_f64() < 0.02 {
            run_op(&inputs, i, 1)?;
            count += 1;
        }
        let one = started.elapsed().as_secs_f64() / count as f64;
        *r = ((0.1 / one.max(1e-6)).round() as usize).clamp(1, 100_000);
    }
    // Clock-measured shares, rounds before and after the sampled step, ops interleaved.
    let mut shares: Vec<[f64; 3]> = Vec::new();
    let mut round = || -> candle_core::Result<()> {
        let t: Vec<f64> = (0..3)
            .map(|i| time_op(&inputs, i, reps[i]))
            .collect::<candle_core::Result<_>>()?;
        let total: f64 = t.iter().sum();
        shares.push([t[0] / total, t[1] / total, t[2] / total]);
        Ok(())
    };
    round()?;
    round()?;

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    // Each op's block timed by the clock inside the sampled step too: the shares the samples
    // must reproduce are those of this very run (the rounds outside it measure the drift).
    let mut in_step = [0f64; 3];
    let session =
        TraceSession::create(ProfileRun::training("known_cost", 1).sample_hz(4000), &path)?;
    {
        let _step = session.step(1);
        for (i, &r) in reps.iter().enumerate() {
            in_step[i] = time_op(&inputs, i, r)?;
        }
    }
    assert_eq!(session.finish()?.outcome, TerminalOutcome::Complete);

    round()?;
    round()?;

    let doc = trace_schema::load_path(&path)?;
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    let sampler = common::sampling::check_samples(&doc);
    // This workspace builds with frame pointers (.cargo/config.toml).
    assert!(
        sampler.unwinder.starts_with("frame_pointers"),
        "{}",
        sampler.unwinder
    );
    let stats = trace_sampler::stats();
    eprintln!(
        "{} samples, {} by frame pointers, {:.2} µs per sample in the handler",
        stats.samples,
        stats.frame_pointer_samples,
        stats.handler_ns as f64 / stats.samples.max(1) as f64 * 1e-3
    );
    let mut counts = [0usize; 3];
    let mut other = 0usize;
    for s in &doc.samples.samples {
        match classify(&doc, s.stack) {
            Some(i) => counts[i] += 1,
            None => other += 1,
        }
    }
    let n: usize = counts.iter().sum();
    assert!(n >= 100, "{n} classified samples ({other} outside the ops)");
    // The ops are nearly the whole step.
    assert!(
        other * 10 < n,
        "{other} samples outside the three ops of {n}"
    );
    for i in 0..3 {
        let clock: Vec<f64> = shares.iter().map(|s| s[i]).collect();
        let truth = in_step[i] / in_step.iter().sum::<f64>();
        let spread = clock.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            - clock.iter().copied().fold(f64::INFINITY, f64::min);
        let (lo, hi) = wilson(counts[i], n, Z95);
        let sampled = counts[i] as f64 / n as f64;
        eprintln!(
            "{}: sampled {sampled:.3} (95% {lo:.3}–{hi:.3}, {} of {n}) clock {truth:.3} ± spread {spread:.3}",
            OPS[i], counts[i]
        );
        assert!(
            lo - spread <= truth && truth <= hi + spread,
            "{}: sampled share {sampled:.3} (95% {lo:.3}–{hi:.3}, {} of {n}, widened by {spread:.3}) \
             vs clock {truth:.3} (rounds {shares:?})",
            OPS[i],
            counts[i]
        );
    }
    Ok(())
}

#[test]
fn the_wilson_interval_is_the_textbook_one() {
    // Agresti & Coull's example figures: 0 of 10 → (0, 0.278); 5 of 10 → (0.237, 0.763).
    let (lo, hi) = wilson(0, 10, Z95);
    assert!(lo.abs() < 1e-12 && (hi - 0.2775).abs() < 1e-3, "{lo} {hi}");
    let (lo, hi) = wilson(5, 10, Z95);
    assert!(
        (lo - 0.2366).abs() < 1e-3 && (hi - 0.7634).abs() < 1e-3,
        "{lo} {hi}"
    );
}
