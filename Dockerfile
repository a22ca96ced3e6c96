# syntax=docker/dockerfile:1
# The Switchyard image: `switchyard` (serve, ingest, the operator commands) and
# `switchyard-localnet` (the local base layer and ER). Debian 12 in both stages, so the
# runtime libraries are the very ones the build linked against.

FROM debian:bookworm AS build
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
# The build packages of scripts/setup; this layer is rebuilt only when the script changes.
COPY scripts/setup scripts/setup
RUN scripts/setup --build-only && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build/docker -G Ninja -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build/docker --target switchyard switchyard-localnet \
 && strip build/docker/app/switchyard build/docker/localnet/switchyard-localnet

FROM debian:bookworm-slim AS runtime
ENV DEBIAN_FRONTEND=noninteractive
# The shared libraries the two binaries link (tests/kafka/check_runtime_libraries.sh checks
# this list against them), curl for the healthchecks, CA certificates for https upstreams.
ARG RUNTIME_PACKAGES="libabsl20220623 libboost-system1.74.0 libfmt9 libhiredis0.14 libisal2 libjemalloc2 librdkafka1 \
librocksdb7.8 libsimdjson14 libsodium23 libspdlog1.10 libssl3 libtomlplusplus3 libxxhash0 zlib1g \
ca-certificates curl"
RUN apt-get update \
 && apt-get install -y --no-install-recommends ${RUNTIME_PACKAGES} \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /var/lib/switchyard switchyard \
 && install -d -o switchyard -g switchyard /var/lib/switchyard/data
COPY --from=build /src/build/docker/app/switchyard /usr/local/bin/switchyard
COPY --from=build /src/build/docker/localnet/switchyard-localnet /usr/local/bin/switchyard-localnet
USER switchyard
WORKDIR /var/lib/switchyard
# The router's JSON-RPC port and its admin port (/health, /ready, /status, /metrics).
EXPOSE 8899 9899
ENTRYPOINT ["/usr/local/bin/switchyard"]
CMD ["--help"]
