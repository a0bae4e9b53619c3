#!/usr/bin/env bash
# ncu (clocks locked at base, so kernel durations are stable where graph replays drift 2-4% with power) of 034's long
# attentions with the last wave's key split off / on: the durations of attention_kernel and tail_combine_kernel in
# the three calls bench/ncu_target.py makes (034 sorted-by-SOL index 11 = Lq 4096, 15 = Lq 8192).
#
#   bash bench/ncu_tail_split.sh ["0 1": VLATTN_ATTN_TAIL_SPLIT values] ["11 15": indices]
set -u
splits=${1:-"0 1"}
idxs=${2:-"11 15"}
for i in $idxs; do
  for s in $splits; do
    echo "== 034 sorted index $i, VLATTN_ATTN_TAIL_SPLIT=$s"
    VLATTN_ATTN_TAIL_SPLIT=$s ncu --metrics gpu__time_duration.sum -k regex:'attention_kernel|tail_combine' \
      python3 bench/ncu_target.py attention 034 "$i" 2>&1 |
      grep -E "attention_kernel|tail_combine|gpu__time_duration|ERR|rror" | sed -E 's/\(CUtensorMap.*//; s/ +/ /g'
  done
done
