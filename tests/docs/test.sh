#!/bin/sh
# The generated docs match the code (tests/docs/docs.py --check), and the
# check can fail: a copy of the docs with one stale line must be caught.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
verdict() {
    if [ "$1" -eq 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; cat "$tmp/out"; fi
}
python3 "$here/docs.py" --check "$top" >"$tmp/out" 2>&1
verdict $(( $? == 0 )) "the docs as committed: expected them to match the code"
mkdir -p "$tmp/tree" && cp -r "$top/docs" "$tmp/tree/" && ln -s "$top/bin" "$tmp/tree/bin"
sed -i 's/^| `model` | honoured |$/| `model` | ignored |/' "$tmp/tree/docs/api-fields.md"
python3 "$here/docs.py" --check "$tmp/tree" >"$tmp/out" 2>&1
[ $? -eq 1 ] && grep -q 'api-fields.md differs' "$tmp/out"
verdict $(( $? == 0 )) "a stale field row: expected the check to name docs/api-fields.md"
cp -r "$top/docs" "$tmp/tree/" && sed -i 's/^  --port N .*/  --port N   port (9000)/' "$tmp/tree/docs/serving.md"
python3 "$here/docs.py" --check "$tmp/tree" >"$tmp/out" 2>&1
[ $? -eq 1 ] && grep -q 'serving.md differs' "$tmp/out"
verdict $(( $? == 0 )) "a stale quoted --help line: expected the check to name docs/serving.md"
echo "docs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
