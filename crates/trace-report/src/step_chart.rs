//! [`Block::StepChart`](crate::page::Block::StepChart): figures by captured step, one line per
//! series with a marker at each capture, as an inline SVG. The script makes every
//! `figure.stepchart` zoomable along the steps by changing the SVG's view box: ctrl + wheel (or
//! the wheel once the chart was clicked), a pinch, +/− and the buttons zoom; a drag pans; Escape
//! or a double-click resets. The markers keep their titles (the step and the value as the CLI
//! formats it).

use maud::{html, Markup};

use crate::page::{StepChart, StepUnit};

/// `value` in `unit` as the CLI writes it.
pub fn format_value(unit: StepUnit, value: u64) -> String {
    match unit {
        StepUnit::Bytes => trace_format::bytes(value),
        StepUnit::Nanoseconds => trace_format::duration(value),
        StepUnit::PartsPerMillion => format!("{:.1}%", value as f64 / 10_000.0),
    }
}

const W: f64 = 640.0;
const H: f64 = 200.0;
const PAD: f64 = 6.0;

/// The markup of a step chart.
pub fn step_chart(c: &StepChart) -> Markup {
    let all = || c.series.iter().flat_map(|s| s.points.iter());
    let s0 = all().map(|p| p.0).min().unwrap_or(0);
    let s1 = all()
        .map(|p| p.0)
        .max()
        .unwrap_or(0)
        .max(s0.saturating_add(1));
    let ymax = all().map(|p| p.1).max().unwrap_or(0).max(1);
    let span = (s1 - s0) as f64;
    let x = |s: u64| PAD + (s - s0) as f64 / span * (W - 2.0 * PAD);
    let y = |v: u64| PAD + (1.0 - v as f64 / ymax as f64) * (H - 2.0 * PAD);
    let path = |pts: &[(u64, u64)]| {
        let mut d = String::new();
        for (k, &(s, v)) in pts.iter().enumerate() {
            d.push_str(if k == 0 { "M" } else { " L" });
            d.push_str(&format!("{:.1},{:.1}", x(s), y(v)));
        }
        d
    };
    html! {
        figure.stepchart id=(c.id) data-first-step=(s0) data-last-step=(s1) {
            figcaption { (c.caption.0) }
            div.stepchart-controls {
                button.step-zoom type="button" data-zoom="in" aria-label="Zoom in" { "+" }
                button.step-zoom type="button" data-zoom="out" aria-label="Zoom out" { "−" }
                button.step-reset type="button" { "All captures" }
                span.chart-hint { "ctrl + wheel (or click first), +/− or a pinch zooms along the steps; drag pans; Escape or a double-click resets; hover a marker for its figure." }
                span.chart-zoom-hint aria-live="polite" hidden {}
            }
            div.overlay-plot {
                div.overlay-y {
                    span.label { (format_value(c.unit, ymax)) }
                    span.label { (format_value(c.unit, 0)) }
                }
                svg viewBox={ "0 0 " (W) " " (H) } data-w=(W) role="img" aria-label=(c.caption.0)
                    preserveAspectRatio="none" tabindex="0" {
                    line.axis x1="0" y1=(H - PAD) x2=(W) y2=(H - PAD) {}
                    @for (k, s) in c.series.iter().enumerate() {
                        path class={ "series s" (k.min(3)) } d=(path(&s.points))
                            data-series=(s.name.0) data-points=(s.points.len()) {}
                        @for &(st, v) in &s.points {
                            circle class={ "mark s" (k.min(3)) } cx=(format!("{:.1}", x(st))) cy=(format!("{:.1}", y(v))) r="2.5"
                                data-step=(st) data-value=(v) {
                                title { (s.name.0) " at step " (st) ": " (format_value(c.unit, v)) }
                            }
                        }
                    }
                }
                div.overlay-x {
                    span.label { "step " (s0) }
                    span.label { "step " (s1) }
                }
            }
            ul.overlay-legend {
                @for (k, s) in c.series.iter().enumerate() {
                    li class={ "s" (k.min(3)) } { span.swatch {} " " (s.name.0) }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{StepSeries, Text};

    #[test]
    fn markers_carry_step_and_value_and_trace_text_is_escaped() {
        let c = StepChart {
            id: "c".into(),
            caption: Text::from("peak"),
            unit: StepUnit::Bytes,
            series: vec![StepSeries {
                name: Text::trace("<b>\u{202e}x"),
                points: vec![(200, 1024), (400, 2048)],
            }],
        };
        let html = step_chart(&c).into_string();
        assert!(
            html.contains(r#"data-step="400" data-value="2048""#),
            "{html}"
        );
        assert!(html.contains("at step 400: 2.00 KiB"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert_eq!(format_value(StepUnit::PartsPerMillion, 123_456), "12.3%");
    }
}
