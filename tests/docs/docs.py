#!/usr/bin/env python3
"""docs.py --write|--check [ROOT] -- the parts of the docs that are generated
from the code: docs/api-fields.md (`tram fields --markdown`) and every help
text quoted in a page under a marker line

    <!-- tram COMMAND [SUBCOMMAND] --help -->
    ```
    (the output of `bin/tram COMMAND [SUBCOMMAND] --help`)
    ```

--write rewrites them; --check prints a diff of each part that differs and
exits 1, so a page cannot drift from the code it quotes.  `make docs` writes,
`make test` checks (tests/docs/test.sh, which also plants a stale line to see
the check fail)."""
import difflib
import os
import re
import subprocess
import sys

MARKER = re.compile(r"^<!-- (tram(?: [a-z-]+)+ --help) -->\n```\n(.*?)^```\n", re.M | re.S)


def tram(root, args):
    exe = os.path.join(root, "bin", "tram")
    return subprocess.run([exe] + args, capture_output=True, text=True, check=True).stdout


def generated_pages(root):
    """{path: text it must have} for the pages generated whole."""
    return {os.path.join(root, "docs", "api-fields.md"): tram(root, ["fields", "--markdown"])}


def with_help_blocks(root, text):
    """text with every marked help block replaced by the command's --help."""
    def fill(m):
        out = tram(root, m.group(1).split()[1:])
        return "<!-- %s -->\n```\n%s```\n" % (m.group(1), out)
    return MARKER.sub(fill, text)


def expected(root):
    want = generated_pages(root)
    for base, _, files in os.walk(root):
        if any(skip in base for skip in ("/build", "/.venv", "/bench/peers", "/.git")):
            continue
        for name in files:
            path = os.path.join(base, name)
            if name.endswith(".md") and path not in want:
                text = open(path, encoding="utf-8").read()
                if MARKER.search(text):
                    want[path] = with_help_blocks(root, text)
    return want


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    root = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".")
    if mode not in ("--write", "--check"):
        sys.exit(__doc__)
    stale = 0
    for path, text in sorted(expected(root).items()):
        have = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if have == text:
            continue
        if mode == "--write":
            open(path, "w", encoding="utf-8").write(text)
            print("docs: wrote", os.path.relpath(path, root))
            continue
        stale = 1
        rel = os.path.relpath(path, root)
        sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), text.splitlines(True),
                                                   rel + " (committed)", rel + " (generated)"))
        print("docs: %s differs from what the code generates: run `make docs`" % rel)
    if mode == "--check" and not stale:
        print("docs: generated pages and quoted help texts match the code")
    sys.exit(stale)


if __name__ == "__main__":
    main()
