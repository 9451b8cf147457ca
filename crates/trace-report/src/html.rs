//! Renders a [`Page`] into one self-contained HTML file: markup from the page model (maud
//! escapes every value), the stylesheet and script embedded from `assets/`, the chart data as a
//! JSON data block, and a strict Content-Security-Policy that allows exactly the embedded
//! script and style (by SHA-256 hash) and nothing remote.
//!
//! The data block is `<script type="application/json">` (never executed); its JSON escapes
//! `<`, `>`, `&` and U+2028/U+2029, so no string in it can end the element. The script only
//! ever writes trace text with `textContent`.

use base64::Engine as _;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use sha2::{Digest, Sha256};

use crate::page::{Block, Fact, Overlay, Page, Table};
use crate::FindingText;

/// The stylesheet, embedded as written.
pub const STYLE: &str = include_str!("../assets/report.css");
/// The script, embedded as written: the parts in `assets/js/` joined inside one function (one
/// scope, strict mode), in the order they depend on each other: the shared helpers, the memory
/// charts, the icicles and flame graph, the tables, and the start that draws them.
pub const SCRIPT: &str = concat!(
    "// candle-graph report: charts, icicles, flame graphs, sortable tables and the live-set panel,\n",
    "// drawn from the JSON data block. Trace text only ever reaches the page through textContent.\n",
    "(function () {\n  \"use strict\";\n",
    include_str!("../assets/js/core.js"),
    include_str!("../assets/js/chart.js"),
    include_str!("../assets/js/flame.js"),
    include_str!("../assets/js/tables.js"),
    include_str!("../assets/js/start.js"),
    "})();\n"
);

/// `'sha256-…'` of an inline element's text, as CSP hashes it.
pub fn csp_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The Content-Security-Policy of the page: nothing is loaded from anywhere; only the embedded
/// script and style run; images only as `data:` URLs (the empty favicon).
pub fn content_security_policy() -> String {
    format!(
        "default-src 'none'; script-src {}; style-src {}; img-src data:; base-uri 'none'; form-action 'none'",
        csp_hash(SCRIPT),
        csp_hash(STYLE)
    )
}

/// JSON safe inside a `<script>` element: `<`, `>`, `&`, U+2028 and U+2029 as `\u` escapes
/// (they can only occur inside JSON strings, where the escapes mean the same characters).
pub fn script_safe_json(value: &serde_json::Value) -> String {
    let json = serde_json::to_string(value).unwrap_or_else(|_| "null".to_string());
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The page as one HTML document.
pub fn render(page: &Page) -> String {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(content_security_policy());
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                link rel="icon" href="data:,";
                title { (page.title.0) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                a.skip href="#main" { "Skip to the report" }
                header {
                    div.headline {
                        h1 { (page.title.0) }
                        p.subtitle { (breakable(&page.subtitle.0)) }
                    }
                    button #theme type="button" aria-label="Switch between automatic, light and dark colours" { "Theme: auto" }
                }
                nav aria-label="Sections" {
                    ul {
                        @for s in &page.sections {
                            li { a href={ "#" (s.id) } { (s.title.0) } }
                        }
                    }
                }
                main #main {
                    @for s in &page.sections {
                        section id=(s.id) aria-labelledby={ (s.id) "-h" } {
                            h2 id={ (s.id) "-h" } { (s.title.0) }
                            @for b in &s.blocks { (block(b)) }
                        }
                    }
                }
                div #tooltip role="status" aria-live="polite" hidden {}
                script #cg-data type="application/json" { (PreEscaped(script_safe_json(&page.data))) }
                script { (PreEscaped(SCRIPT)) }
            }
        }
    };
    markup.into_string()
}

fn block(b: &Block) -> Markup {
    match b {
        Block::Heading(t) => html! { h3 { (breakable(&t.0)) } },
        Block::Facts(facts) => html! {
            dl.facts { @for f in facts { (fact(f)) } }
        },
        Block::Paragraph(t) => html! { p { (breakable(&t.0)) } },
        Block::List(items) => html! {
            ul.list { @for i in items { li { (breakable(&i.0)) } } }
        },
        Block::Table(t) => table(t),
        Block::Findings(f) => findings(f),
        Block::Pre { summary, text } => html! {
            details.pre {
                summary { (summary.0) }
                pre { (text.0) }
            }
        },
        Block::Collapsed { summary, table: t } => html! {
            details.rows id={ (t.id) "-rows" } {
                summary { (summary.0) }
                (table(t))
            }
        },
        Block::Overlay(o) => overlay(o),
        Block::StepChart(c) => crate::step_chart::step_chart(c),
        Block::MemoryChart { device } => html! {
            div.chart data-device=(device) {
                div.chart-controls {
                    button.jump type="button" data-device=(device) { "Jump to peak" }
                    button.reset type="button" data-device=(device) { "Whole timeline" }
                    button.chart-zoom type="button" data-zoom="in" aria-label="Zoom in" { "+" }
                    button.chart-zoom type="button" data-zoom="out" aria-label="Zoom out" { "−" }
                    span.chart-hint { "Hover or use ←/→ for the breakdown; click or Enter for what was live then; ctrl + wheel, +/− or a pinch zooms." }
                    span.chart-zoom-hint aria-live="polite" hidden {}
                }
                div.chart-area tabindex="0" role="img" data-device=(device)
                    aria-label="Live bytes over time, stacked by category" {}
                div.legend data-device=(device) {}
            }
        },
        Block::HeldIcicle { device } => html! {
            div.icicle.held data-device=(device) role="tree" aria-label="Bytes live at the peak by allocating span path" {}
        },
        Block::SpanIcicle => html! {
            div.icicle.spans role="tree" aria-label="Span tree over time" {}
        },
        Block::FlameGraph => html! {
            div.flame {
                div.flame-controls {
                    div.flame-tabs role="tablist" aria-label="Pass" {}
                    button.flame-reset type="button" { "Reset zoom" }
                }
                div.flame-area role="group" aria-label="Flame graph of the sampled call stacks, outermost frame on top" {}
                p.footer.flame-info aria-live="polite" {}
            }
        },
        Block::LiveSetPanel => html! {
            div #liveset aria-live="polite" {
                p.muted { "Click a point of a memory chart (or press Enter on it) to list what was live then." }
            }
        },
    }
}

/// Text as escaped markup with a line-break opportunity (`<wbr>`) after each `/`, `.`, `:`,
/// `_` or `,` that joins two names (`candle_core::<wbr>tensor`, `fc1.<wbr>weight`,
/// `model/<wbr>fc1`): a long path wraps between its names, never inside one, and numbers
/// (`1.53`) stay whole. `<wbr>` is not text: copying, filtering and CSV read the name as is.
fn breakable(s: &str) -> Markup {
    let mut out = String::with_capacity(s.len() + 16);
    let mut prev: Option<char> = None;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
        let joins = matches!(c, '/' | '.' | ':' | '_' | ',')
            && prev.is_some_and(|p| p.is_alphanumeric() || p == ':' || p == ')')
            && chars.peek().is_some_and(|n| n.is_alphabetic());
        if joins {
            out.push_str("<wbr>");
        }
        prev = Some(c);
    }
    PreEscaped(out)
}

fn fact(f: &Fact) -> Markup {
    let attrs: String = f
        .data
        .iter()
        .filter(|(k, _)| {
            k.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
        .map(|(k, v)| format!(" data-{k}=\"{}\"", trace_format::markup_escape(v)))
        .collect();
    html! {
        dt { (f.label.0) }
        dd {
            // data-* attributes with names checked above and values escaped
            (PreEscaped(format!("<span class=\"value\"{attrs}>")))
            (breakable(&f.value.0))
            (PreEscaped("</span>"))
            @if !f.items.is_empty() {
                ul { @for i in &f.items { li { (breakable(&i.0)) } } }
            }
        }
    }
}

fn table(t: &Table) -> Markup {
    html! {
        div.table-wrap {
            table.sortable.cards id=(t.id) {
                @if !t.caption.0.is_empty() { caption { (breakable(&t.caption.0)) } }
                thead { tr {
                    @for (i, c) in t.columns.iter().enumerate() {
                        th scope="col" class=(if c.numeric { "num" } else { "" }) aria-sort="none" {
                            button type="button" data-col=(i) data-numeric=(c.numeric) { (c.title.0) }
                        }
                    }
                } }
                tbody {
                    @for row in &t.rows {
                        tr {
                            @for (i, cell) in row.iter().enumerate() {
                                @let numeric = t.columns.get(i).is_some_and(|c| c.numeric);
                                // the column's name, shown before the cell where a row is a card
                                @let label = t.columns.get(i).map_or("", |c| c.title.0.as_str());
                                @match cell.sort {
                                    Some(v) if numeric => td.num data-sort=(v) data-label=(label) { (breakable(&cell.text.0)) },
                                    _ => td class=(if numeric { "num" } else { "" }) data-label=(label) { (breakable(&cell.text.0)) },
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(f) = &t.footer { p.footer { (breakable(&f.0)) } }
        }
    }
}

/// The overlay's SVG: steps (a value holds until the next point), y from 0 to the largest
/// value, x over every series' time range. The largest value and the time range are labelled
/// in HTML beside the SVG (not inside it, where they would shrink with a narrow screen).
fn overlay(o: &Overlay) -> Markup {
    const W: f64 = 640.0;
    const H: f64 = 200.0;
    const LEFT: f64 = 1.0;
    const RIGHT: f64 = 1.0;
    const TOP: f64 = 4.0;
    const BOTTOM: f64 = 1.0;
    let all = o.series.iter().flat_map(|s| s.points.iter());
    let t0 = all.clone().map(|p| p.0).min().unwrap_or(0).min(0);
    let t1 = all
        .clone()
        .map(|p| p.0)
        .max()
        .unwrap_or(0)
        .max(t0.saturating_add(1));
    let ymax = all.map(|p| p.1).max().unwrap_or(0).max(1);
    // In i128: a hostile trace's times may span the whole i64 range.
    let span = (i128::from(t1) - i128::from(t0)) as f64;
    let x = |t: i64| LEFT + (i128::from(t) - i128::from(t0)) as f64 / span * (W - LEFT - RIGHT);
    let y = |v: u64| TOP + (1.0 - v as f64 / ymax as f64) * (H - TOP - BOTTOM);
    let path = |pts: &[(i64, u64)]| {
        let mut d = String::new();
        for (k, &(t, v)) in pts.iter().enumerate() {
            if k == 0 {
                d.push_str(&format!("M{:.1},{:.1}", x(t), y(v)));
            } else {
                d.push_str(&format!(" H{:.1} V{:.1}", x(t), y(v)));
            }
        }
        d
    };
    let ns = |t: i64| {
        let s = trace_format::duration(t.unsigned_abs());
        if t < 0 {
            format!("-{s}")
        } else {
            s
        }
    };
    html! {
        figure.overlay id=(o.id) {
            figcaption { (breakable(&o.caption.0)) }
            div.overlay-plot {
                div.overlay-y {
                    span.label { (trace_format::bytes(ymax)) }
                    span.label { "0 B" }
                }
                svg viewBox={ "0 0 " (W) " " (H) } role="img" aria-label=(o.caption.0) {
                    line.axis x1=(LEFT) y1=(H - BOTTOM) x2=(W - RIGHT) y2=(H - BOTTOM) {}
                    line.axis x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(H - BOTTOM) {}
                    @for (k, s) in o.series.iter().enumerate() {
                        @let max = s.points.iter().map(|p| p.1).max();
                        path class={ "series s" (k.min(3)) } d=(path(&s.points))
                            data-series=(s.name.0) data-series-max=[max] data-points=(s.points.len()) {}
                    }
                }
                div.overlay-x {
                    span.label { (ns(t0)) }
                    span.label { (ns(t1)) }
                }
            }
            ul.overlay-legend {
                @for (k, s) in o.series.iter().enumerate() {
                    li class={ "s" (k.min(3)) } {
                        span.swatch {} " " (s.name.0)
                        @if let Some(m) = s.points.iter().map(|p| p.1).max() { ": peak " (trace_format::bytes(m)) }
                        @else { ": no memory events" }
                    }
                }
            }
        }
    }
}

fn findings(list: &[FindingText]) -> Markup {
    html! {
        @if list.is_empty() {
            p { "none" }
        } @else {
            ul.findings {
                @for f in list {
                    li class={ "finding " (f.severity) } {
                        span.severity { "[" (f.severity) "]" }
                        " "
                        code { (f.code) }
                        ": "
                        (breakable(&trace_format::escape(&f.summary)))
                        @if let Some(a) = &f.advice {
                            div.advice { "→ " (breakable(&trace_format::escape(a))) }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_wrap_between_their_names_and_numbers_stay_whole() {
        let b = |s: &str| breakable(s).into_string();
        assert_eq!(
            b("candle_core::tensor::Tensor::matmul"),
            "candle_<wbr>core::<wbr>tensor::<wbr>Tensor::<wbr>matmul"
        );
        assert_eq!(
            b("model/fc1.weight,fc2.bias"),
            "model/<wbr>fc1.<wbr>weight,<wbr>fc2.<wbr>bias"
        );
        assert_eq!(b("1.53 MiB at 0.5 s: peak"), "1.53 MiB at 0.5 s: peak");
        // escaped first: markup stays text, and no break lands inside an entity
        assert_eq!(b("</script>&x.y"), "&lt;/script&gt;&amp;x.<wbr>y");
    }
    use crate::page::{Cell, Column, Section, Text};

    fn page_with(name: &str) -> String {
        let page = Page {
            title: Text::trace(name),
            subtitle: "sub".into(),
            sections: vec![Section {
                id: "s".into(),
                title: "S".into(),
                blocks: vec![
                    Block::Facts(vec![Fact {
                        label: "peak".into(),
                        value: Text::trace(name),
                        data: vec![
                            ("bytes".into(), "\"><script>".into()),
                            ("bad name".into(), "x".into()),
                        ],
                        items: vec![],
                    }]),
                    Block::Table(Table {
                        id: "t".into(),
                        columns: vec![Column::text("SPAN"), Column::number("BYTES")],
                        rows: vec![vec![Cell::trace(name), Cell::number("1 B", Some(1.0))]],
                        ..Table::default()
                    }),
                ],
            }],
            data: serde_json::json!({ "name": name }),
        };
        render(&page)
    }

    #[test]
    fn trace_text_cannot_open_markup_or_end_the_data_block() {
        let evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>\u{1}\u{202e}";
        let out = page_with(evil);
        // exactly the two script elements of the page
        assert_eq!(out.matches("<script").count(), 2, "{out}");
        assert_eq!(out.matches("</script>").count(), 2);
        assert!(!out.contains("<img"));
        assert!(out.contains("&lt;/script&gt;&lt;script&gt;alert(1)"));
        // controls shown visibly in the markup, escaped for JSON in the data
        assert!(out.contains("\\x01\\u{202e}"));
        assert!(out.contains(r#""name":"\u003c/script\u003e\u003cscript\u003ealert(1)"#));
        assert!(out.contains(r#"data-bytes="&quot;&gt;&lt;script&gt;""#));
        assert!(!out.contains("data-bad name"));
    }

    #[test]
    fn the_policy_allows_exactly_the_embedded_script_and_style() {
        let out = page_with("x");
        let csp = content_security_policy();
        assert!(
            out.contains(&format!("content=\"{}\"", csp.replace('\'', "&#39;")))
                || out.contains(&format!("content=\"{csp}\""))
        );
        assert!(csp.starts_with("default-src 'none'; script-src 'sha256-"));
        assert!(!csp.contains("unsafe"));
        // the hashed texts are the element contents, byte for byte
        assert!(out.contains(&format!("<script>{SCRIPT}</script>")));
        assert!(out.contains(&format!("<style>{STYLE}</style>")));
        assert_eq!(
            csp_hash("alert(1)"),
            "'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='"
        );
    }

    #[test]
    fn data_json_escapes_what_could_end_a_script() {
        let v = serde_json::json!({"a": "<&>\u{2028}\u{2029}"});
        let s = script_safe_json(&v);
        assert_eq!(s, r#"{"a":"\u003c\u0026\u003e\u2028\u2029"}"#);
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
    }
}
