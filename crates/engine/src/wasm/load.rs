//! Loading a WebAssembly plugin at policy load: its pluginConfig args (`module`, `sha256`,
//! `memoryLimit`, `timeout`, `args`), the checksum, compilation, the import and export checks,
//! the ABI version and the guest's own args check — every failure an [`ArgsError`] naming the field.
//! Also the one way a guest function is called ([`Guest::invoke`]), shared by the load-time checks
//! and the plugin's runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use wasmtime::{Engine, ExternType, Instance, InstancePre, Module, Store, ValType};

use super::abi::{self, CallState, CallTable, Interner, SnapshotRef};
use super::sandbox::{self, Limiter, Limits};
use crate::framework::args::{ArgsError, decode};
use crate::framework::registry::ExtensionPoint;

/// A wasm plugin's pluginConfig args as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WireArgs {
    module: String,
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default)]
    memory_limit: Option<serde_json::Value>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    args: serde_json::Value,
}

/// A wasm plugin's decoded settings.
#[derive(Debug, Clone)]
pub struct WasmConfig {
    /// The module file (relative paths resolved against the policy's directory).
    pub module: PathBuf,
    /// The expected SHA-256 of the file, lowercase hex.
    pub sha256: Option<String>,
    /// Memory cap and CPU bound.
    pub limits: Limits,
    /// `args` as JSON text, handed to the guest as is (`null` when absent).
    pub args_json: Vec<u8>,
}

/// Decodes a wasm plugin's pluginConfig `args`; `base` is the policy file's directory.
pub fn decode_config(
    args: &serde_json::Value,
    base: Option<&Path>,
) -> Result<WasmConfig, ArgsError> {
    let w: WireArgs = decode(args)?;
    if w.module.trim().is_empty() {
        return Err(ArgsError::new(
            "module",
            "the path of a .wasm file is required",
        ));
    }
    let path = PathBuf::from(&w.module);
    let module = match base {
        Some(b) if path.is_relative() => b.join(path),
        _ => path,
    };
    let sha256 = match w.sha256 {
        Some(h) => {
            let h = h.trim().to_ascii_lowercase();
            if h.len() != 64 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(ArgsError::new(
                    "sha256",
                    format!("expected 64 hexadecimal digits, got {h:?}"),
                ));
            }
            Some(h)
        }
        None => None,
    };
    let memory = match &w.memory_limit {
        None | Some(serde_json::Value::Null) => sandbox::DEFAULT_MEMORY_LIMIT,
        Some(v) => memory_limit(v)?,
    };
    let timeout = match &w.timeout {
        None => sandbox::DEFAULT_TIMEOUT,
        Some(t) => crate::duration::parse_go_duration(t)
            .ok()
            .filter(|d| !d.is_zero() && *d <= sandbox::MAX_TIMEOUT)
            .ok_or_else(|| {
                ArgsError::new(
                    "timeout",
                    format!("expected a Go duration above 0 and at most 10m such as 1s, got {t:?}"),
                )
            })?,
    };
    let args_json = serde_json::to_vec(&w.args)
        .map_err(|e| ArgsError::new("args", format!("cannot encode as JSON: {e}")))?;
    Ok(WasmConfig {
        module,
        sha256,
        limits: Limits { memory, timeout },
        args_json,
    })
}

/// `memoryLimit`: bytes as a number or a Kubernetes quantity (`64Mi`).
fn memory_limit(v: &serde_json::Value) -> Result<u64, ArgsError> {
    let bytes = match v {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => crate::quantity::Quantity::parse(s)
            .ok()
            .and_then(|q| u64::try_from(q.value()).ok()),
        _ => None,
    };
    bytes
        .filter(|b| (sandbox::MIN_MEMORY_LIMIT..=sandbox::MAX_MEMORY_LIMIT).contains(b))
        .ok_or_else(|| {
            ArgsError::new(
                "memoryLimit",
                format!("expected bytes or a quantity from 64Ki to 4Gi such as 64Mi, got {v}"),
            )
        })
}

/// A compiled, checked guest module, ready to instantiate once per call.
pub struct Guest {
    engine: Engine,
    pre: InstancePre<CallState>,
    /// The sandbox settings.
    pub limits: Limits,
    /// The export called at the plugin's extension point.
    pub entry: &'static str,
    /// Whether the module exports the optional `kd_explain`.
    pub explains: bool,
    /// `args` as JSON text.
    pub args_json: Vec<u8>,
    /// The plugin's name (the default reason code).
    pub plugin: Arc<str>,
    /// Reason codes and number keys this plugin used.
    pub interner: Arc<Interner>,
    /// How long compiling took.
    pub compile_time: Duration,
}

/// How a guest call ended badly: a sentence for logs, `plan` and the failure metric.
pub type CallError = String;

/// Reads, checks and compiles the module of `config` for plugin `plugin` at `point`.
pub fn load(config: &WasmConfig, plugin: &str, point: ExtensionPoint) -> Result<Guest, ArgsError> {
    let at_module = |m: String| ArgsError::new("module", m);
    let bytes = std::fs::read(&config.module)
        .map_err(|e| at_module(format!("cannot read {}: {e}", config.module.display())))?;
    if let Some(want) = &config.sha256 {
        let got: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if &got != want {
            return Err(ArgsError::new(
                "sha256",
                format!(
                    "{} has SHA-256 {got}, the policy expects {want}",
                    config.module.display()
                ),
            ));
        }
    }
    let engine = sandbox::engine().map_err(at_module)?;
    let started = std::time::Instant::now();
    let module = Module::new(&engine, &bytes).map_err(|e| {
        at_module(format!(
            "{} is not a valid WebAssembly module: {e}",
            config.module.display()
        ))
    })?;
    let compile_time = started.elapsed();
    check_imports(&module).map_err(at_module)?;
    let entry = match point {
        ExtensionPoint::Deschedule => abi::EXPORT_DESCHEDULE,
        ExtensionPoint::Balance => abi::EXPORT_BALANCE,
    };
    let explains = check_exports(&module, entry).map_err(at_module)?;
    let mut linker =
        super::host::linker(&engine).map_err(|e| at_module(format!("host functions: {e}")))?;
    super::facts::link(&mut linker).map_err(|e| at_module(format!("host functions: {e}")))?;
    super::node_pods::link(&mut linker).map_err(|e| at_module(format!("host functions: {e}")))?;
    let pre = linker
        .instantiate_pre(&module)
        .map_err(|e| at_module(format!("cannot link: {e}")))?;
    let guest = Guest {
        engine,
        pre,
        limits: config.limits,
        entry,
        explains,
        args_json: config.args_json.clone(),
        plugin: Arc::from(plugin),
        interner: Arc::new(Interner::default()),
        compile_time,
    };
    guest.check_version_and_args()?;
    Ok(guest)
}

/// Only functions of [`abi::IMPORT_MODULE`] named in [`abi::HOST_FUNCTIONS`] (their types are
/// checked when linking).
fn check_imports(module: &Module) -> Result<(), String> {
    for i in module.imports() {
        let known = i.module() == abi::IMPORT_MODULE
            && abi::HOST_FUNCTIONS.contains(&i.name())
            && matches!(i.ty(), ExternType::Func(_));
        if !known {
            return Err(format!(
                "the module imports {}::{}, which the sandbox does not offer (only functions of {:?}: {}; no WASI)",
                i.module(),
                i.name(),
                abi::IMPORT_MODULE,
                abi::HOST_FUNCTIONS.join(", ")
            ));
        }
    }
    Ok(())
}

/// The required exports and the types of the optional ones; returns whether the module exports
/// `kd_explain`.
fn check_exports(module: &Module, entry: &str) -> Result<bool, String> {
    use ValType::{I32, I64};
    let func = |name: &str, params: &[ValType], results: &[ValType]| -> Result<(), String> {
        let Some(ExternType::Func(f)) = module.get_export(name) else {
            return Err(format!(
                "the module does not export the function {name:?} (ABI v{})",
                abi::ABI_VERSION
            ));
        };
        let same = |a: &[ValType], b: &[ValType]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| ValType::eq(x, y))
        };
        let p: Vec<ValType> = f.params().collect();
        let r: Vec<ValType> = f.results().collect();
        if !same(&p, params) || !same(&r, results) {
            return Err(format!(
                "the export {name:?} has type ({p:?}) -> ({r:?}), ABI v{} wants ({params:?}) -> ({results:?})",
                abi::ABI_VERSION
            ));
        }
        Ok(())
    };
    if !matches!(
        module.get_export(abi::EXPORT_MEMORY),
        Some(ExternType::Memory(_))
    ) {
        return Err("the module does not export its memory as \"memory\"".into());
    }
    func(abi::EXPORT_VERSION, &[], &[I32])?;
    func(abi::EXPORT_ALLOC, &[I32], &[I32])?;
    func(entry, &[I32, I32, I64], &[I32])?;
    if module.get_export(abi::EXPORT_VALIDATE).is_some() {
        func(abi::EXPORT_VALIDATE, &[I32, I32], &[I32])?;
    }
    let explains = module.get_export(abi::EXPORT_EXPLAIN).is_some();
    if explains {
        func(abi::EXPORT_EXPLAIN, &[I32, I32, I64, I32], &[I32])?;
    }
    Ok(explains)
}

impl Guest {
    /// Calls `kd_abi_version` (must be [`abi::ABI_VERSION`]) and the optional `kd_validate`.
    fn check_version_and_args(&self) -> Result<(), ArgsError> {
        let table = CallTable::build_empty();
        let version = self
            .invoke(abi::EXPORT_VERSION, None, table, |store, inst| {
                let f = inst.get_typed_func::<(), i32>(&mut *store, abi::EXPORT_VERSION)?;
                f.call(&mut *store, ())
            })
            .map_err(|e| ArgsError::new("module", format!("kd_abi_version: {e}")))?
            .0;
        if version != abi::ABI_VERSION {
            return Err(ArgsError::new(
                "module",
                format!(
                    "the module speaks ABI version {version}; this kube-descheduler speaks version {}",
                    abi::ABI_VERSION
                ),
            ));
        }
        let (rc, state) = self
            .invoke(
                abi::EXPORT_VALIDATE,
                None,
                CallTable::build_empty(),
                |store, inst| {
                    let Ok(f) =
                        inst.get_typed_func::<(i32, i32), i32>(&mut *store, abi::EXPORT_VALIDATE)
                    else {
                        return Ok(0);
                    };
                    let (ptr, len) = self.write_args(store, inst)?;
                    f.call(&mut *store, (ptr, len))
                },
            )
            .map_err(|e| ArgsError::new("args", format!("kd_validate: {e}")))?;
        if rc != 0 {
            return Err(ArgsError::new(
                "args",
                state.failed.unwrap_or_else(|| {
                    format!("the module refused its args (kd_validate returned {rc})")
                }),
            ));
        }
        Ok(())
    }

    /// Copies `args` into guest memory (through `kd_alloc`); returns pointer and length.
    pub fn write_args(
        &self,
        store: &mut Store<CallState>,
        inst: &Instance,
    ) -> wasmtime::Result<(i32, i32)> {
        let len = i32::try_from(self.args_json.len())
            .map_err(|_| wasmtime::Error::msg("args: too large"))?;
        let alloc = inst.get_typed_func::<i32, i32>(&mut *store, abi::EXPORT_ALLOC)?;
        let ptr = alloc.call(&mut *store, len)?;
        let mem = inst
            .get_memory(&mut *store, abi::EXPORT_MEMORY)
            .ok_or_else(|| wasmtime::Error::msg("no memory export"))?;
        let start = usize::try_from(ptr).map_err(|_| {
            wasmtime::Error::msg(format!("kd_alloc returned the negative pointer {ptr}"))
        })?;
        mem.write(&mut *store, start, &self.args_json).map_err(|_| {
            wasmtime::Error::msg(format!(
                "kd_alloc returned {ptr}, but {len} bytes from there are outside the guest's memory"
            ))
        })?;
        Ok((ptr, len))
    }

    /// Instantiates the module in a fresh store (memory cap, deadline) over `table` and runs `f`,
    /// which calls the export `export`.
    /// On success returns `f`'s value and the store's final state (nominations, …); otherwise a
    /// sentence saying what went wrong (timeout, memory, malformed answer, trap).
    pub fn invoke<R>(
        &self,
        export: &'static str,
        snapshot: Option<SnapshotRef>,
        table: CallTable,
        f: impl FnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<R>,
    ) -> Result<(R, CallState), CallError> {
        let state = CallState::new(
            export,
            snapshot,
            table,
            Limiter::new(self.limits.memory),
            self.plugin.clone(),
            self.interner.clone(),
        );
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(1);
        let (result, timed_out) = sandbox::with_deadline(&self.engine, self.limits.timeout, || {
            let inst = self.pre.instantiate(&mut store)?;
            let memory = inst.get_memory(&mut store, abi::EXPORT_MEMORY);
            store.data_mut().memory = memory;
            f(&mut store, &inst)
        });
        let state = store.into_data();
        match result {
            Ok(r) if state.malformed.is_none() => Ok((r, state)),
            Ok(_) => Err(format!(
                "malformed answer: {}",
                state.malformed.as_deref().unwrap_or_default()
            )),
            Err(e) => Err(sandbox::describe(
                &e,
                timed_out,
                self.limits.timeout,
                &state.limiter,
                state.malformed.as_deref(),
                state.failed.as_deref(),
            )),
        }
    }
}
