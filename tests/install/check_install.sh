#!/usr/bin/env bash
# check_install.sh CMAKE BUILD_DIR CC MPIEXEC EXAMPLE_DIR VERSION COMMIT PROGRAM... - install
# Tessera as a user does and use it from outside the tree:
#   1. cmake --install BUILD_DIR --prefix ./prefix: the library, the public headers under
#      include/tessera (internal *_impl.h not), every program, the CMake package and tessera.pc;
#   2. the installed programs run from the prefix (--version names the configured build);
#   3. EXAMPLE_DIR built with find_package(Tessera 0.1) -> Tessera::tessera, run on 2 ranks;
#      a request for a newer major version is refused;
#   4. the same example.c compiled and linked with CC and `pkg-config --cflags --libs tessera`
#      alone, run on 2 ranks; every installed header compiles on its own with those flags.
set -euo pipefail
cmake=$1 build=$2 cc=$3 mpiexec=$4 example=$5 version=$6 commit=$7
shift 7
fail() { echo "check_install: FAIL: $*" >&2; exit 1; }
rm -rf prefix consumer newer pc-build && mkdir newer pc-build
prefix=$PWD/prefix

"$cmake" --install "$build" --prefix "$prefix" >install.log || { cat install.log; fail "cmake --install"; }
libdir=$(cd "$prefix" && dirname "$(find . -name libtessera.a)" | sed "s|^\./||")
for f in "$libdir/libtessera.a" include/tessera/core/status.h include/tessera/io/rundir.h \
         include/tessera/par/coll.h "$libdir/cmake/Tessera/TesseraConfig.cmake" \
         "$libdir/cmake/Tessera/TesseraConfigVersion.cmake" "$libdir/pkgconfig/tessera.pc"; do
  [ -f "$prefix/$f" ] || fail "$f not installed"
done
[ -z "$(find "$prefix/include" -name '*_impl.h')" ] || fail "internal *_impl.h headers installed"
[ "$#" -gt 0 ] || fail "no programs given"
for p in "$@"; do
  [ -x "$prefix/bin/$p" ] || fail "program $p not installed in bin/"
  [ "$("$prefix/bin/$p" --version)" = "$p (Tessera $version, git $commit)" ] ||
    fail "installed $p --version: $("$prefix/bin/$p" --version)"
done
echo "installed into $prefix: $(find "$prefix" -type f | wc -l) files, programs: $*"

# find_package
"$cmake" -S "$example" -B consumer -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
  >consumer.log 2>&1 || { cat consumer.log; fail "configuring the find_package example"; }
"$cmake" --build consumer >>consumer.log 2>&1 || { cat consumer.log; fail "building the find_package example"; }
out=$("$mpiexec" -n 2 consumer/example --set example.tokens=5000) || fail "find_package example exited $?"
echo "find_package: $out"
grep -q "^example: Tessera $version, 2 ranks, 624 windows, token sum 268368 as expected$" <<<"$out" ||
  fail "find_package example printed '$out'"
cp "$example/example.c" newer/
sed 's/find_package(Tessera 0.1 REQUIRED)/find_package(Tessera 1.0 REQUIRED)/' \
    "$example/CMakeLists.txt" >newer/CMakeLists.txt
if "$cmake" -S newer -B newer/build -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
     >newer.log 2>&1; then
  fail "find_package(Tessera 1.0) accepted version $version"
fi
grep -q "TesseraConfig.cmake, version: $version" newer.log ||
  { cat newer.log; fail "find_package(Tessera 1.0) failed, but not on the version"; }

# pkg-config
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
[ "$(pkg-config --modversion tessera)" = "$version" ] || fail "pkg-config --modversion tessera"
# shellcheck disable=SC2046 # the flags are words
"$cc" -std=c11 -o pc-build/example "$example/example.c" $(pkg-config --cflags --libs tessera) ||
  fail "compiling with pkg-config --cflags --libs tessera"
out=$(cd pc-build && "$mpiexec" -n 2 ./example --set example.tokens=5000) || fail "pkg-config example exited $?"
echo "pkg-config: $out"
grep -q "^example: Tessera $version, 2 ranks, 624 windows, token sum 268368 as expected$" <<<"$out" ||
  fail "pkg-config example printed '$out'"
cflags=$(pkg-config --cflags tessera)
n=0
while IFS= read -r h; do
  # shellcheck disable=SC2086 # the flags are words
  printf '#include "%s"\n' "$h" | "$cc" -std=c11 -fsyntax-only -x c - $cflags ||
    fail "installed header $h does not compile on its own"
  n=$((n + 1))
done < <(cd "$prefix/include/tessera" && find . -name '*.h' | sed 's|^\./||' | sort)
echo "pkg-config: $n installed headers compile on their own"
echo "check_install: passed"
