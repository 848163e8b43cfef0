#!/usr/bin/env bash
# check_fedkalter.sh MPIEXEC FEDKALTER MODE [METHOD] - end-to-end checks of the fedkalter app on
# generated clients (7 clients of 40 graphs, d = 16, no plots):
#   ranks   METHOD trains 3 rounds on 1, 2, 4 and 7 ranks: clients.csv (accuracies and a hash of
#           every client's parameter bytes) is identical, i.e. the parameters are bitwise equal;
#           for fedkalter also kalter_rounds.csv (without its seconds) and kalter_logR_hist.csv;
#   resume  METHOD 4 rounds on 1 rank, against 2 ranks stopped after round 2 (exit 75) and resumed
#           on 3 ranks (clients move between ranks): identical clients.csv and metrics columns (the
#           bytes sent depend on the rank count and are not compared);
#   prox    FedProx with prox_mu = 0 is bitwise FedAvg after 3 rounds; with prox_mu = 1 it is not;
#   limit   Fed-Kalter initialised at R -> infinity (model.kalter_bR0 = 1e9) tracks FedStar for 5
#           rounds of 4 steps: mean loss within a relative 1e-5 and accuracies within 0.02 per
#           round (the entries both have start equal; K ~ 1e-9 leaves only rounding differences);
#   learn   METHOD 30 rounds on 2 ranks: the mean training loss falls below 0.55 (from ~0.69) and
#           the bytes sent per round and shared floats per client are logged (0 for selftrain);
#           fedkalter writes kalter.csv (per client and layer: mean log R, K eta, P+/P-),
#           kalter_rounds.csv (6 evaluated rounds; K eta + P+/P- = 1; its last row the client
#           means of kalter.csv), kalter_logR_hist.csv (every client's fractions sum to 1, their
#           binned mean is within half a bin of the client's mean ln R), kalter_logR_hist_long.csv
#           (the same fractions, one row per client and bin) and, with gnuplot, the plots
#           kalter_R.png, kalter_gain.png and kalter_logR_hist.png.
#   manyclients Fed-Kalter with 40 generated clients (10 graphs, d = 8), 1 round on 2 ranks: no
#           kalter_logR_hist.csv (more than 31 columns) and a warning saying so, but
#           kalter_logR_hist_long.csv with the same bins for all 40 clients, each summing to 1;
#   localq  Fed-Kalter with model.kalter_share_eta_q=false, 3 rounds: 1360 shared floats per
#           client (1456 less q and eta of 3 layers at d = 16) and fewer bytes; 1 and 3 ranks
#           identical; the clients' parameters differ from the shared-q/eta run's;
#   linear  Fed-Kalter with model.kalter_linear=true (no tanh in the transition): 3 rounds on 1
#           and 3 ranks identical, parameters and kalter.csv different from the tanh run's, the
#           same shared floats; 30 rounds on 2 ranks learn (loss < 0.55) with 0 <= K eta < 1;
#   reset   METHOD with train.reset_adam=true, 3 rounds of several steps: 1 and 3 ranks identical,
#           and the parameters differ from the run without the reset;
#   gcfl    GCFL: within its warm-up (3 rounds < 20) bitwise FedAvg; with splits forced
#           (warm-up 0, eps1 1e9, eps2 0) 2 clusters after round 1 and more later (metrics.csv
#           "clusters"), identical on 1, 2 and 4 ranks, and 2 ranks stopped after round 2 and
#           resumed on 3 ranks (the clusters come from the checkpoint) equal the 1-rank run;
#           gcfl.csv (the split rule's norms) has a row per round and cluster the round started
#           with, clients summing to 7, mean norm <= largest norm, a split row per added
#           cluster, and is the same on 1, 2, 4 ranks and after the resume; with gnuplot
#           plots.py --gcfl draws it and names the first split (none in the warm-up);
#   gcflplus GCFL+: within its warm-up bitwise FedAvg; with splits forced (warm-up 0, eps1 1e9,
#           eps2 0, 2 norms per sequence) the clusters per round are 1 2 2 3 3 4 (a split needs 2
#           norms recorded since the last one, one split per round), identical on 1, 2 and 4
#           ranks, different from GCFL's; 2 ranks stopped after round 3 (one norm recorded)
#           and resumed on 3 ranks equal the 1-rank run;
#   oneds   GCFL's oneDS split of one TU dataset of 60 graphs written here over 4 clients
#           (15 each: 12/1/2): 1 and 2 ranks identical, clients named 0-TOY..3-TOY; 11 clients
#           (5 graphs each) exit 65 naming the dataset and the empty split; no data.oneds and
#           a missing dataset exit 78 and 66 naming the option and the file;
#   experiment experiments/fedkalter/run.sh on 7 tiny SM datasets written here (4 rounds, seeds
#           1 and 2, FedStar and Fed-Kalter): commands.tsv lists the 4 runs seed-major with exit 0
#           and their commands; a second call skips them; an unknown method exits 64; table.py
#           prints both rows over seeds 1,2 with seed 1's client mean and the difference line,
#           and the best-validation rows (4 rounds evaluated every round) with the round and
#           test accuracy of each run recomputed here; client_accuracy.csv's last round equals
#           clients.csv and its client means accuracy.csv; the per-client best-validation rows
#           (each client at its own best validation round) recomputed here; on hand-made runs
#           the tie rule (earliest round, per run and per client), runs without
#           client_accuracy.csv left out, the std across seeds and the difference line; with
#           gnuplot, plots.py draws fedkalter_sm_test.png;
#   tufiles the SM setting on 7 tiny TU datasets written here (10 triangles each): one round
#           on 2 ranks runs; then BZR_A.txt names a node of another graph: exit 65 on 1 and on 2
#           ranks, naming the file; on 2 ranks BZR is client 1 and belongs to rank 1 alone (rank
#           0 never parses it), so rank 0 reports rank 1's error.
set -euo pipefail
mpiexec=$1 exe=$2 mode=$3 method=${4:-fedkalter}
fail() { echo "check_fedkalter: FAIL: $*" >&2; exit 1; }
common=(--set run.plots=false --set data.graphs=40 --set model.hidden=16 --set model.method="$method")
run() { # run NP DIR [ARGS...]
  local np=$1 dir=$2
  shift 2
  "$mpiexec" -n "$np" "$exe" "${common[@]}" --set run.dir="$dir" "$@" >"$dir.log" 2>&1
}
stop_resume() { # stop_resume REF DIR STOP COLS [ARGS...]: 2 ranks stopped after round STOP
  # (exit 75), resumed on 3 ranks from that round; clients.csv and the metrics.csv columns COLS
  # (cut -f) must equal those of the uninterrupted run REF
  local ref=$1 dir=$2 stop=$3 cols=$4 rc=0
  shift 4
  run 2 "$dir" "$@" --set run.stop_at="$stop" || rc=$?
  [ "$rc" -eq 75 ] || { cat "$dir.log"; fail "$dir: stop after round $stop: exit $rc, expected 75"; }
  mv "$dir.log" "${dir}_first.log"
  run 3 "$dir" "$@" --resume auto || { cat "$dir.log"; fail "$dir: resume on 3 ranks"; }
  grep -q "resumed from step $stop" "$dir.log" || { cat "$dir.log"; fail "$dir: did not resume from round $stop"; }
  cmp "$ref/clients.csv" "$dir/clients.csv" ||
    { diff "$ref/clients.csv" "$dir/clients.csv" || true; fail "$method: the resumed run $dir differs"; }
  cmp <(cut -d, -f"$cols" "$ref/metrics.csv") <(cut -d, -f"$cols" "$dir/metrics.csv") ||
    fail "$method: metrics columns $cols of the resumed run $dir differ"
}
write_sm() { # write_sm DIR: the 7 SM datasets as 10 triangles each, classes 0/1, labels 1..2
  for name in MUTAG BZR COX2 DHFR PTC_MR AIDS NCI1; do
    mkdir -p "$1/$name"
    for g in $(seq 0 9); do
      b=$((3 * g))
      printf '%d, %d\n' $((b+1)) $((b+2)) $((b+2)) $((b+1)) $((b+2)) $((b+3)) $((b+3)) $((b+2)) \
        $((b+1)) $((b+3)) $((b+3)) $((b+1)) >>"$1/$name/${name}_A.txt"
      printf '%d\n%d\n%d\n' $((g+1)) $((g+1)) $((g+1)) >>"$1/$name/${name}_graph_indicator.txt"
      printf '%d\n' $((g % 2)) >>"$1/$name/${name}_graph_labels.txt"
      printf '1\n2\n%d\n' $((1 + g % 2)) >>"$1/$name/${name}_node_labels.txt"
    done
  done
}
case "$mode" in
ranks)
  for np in 1 2 4 7; do
    rm -rf "np$np"
    run "$np" "np$np" --set train.rounds=3 || { cat "np$np.log"; fail "$np ranks"; }
    [ "$np" = 1 ] && continue
    cmp np1/clients.csv "np$np/clients.csv" ||
      { diff np1/clients.csv "np$np/clients.csv" || true; fail "$method: $np ranks differ from 1 rank"; }
    [ "$method" = fedkalter ] || continue
    cmp <(cut -d, -f1-10 np1/kalter_rounds.csv) <(cut -d, -f1-10 "np$np/kalter_rounds.csv") ||
      fail "kalter_rounds.csv: $np ranks differ from 1 rank"
    cmp np1/kalter_logR_hist.csv "np$np/kalter_logR_hist.csv" ||
      fail "kalter_logR_hist.csv: $np ranks differ from 1 rank"
  done
  [ "$(wc -l <np1/clients.csv)" -eq 8 ] || fail "clients.csv should list 7 clients"
  ;;
resume)
  rm -rf full stopped
  run 1 full --set train.rounds=4 || { cat full.log; fail "uninterrupted run"; }
  stop_resume full stopped 2 1,2,4 --set train.rounds=4 # step, loss, shared floats
  ;;
prox)
  rm -rf avg prox0 prox1
  common=(--set run.plots=false --set data.graphs=40 --set model.hidden=16 --set train.rounds=3
          --set train.batch=8) # several steps per round: the proximal term acts from the second
  run 2 avg --set model.method=fedavg || { cat avg.log; fail "fedavg"; }
  run 2 prox0 --set model.method=fedprox --set train.prox_mu=0 || { cat prox0.log; fail "fedprox mu 0"; }
  run 2 prox1 --set model.method=fedprox --set train.prox_mu=1 || { cat prox1.log; fail "fedprox mu 1"; }
  cmp avg/clients.csv prox0/clients.csv || fail "FedProx with mu = 0 differs from FedAvg"
  ! cmp -s avg/clients.csv prox1/clients.csv || fail "FedProx with mu = 1 equals FedAvg"
  ;;
limit)
  rm -rf star kal
  common=(--set run.plots=false --set data.graphs=40 --set model.hidden=16 --set train.rounds=5
          --set train.batch=8 --set train.eval_every=1)
  run 2 star --set model.method=fedstar || { cat star.log; fail "fedstar"; }
  run 2 kal --set model.method=fedkalter --set model.kalter_bR0=1e9 || { cat kal.log; fail "fedkalter"; }
  paste -d, <(cut -d, -f1,2 star/metrics.csv) <(cut -d, -f2 kal/metrics.csv) | tail -n +2 |
    awk -F, '{ d = $2 - $3; if (d < 0) d = -d; if (d > 1e-5 * $2) { print "round " $1 ": " $2 " vs " $3; bad = 1 } }
             END { exit bad }' || fail "Fed-Kalter at R -> infinity does not track FedStar's loss"
  paste -d, <(cut -d, -f1-4 star/accuracy.csv) <(cut -d, -f2-4 kal/accuracy.csv) | tail -n +2 |
    awk -F, '{ for (i = 2; i <= 4; i++) { d = $i - $(i + 3); if (d < 0) d = -d; if (d > 0.02) bad = 1 } }
             END { exit bad }' || fail "Fed-Kalter at R -> infinity does not track FedStar's accuracy"
  ;;
learn)
  rm -rf learn
  run 2 learn --set train.rounds=30 --set train.lr=0.01 --set run.plots=true ||
    { cat learn.log; fail "30 rounds"; }
  first=$(sed -n 2p learn/metrics.csv | cut -d, -f2) last=$(tail -n 1 learn/metrics.csv | cut -d, -f2)
  bytes=$(tail -n 1 learn/metrics.csv | cut -d, -f3) shared=$(tail -n 1 learn/metrics.csv | cut -d, -f4)
  echo "$method: loss $first -> $last, bytes/round $bytes, shared floats/client $shared"
  awk -v l="$last" 'BEGIN { exit !(l < 0.55) }' || fail "$method did not learn: loss $first -> $last"
  if [ "$method" = fedkalter ]; then # diagnostics: 7 clients x 3 layers, 0 <= K eta < 1 = K eta + P+/P-
    [ "$(wc -l <learn/kalter.csv)" -eq 22 ] || fail "kalter.csv should have 21 rows"
    awk -F, 'NR > 1 { d = $4 + $5 - 1; if (d < 0) d = -d; if (!($4 >= 0 && $4 < 1) || d > 1e-5) bad = 1 }
             END { exit bad }' learn/kalter.csv || fail "Kalter diagnostics out of range"
    [ "$(wc -l <learn/kalter_rounds.csv)" -eq 7 ] || fail "kalter_rounds.csv should have 6 rows"
    # the last row against kalter.csv: per layer l the mean over clients of ln R, K eta, P+/P-
    awk -F, 'NR == FNR { if (FNR > 1) for (q = 0; q < 3; q++) m[q, $2] += $(3 + q) / 7; next }
             FNR > 1 { for (l = 0; l < 3; l++) { d = $(5 + l) + $(8 + l) - 1; if (d < 0) d = -d
                                                 if (d > 1e-5) bad = 1 }
                       last = $0 }
             END { n = split(last, f, ",")
                   for (q = 0; q < 3; q++) for (l = 0; l < 3; l++) {
                     d = f[2 + 3 * q + l] - m[q, l]; if (d < 0) d = -d; if (d > 1e-6) bad = 1 }
                   exit bad }' learn/kalter.csv learn/kalter_rounds.csv ||
      fail "kalter_rounds.csv: K eta + P+/P- != 1 or its last row is not kalter.csv's client means"
    # the histograms: fractions sum to 1 per client; binned mean within 0.05 of the mean ln R
    awk -F, 'NR == FNR { if (FNR > 1) r[$1] += $3 / 3; next }
             FNR > 1 { for (k = 0; k < 7; k++) { s[k] += $(k + 2); mu[k] += $1 * $(k + 2) } }
             END { for (k = 0; k < 7; k++) { d = s[k] - 1; e = mu[k] - r[k]
                     if (d < 0) d = -d; if (e < 0) e = -e; if (d > 1e-6 || e > 0.0501) bad = 1 }
                   exit bad }' learn/kalter.csv learn/kalter_logR_hist.csv ||
      fail "kalter_logR_hist.csv: fractions do not sum to 1 or do not match kalter.csv's mean ln R"
    # the long file holds the same fractions, one row per client and bin (client-major)
    cmp <(awk -F, 'NR > 1 { for (k = 2; k <= NF; k++) print k - 2, $1, $k }' learn/kalter_logR_hist.csv |
          sort -n -k1,1 -s) <(awk -F, 'NR > 1 { print $2, $1, $3 }' learn/kalter_logR_hist_long.csv) ||
      fail "kalter_logR_hist_long.csv does not hold kalter_logR_hist.csv's fractions"
    if command -v gnuplot >/dev/null; then
      for png in kalter_R kalter_gain kalter_logR_hist; do
        [ -s "learn/plots/$png.png" ] || fail "plots/$png.png missing"
      done
    fi
  fi
  if [ "$method" = selftrain ]; then
    [ "$bytes" = 0 ] && [ "$shared" = 0 ] || fail "selftrain sent $bytes bytes, shares $shared floats"
  else
    awk -v b="$bytes" -v s="$shared" 'BEGIN { exit !(b > 0 && s > 0) }' ||
      fail "$method: no bytes ($bytes) or shared floats ($shared) logged"
  fi
  ;;
localq)
  rm -rf shared local1 local3
  common+=(--set train.rounds=3 --set train.batch=8)
  run 3 shared || { cat shared.log; fail "shared q/eta"; }
  run 1 local1 --set model.kalter_share_eta_q=false || { cat local1.log; fail "local q/eta, 1 rank"; }
  run 3 local3 --set model.kalter_share_eta_q=false || { cat local3.log; fail "local q/eta, 3 ranks"; }
  [ "$(tail -n 1 shared/metrics.csv | cut -d, -f4)" = 1456 ] || fail "shared run: $(tail -n 1 shared/metrics.csv)"
  [ "$(tail -n 1 local1/metrics.csv | cut -d, -f4)" = 1360 ] || fail "local q/eta: $(tail -n 1 local1/metrics.csv)"
  awk -F, 'NR == FNR { b = $3; next } END { exit !($3 < b) }' <(tail -n 1 shared/metrics.csv) \
    <(tail -n 1 local3/metrics.csv) || fail "local q/eta does not send fewer bytes"
  cmp local1/clients.csv local3/clients.csv || fail "local q/eta: 1 and 3 ranks differ"
  ! cmp -s shared/clients.csv local1/clients.csv || fail "local q/eta equals the shared run"
  ;;
linear)
  rm -rf tanh lin1 lin3 linlearn
  run 2 linlearn --set model.kalter_linear=true --set train.rounds=30 --set train.lr=0.01 ||
    { cat linlearn.log; fail "linear, 30 rounds"; }
  last=$(tail -n 1 linlearn/metrics.csv | cut -d, -f2)
  echo "linear transition: loss after 30 rounds $last"
  awk -v l="$last" 'BEGIN { exit !(l < 0.55) }' || fail "linear transition did not learn: loss $last"
  awk -F, 'NR > 1 && !($4 >= 0 && $4 < 1) { bad = 1 } END { exit bad }' linlearn/kalter.csv ||
    fail "linear transition: K eta out of [0, 1)"
  common+=(--set train.rounds=3 --set train.batch=8)
  run 2 tanh || { cat tanh.log; fail "tanh transition"; }
  run 1 lin1 --set model.kalter_linear=true || { cat lin1.log; fail "linear, 1 rank"; }
  run 3 lin3 --set model.kalter_linear=true || { cat lin3.log; fail "linear, 3 ranks"; }
  cmp lin1/clients.csv lin3/clients.csv || fail "linear: 1 and 3 ranks differ"
  ! cmp -s tanh/clients.csv lin1/clients.csv || fail "linear equals the tanh run"
  ! cmp -s tanh/kalter.csv lin1/kalter.csv || fail "linear: kalter.csv equals the tanh run's"
  [ "$(tail -n 1 lin1/metrics.csv | cut -d, -f4)" = "$(tail -n 1 tanh/metrics.csv | cut -d, -f4)" ] ||
    fail "linear: shared floats differ from the tanh run's"
  ;;
reset)
  rm -rf keep reset1 reset3
  common+=(--set train.rounds=3 --set train.batch=8)
  run 2 keep || { cat keep.log; fail "$method without reset"; }
  run 1 reset1 --set train.reset_adam=true || { cat reset1.log; fail "reset, 1 rank"; }
  run 3 reset3 --set train.reset_adam=true || { cat reset3.log; fail "reset, 3 ranks"; }
  cmp reset1/clients.csv reset3/clients.csv || fail "$method with reset: 1 and 3 ranks differ"
  ! cmp -s keep/clients.csv reset1/clients.csv || fail "$method: reset_adam has no effect"
  ;;
gcfl)
  rm -rf avg warm g1 g2 g4 gstop
  common=(--set run.plots=false --set data.graphs=40 --set model.hidden=16 --set train.rounds=3
          --set train.batch=8)
  run 2 avg --set model.method=fedavg || { cat avg.log; fail "fedavg"; }
  run 2 warm --set model.method=gcfl || { cat warm.log; fail "gcfl in its warm-up"; }
  cmp avg/clients.csv warm/clients.csv || fail "GCFL within its warm-up differs from FedAvg"
  common+=(--set model.method=gcfl --set train.gcfl_warmup=0 --set train.gcfl_eps1=1e9
           --set train.gcfl_eps2=0)
  for np in 1 2 4; do
    run "$np" "g$np" || { cat "g$np.log"; fail "gcfl with splits, $np ranks"; }
    cmp g1/clients.csv "g$np/clients.csv" || fail "gcfl: $np ranks differ from 1 rank"
  done
  cut -d, -f5 g1/metrics.csv | paste -sd' ' | awk '{ exit !($2 == 2 && $4 > 2) }' ||
    fail "clusters per round: $(cut -d, -f5 g1/metrics.csv | paste -sd' ')"
  ! cmp -s avg/clients.csv g1/clients.csv || fail "gcfl with splits equals FedAvg"
  # gcfl.csv: a row per round and cluster the round started with (the clusters of the round
  # before, 1 at first), their clients summing to 7, norm of the mean update <= the largest
  # norm > 0, and as many split rows as clusters added; in the warm-up one unsplit cluster
  [ "$(head -1 g1/gcfl.csv)" = "step,cluster,clients,mean_update_norm,max_update_norm,split,seconds" ] ||
    fail "gcfl.csv header: $(head -1 g1/gcfl.csv)"
  awk -F, 'NR == FNR { if (FNR > 1) ncl[$1] = $5; next }
           FNR > 1 { rows[$1]++; sum[$1] += $3; splits[$1] += $6
                     if ($4 > $5 + 1e-12 || $5 <= 0 || ($6 == 1 && $3 < 3)) bad = bad " " FNR }
           END { prev = 1
                 for (r = 1; r in ncl; r++) {
                   if (rows[r] != prev || sum[r] != 7 || splits[r] != ncl[r] - prev) bad = bad " r" r
                   prev = ncl[r] }
                 if (bad != "") { print "bad rows:" bad; exit 1 } }' g1/metrics.csv g1/gcfl.csv ||
    { cat g1/metrics.csv g1/gcfl.csv; fail "gcfl.csv does not match the clusters"; }
  for np in 2 4; do
    cmp <(cut -d, -f1-6 g1/gcfl.csv) <(cut -d, -f1-6 "g$np/gcfl.csv") ||
      fail "gcfl.csv: $np ranks differ from 1 rank"
  done
  [ "$(tail -n +2 warm/gcfl.csv | cut -d, -f1-3,6 | paste -sd' ')" = "1,0,7,0 2,0,7,0 3,0,7,0" ] ||
    { cat warm/gcfl.csv; fail "gcfl.csv in the warm-up: one cluster of 7, no split"; }
  stop_resume g1 gstop 2 1,2,5 # step, loss, clusters
  cmp <(cut -d, -f1-6 g1/gcfl.csv) <(cut -d, -f1-6 gstop/gcfl.csv) ||
    fail "gcfl.csv of the resumed run differs"
  if command -v gnuplot >/dev/null; then
    exp=$(cd "$(dirname "$0")/../../experiments/fedkalter" && pwd)
    /usr/bin/python3 "$exp/plots.py" --gcfl norms.png warm g1 >norms.log || fail "plots.py --gcfl"
    [ -s norms.png ] && grep -qx "warm: eps1 0.01, eps2 0.1: no split" norms.log &&
      grep -qx "g1: eps1 1e+09, eps2 0: first split at round 1, 4 clusters at the end" norms.log ||
      { cat norms.log; fail "plots.py --gcfl: the PNG and a line per run"; }
  fi
  ;;
gcflplus)
  rm -rf avg warm p1 p2 p4 gc pstop
  common=(--set run.plots=false --set data.graphs=40 --set model.hidden=16 --set train.rounds=6
          --set train.batch=8)
  run 2 avg --set model.method=fedavg --set train.rounds=3 || { cat avg.log; fail "fedavg"; }
  run 2 warm --set model.method=gcflplus --set train.rounds=3 || { cat warm.log; fail "gcflplus in its warm-up"; }
  cmp avg/clients.csv warm/clients.csv || fail "GCFL+ within its warm-up differs from FedAvg"
  forced=(--set train.gcfl_warmup=0 --set train.gcfl_eps1=1e9 --set train.gcfl_eps2=0)
  run 2 gc --set model.method=gcfl "${forced[@]}" || { cat gc.log; fail "gcfl"; }
  common+=(--set model.method=gcflplus --set train.gcfl_seq_length=2 "${forced[@]}")
  for np in 1 2 4; do
    run "$np" "p$np" || { cat "p$np.log"; fail "gcflplus with splits, $np ranks"; }
    cmp p1/clients.csv "p$np/clients.csv" || fail "gcflplus: $np ranks differ from 1 rank"
  done
  got=$(tail -n +2 p1/metrics.csv | cut -d, -f5 | paste -sd' ')
  [ "$got" = "1 2 2 3 3 4" ] || fail "gcflplus clusters per round: $got, want 1 2 2 3 3 4"
  grep -q "round 2: GCFL+ split 1 cluster(s) into 2" p1.log || fail "no GCFL+ split logged"
  ! cmp -s gc/clients.csv p1/clients.csv || fail "gcflplus equals gcfl"
  stop_resume p1 pstop 3 1,2,5 # step, loss, clusters
  ;;
oneds)
  rm -rf one o1 o2 obad onone omiss
  mkdir -p one/TOY # 60 graphs: triangles (class 0) and 4-paths (class 1), node labels 1..3
  node=0
  for g in $(seq 0 59); do
    b=$node
    if [ $((g % 2)) = 0 ]; then
      printf '%d, %d\n' $((b+1)) $((b+2)) $((b+2)) $((b+1)) $((b+2)) $((b+3)) $((b+3)) $((b+2)) \
        $((b+1)) $((b+3)) $((b+3)) $((b+1)) >>one/TOY/TOY_A.txt
      nn=3
    else
      printf '%d, %d\n' $((b+1)) $((b+2)) $((b+2)) $((b+1)) $((b+2)) $((b+3)) $((b+3)) $((b+2)) \
        $((b+3)) $((b+4)) $((b+4)) $((b+3)) >>one/TOY/TOY_A.txt
      nn=4
    fi
    for i in $(seq 1 "$nn"); do
      echo $((g + 1)) >>one/TOY/TOY_graph_indicator.txt
      echo $((1 + (g + i) % 3)) >>one/TOY/TOY_node_labels.txt
    done
    echo $((g % 2)) >>one/TOY/TOY_graph_labels.txt
    node=$((node + nn))
  done
  o=(--set data.setting=oneDS --set data.dir=one --set data.oneds=TOY --set train.rounds=2)
  for np in 1 2; do
    run "$np" "o$np" "${o[@]}" --set data.clients=4 || { cat "o$np.log"; fail "oneDS, $np ranks"; }
  done
  cmp o1/clients.csv o2/clients.csv || fail "oneDS: 1 and 2 ranks differ"
  [ "$(tail -n +2 o1/clients.csv | cut -d, -f2 | paste -sd' ')" = "12 12 12 12" ] ||
    fail "oneDS training graphs: $(cut -d, -f2 o1/clients.csv | paste -sd' '), want 12 each"
  grep -q "client 3 3-TOY on rank" o1.log || fail "oneDS client names"
  expect() { # expect CODE REGEX DIR ARGS...
    local code=$1 re=$2 dir=$3 rc=0
    shift 3
    run 2 "$dir" "$@" || rc=$?
    [ "$rc" -eq "$code" ] || { cat "$dir.log"; fail "$dir: exit $rc, expected $code"; }
    grep -Eq "$re" "$dir.log" || { cat "$dir.log"; fail "$dir: no message matching '$re'"; }
  }
  expect 65 "TOY, oneDS client [0-9]+ of 11': 5 graphs give an empty split" obad "${o[@]}" \
    --set data.clients=11
  expect 78 "data.oneds is required for data.setting = oneDS" onone --set data.setting=oneDS \
    --set data.dir=one
  expect 66 "NOPE_graph_labels.txt" omiss --set data.setting=oneDS --set data.dir=one \
    --set data.oneds=NOPE
  ;;
manyclients)
  rm -rf many
  run 2 many --set data.clients=40 --set data.graphs=10 --set model.hidden=8 --set train.rounds=1 \
    --set ckpt.at_end=false --set ckpt.every=0 ||
    { cat many.log; fail "40 clients"; }
  grep -q "ln R histograms only in kalter_logR_hist_long.csv: 40 clients" many.log ||
    { cat many.log; fail "no warning about the wide histogram file"; }
  [ ! -e many/kalter_logR_hist.csv ] || fail "kalter_logR_hist.csv written for 40 clients"
  # every client 0..39 has the same bins and its fractions sum to 1
  awk -F, 'NR > 1 { if (!($2 in n)) m++; s[$2] += $3; n[$2]++ }
           END { for (k = 0; k < 40; k++) { d = s[k] - 1; if (d < 0) d = -d
                   if (!(k in n) || n[k] != n[0] || d > 1e-6) bad = 1 }
                 exit bad || m != 40 }' many/kalter_logR_hist_long.csv ||
    fail "kalter_logR_hist_long.csv: not 40 clients with the same bins and fractions summing to 1"
  ;;
tufiles)
  rm -rf tu tu_ok tu_bad1 tu_bad2
  write_sm tu
  tu=(--set data.setting=SM --set data.dir=tu --set train.rounds=1)
  run 2 tu_ok "${tu[@]}" || { cat tu_ok.log; fail "SM on the generated TU files"; }
  [ "$(wc -l <tu_ok/clients.csv)" -eq 8 ] || fail "clients.csv should list 7 clients"
  echo "1, 4" >>tu/BZR/BZR_A.txt # node 1 (graph 1) to node 4 (graph 2)
  for np in 1 2; do
    rc=0
    run "$np" "tu_bad$np" "${tu[@]}" || rc=$?
    [ "$rc" -eq 65 ] || { cat "tu_bad$np.log"; fail "malformed BZR_A.txt on $np ranks: exit $rc, expected 65"; }
    grep -q "BZR_A.txt" "tu_bad$np.log" || { cat "tu_bad$np.log"; fail "the error does not name BZR_A.txt"; }
  done
  grep -q "rank 1 .*failed" tu_bad2.log || { cat tu_bad2.log; fail "2 ranks: not reported as rank 1's error"; }
  ;;
experiment)
  rm -rf xtu xout
  write_sm xtu
  exp=$(cd "$(dirname "$0")/../../experiments/fedkalter" && pwd)
  export FK_BIN=$exe FK_SEEDS="1 2" FK_NICE=0
  export FK_ARGS="--set train.rounds=4 --set train.eval_every=1 --set model.hidden=8 --set run.plots=false"
  bash "$exp/run.sh" xtu xout sm:fedstar sm:fedkalter >x1.log 2>&1 || { cat x1.log; fail "run.sh"; }
  [ "$(tail -n +2 xout/commands.tsv | cut -f1-3,5 | paste -sd' ')" = \
    "$(printf 'sm\tfedstar\t1\t0 sm\tfedkalter\t1\t0 sm\tfedstar\t2\t0 sm\tfedkalter\t2\t0')" ] ||
    { cat xout/commands.tsv; fail "commands.tsv: 4 runs, seed-major, exit 0"; }
  grep -q -- "--set model.method=fedkalter --set run.seed=2 --set run.dir=xout/sm-fedkalter-s2" \
    xout/commands.tsv || fail "commands.tsv does not record the command"
  bash "$exp/run.sh" xtu xout sm:fedstar sm:fedkalter >x2.log 2>&1 || { cat x2.log; fail "run.sh again"; }
  [ "$(grep -c 'done, skipped' x2.log)" -eq 4 ] && [ "$(wc -l <xout/commands.tsv)" -eq 5 ] ||
    { cat x2.log; fail "finished runs were not skipped"; }
  rc=0
  bash "$exp/run.sh" xtu xout sm:fedsage >x3.log 2>&1 || rc=$?
  [ "$rc" -eq 64 ] && grep -q "unknown method 'fedsage'" x3.log || { cat x3.log; fail "bad method: exit $rc"; }
  /usr/bin/python3 "$exp/table.py" xout >table.md || fail "table.py"
  grep -q "^| FedStar | 1,2 | " table.md && grep -q "^| Fed-Kalter | 1,2 | " table.md ||
    { cat table.md; fail "table rows"; }
  want=$(tail -n +2 xout/sm-fedstar-s1/clients.csv | cut -d, -f5 | paste -sd' ' |
         awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.2f", 100 * s / NF }')
  grep -q "^| FedStar | 1,2 | .* / " table.md && grep "^| FedStar" table.md | grep -q "| $want / " ||
    { cat table.md; fail "seed 1's client mean $want not in the FedStar row"; }
  grep -q "Fed-Kalter − FedStar, client mean, same seed: s1 .*, s2 " table.md || fail "difference line"
  # best validation, recomputed here: per run the first round of the highest val_acc, its test_acc
  best() { awk -F, 'NR > 1 && (NR == 2 || $3 > v) { v = $3; r = $1; t = $4 } END { print r, t }' \
           "xout/sm-$1-s$2/accuracy.csv"; }
  for m in fedstar fedkalter; do
    read -r r1 t1 <<<"$(best $m 1)"
    read -r r2 t2 <<<"$(best $m 2)"
    label=FedStar; [ $m = fedkalter ] && label=Fed-Kalter
    row=$(awk -v l="$label" -v r1="$r1" -v r2="$r2" -v a="$t1" -v b="$t2" 'BEGIN {
            printf "| %s | 1,2 | %d / %d | %.2f / %.2f | %.2f |", l, r1, r2, 100 * a, 100 * b,
                   (100 * a + 100 * b) / 2 }')
    grep -qF "$row" table.md || { cat table.md; fail "best-validation row: want '$row'"; }
  done
  # client_accuracy.csv: a row per client and evaluated round; its last round is clients.csv's,
  # its client mean accuracy.csv's
  for r in xout/sm-fedstar-s1 xout/sm-fedkalter-s2; do
    [ "$(tail -n +2 "$r/client_accuracy.csv" | wc -l)" -eq 28 ] || fail "$r: client_accuracy.csv rows"
    cmp <(awk -F, '$1 == 4 { print $2 "," $3 "," $4 "," $5 }' "$r/client_accuracy.csv") \
        <(tail -n +2 "$r/clients.csv" | cut -d, -f1,3-5) || fail "$r: last round differs from clients.csv"
    awk -F, 'NR == FNR { if (FNR > 1) for (q = 3; q <= 5; q++) s[$1, q] += $q / 7; next }
             FNR > 1 { for (q = 2; q <= 4; q++) if ((d = s[$1, q + 1] - $q) > 1e-8 || d < -1e-8) bad = 1 }
             END { exit bad }' "$r/client_accuracy.csv" "$r/accuracy.csv" ||
      fail "$r: client means of client_accuracy.csv differ from accuracy.csv"
  done
  # per-client best validation, recomputed here: per run and client the first round of its
  # highest val_acc and the test_acc there; per method the table.py row up to the per-seed means
  cbest() { awk -F, 'NR > 1 && (!($2 in v) || $4 > v[$2]) { v[$2] = $4; t[$2] = $5 }
                     END { for (k = 0; k < 7; k++) printf "%.17g ", 100 * t[k] }' \
            "xout/sm-$1-s$2/client_accuracy.csv"; }
  for m in fedstar fedkalter; do
    label=FedStar; [ $m = fedkalter ] && label=Fed-Kalter
    row=$(echo "$(cbest $m 1)" "$(cbest $m 2)" | awk -v l="$label" '{
            printf "| %s | 1,2 |", l; c1 = c2 = pm = 0
            for (k = 1; k <= 7; k++) { a = $k; b = $(k + 7); m = (a + b) / 2
              printf " %.2f |", m; c1 += a; c2 += b
              pm += sqrt(((a - m) ^ 2 + (b - m) ^ 2) / 2) }
            c1 /= 7; c2 /= 7; m = (c1 + c2) / 2
            printf " %.2f | %.2f | %.2f | %.2f / %.2f | - |", m, pm / 7,
                   sqrt(((c1 - m) ^ 2 + (c2 - m) ^ 2) / 2), c1, c2 }')
    sed -n '/at its own best validation round/,/^Fed-Kalter − FedStar/p' table.md | grep -qF "$row" ||
      { cat table.md; fail "per-client best-validation row: want '$row'"; }
  done
  grep -q "Fed-Kalter − FedStar, per-client best-validation test, client mean, same seed: s1 .*, s2 " \
    table.md || { cat table.md; fail "per-client best-validation difference line"; }
  # and on hand-made runs: a tie (earliest round), a best round in the middle, the std across
  # seeds, the difference per seed
  rm -rf xhand
  hand() { # hand RUN VAL,TEST... : clients.csv (7 clients at 50 %) and accuracy.csv (rounds 5, 10, ..)
    local dir=xhand/$1 step=0 vt
    shift
    mkdir -p "$dir"
    echo client,n_train,train_acc,val_acc,test_acc,param_hash_lo,param_hash_hi >"$dir/clients.csv"
    for k in 0 1 2 3 4 5 6; do echo "$k,10,0.5,0.5,0.5,0,0" >>"$dir/clients.csv"; done
    echo step,train_acc,val_acc,test_acc,seconds >"$dir/accuracy.csv"
    for vt in "$@"; do step=$((step + 5)); echo "$step,0.5,$vt,1" >>"$dir/accuracy.csv"; done
    touch "$dir.done"
  }
  hand sm-fedstar-s1 0.5,0.6 0.7,0.8 0.7,0.9
  hand sm-fedstar-s2 0.6,0.7 0.5,0.1 0.4,0.1
  hand sm-fedkalter-s1 0.1,0.1 0.2,0.2 0.9,0.3
  # per client (FedStar seed 1 only): client 0 ties at rounds 10 and 15 (test 20 %), the others
  # are flat (round 5, 40 %); seed 2 and Fed-Kalter have no client_accuracy.csv
  echo step,client,train_acc,val_acc,test_acc,seconds >xhand/sm-fedstar-s1/client_accuracy.csv
  for st in 5 10 15; do
    for k in 0 1 2 3 4 5 6; do
      if [ $k -eq 0 ]; then vt=$( [ $st -eq 5 ] && echo 0.5,0.1 || echo 0.7,0.$((st / 5))); else
        vt=0.5,$( [ $st -eq 5 ] && echo 0.4 || echo 0.9); fi
      echo "$st,$k,0.5,$vt,1" >>xhand/sm-fedstar-s1/client_accuracy.csv
    done
  done
  /usr/bin/python3 "$exp/table.py" xhand >hand.md || fail "table.py on hand-made runs"
  for want in "| FedStar | 1,2 | 10 / 5 | 80.00 / 70.00 | 75.00 | 5.00 | 50.00 |" \
              "| Fed-Kalter | 1 | 15 | 30.00 | 30.00 | - | 50.00 |" \
              "| FedStar | 1 | 20.00 | 40.00 | 40.00 | 40.00 | 40.00 | 40.00 | 40.00 | 37.14 | - | - | 37.14 | - | - |" \
              "Fed-Kalter − FedStar, best-validation test, same seed: s1 -50.00 (mean -50.00; Fed-Kalter ≥ FedStar on 0 of 1 seeds)"; do
    grep -qF "$want" hand.md || { cat hand.md; fail "hand-made runs: want '$want'"; }
  done
  if command -v gnuplot >/dev/null; then
    rm -rf xpng
    /usr/bin/python3 "$exp/plots.py" xout xpng >/dev/null || fail "plots.py"
    [ -s xpng/fedkalter_sm_test.png ] || fail "plots.py wrote no xpng/fedkalter_sm_test.png"
  fi
  ;;
*) fail "unknown mode $mode" ;;
esac
echo "check_fedkalter: $mode $method passed"
