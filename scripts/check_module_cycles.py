#!/usr/bin/env python3
"""Checks that no crate's modules import each other in a cycle (ARCHITECTURE.md, STYLE.md).

    python3 scripts/check_module_cycles.py [--allow-cycles CRATE[,CRATE...]]...

For every crate under `crates/` and `plugins/`, reads the module tree from `src/lib.rs` (and
`src/main.rs`) through its `mod` declarations (`x.rs`, `x/mod.rs`, `#[path]`, inline `mod x {}`),
then every path into the crate a module names: `use crate::…`, `use super::…`, `use self::…`,
use trees with braces, and `crate::a::b` / `super::x` paths in code. A path through a `use`
(a re-export in `lib.rs` or a `mod.rs`) is followed to the module the name comes from.

Two graphs are checked in each crate: the top-level modules (a submodule `a::b` counts as `a`),
and inside every directory module the sibling submodules (`a::b` and `a::c`). The crate root and
a directory module's own `mod.rs` are not nodes of the graph they hold (re-exporting is fine).
`#[cfg(test)]` items and `tests` modules are left out. Every cycle (a strongly connected
component of more than one module) is printed with its edges and the file:line of an import
forming each edge; exits 1 if any. Crates named with `--allow-cycles` (directory name or package
name) are skipped. Standard library only.
"""

import argparse
import bisect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def blank_comments_and_strings(text):
    """Returns `text` with comments and string/char literal contents replaced by spaces
    (newlines kept), so that offsets and line numbers stay those of the source."""
    out = list(text)
    n = len(text)
    i = 0

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif c == "/" and text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) or (
            c == "b" and text.startswith("br", i)
        ):
            m = re.compile(r"b?r(#*)\"").match(text, i)
            if not m:
                i += 1
                continue
            end = text.find('"' + m.group(1), m.end())
            end = n if end < 0 else end + 1 + len(m.group(1))
            blank(m.end(), end - 1 - len(m.group(1)))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}') or a lifetime ('a).
            if i + 1 < n and text[i + 1] == "\\":
                j = text.find("'", i + 2 if text[i + 2 : i + 3] != "'" else i + 3)
                blank(i + 1, j)
                i = j + 1
            elif i + 2 < n and text[i + 2] == "'":
                blank(i + 1, i + 2)
                i += 3
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def matching(text, i):
    """Index just past the bracket closing the one at `text[i]` (brackets of any kind nest)."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] in "([{":
            depth += 1
        elif text[j] in ")]}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def item_end(text, i):
    """Index just past the item starting at `i`: at its `;` or its closing brace."""
    m = re.compile(r"\s*(?:pub(?:\s*\([^)]*\))?\s+)?use\b").match(text, i)
    j = i
    while j < len(text):
        c = text[j]
        if c == ";":
            return j + 1
        if c in "([":
            j = matching(text, j)
            continue
        if c == "{":
            end = matching(text, j)
            if m:  # a use tree's braces: the item ends at the `;` after them
                j = end
                continue
            return end
        j += 1
    return j


TEST_ATTR = re.compile(r"#\s*\[\s*cfg\s*\(")
ATTR = re.compile(r"\s*#\s*\[")


def is_test_cfg(expr):
    expr = re.sub(r"\s+", "", expr)
    if expr == "test":
        return True
    return expr.startswith("all(") and re.search(r"(?<!not\()\btest\b", expr) is not None


def blank_test_items(code):
    """Blanks `#[cfg(test)]` items and `mod tests` in already comment-free `code`."""
    out = list(code)
    spans = []
    for m in TEST_ATTR.finditer(code):
        attr_end = matching(code, code.index("[", m.start()))
        expr_open = m.end() - 1
        expr = code[expr_open + 1 : matching(code, expr_open) - 1]
        if not is_test_cfg(expr):
            continue
        j = attr_end
        while True:
            a = ATTR.match(code, j)
            if not a:
                break
            j = matching(code, a.end() - 1)
        spans.append((m.start(), item_end(code, j)))
    for m in re.finditer(r"\bmod\s+tests\b", code):
        spans.append((m.start(), item_end(code, m.start())))
    for a, b in spans:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def parse_use_tree(tree):
    """The leaves of a use tree (`a::{b::C, d as e, f::*}`): (segments, local name or `*`)."""
    tokens = re.findall(r"r#\w+|\w+|::|[{},*]", tree)
    tokens = [t.removeprefix("r#") for t in tokens]
    leaves = []
    pos = 0

    def parse(prefix):
        nonlocal pos
        segs = list(prefix)
        while pos < len(tokens):
            t = tokens[pos]
            if t == "{":
                pos += 1
                while pos < len(tokens) and tokens[pos] != "}":
                    parse(segs)
                    if pos < len(tokens) and tokens[pos] == ",":
                        pos += 1
                pos += 1
                return
            if t == "*":
                pos += 1
                leaves.append((segs, "*"))
                return
            if t == "::":
                pos += 1
                continue
            if t in (",", "}"):
                break
            if t == "as":
                alias = tokens[pos + 1] if pos + 1 < len(tokens) else "_"
                pos += 2
                leaves.append((segs, alias))
                return
            if t == "self" and segs:
                pos += 1  # `a::{self}` names `a` itself
                continue
            segs = segs + [t]
            pos += 1
        if segs:
            leaves.append((segs, segs[-1]))

    if tokens and tokens[0] == "::":
        return []  # `::name`: an extern crate
    parse([])
    return leaves


class Module:
    def __init__(self, path, file, inline):
        self.path = path  # tuple of names from the crate root
        self.file = file
        self.inline = inline
        self.children = {}  # name -> path
        self.uses = {}  # local name -> absolute path (tuple) inside the crate
        self.globs = []  # absolute paths of `use …::*`


class Crate:
    def __init__(self, name, root_file):
        self.name = name
        self.modules = {}
        self.refs = []  # (from module path, absolute segments, file, line)
        self.load(root_file, (), is_root=True)

    # -- reading the tree ------------------------------------------------------------------

    def load(self, file, path, is_root=False):
        text = file.read_text(encoding="utf-8")
        code = blank_test_items(blank_comments_and_strings(text))
        lines = [i for i, c in enumerate(code) if c == "\n"]
        line_of = lambda pos: bisect.bisect_left(lines, pos) + 1  # noqa: E731
        self.modules[path] = Module(path, file, inline=False)
        mod_rs = is_root or file.name == "mod.rs"
        child_dir = file.parent if mod_rs else file.parent / file.stem

        # Inline modules: (start, end, path) intervals, innermost found by the smallest.
        inline = []
        decl = re.compile(r"\bmod\s+(r#)?([A-Za-z_]\w*)\s*([;{])")
        for m in decl.finditer(code):
            prefix = code[: m.start()].rstrip()
            if prefix.endswith("$"):
                continue
            name = m.group(2)
            if m.group(3) == "{":
                inline.append((m.end() - 1, matching(code, m.end() - 1), name))
        def module_at(pos):
            chain = [iv for iv in inline if iv[0] < pos < iv[1]]
            chain.sort(key=lambda iv: iv[0])
            return path + tuple(iv[2] for iv in chain)

        for start, _end, _name in inline:
            mp = module_at(start + 1)
            self.modules[mp] = Module(mp, file, inline=True)
            self.modules[mp[:-1]].children[mp[-1]] = mp

        for m in decl.finditer(code):
            if m.group(3) != ";":
                continue
            name = m.group(2)
            parent = module_at(m.start())
            # `#[path = "…"]` among the attributes just before the declaration.
            attrs_start = m.start()
            head = code[: m.start()]
            vis = re.search(r"pub(\s*\([^)]*\))?\s*$", head)
            if vis:
                attrs_start = vis.start()
            explicit = None
            while True:
                before = code[:attrs_start].rstrip()
                if not before.endswith("]"):
                    break
                open_at = before.rfind("#")
                if open_at < 0:
                    break
                attr = text[open_at : len(before)]
                p = re.match(r'#\s*\[\s*path\s*=\s*"([^"]*)"\s*\]', attr)
                if p:
                    explicit = file.parent / p.group(1)
                attrs_start = open_at
            sub = parent[len(path) :]
            base = child_dir.joinpath(*sub)
            if explicit is not None:
                candidates = [explicit]
            else:
                candidates = [base / f"{name}.rs", base / name / "mod.rs"]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                continue  # generated or missing: nothing to check
            child = parent + (name,)
            self.modules[parent].children[name] = child
            self.load(found, child)

        # Paths into the crate: use declarations (with the names they bring into scope) and
        # `crate::`/`super::`/`self::` paths anywhere in code.
        for m in re.finditer(r"\buse\b", code):
            if code[: m.start()].rstrip().endswith(("$", "::")):
                continue
            here = module_at(m.start())
            end = item_end(code, m.start())
            tree = code[m.end() : end].rstrip().rstrip(";")
            for segs, alias in parse_use_tree(tree):
                absolute = self.absolute(here, segs, allow_child=True)
                if absolute is None:
                    continue
                if alias == "*":
                    self.modules[here].globs.append(absolute)
                elif alias != "_":
                    self.modules[here].uses[alias] = absolute
                self.refs.append((here, absolute, file, line_of(m.start())))
        for m in re.finditer(r"(?<![\w$])(crate|super|self)\s*::", code):
            head = code[: m.start()]
            if re.search(r"pub\s*\(\s*in\s+$", head) or re.search(r"::\s*$", head):
                continue
            here = module_at(m.start())
            rest = code[m.start() : m.start() + 400]
            pm = re.match(r"(?:(?:r#)?\w+\s*::\s*)*(?:r#)?\w+", rest)
            segs = [s.strip().removeprefix("r#") for s in pm.group(0).split("::")]
            absolute = self.absolute(here, segs, allow_child=False)
            if absolute is not None:
                self.refs.append((here, absolute, file, line_of(m.start())))

    def absolute(self, here, segs, allow_child):
        """The crate-absolute form of a path written in module `here`, or None when it leads
        out of the crate."""
        if not segs:
            return None
        first = segs[0]
        if first == "crate":
            return tuple(segs[1:])
        if first in ("super", "self"):
            cur = here
            i = 0
            while i < len(segs) and segs[i] in ("super", "self"):
                if segs[i] == "super":
                    cur = cur[:-1]
                i += 1
            return cur + tuple(segs[i:])
        if allow_child:
            mod = self.modules.get(here)
            if mod is not None and first in mod.children:
                return here + tuple(segs)
        return None

    # -- resolving ---------------------------------------------------------------------------

    def resolve(self, segs, depth=0):
        """The module an absolute path ends in, following `use` declarations (re-exports)."""
        cur = ()
        for i, seg in enumerate(segs):
            mod = self.modules.get(cur)
            if mod is None:
                break
            if seg in mod.children:
                cur = mod.children[seg]
                continue
            if seg in mod.uses and depth < 16 and mod.uses[seg] != cur + (seg,):
                return self.resolve(mod.uses[seg] + tuple(segs[i + 1 :]), depth + 1)
            break
        return cur

    def edges(self):
        """(from module, to module) -> first (file, line) of a reference making the edge."""
        found = {}
        for here, segs, file, line in self.refs:
            target = self.resolve(segs)
            if target == here:
                continue
            key = (here, target)
            if key not in found or (file, line) < found[key]:
                found[key] = (file, line)
        return found


def sccs(nodes, adjacent):
    """Tarjan's strongly connected components."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(adjacent.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            result.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return result


def cycles_of(crate):
    """Every cycle of the crate: (holder module path, members, [(from, to, file, line)])."""
    edges = crate.edges()
    found = []
    for holder, mod in sorted(crate.modules.items()):
        if len(mod.children) < 2:
            continue
        depth = len(holder)
        graph = {}
        where = {}
        for (a, b), loc in edges.items():
            # Only edges between two different children of `holder` (or their descendants).
            if len(a) <= depth or len(b) <= depth or a[:depth] != holder or b[:depth] != holder:
                continue
            ca, cb = a[depth], b[depth]
            if ca == cb:
                continue
            graph.setdefault(ca, set()).add(cb)
            if (ca, cb) not in where or loc < where[(ca, cb)]:
                where[(ca, cb)] = loc
        for comp in sccs(set(mod.children), graph):
            if len(comp) < 2:
                continue
            members = set(comp)
            cycle_edges = [
                (a, b, *where[(a, b)])
                for a in comp
                for b in sorted(graph.get(a, ()))
                if b in members
            ]
            found.append((holder, comp, cycle_edges))
    return found


def crates():
    for parent in ("crates", "plugins"):
        for crate_dir in sorted((ROOT / parent).iterdir()):
            src = crate_dir / "src"
            if not src.is_dir():
                continue
            package = crate_dir.name
            manifest = crate_dir / "Cargo.toml"
            if manifest.is_file():
                m = re.search(r'^name\s*=\s*"([^"]+)"', manifest.read_text(), re.M)
                if m:
                    package = m.group(1)
            roots = [src / r for r in ("lib.rs", "main.rs") if (src / r).is_file()]
            yield crate_dir, package, roots


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--allow-cycles",
        action="append",
        default=[],
        metavar="CRATE",
        help="skip these crates (directory or package name; repeat or separate with commas)",
    )
    args = parser.parse_args()
    allowed = {name for arg in args.allow_cycles for name in arg.split(",") if name}

    failures = 0
    checked = 0
    for crate_dir, package, roots in crates():
        label = crate_dir.name
        if label in allowed or package in allowed:
            print(f"SKIP {label}: cycles allowed (--allow-cycles)")
            continue
        for root in roots:
            name = label if len(roots) == 1 else f"{label} ({root.name})"
            crate = Crate(name, root)
            checked += 1
            for holder, comp, cycle_edges in cycles_of(crate):
                failures += 1
                inside = f" inside {'::'.join(holder)}" if holder else ""
                print(f"FAIL {name}: module cycle{inside} among {', '.join(comp)}")
                for a, b, file, line in cycle_edges:
                    rel = file.relative_to(ROOT)
                    print(f"    {a} -> {b}    {rel}:{line}")
    print(f"module cycles: {checked} crates checked, {failures} cycles")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
