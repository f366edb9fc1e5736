//! The kube-scheduler version placement predictions score as when `--scheduler-version` is not
//! given to `run` or `plan --kubeconfig`: the API server's (`/version`), as a cluster's
//! kube-scheduler runs its control plane's version. An answer that cannot be read keeps the
//! pre-1.36 scoring, with a warning naming it.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::version::Info;
use kube_descheduler_engine::policy::Policy;

/// How long the API server may take to answer `/version`.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// `MAJOR.MINOR` of a `/version` answer: its `major` and `minor` (the leading digits: providers
/// write `minor` as `28+`), else its `gitVersion` (`v1.28.3-gke.100`).
pub fn version_of(info: &Info) -> Option<(u32, u32)> {
    let leading = |s: &str| -> Option<u32> {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    leading(&info.major)
        .zip(leading(&info.minor))
        .or_else(|| parse(&info.git_version).ok())
}

/// `--scheduler-version`: `MAJOR.MINOR` (a patch or a leading `v` is accepted and ignored).
pub fn parse(s: &str) -> Result<(u32, u32), String> {
    let t = s.trim().trim_start_matches('v');
    let mut parts = t.split('.');
    let major = parts.next().and_then(|p| p.parse().ok());
    let minor = parts.next().and_then(|p| p.parse().ok());
    match (major, minor) {
        (Some(major), Some(minor)) => Ok((major, minor)),
        _ => Err(format!("expected MAJOR.MINOR such as 1.35, got {s:?}")),
    }
}

/// Asks the API server its version, bounded by `timeout`.
pub async fn ask(client: &kube::Client, timeout: Duration) -> Result<Info, String> {
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(info)) => Ok(info),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {}s", timeout.as_secs_f64())),
    }
}

/// The version to score as, from the server's answer (`Err`: why not, the warning to show).
pub fn resolve(answer: Result<Info, String>) -> Result<(u32, u32), String> {
    const KEPT: &str = "placement predictions score as kube-scheduler before 1.36; \
                        give --scheduler-version MAJOR.MINOR";
    let info = answer.map_err(|e| {
        format!("--scheduler-version: cannot read the API server's version (/version: {e}); {KEPT}")
    })?;
    version_of(&info).ok_or_else(|| {
        format!(
            "--scheduler-version: cannot parse the API server's version (gitVersion {:?}, major \
             {:?}, minor {:?}); {KEPT}",
            info.git_version, info.major, info.minor
        )
    })
}

/// Scores `policy`'s placement predictions as kube-scheduler `major.minor`.
pub fn apply(policy: &mut Policy, (major, minor): (u32, u32)) {
    policy.cycle.scheduler =
        std::sync::Arc::new((*policy.cycle.scheduler).clone().for_version(major, minor));
}

/// `run` without `--scheduler-version`: asks the server and applies its version, logging which
/// (or the warning).
pub async fn default_from_server(client: &kube::Client, policy: &mut Policy) {
    match resolve(ask(client, VERSION_TIMEOUT).await) {
        Ok(v) => {
            apply(policy, v);
            tracing::info!(
                version = %format!("{}.{}", v.0, v.1),
                "placement predictions score as the API server's kube-scheduler version"
            );
        }
        Err(warning) => tracing::warn!("{warning}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: &str, minor: &str, git: &str) -> Info {
        Info {
            major: major.into(),
            minor: minor.into(),
            git_version: git.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_servers_version_is_read_from_major_minor_else_git_version() {
        assert_eq!(version_of(&info("1", "37", "v1.37.2")), Some((1, 37)));
        assert_eq!(
            version_of(&info("1", "28+", "v1.28.3-gke.100")),
            Some((1, 28))
        );
        assert_eq!(version_of(&info("", "", "v1.34.4")), Some((1, 34)));
        assert_eq!(version_of(&info("", "", "v1.35.0-rc.1")), Some((1, 35)));
        assert_eq!(version_of(&info("", "", "")), None);
        assert_eq!(version_of(&info("one", "x", "devel")), None);
    }

    #[test]
    fn an_unreadable_version_keeps_the_default_with_a_warning_naming_it() {
        assert_eq!(resolve(Ok(info("1", "37", "v1.37.2"))), Ok((1, 37)));
        let w = resolve(Ok(info("", "", "devel-build"))).expect_err("not a version");
        assert!(
            w.contains("\"devel-build\"")
                && w.contains("before 1.36")
                && w.contains("--scheduler-version"),
            "{w}"
        );
        let w = resolve(Err("404 Not Found".into())).expect_err("no answer");
        assert!(w.contains("/version: 404 Not Found"), "{w}");
    }

    #[test]
    fn applying_a_version_selects_the_balanced_allocation_scoring() {
        let mut policy = kube_descheduler_engine::policy::load_str(
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n",
        )
        .expect("policy");
        let change = |p: &Policy| p.cycle.scheduler.0.iter().all(|s| s.balanced_change);
        assert!(!change(&policy), "the default: the pre-1.36 scoring");
        apply(&mut policy, (1, 37));
        assert!(change(&policy));
        apply(&mut policy, (1, 34));
        assert!(!change(&policy));
    }
}
