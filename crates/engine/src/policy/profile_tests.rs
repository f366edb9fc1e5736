//! Profiles built with a registry that has a custom plugin and a custom evictor.

use std::any::Any;

use jiff::Timestamp;
use serde_json::Value;

use super::load_str_with;
use crate::framework::args::ArgsError;
use crate::framework::registry::{EvictorFactory, PluginFactory, Registry};
use crate::framework::{DeschedulePlugin, EvictorPlugin, Handle};
use crate::plugins::default_evictor::DefaultEvictor;
use crate::snapshot::{NodeId, PodId, Snapshot};
use crate::testing::{node, now, pod, snapshot};

/// Protects pods labelled `keep=true`; `label` may name another label.
struct KeepLabel(String);

impl EvictorPlugin for KeepLabel {
    fn name(&self) -> &str {
        "KeepLabel"
    }
    fn filter(&self, s: &Snapshot, pod: PodId, _now: Timestamp) -> bool {
        s.pod(pod).labels.get(&self.0).map(String::as_str) != Some("true")
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct Named(String);

impl DeschedulePlugin for Named {
    fn name(&self) -> &str {
        &self.0
    }
    fn deschedule(&self, _: &mut Handle<'_>, _: &[NodeId]) {}
}

fn registry() -> Registry {
    let keep = EvictorFactory::new("KeepLabel", |a: &Value| {
        let label = match a.get("label") {
            None => "keep".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(ArgsError::new("label", "expected a string")),
        };
        Ok(KeepLabel(label))
    });
    Registry::builtin()
        .with(keep)
        .and_then(|r| {
            r.with(PluginFactory::deschedule("Mine", |_| {
                Ok(Named("Mine".into()))
            }))
        })
        .and_then(|r| {
            r.with(PluginFactory::deschedule("Liar", |_| {
                Ok(Named("SomethingElse".into()))
            }))
        })
        .unwrap_or_else(|e| panic!("{e}"))
}

fn policy(plugins: &str, config: &str) -> String {
    let plugins = if plugins.is_empty() {
        "  plugins: {}\n".to_string()
    } else {
        format!("  plugins:\n{plugins}")
    };
    format!(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: Mine\n{config}{plugins}"
    )
}

fn err(text: &str) -> String {
    match load_str_with(text, &registry()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_custom_plugin_loads_only_with_its_registry() {
    let text = policy("    deschedule:\n      enabled: [Mine]\n", "");
    let p = load_str_with(&text, &registry()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.profiles[0].deschedule[0].name(), "Mine");
    let e = match super::load_str(&text) {
        Ok(_) => panic!("the stock registry has no Mine"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("plugin \"Mine\": unknown plugin in pluginConfig"),
        "{e}"
    );
}

#[test]
fn the_evictors_of_both_points_must_all_pass() {
    let text = policy(
        "    filter:\n      enabled: [DefaultEvictor, KeepLabel]\n    deschedule:\n      enabled: [Mine]\n",
        "  - name: KeepLabel\n    args: {label: hold}\n",
    );
    let p = load_str_with(&text, &registry()).unwrap_or_else(|e| panic!("{e}"));
    let ev = &p.profiles[0].evictor;
    let s = snapshot(
        vec![node("n1").build()],
        vec![
            pod("a", "plain", "n1").build(),
            pod("a", "held", "n1").label("hold", "true").build(),
            pod("a", "bare", "n1").bare().build(),
        ],
    );
    let verdicts: Vec<(bool, Vec<String>)> = (0..3)
        .map(|i| (ev.filter(&s, i, now()), ev.explain_filter(&s, i, now())))
        .collect();
    assert_eq!(verdicts[0], (true, vec![]));
    assert_eq!(
        verdicts[1],
        (false, vec!["KeepLabel rejects the pod".to_string()])
    );
    // The DefaultEvictor's own rule still applies (a bare pod).
    assert!(!verdicts[2].0 && !verdicts[2].1.is_empty(), "{verdicts:?}");
    assert_eq!(ev.name(), "DefaultEvictor+KeepLabel");
    // PreEvictionFilter defaults to the DefaultEvictor; its args stay readable (plan --explain).
    assert!(ev.as_any().downcast_ref::<DefaultEvictor>().is_some());
}

#[test]
fn one_custom_evictor_replaces_the_default_one() {
    let text = policy(
        "    filter:\n      enabled: [KeepLabel]\n    preevictionfilter:\n      enabled: [KeepLabel]\n    deschedule:\n      enabled: [Mine]\n",
        "",
    );
    let p = load_str_with(&text, &registry()).unwrap_or_else(|e| panic!("{e}"));
    let ev = &p.profiles[0].evictor;
    assert_eq!(ev.name(), "KeepLabel");
    let s = snapshot(
        vec![node("n1").build()],
        vec![pod("a", "bare", "n1").bare().build()],
    );
    // Without the DefaultEvictor, a bare pod passes.
    assert!(ev.filter(&s, 0, now()));
}

#[test]
fn evictor_mistakes_are_named() {
    let e = err(&policy("    filter:\n      enabled: [Nope]\n", ""));
    assert!(
        e.contains("plugin \"Nope\": only DefaultEvictor or KeepLabel can be enabled at the filter extension point"),
        "{e}"
    );
    let e = err(&policy(
        "    preevictionfilter:\n      enabled: [Mine]\n",
        "",
    ));
    assert!(e.contains("preevictionfilter extension point"), "{e}");
    let e = err(&policy(
        "    filter:\n      enabled: [KeepLabel, KeepLabel]\n",
        "",
    ));
    assert!(
        e.contains("enabled more than once under plugins.filter"),
        "{e}"
    );
    let e = err(&policy("    deschedule:\n      enabled: [KeepLabel]\n", ""));
    assert!(
        e.contains("is an evictor plugin; it cannot be enabled under plugins.deschedule"),
        "{e}"
    );
    // A configured evictor's args are validated even when it is not enabled.
    let e = err(&policy("", "  - name: KeepLabel\n    args: {label: 3}\n"));
    assert!(
        e.contains("plugin \"KeepLabel\": args.label: expected a string"),
        "{e}"
    );
}

#[test]
fn a_plugin_must_carry_its_registered_name() {
    let e = err(&policy("", "  - name: Liar\n"));
    assert!(
        e.contains("registered as \"Liar\" built a plugin named \"SomethingElse\""),
        "{e}"
    );
}
