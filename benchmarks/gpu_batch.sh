#!/usr/bin/env bash
# Run a batch of benchmark runs on an offline GPU machine from a bundle built by
# `python -m benchmarks.gpu_bundle` (which prints this command):
#
#   bash benchmarks/gpu_batch.sh BUNDLE CONFIG.toml... [python -m benchmarks.run options]
#
# Installs the bundle's wheels without network into $SITE (default /tmp/site), then runs
# `python -m benchmarks.run CONFIG... [options] --data-dir BUNDLE/data` with this checkout and $SITE
# importable and the rows naming the commit the bundle was built at. $PYTHON (default python3) is
# the interpreter. Give --out-dir DIR for results in a folder of your choice (see benchmarks.run).
#
# Configs waiting for a GPU (each resumes from its committed CSV; benchmarks/README.md says which of
# their runs the CPU did):
#   benchmarks/configs/paper_table_d512.toml benchmarks/configs/paper_logsparse_d512.toml
#   benchmarks/configs/long_horizon.toml (--model patchtst rsa_patchtst rsa_informer)
#   benchmarks/configs/long_lookback.toml (issue 26: inputs 336 and 720, ETTh1/ETTh2/ETTm1; all of it
#     that the CPU has not run)
#   benchmarks/configs/few_shot.toml (issue 26: the 5% and 10% runs the CPU has not run)
# e.g. bash benchmarks/gpu_batch.sh .bundle benchmarks/configs/long_lookback.toml \
#        benchmarks/configs/few_shot.toml --out-dir "$OUT" --jobs 4
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bash benchmarks/gpu_batch.sh BUNDLE CONFIG.toml... [benchmarks.run options]" >&2
  exit 2
fi
bundle=$(cd "$1" && pwd)
shift
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
site=${SITE:-/tmp/site}
"$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
  "$bundle"/wheels/*.whl
export PYTHONPATH="$site:$root${PYTHONPATH:+:$PYTHONPATH}"
TSREC_COMMIT=$(cat "$bundle/commit")
export TSREC_COMMIT
exec "$python" -m benchmarks.run "$@" --data-dir "$bundle/data"
