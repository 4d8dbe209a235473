"""Decoding (section 6.1 of the paper) and what MT users expect around it:

- `config.py`: `DecodeConfig`, the `decode:` section (beam search and sampling settings);
- `search.py`: what the searches share (hypotheses, length penalty, step-wise decoding);
- `greedy.py`: greedy search; `beam_search.py`: batched beam search; `sampling.py`:
  temperature / top-k / top-p sampling; `nucleus.py`: top-p's nucleus, found without sorting;
- `prefix.py`: forced target prefixes; `ensemble.py`: several models averaging probabilities;
- `scoring.py`: log P(Y | X) of given pairs; `alignment.py`: word alignments (Pharaoh);
- `inputs.py`, `batched.py`, `generation.py`: checking a call, batching it, one batch of it;
- `translator.py`: `Translator`, raw sentences in, translations (or scores) out;
- `stream.py`: line streams translated chunk by chunk, in order (the command line's input).
"""
