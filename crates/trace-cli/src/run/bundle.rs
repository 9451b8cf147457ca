//! `bundle` (publish a trace with its derived outputs and a manifest), `verify` (a bundle
//! against its manifest) and `series` (per-step figures across bundles of one run).

use anyhow::{Context as _, Result};
use trace_views::bundle::{self as views, VerifyReport};
use trace_views::load::Detail;

use crate::cli::{BundleArgs, SeriesArgs, VerifyArgs};
use crate::input::load;
use crate::output::{self, Output};

/// Runs `bundle`.
///
/// # Errors
/// Reading the trace (a PyTorch trace is refused); publishing the bundle.
pub fn publish(args: &BundleArgs) -> Result<Output> {
    let (trace, analysis) = load(&args.trace, Detail::Full)?;
    anyhow::ensure!(
        trace.import.is_none(),
        "{} is a PyTorch profiler trace: bundle the candle-graph trace `candle-graph import` writes from it",
        trace.path.display()
    );
    let derived = views::derive(&trace.doc, analysis)?;
    // the identity as the trace's meta line writes it (verification reads it there): the
    // loaded document holds a name longer than 1 KiB as its head and tail only
    let run = views::read_trace_identity(&trace.path)
        .unwrap_or_else(|_| views::RunIdentity::of(&trace.doc.meta));
    let v = views::publish(&trace.path, &run, &derived, &args.output)
        .with_context(|| format!("cannot publish the bundle {}", args.output.display()))?;
    output::record("bundle", Some(trace), args.json, &v, |v| {
        format!(
            "published    {}\n{}",
            args.output.display(),
            views::render_verification(v, None)
        )
    })
    .map(Output::ok)
}

/// Runs `verify` (exit 1 naming each file that does not match).
///
/// # Errors
/// Reading the bundle (or, with `--semantic`, its trace).
pub fn verify(args: &VerifyArgs) -> Result<Output> {
    let mut v = views::verify(&args.bundle)?;
    let mut semantic = None;
    if args.semantic && v.is_valid() {
        let (trace, analysis) = load(&args.bundle.join(views::TRACE_FILE), Detail::Full)?;
        let again = views::derive(&trace.doc, analysis)?;
        if let Some(manifest) = &v.manifest {
            let problems = views::semantic_problems(&args.bundle, manifest, &again);
            semantic = Some(problems.is_empty());
            v.problems.extend(problems);
        }
    } else if args.semantic {
        semantic = Some(false);
    }
    let code = if v.is_valid() { 0 } else { 1 };
    let report = VerifyReport {
        verification: v,
        semantic_match: semantic,
    };
    let stdout = output::record("verify", None, args.json, &report, |r| {
        views::render_verification(&r.verification, semantic)
    })?;
    Ok(Output::with_code(stdout, code))
}

/// Runs `series` (exit 1 with the typed reason when the bundles are refused).
///
/// # Errors
/// A bundle that cannot be read.
pub fn series(args: &SeriesArgs) -> Result<Output> {
    if let Some(page) = &args.html {
        for input in &args.bundles {
            crate::output_file::refuse_input(page, input)?;
        }
    }
    if let [dir] = args.bundles.as_slice() {
        if is_run_directory(dir) {
            return run_story(dir, args.json, args.html.as_deref());
        }
    }
    // a run directory is a story of its own: with others it is not one of the bundles
    if let Some(dir) = args.bundles.iter().find(|d| is_run_directory(d)) {
        anyhow::bail!(
            "{} is a run directory: series takes one run directory (its story), or the bundles of one run (step-* directories), not a run directory beside other inputs",
            dir.display()
        );
    }
    anyhow::ensure!(
        args.html.is_none(),
        "--html needs one run directory (a directory with run.json or step-* bundles)"
    );
    match views::build_series(&args.bundles) {
        Ok(s) => {
            output::record("series", None, args.json, &s, views::render_series).map(Output::ok)
        }
        Err(views::SeriesError::Bundle(e)) => Err(e.into()),
        Err(e) => {
            let stdout = output::record(
                "series",
                None,
                args.json,
                &views::Refused { refused: &e },
                |r| views::render_refusal(r.refused),
            )?;
            Ok(Output::with_code(stdout, 1))
        }
    }
}

/// A run directory: it has a `run.json`, or it holds `step-*` bundles and is not a bundle
/// itself.
pub fn is_run_directory(dir: &std::path::Path) -> bool {
    views::is_run_dir(dir)
        || (!dir.join(views::MANIFEST_FILE).exists()
            && views::list_bundles(dir).is_ok_and(|b| !b.is_empty()))
}

/// `series` of bundles, or (one run directory) its story: what `demo --every` prints.
///
/// # Errors
/// As [`series`].
pub fn run_series(paths: &[std::path::PathBuf], json: bool) -> Result<Output> {
    series(&SeriesArgs {
        bundles: paths.to_vec(),
        json,
        html: None,
    })
}

/// The run directory's bundles checked against its log: the `step-*` entries that are not the
/// run's bundles are left out of the story, each named with why.
fn trace_bundle_scan(
    dir: &std::path::Path,
    log: Option<&views::RunLog>,
) -> Result<views::RunContents> {
    views::scan_run_dir(dir, log)
        .with_context(|| format!("cannot read the run directory {}", dir.display()))
}

/// The most left-out entries the error of a run directory without bundles names (the rest are
/// counted): one bounded line however many `step-*` entries the directory holds.
const LEFT_OUT_NAMED: usize = 3;

/// The story of the run directory `dir` (exit 1 with the typed reason when its bundles are
/// refused as a series); with `html`, its page written there too.
fn run_story(dir: &std::path::Path, json: bool, html: Option<&std::path::Path>) -> Result<Output> {
    let log = views::read_run_log(dir)?;
    if log.is_none() {
        eprintln!(
            "candle-graph: warning: {} has no run.json (the run log): every step-* bundle in it \
             is read as the run's, and the run's schedule and its dropped or failed captures are \
             not known",
            trace_views::format::escape(&dir.display().to_string())
        );
    }
    let contents = trace_bundle_scan(dir, log.as_ref())?;
    if contents.bundles.is_empty() && !contents.left_out.is_empty() {
        let left_out = &contents.left_out;
        let mut why: Vec<String> = left_out
            .iter()
            .take(LEFT_OUT_NAMED)
            .map(|l| format!("{}: {}", trace_views::format::name(&l.name), l.reason))
            .collect();
        if left_out.len() > LEFT_OUT_NAMED {
            why.push(format!("and {} more", left_out.len() - LEFT_OUT_NAMED));
        }
        anyhow::bail!(
            "{} holds no bundle of its run; left out: {}",
            dir.display(),
            trace_views::format::escape(&why.join("; "))
        );
    }
    let series = match views::build_series(&contents.bundles) {
        Ok(s) => s,
        Err(views::SeriesError::Bundle(e)) => return Err(e.into()),
        Err(e) => {
            let stdout =
                output::record("series", None, json, &views::Refused { refused: &e }, |r| {
                    views::render_refusal(r.refused)
                })?;
            return Ok(Output::with_code(stdout, 1));
        }
    };
    let mut story = trace_views::run_story::build(&series, log.as_ref())
        .with_context(|| format!("the story of the run directory {}", dir.display()))?;
    story.set_left_out(contents.left_out);
    story.unbundled_captures = contents.unbundled;
    if let Some(file) = html {
        let page = trace_views::run_story::html::html(&story, &dir.display().to_string());
        crate::output_file::write(file, page.as_bytes(), "run.html")?;
        eprintln!(
            "candle-graph: wrote {} ({}); open it in a browser (it loads nothing from the network)",
            file.display(),
            trace_views::format::bytes(page.len() as u64)
        );
    }
    output::record(
        "run-story",
        None,
        json,
        &story,
        trace_views::run_story::text::render,
    )
    .map(Output::ok)
}
