//! Building one profile from its `pluginConfig` and `plugins` with a [`Registry`]: every
//! `pluginConfig` entry validated, the evictors of the Filter and PreEvictionFilter extension
//! points, and the Deschedule and Balance plugins in policy order.

use std::sync::Arc;

use crate::error::ConfigError;
use crate::framework::EvictorPlugin;
use crate::framework::args::ArgsError;
use crate::framework::composite::CompositeEvictor;
use crate::framework::cycle::Profile;
use crate::framework::registry::{ExtensionPoint, Plugin, Registry};
use crate::plugins::default_evictor;

use super::wire::{PluginSet, ProfileV1alpha2};

/// Builds profile `p` with the plugins of `registry` and the WebAssembly plugins it names (their
/// relative `module` paths resolve against `base`). Errors name the profile and the plugin.
pub(super) fn build(
    p: &ProfileV1alpha2,
    registry: &Registry,
    base: Option<&std::path::Path>,
) -> Result<Profile, ConfigError> {
    let ctx = |plugin: &str, e: String| {
        ConfigError::new(format!("profile {:?}: plugin {plugin:?}: {e}", p.name))
    };
    let configs = plugin_configs(p, registry, &ctx)?;
    let args_of = |name: &str| configs.iter().find(|(n, _)| *n == name).map(|(_, a)| *a);
    let evictor = build_evictor(p, registry, &args_of, &ctx)?;
    let mut profile = Profile {
        name: p.name.clone(),
        evictor,
        deschedule: Vec::new(),
        balance: Vec::new(),
    };
    let mut built = build_configured(&configs, registry, base, &ctx)?;
    let mut wasm_enabled: Vec<&str> = Vec::new();
    for (point, set) in [
        (ExtensionPoint::Deschedule, &p.plugins.deschedule),
        (ExtensionPoint::Balance, &p.plugins.balance),
    ] {
        let point_name = point.policy_name();
        for name in &set.enabled {
            // The WebAssembly hook: a plugin whose args carry `module`; the extension
            // point it is enabled at decides the export called.
            let plugin = if let Some(args) =
                args_of(name).filter(|a| crate::wasm::is_wasm_plugin(a))
                && !registry.contains(name)
            {
                if wasm_enabled.contains(&name.as_str()) {
                    return Err(ctx(
                        name,
                        format!("enabled more than once under plugins.{point_name}"),
                    ));
                }
                wasm_enabled.push(name);
                crate::wasm::build(name, point, args, base).map_err(|e| ctx(name, e.to_string()))?
            } else {
                take_built(&mut built, registry, point, name, &ctx)?
            };
            match plugin {
                Plugin::Deschedule(d) => profile.deschedule.push(d),
                Plugin::Balance(b) => profile.balance.push(b),
            }
        }
    }
    Ok(profile)
}

/// The `pluginConfig` entries of `p` as (name, args): unique names, each registered or a
/// WebAssembly plugin, never both (as upstream).
fn plugin_configs<'a>(
    p: &'a ProfileV1alpha2,
    registry: &Registry,
    ctx: &dyn Fn(&str, String) -> ConfigError,
) -> Result<Vec<(&'a str, &'a serde_json::Value)>, ConfigError> {
    let mut configs: Vec<(&str, &serde_json::Value)> = Vec::new();
    for c in &p.plugin_config {
        if configs.iter().any(|(n, _)| *n == c.name) {
            return Err(ctx(
                &c.name,
                "pluginConfig lists this plugin more than once".into(),
            ));
        }
        let registered = registry.contains(&c.name);
        let wasm = crate::wasm::is_wasm_plugin(&c.args);
        if registered && wasm {
            return Err(ctx(
                &c.name,
                "args.module: a WebAssembly plugin cannot take the name of a built-in plugin or of one the binary registers"
                    .into(),
            ));
        }
        if !registered && !wasm {
            return Err(ctx(
                &c.name,
                format!(
                    "unknown plugin in pluginConfig (known plugins: {})",
                    registry.names().join(", ")
                ),
            ));
        }
        configs.push((c.name.as_str(), &c.args));
    }
    Ok(configs)
}

/// Builds the registered plugin of every `pluginConfig` entry, enabled or not, so that all their
/// args are validated; a WebAssembly plugin's args are checked here, its module where it is
/// enabled. A plugin must be named as it is registered.
fn build_configured<'a>(
    configs: &[(&'a str, &serde_json::Value)],
    registry: &Registry,
    base: Option<&std::path::Path>,
    ctx: &dyn Fn(&str, String) -> ConfigError,
) -> Result<Vec<(&'a str, Option<Plugin>)>, ConfigError> {
    let args_err = |plugin: &str, e: ArgsError| ctx(plugin, e.to_string());
    let mut built: Vec<(&str, Option<Plugin>)> = Vec::new();
    for &(name, args) in configs {
        let Some(f) = registry.plugin(name) else {
            if !registry.contains(name) {
                crate::wasm::decode_config(args, base).map_err(|e| args_err(name, e))?;
            }
            continue;
        };
        let plugin = (f.build)(args).map_err(|e| args_err(name, e))?;
        let own = match &plugin {
            Plugin::Deschedule(d) => d.name(),
            Plugin::Balance(b) => b.name(),
        };
        if own != name {
            return Err(ctx(
                name,
                format!(
                    "the factory registered as {name:?} built a plugin named {own:?}; a plugin's name must be its registered name"
                ),
            ));
        }
        built.push((name, Some(plugin)));
    }
    Ok(built)
}

/// The built plugin `name` enabled at `point`: registered for that point, configured, and
/// enabled once.
fn take_built(
    built: &mut [(&str, Option<Plugin>)],
    registry: &Registry,
    point: ExtensionPoint,
    name: &str,
    ctx: &dyn Fn(&str, String) -> ConfigError,
) -> Result<Plugin, ConfigError> {
    let point_name = point.policy_name();
    let Some(factory) = registry.plugin(name) else {
        let what = if registry.evictor(name).is_some() {
            format!(
                "is an evictor plugin; it cannot be enabled under plugins.{point_name} (enable it under plugins.filter or plugins.preevictionfilter)"
            )
        } else {
            format!(
                "unknown plugin under plugins.{point_name}.enabled (known plugins: {})",
                registry.names().join(", ")
            )
        };
        return Err(ctx(name, what));
    };
    if factory.point != point {
        return Err(ctx(
            name,
            format!(
                "is a {} plugin; it cannot be enabled under plugins.{point_name}",
                factory.point.policy_name()
            ),
        ));
    }
    let Some(slot) = built.iter_mut().find(|(n, _)| *n == name) else {
        return Err(ctx(name, "unable to find the plugin's pluginConfig entry: every enabled plugin needs one (args may be omitted)".into()));
    };
    slot.1.take().ok_or_else(|| {
        ctx(
            name,
            format!("enabled more than once under plugins.{point_name}"),
        )
    })
}

/// The enabled names of an evictor extension point; none enabled means the DefaultEvictor (as
/// upstream's defaulting of v1alpha2 profiles).
fn evictor_names(set: &PluginSet) -> Vec<&str> {
    if set.enabled.is_empty() {
        vec![default_evictor::NAME]
    } else {
        set.enabled.iter().map(String::as_str).collect()
    }
}

/// The profile's evictor: the one plugin enabled at both the Filter and PreEvictionFilter
/// extension points (the DefaultEvictor unless the policy names another), or a composite that
/// runs every plugin enabled at each point. Evictors configured in `pluginConfig` but not enabled
/// are built too, so that their args are validated.
fn build_evictor<'a>(
    p: &'a ProfileV1alpha2,
    registry: &Registry,
    args_of: &dyn Fn(&str) -> Option<&'a serde_json::Value>,
    ctx: &dyn Fn(&str, String) -> ConfigError,
) -> Result<Box<dyn EvictorPlugin>, ConfigError> {
    let filter = evictor_names(&p.plugins.filter);
    let pre = evictor_names(&p.plugins.preevictionfilter);
    let evictors = || {
        let mut names: Vec<&str> = registry
            .evictors()
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        names.sort_unstable();
        names.join(" or ")
    };
    for (point, names) in [("filter", &filter), ("preevictionfilter", &pre)] {
        for (i, name) in names.iter().enumerate() {
            if registry.evictor(name).is_none() {
                return Err(ctx(
                    name,
                    format!(
                        "only {} can be enabled at the {point} extension point",
                        evictors()
                    ),
                ));
            }
            if names[..i].contains(name) {
                return Err(ctx(
                    name,
                    format!("enabled more than once under plugins.{point}"),
                ));
            }
        }
    }
    // Every distinct evictor, enabled or only configured, built once from its args.
    let mut members: Vec<(&str, Box<dyn EvictorPlugin>)> = Vec::new();
    let configured = p
        .plugin_config
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| registry.evictor(n).is_some());
    for name in filter.iter().chain(&pre).copied().chain(configured) {
        if members.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let Some(f) = registry.evictor(name) else {
            continue;
        };
        let args = args_of(name).unwrap_or(&serde_json::Value::Null);
        let e = (f.build)(args).map_err(|e| ctx(name, e.to_string()))?;
        members.push((name, e));
    }
    members.retain(|(n, _)| filter.contains(n) || pre.contains(n));
    let index = |name: &str| members.iter().position(|(n, _)| *n == name);
    if filter == pre && filter.len() == 1 {
        // The usual case (and upstream's default): one evictor at both points, run directly.
        let Some(i) = index(filter[0]) else {
            return Err(ctx(filter[0], "the evictor was not built".into()));
        };
        return Ok(members.swap_remove(i).1);
    }
    let filter_idx = filter.iter().filter_map(|n| index(n)).collect();
    let pre_idx = pre.iter().filter_map(|n| index(n)).collect();
    let members: Vec<Arc<dyn EvictorPlugin>> =
        members.into_iter().map(|(_, e)| Arc::from(e)).collect();
    let primary = members
        .iter()
        .position(|m| m.as_any().is::<default_evictor::DefaultEvictor>());
    Ok(Box::new(CompositeEvictor::new(
        members, filter_idx, pre_idx, primary,
    )))
}
