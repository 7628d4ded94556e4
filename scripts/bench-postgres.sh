#!/usr/bin/env bash
# A PostgreSQL instance of its own for `npm run bench:ingest`, with shared_buffers sized for the profiles ingestion
# rewrites (docs/ingestion.md, "Acknowledgement latency"). The machine's own server keeps its
# settings: changing shared_buffers needs a restart, and the tests run against that server.
#
#   scripts/bench-postgres.sh start   # initdb (first time) and start on 127.0.0.1:${BENCH_PG_PORT:-5433}
#   DATABASE_URL=postgres://postgres@127.0.0.1:5433/ces npm run bench:ingest
#   scripts/bench-postgres.sh stop    # stop it; `scripts/bench-postgres.sh remove` also deletes its data
set -euo pipefail

DIR=${BENCH_PG_DIR:-/tmp/ces-bench-postgres}
PORT=${BENCH_PG_PORT:-5433}
SHARED_BUFFERS=${BENCH_PG_SHARED_BUFFERS:-2GB}
# Room for a bulk rewrite's WAL between checkpoints: at the default 1GB a 1M-profile sync checkpoints every few
# seconds and each checkpoint makes the next writes of every page carry a full-page image.
MAX_WAL_SIZE=${BENCH_PG_MAX_WAL_SIZE:-8GB}
BIN=${PG_BIN:-/usr/lib/postgresql/$(ls /usr/lib/postgresql | sort -V | tail -1)/bin}

# initdb and postgres refuse to run as root: run them as the postgres user there.
as_owner() {
  if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else bash -c "$*"; fi
}

case "${1:-start}" in
  start)
    if [ ! -f "$DIR/PG_VERSION" ]; then
      mkdir -p "$DIR"
      [ "$(id -u)" = 0 ] && chown postgres "$DIR"
      as_owner "$BIN/initdb -D $DIR -U postgres --auth=trust" >/dev/null
      cat >>"$DIR/postgresql.conf" <<EOF
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR'
shared_buffers = $SHARED_BUFFERS
max_wal_size = $MAX_WAL_SIZE
EOF
    fi
    as_owner "$BIN/pg_ctl -D $DIR status" >/dev/null 2>&1 || as_owner "$BIN/pg_ctl -D $DIR -l $DIR/log -w start" >/dev/null
    psql -U postgres -h 127.0.0.1 -p "$PORT" -qtc "SELECT 1 FROM pg_database WHERE datname = 'ces'" | grep -q 1 ||
      psql -U postgres -h 127.0.0.1 -p "$PORT" -qc "CREATE DATABASE ces"
    echo "bench-postgres: up on 127.0.0.1:$PORT (shared_buffers $(psql -U postgres -h 127.0.0.1 -p "$PORT" -Atc 'SHOW shared_buffers')), data in $DIR"
    ;;
  stop)
    as_owner "$BIN/pg_ctl -D $DIR -w stop" >/dev/null
    ;;
  remove)
    as_owner "$BIN/pg_ctl -D $DIR -w stop" >/dev/null 2>&1 || true
    rm -rf "$DIR"
    ;;
  *)
    echo "usage: $0 start|stop|remove" >&2
    exit 2
    ;;
esac
