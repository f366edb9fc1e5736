// OldPods: an AssemblyScript WebAssembly plugin for kube-descheduler (ABI v1, Deschedule).
// Nominates every pod on the call's nodes that is older than `maxPodLifeTimeSeconds` (strictly,
// in whole seconds, as PodLifeTime), oldest first; a pod without a creation time is not touched.
// Args: {"maxPodLifeTimeSeconds": <whole number>} (required).

@external("kube_descheduler", "pod_count")
declare function pod_count(): i32;
@external("kube_descheduler", "pod_column")
declare function pod_column(column: i32, dst: usize, count: i32): i32;
@external("kube_descheduler", "nominate")
declare function nominate(pod: i32, code: usize, codeLen: i32, text: usize, textLen: i32): i32;
@external("kube_descheduler", "reason_number")
declare function reason_number(key: usize, keyLen: i32, value: i64): i32;
@external("kube_descheduler", "fail")
declare function fail(msg: usize, len: i32): void;

const COL_NODE: i32 = 0;
const COL_CREATED: i32 = 1;
const UNKNOWN_TIME: i64 = i64.MIN_VALUE;

// The creation-time column of the running call (AssemblyScript has no closures for the sort).
let createdColumn: usize = 0;

function byCreation(a: i32, b: i32): i32 {
  const ta = load<i64>(createdColumn + <usize>a * 8);
  const tb = load<i64>(createdColumn + <usize>b * 8);
  return ta < tb ? -1 : ta > tb ? 1 : a - b;
}

export function kd_abi_version(): i32 {
  return 1;
}

export function kd_alloc(size: i32): usize {
  return heap.alloc(<usize>max(size, 0));
}

function failWith(msg: string): void {
  const b = String.UTF8.encode(msg);
  fail(changetype<usize>(b), b.byteLength);
}

// The whole number after "maxPodLifeTimeSeconds": in the args JSON, or -1.
function maxSeconds(ptr: usize, len: i32): i64 {
  const key = "\"maxPodLifeTimeSeconds\"";
  const text = String.UTF8.decodeUnsafe(ptr, <usize>len);
  let at = text.indexOf(key);
  if (at < 0) return -1;
  at += key.length;
  while (at < text.length && (text.charAt(at) == " " || text.charAt(at) == ":")) at++;
  let n: i64 = 0;
  let digits = 0;
  while (at < text.length) {
    const c = text.charCodeAt(at);
    if (c < 48 || c > 57) break;
    if (n > 92233720368547757) return -1;
    n = n * 10 + <i64>(c - 48);
    digits++;
    at++;
  }
  return digits > 0 ? n : -1;
}

export function kd_validate(ptr: usize, len: i32): i32 {
  if (maxSeconds(ptr, len) < 0) {
    failWith("args.maxPodLifeTimeSeconds: a whole number of seconds is required");
    return 1;
  }
  return 0;
}

export function deschedule(ptr: usize, len: i32, now: i64): i32 {
  const max = maxSeconds(ptr, len);
  if (max < 0) {
    failWith("args.maxPodLifeTimeSeconds: a whole number of seconds is required");
    return 1;
  }
  const n = pod_count();
  const nodes = heap.alloc(<usize>n * 8);
  const created = heap.alloc(<usize>n * 8);
  pod_column(COL_NODE, nodes, n);
  pod_column(COL_CREATED, created, n);
  const picked = new Array<i32>();
  for (let i = 0; i < n; i++) {
    const t = load<i64>(created + <usize>i * 8);
    if (load<i64>(nodes + <usize>i * 8) < 0 || t == UNKNOWN_TIME) continue;
    if (now - t > max) picked.push(i);
  }
  // Oldest first; equal times keep the table order.
  createdColumn = created;
  picked.sort(byCreation);
  const code = String.UTF8.encode("OldPod");
  const key = String.UTF8.encode("ageSeconds");
  for (let k = 0; k < picked.length; k++) {
    const i = picked[k];
    const age = now - load<i64>(created + <usize>i * 8);
    const text = String.UTF8.encode("age " + age.toString() + "s > maxPodLifeTimeSeconds " + max.toString());
    nominate(i, changetype<usize>(code), code.byteLength, changetype<usize>(text), text.byteLength);
    reason_number(changetype<usize>(key), key.byteLength, age);
  }
  return 0;
}
