//! One cluster shared by every installed kubectl: each version drains its own node, all at the
//! same time, while a sampler watches the apps' Ready replicas.

use std::collections::HashMap;
use std::path::PathBuf;

use super::*;

/// The kubectl binaries found (see [`kubectls`]); the missing ones are reported on stderr, and
/// the test fails when there is none at all.
pub fn installed_kubectls() -> Vec<(String, PathBuf)> {
    let (bins, missing) = kubectls();
    for m in &missing {
        eprintln!("kubectl binary missing, not tested: {m}");
    }
    assert!(
        !bins.is_empty(),
        "no kubectl found at all (missing: {missing:?}); CI must provide kubectl 1.27–1.33"
    );
    bins
}

/// What a failed assertion about kubectl `label`'s drain shows: its output and the webhook's logs.
pub fn drain_context(label: &str, out: &impl std::fmt::Debug, webhook: &Webhook) -> String {
    format!(
        "kubectl {label}: {out:?}\nwebhook logs:\n{}",
        webhook.logs()
    )
}

/// A kubectl label usable in object names (`1.27` → `1-27`).
pub fn kubectl_slug(label: &str) -> String {
    label.replace('.', "-")
}

/// Asserts that every sampled app always had a serving replica.
pub fn assert_never_zero(series: &[(String, Series)], context: &str) {
    for (app, s) in series {
        assert!(s.samples > 0, "{context}: no samples of {app}");
        assert!(
            s.min_ready_pods >= 1 && s.min_ready_replicas >= 1,
            "{context}: {app} had 0 Ready replicas ({s:?})"
        );
    }
}

/// Every installed kubectl with its own tainted node `{prefix}-{slug}` holding all replicas of
/// the Deployment `web-{slug}`, two spare nodes, and the guard registered.
pub struct PerKubectl {
    pub bins: Vec<(String, PathBuf)>,
    pub cluster: Cluster,
    pub webhook: Webhook,
    pub apps: Vec<String>,
    /// Each app's `metadata.generation` before the drains.
    pub generations: HashMap<String, i64>,
    prefix: String,
    _certs: GeneratedCerts,
}

impl PerKubectl {
    /// Starts the cluster, waits until each app's `replicas` pods are Ready on its node, then
    /// makes the spare nodes schedulable and registers the guard.
    pub async fn start(prefix: &str, taint: &str, replicas: i64) -> PerKubectl {
        let bins = installed_kubectls();
        let mut objects = vec![node("spare-1", false), node("spare-2", false)];
        for (label, _) in &bins {
            let slug = kubectl_slug(label);
            objects.push(tainted_node(&format!("{prefix}-{slug}"), taint, &slug));
            objects.push(tolerating(
                deployment(&format!("web-{slug}"), replicas, Strategy::Default),
                taint,
                &slug,
            ));
        }
        let cluster = Cluster::start(objects).await;
        let want = usize::try_from(replicas).unwrap_or(0);
        for (label, _) in &bins {
            let slug = kubectl_slug(label);
            cluster
                .wait_ready_on(
                    &[(&format!("web-{slug}"), want)],
                    &format!("{prefix}-{slug}"),
                )
                .await;
        }
        cluster.set_schedulable("spare-1", true);
        cluster.set_schedulable("spare-2", true);
        let (webhook, certs) = guarded(&cluster, &[]).await;
        let apps: Vec<String> = bins
            .iter()
            .map(|(l, _)| format!("web-{}", kubectl_slug(l)))
            .collect();
        let generations = apps
            .iter()
            .map(|a| {
                let g = cluster.deployment(a)["metadata"]["generation"].as_i64();
                (a.clone(), g.unwrap_or(0))
            })
            .collect();
        PerKubectl {
            bins,
            cluster,
            webhook,
            apps,
            generations,
            prefix: prefix.to_string(),
            _certs: certs,
        }
    }

    /// The node that kubectl `label` drains.
    pub fn node_of(&self, label: &str) -> String {
        format!("{}-{}", self.prefix, kubectl_slug(label))
    }

    /// The app on the node that kubectl `label` drains.
    pub fn app_of(&self, label: &str) -> String {
        format!("web-{}", kubectl_slug(label))
    }

    /// Every kubectl drains its node at once (`--timeout 120s`) while the apps are sampled:
    /// each version's drain output, and the apps' Ready series.
    pub async fn drain_all(&self) -> (Vec<(String, Output)>, Vec<(String, Series)>) {
        let app_refs: Vec<&str> = self.apps.iter().map(String::as_str).collect();
        let sampler = Sampler::start(&self.cluster.sim, &app_refs);
        let drains = self.bins.iter().map(|(label, bin)| async move {
            let node = self.node_of(label);
            (
                label.clone(),
                drain(bin, &self.cluster, &node, "120s", &[]).await,
            )
        });
        let outputs = futures::future::join_all(drains).await;
        (outputs, sampler.finish().await)
    }

    /// `app`'s generation now minus before the drains (1 = restarted exactly once).
    pub fn restarts(&self, app: &str) -> i64 {
        let now = self.cluster.deployment(app)["metadata"]["generation"]
            .as_i64()
            .unwrap_or(0);
        now - self.generations.get(app).copied().unwrap_or(0)
    }
}
