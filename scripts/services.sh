#!/usr/bin/env bash
# Makes Redis and PostgreSQL reachable for the demo and the tests: uses running ones, else docker compose where a
# Docker engine answers, else starts (or installs) the local servers. Also creates the demo database.
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST_ADDR=${PGHOST_ADDR:-127.0.0.1}
pg_up() { pg_isready -q -h "$PGHOST_ADDR" -p 5432 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
docker_up() { command -v docker >/dev/null && docker info >/dev/null 2>&1; }

if ! pg_up || ! redis_up; then
  if docker_up; then
    echo "services: starting redis and postgres with docker compose"
    docker compose up -d redis postgres
  fi
fi

if ! redis_up; then
  if ! command -v redis-server >/dev/null; then
    echo "services: installing redis-server"; apt-get install -y redis-server >/dev/null
  fi
  echo "services: starting local redis-server"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi

if ! pg_up; then
  if ! ls /etc/postgresql >/dev/null 2>&1; then
    echo "services: installing postgresql"; apt-get install -y postgresql >/dev/null
  fi
  echo "services: starting local postgresql"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
fi

for _ in $(seq 1 60); do
  if pg_up && redis_up; then break; fi
  sleep 0.5
done
pg_up || { echo "services: PostgreSQL did not come up on $PGHOST_ADDR:5432" >&2; exit 1; }
redis_up || { echo "services: Redis did not come up on 127.0.0.1:6379" >&2; exit 1; }

# The demo database (tests use the existing `test` database with a schema each).
psql_cmd() { psql -h "$PGHOST_ADDR" -U "${PGUSER:-postgres}" -d postgres -tAc "$1"; }
for db in ces test; do
  if [ "$(psql_cmd "SELECT 1 FROM pg_database WHERE datname = '$db'")" != "1" ]; then
    psql_cmd "CREATE DATABASE $db" >/dev/null
  fi
done
echo "services: redis and postgresql are up"
