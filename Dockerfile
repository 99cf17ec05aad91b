# syntax=docker/dockerfile:1
# posencd container: a build stage with the -dev packages, and a runtime stage with only the shared
# libraries `ldd build/posencd` reports, a non-root user and the embedded default configuration.
#
# The package lists below are the single source of truth: docker/check-image.sh (run by make test,
# no Docker engine needed) parses them, builds with this build stage's commands, checks every
# library ldd reports against the runtime list (and every header the build reads against the build
# list), and runs the binary as PID 1 in a tree made of the runtime list only. Keep one package per
# word on the apt-get install lines; change a list here, not in the script.
#
#   docker build -t posenc .
#   docker run --rm -p 8080:8080 posenc
#   docker run --rm -p 9000:9000 -e POSENC_PORT=9000 -e POSENC_WORKERS=4 posenc

# nettle-dev (SHA-256 of learned tables) comes in with libmicrohttpd-dev, through libgnutls28-dev;
# libpq-dev is the PostgreSQL client (store_url postgresql://), libpq5 at run time.
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential pkg-config \
      libmicrohttpd-dev libjansson-dev libuv1-dev libsleef-dev libdeflate-dev libpng-dev libpq-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make -j"$(nproc)" build/posencd

FROM debian:bookworm-slim
# libc6 is in the base image already; it is listed because posencd links it directly (ldd).
# The rest of the GnuTLS family (libgnutls30, ...) comes in as dependencies of libmicrohttpd12,
# zlib1g as one of libpng16-16.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libc6 libmicrohttpd12 libjansson4 libuv1 libsleef3 libdeflate0 libpng16-16 libnettle8 libpq5 \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 posenc \
 && useradd --system --uid 10001 --gid posenc --home-dir /var/lib/posenc --no-create-home \
      --shell /usr/sbin/nologin posenc \
 && install -d -o posenc -g posenc -m 0750 /var/lib/posenc
COPY --from=build /src/build/posencd /usr/local/bin/posencd
COPY docker/healthcheck.sh /usr/local/bin/posenc-healthcheck

# Configuration is the embedded config/posenc.json overridden by POSENC_<KEY> variables (see
# `docker run --rm posenc --help`). Set the port through POSENC_PORT, not --port: the health
# check reads it.
ENV POSENC_BIND=0.0.0.0 \
    POSENC_PORT=8080 \
    POSENC_DATA_DIR=/var/lib/posenc
VOLUME ["/var/lib/posenc"]
WORKDIR /var/lib/posenc
USER 10001:10001
EXPOSE 8080
# posencd drains on SIGTERM: /readyz answers 503, the listening socket closes, accepted work
# finishes (up to POSENC_SHUTDOWN_TIMEOUT, 30 s), exit 0. Give `docker stop -t` more than that.
STOPSIGNAL SIGTERM
# No curl in the slim image: the probe is a few lines of bash over /dev/tcp (bash is essential).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/posenc-healthcheck"]
ENTRYPOINT ["/usr/local/bin/posencd"]
