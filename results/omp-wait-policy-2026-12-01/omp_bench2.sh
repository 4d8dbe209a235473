#!/bin/bash
cd /work/main
CK=checkpoints/multi30k_en-de/checkpoint_avg5.pt
SRC=../shared/data/multi30k/test_2016_flickr.en
one() {
  local t0=$(date +%s.%N)
  if [ "$2" = unset ]; then env -u OMP_WAIT_POLICY timeout 300 .venv/bin/python -m transformer.cli.translate --checkpoint $CK --input $3 --output /tmp/grid/o.de $4 --device cpu 2>/dev/null
  else OMP_WAIT_POLICY=$2 timeout 300 .venv/bin/python -m transformer.cli.translate --checkpoint $CK --input $3 --output /tmp/grid/o.de $4 --device cpu 2>/dev/null; fi
  local t1=$(date +%s.%N)
  echo "$1 $2 $(wc -l < $3) lines $4: $(echo "$t1 - $t0" | bc) s"
}
python3 -c "while True: pass" & B=$!
sleep 1
for r in 1 2; do for p in unset PASSIVE; do one busy1 $p $SRC "--beam-size 4"; done; done
python3 -c "while True: pass" & C=$!
sleep 1
for r in 1 2; do for p in unset PASSIVE; do one busy2 $p /tmp/grid/src200.en --greedy; done; done
kill $B $C
