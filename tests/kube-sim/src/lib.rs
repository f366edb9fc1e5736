//! `kube-sim`: an in-process Kubernetes API stand-in for end-to-end tests.
//!
//! Start one with [`Sim::start`], point clients at [`SimHandle::kubeconfig_path`], inspect
//! or seed objects through [`SimHandle`], and change the simulated cluster's behaviour with
//! [`SimHandle::update_config`] and the fault-injection methods.
pub mod admission;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod controllers;
pub mod crds;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod eviction;
pub mod faults;
pub mod fixtures;
pub mod kubeconfig;
pub mod metrics_api;
pub mod openapi;
pub mod patch;
pub mod pod_admission;
pub mod resources;
pub mod rest;
pub mod runner;
pub mod schema;
pub mod selectors;
pub mod serving;
pub mod snapshot;
pub mod store;
pub mod tls;
pub mod versions;
pub mod webhook_auth;

use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::watch;

pub use auth::{Permission, UserInfo};
pub use controllers::SimConfig;
pub use error::ApiError;
pub use eviction::EvictionRecord;
pub use faults::FaultRule;
pub use store::{Store, UpdateMode};

/// Errors from starting the stand-in.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("certificate generation failed: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot load object: {0}")]
    Load(String),
}

/// Options for [`Sim::start`].
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Simulated seconds per wall-clock second.
    pub time_scale: f64,
    /// Objects loaded before serving (namespaces they use are created).
    pub objects: Vec<Value>,
    /// A snapshot file loaded after `objects` (JSON is streamed object by object).
    pub snapshot_file: Option<PathBuf>,
    pub config: SimConfig,
    /// Run the controller loop.
    pub controllers: bool,
    /// Controller tick (real time).
    pub tick: Duration,
    /// Watch events kept per resource; older resourceVersions get 410 Expired.
    pub watch_history: usize,
    /// Where to write the kubeconfig (default: a file in the system temp dir).
    pub kubeconfig_path: Option<PathBuf>,
    /// Webhook service overrides: `"namespace/name"` → address to connect to.
    pub service_overrides: HashMap<String, SocketAddr>,
    /// Period of BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Client certificates presented to webhooks (kube-apiserver's
    /// `--admission-control-config-file`); default: none (anonymous calls).
    pub webhook_auth: webhook_auth::WebhookAuth,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            port: 0,
            time_scale: 1.0,
            objects: Vec::new(),
            snapshot_file: None,
            config: SimConfig {
                pod_start_delay_seconds: 1.0,
                ..Default::default()
            },
            controllers: true,
            tick: Duration::from_millis(50),
            watch_history: 1000,
            kubeconfig_path: None,
            service_overrides: HashMap::new(),
            bookmark_interval: Duration::from_secs(5),
            webhook_auth: webhook_auth::WebhookAuth::default(),
        }
    }
}

/// State shared by the HTTP handlers, the controller loop and the handle.
pub struct SimState {
    pub store: Store,
    pub auth: auth::Auth,
    pub faults: faults::Faults,
    /// Evictions the API accepted.
    pub evictions: eviction::EvictionLog,
    /// Usage served by `metrics.k8s.io`.
    pub metrics: metrics_api::MetricsUsage,
    config: RwLock<SimConfig>,
    overrides: RwLock<HashMap<String, SocketAddr>>,
    drop_watches: watch::Sender<u64>,
    /// Bumped on every [`SimHandle::update_config`] (the controllers re-reconcile everything).
    config_changed: watch::Sender<u64>,
    shutdown: watch::Sender<bool>,
    pub bookmark_interval: Duration,
    /// Whether `sendInitialEvents` watches (WatchList) are served; off answers them as
    /// kube-apiserver does with its `WatchList` feature gate off (422).
    pub watch_list: std::sync::atomic::AtomicBool,
    /// Client certificates presented to webhooks.
    pub webhook_auth: webhook_auth::WebhookAuth,
}

impl SimState {
    pub fn config(&self) -> SimConfig {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Address a webhook `service` reference resolves to.
    pub fn service_override(&self, namespace: &str, name: &str) -> Option<SocketAddr> {
        self.overrides
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&format!("{namespace}/{name}"))
            .copied()
    }

    /// Notified when the controllers' configuration changes.
    pub fn config_rx(&self) -> watch::Receiver<u64> {
        self.config_changed.subscribe()
    }

    pub fn drop_watches_rx(&self) -> watch::Receiver<u64> {
        self.drop_watches.subscribe()
    }

    pub fn shutdown_rx(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}

/// Entry point.
pub struct Sim;

/// A running stand-in. Dropping it does not stop the server; call [`SimHandle::shutdown`].
#[derive(Clone)]
pub struct SimHandle {
    state: Arc<SimState>,
    url: String,
    ca_pem: String,
    token: String,
    kubeconfig_path: PathBuf,
    /// The address served, kept across restarts.
    addr: SocketAddr,
    tls: axum_server::tls_rustls::RustlsConfig,
    /// The running server (`None` while a restart is down).
    server: Arc<Mutex<Option<serving::Serving>>>,
}

impl Sim {
    /// [`Sim::start`] with `objects` and the controllers running.
    pub async fn start_with_objects(objects: Vec<Value>) -> Result<SimHandle, SimError> {
        Sim::start(SimOptions {
            objects,
            ..Default::default()
        })
        .await
    }

    /// [`Sim::start`] with `objects` and no controllers: the objects stay as they are written.
    pub async fn start_static(objects: Vec<Value>) -> Result<SimHandle, SimError> {
        Sim::start(SimOptions {
            objects,
            controllers: false,
            ..Default::default()
        })
        .await
    }

    /// Generates a CA, loads the objects, binds 127.0.0.1 and starts serving.
    pub async fn start(opts: SimOptions) -> Result<SimHandle, SimError> {
        tls::install_crypto_provider();
        let ca = tls::TestCa::new("kube-sim-ca")?;
        let serving = ca.issue(&["127.0.0.1", "localhost"])?;
        let clock = clock::SimClock::new(opts.time_scale);
        let (drop_tx, _) = watch::channel(0u64);
        let (shut_tx, _) = watch::channel(false);
        let (config_tx, _) = watch::channel(0u64);
        let state = Arc::new(SimState {
            store: Store::new(clock, opts.watch_history),
            auth: auth::Auth::default(),
            faults: faults::Faults::default(),
            evictions: eviction::EvictionLog::default(),
            metrics: metrics_api::MetricsUsage::default(),
            config: RwLock::new(opts.config.clone()),
            overrides: RwLock::new(opts.service_overrides.clone()),
            drop_watches: drop_tx,
            config_changed: config_tx,
            shutdown: shut_tx,
            bookmark_interval: opts.bookmark_interval,
            watch_list: std::sync::atomic::AtomicBool::new(true),
            webhook_auth: opts.webhook_auth.clone(),
        });
        let token = format!("kube-sim-{}", state.store.new_uid());
        state.auth.add_token(
            &token,
            UserInfo::new(
                "kube-sim-admin",
                &["system:masters", "system:authenticated"],
            ),
        );
        snapshot::load(&state.store, opts.objects).map_err(SimError::Load)?;
        if let Some(path) = &opts.snapshot_file {
            snapshot::load_file(&state.store, path).map_err(SimError::Load)?;
        }

        let listener = std::net::TcpListener::bind(("127.0.0.1", opts.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let url = format!("https://127.0.0.1:{}", addr.port());
        let config = axum_server::tls_rustls::RustlsConfig::from_pem(
            serving.cert_pem.clone().into_bytes(),
            serving.key_pem.clone().into_bytes(),
        )
        .await?;
        let server =
            serving::Serving::start(listener, config.clone(), rest::router(state.clone()))?;
        if opts.controllers {
            runner::manager::spawn(state.clone(), opts.tick)?;
        }
        let kubeconfig_path = opts.kubeconfig_path.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!(
                "kube-sim-{}-{}.kubeconfig",
                std::process::id(),
                addr.port()
            ))
        });
        std::fs::write(
            &kubeconfig_path,
            kubeconfig::render(&url, ca.ca_pem(), &token),
        )?;
        Ok(SimHandle {
            state,
            url,
            ca_pem: ca.ca_pem().to_string(),
            token,
            kubeconfig_path,
            addr,
            tls: config,
            server: Arc::new(Mutex::new(Some(server))),
        })
    }
}

impl SimHandle {
    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// PEM of the CA that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The admin bearer token (group `system:masters`).
    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig::render(&self.url, &self.ca_pem, &self.token)
    }

    /// Direct access to the object store (reads bypass HTTP, writes notify watchers).
    pub fn store(&self) -> &Store {
        &self.state.store
    }

    pub fn state(&self) -> &Arc<SimState> {
        &self.state
    }

    /// Current simulated time.
    pub fn now(&self) -> jiff::Timestamp {
        self.state.store.clock().now()
    }

    /// Reads an object by `apiVersion`, `kind`, namespace ("" for cluster-scoped) and name.
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let def = crds::lookup_kind(&self.state.store, api_version, kind)?;
        self.state.store.get(def, namespace, name)
    }

    /// Lists objects of a kind, optionally in one namespace.
    pub fn list(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        match crds::lookup_kind(&self.state.store, api_version, kind) {
            Some(def) => self.state.store.list(def, namespace).0,
            None => Vec::new(),
        }
    }

    /// Creates the object, or replaces it (spec and status) if it exists.
    pub fn apply(&self, obj: Value) -> Result<Value, ApiError> {
        let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let def = crds::lookup_kind(&self.state.store, av, kind)
            .ok_or_else(|| ApiError::bad_request(format!("unknown kind {av} {kind}")))?;
        let ns = crate::store::meta_str(&obj, "namespace");
        let name = crate::store::meta_str(&obj, "name");
        if def.namespaced && !ns.is_empty() {
            snapshot::ensure_namespace(&self.state.store, ns);
        }
        if self.state.store.get(def, ns, name).is_some() {
            let mut o = obj.clone();
            if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
            self.state.store.update(def, o, UpdateMode::Full, false)
        } else {
            self.state.store.create(def, obj, false, true)
        }
    }

    /// Loads a Kubernetes `List` / multi-document YAML or JSON text.
    pub fn load_text(&self, text: &str) -> Result<(), SimError> {
        let objs = snapshot::parse(text).map_err(SimError::Load)?;
        for o in objs {
            self.apply(o).map_err(|e| SimError::Load(e.to_string()))?;
        }
        Ok(())
    }

    /// Changes the controllers' configuration (stop a node, mark an image crashing, …).
    pub fn update_config(&self, f: impl FnOnce(&mut SimConfig)) {
        f(&mut self.state.config.write().unwrap_or_else(|e| e.into_inner()));
        self.state.config_changed.send_modify(|n| *n += 1);
    }

    pub fn config(&self) -> SimConfig {
        self.state.config()
    }

    /// Routes webhook calls for service `namespace/name` to `addr` (there is no cluster DNS).
    /// TLS still verifies the name `<name>.<namespace>.svc`.
    pub fn set_service_override(&self, namespace: &str, name: &str, addr: SocketAddr) {
        self.state
            .overrides
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(format!("{namespace}/{name}"), addr);
    }

    /// Sets the usage `metrics.k8s.io` reports for pod `namespace/name` (cpu in millicores,
    /// memory in bytes); it overrides the pod's usage annotations.
    pub fn set_pod_usage(&self, namespace: &str, name: &str, cpu_milli: i64, memory: i64) {
        self.state
            .metrics
            .set_pod(namespace, name, cpu_milli, memory);
    }

    /// Leaves node `name` out of `metrics.k8s.io` NodeMetrics (no sample yet) or brings it back.
    pub fn hide_node_metrics(&self, name: &str, hidden: bool) {
        self.state.metrics.hide_node(name, hidden);
    }

    /// Adds a bearer token for a user.
    pub fn add_token(&self, token: &str, user: UserInfo) {
        self.state.auth.add_token(token, user);
    }

    /// Adds an allow rule to the SubjectAccessReview table.
    pub fn allow(&self, p: Permission) {
        self.state.auth.allow(p);
    }

    /// Adds a fault rule; returns its id for [`SimHandle::remove_fault`].
    pub fn add_fault(&self, rule: FaultRule) -> u64 {
        self.state.faults.add(rule)
    }

    pub fn remove_fault(&self, id: u64) {
        self.state.faults.remove(id);
    }

    pub fn clear_faults(&self) {
        self.state.faults.clear();
    }

    /// Every eviction accepted so far (2xx, dry runs excluded), oldest first.
    pub fn evictions(&self) -> Vec<eviction::EvictionRecord> {
        self.state.evictions.all()
    }

    /// Serves (the default) or refuses `sendInitialEvents` watches, the streaming list of
    /// client-go's WatchList: refused, they get kube-apiserver's answer with its `WatchList`
    /// feature gate off (422 Invalid), so clients must fall back to a paginated list.
    pub fn set_watch_list(&self, enabled: bool) {
        self.state
            .watch_list
            .store(enabled, std::sync::atomic::Ordering::Relaxed);
    }

    /// Ends every open watch (clients see a clean end of stream and re-watch).
    pub fn drop_watches(&self) {
        self.state.drop_watches.send_modify(|n| *n += 1);
    }

    /// Forgets the watch history, so any watch from an older resourceVersion gets 410.
    pub fn compact_watch_history(&self) {
        self.state.store.compact();
    }

    /// Runs one controller reconcile synchronously (for tests with `controllers: false`).
    pub fn reconcile_once(&self) {
        let state = runner::cluster_state(&self.state);
        for a in controllers::reconcile_all(&state) {
            runner::apply_action(&self.state, a);
        }
    }

    /// Restarts the API server the way a killed and restarted kube-apiserver comes back with
    /// etcd intact: the listener closes and every open connection is reset (TCP RST: requests in
    /// flight fail and watches break with an error, not a clean end), nothing listens for
    /// `downtime`, then the same address serves again with the same CA, serving certificate and
    /// tokens. The store (objects and resourceVersions) is kept, the controllers keep running,
    /// and the watch history is compacted at the moment of coming back — kube-apiserver's watch
    /// cache starts at the current etcd revision, so resuming a watch from an older
    /// resourceVersion gets 410 Gone ("too old resource version").
    pub async fn restart(&self, downtime: Duration) -> Result<(), SimError> {
        let running = self.take_server();
        if let Some(s) = running {
            s.reset(Duration::from_secs(5)).await;
        }
        tokio::time::sleep(downtime).await;
        let listener = serving::rebind(self.addr, Duration::from_secs(5)).await?;
        self.state.store.compact();
        let server =
            serving::Serving::start(listener, self.tls.clone(), rest::router(self.state.clone()))?;
        *self.server.lock().unwrap_or_else(|e| e.into_inner()) = Some(server);
        Ok(())
    }

    fn take_server(&self) -> Option<serving::Serving> {
        self.server.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Stops serving, ends watches and the controller loop.
    pub async fn shutdown(&self) {
        let _ = self.state.shutdown.send(true);
        if let Some(s) = self.take_server() {
            s.graceful_stop().await;
        }
    }
}
