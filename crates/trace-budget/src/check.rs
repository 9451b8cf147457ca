//! Checking budgets on a trace's figures: each budget's check (memory or ops), and a set of
//! them into a [`Report`].

use crate::budget::{Budget, Budgets};
use crate::figures::Figures;
use crate::outcome::{unknown, Checked};

impl Budget {
    /// Checks the budget on `figures`.
    pub fn check(&self, figures: &Figures) -> Checked {
        if self.needs_memory() {
            if let Some(why) = &figures.memory_unavailable {
                return unknown(
                    self,
                    format!("{} needs the tracking allocator: {why}", self.describe()),
                );
            }
        }
        match self {
            Budget::Peak { max_bytes } => crate::memory::peak(self, figures, *max_bytes),
            Budget::PassPeak { pass, max_bytes } => {
                crate::memory::pass_peak(self, figures, *pass, *max_bytes)
            }
            Budget::Category {
                category,
                max_bytes,
            } => crate::memory::category(self, figures, *category, *max_bytes),
            Budget::OptimizerTemporaries { max_bytes } => {
                crate::memory::optimizer_temporaries(self, figures, *max_bytes)
            }
            Budget::NoGrowth {
                steps,
                warmup,
                max_bytes_per_step,
            } => crate::memory::no_growth(self, figures, *steps, *warmup, *max_bytes_per_step),
            Budget::OpCalls {
                op,
                pass,
                cmp,
                calls,
            } => crate::ops::calls(self, figures, op, *pass, *cmp, *calls),
            Budget::OpShare {
                op,
                pass,
                max_share,
            } => crate::ops::share(self, figures, op, *pass, *max_share),
        }
    }
}

impl Budgets {
    /// Checks every budget on `figures`.
    pub fn evaluate(&self, figures: &Figures) -> crate::Report {
        crate::Report {
            checked: self.budgets.iter().map(|b| b.check(figures)).collect(),
        }
    }

    /// Checks every budget; `Err` with the report when any failed or could not be checked
    /// (its `Display` prints each such budget's message), for `#[test]`s:
    /// `budgets.check(&figures).map_err(|r| r.to_string())?`.
    ///
    /// # Errors
    /// The report, when a budget failed or is unknown.
    pub fn check(&self, figures: &Figures) -> Result<crate::Report, crate::Report> {
        let report = self.evaluate(figures);
        if report.all_passed() {
            Ok(report)
        } else {
            Err(report)
        }
    }
}
