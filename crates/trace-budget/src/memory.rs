//! The memory budgets: the peak, a pass's peak, a category at the peak, the optimizer's
//! temporaries, and growth across steps (leaks). Every figure is exact (the tracking
//! allocator's storage lifetimes), so a memory budget is compared as is.

use std::fmt::Write as _;

use trace_format::{bytes, escape};
use trace_schema::{MemoryCategory, Pass};

use crate::budget::Budget;
use crate::figures::Figures;
use crate::outcome::{fail, held_lines, over_bytes, pass, unknown, Checked};

/// Where the peak is: ` in the optimizer pass (llama::train_step/optimizer)`.
fn peak_place(figures: &Figures) -> String {
    let Some(p) = &figures.peak else {
        return String::new();
    };
    let mut s = String::new();
    if let Some(pass) = p.pass {
        let _ = write!(s, ", in the {} pass", pass.as_str());
    }
    if let Some(path) = &p.span_path {
        let _ = write!(s, " ({})", trace_format::path_cell(path, 80));
    }
    s
}

pub(crate) fn peak(budget: &Budget, figures: &Figures, max: u64) -> Checked {
    let Some(p) = &figures.peak else {
        return unknown(budget, "the trace has no memory peak".into());
    };
    let figure = bytes(p.live_bytes);
    if p.live_bytes <= max {
        return pass(budget, figure);
    }
    let mut msg = format!(
        "peak {}{}",
        over_bytes(p.live_bytes, max),
        peak_place(figures)
    );
    let cats: Vec<String> = p
        .by_category
        .iter()
        .filter(|(_, &b)| b > 0)
        .map(|(c, &b)| format!("{} {}", c.as_str(), bytes(b)))
        .collect();
    if !cats.is_empty() {
        let _ = write!(msg, "\n  by category: {}", cats.join(" · "));
    }
    held_lines(&mut msg, figures);
    fail(budget, figure, msg)
}

pub(crate) fn pass_peak(budget: &Budget, figures: &Figures, which: Pass, max: u64) -> Checked {
    let Some(b) = figures.headline.pass_peak_bytes.get(&which).copied() else {
        return unknown(budget, format!("the trace has no {} pass", which.as_str()));
    };
    let figure = bytes(b);
    if b <= max {
        return pass(budget, figure);
    }
    let mut msg = format!("{} pass peak {}", which.as_str(), over_bytes(b, max));
    if figures.peak.as_ref().and_then(|p| p.pass) == Some(which) {
        let _ = write!(msg, " (the run's peak{})", peak_place(figures));
        held_lines(&mut msg, figures);
    }
    fail(budget, figure, msg)
}

pub(crate) fn category(
    budget: &Budget,
    figures: &Figures,
    category: MemoryCategory,
    max: u64,
) -> Checked {
    let Some(p) = &figures.peak else {
        return unknown(budget, "the trace has no memory peak".into());
    };
    // a category with nothing live at the peak holds 0 bytes there (the peak was observed)
    let b = p.by_category.get(&category).copied().unwrap_or(0);
    let figure = bytes(b);
    if b <= max {
        return pass(budget, figure);
    }
    let mut msg = format!(
        "{} at the peak {} (peak {}{})",
        category.as_str(),
        over_bytes(b, max),
        bytes(p.live_bytes),
        peak_place(figures)
    );
    held_lines(&mut msg, figures);
    fail(budget, figure, msg)
}

pub(crate) fn optimizer_temporaries(budget: &Budget, figures: &Figures, max: u64) -> Checked {
    if !figures.headline.pass_time_ns.contains_key(&Pass::Optimizer)
        && !figures.allocated_by_pass.contains_key(&Pass::Optimizer)
    {
        return unknown(budget, "the trace has no optimizer pass".into());
    }
    let Some(t) = &figures.optimizer_temporaries else {
        // the pass was observed and allocated no temporary
        return pass(budget, bytes(0));
    };
    let figure = bytes(t.allocated_bytes);
    if t.allocated_bytes <= max {
        return pass(budget, figure);
    }
    let msg = format!(
        "optimizer temporaries {}: {} storages allocated and freed in the optimizer pass; \
         {} of them live at the run's peak ({}); an in-place update would bring the peak {} → {}",
        over_bytes(t.allocated_bytes, max),
        t.count,
        bytes(t.at_peak_bytes),
        t.at_peak_count,
        bytes(t.peak_bytes),
        bytes(t.replayed_peak_bytes)
    );
    fail(budget, figure, msg)
}

pub(crate) fn no_growth(
    budget: &Budget,
    figures: &Figures,
    steps: u64,
    warmup: u64,
    max_per_step: u64,
) -> Checked {
    let captured = figures.steps.len() as u64;
    if captured < steps {
        // checked: a budget built in code may hold any numbers (the file's are checked on read)
        let hint = match (warmup.checked_add(1), warmup.checked_add(steps)) {
            (Some(first), Some(last)) => format!(
                " (capture them with ProfileRun::training(.., {first}).capture_steps({first}..={last}))"
            ),
            _ => format!(" (warmup {warmup} + steps {steps} overflows a step number)"),
        };
        return unknown(
            budget,
            format!(
                "{} needs {steps} captured steps; the trace has {captured}{hint}",
                budget.describe(),
            ),
        );
    }
    match figures.warmup_steps {
        Some(w) if w >= warmup => {}
        w => {
            return unknown(
                budget,
                format!(
                "{} needs {warmup} warm-up step(s) before the captured ones; the trace declares {}",
                budget.describe(),
                w.map_or_else(|| "none".to_string(), |w| w.to_string())
            ),
            )
        }
    }
    let Some(g) = figures
        .growth
        .as_ref()
        .filter(|g| g.bytes_per_step > max_per_step)
    else {
        return pass(budget, "no steady growth".into());
    };
    let figure = format!("+{} a step", bytes(g.bytes_per_step));
    // steps captured apart (1, 5, 9): each entry covers the step numbers since the one before
    let apart = !g.consecutive();
    let per_step: Vec<String> = g
        .per_step_bytes
        .iter()
        .enumerate()
        .map(|(i, b)| match (apart, i.checked_sub(1)) {
            (true, Some(p)) => format!(
                "+{} (steps {}→{})",
                bytes(*b),
                g.step_indices.get(p).copied().unwrap_or(0),
                g.step_indices.get(i).copied().unwrap_or(0)
            ),
            (true, None) => format!(
                "+{} (step {})",
                bytes(*b),
                g.step_indices.first().copied().unwrap_or(0)
            ),
            (false, _) => format!("+{}", bytes(*b)),
        })
        .collect();
    let mut msg = format!(
        "live memory grew in each of {} captured steps after {warmup} warm-up: +{} a step > budget {} \
         ({} → {})\n  per step: {}",
        g.steps,
        bytes(g.bytes_per_step),
        bytes(max_per_step),
        bytes(g.start_bytes),
        bytes(g.end_bytes),
        per_step.join(", ")
    );
    retained_lines(&mut msg, figures);
    fail(budget, figure, msg)
}

/// What the last captured step kept live at its end, grouped (span · op · shape dtype).
fn retained_lines(out: &mut String, figures: &Figures) {
    let Some((row, mem)) = figures
        .steps
        .iter()
        .rev()
        .find_map(|r| r.memory.as_ref().map(|m| (r, m)))
    else {
        return;
    };
    if mem.retained.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "\n  kept live by {} ({} storages, {}):",
        escape(&row.name),
        mem.retained_count.unwrap_or(0),
        trace_format::opt_bytes(mem.retained_bytes)
    );
    for g in &mem.retained {
        let mut what: Vec<String> = Vec::new();
        what.extend(g.op.as_deref().map(|s| trace_format::cell(s, 40)));
        what.extend(g.span.as_deref().map(|s| trace_format::path_cell(s, 60)));
        let shape = trace_views::live::shape_dtype_of(g.shape.as_deref(), g.dtype.as_deref());
        what.push(shape);
        let _ = write!(
            out,
            "\n    {} in {} storage{}  {}",
            bytes(g.bytes),
            g.count,
            if g.count == 1 { "" } else { "s" },
            what.join(" · ")
        );
    }
}
