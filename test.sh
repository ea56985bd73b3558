#!/usr/bin/env bash
# Run the whole test suite. Creates .venv and installs the dev dependencies when needed.
# Tests that need Redis, PostgreSQL or chromium skip with a reason when those are missing,
# unless ANONWEB_REQUIRE_SERVICES=1 (as in CI), which makes them mandatory.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/venv.sh
ensure_venv dev
exec .venv/bin/python -m pytest "$@"
