#!/usr/bin/env bash
# Everything a lent GPU machine runs, in one call within a budget (issue 40): the GPU tests, Table 1 at
# d_model 512, the GPU speed table, then the RSA study's GPU rows with what is left. From the repository
# root, with the bundle of `python -m benchmarks.gpu_bundle --gpu-all` travelling beside the working tree:
#
#   bash benchmarks/gpu_all.sh BUNDLE OUT [python -m benchmarks.gpu_all options, e.g. --rehearse]
#
# Installs the bundle's wheels without network into $SITE (default /tmp/site), then runs
# `python -m benchmarks.gpu_all OUT ...` with the bundle's data, this checkout and $SITE importable, and
# the budget counted from this script's start. $PYTHON (default python3) is the interpreter.
set -euo pipefail
started=$(date +%s.%N)
if [ $# -lt 2 ]; then
  echo "usage: bash benchmarks/gpu_all.sh BUNDLE OUT [benchmarks.gpu_all options]" >&2
  exit 2
fi
bundle=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
site=${SITE:-/tmp/site}
"$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
  "$bundle"/wheels/*.whl
export PYTHONPATH="$site:$root${PYTHONPATH:+:$PYTHONPATH}" TSREC_DATA_DIR="$bundle/data" PYTHONUNBUFFERED=1
TSREC_COMMIT=$(cat "$bundle/commit")
export TSREC_COMMIT
cd "$root"
exec "$python" -m benchmarks.gpu_all "$out" --started "$started" "$@"
