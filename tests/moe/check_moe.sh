#!/usr/bin/env bash
# check_moe.sh MPIEXEC MOE TOOL MODE [CONVERT SHARED PYTHON] - end-to-end checks of the moe app
# (apps/moe).
#   converge: 1 rank, embedded defaults for 60 steps: the held-out loss must fall below the
#             unigram baseline of the same data (both read from eval.csv), and the routing
#             statistics must be written for every MoE layer (routing.csv) and expert
#             (experts.csv, whose loads sum to 1 per layer), the per-domain held-out loss
#             (domains.csv, whose token-weighted mean is val_loss) and the expert shares per
#             domain (domain_experts.csv, summing to 1 per layer and domain).
#   layers:   8 MoE layers (more than the 5 that wide per-layer columns allowed): a row per layer
#             in routing.csv with the adjacent-layer MI for layers 0..6.
#   text_errors: a two-domain token stream made by tess-convert ids (CONVERT): a vocabulary
#             other than data.vocab and a stream holding fewer sequences than one batch are
#             configuration errors (exit 78) naming the file, on both ranks; a short run on it
#             measures the MI of expert and domain over its 2 domains.
#   text_corpus: jobs/moe-text.sh on the installed packages and SHARED/text (77 when absent),
#             small: each domain's tokens in /domain match the manifest (h5py, PYTHON), and 20
#             steps of moe train on it with 7 domains.
#   resume:   a small model with every aux loss and the balancing bias on, Guo et al.'s losses
#             with their weights scaled at the first step, 40 steps on 2 ranks, against the same
#             run stopped at step 20 (run.stop_at: exit 75) and resumed: the metrics (step, loss)
#             and the final checkpoints (parameters with the biases and the scaled weights'
#             exponents, AdamW) must be identical; the weights are scaled once, in the first
#             run, not again on resume.
#   ep:       the same 20 steps on 1 rank and with expert parallelism (2 ranks ep 2, 4 ranks
#             dp 2 x ep 2, 4 ranks ep 4) agree to a relative 1e-5 in the training loss.
#   reshard:  a run saved at ep 2 and resumed at ep 1 and ep 4 continues with the losses of the
#             uninterrupted run (relative 1e-5; measured 2e-8): the experts, their AdamW moments
#             and the balancing biases reshard through the checkpoint's global layout.
#   metrics:  the load and Guo et al. columns of metrics.csv on 2 ranks: dropless (dp 2) the
#             dropped fraction is 0 in every row; with capacity factor 0.5 by score, padded, at
#             ep 2 (the fixed-size exchange) it is at least 0.45 (the capacity keeps at most half
#             of the pairs, rounded up); MaxVio >= 0, dead experts in [0, E], L_o >= 0 and L_v > 0
#             in every row; the share of the time in the expert exchanges is 0 without and in
#             (0, 1] with ep; with plots (when gnuplot is installed) load.png and guo.png exist.
#   eval:     run.mode = eval on the checkpoint of a finished 20-step run (into a new run.dir,
#             ckpt.dir = the run's checkpoints) writes one evaluation equal to the run's last,
#             digit for digit (eval.csv, routing.csv, domains.csv, the seconds column aside),
#             stamped with step 20, and leaves the run's checkpoints as they were.
#   dp:       the same 20 steps on 1 and 2 ranks agree to a relative 1e-4 in the training loss.
#             In ep, reshard and dp lambda_lb = 0: L_lb uses each rank's own counts (the per-micro-batch variant),
#             so with it the 2-rank objective is not the 1-rank one.
set -euo pipefail
mpiexec=$1 exe=$2 tool=$3 mode=$4 convert=${5:-} shared=${6:-} python=${7:-}
fail() { echo "check_moe: FAIL: $*" >&2; exit 1; }
small=(--set model.layers=2 --set model.channels=32 --set model.heads=2 --set model.mlp_hidden=32
       --set moe.experts=4 --set moe.expert_hidden=16 --set data.vocab=64 --set data.seq_len=16
       --set train.batch=8 --set train.eval_batch=16 --set run.plots=false)

# run directories of an earlier run of this test would be resumed: start clean
rm -rf evtrain evonly mdropless mcap converge full stopped to1 to4 ep1 np2ep2 np4ep2 np4ep4 np1 np2 np2local id1 id2 layers textrun \
  corpus corpusrun

case "$mode" in
eval)
  ev=("${small[@]}" --set train.steps=20 --set train.eval_every=10 --set optim.warmup_steps=4)
  "$mpiexec" -n 1 "$exe" "${ev[@]}" --set run.dir=evtrain >evtrain.log 2>&1 ||
    { cat evtrain.log; fail "the training run failed"; }
  before=$(cd evtrain/checkpoints && ls -l --time-style=full-iso && md5sum -- *)
  "$mpiexec" -n 1 "$exe" "${ev[@]}" --set run.dir=evonly --set run.mode=eval \
    --set ckpt.dir=evtrain/checkpoints --set ckpt.resume=auto >evonly.log 2>&1 ||
    { cat evonly.log; fail "the eval run failed"; }
  cat evonly.log
  [ "$before" = "$(cd evtrain/checkpoints && ls -l --time-style=full-iso && md5sum -- *)" ] ||
    fail "run.mode = eval changed the trained run's checkpoints"
  [ ! -e evonly/checkpoints ] || [ -z "$(ls evonly/checkpoints)" ] ||
    fail "run.mode = eval wrote a checkpoint: $(ls evonly/checkpoints)"
  [ ! -e evonly/metrics.csv ] || fail "run.mode = eval ran a training step (metrics.csv)"
  for f in eval routing domains; do
    # the rows of the last evaluation (step 20) without the seconds column
    want=$(awk -F, 'NR > 1 && $1 == 20 { NF--; print }' OFS=, "evtrain/$f.csv")
    got=$(awk -F, 'NR > 1 { NF--; print }' OFS=, "evonly/$f.csv")
    [ -n "$want" ] || fail "evtrain/$f.csv has no rows at step 20"
    [ "$got" = "$want" ] || fail "$f.csv of the eval run differs from the run's last evaluation:
$got
vs
$want"
  done
  echo "eval of the checkpoint = the run's last evaluation: $(sed -n 2p evonly/eval.csv)"
  ;;
converge)
  "$mpiexec" -n 1 "$exe" --set run.dir=converge --set run.plots=false --set train.steps=60 \
    --set train.eval_every=60 --set optim.warmup_steps=10 >converge.log 2>&1 ||
    { cat converge.log; fail "the run failed"; }
  last=$(tail -n 1 converge/eval.csv)
  loss=$(echo "$last" | cut -d, -f2) uni=$(echo "$last" | cut -d, -f4)
  echo "held-out loss $loss, unigram baseline $uni"
  awk -v l="$loss" -v u="$uni" 'BEGIN { exit !(l < u - 0.5) }' ||
    fail "held-out loss $loss is not below the unigram baseline $uni (by 0.5 nats)"
  head -n 1 converge/routing.csv |
    grep -q "^step,layer,entropy,mass,maxvio,dead,mi_domain,cos2,mi_next,load_max,seconds$" ||
    fail "routing.csv header: $(head -n 1 converge/routing.csv)"
  [ "$(grep -c '^60,' converge/routing.csv)" -eq 4 ] || fail "routing.csv: not 4 layer rows at step 60"
  awk -F, 'NR > 1 && $1 == 60 { n[$2]++; s[$2] += $4 }
           END { for (l = 0; l < 4; l++) if (n[l] != 8 || s[l] < 0.999 || s[l] > 1.001) exit 1 }' \
    converge/experts.csv || fail "experts.csv: 8 experts per layer with loads summing to 1"
  awk -F, -v l="$loss" 'NR > 1 && $1 == 60 { s += $3 * $4; n += $4; d++ }
    END { m = s / n; exit !(d == 4 && m - l < 1e-4 && l - m < 1e-4) }' converge/domains.csv ||
    fail "domains.csv: 4 domains whose token-weighted loss is not val_loss $loss"
  awk -F, 'NR > 1 && $1 == 60 { s[$2 "," $3] += $5 }
    END { for (k in s) { n++; if (s[k] < 0.999 || s[k] > 1.001) exit 1 } exit !(n == 16) }' \
    converge/domain_experts.csv || fail "domain_experts.csv: shares per layer and domain sum to 1"
  ;;
layers)
  "$mpiexec" -n 1 "$exe" "${small[@]}" --set model.layers=8 --set train.steps=4 \
    --set optim.warmup_steps=1 \
    --set train.eval_every=4 --set run.dir=layers >layers.log 2>&1 || { cat layers.log; fail "8 MoE layers"; }
  awk -F, 'NR > 1 && $1 == 4 { n++; if ($2 < 7 && $9 == "nan") bad++; if ($2 == 7 && $9 != "nan") bad++ }
           END { exit !(n == 8 && bad == 0) }' layers/routing.csv ||
    { cat layers/routing.csv; fail "routing.csv: 8 layer rows, mi_next for layers 0..6"; }
  ;;
text_errors)
  # two domains of 200 and 184 ids in [0, 64): 384 tokens, (384 - 1) / 16 = 23 windows of 17
  awk 'BEGIN { for (i = 0; i < 200; i++) printf "%d%s", (i * 7) % 64, i % 20 == 19 ? "\n" : " " }' > a.ids
  awk 'BEGIN { for (i = 0; i < 184; i++) printf "%d ", (i * 5 + 3) % 64 }' > b.ids
  "$mpiexec" -n 1 "$convert" ids --vocab-size 64 tiny.h5 prose=a.ids code=b.ids > convert.log 2>&1 ||
    { cat convert.log; fail "tess-convert ids"; }
  text=(--set data.source=text --set data.train_file=tiny.h5 --set data.eval_file=tiny.h5)
  expect78() { # expect78 LOG REGEX ARGS...: exit 78 on both ranks (rank 0 prints the message)
    local log=$1 re=$2 rc=0; shift 2
    "$mpiexec" -n 2 "$exe" "${small[@]}" "${text[@]}" "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" -eq 78 ] || { cat "$log"; fail "$log: exit $rc, expected 78"; }
    grep -q -- "$re" "$log" || { cat "$log"; fail "$log: no '$re'"; }
  }
  expect78 vocab.log "'tiny.h5' has vocab_size 64, the model data.vocab = 128" --set data.vocab=128
  expect78 batch.log "'tiny.h5' holds 384 tokens = 23 sequences of data.seq_len + 1 = 17, fewer than one batch (train.batch = 32)" \
    --set train.batch=32
  "$mpiexec" -n 2 "$exe" "${small[@]}" "${text[@]}" --set train.eval_batch=8 --set train.steps=6 --set optim.warmup_steps=1 \
    --set train.eval_every=6 --set data.unigram_samples=16 --set run.dir=textrun >text.log 2>&1 ||
    { cat text.log; fail "a run on tiny.h5"; }
  grep -q "2 domains (prose,code)" text.log || { cat text.log; fail "the domains are not logged"; }
  awk -F, 'NR > 1 && $1 == 6 && $8 != "nan" { n++ } END { exit !(n == 2) }' textrun/routing.csv ||
    { cat textrun/routing.csv; fail "routing.csv: mi_domain per layer on text"; }
  ;;
text_corpus)
  rc=0
  MOE_TEXT_BYTES=20000 MOE_TEXT_BLOCK=2 MOE_TEXT_VOCAB=512 TESS_SHARED_DATA=$shared TESS_CONVERT=$convert \
    bash "$(dirname "$0")/../../jobs/moe-text.sh" corpus >corpus.log 2>&1 || rc=$?
  [ "$rc" -eq 77 ] && { cat corpus.log; echo "skipped: a source of the corpus is absent"; exit 77; }
  [ "$rc" -eq 0 ] || { cat corpus.log; fail "jobs/moe-text.sh: exit $rc"; }
  if "$python" -c 'import h5py' 2>/dev/null; then
    "$python" - corpus <<'PY' || fail "the domains of the token files do not match the manifest"
import sys, h5py, numpy as np
d = sys.argv[1]
want = {}
for line in open(f"{d}/manifest.txt"):
    if line.startswith("#"): continue
    f = line.split()
    want.setdefault(f[-4], []).append(int(f[-1]))  # split -> tokens per domain, in order
for split, counts in want.items():
    with h5py.File(f"{d}/{split}.h5", "r") as h:
        dom = h["domain"][...]
        names = h["domain"].attrs["names"]
        names = names.decode() if isinstance(names, bytes) else names
        assert names == "shakespeare,bible,dictionary,computing,fortunes,c,python", names
        assert h["tokens"].attrs["vocab_size"] == 512
        assert np.all(np.diff(dom.astype(int)) >= 0), "domains are not contiguous"
        got = np.bincount(dom, minlength=7).tolist()
        assert got == counts, (split, got, counts)
        print(split, got)
PY
  fi
  "$mpiexec" -n 2 "$exe" "${small[@]}" --set data.source=text --set data.vocab=512 \
    --set data.train_file=corpus/train.h5 --set data.eval_file=corpus/val.h5 --set train.steps=20 \
    --set optim.warmup_steps=2 \
    --set train.eval_every=20 --set run.dir=corpusrun >corpusrun.log 2>&1 ||
    { cat corpusrun.log; fail "moe on the corpus"; }
  grep -q "7 domains (shakespeare,bible,dictionary,computing,fortunes,c,python)" corpusrun.log ||
    { cat corpusrun.log; fail "the corpus domains are not logged"; }
  ;;
resume)
  # the balancing bias and the identity-coupled R_cp's co-occurrence average are state too
  common=("${small[@]}" --set train.steps=40 --set train.eval_every=20 --set run.log_every=5
          --set moe.lambda_z=1e-3 --set moe.bias_balance=true --set moe.bias_rate=1e-2
          --set moe.cp_identity=true --set moe.cp_decay=0.9 --set moe.lambda_ortho=1e-4
          --set moe.lambda_var=1e-2 --set moe.guo_autoscale=true)
  "$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=full >full.log 2>&1 || { cat full.log; fail "full run"; }
  rc=0
  "$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=stopped --set run.stop_at=20 >stop.log 2>&1 || rc=$?
  [ "$rc" -eq 75 ] || { cat stop.log; fail "stop at 20: exit $rc, expected 75"; }
  "$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=stopped --resume auto >resume.log 2>&1 ||
    { cat resume.log; fail "the resumed run failed"; }
  grep -q "resumed from step 20" resume.log || fail "the run did not resume from step 20"
  grep -q "Guo et al.'s weights scaled at the first step" stop.log ||
    { cat stop.log; fail "the first run did not scale Guo et al.'s weights"; }
  ! grep -q "Guo et al.'s weights scaled" resume.log ||
    fail "the resumed run scaled Guo et al.'s weights again instead of restoring them"
  cmp <(cut -d, -f1-7 full/metrics.csv) <(cut -d, -f1-7 stopped/metrics.csv) ||
    fail "metrics of the resumed run differ from the uninterrupted one"
  "$tool" diff full/checkpoints stopped/checkpoints || fail "final checkpoints differ"
  "$mpiexec" -n 1 "$exe" "${small[@]}" --set moe.bias_balance=true --set moe.cp_identity=true \
    --set moe.lambda_var=1e-2 --set moe.guo_autoscale=true --print-params >params.log 2>&1 ||
    { cat params.log; fail "--print-params"; }
  grep -q "^params/layers.1.mlp.bias " params.log && grep -q "^optim/v/layers.0.mlp.w_gate " params.log &&
    grep -q "^params/layers.1.mlp.cp_cooc " params.log && grep -q "^params/layers.0.mlp.guo_log10 " params.log ||
    { cat params.log; fail "--print-params lacks the balancing bias, R_cp's co-occurrence, Guo et al.'s exponents or the experts' AdamW state"; }
  ;;
metrics)
  common=("${small[@]}" --set train.steps=6 --set train.eval_every=6 --set run.log_every=2
          --set optim.warmup_steps=1)
  "$mpiexec" -n 2 "$exe" "${common[@]}" --set run.dir=mdropless >mdropless.log 2>&1 ||
    { cat mdropless.log; fail "dropless run"; }
  plots=false
  command -v gnuplot >/dev/null && plots=true
  "$mpiexec" -n 2 "$exe" "${common[@]}" --set dist.ep=2 --set moe.drop=probs \
    --set moe.capacity_factor=0.5 --set moe.pad=true --set moe.lambda_ortho=1e-3 \
    --set moe.lambda_var=1e-3 --set run.plots=$plots --set run.dir=mcap >mcap.log 2>&1 ||
    { cat mcap.log; fail "capacity 0.5, padded, ep 2"; }
  for d in mdropless mcap; do
    head -n 1 $d/metrics.csv |
      grep -q "^step,loss,aux,lb,z,sp,cp,o,v,dropped,maxvio,dead,lr,grad_norm,tok_per_s,a2a_share,seconds$" ||
      fail "$d/metrics.csv header: $(head -n 1 $d/metrics.csv)"
    lo=0 hi=0 xlo=0 xhi=0
    [ $d = mcap ] && lo=0.45 hi=0.99 xlo=1e-9 xhi=1
    awk -F, -v lo=$lo -v hi=$hi -v xlo=$xlo -v xhi=$xhi 'NR > 1 { n++
           if (!($16 >= xlo && $16 <= xhi)) { print "a2a_share " $16 " outside [" xlo ", " xhi "]"; bad++ }
           if (!($10 >= lo && $10 <= hi)) { print "dropped " $10 " outside [" lo ", " hi "]"; bad++ }
           if (!($11 >= 0 && $12 >= 0 && $12 <= 4)) { print "maxvio " $11 ", dead " $12; bad++ }
           if (!($8 >= 0 && $9 > 0)) { print "L_o " $8 ", L_v " $9; bad++ } }
         END { exit !(n == 3 && bad == 0) }' $d/metrics.csv ||
      { cat $d/metrics.csv; fail "$d/metrics.csv: 3 rows with plausible load and Guo columns"; }
  done
  if [ $plots = true ]; then
    [ -s mcap/plots/load.png ] && [ -s mcap/plots/guo.png ] || fail "no load.png or guo.png"
  fi
  ;;
dp)
  common=("${small[@]}" --set train.steps=20 --set train.eval_every=20 --set run.log_every=5
          --set optim.warmup_steps=5 --set moe.lambda_lb=0.1 --set moe.lambda_z=1e-3)
  "$mpiexec" -n 2 "$exe" "${common[@]}" --set moe.lb_global=false --set run.dir=np2local >np2local.log 2>&1 ||
    { cat np2local.log; fail "2 ranks, local L_lb"; }
  for np in 1 2; do
    "$mpiexec" -n "$np" "$exe" "${common[@]}" --set run.dir="np$np" >"np$np.log" 2>&1 ||
      { cat "np$np.log"; fail "$np ranks"; }
  done
  paste -d, <(cut -d, -f1,2 np1/metrics.csv) <(cut -d, -f2 np2/metrics.csv) | tail -n +2 |
    awk -F, '{ d = $2 - $3; if (d < 0) d = -d; r = d / $2; printf "step %s: 1 rank %s, 2 ranks %s, rel %.2e\n", $1, $2, $3, r;
               if (r > 1e-4) bad = 1 } END { exit bad }' || fail "2 ranks differ from 1 rank"
  cmp -s <(cut -d, -f1-4 np2/metrics.csv) <(cut -d, -f1-4 np2local/metrics.csv) &&
    fail "per-rank L_lb counts gave the same losses as global ones: the test cannot tell them apart"
  # identity-coupled R_cp: its co-occurrence average is updated from counts over every rank, so
  # the loss and R_cp (column 7) do not depend on the number of ranks either
  for np in 1 2; do
    "$mpiexec" -n "$np" "$exe" "${common[@]}" --set moe.cp_identity=true --set moe.cp_decay=0.5 \
      --set run.dir="id$np" >"id$np.log" 2>&1 || { cat "id$np.log"; fail "$np ranks, cp_identity"; }
  done
  paste -d, <(cut -d, -f1,2,7 id1/metrics.csv) <(cut -d, -f2,7 id2/metrics.csv) | tail -n +2 |
    awk -F, '{ for (c = 2; c <= 3; c++) { d = $c - $(c + 2); if (d < 0) d = -d; r = d / ($c < 0 ? -$c : $c);
               printf "step %s column %d: 1 rank %s, 2 ranks %s, rel %.2e\n", $1, c, $c, $(c + 2), r;
               if (r > 1e-4) bad = 1 } } END { exit bad }' || fail "cp_identity: 2 ranks differ from 1 rank"
  cmp -s <(cut -d, -f7 np1/metrics.csv) <(cut -d, -f7 id1/metrics.csv) &&
    fail "cp_identity gave the same R_cp as the mass product: the test cannot tell them apart"
  ;;
ep)
  common=("${small[@]}" --set train.steps=20 --set train.eval_every=20 --set run.log_every=5
          --set optim.warmup_steps=5 --set moe.lambda_lb=0.1 --set moe.lambda_z=1e-3)
  "$mpiexec" -n 1 "$exe" "${common[@]}" --set run.dir=ep1 >ep1.log 2>&1 || { cat ep1.log; fail "1 rank"; }
  for cfg in 2:2 4:2 4:4; do
    np=${cfg%%:*} ep=${cfg#*:}
    "$mpiexec" -n "$np" "$exe" "${common[@]}" --set dist.ep="$ep" --set run.dir="np${np}ep$ep" \
      >"np${np}ep$ep.log" 2>&1 || { cat "np${np}ep$ep.log"; fail "$np ranks, ep $ep"; }
    paste -d, <(cut -d, -f1,2 ep1/metrics.csv) <(cut -d, -f2 "np${np}ep$ep/metrics.csv") | tail -n +2 |
      awk -F, -v c="$np ranks ep $ep" '{ d = $2 - $3; if (d < 0) d = -d; r = d / $2;
           printf "step %s: 1 rank %s, %s %s, rel %.2e\n", $1, $2, c, $3, r; if (r > 1e-5) bad = 1 }
           END { exit bad }' || fail "$np ranks with ep $ep differ from 1 rank"
  done
  ;;
reshard)
  # saved at ep 2 (2 ranks), resumed at ep 1 (1 rank) and ep 4 (4 ranks): the continued losses
  # must follow the uninterrupted ep-2 run (not bitwise: sums over ranks are reordered)
  common=("${small[@]}" --set train.steps=40 --set train.eval_every=20 --set run.log_every=5
          --set moe.lambda_lb=0.1 --set moe.lambda_z=1e-3 --set moe.bias_balance=true --set moe.bias_rate=1e-2)
  "$mpiexec" -n 2 "$exe" "${common[@]}" --set dist.ep=2 --set run.dir=full >full.log 2>&1 || { cat full.log; fail "full run"; }
  rc=0
  "$mpiexec" -n 2 "$exe" "${common[@]}" --set dist.ep=2 --set run.dir=to1 --set run.stop_at=20 >stop.log 2>&1 || rc=$?
  [ "$rc" -eq 75 ] || { cat stop.log; fail "stop at 20: exit $rc, expected 75"; }
  cp -r to1 to4
  "$mpiexec" -n 1 "$exe" "${common[@]}" --set dist.ep=1 --set run.dir=to1 --resume auto >r1.log 2>&1 ||
    { cat r1.log; fail "resume at ep 1"; }
  "$mpiexec" -n 4 "$exe" "${common[@]}" --set dist.ep=4 --set run.dir=to4 --resume auto >r4.log 2>&1 ||
    { cat r4.log; fail "resume at ep 4"; }
  for d in to1 to4; do
    grep -q "resumed from step 20" r${d#to}.log || fail "$d did not resume from step 20"
    paste -d, <(cut -d, -f1,2 full/metrics.csv) <(cut -d, -f2 "$d/metrics.csv") | tail -n +2 |
      awk -F, -v c="$d" '{ d = $2 - $3; if (d < 0) d = -d; r = d / $2;
           printf "step %s: ep 2 %s, %s %s, rel %.2e\n", $1, $2, c, $3, r; if (r > 1e-5) bad = 1 }
           END { exit bad }' || fail "the run resumed $d differs from the uninterrupted one"
  done
  ;;
*) fail "unknown mode '$mode'" ;;
esac
echo "check_moe: $mode passed"
