#!/usr/bin/env bash
# Runs a command (the test suite, a benchmark) with a real, throw-away PostgreSQL server.
#
# Installs PostgreSQL from apt when no server binary is found, initialises a fresh cluster in a
# temp dir owned by the `postgres` system user (the server refuses to run as root), starts it on
# 127.0.0.1 with a free port and a unix socket in that dir, creates a database, exports
# PTEFORGE_TEST_POSTGRES_URL and runs "$@". The server is always stopped and the dir removed;
# the exit status is the command's. Failing to provide PostgreSQL is an error, never a skip.
set -euo pipefail

log() { echo "run-with-postgres: $*" >&2; }
die() { log "ERROR: $*"; exit 97; }

[[ $# -gt 0 ]] || die "usage: $0 COMMAND [ARGS...]"

find_bindir() {
    local dir
    if command -v pg_config >/dev/null 2>&1; then
        dir="$(pg_config --bindir 2>/dev/null || true)"
        if [[ -n "$dir" && -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then echo "$dir"; return 0; fi
    fi
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then echo "$dir"; return 0; fi
    done
    for dir in /usr/local/pgsql/bin /usr/local/bin /usr/bin; do
        if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then echo "$dir"; return 0; fi
    done
    return 1
}

install_postgres() {
    [[ "$(id -u)" == 0 ]] || die "PostgreSQL is not installed and we are not root to install it"
    command -v apt-get >/dev/null 2>&1 || die "PostgreSQL is not installed and apt-get is missing"
    log "installing PostgreSQL with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2 || die "apt-get update failed"
    apt-get install -y -q --no-install-recommends postgresql >&2 \
        || die "apt-get install postgresql failed"
}

BINDIR="$(find_bindir || true)"
if [[ -z "$BINDIR" ]]; then
    install_postgres
    BINDIR="$(find_bindir || true)"
    [[ -n "$BINDIR" ]] || die "PostgreSQL installed but initdb/pg_ctl not found"
fi

# Not $TMPDIR: the postgres user must be able to reach the dir, and the socket path stay short.
PGTMP="$(mktemp -d /tmp/pteforge-pg.XXXXXX)"
PGDATA="$PGTMP/data"
RUN_AS=()
if [[ "$(id -u)" == 0 ]]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres \
        || die "cannot create the postgres system user"
    chown postgres "$PGTMP"
    chmod 700 "$PGTMP"
    RUN_AS=(runuser -u postgres --)
fi

cleanup() {
    local status=$?
    if [[ -f "$PGDATA/postmaster.pid" ]]; then
        "${RUN_AS[@]}" "$BINDIR/pg_ctl" -D "$PGDATA" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$PGTMP"
    exit "$status"
}
CHILD=""
# Bash runs traps only between commands, so the command runs in the background and we wait:
# a signal to this script reaches the command, then the EXIT trap cleans up.
forward() {
    if [[ -n "$CHILD" ]]; then
        kill -"$1" "$CHILD" 2>/dev/null || true
        wait "$CHILD" 2>/dev/null || true
    fi
    exit "$2"
}
trap cleanup EXIT
trap 'forward INT 130' INT
trap 'forward TERM 143' TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

"${RUN_AS[@]}" "$BINDIR/initdb" -D "$PGDATA" -U postgres -A trust -E UTF8 --no-locale \
    >"$PGTMP/initdb.log" 2>&1 || { cat "$PGTMP/initdb.log" >&2; die "initdb failed"; }

PORT=""
for _ in 1 2 3 4 5; do
    PORT="$(free_port)"
    if "${RUN_AS[@]}" "$BINDIR/pg_ctl" -D "$PGDATA" -l "$PGTMP/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $PORT -k $PGTMP -c max_connections=200 -c fsync=on" \
        start >/dev/null 2>&1; then
        break
    fi
    PORT=""
done
[[ -n "$PORT" ]] || { cat "$PGTMP/server.log" >&2 || true; die "PostgreSQL did not start"; }

"$BINDIR/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -q \
    -c "CREATE DATABASE pteforge_test" || die "cannot create the test database"

export PTEFORGE_TEST_POSTGRES_URL="postgresql+psycopg://postgres@127.0.0.1:$PORT/pteforge_test"
log "$("$BINDIR/postgres" --version) on 127.0.0.1:$PORT"

"$@" <&0 &
CHILD=$!
set +e
wait "$CHILD"
status=$?
set -e
exit "$status"
