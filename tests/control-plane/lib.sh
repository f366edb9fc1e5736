# Shared by up, down, prebuild and smoke (sourced, not executed).
# shellcheck shell=bash
CP_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions
. "$CP_HERE/versions"
CP_CACHE_ROOT=${KD_CACHE:-$HOME/.cache/kube-descheduler}/control-plane

cp_die() { echo "control-plane: $*" >&2; exit 1; }
cp_log() { echo "control-plane: $*" >&2; }

# Finds the go command (/usr/local/go/bin/go or go on PATH), or fails with one clear line.
cp_find_go() {
  [ -z "${CP_GO_CHECKED:-}" ] || return 0
  if [ -n "${CP_GO:-}" ]; then [ -x "$CP_GO" ] || cp_die "CP_GO=$CP_GO is not an executable"
  elif [ -x /usr/local/go/bin/go ]; then CP_GO=/usr/local/go/bin/go
  elif command -v go >/dev/null 2>&1; then CP_GO=$(command -v go)
  else cp_die "no Go toolchain (need /usr/local/go/bin/go or go on PATH, Go >= 1.21; the build modules ask for 1.24 and 1.26) to build the control plane"
  fi
  local v
  v=$("$CP_GO" env GOVERSION 2>/dev/null) || cp_die "$CP_GO does not run"
  v=${v#go}
  if [ "$(printf '%s\n' "$v" 1.21 | sort -V | head -1)" != 1.21 ]; then
    cp_die "Go $v at $CP_GO is too old to build the control plane (need >= 1.21, which fetches the Go a module asks for; 1.26 is used)"
  fi
  # A module whose go line asks for a newer Go than the local one fetches it from the proxy
  # (GOTOOLCHAIN=go1.27.x pins one explicitly).
  export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
  export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
  CP_GO_CHECKED=1
}

# Resolves K8S_VERSION (exact, or a minor line like 1.34 / 1.34.x) against the pinned list.
cp_resolve_version() {
  local want=${K8S_VERSION:-$K8S_VERSION_DEFAULT} v
  want=${want#v}; want=${want%.x}
  for v in $K8S_VERSIONS; do
    if [ "$v" = "$want" ] || [ "${v%.*}" = "$want" ]; then echo "$v"; return; fi
  done
  cp_die "K8S_VERSION=$want is not pinned (tests/control-plane/versions has: $K8S_VERSIONS)"
}

# The cache directory holding the binaries for one Kubernetes version.
cp_bin_dir() { echo "$CP_CACHE_ROOT/$1"; }

# Bumped whenever the way the binaries are built changes, so cached builds of an older recipe
# are rebuilt (most of it comes from Go's build cache).
CP_BUILD_RECIPE=2

# Whether `out` holds a finished build of the current recipe.
cp_build_done() {
  [ -f "$1/complete" ] && grep -qx "recipe $CP_BUILD_RECIPE" "$1/complete"
}

# Builds (once) etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok for one
# Kubernetes version into the cache. A finished build is marked by the file `complete`.
cp_build() {
  local ver=$1 out tmp start mod
  out=$(cp_bin_dir "$ver")
  cp_build_done "$out" && return 0
  cp_find_go
  mod=$CP_HERE/build/k8s-$ver
  [ -f "$mod/go.mod" ] || cp_die "no build module $mod (run tests/control-plane/build/gen-module $ver)"
  mkdir -p "$CP_CACHE_ROOT"
  exec 9>"$CP_CACHE_ROOT/.build-$ver.lock"
  if ! flock -n 9; then
    cp_log "another process is building v$ver; waiting for it"
    flock 9
  fi
  if cp_build_done "$out"; then exec 9>&-; return 0; fi
  # One quick look at the proxy first, so an unreachable proxy is one clear line, not a Go trace.
  if ! (cd "$mod" && "$CP_GO" mod download k8s.io/kubernetes >/dev/null 2>"$CP_CACHE_ROOT/.download-$ver.log"); then
    cp_die "cannot download k8s.io/kubernetes@v$ver from the Go module proxy ($("$CP_GO" env GOPROXY)): $(tail -1 "$CP_CACHE_ROOT/.download-$ver.log")"
  fi
  tmp=$out.partial
  rm -rf "$tmp"; mkdir -p "$tmp"
  start=$(date +%s)
  cp_log "building Kubernetes v$ver, etcd v$ETCD_VERSION, kwok v$KWOK_VERSION into $out (a cold build takes many minutes)"
  local c minor=${ver#*.} v
  minor=${minor%%.*}
  # The version stamps a release build sets (hack/lib/version.sh): without them the servers
  # report v0.0.0-master, which kubectl version cannot parse and clients cannot compare.
  local ldflags="-s -w"
  for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $v.gitVersion=v$ver -X $v.gitMajor=1 -X $v.gitMinor=$minor"
    ldflags="$ldflags -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
  done
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    (cd "$mod" && nice -n 10 "$CP_GO" build -trimpath -ldflags="$ldflags" -o "$tmp/$c" "k8s.io/kubernetes/cmd/$c") \
      || cp_die "building $c v$ver failed"
    cp_log "  $c built ($(( $(date +%s) - start )) s so far)"
  done
  (cd "$CP_HERE/build/etcd" && nice -n 10 "$CP_GO" build -trimpath -ldflags=-s\ -w -o "$tmp/etcd" .) \
    || cp_die "building etcd v$ETCD_VERSION failed"
  cp_log "  etcd built ($(( $(date +%s) - start )) s so far)"
  (cd "$CP_HERE/build/kwok" && nice -n 10 "$CP_GO" build -trimpath -ldflags=-s\ -w -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok) \
    || cp_die "building kwok v$KWOK_VERSION failed"
  cp_kwok_stages "$tmp"
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do
    [ -x "$tmp/$c" ] || cp_die "building v$ver: $tmp/$c was not produced"
  done
  {
    echo "recipe $CP_BUILD_RECIPE"
    echo "kubernetes v$ver"; echo "etcd v$ETCD_VERSION"; echo "kwok v$KWOK_VERSION"
    echo "built $(date -u +%FT%TZ) in $(( $(date +%s) - start )) s with $("$CP_GO" version)"
  } > "$tmp/complete"
  rm -rf "$out"; mv "$tmp" "$out"
  exec 9>&-
  cp_log "built v$ver in $(( $(date +%s) - start )) s"
}

# Writes kwok's default Stages (printed by build/kwok/stages from the pinned kwok module) next to
# the kwok binary, for `kwok --config`.
cp_kwok_stages() {
  local out=$1
  [ -s "$out/kwok-stages.yaml" ] && return 0
  cp_find_go
  (cd "$CP_HERE/build/kwok" && nice -n 10 "$CP_GO" run ./stages > "$out/kwok-stages.yaml.tmp") \
    || cp_die "writing kwok's default stages failed"
  mv "$out/kwok-stages.yaml.tmp" "$out/kwok-stages.yaml"
}
