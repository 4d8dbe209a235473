#!/usr/bin/env bash
# Reproduce Table 2 of Vaswani et al. (2017): WMT14 English->German, newstest2014,
# Transformer base 27.3 BLEU (100k updates, average of the last 5 checkpoints) and
# Transformer big 28.4 BLEU (300k updates, average of the last 20), beam 4, length penalty 0.6.
#
# Usage:   scripts/reproduce_wmt14.sh base|big [section.key=value ...]
# Needs:   network access (WMT14 through `datasets`, newstest2014 through sacreBLEU) and GPUs.
#
# Batch size: the paper's ~25000 source + ~25000 target tokens per update come from
# train.tokens_per_update=25000 in the config. train.max_tokens (8192) is only the largest
# micro-batch one GPU takes; the trainer derives update_freq and the micro-batch size for the
# number of GPUs so that every GPU count lands on 25000 (1 GPU: 4 x 6250; 8 GPUs: 1 x 3125)
# and prints the effective figure at the start. On a GPU with much memory, raise
# train.max_tokens (e.g. 25000 on 80 GB+ gives update_freq 1 on one GPU).
#
# Steps: 0. transformer-prepare (the data before any GPU process starts: no collective of the
# job waits on it); 1. training under torch.distributed.run, also on one GPU (the same NCCL
# code as on eight); 2. averaging; 3. decoding and scoring newstest2014.
#
# Environment (all optional):
#   PYTHON      the Python to run (default: python); torchrun is run as $PYTHON -m
#               torch.distributed.run, so it is the torch of that Python
#   NGPUS       processes to start (default: the GPUs this Python's torch sees, which honours
#               CUDA_VISIBLE_DEVICES; 1 when there is none)
#   RUN_DIR     run directory (default: checkpoints/wmt14_en-de_<size>)
#   TEST_SRC, TEST_REF   local newstest2014 files instead of sacreBLEU's wmt14/full download,
#               e.g. $TRANSFORMER_DATA_DIR/wmt14-en-de/newstest2014.{en,de}
#   AVERAGE_LAST         checkpoints to average (default 5 for base, 20 for big)
set -euo pipefail

size=${1:-}
case "$size" in
  base) average_last=${AVERAGE_LAST:-5} ;;
  big) average_last=${AVERAGE_LAST:-20} ;;
  *) echo "usage: $0 base|big [section.key=value ...]" >&2; exit 2 ;;
esac
shift
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
run_dir=${RUN_DIR:-checkpoints/wmt14_en-de_$size}
# train.output_dir / train.keep_last given as overrides decide where averaging looks and how
# many checkpoints it averages (checked now, not after hours of training).
for arg in "$@"; do
  case "$arg" in
    train.output_dir=*) run_dir=${arg#*=} ;;
    train.keep_last=*) average_last=${arg#*=} ;;
  esac
done
if [ -z "${NGPUS:-}" ]; then
  NGPUS=$("$python" -c 'import torch; print(torch.cuda.device_count())')
  [ "$NGPUS" -ge 1 ] || NGPUS=1
fi
for value in "NGPUS=$NGPUS" "train.keep_last=$average_last"; do
  case "${value#*=}" in
    '' | *[!0-9]* | 0) echo "$0: $value must be a whole number of at least 1" >&2; exit 2 ;;
  esac
done

train_args=(--config "configs/$size.yaml" "train.output_dir=$run_dir" "train.keep_last=$average_last" "$@")
echo "== 0. data + joint BPE (37000): transformer-prepare into $run_dir"
# The config reads WMT14 through datasets (data.train: hf:wmt/wmt14:de-en:train) and trains the
# SentencePiece model in the run directory; a rerun reuses both.
"$python" -m transformer prepare "${train_args[@]}"

echo "== 1. training: configs/$size.yaml on $NGPUS process(es), a checkpoint every 10 minutes"
"$python" -m torch.distributed.run --standalone --nproc_per_node "$NGPUS" \
  -m transformer.train "${train_args[@]}"

echo "== 2. average the last $average_last checkpoints"
"$python" -m transformer average --last "$average_last" --dir "$run_dir" \
  --output "$run_dir/checkpoint_avg$average_last.pt"

echo "== 3. decode newstest2014 (beam 4, alpha 0.6) and score"
if [ -n "${TEST_SRC:-}" ]; then
  test_args=(--src "$TEST_SRC" --ref "${TEST_REF:?set TEST_REF with TEST_SRC}")
else
  test_args=(--test-set wmt14/full --langpair en-de)
fi
"$python" -m transformer evaluate --checkpoint "$run_dir/checkpoint_avg$average_last.pt" \
  "${test_args[@]}" --beam-size 4 --length-penalty 0.6 \
  --json "$run_dir/newstest2014.json" --hyp-out "$run_dir/newstest2014.hyp.de"
echo "Scores: $run_dir/newstest2014.json (sacreBLEU BLEU and chrF with signatures, and the"
echo "tokenized compound-split BLEU that the paper's 27.3 / 28.4 measure)"
