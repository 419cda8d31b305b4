#!/usr/bin/env python3
"""Provenance check: our prose must be our own (issue 18).

Extracts every string literal and comment of 8 words or more from the Rust sources under
src/ and adapters/, cuts each into 7-word shingles (lowercase, punctuation and format
placeholders dropped) and looks them up in the strings and comments of the Python Hermes
Agent's own .py files (the hermes-agent distribution that .ci/python-reference installs,
not its dependencies). Any shared shingle is a finding unless .ci/provenance-allowlist
covers it with a stated interop reason. Exit status: 0 clean, 1 findings or stale allowlist
entries, 2 bad usage or a missing reference.

Usage: .ci/provenance.py [--reference VENV_OR_SITE_PACKAGES] [--allowlist FILE]
The reference defaults to $HERMES_PYTHON's virtualenv, else target/hermes-py.
Standard library only, so CI needs nothing beyond python3.
"""

import argparse
import ast
import bisect
import fnmatch
import glob
import io
import os
import re
import sys
import tokenize

SHINGLE = 7
MIN_WORDS = 8
ROOTS = ("src", "adapters")

WORD = re.compile(r"\w+")
# Format placeholders carry no prose and differ between the languages (`{}` against
# `{session_id}`, `%s`), so both sides drop them before splitting into words.
PLACEHOLDER = re.compile(r"\{[^{}\s]*\}|%(?:\([a-z_]+\))?[sdrif]")


def words_with_lines(text, lines):
    """Splits text into normalised words, each with the source line of its first char."""
    out = []
    masked = PLACEHOLDER.sub(lambda m: " " * len(m.group(0)), text)
    for m in WORD.finditer(masked.lower()):
        out.append((m.group(0), lines[m.start()] if lines else 0))
    return out


# ---------------------------------------------------------------- Rust side


class RustText:
    """One unit of prose: a string literal (or several concatenated) or a comment block."""

    def __init__(self, path, kind):
        self.path = path
        self.kind = kind
        self.chars = []
        self.lines = []

    def add(self, text, line):
        self.chars.append(text)
        self.lines.extend([line] * len(text))

    def text(self):
        return "".join(self.chars)


RUST_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": " ", "\\": "\\", '"': '"', "'": "'"}


def rust_units(path, src):
    """Yields the string literals and comments of one Rust file as RustText units.

    Literals separated only by whitespace, commas or `+` (the pieces of a `concat!` or of
    an array of lines) form one unit; so do consecutive line comments of the same kind.
    """
    starts = [0] + [i + 1 for i, c in enumerate(src) if c == "\n"]

    def line_of(i):
        return bisect.bisect_right(starts, i)

    units = []
    last_string_end = None  # index just past the previous string literal
    last_comment = None  # (kind, line) of the previous line comment
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "/" and src.startswith("//", i):
            end = src.find("\n", i)
            end = n if end < 0 else end
            body = src[i + 2 : end]
            kind = "//"
            if body.startswith("!") or (body.startswith("/") and not body.startswith("//")):
                kind += body[0]
                body = body[1:]
            line = line_of(i)
            joined = (
                last_comment is not None
                and last_comment[0] == kind
                and last_comment[1] == line - 1
                and units
                and units[-1].kind == kind
            )
            if not joined:
                units.append(RustText(path, kind))
            else:
                units[-1].add(" ", line)
            units[-1].add(body, line)
            last_comment = (kind, line)
            i = end
            continue
        if c == "/" and src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            unit = RustText(path, "/*")
            for k in range(i + 2, max(i + 2, j - 2)):
                unit.add(src[k], line_of(k))
            units.append(unit)
            i = j
            continue
        raw = re.match(r'(?:br|r|cr)(#*)"', src[i:i + 260]) if c in "bcr" else None
        if raw and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            hashes = raw.group(1)
            body_start = i + raw.end()
            close = src.find('"' + hashes, body_start)
            close = n if close < 0 else close
            unit = string_unit(units, path, src, i, last_string_end)
            for k in range(body_start, close):
                unit.add(src[k], line_of(k))
            i = close + 1 + len(hashes)
            last_string_end = i
            continue
        prefixed = c in "bc" and src.startswith('"', i + 1)
        if (c == '"' or prefixed) and (
            c == '"' or i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")
        ):
            j = i + (2 if prefixed else 1)
            unit = string_unit(units, path, src, i, last_string_end)
            while j < n and src[j] != '"':
                if src[j] == "\\" and j + 1 < n:
                    e = src[j + 1]
                    if e == "\n":  # line continuation: skip the newline and the indent
                        j += 2
                        while j < n and src[j] in " \t\r\n":
                            j += 1
                        unit.add(" ", line_of(j))
                        continue
                    if e == "u":
                        m = re.match(r"\\u\{([0-9a-fA-F_]+)\}", src[j:j + 12])
                        if m:
                            unit.add(chr(int(m.group(1).replace("_", ""), 16)), line_of(j))
                            j += m.end()
                            continue
                    if e == "x":
                        unit.add(chr(int(src[j + 2:j + 4], 16)), line_of(j))
                        j += 4
                        continue
                    unit.add(RUST_ESCAPES.get(e, e), line_of(j))
                    j += 2
                    continue
                unit.add(src[j], line_of(j))
                j += 1
            i = j + 1
            last_string_end = i
            continue
        if c == "'":
            # A char literal ('a', '\n', '"') or a lifetime ('a): skip the former whole so
            # that a quote inside it does not open a string.
            if src.startswith("\\", i + 1):
                close = src.find("'", i + 3)
                i = (close + 1) if close > 0 else n
                continue
            if i + 2 < n and src[i + 2] == "'":
                i += 3
                continue
            i += 1
            continue
        i += 1
    return [u for u in units if u.chars]


def string_unit(units, path, src, start, last_string_end):
    """The unit a string literal starting at `start` belongs to: the previous literal's
    when only whitespace, commas or `+` separate them, else a new one."""
    if (
        last_string_end is not None
        and units
        and units[-1].kind == '"'
        and re.fullmatch(r"[\s,+]*", src[last_string_end:start])
    ):
        units[-1].add(" ", 0)
        return units[-1]
    units.append(RustText(path, '"'))
    return units[-1]


def rust_files(repo):
    for root in ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(repo, root)):
            dirnames[:] = sorted(d for d in dirnames if d != "target")
            for name in sorted(filenames):
                if name.endswith(".rs"):
                    yield os.path.join(dirpath, name)


# ---------------------------------------------------------------- Python side


def python_texts(src):
    """Yields (line, text) for every string constant (f-strings with their holes blanked,
    implicit concatenation already joined by the parser) and comment block of a file."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        tree = None
    if tree is not None:
        in_fstring = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                parts = []
                for value in node.values:
                    in_fstring.add(id(value))
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        parts.append(value.value)
                    else:
                        parts.append(" ")
                yield node.lineno, "".join(parts)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in in_fstring:
                    yield node.lineno, node.value
    block, block_line, prev_line = [], 0, -2
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type != tokenize.COMMENT:
                continue
            line = tok.start[0]
            if line != prev_line + 1 and block:
                yield block_line, " ".join(block)
                block = []
            if not block:
                block_line = line
            block.append(tok.string.lstrip("#"))
            prev_line = line
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    if block:
        yield block_line, " ".join(block)


def reference_files(reference):
    """The .py files of the hermes-agent distribution, from its RECORD."""
    candidates = [reference] + glob.glob(os.path.join(reference, "lib", "python*", "site-packages"))
    for site in candidates:
        records = glob.glob(os.path.join(site, "hermes_agent-*.dist-info", "RECORD"))
        if records:
            with open(records[0], encoding="utf-8") as f:
                paths = [line.split(",")[0] for line in f]
            return site, sorted(p for p in paths if p.endswith(".py"))
    return None, []


# ---------------------------------------------------------------- allowlist


def load_allowlist(path):
    """Entries `path-glob | words | reason`, one per line; `#` starts a comment line.
    `words` may instead be a class of string literal: `<sql>`, `<regex>` or `<string>`."""
    entries, errors = [], []
    if not os.path.exists(path):
        return entries, errors
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split("|")]
            if len(parts) != 3 or not all(parts):
                errors.append(f"{path}:{number}: want `path-glob | words | reason`")
                continue
            words = " ".join(w for w, _ in words_with_lines(parts[1], None))
            cls = parts[1] if parts[1] in ("<sql>", "<regex>", "<string>") else None
            entries.append({"glob": parts[0], "words": f" {words} ", "class": cls,
                            "reason": parts[2],
                            "line": number, "used": False})
    return entries, errors


SQL_START = re.compile(
    r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|WITH|PRAGMA|ALTER|DROP|REPLACE)\b")
REGEX_SYNTAX = re.compile(r"\\[sbwdSBWD]|\(\?[a-zA-Z:=!<]|\[\^|\[[^\]]*\\x[0-9a-fA-F]{2}-")


def literal_class(kind, text):
    """The classes an allowlist entry can name instead of words: `<sql>` (a statement
    against the shared state.db), `<regex>` (a pattern) and `<string>` (any literal)."""
    if kind != '"':
        return set()
    classes = {"<string>"}
    if SQL_START.match(text):
        classes.add("<sql>")
    if REGEX_SYNTAX.search(text):
        classes.add("<regex>")
    return classes


def allowed(entries, path, run_words, classes):
    needle = " " + " ".join(run_words) + " "
    for entry in entries:
        if not fnmatch.fnmatch(path, entry["glob"]):
            continue
        if entry["class"] in classes or (not entry["class"] and needle in entry["words"]):
            entry["used"] = True
            return True
    return False


# ---------------------------------------------------------------- main


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_ref = os.path.join(repo, "target", "hermes-py")
    if os.environ.get("HERMES_PYTHON"):
        default_ref = os.path.dirname(os.path.dirname(os.environ["HERMES_PYTHON"]))
    parser.add_argument("--reference", default=default_ref)
    parser.add_argument("--allowlist", default=os.path.join(repo, ".ci", "provenance-allowlist"))
    args = parser.parse_args()

    site, ref_files = reference_files(args.reference)
    if not ref_files:
        print(f"provenance: no hermes-agent RECORD under {args.reference}; "
              "run `bash .ci/python-reference` first", file=sys.stderr)
        return 2
    entries, errors = load_allowlist(args.allowlist)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2

    # Our side first: it is small, so the reference can be streamed against it.
    units = []
    shingles = {}
    for path in rust_files(repo):
        with open(path, encoding="utf-8") as f:
            src = f.read()
        rel = os.path.relpath(path, repo)
        for unit in rust_units(rel, src):
            words = words_with_lines(unit.text(), unit.lines)
            if len(words) < MIN_WORDS:
                continue
            units.append((rel, words, literal_class(unit.kind, unit.text())))
            for k in range(len(words) - SHINGLE + 1):
                shingles.setdefault(" ".join(w for w, _ in words[k:k + SHINGLE]), None)

    for ref in ref_files:
        try:
            with open(os.path.join(site, ref), encoding="utf-8") as f:
                src = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        for line, text in python_texts(src):
            words = [w for w, _ in words_with_lines(text, None)]
            for k in range(len(words) - SHINGLE + 1):
                key = " ".join(words[k:k + SHINGLE])
                if key in shingles and shingles[key] is None:
                    shingles[key] = f"{ref}:{line}"

    findings = 0
    for rel, words, classes in units:
        k = 0
        while k <= len(words) - SHINGLE:
            first = shingles.get(" ".join(w for w, _ in words[k:k + SHINGLE]))
            if first is None:
                k += 1
                continue
            end = k + SHINGLE  # extend the run while shingles keep matching
            while end < len(words) and shingles.get(
                " ".join(w for w, _ in words[end - SHINGLE + 1:end + 1])
            ):
                end += 1
            run = [w for w, _ in words[k:end]]
            if not allowed(entries, rel, run, classes):
                findings += 1
                text = " ".join(run)
                print(f"{rel}:{words[k][1]}: {len(run)} words as in {first}\n"
                      f"    \"{text}\"\n"
                      f"    rewrite it, or if another program reads it byte for byte, allowlist:\n"
                      f"    {rel} | {text} | <what reads it>")
            k = end
    stale = [e for e in entries if not e["used"]]
    for entry in stale:
        print(f"{args.allowlist}:{entry['line']}: stale entry (matches nothing any more), "
              f"remove it: {entry['glob']} |{entry['words']}| {entry['reason']}")
    print(f"provenance: {len(units)} texts of {MIN_WORDS}+ words checked against "
          f"{len(ref_files)} reference files; {findings} copied, {len(stale)} stale allowlist "
          f"entries", file=sys.stderr)
    return 1 if findings or stale else 0


if __name__ == "__main__":
    sys.exit(main())
