"""From parallel text to batches of token ids (section 5.1 of the paper):

- `config.py`: `DataConfig`, the `data:` section;
- `corpus.py`: reading local file pairs, whole or in chunks; `hf_corpus.py`: Hugging Face
  `datasets` splits (the hub or a local dataset); `multi30k.py`: the main job's corpus, found
  locally or downloaded; `hub.py`: their downloads without the Hub's retry warnings;
- `tokenizer.py`: the SentencePiece tokenizer; `spm_model.py`: what a model file says about its
  training; `vocabulary.py`: a run's trained model(s), retrained when the settings change;
- `word_encoding.py`: SentencePiece once per distinct word; `encoding.py`: a corpus encoded
  chunk by chunk into flat arrays;
- `dataset.py`: encoded pairs as rows of flat arrays, and the length filter;
- `token_cache.py`: encoded corpora cached on disk, opened memory-mapped;
- `stages.py`: time and peak memory of each step; `preparation.py`: the steps;
- `heap.py`: freed heap memory returned to the OS (after planning an epoch);
- `prepare.py`: `prepare_data`, the steps above in order;
- `batching.py`: token-based batches grouped by length, sharded and resumable.
"""
