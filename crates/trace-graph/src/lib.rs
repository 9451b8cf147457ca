//! Trace health, execution graph and findings (filled by the graph issue).
