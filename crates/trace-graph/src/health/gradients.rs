//! Gradient checks: event ids and keys, and the exact gradient contract (manifest keys and
//! family expectations). Family checks are warnings: they describe the model, not a broken
//! trace. O(G + E) with hash maps (the original scanned the manifest per family).

use std::collections::{HashMap, HashSet};

use trace_schema::{CoverageLevel, GradientExpectation, GradientState, TraceDocument};

use super::issues::{CaptureState, HealthCode, IssueLocation, Issues, Severity};

#[derive(Default, Clone, Copy)]
struct FamilyCounts {
    members: u64,
    captured: u64,
    present: u64,
    attached: u64,
    non_finite: u64,
}

pub(super) fn check(doc: &TraceDocument, state: CaptureState, issues: &mut Issues) {
    let mut event_ids: HashSet<&str> = HashSet::with_capacity(doc.gradients.len());
    for g in &doc.gradients {
        let at = || IssueLocation::gradient(format!("{}/{}", g.root, g.key));
        if g.event_id.trim().is_empty() {
            issues.error(
                HealthCode::EmptyGradientEventId,
                format!("gradient {}/{} has an empty event id", g.root, g.key),
                at(),
            );
        } else if !event_ids.insert(g.event_id.as_str()) {
            issues.error(
                HealthCode::DuplicateGradientEventId,
                format!("gradient event id {} repeats", g.event_id),
                at(),
            );
        }
        if g.key.trim().is_empty() {
            issues.error(
                HealthCode::EmptyGradientParameterKey,
                format!("gradient {} has an empty parameter key", g.event_id),
                at(),
            );
        }
    }

    let Some(capture) = &doc.meta.capture_contract else {
        return;
    };
    let Some(contract) = &capture.gradient_contract else {
        return;
    };
    if capture.gradients != CoverageLevel::Complete || !contract.validate().is_empty() {
        // Reported from the loader's contract validation; a broken manifest is not checked.
        return;
    }
    let manifest: HashMap<(&str, &str), usize> = contract
        .expected
        .iter()
        .enumerate()
        .map(|(i, e)| ((e.root.as_str(), e.key.as_str()), i))
        .collect();
    let mut seen = vec![false; contract.expected.len()];
    let mut families: HashMap<&str, FamilyCounts> = HashMap::new();
    for e in &contract.expected {
        families.entry(e.family.as_str()).or_default().members += 1;
    }
    for g in doc.gradients.iter().filter(|g| g.parameter) {
        let name = format!("{}/{}", g.root, g.key);
        let Some(&i) = manifest.get(&(g.root.as_str(), g.key.as_str())) else {
            issues.error(
                HealthCode::GradientManifestUndeclaredKey,
                format!("gradient {name} is not declared in the gradient manifest"),
                IssueLocation::gradient(name),
            );
            continue;
        };
        if std::mem::replace(&mut seen[i], true) {
            issues.error(
                HealthCode::GradientManifestDuplicateKey,
                format!("gradient {name} is reported twice"),
                IssueLocation::gradient(name),
            );
            continue;
        }
        let f = families
            .get_mut(contract.expected[i].family.as_str())
            .expect("family counted from the manifest");
        f.captured += 1;
        match g.state {
            GradientState::Present => {
                f.present += 1;
                f.attached += 1;
            }
            GradientState::Zero => f.attached += 1,
            GradientState::NonFinite => {
                f.attached += 1;
                f.non_finite += 1;
            }
            GradientState::Missing => {}
        }
    }
    let missing_severity = if state.ended_early() {
        Severity::Warning
    } else {
        Severity::Error
    };
    for (i, e) in contract.expected.iter().enumerate() {
        if !seen[i] {
            let name = format!("{}/{}", e.root, e.key);
            issues.push(
                missing_severity,
                HealthCode::GradientManifestMissingKey,
                format!("gradient manifest entry {name} has no gradient event"),
                IssueLocation::gradient(name),
            );
        }
    }
    for fc in &contract.families {
        let Some(c) = families.get(fc.family.as_str()).copied() else {
            continue;
        };
        if state.ended_early() && c.captured < c.members {
            continue;
        }
        let fam = &fc.family;
        if c.non_finite > 0 {
            issues.warning(
                HealthCode::GradientFamilyNonFinite,
                format!(
                    "gradient family {fam}: {} of {} gradients are non-finite",
                    c.non_finite, c.members
                ),
                IssueLocation::gradient(fam.clone()),
            );
        }
        match fc.expectation {
            GradientExpectation::Active if c.present < fc.min_present => issues.warning(
                HealthCode::GradientActiveFamilyBelowMinimum,
                format!(
                    "active gradient family {fam}: {} of {} members have a gradient, the contract requires {}",
                    c.present, c.members, fc.min_present
                ),
                IssueLocation::gradient(fam.clone()),
            ),
            GradientExpectation::Inactive if c.attached > 0 => issues.warning(
                HealthCode::GradientInactiveFamilyLeakage,
                format!("inactive gradient family {fam}: {} members have a gradient attached", c.attached),
                IssueLocation::gradient(fam.clone()),
            ),
            GradientExpectation::DataConditional if c.attached > 0 && c.present < fc.min_present => {
                issues.warning(
                    HealthCode::GradientConditionalFamilyBelowMinimum,
                    format!(
                        "data-conditional gradient family {fam} is attached but only {} of {} members have a gradient, the contract requires {}",
                        c.present, c.members, fc.min_present
                    ),
                    IssueLocation::gradient(fam.clone()),
                )
            }
            _ => {}
        }
    }
}
