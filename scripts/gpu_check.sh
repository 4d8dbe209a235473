#!/usr/bin/env bash
# The whole GPU path in one prepared check (issue #13): GPU tests, a stop/resume under
# torch.distributed.run (NCCL), base and big training (bf16, eager and compiled: tokens/s, MFU,
# peak memory), beam-4 decoding of newstest2014, versions. One JSON file, rewritten after
# every step; a log beside it. See scripts/gpu_check.py for the steps and the JSON.
#
# On the lent GPU machine (no network; its own python3 with torch, sentencepiece, sacrebleu,
# pyyaml, tqdm, pytest), data from scripts/gpu_check_data.sh carried along as gpu_data/:
#   bash scripts/gpu_check.sh --out "$OUT/gpu_check.json"
# Here, on the CPU, the same steps with tiny sizes (about a minute):
#   PYTHON=.venv/bin/python bash scripts/gpu_check.sh --dry-run --out /tmp/gpu_check.json
#
# Environment: PYTHON (default python3). When .whl/ holds wheels (gpu_check_data.sh --wheels:
# pytest and its needs), they are installed to /tmp/site first and put on PYTHONPATH.
set -euo pipefail

# Relative --out, --work-dir and --data paths name places under the caller's directory, as in
# any command; the check itself runs from the checkout (a value that starts with "-" is left to
# the parser, which then says the flag lacks its value).
absolute() {
    if [[ -z "$1" || "$1" == /* || "$1" == -* || "$1" == synthetic ]]; then printf '%s\n' "$1"
    else printf '%s\n' "$PWD/$1"; fi
}
args=()
while (($#)); do
    case "$1" in
        --out|--work-dir|--data)
            args+=("$1")
            (($# > 1)) && { args+=("$(absolute "$2")"); shift; }
            shift ;;
        --out=*|--work-dir=*|--data=*) args+=("${1%%=*}=$(absolute "${1#*=}")"); shift ;;
        *) args+=("$1"); shift ;;
    esac
done
set -- ${args[@]+"${args[@]}"}
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

if compgen -G ".whl/*.whl" >/dev/null; then
    echo "[gpu-check] installing the carried wheels from .whl/ into /tmp/site"
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi

export PYTHONUNBUFFERED=1
echo "[gpu-check] python: $(command -v "$PYTHON") ($("$PYTHON" --version 2>&1))"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the checkout, installed or not
exec "$PYTHON" -m scripts.gpu_check "$@"
