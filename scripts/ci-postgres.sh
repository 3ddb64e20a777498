#!/usr/bin/env bash
# Start a throw-away PostgreSQL 15 server on loopback from Debian's package, for the test suite.
#
# Optional: without PI_MEMORY_TEST_PG the tests start their own server from a pip wheel
# (tests/pg_server.py), which .ci/run uses; this script tests against the system's PostgreSQL instead.
#
# Usage:  eval "$(scripts/ci-postgres.sh start)"   # exports PI_MEMORY_TEST_PG, PI_MEMORY_PG_DIR
#         scripts/ci-postgres.sh stop              # stops the server and deletes its data dir
#
# Installs the Debian package if missing, initdb's a cluster in a temp dir (as the
# `postgres` user when run as root: the server refuses to run as root), starts it
# on 127.0.0.1 with a free port, creates the database `pi_memory_test` owned by the
# role `pi_owner` (password authentication over TCP, the way a team server runs)
# and prints the `export` lines. Everything goes to stderr except those lines.
set -euo pipefail

PG_VERSION=15
BIN="/usr/lib/postgresql/${PG_VERSION}/bin"
PASSWORD="${PI_MEMORY_TEST_PG_PASSWORD:-ci-only-secret}"

log() { echo "ci-postgres: $*" >&2; }

as_pg_user() {
  if [ "$(id -u)" = "0" ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

install_if_missing() {
  if [ -x "${BIN}/initdb" ]; then
    return
  fi
  log "installing postgresql-${PG_VERSION}"
  if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
  ${SUDO} apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive ${SUDO} apt-get install -y -qq "postgresql-${PG_VERSION}" >&2
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
  install_if_missing
  local dir port
  dir="$(mktemp -d /tmp/pi-memory-pg.XXXXXX)"
  chmod 755 "$dir"
  mkdir "$dir/data" "$dir/run"
  if [ "$(id -u)" = "0" ]; then chown -R postgres: "$dir"; fi
  printf '%s\n' "$PASSWORD" > "$dir/pwfile"
  if [ "$(id -u)" = "0" ]; then chown postgres: "$dir/pwfile"; fi
  as_pg_user "${BIN}/initdb" -D "$dir/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    --pwfile="$dir/pwfile" -E UTF8 --locale=C.UTF-8 >&2
  rm -f "$dir/pwfile"
  port="$(free_port)"
  as_pg_user "${BIN}/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p ${port} -k $dir/run -c fsync=off -c max_connections=60" start >&2
  as_pg_user "${BIN}/psql" -h "$dir/run" -p "$port" -U postgres -v ON_ERROR_STOP=1 -q >&2 <<SQL
CREATE ROLE pi_owner LOGIN CREATEROLE PASSWORD '${PASSWORD}';
CREATE DATABASE pi_memory_test OWNER pi_owner;
SQL
  echo "$port" > "$dir/port"
  log "PostgreSQL ${PG_VERSION} on 127.0.0.1:${port}, data in ${dir}"
  echo "export PI_MEMORY_PG_DIR='${dir}'"
  echo "export PI_MEMORY_TEST_PG='postgresql://pi_owner:${PASSWORD}@127.0.0.1:${port}/pi_memory_test'"
}

stop() {
  local dir="${PI_MEMORY_PG_DIR:?PI_MEMORY_PG_DIR is not set}"
  as_pg_user "${BIN}/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  rm -rf "$dir"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
