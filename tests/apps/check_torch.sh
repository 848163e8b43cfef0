#!/usr/bin/env bash
# check_torch.sh MPIEXEC TINYLM TESS_CKPT PYTHON SCRIPT - tinylm checkpoints in PyTorch: for the
#   default model (SwiGLU, RMSNorm) and the GELU/LayerNorm variant, tinylm writes its final
#   checkpoint and the logits of a held-out batch (train.logits_out), `tess-ckpt export --names
#   torch --split-qkv` writes safetensors, and torch_reference.py (SCRIPT) loads both the HDF5 and
#   the safetensors file into an equivalent torch.nn.Module and checks its logits against
#   Tessera's. Also: the Tessera-named export holds exactly the /params datasets, a bad export
#   option exits 64 naming it, and `tess-ckpt show` resolves an unambiguous suffix and refuses an
#   ambiguous one (64, listing the candidates). Exit 77 (skipped) when PYTHON lacks torch/h5py.
set -euo pipefail
mpiexec=$1 tinylm=$2 tool=$3 python=$4 script=$5
fail() { echo "check_torch: FAIL: $*" >&2; exit 1; }
"$python" -c "import torch, h5py, numpy" 2>/dev/null ||
  { echo "check_torch: SKIPPED ($python has no torch, h5py or numpy: apt-get install python3-torch python3-h5py)"; exit 77; }
rm -rf swiglu gelu
for variant in swiglu gelu; do
  opts=(--set train.steps=60 --set run.plots=false --set run.dir=$variant
        --set train.logits_out=$variant/logits.safetensors)
  [ "$variant" = gelu ] && opts+=(--set model.mlp=gelu --set model.norm=layernorm)
  "$mpiexec" -n 2 "$tinylm" "${opts[@]}" >$variant.log 2>&1 || { cat $variant.log; fail "$variant: tinylm"; }
  "$tool" export $variant/checkpoints $variant/model.safetensors --names torch --split-qkv \
    >>$variant.log 2>&1 || { cat $variant.log; fail "$variant: export"; }
  "$python" "$script" $variant/checkpoints/ckpt_00000060.h5 $variant/model.safetensors \
    $variant/logits.safetensors || fail "$variant: PyTorch disagrees with Tessera"
done

"$tool" export swiglu/checkpoints plain.safetensors >plain.log 2>&1 || { cat plain.log; fail "plain export"; }
"$python" - plain.safetensors swiglu/checkpoints/ckpt_00000060.h5 <<'PY' || fail "Tessera-named export"
import json, struct, sys
import h5py
blob = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
assert n % 8 == 0, f"header length {n} is not 8-byte aligned"
header = json.loads(blob[8:8 + n])
names = sorted(k for k in header if k != "__metadata__")
with h5py.File(sys.argv[2], "r") as f:
    want = sorted(f["params"].keys())
assert names == want, f"{names} != {want}"
assert header["__metadata__"]["app"] == "tinylm" and header["__metadata__"]["step"] == "60"
end = max(t["data_offsets"][1] for k, t in header.items() if k != "__metadata__")
assert 8 + n + end == len(blob), "data does not end where the offsets say"
print(f"plain export: {len(names)} tensors named as in /params, {len(blob)} bytes")
PY

rc=0
"$tool" export swiglu/checkpoints x.safetensors --names pytorch >bad.log 2>&1 || rc=$?
[ "$rc" -eq 64 ] && grep -q "export: unexpected '--names'" bad.log || { cat bad.log; fail "bad option: exit $rc"; }
"$tool" show swiglu/checkpoints 1.mlp.w_up >show.log 2>&1 && grep -q "^/params/layers.1.mlp.w_up: float32" show.log ||
  { cat show.log; fail "show by suffix"; }
rc=0
"$tool" show swiglu/checkpoints mlp.w_up >amb.log 2>&1 || rc=$?
[ "$rc" -eq 64 ] && grep -q "'mlp.w_up' is ambiguous .*: 2 datasets end with it (/params/layers.0.mlp.w_up, /params/layers.1.mlp.w_up)" amb.log ||
  { cat amb.log; fail "ambiguous suffix: exit $rc"; }
echo "check_torch: passed"
