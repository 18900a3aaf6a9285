#!/usr/bin/env python3
"""check-sh-calls.py — every command a shell test runs by name exists (scripts/lint.sh, 5).

A test that calls a helper function it lost in a refactor, or misspelt, prints "command not
found" and carries on; tests/lib.sh's command_not_found_handle fails such a call when it runs,
and this check finds it on every branch, also those the machine running the test never
takes (a helper called only where a Vulkan device exists).

Usage: scripts/check-sh-calls.py [ROOT] [FILE...]  (default: ROOT's tests/*.sh and tests/*/*.sh)

It reads each file with a small shell tokenizer (quotes, comments, here-documents, $(...),
backquotes, [[ ]], (( )), case patterns, for lists, assignments, redirections) and takes the
first word of every simple command, at the top level and inside $(...) and backquotes. A name
written out literally (no $, quotes or /) must be one of: a function the file defines, a
function of tests/lib.sh (when the file mentions lib.sh), a bash builtin or keyword, a
command on this machine's PATH, or a tool the file probes for on a line of its own (`command
-v NAME`, `which NAME`, `type -P NAME`, `hash NAME`): an optional tool the test only runs when
it is installed. Not seen: words in strings (eval, bash -c, check's conditions), commands run
through another (env X, timeout N X, xargs X), and here-document bodies (data: Python,
JavaScript). Exit status 1 and one line per unknown name, FILE:LINE: NAME.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_.+:-]*$')
ASSIGN = re.compile(r'[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=')
FUNC_DEF = re.compile(r'(?:^|[;&|{(\s])(?:function\s+)?([A-Za-z_][A-Za-z0-9_.:-]*)\s*\(\s*\)',
                      re.M)
SOURCED = re.compile(r'^\s*(?:\.|source)\s+.*?([A-Za-z0-9_.-]+\.sh)\b', re.M)
FUNC_KW = re.compile(r'^\s*function\s+([A-Za-z_][A-Za-z0-9_.:-]*)', re.M)
PROBE = re.compile(r'(?:command\s+-v|which|type\s+-P|hash)\s+(.*)')
STARTS = {'if', 'then', 'else', 'elif', 'do', 'while', 'until', '!', 'time', '{', '}', 'fi',
          'done', 'esac'}


class Scanner:
    """Collects (line, word) for the first word of each simple command in a shell text."""

    def __init__(self, text, line=1):
        self.s, self.i, self.line = text, 0, line
        self.calls = []
        self.heredocs = []  # delimiters (and strip-tabs) waiting for the end of this line

    def peek(self, k=0):
        j = self.i + k
        return self.s[j] if j < len(self.s) else ''

    def adv(self, n=1):
        for _ in range(n):
            if self.i < len(self.s) and self.s[self.i] == '\n':
                self.line += 1
            self.i += 1

    def skip_to(self, close):  # past the first `close` at the top level
        j = self.s.find(close, self.i)
        j = len(self.s) if j < 0 else j + len(close)
        while self.i < j:
            self.adv()

    def balanced(self, open_c, close_c):  # self.i just past the opening character
        depth = 1
        while self.i < len(self.s) and depth:
            c = self.peek()
            if c == '\\':
                self.adv(2)
                continue
            if c == "'" and open_c != '{':
                self.adv()
                self.skip_to("'")
                continue
            if c == open_c:
                depth += 1
            elif c == close_c:
                depth -= 1
            self.adv()

    def subst(self):  # self.i just past "$(" : a command substitution, scanned as commands
        start, line = self.i, self.line
        self.balanced('(', ')')
        inner = Scanner(self.s[start:self.i - 1], line)
        inner.run()
        self.calls += inner.calls

    def dquote(self):  # self.i just past the opening "
        while self.i < len(self.s):
            c = self.peek()
            if c == '\\':
                self.adv(2)
            elif c == '"':
                self.adv()
                return
            elif c == '$' and self.peek(1) == '(' and self.peek(2) != '(':
                self.adv(2)
                self.subst()
            elif c == '`':
                self.adv()
                self.backquote()
            else:
                self.adv()

    def backquote(self):  # self.i just past the opening `
        start, line = self.i, self.line
        while self.i < len(self.s) and self.peek() != '`':
            self.adv(2 if self.peek() == '\\' else 1)
        inner = Scanner(self.s[start:self.i], line)
        inner.run()
        self.calls += inner.calls
        self.adv()

    def word(self):
        """Reads one word; returns (text, literal): literal when it has no quote or expansion."""
        out, literal = [], True
        while self.i < len(self.s):
            c = self.peek()
            if c in ' \t\n;&|<>' or (c in '()' and not (c == '(' and out and
                                                     ASSIGN.fullmatch(''.join(out)))):
                break
            if c == '\\':
                if self.peek(1) == '\n':
                    self.adv(2)
                    continue
                out.append(self.peek(1))
                self.adv(2)
                literal = False
            elif c == "'":
                self.adv()
                start = self.i
                self.skip_to("'")
                out.append(self.s[start:self.i - 1])
                literal = False
            elif c == '(' and out and ASSIGN.fullmatch(''.join(out)):  # NAME=(array)
                self.adv()
                self.balanced('(', ')')
                literal = False
            elif c == '"':
                self.adv()
                self.dquote()
                literal = False
            elif c == '`':
                self.adv()
                self.backquote()
                literal = False
            elif c == '$':
                literal = False
                if self.peek(1) == '(' and self.peek(2) == '(':
                    self.adv(3)
                    self.balanced('(', ')')
                    self.adv()
                elif self.peek(1) == '(':
                    self.adv(2)
                    self.subst()
                elif self.peek(1) == '{':
                    self.adv(2)
                    self.balanced('{', '}')
                elif self.peek(1) == "'":
                    self.adv(2)
                    while self.i < len(self.s) and self.peek() != "'":
                        self.adv(2 if self.peek() == '\\' else 1)
                    self.adv()
                else:
                    self.adv()
            else:
                out.append(c)
                self.adv()
        return ''.join(out), literal

    def newline(self):
        self.adv()
        for delim, strip in self.heredocs:
            while self.i < len(self.s):
                end = self.s.find('\n', self.i)
                end = len(self.s) if end < 0 else end
                text = self.s[self.i:end]
                self.adv(end - self.i + 1)
                if (text.lstrip('\t') if strip else text) == delim:
                    break
        self.heredocs = []

    def run(self):
        cmd, mode = True, None  # mode: None, 'for' (until do), 'case' (word, in), 'pat'
        while self.i < len(self.s):
            c = self.peek()
            if c in ' \t':
                self.adv()
            elif c == '\n':
                self.newline()
                if mode not in ('pat', 'case'):
                    cmd = mode is None
            elif c == '#' and (self.i == 0 or self.s[self.i - 1] in ' \t\n;&|()'):
                while self.i < len(self.s) and self.peek() != '\n':
                    self.adv()
            elif c == '\\' and self.peek(1) == '\n':
                self.adv(2)
            elif c in ';&|':
                op = c
                self.adv()
                while self.peek() in ';&|' and self.peek():
                    op += self.peek()
                    self.adv()
                if mode == 'case' or op in (';;', ';&', ';;&'):
                    mode, cmd = ('pat', False) if op in (';;', ';&', ';;&') else (mode, cmd)
                    continue
                if op == '&' and self.peek() == '>':  # &> redirection
                    self.adv()
                    self.word_after_redirect()
                    continue
                cmd = mode is None
            elif c == '(':
                self.adv()
                if self.peek() == '(':  # (( arithmetic ))
                    self.adv()
                    self.balanced('(', ')')
                    self.adv()
                    cmd = False
                elif mode != 'pat':
                    cmd = True
            elif c == ')':
                self.adv()
                if mode == 'pat':
                    mode, cmd = None, True
            elif c in '<>':
                if self.s.startswith('<<<', self.i):
                    self.adv(3)
                    self.word_after_redirect()
                elif self.s.startswith('<<', self.i):
                    self.adv(2)
                    strip = self.peek() == '-'
                    if strip:
                        self.adv()
                    while self.peek() in ' \t':
                        self.adv()
                    delim, _ = self.word()
                    self.heredocs.append((delim, strip))
                elif self.s.startswith('<(', self.i) or self.s.startswith('>(', self.i):
                    self.adv(2)
                    self.subst()
                else:
                    self.adv()
                    if self.peek() in '>&|':
                        self.adv()
                    self.word_after_redirect()
            else:
                line = self.line
                w, literal = self.word()
                if not w and literal:
                    self.adv()
                    continue
                if mode == 'pat':
                    if w == 'esac':
                        mode, cmd = None, False
                    continue
                if mode == 'case':
                    if w == 'in':
                        mode = 'pat'
                    continue
                if mode == 'for':
                    if w == 'do':
                        mode, cmd = None, True
                    continue
                if not cmd:
                    continue
                if w == '[[':
                    self.skip_to(']]')
                    cmd = False
                elif w in ('for', 'select'):
                    mode = 'for'
                elif w == 'case':
                    mode = 'case'
                elif w == 'function':
                    self.word_after_redirect()
                elif w in STARTS or ASSIGN.match(w):
                    pass
                else:
                    if w and self.rest_is_def():
                        cmd = False
                        continue
                    if literal:
                        self.calls.append((line, w))
                    cmd = False

    def word_after_redirect(self):
        while self.peek() in ' \t':
            self.adv()
        self.word()

    def rest_is_def(self):  # `name ()` or `name()`: a definition, not a call
        return re.match(r'\s*\(\s*\)', self.s[self.i:]) is not None


def shell_names():
    out = subprocess.run(['bash', '-c', 'compgen -b; compgen -k'], capture_output=True,
                         text=True).stdout
    return set(out.split())


def defined(text):
    return set(FUNC_DEF.findall(text)) | set(FUNC_KW.findall(text))


def probed(text):
    """The tools a file probes for: the words after `command -v` (up to an operator or a
    redirection), or, where it probes a variable (`for t in curl node; do command -v $t`),
    every word of that line, the loop's list included."""
    names = set()
    for line in text.splitlines():
        for m in PROBE.finditer(line):
            words = re.split(r'[|&;<>()`]', m.group(1), maxsplit=1)[0].split()
            if any(w.startswith('$') for w in words):
                names |= set(re.findall(r'[A-Za-z_][A-Za-z0-9_.+-]*', line))
            else:
                names |= {w for w in words if not w.startswith('-')}
    return names


def check(path, rel, known, lib):
    text = open(path, encoding='utf-8', errors='replace').read()
    ok = known | defined(text) | probed(text)
    if 'lib.sh' in text:
        ok |= lib
    for name in SOURCED.findall(text):  # helpers of a file it sources next to it
        other = os.path.join(os.path.dirname(path), name)
        if os.path.exists(other):
            ok |= defined(open(other, encoding='utf-8', errors='replace').read())
    sc = Scanner(text)
    sc.run()
    bad = []
    for line, w in sc.calls:
        if not NAME.match(w) or w in ok or shutil.which(w):
            continue
        bad.append('%s:%d: %s: not a function of the file%s, a bash builtin, a command on '
                   'PATH or a tool it probes for with command -v' %
                   (rel, line, w, ' or of tests/lib.sh' if 'lib.sh' in text else ''))
    return bad


def main():
    args = sys.argv[1:]
    root = args.pop(0) if args and os.path.isdir(args[0]) else \
        os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    files = args or sorted(glob.glob(os.path.join(root, 'tests', '*.sh')) +
                           glob.glob(os.path.join(root, 'tests', '*', '*.sh')))
    libp = os.path.join(root, 'tests', 'lib.sh')
    lib = defined(open(libp).read()) if os.path.exists(libp) else set()
    known = shell_names()
    bad = []
    for f in files:
        bad += check(f, os.path.relpath(f, root), known, lib)
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
