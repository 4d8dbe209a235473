# Evaluate members and ensembles of checkpoints/ens_a, ens_b on the validation set.
cd /work/runtree
export TRANSFORMER_DATA_DIR=/work/shared/data
V=/work/shared/data/multi30k/val
T=.venv/bin
mkdir -p checkpoints/ens_eval
for r in ens_a ens_b; do
  for n in 5 10; do
    [ -f checkpoints/$r/checkpoint_avg$n.pt ] || $T/transformer-average --last $n --dir checkpoints/$r --output checkpoints/$r/checkpoint_avg$n.pt 2>&1 | tail -1
  done
done
score() { # name hypfile
  echo "$1 $(.venv/bin/python -c "import sacrebleu,sys;h=open('$2').read().splitlines();r=open('$V.de').read().splitlines();print(round(sacrebleu.corpus_bleu(h,[r]).score,2), len(h))")"
}
for w in last avg5 avg10; do
  for k in 4 6; do
    for r in ens_a ens_b; do
      $T/transformer-translate --checkpoint checkpoints/$r/checkpoint_$w.pt --input $V.en --output checkpoints/ens_eval/$r.$w.beam$k.de --beam-size $k 2>/dev/null
      score "$r $w beam$k" checkpoints/ens_eval/$r.$w.beam$k.de
    done
    $T/transformer-translate --checkpoint checkpoints/ens_a/checkpoint_$w.pt checkpoints/ens_b/checkpoint_$w.pt --input $V.en --output checkpoints/ens_eval/ens.$w.beam$k.de --beam-size $k 2>/dev/null
    score "ensemble $w beam$k" checkpoints/ens_eval/ens.$w.beam$k.de
  done
done
