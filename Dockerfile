# syntax=docker/dockerfile:1
# kube-descheduler: one binary (links glibc only; TLS is rustls, no OpenSSL) on distroless cc.
#   docker build -t kube-descheduler:0.1.0 .
# Subcommands: run | webhook | certs | plan (the Helm chart passes them as args).

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# The `dist` profile: the release build, stripped (Cargo.toml).
# Cache the registry and target dir between builds (BuildKit); copy the binary out of the cache.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked --bin kube-descheduler \
 && install -m 0755 target/dist/kube-descheduler /kube-descheduler

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /kube-descheduler /kube-descheduler
# The distroless "nonroot" user; the chart sets runAsNonRoot and runAsUser 65532 to match.
USER 65532:65532
ENTRYPOINT ["/kube-descheduler"]
