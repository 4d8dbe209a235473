#!/usr/bin/env bash
# Reproduce Table 2 of Vaswani et al. (2017): WMT14 English->German, newstest2014,
# Transformer base 27.3 BLEU (100k updates, average of the last 5 checkpoints) and
# Transformer big 28.4 BLEU (300k updates, average of the last 20), beam 4, length penalty 0.6.
#
# Usage:   scripts/reproduce_wmt14.sh base|big [section.key=value ...]
# Needs:   network access (WMT14 through `datasets`, newstest2014 through sacreBLEU) and GPUs.
#
# Batch size: the paper's ~25000 source + ~25000 target tokens per update come from
# train.tokens_per_update=25000 in the config; update_freq is derived as
# ceil(25000 / (max_tokens x GPUs)). max_tokens counts padding, so a little more than 25000 real
# tokens per side are seen. Pick max_tokens by GPU count (and memory):
#   1 GPU:  train.max_tokens=8192  -> update_freq 4 (on an 80 GB+ GPU, 25000 -> update_freq 1)
#   4 GPUs: train.max_tokens=6250  -> update_freq 1
#   8 GPUs: train.max_tokens=3200  -> update_freq 1 (the paper: 8 P100s)
#
# Environment (all optional):
#   NGPUS       processes to start (default: number of GPUs that nvidia-smi lists, else 1)
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
if [ -z "${NGPUS:-}" ]; then
  NGPUS=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
  [ "$NGPUS" -ge 1 ] || NGPUS=1
fi

echo "== 1. data + joint BPE (37000) + training: configs/$size.yaml on $NGPUS process(es)"
# The config reads WMT14 through datasets (data.train: hf:wmt14:de-en:train), trains the
# SentencePiece model in the run directory, and writes a checkpoint every 10 minutes.
train_args=(--config "configs/$size.yaml" "train.output_dir=$run_dir" "train.keep_last=$average_last" "$@")
if [ "$NGPUS" -gt 1 ]; then
  torchrun --nproc_per_node "$NGPUS" -m transformer.cli.train "${train_args[@]}"
else
  "$python" -m transformer.cli.train "${train_args[@]}"
fi

echo "== 2. average the last $average_last checkpoints"
"$python" -m transformer.cli.average --last "$average_last" --dir "$run_dir" \
  --output "$run_dir/checkpoint_avg$average_last.pt"

echo "== 3. decode newstest2014 (beam 4, alpha 0.6) and score"
if [ -n "${TEST_SRC:-}" ]; then
  test_args=(--src "$TEST_SRC" --ref "${TEST_REF:?set TEST_REF with TEST_SRC}")
else
  test_args=(--test-set wmt14/full --langpair en-de)
fi
"$python" -m transformer.cli.evaluate --checkpoint "$run_dir/checkpoint_avg$average_last.pt" \
  "${test_args[@]}" --beam-size 4 --length-penalty 0.6 \
  --json "$run_dir/newstest2014.json" --hyp-out "$run_dir/newstest2014.hyp.de"
echo "Scores: $run_dir/newstest2014.json (sacreBLEU BLEU and chrF with signatures, and the"
echo "tokenized compound-split BLEU that the paper's 27.3 / 28.4 measure)"
