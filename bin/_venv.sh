# Shared by bin/start and bin/test: create .venv and install pinned requirements
# when they changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
REQS="${1:-requirements.txt}"
if [ ! -x .venv/bin/python ]; then
  echo "creating virtualenv in .venv/ with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
STAMP=".venv/.installed-$(basename "$REQS")"
HASH="$(cat requirements*.txt | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$HASH" ]; then
  echo "installing pinned dependencies from $REQS (first run takes a few minutes)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r "$REQS"
  echo "$HASH" > "$STAMP"
fi
