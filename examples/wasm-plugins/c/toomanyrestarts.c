/*
 * RemovePodsHavingTooManyRestarts as a WebAssembly plugin (Deschedule): evicts pods whose
 * containers restarted at least podRestartThreshold times, node by node, most restarts first on
 * each node, with the native plugin's reason (code TooManyRestarts, its text and numbers).
 *
 * Args (the native plugin's names): podRestartThreshold (required, >= 1),
 * includingInitContainers, states (Running, CrashLoopBackOff), namespaces{include|exclude}.
 * labelSelector is refused by kd_validate.
 */
#include "kube_descheduler.h"

typedef struct {
  i64 threshold;
  int including_init;
  kd_strings states, include, exclude;
} args_t;

static int known_key(const char *k, int len, void *ctx) {
  (void)ctx;
  if (kd_eq(k, len, "podRestartThreshold", 19) || kd_eq(k, len, "includingInitContainers", 23) ||
      kd_eq(k, len, "states", 6) || kd_eq(k, len, "namespaces", 10))
    return 1;
  kd_text t = {(char[200]){0}, 0, 200};
  kd_puts(&t, "args.");
  kd_put(&t, k, len < 64 ? len : 64);
  kd_puts(&t, ": not supported by the WebAssembly port (podRestartThreshold, includingInitContainers, states, namespaces)");
  kd_fail(t.buf, t.len);
  return 0;
}

static int parse(const char *json, int len, args_t *a) {
  kd_json args = {json, json + len}, v;
  a->threshold = 0;
  a->including_init = 0;
  a->states.n = 0;
  if (kd_json_is_null(args) || !kd_json_is(args, '{')) {
    kd_fail_str("args: expected an object");
    return 0;
  }
  if (!kd_json_keys(args, known_key, 0)) return 0;
  if (!kd_json_get(args, "podRestartThreshold", &v) || !kd_json_uint(v, &a->threshold) ||
      a->threshold < 1 || a->threshold > 2147483647) {
    kd_fail_str("args.podRestartThreshold: invalid PodsHavingTooManyRestarts threshold: must be at least 1");
    return 0;
  }
  if (kd_json_get(args, "includingInitContainers", &v) && !kd_json_is_null(v) &&
      !kd_json_bool(v, &a->including_init)) {
    kd_fail_str("args.includingInitContainers: expected true or false");
    return 0;
  }
  if (kd_json_get(args, "states", &v) && !kd_json_strings(v, &a->states)) {
    kd_fail_str("args.states: expected a list of strings");
    return 0;
  }
  for (int i = 0; i < a->states.n; i++) {
    if (!kd_eq(a->states.s[i], a->states.len[i], "Running", 7) &&
        !kd_eq(a->states.s[i], a->states.len[i], "CrashLoopBackOff", 16)) {
      kd_fail_str("args.states: states must be one of [CrashLoopBackOff Running]");
      return 0;
    }
  }
  if (!kd_args_namespaces(args, &a->include, &a->exclude)) {
    kd_fail_str("args.namespaces: expected {include: [...]} or {exclude: [...]}, not both");
    return 0;
  }
  return 1;
}

KD_EXPORT("kd_validate") int kd_validate(const char *json, int len) {
  args_t a;
  return parse(json, len, &a) ? 0 : 1;
}

KD_EXPORT("deschedule") int deschedule(const char *json, int len, i64 now) {
  (void)now;
  args_t a;
  if (!parse(json, len, &a)) return 1;
  int n = kd_pod_count();
  i64 *node = kd_malloc((size_t)n * 8), *restarts = kd_malloc((size_t)n * 8);
  i64 *ns = kd_malloc((size_t)n * 8), *order = kd_malloc((size_t)n * 8);
  int *picked = kd_malloc((size_t)n * sizeof(int));
  unsigned char *ns_ok = kd_namespace_mask(&a.include, &a.exclude);
  if (!node || !restarts || !ns || !order || !picked || !ns_ok) {
    kd_fail_str("out of memory");
    return 1;
  }
  kd_pod_column(KD_COL_NODE, node, n);
  kd_pod_column(a.including_init ? KD_COL_RESTARTS_WITH_INIT : KD_COL_RESTARTS, restarts, n);
  kd_pod_column(KD_COL_NAMESPACE, ns, n);
  int flags = KD_STATE_PHASE | KD_STATE_WAITING | (a.including_init ? KD_STATE_INIT_CONTAINERS : 0);
  int count = 0;
  for (int i = 0; i < n; i++) {
    if (node[i] < 0 || restarts[i] < a.threshold || !ns_ok[ns[i]]) continue;
    if (a.states.n) {
      int in = 0;
      for (int s = 0; s < a.states.n && !in; s++)
        in = kd_pod_has_state(i, flags, a.states.s[s], a.states.len[s]);
      if (!in) continue;
    }
    /* Node by node (in the call's order), most restarts first on each node. */
    i64 r = restarts[i] > 2147483647 ? 2147483647 : restarts[i];
    order[i] = node[i] * 4294967296LL + (2147483647 - r);
    picked[count++] = i;
  }
  kd_sort_by(picked, count, order, 0);
  char buf[256];
  for (int k = 0; k < count; k++) {
    int i = picked[k];
    kd_text t = {buf, 0, sizeof buf};
    kd_puts(&t, "restarts ");
    kd_put_int(&t, restarts[i]);
    kd_puts(&t, " >= podRestartThreshold ");
    kd_put_int(&t, a.threshold);
    if (a.including_init) kd_puts(&t, " (init containers counted)");
    kd_nominate(i, "TooManyRestarts", 15, t.buf, t.len);
    kd_reason_number("restarts", 8, restarts[i]);
    kd_reason_number("podRestartThreshold", 19, a.threshold);
    kd_reason_flag("includingInitContainers", 23, a.including_init);
  }
  return 0;
}

/* `plan --explain`: why pod `pod` is not selected, in the native plugin's words. */
KD_EXPORT("kd_explain") int kd_explain(const char *json, int len, i64 now, int pod) {
  (void)now;
  args_t a;
  if (!parse(json, len, &a)) return 1;
  i64 *restarts = kd_malloc((size_t)(pod + 1) * 8), *ns = kd_malloc((size_t)(pod + 1) * 8);
  unsigned char *ns_ok = kd_namespace_mask(&a.include, &a.exclude);
  if (!restarts || !ns || !ns_ok) {
    kd_fail_str("out of memory");
    return 1;
  }
  kd_pod_column(a.including_init ? KD_COL_RESTARTS_WITH_INIT : KD_COL_RESTARTS, restarts, pod + 1);
  kd_pod_column(KD_COL_NAMESPACE, ns, pod + 1);
  char buf[256];
  kd_text t = {buf, 0, sizeof buf};
  if (restarts[pod] < a.threshold) {
    kd_puts(&t, "restarts ");
    kd_put_int(&t, restarts[pod]);
    kd_puts(&t, " < podRestartThreshold ");
    kd_put_int(&t, a.threshold);
    if (a.including_init) kd_puts(&t, " (init containers counted)");
  } else if (!ns_ok[ns[pod]]) {
    kd_puts(&t, "the plugin's namespaces / labelSelector exclude it");
  } else {
    /* The states as the native plugin lists them: sorted, each once. */
    kd_puts(&t, "restarts ");
    kd_put_int(&t, restarts[pod]);
    kd_puts(&t, " >= podRestartThreshold ");
    kd_put_int(&t, a.threshold);
    kd_puts(&t, ", but it is in none of the states [");
    int crash = kd_strings_has(&a.states, "CrashLoopBackOff", 16);
    int running = kd_strings_has(&a.states, "Running", 7);
    if (crash) kd_puts(&t, "\"CrashLoopBackOff\"");
    if (crash && running) kd_puts(&t, ", ");
    if (running) kd_puts(&t, "\"Running\"");
    kd_puts(&t, "]");
  }
  kd_explain_text(t.buf, t.len);
  return 0;
}
