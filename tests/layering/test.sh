#!/bin/sh
# test.sh — the layering check passes on the tree, and fails on each planted
# include that breaks the rule (planted into a copy of the sources), naming
# the file that holds it; the call check passes on the built objects (under
# $BUILD, default build/) and fails on two planted files that call each other.
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build="$top/$build" ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

verdict() {  # verdict OK WHAT
    if [ "$1" = 1 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $2"
        cat "$tmp/out"
    fi
}

# plant FILE LINE: a fresh copy of the layers with LINE appended to FILE;
# returns the check's exit status on that copy.
plant() {
    rm -rf "$tmp/tree" && mkdir "$tmp/tree"
    (cd "$top" && cp -r kernels models tokenizer chat grammar engine server cli "$tmp/tree/")
    printf '%s\n' "$2" >>"$tmp/tree/$1"
    sh "$here/check.sh" "$tmp/tree" >"$tmp/out" 2>&1
}

expect_fail() {  # expect_fail FILE LINE WHAT
    plant "$1" "$2"
    st=$?
    [ $st -eq 1 ] && grep -q "^$1:[0-9]*: includes" "$tmp/out"
    verdict $(( $? == 0 )) "$3: expected the check to fail naming $1"
}

sh "$here/check.sh" "$top" >"$tmp/out" 2>&1
verdict $(( $? == 0 )) "the tree as it is: expected the check to pass"
expect_fail kernels/base.h '#include "engine/tram.h"' "kernels/ including engine/"
expect_fail models/model.h '#include "tokenizer/tokenizer.h"' "models/ including tokenizer/"
expect_fail grammar/grammar.h '#include "engine/tram.h"' "grammar/ including engine/"
expect_fail engine/scheduler.c '#include "cli/commands.h"' "engine/ including cli/"
expect_fail server/http.c '  #  include "cli/commands.h"' "the HTTP server including the CLI, spaced oddly"
expect_fail chat/jinja_eval.c '#include "grammar/grammar.h"' "chat/ including grammar/"
expect_fail kernels/cuda/ops.cu '#include "kernels/cpu/cpu_int8.h"' "one backend including the other"
plant server/http.c '#include "kernels/base.h"'
verdict $(( $? == 0 )) "a downward include: expected the check to pass"

# calls DIR...: the call check's exit status on the object files under DIRs.
calls() { python3 "$here/calls.py" "$@" >"$tmp/out" 2>&1; }

calls "$build/kernels" "$build/models" "$build/tokenizer" "$build/chat" "$build/grammar" "$build/engine" "$build/server" "$build/cli"
verdict $(( $? == 0 )) "the built objects: expected no two files to call each other"
[ -f "$build/engine/engine.o" ]
verdict $(( $? == 0 )) "the built objects: $build/engine/engine.o is missing (build first)"
mkdir "$tmp/obj"
printf 'int b(int);\nint a(int x) { return x ? b(x - 1) : 0; }\n' >"$tmp/obj/a.c"
printf 'int a(int);\nint b(int x) { return a(x); }\n' >"$tmp/obj/b.c"
printf 'int b(int);\nint c(int x) { return b(x); }\n' >"$tmp/obj/c.c"
(cd "$tmp/obj" && cc -c a.c b.c c.c)
calls "$tmp/obj"
# dots escaped and names anchored at "/": the temporary directory's random
# name may hold "c", any character, "o"
[ $? -eq 1 ] && grep -q '/a\.o <-> .*/b\.o' "$tmp/out" && ! grep -q '/c\.o' "$tmp/out"
verdict $(( $? == 0 )) "a.c and b.c calling each other: expected the call check to name them, and not c.c"
rm "$tmp/obj/a.o"
calls "$tmp/obj"
verdict $(( $? == 0 )) "c.c calling b.c alone: expected the call check to pass"

echo "layering: $passed passed, $failed failed"
[ $failed -eq 0 ]
