#!/usr/bin/env bash
# experiments/moe/run.sh - the moe ablation (docs/moe.md, "The experiment"): one run per family x
# ablation x seed of experiments/moe/text.ini on the jobs/moe-text.sh corpus, one after the other,
# each recorded in OUT/commands.tsv (family, ablation, seed, exit code, seconds, the command) with
# its run directory OUT/<family>-<ablation>-s<seed>/; experiments/moe/table.py summarises them,
# experiments/moe/plots.py draws them.
#
# usage: experiments/moe/run.sh CORPUS_DIR OUT_DIR [FAMILY:ABLATION ...]
#   FAMILY: vanilla | deepseek;  ABLATION: lb | sp | cp | spcp | zspcp | ov | ova | cpid | cpdet |
#   z4spcp (the rows below; ova, Guo o+v with their automatic weight scaling, cpid, R_cp
#   identity-coupled alone, cpdet, R_cp alone with the deeper layer detached, and z4spcp, the
#   pair with a ten times smaller z-loss, are not in the default grid)
#   without FAMILY:ABLATION: every family x ablation. Runs that finished (exit 0, marked by
#   OUT/<run>.done) are skipped, so the grid can be filled over several sessions.
#   MOE_SEEDS="1 2 3"  seeds;  MOE_NP=2 ranks;  MOE_BIN=build/release/apps/moe/moe (copied to
#   OUT/bin/moe-<commit> and run from there, experiments/common.sh);
#   MOE_NICE=10  nice level;  MOE_MPIEXEC=mpiexec;  extra arguments for every run in MOE_ARGS
#   (e.g. "--set train.steps=200"; a later --set wins).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
corpus=$1 out=$2; shift 2
seeds=${MOE_SEEDS:-1 2 3}
np=${MOE_NP:-2}
bin=${MOE_BIN:-$root/build/release/apps/moe/moe}
[ -x "$bin" ] || bin=$root/build/ci/apps/moe/moe
[ -f "$corpus/train.h5" ] && [ -f "$corpus/val.h5" ] || {
  echo "run.sh: no $corpus/train.h5 and val.h5 (make them with jobs/moe-text.sh $corpus)" >&2; exit 66; }

# The families (the paper's two): vanilla top-k with load balancing; DeepSeek-style with a shared
# SwiGLU expert and aux-loss-free balancing (the selection bias) next to a small L_lb.
family_args() {
  case $1 in
  vanilla) echo "--set moe.shared_hidden=0 --set moe.bias_balance=false" ;;
  deepseek) echo "--set moe.shared_hidden=96 --set moe.bias_balance=true --set moe.bias_rate=1e-3" ;;
  *) echo "run.sh: unknown family '$1' (vanilla | deepseek)" >&2; return 64 ;;
  esac
}
# The ablations: L_lb alone, + R_sp, + R_cp, + both, + z-loss and both, Guo et al.'s
# orthogonality + variance losses (moe.lambda_ortho, moe.lambda_var; the values of docs/moe.md),
# fixed (ov) or as the targets of their automatic scaling (ova, moe.guo_autoscale), + R_cp
# identity-coupled (moe.cp_identity), + R_cp with the deeper layer's mass a constant in backward
# (moe.cp_detach), and both with a ten times smaller z-loss (lambda_z = 1e-4).
ablation_args() {
  case $1 in
  lb) echo "--set moe.lambda_sp=0 --set moe.lambda_cp=0 --set moe.lambda_z=0" ;;
  sp) echo "--set moe.lambda_sp=2e-3 --set moe.lambda_cp=0 --set moe.lambda_z=0" ;;
  cp) echo "--set moe.lambda_sp=0 --set moe.lambda_cp=1e-3 --set moe.lambda_z=0" ;;
  spcp) echo "--set moe.lambda_sp=2e-3 --set moe.lambda_cp=1e-3 --set moe.lambda_z=0" ;;
  zspcp) echo "--set moe.lambda_sp=2e-3 --set moe.lambda_cp=1e-3 --set moe.lambda_z=1e-3" ;;
  ov) echo "--set moe.lambda_sp=0 --set moe.lambda_cp=0 --set moe.lambda_z=0 --set moe.lambda_ortho=1e-4 --set moe.lambda_var=1e-2" ;;
  ova) echo "--set moe.lambda_sp=0 --set moe.lambda_cp=0 --set moe.lambda_z=0 --set moe.lambda_ortho=1e-4 --set moe.lambda_var=1e-2 --set moe.guo_autoscale=true" ;;
  cpid) echo "--set moe.lambda_sp=0 --set moe.lambda_cp=1e-3 --set moe.lambda_z=0 --set moe.cp_identity=true" ;;
  cpdet) echo "--set moe.lambda_sp=0 --set moe.lambda_cp=1e-3 --set moe.lambda_z=0 --set moe.cp_detach=true" ;;
  z4spcp) echo "--set moe.lambda_sp=2e-3 --set moe.lambda_cp=1e-3 --set moe.lambda_z=1e-4" ;;
  *) echo "run.sh: unknown ablation '$1' (lb | sp | cp | spcp | zspcp | ov | ova | cpid | cpdet | z4spcp)" >&2; return 64 ;;
  esac
}

grid=("$@")
if [ ${#grid[@]} -eq 0 ]; then
  for f in vanilla deepseek; do for a in lb sp cp spcp zspcp ov; do grid+=("$f:$a"); done; done
fi
# shellcheck source=experiments/common.sh
. "$root/experiments/common.sh"
exp_setup "$root" "$out" "$bin" moe
log=$out/commands.tsv
[ -f "$log" ] || printf 'family\tablation\tseed\texit\tseconds\tcommand\n' > "$log"
for cell in "${grid[@]}"; do
  fam=${cell%%:*} abl=${cell##*:}
  fargs=$(family_args "$fam") aargs=$(ablation_args "$abl")
  for seed in $seeds; do
    dir=$out/$fam-$abl-s$seed
    [ -f "$dir.done" ] && { echo "== $fam $abl seed $seed: done, skipped"; continue; }
    rm -rf "$dir" "$dir.log"
    # shellcheck disable=SC2206
    cmd=(nice -n "${MOE_NICE:-10}" "${MOE_MPIEXEC:-mpiexec}" -n "$np" "$exp_bin" --config "$root/experiments/moe/text.ini"
         --set data.train_file="$corpus/train.h5" --set data.eval_file="$corpus/val.h5"
         $fargs $aargs --set run.seed="$seed" --set run.dir="$dir" ${MOE_ARGS:-})
    echo "== $fam $abl seed $seed: ${cmd[*]}"
    exp_run "$log" "$dir" "$dir.log" "$fam" "$abl" "$seed" -- "${cmd[@]}"
  done
done
