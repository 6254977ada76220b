#!/usr/bin/env bash
# Prints the path of an haproxy binary, installing Debian's package first when none is found
# (as tests/run-with-postgres.sh does for PostgreSQL). Failing to provide it is an error,
# never a skip. Waits for another apt run's lock instead of failing on it.
set -euo pipefail

log() { echo "ensure-haproxy: $*" >&2; }

locate() { command -v haproxy 2>/dev/null || { [[ -x /usr/sbin/haproxy ]] && echo /usr/sbin/haproxy; }; }

if path="$(locate)"; then echo "$path"; exit 0; fi
[[ "$(id -u)" == 0 ]] || { log "HAProxy is not installed and we are not root to install it"; exit 97; }
command -v apt-get >/dev/null 2>&1 || { log "HAProxy is not installed and apt-get is missing"; exit 97; }
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -o DPkg::Lock::Timeout=600 -q -y)
log "installing HAProxy with apt-get"
if ! "${APT[@]}" install --no-install-recommends haproxy >&2; then
    "${APT[@]}" update >&2
    "${APT[@]}" install --no-install-recommends haproxy >&2
fi
path="$(locate)" || { log "haproxy installed but not found"; exit 97; }
echo "$path"
