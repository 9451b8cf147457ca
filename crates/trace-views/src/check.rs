//! `candle-graph check TRACE [--require-valid]`: health issues and the capability matrix.

use std::fmt::Write as _;

use serde::Serialize;
use trace_graph::{Analysis, CapabilityMatrix, HealthIssue};

use crate::summary::{health_line, HealthRecord};
use crate::table::{Align, Table};

/// The `check` report (`candle-graph/check/1`).
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// Verdict counts.
    pub health: HealthRecord,
    /// The trace is usable as evidence: structurally valid and complete.
    pub valid_and_complete: bool,
    /// Every issue (capped per code by the analyzer; see `omitted_issues`).
    pub issues: Vec<HealthIssue>,
    /// Issues left out per code.
    pub omitted_issues: std::collections::BTreeMap<String, u64>,
    /// The capability matrix.
    pub capabilities: CapabilityMatrix,
}

/// Builds the report.
pub fn build(analysis: &Analysis) -> CheckReport {
    let h = &analysis.health;
    CheckReport {
        health: HealthRecord::of(h),
        valid_and_complete: h.structurally_valid && h.capture_complete,
        issues: h.issues.clone(),
        omitted_issues: h
            .omitted_issues
            .iter()
            .map(|(code, n)| (code.as_str().to_string(), *n))
            .collect(),
        capabilities: analysis.capabilities.clone(),
    }
}

/// Where an issue is: `line N`, a node id, `storage S`, a gradient key, or `-`.
pub fn location(l: &trace_graph::IssueLocation) -> String {
    if let Some(line) = l.line {
        format!("line {line}")
    } else if let Some(n) = &l.node {
        n.clone()
    } else if let Some(s) = &l.storage {
        format!("storage {s}")
    } else if let Some(g) = &l.gradient {
        g.clone()
    } else {
        "-".to_string()
    }
}

/// Renders the report as text.
pub fn render(r: &CheckReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "health  {}", health_line(&r.health));
    if r.issues.is_empty() {
        out.push_str("issues  none\n");
    } else {
        out.push('\n');
        let mut t = Table::new(&[
            ("SEVERITY", Align::Left),
            ("CODE", Align::Left),
            ("WHERE", Align::Left),
            ("MESSAGE", Align::Left),
        ]);
        for i in &r.issues {
            let at = location(&i.location);
            // The message is the last column: escaped, never elided.
            t.row([
                i.severity.as_str().to_string(),
                i.code.as_str().to_string(),
                Table::text(&at),
                trace_format::escape(&i.message).into_owned(),
            ]);
        }
        out.push_str(&t.render("  "));
        for (code, n) in &r.omitted_issues {
            let _ = writeln!(out, "  {n} more {code} issues");
        }
    }
    out.push('\n');
    out.push_str("capabilities\n");
    let mut t = Table::new(&[
        ("CAPABILITY", Align::Left),
        ("LEVEL", Align::Left),
        ("DECLARED", Align::Left),
        ("OBSERVED", Align::Right),
        ("REASON", Align::Left),
    ]);
    for c in &r.capabilities.capabilities {
        t.row([
            c.kind.as_str().to_string(),
            c.level.as_str().to_string(),
            c.declared
                .map(|d| d.as_str().to_string())
                .unwrap_or_else(|| "-".into()),
            c.observed.to_string(),
            trace_format::escape(&c.reason).into_owned(),
        ]);
    }
    out.push_str(&t.render("  "));
    out
}
