"""Training (section 5 of the paper):

- `config.py`: `TrainConfig`, the `train:` section;
- `trainer.py`: `Trainer`, the loop; `update.py`: one optimizer update over micro-batches;
- `loss.py`: label-smoothed cross-entropy (5.4); `optim.py`: Adam and the schedule (5.3);
- `precision.py`: fp32 / bf16 / fp16 autocast; `deterministic.py`: `train.deterministic`;
- `distributed.py`: torchrun and collectives; `run_data.py`: the job's data, prepared by rank
  0 and awaited by the others without a collective;
- `state.py`: progress counters and random generators; `training_checkpoint.py`: what a
  training checkpoint holds; `checkpoints.py`: writing a run's checkpoints and resuming;
- `run_directory.py`: the run directory's files; `metrics_log.py`: `metrics.jsonl`;
  `tensorboard_log.py`: its records as TensorBoard events (`train.tensorboard`);
- `progress.py`: the progress bar (or lines), forecast and clock; `flops.py`: model FLOPs
  and GPU peaks (MFU); `prefetch.py`: the next update's batches read ahead (CUDA);
- `interrupt.py`: Ctrl-C / SIGTERM stop cleanly; `nonfinite.py`: NaN/Inf losses;
- `validation.py`: loss and BLEU during training;
- `average.py`: checkpoint averaging (section 6.1); `ema.py`: the moving average of the
  weights (`train.ema_decay`).

`python -m transformer.train` runs `transformer-train` (`transformer.cli.train`).
"""
