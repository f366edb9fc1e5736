//! Writes a kubeconfig (bearer token) for the stand-in.
use base64::Engine;

/// Kubeconfig YAML pointing at `server` with the CA and a bearer token.
pub fn render(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kube-sim\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\ncontexts:\n- name: kube-sim\n  context:\n    cluster: kube-sim\n    user: kube-sim-admin\n    namespace: default\ncurrent-context: kube-sim\nusers:\n- name: kube-sim-admin\n  user:\n    token: {token}\npreferences: {{}}\n"
    )
}
