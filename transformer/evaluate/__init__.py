"""Measuring a model:

- `bleu.py`: sacreBLEU BLEU and chrF, and the paper's tokenized compound-split BLEU;
- `sacrebleu_sets.py`: sacreBLEU's named test sets (downloaded by sacreBLEU);
- `attention_maps.py`: the attention weights of every layer and head for a sentence pair;
- `plot.py`: heatmaps of them, like Figures 3 to 5;
- `training_curves.py`: a run's loss, BLEU, learning rate and speed from its metrics.jsonl.
"""
