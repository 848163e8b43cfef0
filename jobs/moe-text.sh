#!/usr/bin/env bash
# jobs/moe-text.sh - build the moe app's multi-domain text corpus (docs/moe.md, "Real text"):
# seven domains read where they are installed (nothing is copied into the checkout), each split
# into train/val/test by contiguous blocks of lines, a SentencePiece model trained on the
# training split only, and three HDF5 token streams with the domain of every token
# (tess-convert ids, io/tokens.h /domain).
#
# usage: jobs/moe-text.sh [OUT_DIR]          (default runs/moe-text)
#   MOE_TEXT_VOCAB=2048        SentencePiece vocabulary size (the app's data.vocab must match)
#   MOE_TEXT_MODEL=bpe         bpe | unigram
#   MOE_TEXT_BYTES=1000000     bytes kept per domain (blocks spread evenly over the source)
#   MOE_TEXT_BLOCK=40          lines per block; of every 20 kept blocks, block 18 goes to val,
#                              block 19 to test, the others to train
#   TESS_SHARED_DATA=DIR       the shared data folder holding text/tinyshakespeare/input.txt
#                              (default ../shared/data beside the checkout)
#   TESS_CONVERT=PATH          tess-convert (default build/ci, else build/release)
# Needs: sentencepiece (spm_train, spm_encode), bible-kjv + bible-kjv-text, dict-gcide,
# dict-foldoc, dict-jargon, fortunes (cluster/install-deps.sh --text), gzip, C headers in
# /usr/include and Python sources in /usr/lib/python3.*.
# Exit codes: 0 done; 77 a source or tool is missing (named on stderr); 65 a domain too small for
# its three splits; other: a failing tool.
# Output in OUT_DIR: spm.model, spm.vocab, train.h5, val.h5, test.h5 and manifest.txt (the
# domains, their sources, and bytes/lines/tokens per split).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/runs/moe-text}
vocab=${MOE_TEXT_VOCAB:-2048}
model=${MOE_TEXT_MODEL:-bpe}
keep=${MOE_TEXT_BYTES:-1000000}
block=${MOE_TEXT_BLOCK:-40}
shared=${TESS_SHARED_DATA:-$root/../shared/data}
convert=${TESS_CONVERT:-}
if [ -z "$convert" ]; then
  for c in "$root"/build/{ci,release}/apps/convert/tess-convert; do
    [ -x "$c" ] && { convert=$c; break; }
  done
fi

missing() { echo "moe-text: missing $1" >&2; exit 77; }
[ -n "$convert" ] && [ -x "$convert" ] || missing "tess-convert (build the project or set TESS_CONVERT)"
for tool in spm_train spm_encode bible zcat; do
  command -v "$tool" >/dev/null || missing "the command $tool (cluster/install-deps.sh --text)"
done
shakespeare=$shared/text/tinyshakespeare/input.txt
pydir=$(ls -d /usr/lib/python3.[0-9]* 2>/dev/null | sort -V | tail -n 1)
for f in "$shakespeare" /usr/share/dictd/gcide.dict.dz /usr/share/dictd/foldoc.dict.dz \
         /usr/share/dictd/jargon.dict.dz /usr/share/games/fortunes/fortunes /usr/include/stdio.h \
         "$pydir/os.py"; do
  [ -f "$f" ] || missing "$f"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LC_ALL=C; export LC_ALL

# One text per domain, in a fixed order (file lists sorted bytewise).
domains=(shakespeare bible dictionary computing fortunes c python)
cat "$shakespeare" > "$tmp/shakespeare.src"
bible -f gen1:1-rev22:21 | sed -E 's/^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ //' > "$tmp/bible.src"
zcat /usr/share/dictd/gcide.dict.dz > "$tmp/dictionary.src"
zcat /usr/share/dictd/foldoc.dict.dz /usr/share/dictd/jargon.dict.dz > "$tmp/computing.src"
find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' | sort | xargs cat \
  > "$tmp/fortunes.src"
find /usr/include -name '*.h' -type f | sort | xargs cat > "$tmp/c.src"
find "$pydir" -maxdepth 1 -name '*.py' -type f | sort | xargs cat > "$tmp/python.src"

# Split: blocks of $block lines; keep about $keep bytes per domain with blocks spread evenly over
# the source (block i is kept when floor((i+1) r) > floor(i r), r = kept fraction); kept block j
# goes to val when j % 20 == 18, to test when j % 20 == 19, else to train. A line ends with the
# user-defined piece <n>, so the token streams keep the line structure.
for d in "${domains[@]}"; do
  bytes=$(wc -c < "$tmp/$d.src")
  awk -v keep="$keep" -v bytes="$bytes" -v block="$block" -v pre="$tmp/$d" '
    BEGIN { r = keep / bytes; if (r > 1) r = 1 }
    {
      i = int((NR - 1) / block)
      if (int((i + 1) * r) == int(i * r)) next
      j = int(i * r); s = j % 20
      f = s == 18 ? "val" : (s == 19 ? "test" : "train")
      print $0 " <n>" > (pre "." f ".txt")
    }' "$tmp/$d.src"
  rm "$tmp/$d.src"
  for split in train val test; do
    [ -s "$tmp/$d.$split.txt" ] || { echo "moe-text: domain $d has no $split block" \
      "(raise MOE_TEXT_BYTES or lower MOE_TEXT_BLOCK)" >&2; exit 65; }
  done
done

train_files=()
for d in "${domains[@]}"; do train_files+=("$tmp/$d.train.txt"); done
cat "${train_files[@]}" > "$tmp/all.train.txt"
mkdir -p "$out"
spm_train --input="$tmp/all.train.txt" --model_prefix="$out/spm" --vocab_size="$vocab" \
  --model_type="$model" --character_coverage=1.0 --byte_fallback=true \
  --user_defined_symbols='<n>' --input_sentence_size=2000000 --shuffle_input_sentence=true \
  --num_threads=1 --minloglevel=2 --random_seed=1 > "$tmp/spm.log" 2>&1 \
  || { cat "$tmp/spm.log" >&2; exit 1; }

{
  echo "# moe-text corpus: jobs/moe-text.sh, vocabulary $vocab ($model), $keep bytes per domain,"
  echo "# blocks of $block lines (of every 20 kept blocks: 18 -> val, 19 -> test, others -> train)"
  echo "# domain source split bytes lines tokens"
} > "$out/manifest.txt"
sources=("$shakespeare" "bible-kjv-text (bible -f)" "dict-gcide (gcide.dict.dz)"
         "dict-foldoc + dict-jargon" "fortunes (/usr/share/games/fortunes)"
         "/usr/include/**/*.h" "$pydir/*.py")
for split in train val test; do
  args=()
  for i in "${!domains[@]}"; do
    d=${domains[$i]}
    spm_encode --model="$out/spm.model" --output_format=id < "$tmp/$d.$split.txt" \
      > "$tmp/$d.$split.ids"
    args+=("$d=$tmp/$d.$split.ids")
    echo "$d '${sources[$i]}' $split $(wc -c < "$tmp/$d.$split.txt") $(wc -l < "$tmp/$d.$split.txt") $(wc -w < "$tmp/$d.$split.ids")" \
      >> "$out/manifest.txt"
  done
  "$convert" ids --vocab-size "$vocab" --tokenizer "sentencepiece-$model" "$out/$split.h5" "${args[@]}"
done
echo "moe-text: wrote $out (train.h5 val.h5 test.h5 spm.model manifest.txt)"
