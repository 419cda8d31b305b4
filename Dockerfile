# hermesd container image.
#
#   docker build --build-arg GIT_REV=$(git rev-parse --short HEAD) -t hermesd .
#   docker run -d --name hermesd -v hermes-data:/data --env-file hermesd.env \
#       -p 127.0.0.1:8642:8642 hermesd
#   (or: docker compose -f deploy/compose.yaml up -d)
#
# The release binary is built by .ci/release-build, the same script .ci/run uses, so the
# binary CI tests is built with exactly this command and these flags (tests/deploy_units.rs
# checks that this file builds through that script and nothing else).
#
# Runtime needs, and why the runtime image is debian:bookworm-slim:
#   - glibc and libgcc_s (the binary links libc, libm and libgcc_s dynamically, nothing else;
#     build and runtime images are both Debian bookworm, so the versions match). ~14 MB.
#   - CA certificates: hermesd's own HTTPS client carries the webpki root set, but the
#     system trust store is installed for components that read it and so an operator can add
#     a private CA (SSL_CERT_FILE / SSL_CERT_DIR). TLS is rustls with ring: no OpenSSL.
#   - bash and coreutils: the agent's terminal tool runs commands with /bin/bash, which is
#     why this is not a distroless image.
#   - tini as PID 1: tool commands may leave background processes; tini reaps them and
#     forwards SIGTERM to hermesd, which drains and exits within its deadline.
#
# Networking: the OpenAI-compatible API (8642) listens on 127.0.0.1 unless the operator sets
# API_SERVER_HOST=0.0.0.0 (and API_SERVER_KEY); only then is a published -p 8642 reachable.
# The admin API (8643: /health, /ready, /metrics) has no authentication and always stays on
# the container's loopback; the HEALTHCHECK below runs inside the container and reaches it.

FROM rust:1.95-slim-bookworm AS plan
WORKDIR /src
COPY . .
# Manifests plus empty stubs: this stage's output changes only when dependencies change.
RUN .ci/dependency-skeleton /src /skeleton

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY --from=plan /skeleton/ ./
COPY .ci/release-build .ci/release-build
# The dependency layer: cached until Cargo.toml or Cargo.lock change.
RUN .ci/release-build
COPY . .
ARG GIT_REV=unknown
# COPY keeps the sources' old timestamps, which cargo would take as older than the stubs it
# just built: touch them so every crate of ours is rebuilt from the real sources.
RUN find . -name '*.rs' -not -path './target/*' -exec touch {} + \
 && HERMESD_GIT_REV="$GIT_REV" .ci/release-build \
 && ./target/release/hermesd --version

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /data --no-create-home hermes \
 && install -d -m 0700 -o hermes -g hermes /data
COPY --from=build /src/target/release/hermesd /usr/local/bin/hermesd
ENV HERMES_HOME=/data
VOLUME ["/data"]
WORKDIR /data
USER hermes
EXPOSE 8642 8643
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/hermesd", "health"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/hermesd"]
CMD ["run"]
