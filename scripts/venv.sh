# Sourced by run.sh and test.sh: make sure .venv exists with the project's dependencies.
# Reinstalls only when pyproject.toml changed since the last install.
ensure_venv() {
  local extra="$1"
  local py="${PYTHON:-}"
  if [ -z "$py" ]; then
    for cand in python3.11 python3.12 python3.13 python3; do
      if command -v "$cand" >/dev/null 2>&1; then py="$cand"; break; fi
    done
  fi
  if [ -z "$py" ] || ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "anonweb needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
    exit 1
  fi
  if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv with $("$py" --version)"
    "$py" -m venv .venv
  fi
  local stamp=".venv/.anonweb-installed${extra:+-$extra}"
  local want
  want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "==> installing dependencies${extra:+ ($extra)} into .venv"
    .venv/bin/python -m pip install --quiet --upgrade pip
    if [ -n "$extra" ]; then
      .venv/bin/python -m pip install --quiet -e ".[$extra]"
    else
      .venv/bin/python -m pip install --quiet -e .
    fi
    echo "$want" > "$stamp"
  fi
}
