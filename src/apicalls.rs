//! The single list of Kubernetes API calls each component makes (the Helm chart's RBAC is tested
//! against it). Filled in by the packaging issue; every component keeps it accurate.
