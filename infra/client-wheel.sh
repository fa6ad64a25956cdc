#!/usr/bin/env bash
# The client alone, as a user installs it: build the wheel from the checkout, install it
# with its base dependencies only into a fresh virtual environment, print both sizes and
# check that `trainyard --help` runs there.
#   infra/client-wheel.sh DIR     (DIR/venv is the environment; DIR/wheel holds the wheel)
# tests/e2e/test_client_install.py calls the SDK from DIR/venv against a running stack.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:?usage: infra/client-wheel.sh DIR}
python=${PYTHON:-.venv/bin/python}
rm -rf "$dir/src" "$dir/wheel" "$dir/venv"
mkdir -p "$dir/src"

# Built from a copy of what git sees (tracked and new files), so a stale build/ folder
# or a local file that git ignores never ships.
git ls-files -z --cached --others --exclude-standard | tar -cf - --null -T - | tar -xf - -C "$dir/src"
"$python" -m pip wheel -q --no-deps -w "$dir/wheel" "$dir/src"
rm -rf "$dir/src"

# No pip inside: the outer one installs into it, so the size counts the client alone.
"$python" -m venv --without-pip "$dir/venv"
"$python" -m pip --python "$dir/venv/bin/python" install -q "$dir"/wheel/trainyard-*.whl

site=$("$dir/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo "client wheel: $(du -h "$dir"/wheel/trainyard-*.whl | cut -f1)" \
  " installed alone: $(du -sh "$site" | cut -f1) in site-packages"
"$dir/venv/bin/trainyard" --help >/dev/null
