//! `kube-descheduler plan`: the engine (and the guard's verdicts) on a snapshot file, or on a
//! live cluster read once (`--kubeconfig`, `--context`; see [`super::plan_live`]).

use std::path::PathBuf;

use anyhow::Context;

use crate::plan::{make_plan, render};
use kube_descheduler_engine::error::ConfigError;
use kube_descheduler_engine::{policy, snapshot};

/// Bundled example policy (used when `--policy` is not given and `examples/policy.yaml` is absent).
pub const EXAMPLE_POLICY: &str = include_str!("../../examples/policy.yaml");
/// Bundled example cluster (used when `--snapshot` is not given and `examples/cluster.yaml` is absent).
pub const EXAMPLE_CLUSTER: &str = include_str!("../../examples/cluster.yaml");

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// A table for people.
    Table,
    /// Exactly one JSON object on stdout.
    Json,
    /// One self-contained HTML page, written to FILE.
    Html,
}

/// Flags of `plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// DeschedulerPolicy file (v1alpha2 or v1alpha1). Default: examples/policy.yaml (bundled).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Cluster snapshot: a Kubernetes List (YAML or JSON). Default: examples/cluster.yaml (bundled).
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// Plan on the live cluster instead of a snapshot file, read once (every kind listed, no
    /// watch, no writes) with this kubeconfig FILE; without a value, the usual loading:
    /// $KUBECONFIG, ~/.kube/config, else the in-cluster configuration.
    #[arg(
        long,
        value_name = "FILE",
        num_args = 0..=1,
        // The value alone (an empty path) means the usual loading; clap's path parser would
        // refuse it.
        default_missing_value = "",
        value_parser = clap::builder::TypedValueParser::map(clap::builder::OsStringValueParser::new(), PathBuf::from),
        conflicts_with = "snapshot"
    )]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to read the live cluster from (implies --kubeconfig).
    #[arg(long, value_name = "NAME", conflicts_with = "snapshot")]
    pub context: Option<String>,
    /// How long reading the live cluster may take in all (Go duration); then plan fails with one
    /// line naming the API server (exit code 1).
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub request_timeout: String,
    /// The clock for every age computation (RFC 3339). Default: now.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: Output,
    /// The file `--output html` writes.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Explain why NAMESPACE/POD was or was not evicted, per profile and plugin (repeatable).
    #[arg(long, value_name = "NAMESPACE/POD")]
    pub explain: Vec<String>,
    /// Explain a node: usage per resource against every threshold and its class (repeatable).
    #[arg(long, value_name = "NODE")]
    pub explain_node: Vec<String>,
    /// Show every node in the node-usage tables (default: the first 20, interesting ones first).
    #[arg(long)]
    pub all_nodes: bool,
    /// Plan as if the eviction guard were not installed (every eviction succeeds).
    #[arg(long)]
    pub no_guard: bool,
    /// Refuse an inconsistent snapshot (duplicate pods, pods on unknown nodes, nodes with
    /// negative or zero allocatable) instead of warning and planning anyway.
    #[arg(long)]
    pub strict: bool,
    /// Print timings and peak memory to stderr as one JSON line (used by the benchmark).
    #[arg(long, hide = true)]
    pub stats: bool,
    /// metrics.k8s.io usage for LowNodeUtilization `metricsUtilization` (KubernetesMetrics): a
    /// NodeMetricsList / PodMetricsList file as `kubectl get --raw
    /// /apis/metrics.k8s.io/v1beta1/nodes` (and `.../pods`) prints. Repeatable.
    #[arg(long = "metrics", value_name = "FILE")]
    pub metrics: Vec<PathBuf>,
    /// Prometheus server to run the policy's `metricsUtilization.prometheus.query` against.
    #[arg(long, value_name = "URL")]
    pub prometheus_url: Option<String>,
    /// File holding the bearer token for `--prometheus-url`.
    #[arg(long, value_name = "FILE", requires = "prometheus_url")]
    pub prometheus_token_file: Option<PathBuf>,
    /// The cluster's kube-scheduler configuration (`KubeSchedulerConfiguration`,
    /// kubescheduler.config.k8s.io/v1) for DefaultEvictor `placement` predictions. Default:
    /// kube-scheduler's default profile.
    #[arg(long, value_name = "FILE")]
    pub scheduler_config: Option<PathBuf>,
    /// The cluster's kube-scheduler version (`MAJOR.MINOR`, e.g. `1.35`) for `placement`
    /// predictions: before 1.36 NodeResourcesBalancedAllocation scored the balance with the pod
    /// alone, since then the change the pod makes to it. Default: with --kubeconfig the API
    /// server's version (one that cannot be read keeps the pre-1.36 scoring, with a warning);
    /// with a snapshot file, the pre-1.36 scoring.
    #[arg(long, value_name = "VERSION", value_parser = super::scheduler_version::parse)]
    pub scheduler_version: Option<(u32, u32)>,
    /// Show which path `run --eviction-api` would take for the evictions: `Eviction` (POST the
    /// pod's eviction subresource) or `EvictionRequest` (create an EvictionRequest). Shown in the
    /// table and as `evictionApi` in the JSON; the predicted outcomes are the same.
    #[arg(long, value_enum, value_name = "API")]
    pub eviction_api: Option<crate::live::evreq::EvictionApi>,
    /// Log level verbosity (0-5).
    #[arg(short = 'v', default_value_t = 0)]
    pub verbosity: u8,
}

impl PlanArgs {
    /// Where the live cluster is read from, when it is (`--kubeconfig` or `--context` given).
    pub fn live_source(&self) -> Option<crate::cluster::client::Source> {
        (self.kubeconfig.is_some() || self.context.is_some()).then(|| {
            crate::cluster::client::Source {
                file: self
                    .kubeconfig
                    .clone()
                    .filter(|f| !f.as_os_str().is_empty()),
                context: self.context.clone(),
            }
        })
    }

    /// As `kubectl descheduler plan` (the binary run as a kubectl plugin): without `--snapshot`,
    /// the live cluster of kubectl's configuration is read.
    pub fn default_to_live(&mut self) {
        if self.snapshot.is_none() && self.kubeconfig.is_none() {
            self.kubeconfig = Some(PathBuf::new());
        }
    }
}

fn read_or_bundled(
    given: &Option<PathBuf>,
    default_path: &str,
    bundled: &'static str,
) -> anyhow::Result<(String, String)> {
    match given {
        Some(p) => Ok((
            std::fs::read_to_string(p)
                .map_err(|e| ConfigError::new(format!("cannot read {}: {e}", p.display())))?,
            p.display().to_string(),
        )),
        None => match std::fs::read_to_string(default_path) {
            Ok(text) => Ok((text, default_path.to_string())),
            Err(_) => Ok((bundled.to_string(), format!("{default_path} (bundled)"))),
        },
    }
}

/// Plans evictions with the plugins of `registry` and prints the plan.
pub fn run_with(
    args: PlanArgs,
    registry: &kube_descheduler_engine::framework::Registry,
) -> anyhow::Result<()> {
    super::logging::init(super::logging::LogFormat::Text, args.verbosity);
    // One piece of work, then the process ends: freed memory is reused, never handed back.
    crate::memory::keep_free_memory();
    let now = now_arg(&args)?;
    let html_file = html_file_arg(&args)?;
    let request_timeout = request_timeout_arg(&args)?;
    let mut policy = load_policy(&args, registry)?;
    let started = std::time::Instant::now();
    let mut snapshot = load_snapshot(&args, &mut policy, request_timeout)?;
    let loaded = started.elapsed();
    let verdict = (!args.no_guard).then(|| {
        kube_descheduler_guard::answer::api_and_guard_verdict(
            &snapshot,
            now,
            kube_descheduler_guard::GuardConfig::default(),
        )
    });
    let verdict_ready = started.elapsed();
    let explain_started = std::time::Instant::now();
    let prepared = (!args.explain.is_empty())
        .then(|| crate::plan::explain::prepare(&policy, &snapshot, now, &args.explain));
    let mut explain_time = explain_started.elapsed();
    let cpu_before = thread_cpu_seconds();
    let mut plan = make_plan(&policy, &mut snapshot, now, verdict);
    plan.eviction_api = args.eviction_api.map(|a| a.as_str().to_string());
    for w in &plan.summary.warnings {
        eprintln!("warning: {w}");
    }
    let cycle_cpu = thread_cpu_seconds() - cpu_before;
    let explain_started = std::time::Instant::now();
    if let Some(prepared) = prepared {
        plan.explanations =
            crate::plan::explain::finish(prepared, &policy, &plan, &plan.limit_hits);
    }
    plan.node_explanations = args
        .explain_node
        .iter()
        .flat_map(|n| crate::plan::explain::explain_node(&plan, &snapshot, n))
        .collect();
    explain_time += explain_started.elapsed();
    let planned = started.elapsed();
    write_plan(&plan, &args, html_file.as_deref())?;
    if args.stats {
        eprintln!(
            "{}",
            serde_json::json!({
                "loadSeconds": loaded.as_secs_f64(),
                "guardSetupSeconds": (verdict_ready - loaded).as_secs_f64(),
                "cycleSeconds": (planned - loaded).as_secs_f64(),
                "explainSeconds": explain_time.as_secs_f64(),
                "cycleCpuSeconds": cycle_cpu,
                "totalSeconds": planned.as_secs_f64(),
                "renderSeconds": (started.elapsed() - planned).as_secs_f64(),
                "peakRssKiB": proc_status_kib("VmHWM:"),
                "rssAfterKiB": proc_status_kib("VmRSS:"),
                "nodes": snapshot.nodes.len(),
                "pods": snapshot.pods.len(),
                "evictions": plan.evictions.len(),
            })
        );
    }
    // The process ends right after this: freeing a large snapshot object by object would only
    // delay the exit (it takes noticeable time at 150,000 pods).
    std::mem::forget(snapshot);
    std::mem::forget(plan);
    Ok(())
}

/// `--now`, else the current time.
fn now_arg(args: &PlanArgs) -> anyhow::Result<jiff::Timestamp> {
    Ok(match &args.now {
        Some(s) => s.parse::<jiff::Timestamp>().map_err(|e| {
            ConfigError::new(format!(
                "--now: expected an RFC 3339 time such as 2026-01-01T00:00:00Z, got {s:?}: {e}"
            ))
        })?,
        None => jiff::Timestamp::now(),
    })
}

/// The report file: required by `--output html`, refused with the other outputs.
fn html_file_arg(args: &PlanArgs) -> anyhow::Result<Option<PathBuf>> {
    match (args.output, &args.file) {
        (Output::Html, Some(f)) => Ok(Some(f.clone())),
        (Output::Html, None) => Err(ConfigError::new(
            "--output html needs a FILE to write the report to (plan --output html report.html)",
        )
        .into()),
        (_, Some(f)) => Err(ConfigError::new(format!(
            "FILE {}: only --output html writes a file (table and json go to stdout)",
            f.display()
        ))
        .into()),
        (_, None) => Ok(None),
    }
}

/// `--request-timeout`: a Go duration greater than 0.
fn request_timeout_arg(args: &PlanArgs) -> anyhow::Result<std::time::Duration> {
    Ok(
        kube_descheduler_engine::duration::parse_go_duration(&args.request_timeout)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                ConfigError::new(format!(
                    "--request-timeout: expected a Go duration greater than 0 such as 30s, got {:?}",
                    args.request_timeout
                ))
            })?,
    )
}

/// The policy (`--policy`, else the bundled example) with `--scheduler-config` applied.
fn load_policy(
    args: &PlanArgs,
    registry: &kube_descheduler_engine::framework::Registry,
) -> anyhow::Result<policy::Policy> {
    let (policy_text, policy_name) =
        read_or_bundled(&args.policy, "examples/policy.yaml", EXAMPLE_POLICY)?;
    // A WebAssembly plugin's relative `module` resolves against the policy file's directory.
    let policy_dir = args.policy.as_deref().and_then(std::path::Path::parent);
    let mut policy = policy::load_text(&policy_text, registry, policy_dir)
        .map_err(|e| ConfigError::new(format!("policy {policy_name}: {}", e.0)))?;
    if let Some(path) = &args.scheduler_config {
        policy.cycle.scheduler =
            std::sync::Arc::new(kube_descheduler_engine::placement::config::load_file(path)?);
    }
    if let Some(v) = args.scheduler_version {
        super::scheduler_version::apply(&mut policy, v);
    }
    Ok(policy)
}

/// The cluster to plan on — read from a live cluster, a snapshot file or the bundled example —
/// with the measured usage the policy needs; an inconsistent snapshot fails with `--strict`. A
/// live cluster read without `--scheduler-version` sets the policy's to the API server's.
fn load_snapshot(
    args: &PlanArgs,
    policy: &mut policy::Policy,
    request_timeout: std::time::Duration,
) -> anyhow::Result<snapshot::Snapshot> {
    let mut cluster_metrics = None;
    let mut snapshot = match (args.live_source(), &args.snapshot) {
        (Some(source), _) => {
            let read = super::plan_live::read(
                &source,
                request_timeout,
                policy.metrics.kubernetes && args.metrics.is_empty(),
                args.scheduler_version.is_none(),
            )?;
            cluster_metrics = read.metrics;
            let mut snapshot = read.snapshot;
            match read.server_version.map(super::scheduler_version::resolve) {
                Some(Ok(v)) => super::scheduler_version::apply(policy, v),
                Some(Err(warning)) => snapshot.warnings.push(warning),
                None => {}
            }
            snapshot
        }
        (None, Some(path)) => snapshot::load::load_file(path)?,
        (None, None) => {
            let (text, name) = read_or_bundled(&None, "examples/cluster.yaml", EXAMPLE_CLUSTER)?;
            snapshot::load::load_bytes(text.as_bytes())
                .map_err(|e| ConfigError::new(format!("snapshot {name}: {}", e.0)))?
        }
    };
    let mut metric_warnings = Vec::new();
    let inputs = crate::plan::measured::MetricsInputs {
        files: args.metrics.clone(),
        prometheus_url: args.prometheus_url.clone(),
        prometheus_token_file: args.prometheus_token_file.clone(),
        cluster: cluster_metrics,
    };
    if let Some(m) = crate::plan::measured::collect(&policy.metrics, &inputs, &mut metric_warnings)
        .map_err(ConfigError::new)?
    {
        snapshot.measured = Some(std::sync::Arc::new(m));
    }
    snapshot.warnings.extend(metric_warnings);
    if args.strict && !snapshot.inconsistencies.is_empty() {
        let kinds: Vec<String> = snapshot
            .inconsistencies
            .iter()
            .map(ToString::to_string)
            .collect();
        return Err(ConfigError::new(format!(
            "snapshot is inconsistent (--strict): {}",
            kinds.join("; ")
        ))
        .into());
    }
    Ok(snapshot)
}

/// Writes the HTML report to `html_file`, else the table or JSON to stdout.
fn write_plan(
    plan: &crate::plan::Plan,
    args: &PlanArgs,
    html_file: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    use std::io::Write;
    if let Some(path) = html_file {
        let file = std::fs::File::create(path).map_err(|e| {
            ConfigError::new(format!("FILE {}: cannot create: {e}", path.display()))
        })?;
        let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
        crate::plan::html::write_html(plan, &mut out)
            .and_then(|()| out.flush())
            .with_context(|| format!("writing the report to {}", path.display()))?;
        println!(
            "wrote {} ({} eviction attempts: {} evicted, {} deflected, {} denied, {} errors)",
            path.display(),
            plan.evictions.len(),
            plan.summary.evicted,
            plan.summary.deflected,
            plan.summary.denied,
            plan.summary.errors
        );
        return Ok(());
    }
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    match args.output {
        Output::Json => render::write_json(plan, &mut out),
        _ => writeln!(
            out,
            "{}{}{}{}",
            args.eviction_api
                .map(|a| format!("eviction path: {}\n", a.describe()))
                .unwrap_or_default(),
            render::table(plan, args.all_nodes).trim_end(),
            section(crate::plan::explain::render_pods(&plan.explanations)),
            section(crate::plan::explain::render_nodes(&plan.node_explanations)),
        ),
    }
    .and_then(|()| out.flush())
    .context("writing the plan to stdout")
}

/// `text` as a section after the table (a blank line before it), or nothing.
fn section(text: String) -> String {
    if text.is_empty() {
        text
    } else {
        format!("\n\n{}", text.trim_end())
    }
}

/// CPU time this thread has run, in seconds (`/proc/thread-self/schedstat`; 0 where unavailable).
/// The cycle runs on one thread, so this measures it even on a busy machine.
fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// A `/proc/self/status` memory figure (`VmHWM:` peak or `VmRSS:` current), in KiB; 0 where /proc
/// is unavailable.
fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
