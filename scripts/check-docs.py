#!/usr/bin/env python3
"""check-docs.py — the docs name only what exists.

Every repository path that README.md and docs/*.md mention (`core/...`, `app/...`, `tests/...`,
`scripts/...`, `bench/...`, `backends/...`, `include/...`, `docs/...`, `shaders/...`, `.ci/...`),
every relative Markdown link (and its #anchor: a heading of the page it names), and every
`hx_`/`hx__` name must exist in the tree:

  - a path is a file or a folder of the tree; `core/vocab.{h,c}` is both files; `*` and a
    `<placeholder>` match anything (`app/cmd-<name>.c`) and must match at least one file; a
    test or benchmark named without its extension (`tests/test-backend-ops`) is its .c or .sh;
    paths under `../` (the shared data and design docs) or a build folder (`build/tests/...`)
    are not the tree's and are not checked; a path the tree's .gitignore names (what a build
    or an install makes, e.g. `tests/server/node_modules`) is accepted;
  - a name is an identifier some source file of the tree (anything but Markdown) spells;
    `hx_detok_*` and `hx_cmd_<name>` only need some identifier with that prefix.

The tree is the git checkout's tracked and new (not ignored) files, or every file outside
build*/ when ROOT is not a git checkout.

Usage: scripts/check-docs.py [ROOT]     (default: the repository holding this script)
Prints one line per stale mention, `FILE:LINE: no such path|link|name: X`, then a summary.
Exit status: 0 when everything exists, 1 otherwise.
"""
import fnmatch
import os
import re
import subprocess
import sys

ROOTS = ("core", "app", "tests", "scripts", "bench", "backends", "include", "docs", "shaders",
         ".ci")
# A path: a root, then path characters; `{a,b}` groups may hold commas. The character before
# must not continue a longer path or word (`../shared/docs/`, `build/tests/`, `$dir/tests/`).
PATH_RE = re.compile(r"(?<![\w./~$-])((?:%s)/(?:[\w.\-/*<>]|\{[\w.,\-*]*\})*)"
                     % "|".join(re.escape(r) for r in ROOTS))
LINK_RE = re.compile(r"\]\(([^)\s#]*)(?:#([^)\s]*))?\)")
NAME_RE = re.compile(r"(?<![\w])(hx__?[a-z0-9_]*[a-z0-9])(_?\*|_?<)?")
SOURCE_NAME_RE = re.compile(r"\bhx__?[a-z0-9_]*[a-z0-9]")


def in_git(root):
    return subprocess.run(["git", "-C", root, "rev-parse", "--is-inside-work-tree"],
                          capture_output=True).returncode == 0


def tree_files(root):
    if not in_git(root):
        return walk_files(root)
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], check=True, capture_output=True).stdout
        files = {f for f in out.decode().split("\0") if f}
        return {f for f in files if os.path.isfile(os.path.join(root, f))}
    except (OSError, subprocess.CalledProcessError):
        return walk_files(root)


def walk_files(root):
    files = set()
    for d, dirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if not (rel == "." and x.startswith("build")) and x != ".git"]
        for n in names:
            files.add(os.path.normpath(os.path.join(rel, n)))
    return files


def expand_braces(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    out = []
    for alt in m.group(1).split(","):
        out += expand_braces(p[:m.start()] + alt + p[m.end():])
    return out


class Tree:
    def __init__(self, root):
        self.root = root
        self.git = in_git(root)
        self.files = tree_files(root)
        self.dirs = set()
        for f in self.files:
            d = os.path.dirname(f)
            while d:
                self.dirs.add(d)
                d = os.path.dirname(d)
        self.names = set()
        for f in self.files:
            if f.endswith(".md"):
                continue
            try:
                with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                    self.names.update(SOURCE_NAME_RE.findall(fh.read()))
            except OSError:
                pass

    def has_path(self, p):
        p = p.rstrip("/")
        if not p:
            return True
        if "*" in p:
            return any(fnmatch.fnmatchcase(f, p) or fnmatch.fnmatchcase(f, p + "/*")
                       for f in self.files)
        if p in self.files or p in self.dirs:
            return True
        if p.split("/")[0] in ("tests", "bench", "app") and "." not in os.path.basename(p):
            if p + ".c" in self.files or p + ".sh" in self.files:
                return True
        return self.git and any(
            subprocess.run(["git", "-C", self.root, "check-ignore", "-q", "--no-index", q]
                           ).returncode == 0 for q in (p, p + "/"))

    def has_name(self, n, prefix):
        if not prefix:
            return n in self.names
        return any(x.startswith(n) for x in self.names)


def anchors(path):
    """The GitHub anchors of a Markdown page's headings."""
    out, fence = set(), False
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("```"):
                fence = not fence
            m = None if fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", m.group(1)).lower()
                out.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return out


def doc_files(tree):
    return sorted(f for f in tree.files
                  if f == "README.md" or (f.startswith("docs/") and f.endswith(".md")))


def check(root):
    tree = Tree(root)
    stale = []
    n_paths = n_names = n_links = 0
    docs = doc_files(tree)
    for doc in docs:
        with open(os.path.join(root, doc), encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        for i, line in enumerate(lines, 1):
            for m in PATH_RE.finditer(line):
                raw = m.group(1).rstrip(".-")
                n_paths += 1
                pats = [re.sub(r"<[^<>/]*>", "*", p) for p in expand_braces(raw)]
                for p in pats:
                    if not tree.has_path(p):
                        stale.append(f"{doc}:{i}: no such path: {p}")
            for m in LINK_RE.finditer(line):
                target, anchor = m.group(1), m.group(2)
                if re.match(r"[a-z]+:", target) or target.startswith("/"):
                    continue
                n_links += 1
                rel = doc
                if target:
                    rel = os.path.normpath(os.path.join(os.path.dirname(doc), target))
                if rel.startswith(".."):
                    continue  # outside the tree: the shared data and design docs
                if not tree.has_path(rel):
                    stale.append(f"{doc}:{i}: no such link: {target}")
                elif anchor and rel.endswith(".md") and anchor not in anchors(
                        os.path.join(root, rel)):
                    stale.append(f"{doc}:{i}: no such heading: {target}#{anchor}")
            for m in NAME_RE.finditer(line):
                n_names += 1
                if not tree.has_name(m.group(1), m.group(2) is not None):
                    stale.append(f"{doc}:{i}: no such name: {m.group(1)}")
    for s in stale:
        print(s)
    print(f"check-docs: {len(docs)} files, {n_paths} paths, {n_links} links, {n_names} names; "
          f"{len(stale)} stale")
    return 1 if stale else 0


if __name__ == "__main__":
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help")):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(check(sys.argv[1] if len(sys.argv) == 2 else os.path.dirname(here)))
