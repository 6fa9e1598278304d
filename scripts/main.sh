#!/usr/bin/env bash
# The main job: install what is missing, build, and run the default sweep on the
# bundled engine (scenarios/default.json), ending in the fitted law and a report.
# Extra arguments go to `loadlaw sweep`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh >/dev/null
exec ./build/loadlaw sweep "$@"
