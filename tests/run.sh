#!/usr/bin/env bash
# Installs what the tests need, builds the site, and runs every test (unit and browser).
# Usage: bash tests/run.sh [pytest arguments]
# Needs Python 3.11+ and Node 20+; installs Debian's chromium when it is missing (as root, or with sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  echo "== installing Debian's chromium (Playwright's own browser download is not used)"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv for the test tools"
  python3 -m venv .venv || { echo "python3 -m venv failed: on Debian, apt-get install python3-venv" >&2; exit 1; }
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt

echo "== ruff (pyproject.toml's [tool.ruff])"
.venv/bin/ruff check
echo "== mypy --strict pycore"
.venv/bin/mypy --strict pycore

echo "== building dist/"
.venv/bin/python build.py

echo "== running the tests"
DIST_DIR=dist .venv/bin/python -m pytest "$@"
