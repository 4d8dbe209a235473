cd /work/runtree
export TRANSFORMER_DATA_DIR=/work/shared/data
run() { # name seed
  .venv/bin/transformer-train --config /work/main/configs/multi30k.yaml train.num_threads=1 \
    train.tokens_per_update=2048 train.max_tokens=2048 train.warmup_steps=3200 \
    train.seed=$2 train.output_dir=checkpoints/$1 > checkpoints/$1.log 2>&1
}
run ens_a 1 &
run ens_b 2 &
wait
echo done > /tmp/ens_done
