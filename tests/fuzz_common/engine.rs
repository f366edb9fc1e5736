//! A small fuzzing engine that builds on the stable toolchain: a seeded PRNG, byte-level
//! mutations, JSON-tree mutations of Kubernetes- and policy-shaped documents, and a loop that
//! runs a target under `catch_unwind`, keeps accepted inputs as a corpus to mutate further, and
//! records every panic with its input.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

/// The engine's SplitMix64 generator, seeded apart from the synthetic clusters' and counting in
/// `usize`: good enough to drive mutations.
pub struct Rng(kube_descheduler::synth::Rng);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(kube_descheduler::synth::Rng::new(
            seed ^ 0x9E37_79B9_7F4A_7C15,
        ))
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// True with probability 1/`n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// A random element of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What one target is: seeds, a structured generator, and the code under test (returns whether
/// the input was accepted, which makes it worth mutating further).
pub struct Target {
    /// Name (used in reports and by `FUZZ_TARGET`).
    pub name: &'static str,
    /// Valid inputs to start from.
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// A structured input (e.g. a mutated Kubernetes-shaped document).
    pub generate: fn(&mut Rng, &[Vec<u8>]) -> Vec<u8>,
    /// Runs the code under test on one input.
    pub run: fn(&[u8]) -> bool,
}

/// The outcome of fuzzing one target.
pub struct Report {
    /// Target name.
    pub name: &'static str,
    /// Inputs run.
    pub inputs: u64,
    /// Inputs the code accepted.
    pub accepted: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Panics: (message, input).
    pub panics: Vec<(String, Vec<u8>)>,
}

impl Report {
    /// Inputs per second.
    pub fn rate(&self) -> f64 {
        self.inputs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

const CORPUS_MAX: usize = 256;

/// Runs `target` on `inputs` inputs from `seed`: a quarter structured, the rest byte mutations
/// of the corpus (seeds plus accepted inputs).
pub fn fuzz(target: &Target, inputs: u64, seed: u64) -> Report {
    let mut rng = Rng::new(seed);
    let mut corpus = (target.seeds)();
    let seeds = corpus.len();
    let mut report = Report {
        name: target.name,
        inputs: 0,
        accepted: 0,
        elapsed: Duration::ZERO,
        panics: Vec::new(),
    };
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let started = Instant::now();
    for i in 0..inputs {
        let input = if (i as usize) < seeds {
            corpus[i as usize].clone()
        } else if rng.one_in(4) {
            (target.generate)(&mut rng, &corpus)
        } else {
            let base = rng.pick(&corpus).clone();
            mutate_bytes(&mut rng, base, &corpus)
        };
        match catch_unwind(AssertUnwindSafe(|| (target.run)(&input))) {
            Ok(true) => {
                report.accepted += 1;
                if rng.one_in(16) {
                    if corpus.len() < CORPUS_MAX {
                        corpus.push(input);
                    } else {
                        let slot = seeds + rng.below(CORPUS_MAX - seeds);
                        corpus[slot] = input;
                    }
                }
            }
            Ok(false) => {}
            Err(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "panic".into());
                report.panics.push((message, input));
            }
        }
        report.inputs += 1;
    }
    report.elapsed = started.elapsed();
    std::panic::set_hook(previous_hook);
    report
}

/// Tokens that matter to the decoders under test, spliced in by mutations.
pub const DICTIONARY: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "null",
    "true",
    "false",
    "-",
    ".",
    "e",
    "E",
    "0",
    "-1",
    "1e400",
    "9223372036854775808",
    "NaN",
    "\n",
    "\n  ",
    "- ",
    "---\n",
    "...\n",
    "&a ",
    "*a",
    "!!str ",
    "!!binary ",
    "? ",
    "|\n",
    ">\n",
    "#",
    "'",
    "\\u0000",
    "\u{0}",
    "\u{feff}",
    "Ki",
    "Mi",
    "Gi",
    "Ei",
    "m",
    "u",
    "n",
    "k",
    "M",
    "G",
    "T",
    "P",
    "E",
    "h",
    "ms",
    "µs",
    "ns",
    "s",
    "apiVersion",
    "kind",
    "items",
    "metadata",
    "spec",
    "status",
    "List",
    "Pod",
    "Node",
    "DeschedulerPolicy",
    "descheduler/v1alpha2",
    "descheduler/v1alpha1",
    "profiles",
    "pluginConfig",
    "strategies",
    "params",
    "args",
    "AdmissionReview",
    "Eviction",
    "timeoutSeconds=",
    "&",
    "=",
    "%",
    "%zz",
    "+",
];

/// One to four byte-level mutations of `data` (flip, insert, delete, duplicate, splice a token
/// or a piece of another corpus entry).
pub fn mutate_bytes(rng: &mut Rng, mut data: Vec<u8>, corpus: &[Vec<u8>]) -> Vec<u8> {
    for _ in 0..1 + rng.below(4) {
        let len = data.len();
        let at = if len == 0 { 0 } else { rng.below(len + 1) };
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 => data.insert(at, rng.next() as u8),
            2 if len > 0 => {
                let n = 1 + rng.below(16.min(len));
                let i = rng.below(len - n + 1);
                data.drain(i..i + n);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(64));
                let piece = data[i..i + n].to_vec();
                data.splice(at..at, piece);
            }
            4 | 5 => {
                let token = rng.pick(DICTIONARY).as_bytes().to_vec();
                data.splice(at..at, token);
            }
            6 => {
                let other = rng.pick(corpus);
                if !other.is_empty() {
                    let i = rng.below(other.len());
                    let n = 1 + rng.below((other.len() - i).min(128));
                    data.splice(at..at, other[i..i + n].iter().copied());
                }
            }
            _ if len > 0 => {
                let i = rng.below(len);
                data.truncate(i);
            }
            _ => data.push(rng.next() as u8),
        }
    }
    data
}

/// Scalars that stress decoders: boundaries, wrong types, quantities, durations, times.
const SCALARS: &[&str] = &[
    "",
    "0",
    "-1",
    "1",
    "100m",
    "1.5Gi",
    "-5",
    "1e400",
    "1e-400",
    "abc",
    "NaN",
    "+Inf",
    "0.5",
    "2026-01-01T00:00:00Z",
    "not-a-time",
    "Ready",
    "True",
    "False",
    "Unknown",
    "Running",
    "Pending",
    "Failed",
    "Succeeded",
    "NoSchedule",
    "NoExecute",
    "Exists",
    "In",
    "NotIn",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "Job",
    "DaemonSet",
    "Node",
    "Pod",
    "Recreate",
    "RollingUpdate",
    "25%",
    "100%",
    "0%",
    "kube-system",
    "default",
    "5m",
    "1h30m",
    "-1s",
    "99999999999999999999h",
    "app",
    "a/b",
    "=",
    "!",
    "\u{0}",
    "é",
];

/// A random JSON scalar or small container.
pub fn random_value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 3 { 7 } else { 9 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.one_in(2)),
        2 => Value::from(*rng.pick(&[
            0i64,
            -1,
            1,
            2,
            3,
            10,
            100,
            i64::from(i32::MAX),
            i64::from(i32::MIN),
            i64::MAX,
            i64::MIN,
        ])),
        3 => Value::from(*rng.pick(&[0.5f64, -0.0, 1e308, -1e308, 1e-300, 3.7])),
        4 => Value::from(u64::MAX),
        5 | 6 => Value::from(*rng.pick(SCALARS)),
        7 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let mut m = Map::new();
            for _ in 0..rng.below(4) {
                m.insert((*rng.pick(KEYS)).to_owned(), random_value(rng, depth + 1));
            }
            Value::Object(m)
        }
    }
}

/// Field names of the Kubernetes objects and policies the decoders read.
pub const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "ownerReferences",
    "controller",
    "spec",
    "status",
    "nodeName",
    "containers",
    "resources",
    "requests",
    "limits",
    "cpu",
    "memory",
    "pods",
    "conditions",
    "type",
    "phase",
    "allocatable",
    "capacity",
    "taints",
    "effect",
    "key",
    "value",
    "tolerations",
    "operator",
    "affinity",
    "nodeAffinity",
    "podAntiAffinity",
    "replicas",
    "strategy",
    "rollingUpdate",
    "maxSurge",
    "maxUnavailable",
    "template",
    "selector",
    "matchLabels",
    "matchExpressions",
    "values",
    "minAvailable",
    "disruptionsAllowed",
    "deletionTimestamp",
    "creationTimestamp",
    "restartCount",
    "containerStatuses",
    "initContainerStatuses",
    "priority",
    "priorityClassName",
    "items",
    "volumes",
    "persistentVolumeClaim",
    "claimName",
    "accessModes",
    "topologySpreadConstraints",
    "maxSkew",
    "topologyKey",
    "whenUnsatisfiable",
    "unschedulable",
    "readyReplicas",
    "updatedReplicas",
    "availableReplicas",
    "observedGeneration",
    "generation",
    "paused",
    "profiles",
    "pluginConfig",
    "plugins",
    "enabled",
    "disabled",
    "args",
    "deschedule",
    "balance",
    "filter",
    "preevictionfilter",
    "thresholds",
    "targetThresholds",
    "numberOfNodes",
    "nodeFit",
    "evictLocalStoragePods",
    "podRestartThreshold",
    "maxPodLifeTimeSeconds",
    "namespaces",
    "include",
    "exclude",
    "labelSelector",
    "strategies",
    "params",
    "nodeResourceUtilizationThresholds",
    "thresholdPriority",
    "request",
    "object",
    "oldObject",
    "operation",
    "subResource",
    "deleteOptions",
    "preconditions",
    "dryRun",
    "userInfo",
    "username",
];

/// One to three tree mutations of `v`: replace a node, delete or add a key, duplicate or drop an
/// array element, or wrap a node in deep nesting.
pub fn mutate_tree(rng: &mut Rng, v: &mut Value) {
    for _ in 0..1 + rng.below(3) {
        mutate_once(rng, v, 0);
    }
}

fn mutate_once(rng: &mut Rng, v: &mut Value, depth: usize) {
    let descend = depth < 12 && rng.below(4) != 0;
    match v {
        Value::Object(m) if descend && !m.is_empty() => {
            let key = m
                .keys()
                .nth(rng.below(m.len()))
                .cloned()
                .unwrap_or_default();
            if let Some(child) = m.get_mut(&key) {
                mutate_once(rng, child, depth + 1);
            }
            return;
        }
        Value::Array(a) if descend && !a.is_empty() => {
            let i = rng.below(a.len());
            mutate_once(rng, &mut a[i], depth + 1);
            return;
        }
        _ => {}
    }
    match (rng.below(6), &mut *v) {
        (0, Value::Object(m)) if !m.is_empty() => {
            let key = m
                .keys()
                .nth(rng.below(m.len()))
                .cloned()
                .unwrap_or_default();
            m.remove(&key);
        }
        (1, Value::Object(m)) => {
            m.insert((*rng.pick(KEYS)).to_owned(), random_value(rng, depth));
        }
        (2, Value::Array(a)) if !a.is_empty() => {
            let i = rng.below(a.len());
            let copy = a[i].clone();
            a.insert(rng.below(a.len() + 1), copy);
        }
        (3, Value::Array(a)) if !a.is_empty() => {
            a.remove(rng.below(a.len()));
        }
        (4, _) if rng.one_in(8) => {
            let mut inner = v.take();
            for _ in 0..rng.below(200) {
                inner = Value::Array(vec![inner]);
            }
            *v = inner;
        }
        _ => *v = random_value(rng, depth),
    }
}

/// A corpus entry as a JSON value (entries that are not JSON give an empty object).
pub fn as_json(rng: &mut Rng, corpus: &[Vec<u8>]) -> Value {
    serde_json::from_slice::<Value>(rng.pick(corpus).as_slice())
        .unwrap_or_else(|_| Value::Object(Map::new()))
}

/// A JSON value printed as compact JSON, pretty JSON or block YAML.
pub fn print(rng: &mut Rng, v: &Value) -> Vec<u8> {
    match rng.below(3) {
        0 => serde_json::to_vec(v).unwrap_or_default(),
        1 => serde_json::to_vec_pretty(v).unwrap_or_default(),
        _ => serde_saphyr::to_string(v)
            .map(String::into_bytes)
            .unwrap_or_default(),
    }
}
