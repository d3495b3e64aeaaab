# Sourced by scripts/run and scripts/test: make sure .venv exists and holds
# this project (with its test extras) installed in editable mode. The install
# is redone only when pyproject.toml changes, so repeated runs start at once.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)" >&2
  "$PY" -m venv .venv
fi
stamp=".venv/.xla_costmodel-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[setup] installing xla_costmodel and its dependencies into .venv" >&2
  log=".venv/install.log"
  if ! { .venv/bin/python -m pip install --disable-pip-version-check --upgrade pip &&
         .venv/bin/python -m pip install --disable-pip-version-check -e ".[test]"; } > "$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "[setup] installation failed; the full log is $log" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"
export MPLBACKEND="${MPLBACKEND:-Agg}"
# jax on the CPU: keep its output quiet and deterministic.
export JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
