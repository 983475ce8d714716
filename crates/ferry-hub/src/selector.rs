//! Label and field selectors: the one place that parses and evaluates them.
