"""From parallel text to batches of token ids (section 5.1 of the paper):

- `config.py`: `DataConfig`, the `data:` section;
- `corpus.py`: reading local file pairs or Hugging Face `datasets` splits;
- `tokenizer.py`: the SentencePiece tokenizer; `vocabulary.py`: a run's trained model(s);
- `dataset.py`: encoded pairs as flat arrays, and the length filter;
- `token_cache.py`: encoded corpora cached on disk;
- `prepare.py`: `prepare_data`, the steps above in order;
- `batching.py`: token-based batches grouped by length, sharded and resumable.
"""
