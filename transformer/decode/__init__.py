"""Decoding (section 6.1 of the paper):

- `config.py`: `DecodeConfig`, the `decode:` section;
- `search.py`: what both searches share (hypotheses, length penalty, step-wise decoding);
- `greedy.py`: greedy search; `beam_search.py`: batched beam search;
- `translator.py`: `Translator`, raw sentences in, translations out.
"""
