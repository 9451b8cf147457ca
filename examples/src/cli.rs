//! The tiny argument parser of the runnable examples (`--out DIR`, `--steps N`, `--seed S`,
//! `--batch N`, `--deterministic`), so they need no CLI dependency.

use std::path::PathBuf;

use crate::model::ModelKind;
use crate::train::TrainConfig;

/// Parses `args` (without the program name) into a config for `model`; default output
/// directory `out/<model>`.
///
/// # Errors
/// An unknown flag or a missing/invalid value, as a message.
pub fn parse_example_args(
    model: ModelKind,
    args: impl IntoIterator<Item = String>,
) -> Result<TrainConfig, String> {
    let mut config = TrainConfig::new(model, PathBuf::from("out").join(model.as_str()));
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--out" => config.out_dir = PathBuf::from(value("--out")?),
            "--steps" => {
                config.steps = value("--steps")?
                    .parse()
                    .map_err(|e| format!("--steps: {e}"))?
            }
            "--seed" => {
                config.seed = value("--seed")?
                    .parse()
                    .map_err(|e| format!("--seed: {e}"))?
            }
            "--batch" => {
                let batch: usize = value("--batch")?
                    .parse()
                    .map_err(|e| format!("--batch: {e}"))?;
                match model {
                    ModelKind::Llama => config.sizes.llama.batch_size = batch,
                    ModelKind::Mlp => config.sizes.mlp.batch_size = batch,
                }
            }
            "--deterministic" => config.deterministic = true,
            "-h" | "--help" => {
                return Err(
                    "usage: [--out DIR] [--steps N] [--seed S] [--batch N] [--deterministic]"
                        .to_string(),
                )
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags() {
        let c = parse_example_args(
            ModelKind::Mlp,
            [
                "--out",
                "x",
                "--steps",
                "4",
                "--batch",
                "8",
                "--deterministic",
            ]
            .map(String::from),
        )
        .unwrap();
        assert_eq!(c.out_dir, PathBuf::from("x"));
        assert_eq!(c.steps, 4);
        assert_eq!(c.sizes.mlp.batch_size, 8);
        assert!(c.deterministic);
        assert!(parse_example_args(ModelKind::Mlp, ["--bogus".to_string()]).is_err());
        assert!(parse_example_args(ModelKind::Mlp, ["--steps".to_string()]).is_err());
    }
}
