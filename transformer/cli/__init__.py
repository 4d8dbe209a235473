"""The console scripts, each a thin `main(argv=None)` over the library:

- `prepare.py`: `transformer-prepare`; `train.py`: `transformer-train`;
- `average.py`: `transformer-average`;
- `translate.py`: `transformer-translate`; `evaluate.py`: `transformer-evaluate`;
- `score.py`: `transformer-score` (log P(target | source) of given pairs);
- `attention.py`: `transformer-attention`; `export.py`: `transformer-export`;
- `plot.py`: `transformer-plot` (a run's training curves);
- `launch.py`: the entry points of all of them (the OpenMP wait policy, set before torch loads);
- `torchrun.py`: `python -m transformer.cli.torchrun`, torchrun ending in one line (make demo);
- `common.py`: what they share (devices, files, exit codes); `decode_options.py`: the
  decoding options of translate and evaluate, defined once;
- `prefix_lines.py`: translate's `source ||| prefix` input lines; `evaluate_outputs.py`:
  evaluate's default file names and its checks of the outputs.

Nothing outside this folder imports from it.
"""
