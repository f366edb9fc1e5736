//! `tracing` subscriber set-up shared by every subcommand.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Log output format (`--logging-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable text.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber. `verbosity` follows klog's `-v`: 0-1 info, 2-3 debug, 4+ trace.
/// `RUST_LOG` overrides it. Logs go to stderr so stdout stays machine-readable; colours only when
/// stderr is a terminal (container logs and files get plain text).
pub fn init(format: LogFormat, verbosity: u8) {
    init_with(format, verbosity, None);
}

/// [`init`], also installing `otel` (the OpenTelemetry layer of `run --otel-collector-endpoint`).
/// The spans exported there are left out of the log output.
pub fn init_with(format: LogFormat, verbosity: u8, otel: Option<crate::live::otel::OtelLayer>) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let default = match verbosity {
        0 | 1 => "info",
        2 | 3 => "debug",
        _ => "trace",
    };
    // kube's client logs every failed request at ERROR; the caller gets the same error and logs
    // it once with context (kind, retry delay), so below trace the duplicate is left out.
    let default = if verbosity >= 4 {
        default.to_string()
    } else {
        format!("{default},kube_client::client::builder=off")
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let Some(otel) = otel else {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal());
        let _ = match format {
            LogFormat::Text => builder.try_init(),
            LogFormat::Json => builder.json().try_init(),
        };
        return;
    };
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let not_otel_spans =
        tracing_subscriber::filter::filter_fn(|m| m.target() != crate::live::otel::TARGET);
    let fmt = match format {
        LogFormat::Text => fmt.with_filter(not_otel_spans).boxed(),
        LogFormat::Json => fmt.json().with_filter(not_otel_spans).boxed(),
    };
    let _ = tracing_subscriber::registry()
        .with(vec![otel, fmt])
        .with(filter)
        .try_init();
}
