//! A set of checked budgets or gates ([`Report`]) and its outputs: a terminal table, Markdown
//! for a CI job summary or a pull-request comment, and JUnit XML for CI systems that read it.
//! Trace text is escaped for the terminal (`trace_format::escape`), for Markdown (pipes,
//! backticks, angle brackets) and for XML (the five entities; control characters dropped).

use std::fmt::Write as _;

use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use serde::Serialize;

use crate::outcome::{Checked, Outcome};

/// Checked budgets (or diff gates), in the order given.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// One entry per budget.
    pub checked: Vec<Checked>,
}

impl Report {
    /// Every budget passed (an unknown one did not).
    pub fn all_passed(&self) -> bool {
        self.checked.iter().all(|c| c.outcome == Outcome::Pass)
    }

    /// The failed and unknown entries.
    pub fn not_passed(&self) -> impl Iterator<Item = &Checked> {
        self.checked.iter().filter(|c| c.outcome != Outcome::Pass)
    }

    /// Counts: (passed, failed, unknown).
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut n = (0, 0, 0);
        for c in &self.checked {
            match c.outcome {
                Outcome::Pass => n.0 += 1,
                Outcome::Fail => n.1 += 1,
                Outcome::Unknown(_) => n.2 += 1,
            }
        }
        n
    }

    /// One line: `2 of 3 budgets passed, 1 failed, 0 unknown`.
    pub fn headline(&self, noun: &str) -> String {
        let (p, f, u) = self.counts();
        format!(
            "{p} of {} {noun}s passed, {f} failed, {u} unknown",
            self.checked.len()
        )
    }

    /// The terminal table (BUDGET · FIGURE · RESULT), then each failure's message.
    pub fn render_text(&self, noun: &str) -> String {
        let mut table = Table::new();
        table.load_preset(UTF8_BORDERS_ONLY);
        table.set_header([noun.to_uppercase().as_str(), "FIGURE", "RESULT"]);
        for c in &self.checked {
            table.add_row([
                c.subject.describe(),
                c.figure.clone(),
                word(&c.outcome).to_string(),
            ]);
        }
        let mut out = format!("{}\n{table}\n", self.headline(noun));
        for c in self.not_passed() {
            let _ = write!(
                out,
                "\n{} {}: {}\n",
                word(&c.outcome),
                c.subject.describe(),
                c.message
            );
        }
        out
    }

    /// Markdown: the headline, a table of every entry, then each failure's message in a code
    /// block (a job summary, a pull-request comment).
    pub fn render_markdown(&self, title: &str, noun: &str) -> String {
        let mut out = format!(
            "### {}\n\n**{}**\n\n",
            markdown_cell(title),
            self.headline(noun)
        );
        let _ = writeln!(out, "| {noun} | figure | result |\n|---|---|---|");
        for c in &self.checked {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                markdown_cell(&c.subject.describe()),
                markdown_cell(&c.figure),
                match c.outcome {
                    Outcome::Pass => "✅ pass",
                    Outcome::Fail => "❌ FAIL",
                    Outcome::Unknown(_) => "❔ unknown",
                }
            );
        }
        for c in self.not_passed() {
            let _ = write!(
                out,
                "\n**{}** {}\n\n```text\n{}\n```\n",
                word(&c.outcome),
                markdown_cell(&c.subject.describe()),
                c.message.replace("```", "'''")
            );
        }
        out
    }

    /// JUnit XML: one `<testsuite>` named `suite`, a `<testcase>` per entry; a failure is a
    /// `<failure>` with the message, an unknown is a `<skipped>` with its reason.
    pub fn render_junit(&self, suite: &str) -> String {
        let (_, f, u) = self.counts();
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\" skipped=\"{u}\">\n",
            xml(suite),
            self.checked.len()
        );
        for c in &self.checked {
            let name = xml(&c.subject.describe());
            match &c.outcome {
                Outcome::Pass => {
                    let _ = writeln!(
                        out,
                        "    <testcase classname=\"{}\" name=\"{name}\"/>",
                        xml(suite)
                    );
                }
                Outcome::Fail => {
                    let _ = writeln!(
                        out,
                        "    <testcase classname=\"{}\" name=\"{name}\">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                        xml(suite),
                        xml(c.message.lines().next().unwrap_or_default()),
                        xml(&c.message)
                    );
                }
                Outcome::Unknown(why) => {
                    let _ = writeln!(
                        out,
                        "    <testcase classname=\"{}\" name=\"{name}\">\n      <skipped message=\"{}\"/>\n    </testcase>",
                        xml(suite),
                        xml(why)
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }
}

impl std::fmt::Display for Report {
    /// What did not pass, each with its message (what a failing `#[test]` prints).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        for c in self.not_passed() {
            if !first {
                writeln!(f)?;
            }
            first = false;
            write!(
                f,
                "budget {} {}: {}",
                word(&c.outcome),
                c.subject.describe(),
                c.message
            )?;
        }
        if first {
            write!(f, "{}", self.headline("budget"))?;
        }
        Ok(())
    }
}

impl std::error::Error for Report {}

/// `pass`, `FAIL`, `unknown`.
pub fn word(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Pass => "pass",
        Outcome::Fail => "FAIL",
        Outcome::Unknown(_) => "unknown",
    }
}

/// Trace text in a Markdown table cell: escaped controls, pipes, angle brackets and line breaks.
pub fn markdown_cell(s: &str) -> String {
    trace_format::escape(s)
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\n', " ")
}

/// Text in XML: the five entities; control characters other than tab and line feed (not
/// allowed in XML 1.0) are dropped ([`trace_format::markup_escape`]).
pub fn xml(s: &str) -> String {
    trace_format::markup_escape(s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Budget;
    use crate::outcome::Subject;

    fn report() -> Report {
        let b = |max_bytes| Subject::Budget(Budget::Peak { max_bytes });
        Report {
            checked: vec![
                Checked {
                    subject: b(10),
                    figure: "5 B".into(),
                    outcome: Outcome::Pass,
                    message: String::new(),
                },
                Checked {
                    subject: b(4),
                    figure: "5 B".into(),
                    outcome: Outcome::Fail,
                    message: "peak 5 B > budget 4 B <&\"'> \u{1b}".into(),
                },
                Checked {
                    subject: b(1),
                    figure: "-".into(),
                    outcome: Outcome::Unknown("no memory".into()),
                    message: "no memory".into(),
                },
            ],
        }
    }

    #[test]
    fn outputs_name_each_budget_and_escape_trace_text() {
        let r = report();
        assert_eq!(r.counts(), (1, 1, 1));
        assert!(!r.all_passed());
        let text = r.render_text("budget");
        assert!(
            text.starts_with("1 of 3 budgets passed, 1 failed, 1 unknown"),
            "{text}"
        );
        assert!(
            text.contains("FAIL peak ≤ 4 B: peak 5 B > budget 4 B"),
            "{text}"
        );
        let md = r.render_markdown("check", "budget");
        assert!(md.contains("| peak ≤ 4 B | 5 B | ❌ FAIL |"), "{md}");
        let junit = r.render_junit("candle-graph check");
        assert!(
            junit.contains("tests=\"3\" failures=\"1\" skipped=\"1\""),
            "{junit}"
        );
        assert!(
            junit.contains("&lt;&amp;&quot;&#39;&gt; </failure>"),
            "{junit}"
        );
        assert!(!junit.contains('\u{1b}'));
        assert!(
            junit.contains("<skipped message=\"no memory\"/>"),
            "{junit}"
        );
        let shown = r.to_string();
        assert!(
            shown.starts_with("budget FAIL peak ≤ 4 B: peak 5 B"),
            "{shown}"
        );
        assert!(
            shown.contains("\nbudget unknown peak ≤ 1 B: no memory"),
            "{shown}"
        );
    }
}
