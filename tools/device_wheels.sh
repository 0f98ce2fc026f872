#!/usr/bin/env bash
# Download the wheels a lent GPU machine lacks (tools/device_wheels.txt) into .whl/ (git-ignored),
# for the device tool to carry:  run(command="bash tools/gpu_stage.sh", carry=[".whl"], timeout_s=600).
# tools/gpu_stage.sh installs whatever .whl/ holds before anything else. PYVER is the device's
# Python (3.12 in its image); a local rehearsal on this machine's Python can set PYVER=3.11.
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${PYVER:-3.12}
rm -rf .whl && mkdir .whl
grep -v '^\s*#' tools/device_wheels.txt | grep -v '^\s*$' | xargs python3 -m pip download -q --no-deps \
    --only-binary=:all: --python-version "$PYVER" --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d .whl
ls .whl
du -sh .whl
