# syntax=docker/dockerfile:1
#
# roster as a container: `docker build -t roster .` at the repository root.
# deploy/compose.yaml runs two of these behind HAProxy, sharing their state in PostgreSQL.

# ---- build -------------------------------------------------------------------------------
FROM rust:1-bookworm AS build
WORKDIR /src

# The whole workspace: cargo reads every member's manifest (bench/ is a member; fuzz/ is
# excluded from it and not needed). .dockerignore keeps target/, bench/out and the venvs out.
COPY Cargo.toml Cargo.lock rustfmt.toml ./
COPY crates ./crates
COPY bench ./bench
COPY examples ./examples

# The registry and target/ are cache mounts (BuildKit), so the binary is copied out of
# target/ in the same step. The release profile links with fat LTO: expect a long build.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p roster \
    && install -D -m 0755 target/release/roster /out/roster

# ---- runtime -----------------------------------------------------------------------------
FROM debian:bookworm-slim

# CA certificates for HTTPS upstream servers, OAuth and OTLP endpoints; nothing else.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system roster \
    && useradd --system --gid roster --home-dir /var/lib/roster --shell /usr/sbin/nologin roster \
    && install -d -o roster -g roster -m 0700 /var/lib/roster \
    && install -d -m 0755 /etc/roster /usr/share/roster

COPY --from=build /out/roster /usr/local/bin/roster
# The example skills, for a config whose [skills] paths name this directory.
COPY examples/skills /usr/share/roster/skills

# The state dir (pins, approvals, OAuth tokens, the admin socket); with a [store], what the
# replicas share lives in PostgreSQL instead.
ENV ROSTER_STATE_DIR=/var/lib/roster
VOLUME ["/var/lib/roster"]

USER roster
WORKDIR /var/lib/roster
EXPOSE 8931

ENTRYPOINT ["roster"]
CMD ["--config", "/etc/roster/roster.toml", "serve", "--http", "0.0.0.0:8931"]
