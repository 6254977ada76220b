#!/usr/bin/env bash
# Runs the given command (the test suite). Replaced by the storage layer's script that
# starts a real PostgreSQL server for the run.
set -euo pipefail
exec "$@"
