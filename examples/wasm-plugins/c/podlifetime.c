/*
 * PodLifeTime as a WebAssembly plugin (Deschedule): evicts pods older than maxPodLifeTimeSeconds
 * and/or in one of `states`, in the namespaces `namespaces` selects; oldest first across all
 * nodes, with the native plugin's reason (code PodLifeTimeExceeded, its text and numbers).
 *
 * Args (the native plugin's names): maxPodLifeTimeSeconds, states, namespaces{include|exclude}.
 * The native plugin's other args are refused by kd_validate.
 */
#include "kube_descheduler.h"

static const char *ALLOWED_STATES[] = {
    "Completed", "ContainerCannotRun", "ContainerCreating", "CrashLoopBackOff",
    "CreateContainerConfigError", "CreateContainerError", "DeadlineExceeded", "ErrImagePull",
    "Error", "Evicted", "Failed", "ImagePullBackOff", "InvalidImageName", "NodeAffinity",
    "NodeLost", "OOMKilled", "Pending", "PodInitializing", "Running", "Shutdown", "StartError",
    "Succeeded", "UnexpectedAdmissionError", "Unknown", 0};

typedef struct {
  int has_max;
  i64 max;
  kd_strings states, include, exclude;
} args_t;

static int known_key(const char *k, int len, void *ctx) {
  (void)ctx;
  if (kd_eq(k, len, "maxPodLifeTimeSeconds", 21) || kd_eq(k, len, "states", 6) ||
      kd_eq(k, len, "namespaces", 10))
    return 1;
  kd_text t = {(char[160]){0}, 0, 160};
  kd_puts(&t, "args.");
  kd_put(&t, k, len < 64 ? len : 64);
  kd_puts(&t, ": not supported by the WebAssembly port (maxPodLifeTimeSeconds, states, namespaces)");
  kd_fail(t.buf, t.len);
  return 0;
}

/* 1 when the args are valid (otherwise kd_fail was called). */
static int parse(const char *json, int len, args_t *a) {
  kd_json args = {json, json + len}, v;
  a->has_max = 0;
  a->states.n = 0;
  if (kd_json_is_null(args) || !kd_json_is(args, '{')) {
    kd_fail_str("args: expected an object");
    return 0;
  }
  if (!kd_json_keys(args, known_key, 0)) return 0;
  if (kd_json_get(args, "maxPodLifeTimeSeconds", &v) && !kd_json_is_null(v)) {
    if (!kd_json_uint(v, &a->max)) {
      kd_fail_str("args.maxPodLifeTimeSeconds: expected a whole number of seconds >= 0");
      return 0;
    }
    a->has_max = 1;
  }
  if (kd_json_get(args, "states", &v) && !kd_json_strings(v, &a->states)) {
    kd_fail_str("args.states: expected a list of strings");
    return 0;
  }
  for (int i = 0; i < a->states.n; i++) {
    int ok = 0;
    for (int j = 0; ALLOWED_STATES[j]; j++)
      ok |= kd_eq(a->states.s[i], a->states.len[i], ALLOWED_STATES[j], kd_strlen(ALLOWED_STATES[j]));
    if (!ok) {
      kd_fail_str("args.states: states must be one of the upstream PodLifeTime states");
      return 0;
    }
  }
  if (!kd_args_namespaces(args, &a->include, &a->exclude)) {
    kd_fail_str("args.namespaces: expected {include: [...]} or {exclude: [...]}, not both");
    return 0;
  }
  if (!a->has_max && a->states.n == 0) {
    kd_fail_str("args: at least one filtering criterion must be specified (maxPodLifeTimeSeconds or states)");
    return 0;
  }
  return 1;
}

KD_EXPORT("kd_validate") int kd_validate(const char *json, int len) {
  args_t a;
  return parse(json, len, &a) ? 0 : 1;
}

/* A duration as the native reasons write it: 45s, 12m 5s, 3h 20m, 9d 3h. */
static void put_duration(kd_text *t, i64 secs) {
  if (secs < 0) {
    kd_puts(t, "-");
    secs = -secs;
  }
  i64 d = secs / 86400, h = secs % 86400 / 3600, m = secs % 3600 / 60, s = secs % 60;
  if (d > 0) {
    kd_put_int(t, d);
    kd_puts(t, "d");
    if (h > 0) {
      kd_puts(t, " ");
      kd_put_int(t, h);
      kd_puts(t, "h");
    }
  } else if (h > 0) {
    kd_put_int(t, h);
    kd_puts(t, "h");
    if (m > 0) {
      kd_puts(t, " ");
      kd_put_int(t, m);
      kd_puts(t, "m");
    }
  } else if (m > 0) {
    kd_put_int(t, m);
    kd_puts(t, "m");
    if (s > 0) {
      kd_puts(t, " ");
      kd_put_int(t, s);
      kd_puts(t, "s");
    }
  } else {
    kd_put_int(t, s);
    kd_puts(t, "s");
  }
}

static const int STATE_FLAGS = KD_STATE_PHASE | KD_STATE_POD_REASON | KD_STATE_WAITING | KD_STATE_TERMINATED;

KD_EXPORT("deschedule") int deschedule(const char *json, int len, i64 now) {
  args_t a;
  if (!parse(json, len, &a)) return 1;
  int n = kd_pod_count();
  i64 *node = kd_malloc((size_t)n * 8), *created = kd_malloc((size_t)n * 8);
  i64 *ns = kd_malloc((size_t)n * 8);
  int *picked = kd_malloc((size_t)n * sizeof(int));
  unsigned char *ns_ok = kd_namespace_mask(&a.include, &a.exclude);
  if (!node || !created || !ns || !picked || !ns_ok) {
    kd_fail_str("out of memory");
    return 1;
  }
  kd_pod_column(KD_COL_NODE, node, n);
  kd_pod_column(KD_COL_CREATED, created, n);
  kd_pod_column(KD_COL_NAMESPACE, ns, n);
  int count = 0;
  for (int i = 0; i < n; i++) {
    if (node[i] < 0 || !ns_ok[ns[i]]) continue;
    /* Strictly older than the max in whole seconds; an unknown creation time is very old. */
    if (a.has_max && created[i] != KD_UNKNOWN_TIME) {
      i64 age = now - created[i];
      if (age < 0 || age <= a.max) continue;
    }
    if (a.states.n) {
      int in = 0;
      for (int s = 0; s < a.states.n && !in; s++)
        in = kd_pod_has_state(i, STATE_FLAGS, a.states.s[s], a.states.len[s]);
      if (!in) continue;
    }
    picked[count++] = i;
  }
  /* Oldest first (an unknown creation time sorts first), stable for equal times. */
  kd_sort_by(picked, count, created, 0);
  char buf[1024];
  for (int k = 0; k < count; k++) {
    int i = picked[k];
    kd_text t = {buf, 0, sizeof buf};
    kd_puts(&t, "age ");
    if (created[i] == KD_UNKNOWN_TIME) kd_puts(&t, "unknown");
    else put_duration(&t, now - created[i]);
    if (a.has_max) {
      kd_puts(&t, " > maxPodLifeTimeSeconds ");
      kd_put_int(&t, a.max);
      kd_puts(&t, " (");
      put_duration(&t, a.max);
      kd_puts(&t, ")");
    }
    if (a.states.n) {
      kd_puts(&t, "; in one of the states [");
      for (int s = 0; s < a.states.n; s++) {
        if (s) kd_puts(&t, ", ");
        kd_puts(&t, "\"");
        kd_put(&t, a.states.s[s], a.states.len[s]);
        kd_puts(&t, "\"");
      }
      kd_puts(&t, "]");
    }
    kd_nominate(i, "PodLifeTimeExceeded", 19, t.buf, t.len);
    if (created[i] != KD_UNKNOWN_TIME) kd_reason_number("ageSeconds", 10, now - created[i]);
    if (a.has_max) kd_reason_number("maxPodLifeTimeSeconds", 21, a.max);
  }
  return 0;
}

/* `plan --explain`: why pod `pod` is not selected, in the native plugin's words. */
KD_EXPORT("kd_explain") int kd_explain(const char *json, int len, i64 now, int pod) {
  args_t a;
  if (!parse(json, len, &a)) return 1;
  i64 *created = kd_malloc((size_t)(pod + 1) * 8);
  if (!created) {
    kd_fail_str("out of memory");
    return 1;
  }
  kd_pod_column(KD_COL_CREATED, created, pod + 1);
  char buf[256];
  kd_text t = {buf, 0, sizeof buf};
  if (a.has_max && created[pod] != KD_UNKNOWN_TIME && now - created[pod] <= a.max) {
    kd_puts(&t, "age ");
    put_duration(&t, now - created[pod]);
    kd_puts(&t, " <= maxPodLifeTimeSeconds ");
    kd_put_int(&t, a.max);
    kd_puts(&t, " (");
    put_duration(&t, a.max);
    kd_puts(&t, ")");
  } else {
    kd_puts(&t, "its namespace, labels, states, conditions or owner kind do not match the plugin's args");
  }
  kd_explain_text(t.buf, t.len);
  return 0;
}
