# syntax=docker/dockerfile:1
# The augur image: `augur serve` as the non-root user 65532 on a read-only root filesystem,
# the bundled traces at /usr/share/augur/datasets (where the binary looks for them), its
# state (event store, model registry, API token) in the /var/lib/augur volume.
#
#   docker build -t augur:0.1.0 .
#   docker run --rm -p 8080:8080 --read-only -v augur-data:/var/lib/augur augur:0.1.0
#
# scripts/image-layout.sh lays out the same files without a container engine and runs them
# the same way; keep the two in step (it checks the lines it depends on). docs/kubernetes.md
# has the build, push and deploy steps.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS builder
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p augur --bin augur \
    && install -D -m 0755 target/release/augur /out/augur

FROM debian:${DEBIAN_RELEASE}-slim
# CA roots for a kubeconfig's API server outside the cluster (in a pod, the service
# account's CA is used); the user and its data folder
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 65532 augur \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /var/lib/augur --shell /usr/sbin/nologin augur \
    && install -d -o 65532 -g 65532 -m 0750 /var/lib/augur
COPY --from=builder /out/augur /usr/local/bin/augur
COPY datasets/data/ /usr/share/augur/datasets/
ENV AUGUR_LOG=info
USER 65532:65532
WORKDIR /var/lib/augur
VOLUME ["/var/lib/augur"]
EXPOSE 8080
ENTRYPOINT ["augur"]
CMD ["serve", "--addr=0.0.0.0:8080", "--data-dir=/var/lib/augur"]
