#!/usr/bin/env python3
"""Fail when the files of one crate import each other in a circle (issue 33).

    scripts/check-cycles.py [--root DIR] [--verbose]   check every crate under DIR/crates (and DIR/fuzz)
    scripts/check-cycles.py --self-test                check the checker on fixture crates
    scripts/check-cycles.py --graph FILE.rs ...        print the edges out of those files (debugging)

For every crate target (src/lib.rs, src/main.rs, src/bin/*.rs, tests/*.rs, benches/*.rs,
examples/*.rs, fuzz_targets/*.rs) it builds the graph "file A uses an item defined in file B"
and finds its strongly connected components (Tarjan). Each component of more than one file is a
circle: it is printed with the edges inside it and the item names that make each edge, and the
exit status is 1 unless the component lies inside an entry of ALLOWED_CYCLES below. Python 3.11,
standard library only.

What counts as a use of file B by file A (A != B):
- a `use` declaration naming an item of B (`use crate::x::Y;`, `use super::Y;`,
  `use self::child::Y;`, `use child::Y;` for a child module, groups `{..}`, `as` renames), and a
  path in code (`crate::x::Y`, `super::Y`, `self::child::Y`, `child::Y`, or `m::Y` where `m` is a
  module brought into scope by a `use`). Comments, doc comments, string and char literals are
  not code, so a doc link `[crate::x::Y]` is no use; `$crate::` in a macro is not followed.
- The item is charged to the file that *defines* it: a name that a module re-exports
  (`pub use child::Y;`, or any `use` in that module) is followed to its definition. So a module
  root (`mod.rs`, `lib.rs`) that only declares `mod child;` and re-exports is transparent: its
  users depend on the children that define what they use, not on the root.
- A re-export (`pub use`, `pub(crate) use`, `pub(super) use`) is an edge out of the re-exporting
  file only if that file also names the item in its own code; a private `use` always is (the
  compiler warns about one that is not used).
- `use m::*` charges the items of `m` (defined or re-exported there) whose names appear in the
  importing file.
- `mod child;` is not a use: declaring a child is how Rust builds the tree, and the parent does
  not depend on the child for it.
- `Type::method` also charges the file whose inherent `impl Type { .. }` block defines `method`
  when that is not the file defining `Type` (an impl block may live in any file of the crate).
- What `#[cfg(test)]` guards (a unit-test module, a test helper) is left out: tests consume the
  crate from above, like the integration tests beside it, and may use anything. Other inline
  modules are part of their file (`super::` inside one names the file's own module).
- A path whose first segment is not `crate`/`super`/`self`, a child module, an item of this
  module or a name imported by `use` is another crate's (std, a dependency), and is ignored.
- Not seen: what only a macro's expansion names, and a method called with `.method()` on a value
  whose type the file never names (that needs type inference).
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# THE ALLOWLIST. Known circles that are being broken, each with the files (paths relative to the
# root; `*` matches anything, `/` too) that a circle may lie within and still pass. Remove an entry
# in the commit that breaks its circle: an entry that no longer matches any circle fails the check,
# so it cannot outlive its circle.
ALLOWED_CYCLES: list[tuple[str, set[str]]] = []

ITEM_KEYWORDS = {"fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod"}
KEYWORDS = {
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "union", "macro_rules",
}


# ---------------------------------------------------------------------------------------------
# Lexer: identifiers, `::`, single punctuation, string literals (kept for `#[path = ".."]`).


@dataclass
class Tok:
    kind: str  # "id", "p" (punctuation), "str", "lit" (number, char), "life"
    text: str
    line: int


def lex(src: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n, line = 0, len(src), 1

    def count_lines(a: int, b: int) -> int:
        return src.count("\n", a, b)

    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += count_lines(i, j)
            i = j
        elif (m := re.compile(r'(?:b|c)?r(#*)"').match(src, i)) and (i == 0 or not _is_id(src[i - 1])):
            close = '"' + m.group(1)
            j = src.find(close, m.end())
            j = n if j < 0 else j + len(close)
            toks.append(Tok("str", src[m.end() : max(m.end(), j - len(close))], line))
            line += count_lines(i, j)
            i = j
        elif c == '"' or (c in "bc" and src.startswith('"', i + 1) and (i == 0 or not _is_id(src[i - 1]))):
            j = i + (1 if c == '"' else 2)
            start = j
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            toks.append(Tok("str", src[start:j], line))
            line += count_lines(i, j)
            i = j + 1
        elif c == "'" or (c == "b" and src.startswith("'", i + 1) and (i == 0 or not _is_id(src[i - 1]))):
            j = i + (1 if c == "'" else 2)
            if j < n and src[j] == "\\":
                k = j + 2
                while k < n and src[k] != "'":
                    k += 1
                toks.append(Tok("lit", src[i : k + 1], line))
                i = k + 1
            elif j + 1 < n and src[j + 1] == "'":
                toks.append(Tok("lit", src[i : j + 2], line))
                i = j + 2
            else:  # a lifetime or label
                k = j
                while k < n and _is_id(src[k]):
                    k += 1
                toks.append(Tok("life", src[i:k], line))
                i = k
        elif c.isdigit():
            j = i
            while j < n and (_is_id(src[j]) or (src[j] == "." and j + 1 < n and src[j + 1].isdigit())):
                j += 1
            toks.append(Tok("lit", src[i:j], line))
            i = j
        elif _is_id(c):
            j = i
            while j < n and _is_id(src[j]):
                j += 1
            word = src[i:j]
            if word == "r" and src.startswith("#", j) and j + 1 < n and _is_id(src[j + 1]):
                k = j + 1
                while k < n and _is_id(src[k]):
                    k += 1
                word, j = src[j + 1 : k], k
            toks.append(Tok("id", word, line))
            i = j
        elif src.startswith("::", i):
            toks.append(Tok("p", "::", line))
            i += 2
        else:
            toks.append(Tok("p", c, line))
            i += 1
    return toks


def _is_id(c: str) -> bool:
    return c.isalnum() or c == "_"


# ---------------------------------------------------------------------------------------------
# Parser: per module scope, the child modules, defined items, `use` bindings, and code paths.


@dataclass
class Binding:
    path: list[str]  # as written, from the scope that holds the `use`
    line: int
    public: bool  # pub / pub(crate) / pub(super) / pub(in ..): a re-export


@dataclass
class Scope:
    modpath: tuple[str, ...]
    file: Path
    defs: set[str] = field(default_factory=set)
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    globs: list[Binding] = field(default_factory=list)
    file_children: dict[str, Path] = field(default_factory=dict)  # `mod x;`
    inline_children: set[str] = field(default_factory=set)  # `mod x { .. }`
    paths: list[tuple[list[str], int]] = field(default_factory=list)  # code paths, with lines
    # Inherent impl blocks: the type's path as written, the methods defined, the line.
    impls: list[tuple[list[str], set[str], int]] = field(default_factory=list)


@dataclass
class FileInfo:
    path: Path
    scopes: list[Scope]
    # Names this file's code refers to, outside `use` declarations: identifiers that are not a
    # method or field after `.`, not a field or binding before `:`, not a `{ field, .. }`
    # shorthand (for a re-export's own use and glob imports).
    idents: set[str]


def parse_use_tree(toks: list[Tok], i: int, prefix: list[str], out: list[tuple[list[str], str | None, int]]) -> int:
    """Parse one use tree at toks[i]; append (path, bound name or None for a glob, line)."""
    path = list(prefix)
    if toks[i].text == "::":  # `use ::std::..`
        i += 1
    while True:
        t = toks[i]
        if t.text == "{":
            i += 1
            while toks[i].text != "}":
                i = parse_use_tree(toks, i, path, out)
                if toks[i].text == ",":
                    i += 1
            return i + 1
        if t.text == "*":
            out.append((path, None, t.line))
            return i + 1
        if t.kind != "id":
            return i
        path.append(t.text)
        i += 1
        if toks[i].text == "::":
            i += 1
            continue
        name = t.text
        if toks[i].text == "as":
            name = toks[i + 1].text
            i += 2
        if path[-1] == "self":  # `use a::b::{self}` binds `b`
            path = path[:-1]
            if name == "self":
                name = path[-1] if path else "self"
        out.append((path, None if name == "_" else name, t.line))
        return i


def strip_test_items(toks: list[Tok]) -> list[Tok]:
    """Leave out what `#[cfg(test)]` guards (a unit-test module, a test helper): tests consume
    the crate from above, like the integration tests beside it, and may use anything."""

    def is_cfg_test(k: int) -> bool:
        return [t.text for t in toks[k : k + 7]] == ["#", "[", "cfg", "(", "test", ")", "]"]

    if any([t.text for t in toks[k : k + 8]] == ["#", "!", "[", "cfg", "(", "test", ")", "]"] for k in range(len(toks))):
        return []  # the whole file is for tests
    out: list[Tok] = []
    i, n = 0, len(toks)
    while i < n:
        if not is_cfg_test(i):
            out.append(toks[i])
            i += 1
            continue
        # Skip the attribute, any further attributes, then the item up to its `;` or its body's `}`.
        j = i + 7
        level = 0
        while j < n:
            t = toks[j].text
            if t in "([":
                level += 1
            elif t in ")]":
                level -= 1
            elif t == ";" and level == 0:
                break
            elif t == "{" and level == 0:
                braces = 0
                while j < n:
                    if toks[j].text == "{":
                        braces += 1
                    elif toks[j].text == "}":
                        braces -= 1
                        if braces == 0:
                            break
                    j += 1
                break
            j += 1
        i = j + 1
    return out


def parse_impl_header(toks: list[Tok], i: int) -> tuple[list[str], int] | None:
    """After `impl`: the implemented type's path and the index of the body's `{`, or None for a
    trait impl (`impl Trait for Type`: its methods are reached through the trait)."""
    n = len(toks)
    angle = 0
    if i < n and toks[i].text == "<":  # the impl's own generics
        while i < n:
            angle += {"<": 1, ">": -1}.get(toks[i].text, 0)
            i += 1
            if angle == 0:
                break
    type_path: list[str] = []
    while i < n and (toks[i].text == "::" or (toks[i].kind == "id" and toks[i].text not in ("where", "for"))):
        if toks[i].kind == "id":
            type_path.append(toks[i].text)
        i += 1
    j = i
    while j < n and toks[j].text != "{":
        if toks[j].text == ";":
            return None
        angle += {"<": 1, ">": -1}.get(toks[j].text, 0)
        if toks[j].text == "for" and angle == 0:
            return None
        j += 1
    if not type_path or j >= n:
        return None
    return type_path, j


def parse_file(path: Path, modpath: tuple[str, ...], is_mod_root: bool) -> FileInfo:
    """`is_mod_root`: the file is lib.rs/main.rs/mod.rs (children live beside it)."""
    toks = strip_test_items(lex(path.read_text(encoding="utf-8", errors="replace")))
    top = Scope(modpath, path)
    scopes = [top]
    stack: list[tuple[Scope, int]] = [(top, 0)]  # scope, brace depth of its body
    impls: list[tuple[set[str], int]] = []  # open inherent impl blocks: methods, body depth
    pending_impl: tuple[set[str], int] | None = None  # an impl header seen: methods, its `{`
    idents: set[str] = set()
    depth = 0
    pending_path_attr: str | None = None
    i, n = 0, len(toks)
    child_dir = path.parent if is_mod_root else path.parent / path.stem

    def prev_text(k: int) -> str:
        return toks[k].text if k >= 0 else ""

    while i < n:
        t = toks[i]
        scope = stack[-1][0]
        at_scope_level = depth == stack[-1][1]
        if t.text == "#" and i + 2 < n and toks[i + 1].text in ("[", "!"):
            # An attribute: remember `#[path = ".."]`, skip the rest.
            j = i + 1 if toks[i + 1].text == "[" else i + 2
            if j + 3 < n and toks[j + 1].text == "path" and toks[j + 2].text == "=" and toks[j + 3].kind == "str":
                pending_path_attr = toks[j + 3].text
            k, bracket = j, 0
            while k < n:
                if toks[k].text == "[":
                    bracket += 1
                elif toks[k].text == "]":
                    bracket -= 1
                    if bracket == 0:
                        break
                k += 1
            i = k + 1
            continue
        if t.kind == "id" and t.text == "impl" and at_scope_level and prev_text(i - 1) in ("}", ";", "]", "{", "unsafe", ""):
            header = parse_impl_header(toks, i + 1)
            if header is not None:
                type_path, brace = header
                methods: set[str] = set()
                scope.impls.append((type_path, methods, t.line))
                pending_impl = (methods, brace)
        if t.text == "{":
            depth += 1
            if pending_impl is not None and pending_impl[1] == i:
                impls.append((pending_impl[0], depth))
                pending_impl = None
        elif t.text == "}":
            depth -= 1
            if len(stack) > 1 and depth == stack[-1][1] - 1:
                stack.pop()
            if impls and depth < impls[-1][1]:
                impls.pop()
        elif t.kind == "id" and t.text == "fn" and impls and depth == impls[-1][1] and i + 1 < n:
            impls[-1][0].add(toks[i + 1].text)
        elif t.text == "use" and t.kind == "id":
            public = False
            k = i - 1
            if prev_text(k) == ")":
                while k >= 0 and toks[k].text != "(":
                    k -= 1
                k -= 1
            if prev_text(k) == "pub":
                public = True
            out: list[tuple[list[str], str | None, int]] = []
            j = parse_use_tree(toks, i + 1, [], out)
            while j < n and toks[j].text != ";":
                j += 1
            for p, name, line in out:
                b = Binding(p, line, public)
                if name is None:
                    scope.globs.append(b)
                else:
                    scope.bindings.setdefault(name, []).append(b)
            i = j + 1
            pending_path_attr = None
            continue
        elif t.kind == "id" and t.text == "mod" and i + 2 < n and toks[i + 1].kind == "id":
            name = toks[i + 1].text
            if toks[i + 2].text == ";":
                if len(stack) == 1:
                    if pending_path_attr is not None:
                        target = (path.parent / pending_path_attr).resolve()
                    elif (child_dir / f"{name}.rs").exists():
                        target = child_dir / f"{name}.rs"
                    else:
                        target = child_dir / name / "mod.rs"
                    scope.file_children[name] = target
                pending_path_attr = None
                i += 3
                continue
            if toks[i + 2].text == "{":
                scope.inline_children.add(name)
                scope.defs.add(name)
                child = Scope(scope.modpath + (name,), path)
                scopes.append(child)
                depth += 1
                stack.append((child, depth))
                pending_path_attr = None
                i += 3
                continue
        elif t.kind == "id" and t.text in ITEM_KEYWORDS and at_scope_level and i + 1 < n:
            nxt = toks[i + 1]
            if nxt.kind == "id" and nxt.text not in KEYWORDS | {"_"} and prev_text(i - 1) not in ("::", ".", "&", "*"):
                scope.defs.add(nxt.text)
        elif t.kind == "id" and t.text == "macro_rules" and i + 2 < n and toks[i + 1].text == "!":
            scope.defs.add(toks[i + 2].text)
        if t.kind == "id":
            nxt = toks[i + 1].text if i + 1 < n else ""
            shorthand = prev_text(i - 1) in ("{", ",") and nxt in (",", "}")
            if prev_text(i - 1) != "." and nxt != ":" and not shorthand:
                idents.add(t.text)
            # A path in code starts at an identifier not preceded by `::` or `$` (`$crate`).
            if prev_text(i - 1) not in ("::", "$", ".") and i + 2 < n and toks[i + 1].text == "::" and toks[i + 2].kind == "id":
                segs = [t.text]
                j = i + 1
                while j + 1 < n and toks[j].text == "::" and toks[j + 1].kind == "id":
                    segs.append(toks[j + 1].text)
                    j += 2
                scope.paths.append((segs, t.line))
        i += 1
    return FileInfo(path, scopes, idents)


# ---------------------------------------------------------------------------------------------
# Resolution over one crate target's module tree.


@dataclass
class Edge:
    src: Path
    dst: Path
    item: str
    line: int


class Target:
    def __init__(self, root_file: Path):
        self.root_file = root_file
        self.scopes: dict[tuple[str, ...], Scope] = {}
        self.files: dict[Path, FileInfo] = {}
        self._impl_methods: dict[tuple[Path, str], dict[str, Path]] | None = None
        self._load(root_file, (), True)

    def _load(self, path: Path, modpath: tuple[str, ...], is_mod_root: bool) -> None:
        if not path.exists() or path in self.files:
            return
        info = parse_file(path, modpath, is_mod_root)
        self.files[path] = info
        for s in info.scopes:
            self.scopes[s.modpath] = s
        for s in info.scopes:
            for name, child in s.file_children.items():
                self._load(child, s.modpath + (name,), child.name == "mod.rs")

    def child_modules(self, modpath: tuple[str, ...]) -> set[str]:
        s = self.scopes.get(modpath)
        return set() if s is None else set(s.file_children) | s.inline_children

    def start(self, scope: Scope, segs: list[str], depth: int = 0) -> tuple[tuple[str, ...], list[str]] | None:
        """Where a path written in `scope` starts: (module, remaining segments), or None when
        it is not this crate's."""
        if not segs or depth > 16:
            return None
        first = segs[0]
        if first == "crate":
            return (), segs[1:]
        if first == "self":
            return scope.modpath, segs[1:]
        if first == "super":
            mod = scope.modpath
            k = 0
            while k < len(segs) and segs[k] == "super":
                if not mod:
                    return None
                mod = mod[:-1]
                k += 1
            return mod, segs[k:]
        if first in self.child_modules(scope.modpath):
            return scope.modpath + (first,), segs[1:]
        if first in scope.defs:
            return scope.modpath, segs  # an item of this module (`Type::method`)
        # A module or item brought in by a `use` of this scope.
        for b in scope.bindings.get(first, []):
            if b.path[:1] == [first]:
                continue  # `use other_crate;`
            r = self.start(scope, b.path, depth + 1)
            if r is not None:
                mod, rest = self.walk(*r)
                return mod, rest + segs[1:]
        return None

    def walk(self, mod: tuple[str, ...], rest: list[str]) -> tuple[tuple[str, ...], list[str]]:
        while rest and rest[0] in self.child_modules(mod):
            mod, rest = mod + (rest[0],), rest[1:]
        return mod, rest

    def definers(self, scope: Scope, segs: list[str], seen: set | None = None) -> list[tuple[Path, str]]:
        """The files defining what a path written in `scope` names, with the item's name."""
        r = self.start(scope, segs)
        if r is None:
            return []
        mod, rest = self.walk(*r)
        if not rest:
            return []  # a module itself: its uses are charged where its items are named
        found = self.item_in(mod, rest[0], seen or set())
        if len(rest) > 1:
            # `Type::method`: also the file whose `impl Type` block defines the method.
            for f, item in list(found):
                impl_file = self.impl_methods().get((f, item), {}).get(rest[1])
                if impl_file is not None:
                    found.append((impl_file, f"{item}::{rest[1]}"))
        return found

    def impl_methods(self) -> dict[tuple[Path, str], dict[str, Path]]:
        """(file defining a type, its name) -> method -> the file of the impl block defining it."""
        if self._impl_methods is None:
            self._impl_methods = {}
            for s in self.scopes.values():
                for type_path, methods, _ in s.impls:
                    if len(type_path) == 1 and type_path[0] in s.defs:
                        owners = [(s.file, type_path[0])]
                    else:
                        r = self.start(s, type_path)
                        owners = [] if r is None else self._items(*self.walk(*r))
                    for owner in owners:
                        for m in methods:
                            self._impl_methods.setdefault(owner, {}).setdefault(m, s.file)
        return self._impl_methods

    def _items(self, mod: tuple[str, ...], rest: list[str]) -> list[tuple[Path, str]]:
        return self.item_in(mod, rest[0], set()) if rest else []

    def item_in(self, mod: tuple[str, ...], name: str, seen: set) -> list[tuple[Path, str]]:
        s = self.scopes.get(mod)
        if s is None:
            return []
        if (mod, name) in seen:
            return []
        seen.add((mod, name))
        if name in s.defs:
            return [(s.file, name)]
        if name in s.bindings:
            found: list[tuple[Path, str]] = []
            for b in s.bindings[name]:
                r = self.start(s, b.path)
                if r is None:
                    continue
                m2, rest = self.walk(*r)
                if rest:
                    found += self.item_in(m2, rest[0], seen)
            if found:
                return found
            # Another crate's item (or one we cannot see) re-exported here.
            return []
        for g in s.globs:
            r = self.start(s, g.path)
            if r is None:
                continue
            m2, rest = self.walk(*r)
            if not rest:
                found = self.item_in(m2, name, seen)
                if found:
                    return found
        return [(s.file, name)]  # made by a macro, or unknown: charge the module's file

    def exported_names(self, mod: tuple[str, ...]) -> set[str]:
        s = self.scopes.get(mod)
        if s is None:
            return set()
        return (s.defs | set(s.bindings)) - self.child_modules(mod)

    def edges(self) -> list[Edge]:
        out: list[Edge] = []
        for info in self.files.values():
            for s in info.scopes:
                for name, bs in s.bindings.items():
                    for b in bs:
                        if b.public and name not in info.idents:
                            continue  # a re-export only: transparent
                        for dst, item in self.definers(s, b.path):
                            out.append(Edge(info.path, dst, item, b.line))
                for g in s.globs:
                    r = self.start(s, g.path)
                    if r is None:
                        continue
                    mod, rest = self.walk(*r)
                    if rest:
                        continue  # `use Enum::*` and the like
                    for name in sorted(self.exported_names(mod) & info.idents):
                        for dst, item in self.item_in(mod, name, set()):
                            out.append(Edge(info.path, dst, item, g.line))
                for segs, line in s.paths:
                    for dst, item in self.definers(s, segs):
                        out.append(Edge(info.path, dst, item, line))
        return [e for e in out if e.src != e.dst]


# ---------------------------------------------------------------------------------------------
# Tarjan's strongly connected components (iterative: no recursion limit to hit).


def tarjan(nodes: list[Path], succ: dict[Path, set[Path]]) -> list[list[Path]]:
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    on_stack: set[Path] = set()
    stack: list[Path] = []
    comps: list[list[Path]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return comps


# ---------------------------------------------------------------------------------------------
# Driver.


def target_roots(root: Path) -> list[Path]:
    crates = sorted(p.parent for p in (root / "crates").glob("*/Cargo.toml"))
    if (root / "fuzz" / "Cargo.toml").exists():
        crates.append(root / "fuzz")
    roots: list[Path] = []
    for c in crates:
        for rel in ("src/lib.rs", "src/main.rs"):
            if (c / rel).exists():
                roots.append(c / rel)
        for sub in ("src/bin", "tests", "benches", "examples", "fuzz_targets"):
            roots += sorted((c / sub).glob("*.rs"))
    return roots


def rel(root: Path, p: Path) -> str:
    try:
        return str(p.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(p)


def check(root: Path, verbose: bool, allowed: list[tuple[str, set[str]]]) -> int:
    failed = 0
    used_allow: set[int] = set()
    seen_components: set[frozenset[str]] = set()
    for rf in target_roots(root):
        t = Target(rf)
        edges = t.edges()
        succ: dict[Path, set[Path]] = {}
        for e in edges:
            succ.setdefault(e.src, set()).add(e.dst)
        comps = [c for c in tarjan(sorted(t.files), succ) if len(c) > 1]
        for comp in comps:
            names = frozenset(rel(root, p) for p in comp)
            if names in seen_components:
                continue  # the same files reached from another target (shared test modules)
            seen_components.add(names)
            allow = next((k for k, (_, pats) in enumerate(allowed) if within(names, pats)), None)
            members = set(comp)
            inside: dict[tuple[str, str], dict[str, int]] = {}
            for e in edges:
                if e.src in members and e.dst in members:
                    inside.setdefault((rel(root, e.src), rel(root, e.dst)), {}).setdefault(e.item, e.line)
            head = f"{rel(root, rf)}: a circle of {len(comp)} files"
            if allow is not None:
                used_allow.add(allow)
                print(f"allowed  {head} ({allowed[allow][0]})")
                if not verbose:
                    continue
            else:
                failed += 1
                print(f"CYCLE    {head}:")
            for p in comp:
                print(f"    {rel(root, p)}")
            print("  edges (file -> file it uses: items, first at line):")
            for (a, b), items in sorted(inside.items()):
                listed = ", ".join(f"{it}@{ln}" for it, ln in sorted(items.items(), key=lambda x: x[1]))
                print(f"    {a} -> {b}: {listed}")
            for cyc in short_cycle(comp, succ, root):
                print(f"  e.g. {cyc}")
    for k, (why, _) in enumerate(allowed):
        if k not in used_allow:
            print(f"STALE    allowlist entry no longer matches a circle, remove it from ALLOWED_CYCLES in {Path(__file__).name}: {why}")
            failed += 1
    if failed:
        print(f"check-cycles: {failed} problem(s); a file must use only what stands below it (docs/ARCHITECTURE.md)")
        return 1
    print("check-cycles: no import circle between the files of any crate (beyond the allowlist)")
    return 0


def within(files: frozenset[str], patterns: set[str]) -> bool:
    return all(any(fnmatch.fnmatchcase(f, p) for p in patterns) for f in files)


def short_cycle(comp: list[Path], succ: dict[Path, set[Path]], root: Path) -> list[str]:
    """One shortest circle through the component's first file, for the reader."""
    members = set(comp)
    start = comp[0]
    prev: dict[Path, Path] = {}
    frontier = [start]
    seen = {start}
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(succ.get(v, ())):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    path.reverse()
                    return [" -> ".join(rel(root, p) for p in path + [start])]
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return []


# ---------------------------------------------------------------------------------------------
# Self-test: fixture crates with and without circles, run through the real command line.

FIXTURES: dict[str, tuple[int, dict[str, str]]] = {
    # name: (expected exit status, files)
    "a circle through use and a qualified path": (1, {
        "crates/a/Cargo.toml": "",
        "crates/a/src/lib.rs": "mod x;\nmod y;\n",
        "crates/a/src/x.rs": "use crate::y::Why;\npub struct Ex;\n",
        "crates/a/src/y.rs": "pub struct Why;\nfn f() -> crate::x::Ex { todo!() }\n",
    }),
    "a circle through super:: and a child path": (1, {
        "crates/a/Cargo.toml": "",
        "crates/a/src/lib.rs": "mod p;\n",
        "crates/a/src/p/mod.rs": "mod c;\npub struct Root;\nfn f() { c::helper(); }\n",
        "crates/a/src/p/c.rs": "use super::Root;\npub fn helper() {}\n",
    }),
    "a circle through a group, a rename and a re-export": (1, {
        "crates/a/Cargo.toml": "",
        "crates/a/src/lib.rs": "mod m;\nmod z;\n",
        "crates/a/src/m/mod.rs": "mod inner;\npub use inner::Thing;\n",
        "crates/a/src/m/inner.rs": "use crate::{z::{Zed as Zz}};\npub struct Thing(Zz);\n",
        "crates/a/src/z.rs": "use crate::m::Thing;\npub struct Zed;\nfn f(_: Thing) {}\n",
    }),
    "a circle through a glob import": (1, {
        "crates/a/Cargo.toml": "",
        "crates/a/src/lib.rs": "mod x;\nmod y;\n",
        "crates/a/src/x.rs": "use crate::y::*;\npub struct Ex(Why);\n",
        "crates/a/src/y.rs": "pub struct Why;\nfn f(_: crate::x::Ex) {}\n",
    }),
    "a circle in an integration test's modules": (1, {
        "crates/a/Cargo.toml": "",
        "crates/a/src/lib.rs": "",
        "crates/a/tests/t.rs": "mod common;\n",
        "crates/a/tests/common/mod.rs": "mod more;\npub struct Base;\nfn f() { more::g(); }\n",
        "crates/a/tests/common/more.rs": "pub fn g() { let _ = super::Base; }\n",
    }),
    "a circle through a method an impl block in another file defines": (1, {
        "crates/a/Cargo.toml": "",
        "crates/a/src/lib.rs": "mod x;\nmod y;\n",
        "crates/a/src/x.rs": "pub struct T;\nfn f() { T::up(); }\n",
        "crates/a/src/y.rs": "use crate::x::T;\nimpl<'a> T {\n    pub(crate) fn up() {}\n}\n",
    }),
    "a circle through code after a test-only item": (1, {
        "crates/a/Cargo.toml": "",
        "crates/a/src/lib.rs": "mod x;\nmod y;\n",
        "crates/a/src/x.rs": "use crate::y::Why;\npub struct Ex(Why);\n",
        "crates/a/src/y.rs": (
            "pub struct Why;\n#[cfg(test)]\nfn helper() -> u8 { 1 }\n#[cfg(test)]\nmod tests { fn t() {} }\n"
            "pub fn f() -> Option<crate::x::Ex> { None }\n"
        ),
    }),
    "a child using its parent, a test module using anything: no circle": (0, {
        "crates/a/Cargo.toml": "",
        "crates/a/src/lib.rs": "mod p;\nmod top;\n",
        "crates/a/src/p/mod.rs": "mod c;\npub struct Root;\npub use c::Leaf;\n",
        "crates/a/src/p/c.rs": (
            "use super::Root;\npub struct Leaf(Root);\nfn g() -> impl Iterator<Item = u8> { None.into_iter() }\n"
            "#[cfg(test)]\nmod tests { use crate::top::Top; }\n"
        ),
        "crates/a/src/top.rs": "use crate::p::Leaf;\npub struct Top(Leaf);\nimpl Top { fn new() {} }\n",
    }),
    "a re-exported function is no use of it by a method or field of the same name": (0, {
        "crates/a/Cargo.toml": "",
        "crates/a/src/lib.rs": "mod t;\n",
        "crates/a/src/t/mod.rs": (
            "mod ops;\npub use ops::{lock, open};\npub struct T { m: std::sync::Mutex<u8>, open: u8 }\n"
            "fn f(t: &T) { let _ = t.m.lock(); let T { open, .. } = t; let _ = T { m: Default::default(), open: 1 }; }\n"
        ),
        "crates/a/src/t/ops.rs": "use super::T;\npub fn lock(_: &T) {}\npub fn open(_: &T) {}\n",
    }),
    "one way only, with every kind of use": (0, {
        "crates/a/Cargo.toml": "",
        "crates/a/src/lib.rs": "mod p;\nmod low;\npub use p::Api;\npub fn run() -> p::Api { p::Api }\n",
        "crates/a/src/low.rs": "pub struct Low;\npub fn low() {}\n",
        "crates/a/src/p/mod.rs": "mod c;\npub use c::Api;\n",
        "crates/a/src/p/c.rs": (
            "use crate::low::{self, Low};\nuse super::super::low as l;\n"
            "pub struct Api;\nfn f(_: Low) { low::low(); l::low(); crate::low::low(); }\n"
        ),
    }),
    "comments, strings, doc links, $crate and tests are no circle": (0, {
        "crates/a/Cargo.toml": "",
        "crates/a/src/lib.rs": "mod x;\nmod y;\n",
        "crates/a/src/x.rs": (
            "//! See [`crate::y::Why`].\nuse crate::y::Why;\npub struct Ex(Why);\n"
            "#[cfg(test)]\nmod tests { use super::*; #[test] fn t() { let _ = Ex(Why); } }\n"
        ),
        "crates/a/src/y.rs": (
            "/// Not [`crate::x::Ex`]: /* crate::x::Ex */ nested */\npub struct Why;\n"
            "const S: &str = \"crate::x::Ex\";\nconst R: &str = r#\"crate::x::Ex\"#;\n"
            "const C: char = '\"'; fn f<'a>(_: &'a str) {}\n"
            "macro_rules! m { () => { $crate::x::Ex } }\n"
        ),
    }),
}


def self_test() -> int:
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, (want, files)) in enumerate(FIXTURES.items()):
            root = Path(tmp) / f"f{k}"
            for relpath, text in files.items():
                p = root / relpath
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
            r = subprocess.run(
                [sys.executable, __file__, "--root", str(root), "--no-allowlist"],
                capture_output=True, text=True, timeout=60,
            )
            ok = r.returncode == want
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {r.returncode}, want {want}")
            if not ok:
                failures += 1
                print(r.stdout + r.stderr)
        # The allowlist: a listed circle passes, and an entry matching nothing fails.
        root = Path(tmp) / "f0"
        for want, allow, name in (
            (0, [("fixture", {"crates/a/src/x.rs", "crates/a/src/y.rs"})], "an allowlisted circle passes"),
            (1, [("fixture", {"crates/a/src/x.rs", "crates/a/src/y.rs"}), ("stale", {"crates/a/src/q.rs"})],
             "a stale allowlist entry fails"),
        ):
            got = check(root, False, allow)
            ok = got == want
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {got}, want {want}")
            failures += 0 if ok else 1
    if failures:
        print(f"check-cycles self-test: {failures} failure(s)")
        return 1
    print("check-cycles self-test: all passed")
    return 0


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    verbose = False
    allowed = ALLOWED_CYCLES
    graph: list[Path] = []
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--self-test":
            return self_test()
        if a == "--root":
            root = Path(args.pop(0))
        elif a == "--verbose":
            verbose = True
        elif a == "--no-allowlist":
            allowed = []
        elif a == "--graph":
            graph, args = [Path(x).resolve() for x in args], []
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            print(f"check-cycles: unknown argument {a} (see --help)", file=sys.stderr)
            return 2
    if graph:
        for rf in target_roots(root):
            t = Target(rf)
            for e in t.edges():
                if e.src.resolve() in graph:
                    print(f"{rel(root, rf)}: {rel(root, e.src)}:{e.line} -> {rel(root, e.dst)} ({e.item})")
        return 0
    return check(root, verbose, allowed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
