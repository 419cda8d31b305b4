# hermesd container image. Build: docker build -t hermesd .
# CI builds the binary with exactly the command of the build stage (see .ci/run).
#
# Runtime needs: glibc (Debian bookworm), CA certificates for TLS to the chat platforms and
# model providers (rustls with the ring provider; no OpenSSL). Nothing else.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin hermesd

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/hermes --create-home hermes
COPY --from=build /src/target/release/hermesd /usr/local/bin/hermesd
ENV HERMES_HOME=/var/lib/hermes
VOLUME ["/var/lib/hermes"]
USER hermes
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/hermesd"]
CMD ["run"]
