#!/usr/bin/env python3
"""run_doc_example.py DOC CKPT - run the first ```python block of DOC (docs/checkpoints.md) with
sys.argv[1] = CKPT, so the documented h5py example is executed, not just shown. Exits 77
(skipped) when h5py is not installed."""
import re
import sys

try:
    import h5py  # noqa: F401
except ImportError as e:
    print(f"run_doc_example: skipped: {e}")
    sys.exit(77)

doc, ckpt = sys.argv[1], sys.argv[2]
blocks = re.findall(r"^```python\n(.*?)^```", open(doc, encoding="utf-8").read(), re.S | re.M)
if not blocks:
    sys.exit(f"run_doc_example: no python block in {doc}")
sys.argv = [doc, ckpt]
exec(compile(blocks[0], f"{doc} (python example)", "exec"), {"__name__": "__main__"})
print("run_doc_example: the example ran")
