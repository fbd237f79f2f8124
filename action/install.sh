#!/usr/bin/env bash
# The stabdiag GitHub Action's install step (action.yml), runnable anywhere with the same environment:
#   STABDIAG_PYTHON       the interpreter the venv is made from (default python3)
#   STABDIAG_PACKAGE      what pip installs (default the action's own checkout, STABDIAG_ACTION_PATH)
#   STABDIAG_VENV         where the venv goes (default $RUNNER_TEMP/stabdiag-venv)
#   STABDIAG_PIP_CACHE    pip's cache (default $RUNNER_TEMP/stabdiag-pip-cache, which action.yml caches)
#   GITHUB_ENV            the runner's file of variables for later steps (STABDIAG_PYTHON is set there)
# stabdiag and its dependencies go into a venv of their own: the job's Python, its pins and a PEP 668
# system Python are left untouched.  An existing venv is reused.
set -euo pipefail

base=${STABDIAG_PYTHON:-python3}
temp=${RUNNER_TEMP:-${TMPDIR:-/tmp}}
venv=${STABDIAG_VENV:-$temp/stabdiag-venv}
cache=${STABDIAG_PIP_CACHE:-$temp/stabdiag-pip-cache}
package=${STABDIAG_PACKAGE:-${STABDIAG_ACTION_PATH:-$(cd "$(dirname "$0")/.." && pwd)}}

if [ ! -x "$venv/bin/python" ]; then
    "$base" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --cache-dir "$cache" "$package"
"$venv/bin/python" -m stabdiag --version
if [ -n "${GITHUB_ENV:-}" ]; then
    echo "STABDIAG_PYTHON=$venv/bin/python" >> "$GITHUB_ENV"
fi
