//! WebAssembly plugins named in the policy: a plugin whose pluginConfig args carry `module:` is a
//! sandboxed guest module, loaded and checked once at policy load ([`load`]), run through ABI v1
//! ([`abi`]) inside the sandbox's limits ([`sandbox`]) as a Deschedule or Balance plugin
//! ([`adapter`]). See docs/wasm-plugins.md.
//!
//! Layer: beside `plugins`, below `policy` (imports framework, snapshot and evictor only).

pub mod abi;
pub mod adapter;
pub mod facts;
pub mod host;
pub mod load;
pub mod node_pods;
pub mod sandbox;
pub mod table;

use std::path::Path;

use crate::framework::args::ArgsError;
use crate::framework::registry::{ExtensionPoint, Plugin};

pub use adapter::WasmPlugin;
pub use load::{WasmConfig, decode_config};

/// Whether a pluginConfig entry's `args` make it a WebAssembly plugin (they carry `module`).
pub fn is_wasm_plugin(args: &serde_json::Value) -> bool {
    args.get("module").is_some()
}

/// Loads the WebAssembly plugin `name` enabled at `point` from its pluginConfig `args`; relative
/// `module` paths resolve against `base` (the policy file's directory).
pub fn build(
    name: &str,
    point: ExtensionPoint,
    args: &serde_json::Value,
    base: Option<&Path>,
) -> Result<Plugin, ArgsError> {
    let config = decode_config(args, base)?;
    let guest = load::load(&config, name, point)?;
    let plugin = WasmPlugin::new(guest);
    Ok(match point {
        ExtensionPoint::Deschedule => Plugin::Deschedule(Box::new(plugin)),
        ExtensionPoint::Balance => Plugin::Balance(Box::new(plugin)),
    })
}
