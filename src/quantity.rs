//! Exact Kubernetes quantity parsing.
