#!/usr/bin/env bash
# `make gpu-bundle`: the wheels benchmarks/gpu_check.py needs on a GPU node without network (a Python 3.12
# image with torch; benchmarks/gpu_bundle.txt says what it lacks), into the git-ignored .whl/, checked to fit the
# 64 MiB that may travel with the working tree. On the node (docs/operations.md, "The device check"):
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site python3 benchmarks/gpu_check.py --out $OUT/gpu_check.json --save-compile-cache $OUT
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
LIMIT_MIB=64
rm -rf .whl && mkdir -p .whl
# pure-Python wheels for the node's Python (3.12) whatever runs this script
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl -r benchmarks/gpu_bundle.txt
# antlr4-python3-runtime 4.9.3 (what omegaconf 2.3 needs) is an sdist only: build its pure-Python wheel here
"$PYTHON" -m pip wheel --quiet --no-deps -w .whl antlr4-python3-runtime==4.9.3
total=$(du -cb .whl/*.whl | tail -1 | cut -f1)
ls -1 .whl
echo "gpu bundle: $(ls .whl/*.whl | wc -l) wheels, $((total / 1024)) KiB (limit ${LIMIT_MIB} MiB)"
if [ "$total" -gt $((LIMIT_MIB * 1024 * 1024)) ]; then
    echo "gpu bundle: over ${LIMIT_MIB} MiB" >&2
    exit 1
fi
