//! Memory analysis of candle-graph traces (filled by the memory issues).
