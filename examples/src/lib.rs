//! Instrumented Candle training loops used by the candle-graph demo.
