//! How kube-sim authenticates to admission webhooks, the way kube-apiserver does:
//! `--admission-control-config-file` names an `AdmissionConfiguration` whose
//! `ValidatingAdmissionWebhook` plugin configuration (`WebhookAdmissionConfiguration`, inline or
//! in a file) gives a `kubeConfigFile`; that kubeconfig's `users[]` entries carry the client
//! certificate presented to each webhook, chosen by the entry's `name`.
//!
//! The choice follows k8s.io/apiserver `pkg/util/webhook/authentication.go`
//! (`defaultAuthenticationInfoResolver.clientConfig`): the target is `host:port` (a service is
//! `name.namespace.svc:port`; a URL without a port gets `:443`); try the exact name, then
//! `*.`-prefixed wildcards dropping one leading label at a time; when the port is 443, both again
//! without the port; then the `*` entry; then the user of the kubeconfig's current context;
//! otherwise anonymous (no client certificate). Only client certificates are used (kube-sim's
//! webhooks are HTTPS servers asking for certificates; tokens and passwords are ignored).
//! As kube-apiserver requires, `kubeConfigFile` must be an absolute path; a plugin `path` is
//! relative to the AdmissionConfiguration's directory; certificate files named in the kubeconfig
//! are relative to the kubeconfig's directory (client-go's rule).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::Value;

/// A client certificate and key (PEM) presented to a webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// Certificate chain, PEM.
    pub cert_pem: Vec<u8>,
    /// Private key, PEM.
    pub key_pem: Vec<u8>,
}

impl ClientCert {
    /// The identity for reqwest (certificate followed by key).
    pub fn identity(&self) -> Result<reqwest::Identity, String> {
        let mut pem = self.cert_pem.clone();
        pem.push(b'\n');
        pem.extend_from_slice(&self.key_pem);
        reqwest::Identity::from_pem(&pem).map_err(|e| format!("invalid client certificate: {e}"))
    }
}

/// The webhook kubeconfig's users, by name.
#[derive(Debug, Clone, Default)]
pub struct WebhookAuth {
    users: HashMap<String, Option<ClientCert>>,
    current_user: Option<String>,
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

fn yaml(path: &Path) -> Result<Value, String> {
    serde_saphyr::from_str(&read(path)?).map_err(|e| format!("{}: {e}", path.display()))
}

impl WebhookAuth {
    /// Reads an `AdmissionConfiguration` file (and the kubeconfig it names).
    pub fn from_admission_config(path: &Path) -> Result<WebhookAuth, String> {
        let config = yaml(path)?;
        let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind != "AdmissionConfiguration" {
            return Err(format!(
                "{}: kind is {kind:?}, expected AdmissionConfiguration",
                path.display()
            ));
        }
        let plugins = config
            .get("plugins")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let Some(plugin) = plugins
            .iter()
            .find(|p| p.get("name").and_then(Value::as_str) == Some("ValidatingAdmissionWebhook"))
        else {
            // No configuration for the plugin: anonymous calls, as kube-apiserver makes.
            return Ok(WebhookAuth::default());
        };
        let plugin_config = match (plugin.get("configuration"), plugin.get("path")) {
            (Some(c), _) => c.clone(),
            (None, Some(p)) => {
                let p = p.as_str().ok_or_else(|| {
                    format!("{}: plugins[].path must be a string", path.display())
                })?;
                let base = path.parent().unwrap_or(Path::new("."));
                yaml(&base.join(p))?
            }
            (None, None) => return Ok(WebhookAuth::default()),
        };
        let kind = plugin_config
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        if kind != "WebhookAdmissionConfiguration" && kind != "WebhookAdmission" {
            return Err(format!(
                "{}: ValidatingAdmissionWebhook configuration kind is {kind:?}, expected WebhookAdmissionConfiguration",
                path.display()
            ));
        }
        let Some(kubeconfig) = plugin_config.get("kubeConfigFile").and_then(Value::as_str) else {
            return Ok(WebhookAuth::default());
        };
        let kubeconfig = PathBuf::from(kubeconfig);
        // config/kubeconfig.go: "must be an absolute file path".
        if !kubeconfig.is_absolute() {
            return Err(format!(
                "{}: kubeConfigFile {:?} must be an absolute file path",
                path.display(),
                kubeconfig.display()
            ));
        }
        WebhookAuth::from_kubeconfig(&kubeconfig)
    }

    /// Reads the users of a kubeconfig.
    pub fn from_kubeconfig(path: &Path) -> Result<WebhookAuth, String> {
        let config = yaml(path)?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut users = HashMap::new();
        for entry in config
            .get("users")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
        {
            let name = entry
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{}: users[] entry without a name", path.display()))?
                .to_owned();
            let user = entry.get("user").cloned().unwrap_or(Value::Null);
            let cert = pem_of(&user, "client-certificate", base)
                .map_err(|e| format!("{}: user {name:?}: {e}", path.display()))?;
            let key = pem_of(&user, "client-key", base)
                .map_err(|e| format!("{}: user {name:?}: {e}", path.display()))?;
            let client = match (cert, key) {
                (Some(cert_pem), Some(key_pem)) => Some(ClientCert { cert_pem, key_pem }),
                (None, None) => None,
                _ => {
                    return Err(format!(
                        "{}: user {name:?} has a client certificate without a key or a key without a certificate",
                        path.display()
                    ));
                }
            };
            users.insert(name, client);
        }
        let current_user = config
            .get("current-context")
            .and_then(Value::as_str)
            .and_then(|current| {
                config
                    .get("contexts")
                    .and_then(Value::as_array)?
                    .iter()
                    .find(|c| c.get("name").and_then(Value::as_str) == Some(current))?
                    .pointer("/context/user")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
        Ok(WebhookAuth {
            users,
            current_user,
        })
    }

    /// The client certificate for a webhook at `target` (`host:port`); `None`: anonymous.
    pub fn for_target(&self, target: &str) -> Option<&ClientCert> {
        if let Some(found) = self.lookup_with_wildcards(target) {
            return found.as_ref();
        }
        if let Some((host, "443")) = target.rsplit_once(':')
            && let Some(found) = self.lookup_with_wildcards(host)
        {
            return found.as_ref();
        }
        if let Some(found) = self.users.get("*") {
            return found.as_ref();
        }
        self.current_user
            .as_ref()
            .and_then(|u| self.users.get(u))
            .and_then(Option::as_ref)
    }

    fn lookup_with_wildcards(&self, target: &str) -> Option<&Option<ClientCert>> {
        if let Some(found) = self.users.get(target) {
            return Some(found);
        }
        let steps: Vec<&str> = target.split('.').collect();
        (1..steps.len()).find_map(|i| self.users.get(&format!("*.{}", steps[i..].join("."))))
    }
}

/// `<field>-data` (base64 PEM) or `<field>` (a file, relative to `base`).
fn pem_of(user: &Value, field: &str, base: &Path) -> Result<Option<Vec<u8>>, String> {
    if let Some(data) = user
        .get(format!("{field}-data").as_str())
        .and_then(Value::as_str)
    {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|e| format!("{field}-data is not base64: {e}"));
    }
    match user.get(field).and_then(Value::as_str) {
        Some(file) => {
            let p = base.join(file);
            std::fs::read(&p)
                .map(Some)
                .map_err(|e| format!("reading {field} {}: {e}", p.display()))
        }
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(tag: &str) -> Option<ClientCert> {
        Some(ClientCert {
            cert_pem: tag.as_bytes().to_vec(),
            key_pem: tag.as_bytes().to_vec(),
        })
    }

    fn auth(names: &[&str]) -> WebhookAuth {
        WebhookAuth {
            users: names.iter().map(|n| (n.to_string(), cert(n))).collect(),
            current_user: None,
        }
    }

    fn chosen<'a>(a: &'a WebhookAuth, target: &str) -> Option<&'a str> {
        a.for_target(target)
            .map(|c| std::str::from_utf8(&c.cert_pem).unwrap_or(""))
    }

    #[test]
    fn names_are_matched_as_kube_apiserver_does() {
        let a = auth(&["guard.kd.svc:8443", "guard.kd.svc", "*.other.svc", "*"]);
        assert_eq!(chosen(&a, "guard.kd.svc:8443"), Some("guard.kd.svc:8443"));
        // Without the port only for 443.
        assert_eq!(chosen(&a, "guard.kd.svc:443"), Some("guard.kd.svc"));
        assert_eq!(chosen(&a, "x.other.svc:443"), Some("*.other.svc"));
        assert_eq!(chosen(&a, "guard.kd.svc:9443"), Some("*"));
        let no_default = auth(&["guard.kd.svc"]);
        assert_eq!(chosen(&no_default, "guard.kd.svc:9443"), None);
    }

    #[test]
    fn a_relative_kubeconfig_path_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let p = dir.path().join("admission.yaml");
        std::fs::write(
            &p,
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: ValidatingAdmissionWebhook\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: relative/kubeconfig\n",
        )
        .expect("write");
        let err = WebhookAuth::from_admission_config(&p).expect_err("refused");
        assert!(err.contains("absolute"), "{err}");
    }
}
