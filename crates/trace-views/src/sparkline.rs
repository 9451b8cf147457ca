//! A one-line terminal chart of a series (`▁▂▃▄▅▆▇█`), scaled from 0 to the series maximum.

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// One character per value; the maximum maps to `█`, 0 to `▁`. Empty input gives "".
pub fn sparkline(values: &[u64]) -> String {
    let max = values.iter().copied().max().unwrap_or(0);
    values
        .iter()
        .map(|&v| {
            if max == 0 {
                BARS[0]
            } else {
                let level = (v as u128 * (BARS.len() as u128 - 1) + max as u128 / 2) / max as u128;
                BARS[level as usize]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_to_the_maximum() {
        assert_eq!(sparkline(&[0, 50, 100]), "▁▅█");
        assert_eq!(sparkline(&[0, 0]), "▁▁");
        assert_eq!(sparkline(&[]), "");
        assert_eq!(sparkline(&[u64::MAX, 0]), "█▁");
    }
}
