//! `--window START..END`: a time window relative to the start of the measured region, parsed
//! from the command line's text (`10ms..25.5ms`, `..1.5us`, `2s..`); the Chrome export keeps
//! what overlaps it.

use std::str::FromStr;

use serde::Serialize;

/// A time window relative to the start of the measured region, ns; an absent bound is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Window {
    /// Start, ns after the time origin.
    pub start_ns: Option<u64>,
    /// End, ns after the time origin (inclusive).
    pub end_ns: Option<u64>,
}

impl FromStr for Window {
    type Err = WindowError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, b) = s
            .split_once("..")
            .ok_or_else(|| WindowError::Shape(s.to_string()))?;
        let bound = |x: &str| -> Result<Option<u64>, WindowError> {
            if x.trim().is_empty() {
                Ok(None)
            } else {
                parse_duration_ns(x).map(Some)
            }
        };
        let w = Window {
            start_ns: bound(a)?,
            end_ns: bound(b)?,
        };
        if let (Some(x), Some(y)) = (w.start_ns, w.end_ns) {
            if x > y {
                return Err(WindowError::Reversed(s.to_string()));
            }
        }
        Ok(w)
    }
}

/// A `--window` that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// Not `START..END`.
    #[error("a window is START..END (either side may be empty), e.g. 10ms..25ms, not `{0}`")]
    Shape(String),
    /// A bound that is not a duration.
    #[error("`{0}` is not a duration: a number with a unit, ns, us (µs), ms or s, e.g. 1.5ms")]
    Duration(String),
    /// START after END.
    #[error("the window starts after it ends ({0})")]
    Reversed(String),
}

/// Parses `1500`, `1500ns`, `12.5us`, `12.5µs`, `3ms`, `0.2s` into ns (a bare number is ns).
pub(super) fn parse_duration_ns(s: &str) -> Result<u64, WindowError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim() {
        "" | "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(WindowError::Duration(s.to_string())),
    };
    let bad = || WindowError::Duration(s.to_string());
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(bad());
    }
    let int: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    let digits = scale.ilog10() as usize;
    if frac.len() > digits || !frac.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad()); // finer than a nanosecond
    }
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().map_err(|_| bad())? * 10u64.pow((digits - frac.len()) as u32)
    };
    int.checked_mul(scale)
        .and_then(|v| v.checked_add(frac_ns))
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_with_units_and_open_ends() {
        let w: Window = "10ms..25.5ms".parse().unwrap();
        assert_eq!((w.start_ns, w.end_ns), (Some(10_000_000), Some(25_500_000)));
        let w: Window = "..1.5us".parse().unwrap();
        assert_eq!((w.start_ns, w.end_ns), (None, Some(1_500)));
        let w: Window = "2s..".parse().unwrap();
        assert_eq!((w.start_ns, w.end_ns), (Some(2_000_000_000), None));
        let w: Window = "7..9ns".parse().unwrap();
        assert_eq!((w.start_ns, w.end_ns), (Some(7), Some(9)));
        assert_eq!("0.5µs..".parse::<Window>().unwrap().start_ns, Some(500));
        assert!(matches!(
            "10ms".parse::<Window>(),
            Err(WindowError::Shape(_))
        ));
        assert!(matches!(
            "1h..2h".parse::<Window>(),
            Err(WindowError::Duration(_))
        ));
        assert!(matches!(
            "1.0001us..".parse::<Window>(),
            Err(WindowError::Duration(_))
        ));
        assert!(matches!(
            "3ms..2ms".parse::<Window>(),
            Err(WindowError::Reversed(_))
        ));
        assert!(matches!(
            "99999999999999s..".parse::<Window>(),
            Err(WindowError::Duration(_))
        ));
    }
}
