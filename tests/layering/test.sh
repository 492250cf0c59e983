#!/bin/sh
# test.sh — the layering check passes on the tree, and fails on each planted
# include that breaks the rule (planted into a copy of the sources), naming
# the file that holds it.
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
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
    (cd "$top" && cp -r kernels models tokenizer engine server "$tmp/tree/")
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
expect_fail engine/scheduler.c '#include "server/cli/commands.h"' "engine/ including server/"
expect_fail server/http.c '  #  include "server/cli/commands.h"' "the HTTP server including the CLI, spaced oddly"
expect_fail kernels/cuda/ops.cu '#include "kernels/cpu/int8.h"' "one backend including the other"
plant server/http.c '#include "kernels/base.h"'
verdict $(( $? == 0 )) "a downward include: expected the check to pass"

echo "layering: $passed passed, $failed failed"
[ $failed -eq 0 ]
