//! Candle instrumentation that writes candle-graph traces (filled by the probe issues).
