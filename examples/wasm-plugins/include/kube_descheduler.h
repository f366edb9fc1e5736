/*
 * kube_descheduler.h: the C guest side of kube-descheduler's WebAssembly plugin ABI, version 1
 * (docs/wasm-plugins.md). One translation unit per plugin includes it; it defines the exports
 * `kd_abi_version` and `kd_alloc` (a bump allocator over the module's heap), declares the host
 * functions, and offers a minimal JSON reader for the plugin's `args`.
 *
 * Build (no libc):
 *   clang --target=wasm32 -nostdlib -O2 -Wl,--no-entry -Wl,--export-dynamic \
 *         -I examples/wasm-plugins/include -o plugin.wasm plugin.c
 *
 * The plugin then defines
 *   KD_EXPORT("deschedule") int deschedule(const char *args, int args_len, long long now);
 * (or "balance"), and optionally KD_EXPORT("kd_validate") int kd_validate(const char *, int)
 * and, for `plan --explain`,
 *   KD_EXPORT("kd_explain") int kd_explain(const char *args, int args_len, long long now, int pod);
 * which answers through kd_explain_text why the plugin would not select pod `pod`.
 */
#ifndef KUBE_DESCHEDULER_H
#define KUBE_DESCHEDULER_H

#define KD_ABI_VERSION 1

/* Helpers a plugin may not use all of. */
#define KD_FN static __attribute__((unused))

#define KD_EXPORT(name) __attribute__((export_name(name)))
#define KD_IMPORT(name) __attribute__((import_module("kube_descheduler"), import_name(name)))

typedef unsigned long size_t;
typedef long long i64;

/* ---- host functions (module "kube_descheduler") ---- */

/* Nodes given to this call (node index 0 .. node_count-1). */
KD_IMPORT("node_count") int kd_node_count(void);
/* Pods in this call's table: the pods on the given nodes, then the live pods on no given node. */
KD_IMPORT("pod_count") int kd_pod_count(void);
/* Distinct namespaces of the table's pods. */
KD_IMPORT("namespace_count") int kd_namespace_count(void);
/* Writes `count` i64 values of `column` (KD_COL_*) for pods 0 .. count-1 to `dst`. */
KD_IMPORT("pod_column") int kd_pod_column(int column, i64 *dst, int count);
/* Name strings: copy at most `cap` bytes to `buf`, return the full length (-1: none). */
KD_IMPORT("namespace_name") int kd_namespace_name(int ns, char *buf, int cap);
KD_IMPORT("node_name") int kd_node_name(int node, char *buf, int cap);
KD_IMPORT("pod_name") int kd_pod_name(int pod, char *buf, int cap);
KD_IMPORT("pod_label") int kd_pod_label(int pod, const char *key, int key_len, char *buf, int cap);
KD_IMPORT("pod_owner_kind") int kd_pod_owner_kind(int pod, char *buf, int cap);
/* 1 when one of the pod's states selected by `flags` (KD_STATE_*) equals `state`. */
KD_IMPORT("pod_has_state") int kd_pod_has_state(int pod, int flags, const char *state, int len);
/* Nominates pod `pod` for eviction with a reason code (UpperCamelCase, may be empty) and text. */
KD_IMPORT("nominate") int kd_nominate(int pod, const char *code, int code_len, const char *text,
                                      int text_len);
/* Adds a number to the last nomination's reason. */
KD_IMPORT("reason_number") int kd_reason_number(const char *key, int key_len, i64 value);
/* Adds a yes/no fact to the last nomination's reason. */
KD_IMPORT("reason_flag") int kd_reason_flag(const char *key, int key_len, int value);
/* Gives up: the call (or, from kd_validate, the policy) fails with this message. */
KD_IMPORT("fail") void kd_fail(const char *msg, int len);
/* Only inside kd_explain: why the plugin would not select the asked pod (at most 1024 bytes of
 * UTF-8; a second call replaces the first, an empty text means no explanation). */
KD_IMPORT("explain") int kd_explain_text(const char *text, int len);

/* ABI v1.1 (docs/wasm-plugins.md): facts as one JSON array each, copied as kd_node_name copies a
 * name (at most `cap` bytes, the full length returned). A module imports only the functions it
 * calls; one calling none of these is an ABI v1 module. */
KD_IMPORT("node_taints") int kd_node_taints(int node, char *buf, int cap);
KD_IMPORT("pod_tolerations") int kd_pod_tolerations(int pod, char *buf, int cap);
KD_IMPORT("pod_conditions") int kd_pod_conditions(int pod, char *buf, int cap);
KD_IMPORT("pod_containers") int kd_pod_containers(int pod, char *buf, int cap);
KD_IMPORT("pod_owners") int kd_pod_owners(int pod, char *buf, int cap);
/* Adds a string fact (at most 1024 bytes of UTF-8) to the last nomination's reason. */
KD_IMPORT("reason_string") int kd_reason_string(const char *key, int key_len, const char *value,
                                                int value_len);

enum {
  KD_COL_NODE = 0,              /* node index, -1: on none of the call's nodes */
  KD_COL_CREATED = 1,           /* Unix seconds, KD_UNKNOWN_TIME when unknown */
  KD_COL_PHASE = 2,             /* KD_PHASE_* */
  KD_COL_RESTARTS = 3,          /* app container restarts */
  KD_COL_RESTARTS_WITH_INIT = 4,/* app + init container restarts */
  KD_COL_NAMESPACE = 5,         /* namespace index */
  KD_COL_CPU_REQUEST = 6,       /* millicores */
  KD_COL_MEMORY_REQUEST = 7,    /* bytes */
  KD_COL_PRIORITY = 8,
};
#define KD_UNKNOWN_TIME (-9223372036854775807LL - 1)
enum { KD_PHASE_PENDING, KD_PHASE_RUNNING, KD_PHASE_SUCCEEDED, KD_PHASE_FAILED, KD_PHASE_UNKNOWN };
enum {
  KD_STATE_PHASE = 1,
  KD_STATE_POD_REASON = 2,
  KD_STATE_WAITING = 4,
  KD_STATE_TERMINATED = 8,
  KD_STATE_INIT_CONTAINERS = 16,
  KD_STATE_EPHEMERAL_CONTAINERS = 32,
};

/* ---- memory: a bump allocator (each call runs in a fresh instance, so nothing is freed) ---- */

extern unsigned char __heap_base;
static size_t kd_heap_top;

KD_FN void *kd_malloc(size_t n) {
  if (kd_heap_top == 0) kd_heap_top = (size_t)&__heap_base;
  size_t start = (kd_heap_top + 15) & ~(size_t)15;
  size_t end = start + n;
  size_t have = __builtin_wasm_memory_size(0) * 65536;
  if (end > have) {
    size_t pages = (end - have + 65535) / 65536;
    if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1) return 0;
  }
  kd_heap_top = end;
  return (void *)start;
}

KD_EXPORT("kd_abi_version") int kd_abi_version(void) { return KD_ABI_VERSION; }
KD_EXPORT("kd_alloc") void *kd_alloc(int size) { return kd_malloc(size < 0 ? 0 : (size_t)size); }

/* clang may emit calls to these; volatile stops it turning them into calls to themselves. */
void *memcpy(void *dst, const void *src, size_t n) {
  volatile unsigned char *d = dst;
  const unsigned char *s = src;
  while (n--) *d++ = *s++;
  return dst;
}
void *memset(void *dst, int c, size_t n) {
  volatile unsigned char *d = dst;
  while (n--) *d++ = (unsigned char)c;
  return dst;
}

KD_FN int kd_strlen(const char *s) {
  int n = 0;
  while (s[n]) n++;
  return n;
}
KD_FN int kd_eq(const char *a, int alen, const char *b, int blen) {
  if (alen != blen) return 0;
  for (int i = 0; i < alen; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}
KD_FN void kd_fail_str(const char *msg) { kd_fail(msg, kd_strlen(msg)); }

/* ---- text building ---- */

typedef struct {
  char *buf;
  int len, cap;
} kd_text;

KD_FN void kd_put(kd_text *t, const char *s, int n) {
  for (int i = 0; i < n && t->len < t->cap; i++) t->buf[t->len++] = s[i];
}
KD_FN void kd_puts(kd_text *t, const char *s) { kd_put(t, s, kd_strlen(s)); }
KD_FN void kd_put_int(kd_text *t, i64 v) {
  char tmp[24];
  int n = 0;
  unsigned long long u = v < 0 ? (unsigned long long)(-(v + 1)) + 1 : (unsigned long long)v;
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) kd_put(t, "-", 1);
  while (n) kd_put(t, &tmp[--n], 1);
}

/* ---- a minimal JSON reader (enough for plugin args: objects, arrays, strings, numbers, bools) ---- */

typedef struct {
  const char *p; /* start of the value */
  const char *end; /* end of the document */
} kd_json;

KD_FN const char *kd_json_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
  return p;
}

/* Skips one value; returns the position after it, or 0 on malformed JSON. */
KD_FN const char *kd_json_skip(const char *p, const char *end) {
  p = kd_json_ws(p, end);
  if (p >= end) return 0;
  if (*p == '"') {
    for (p++; p < end; p++) {
      if (*p == '\\') p++;
      else if (*p == '"') return p + 1;
    }
    return 0;
  }
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = kd_json_ws(p + 1, end);
    if (p < end && *p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        p = kd_json_skip(p, end); /* key */
        if (!p) return 0;
        p = kd_json_ws(p, end);
        if (p >= end || *p != ':') return 0;
        p++;
      }
      p = kd_json_skip(p, end);
      if (!p) return 0;
      p = kd_json_ws(p, end);
      if (p < end && *p == ',') {
        p++;
        continue;
      }
      if (p < end && *p == close) return p + 1;
      return 0;
    }
  }
  while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n') p++;
  return p;
}

/* The member `key` of the object `obj`; found: 1 and *out set. */
KD_FN int kd_json_get(kd_json obj, const char *key, kd_json *out) {
  const char *p = kd_json_ws(obj.p, obj.end);
  int klen = kd_strlen(key);
  if (p >= obj.end || *p != '{') return 0;
  p = kd_json_ws(p + 1, obj.end);
  while (p < obj.end && *p == '"') {
    const char *k = p + 1;
    const char *after = kd_json_skip(p, obj.end);
    if (!after) return 0;
    int match = kd_eq(k, (int)(after - 1 - k), key, klen);
    p = kd_json_ws(after, obj.end);
    if (p >= obj.end || *p != ':') return 0;
    p = kd_json_ws(p + 1, obj.end);
    if (match) {
      out->p = p;
      out->end = obj.end;
      return 1;
    }
    p = kd_json_skip(p, obj.end);
    if (!p) return 0;
    p = kd_json_ws(p, obj.end);
    if (p < obj.end && *p == ',') p = kd_json_ws(p + 1, obj.end);
  }
  return 0;
}

/* Calls f(key, key_len, ctx) for each member of the object; 0 when `obj` is not an object. */
KD_FN int kd_json_keys(kd_json obj, int (*f)(const char *, int, void *), void *ctx) {
  const char *p = kd_json_ws(obj.p, obj.end);
  if (p >= obj.end || *p != '{') return 0;
  p = kd_json_ws(p + 1, obj.end);
  while (p < obj.end && *p == '"') {
    const char *k = p + 1;
    const char *after = kd_json_skip(p, obj.end);
    if (!after) return 0;
    if (!f(k, (int)(after - 1 - k), ctx)) return 0;
    p = kd_json_ws(after, obj.end);
    if (p >= obj.end || *p != ':') return 0;
    p = kd_json_skip(p + 1, obj.end);
    if (!p) return 0;
    p = kd_json_ws(p, obj.end);
    if (p < obj.end && *p == ',') p = kd_json_ws(p + 1, obj.end);
  }
  return 1;
}

KD_FN int kd_json_is(kd_json v, char c) {
  const char *p = kd_json_ws(v.p, v.end);
  return p < v.end && *p == c;
}
KD_FN int kd_json_is_null(kd_json v) {
  const char *p = kd_json_ws(v.p, v.end);
  return v.end - p >= 4 && p[0] == 'n' && p[1] == 'u' && p[2] == 'l' && p[3] == 'l';
}

/* A non-negative whole number; 1 on success. */
KD_FN int kd_json_uint(kd_json v, i64 *out) {
  const char *p = kd_json_ws(v.p, v.end);
  i64 n = 0;
  int digits = 0;
  while (p < v.end && *p >= '0' && *p <= '9') {
    if (n > 922337203685477580LL) return 0;
    n = n * 10 + (*p++ - '0');
    digits++;
  }
  if (!digits || (p < v.end && (*p == '.' || *p == 'e' || *p == 'E'))) return 0;
  *out = n;
  return 1;
}

KD_FN int kd_json_bool(kd_json v, int *out) {
  const char *p = kd_json_ws(v.p, v.end);
  if (v.end - p >= 4 && p[0] == 't' && p[1] == 'r' && p[2] == 'u' && p[3] == 'e') {
    *out = 1;
    return 1;
  }
  if (v.end - p >= 5 && p[0] == 'f' && p[1] == 'a' && p[2] == 'l' && p[3] == 's' && p[4] == 'e') {
    *out = 0;
    return 1;
  }
  return 0;
}

/* A string without escapes: *s points into the args, *len its length; 1 on success. */
KD_FN int kd_json_str(kd_json v, const char **s, int *len) {
  const char *p = kd_json_ws(v.p, v.end);
  if (p >= v.end || *p != '"') return 0;
  const char *q = p + 1;
  while (q < v.end && *q != '"') {
    if (*q == '\\') return 0;
    q++;
  }
  if (q >= v.end) return 0;
  *s = p + 1;
  *len = (int)(q - p - 1);
  return 1;
}

/* Array iteration: start with kd_json_first, continue with kd_json_next while they return 1. */
KD_FN int kd_json_first(kd_json arr, kd_json *item) {
  const char *p = kd_json_ws(arr.p, arr.end);
  if (p >= arr.end || *p != '[') return 0;
  p = kd_json_ws(p + 1, arr.end);
  if (p >= arr.end || *p == ']') return 0;
  item->p = p;
  item->end = arr.end;
  return 1;
}
KD_FN int kd_json_next(kd_json *item) {
  const char *p = kd_json_skip(item->p, item->end);
  if (!p) return 0;
  p = kd_json_ws(p, item->end);
  if (p >= item->end || *p != ',') return 0;
  item->p = kd_json_ws(p + 1, item->end);
  return 1;
}

/* A list of strings (e.g. `states`, `namespaces.include`). */
typedef struct {
  const char *s[64];
  int len[64];
  int n;
} kd_strings;

/* Reads an array of strings into `out`; 1 on success (an absent or null value is empty). */
KD_FN int kd_json_strings(kd_json v, kd_strings *out) {
  out->n = 0;
  if (kd_json_is_null(v)) return 1;
  if (!kd_json_is(v, '[')) return 0;
  kd_json item;
  if (!kd_json_first(v, &item)) return 1;
  do {
    if (out->n >= 64) return 0;
    if (!kd_json_str(item, &out->s[out->n], &out->len[out->n])) return 0;
    out->n++;
  } while (kd_json_next(&item));
  return 1;
}

KD_FN int kd_strings_has(const kd_strings *l, const char *s, int len) {
  for (int i = 0; i < l->n; i++)
    if (kd_eq(l->s[i], l->len[i], s, len)) return 1;
  return 0;
}

/* ---- namespaces: `namespaces: {include: [...], exclude: [...]}` ---- */

/* Reads `namespaces` from `args` into include/exclude; 1 on success (absent: both empty). */
KD_FN int kd_args_namespaces(kd_json args, kd_strings *include, kd_strings *exclude) {
  kd_json ns, v;
  include->n = exclude->n = 0;
  if (!kd_json_get(args, "namespaces", &ns) || kd_json_is_null(ns)) return 1;
  if (!kd_json_is(ns, '{')) return 0;
  if (kd_json_get(ns, "include", &v) && !kd_json_strings(v, include)) return 0;
  if (kd_json_get(ns, "exclude", &v) && !kd_json_strings(v, exclude)) return 0;
  return !(include->n && exclude->n);
}

/* One byte per namespace index: 1 when the namespace passes include/exclude. */
KD_FN unsigned char *kd_namespace_mask(const kd_strings *include, const kd_strings *exclude) {
  int n = kd_namespace_count();
  unsigned char *mask = kd_malloc((size_t)n + 1);
  char name[256];
  if (!mask) return 0;
  for (int i = 0; i < n; i++) {
    int len = kd_namespace_name(i, name, sizeof name);
    if (len > (int)sizeof name) len = 0; /* longer than any namespace name can be */
    if (include->n) mask[i] = (unsigned char)kd_strings_has(include, name, len);
    else mask[i] = (unsigned char)!kd_strings_has(exclude, name, len);
  }
  return mask;
}

/* ---- a stable sort of pod indices by a key (merge sort) ---- */

KD_FN void kd_sort_by(int *idx, int n, const i64 *key, int descending) {
  int *tmp = kd_malloc((size_t)n * sizeof(int));
  if (!tmp) return;
  for (int width = 1; width < n; width *= 2) {
    for (int lo = 0; lo < n; lo += 2 * width) {
      int mid = lo + width < n ? lo + width : n;
      int hi = lo + 2 * width < n ? lo + 2 * width : n;
      int i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        i64 a = key[idx[i]], b = key[idx[j]];
        int take_right = descending ? b > a : b < a;
        tmp[k++] = take_right ? idx[j++] : idx[i++];
      }
      while (i < mid) tmp[k++] = idx[i++];
      while (j < hi) tmp[k++] = idx[j++];
    }
    for (int i = 0; i < n; i++) idx[i] = tmp[i];
  }
}

#endif
