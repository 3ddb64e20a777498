#!/usr/bin/env bash
# The Python package as a user gets it: `python -m build` makes the sdist and the wheel, `twine
# check` reads their metadata, the wheel is installed into a fresh virtual environment and runs the
# demo (with the C extension, and on the pure-Python path), and the sdist installs without a C
# compiler (the optional extension left out) and runs the demo too. Run by .ci/run; needs the
# `release` extra (build, twine) and the network to PyPI for the dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d /tmp/pi-memory-dist.XXXXXX)"
trap 'rm -rf "$work"' EXIT
python3 -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
python3 -m twine check --strict "$work"/dist/*
wheel="$(ls "$work"/dist/*.whl)"
sdist="$(ls "$work"/dist/*.tar.gz)"
# the listing goes to a file: `unzip -l | grep -q` under pipefail fails once grep stops reading early
unzip -l "$wheel" >"$work/wheel.list"
grep -q 'pi_memory/core/_cut' "$work/wheel.list" || { echo "check-dist: the wheel has no C extension"; exit 1; }
grep -q 'pi_memory/samples/.*\.jsonl' "$work/wheel.list" || { echo "check-dist: the wheel has no sample sessions"; exit 1; }

demo() {  # the demo in a fresh venv with its own cache folder: the first hit must be there
  local venv="$1"; shift
  env -u PYTHONPATH -u PI_MEMORY_DB XDG_CACHE_HOME="$work/cache-$(basename "$venv")" HOME="$work/home" "$@" \
    "$venv/bin/pi-memory" demo >"$work/demo.out"
  grep -q "r5/m1" "$work/demo.out" || { cat "$work/demo.out"; echo "check-dist: the demo found nothing"; exit 1; }
}
mkdir -p "$work/home"
python3 -m venv "$work/wheel-venv"
pip_install() {  # pip's own chatter to a log, shown when it fails
  local venv="$1"; shift
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$@" >"$work/pip.log" 2>&1 || { tail -30 "$work/pip.log"; exit 1; }
}
pip_install "$work/wheel-venv" "$wheel"
(cd "$work" && env -u PYTHONPATH "$work/wheel-venv/bin/python" -c \
  'import pi_memory.core._cut, pi_memory; print("wheel", pi_memory.__version__, "with the C extension")')
demo "$work/wheel-venv"
demo "$work/wheel-venv" PI_MEMORY_PURE_PYTHON=1
python3 -m venv "$work/sdist-venv"
CC=/bin/false pip_install "$work/sdist-venv" "$sdist"
(cd "$work" && env -u PYTHONPATH "$work/sdist-venv/bin/python" -c '
import importlib.util, pi_memory
assert importlib.util.find_spec("pi_memory.core._cut") is None, "built without a compiler?"
print("sdist", pi_memory.__version__, "without a C compiler: pure Python")')
demo "$work/sdist-venv"
echo "check-dist: sdist and wheel built, twine check passed, the demo ran from both"
