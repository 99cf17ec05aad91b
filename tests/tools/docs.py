#!/usr/bin/env python3
"""The docs' checks: docs/configuration.md's key table against the daemon's config table, and every
relative link of README.md and docs/*.md against the tree.

  docs.py write BIN      put BIN's output (tests/tools/config_doc) between the page's markers
  docs.py check BIN      fail when the committed table differs from BIN's, or a link points nowhere
  docs.py self-test BIN  check must refuse a planted stale table and a planted broken link

The table is generated so that it cannot drift from src/daemon/config.c; the text around the
markers is written by hand and left as it is."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

BEGIN = "<!-- generated: make docs -->"
END = "<!-- end of generated: make docs -->"
PAGE = os.path.join("docs", "configuration.md")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def generated(binary):
    return subprocess.run([binary], check=True, capture_output=True, text=True).stdout


def splice(text, table):
    """text with the part between BEGIN and END replaced by table; None when a marker is missing."""
    b, e = text.find(BEGIN), text.find(END)
    if b < 0 or e < b:
        return None
    return text[: b + len(BEGIN)] + "\n" + table + text[e:]


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    out, fenced = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                fenced = not fenced
            elif not fenced and line.startswith("#"):
                out.add(slug(line.lstrip("#")))
    return out


def broken_links(root):
    """Relative links of README.md and docs/*.md whose file (or Markdown heading) does not exist."""
    pages = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        pages += sorted(os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    bad = []
    for page in pages:
        fenced = False
        with open(page, encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                if fenced:
                    continue
                for target in LINK.findall(line):
                    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                        continue  # https:, mailto: ...
                    path, _, frag = target.partition("#")
                    dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                    where = f"{os.path.relpath(page, root)}:{no}: {target}"
                    if not os.path.exists(dest):
                        bad.append(f"{where}: no such file")
                    elif frag and dest.endswith(".md") and frag not in anchors(dest):
                        bad.append(f"{where}: no heading #{frag}")
    return bad


def check(root, table):
    """Problems found under root, as lines; none when the docs are in order."""
    problems = []
    page = os.path.join(root, PAGE)
    with open(page, encoding="utf-8") as f:
        text = f.read()
    want = splice(text, table)
    if want is None:
        problems.append(f"{PAGE}: the markers {BEGIN} and {END} are missing")
    elif want != text:
        problems.append(f"{PAGE} is stale: its key table differs from src/daemon/config.c's; "
                        "run `make docs` and commit the result")
    problems += [f"broken link: {b}" for b in broken_links(root)]
    return problems


def self_test(table):
    """check() must find a planted stale row and a planted broken link, and nothing in a copy."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy("README.md", tmp)
        shutil.copytree("docs", os.path.join(tmp, "docs"))
        for name in os.listdir("."):  # what the pages link to, as it is
            if name not in ("README.md", "docs"):
                os.symlink(os.path.abspath(name), os.path.join(tmp, name))
        page = os.path.join(tmp, PAGE)
        with open(page, encoding="utf-8") as f:
            text = splice(f.read(), table) or ""
        with open(page, "w", encoding="utf-8") as f:
            f.write(text)  # fresh, so that only what is planted below can fail
        first = check(tmp, table)
        if first:
            return ["self-test: the unchanged copy already fails:"] + first
        with open(page, "w", encoding="utf-8") as f:
            f.write(splice(text, table.replace("|\n", "| planted |\n", 1)))
        out = [] if any("stale" in p for p in check(tmp, table)) else ["self-test: a stale table passed"]
        with open(page, "w", encoding="utf-8") as f:
            f.write(text + "\n[planted](no-such-page.md)\n")
        if not any("no-such-page.md" in p for p in check(tmp, table)):
            out.append("self-test: a broken link passed")
        return out


def main(argv):
    if len(argv) != 3 or argv[1] not in ("write", "check", "self-test"):
        sys.stderr.write(__doc__)
        return 2
    table = generated(argv[2])
    if argv[1] == "write":
        with open(PAGE, encoding="utf-8") as f:
            text = f.read()
        new = splice(text, table)
        if new is None:
            sys.stderr.write(f"{PAGE}: the markers {BEGIN} and {END} are missing\n")
            return 1
        if new != text:
            with open(PAGE, "w", encoding="utf-8") as f:
                f.write(new)
            print(f"wrote {PAGE}")
        return 0
    problems = check(".", table) if argv[1] == "check" else self_test(table)
    for p in problems:
        sys.stderr.write(f"docs: {p}\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
