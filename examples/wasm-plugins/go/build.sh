#!/usr/bin/env bash
# Builds the Go example plugins into examples/wasm-plugins/go/*.wasm, reproducibly, with the Go
# toolchain pinned by go.mod (GOTOOLCHAIN=local: the installed go must be that version).
#   examples/wasm-plugins/go/build.sh [OUT_DIR [PACKAGE...]]
# OUT_DIR defaults to this directory, the packages to the committed examples (podlifetime,
# nodetaints); the tests also build misbehave.
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-.}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
want="$(sed -n 's/^toolchain //p' go.mod)"
have="$(GOTOOLCHAIN=local go env GOVERSION)"
if [ "$want" != "$have" ]; then
  echo "build.sh: go.mod pins $want, the installed Go is $have" >&2
  exit 1
fi
export GOTOOLCHAIN=local GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 GOFLAGS=-mod=mod
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
shift || true
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(podlifetime nodetaints)
for name in "${pkgs[@]}"; do
  go build -buildmode=c-shared -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o "$tmp/$name.go.wasm" "./$name"
  GOOS= GOARCH= go run kube-descheduler/sdk/go/cmd/kd-wasm-unwasi "$tmp/$name.go.wasm" "$out/$name.wasm"
done
