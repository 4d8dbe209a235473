"""Deploying a trained model: export to CTranslate2 and Hugging Face, with parity proven.

- `extra.py`: the optional `export` extra (ctranslate2, transformers), imported on demand;
- `ctranslate2.py`: our model as a CTranslate2 `TransformerSpec` and model directory;
- `ctranslate2_translate.py`: CTranslate2 decoding options that reproduce our searches;
- `ctranslate2_parity.py`: an exported CTranslate2 model compared with our decoder;
- `huggingface_weights.py`: our weights under `MarianMTModel`'s names, d_model reordered;
- `huggingface_tokenizer.py`: our SentencePiece model as a `tokenizer.json`;
- `huggingface.py`: our model as a `MarianMTModel` directory (config, weights, tokenizer);
- `huggingface_parity.py`: an exported Hugging Face directory compared with our model;
- `parity.py`: what both checks share (check sentences, our decoder's ids, report lines).

`transformer-export` (`transformer/cli/export.py`) runs an export and its check. The model
package knows nothing of this folder.
"""
