#!/usr/bin/env python
"""Extract HLO modules from XLA's own tests into `hlo_fixtures/xla_tests/`.

XLA's repository is the reference for what HLO text is valid: its `.hlo` test
files and the HLO strings of its C++ tests (the parser's tests hold both
accepted and rejected modules). This script reads a local copy of XLA's
tree, takes those modules verbatim, labels each one with what XLA's parser
(jaxlib's `hlo_module_from_text`) says of it, and writes them with a
manifest recording repository, commit, path, line and test name of each.

The copy can be a work tree (a directory) or a bare git directory with a
revision, e.g. what `git clone --bare https://github.com/openxla/xla` gives:

    python scripts/extract_xla_hlo_tests.py --git-dir XLA.git --rev HEAD
    python scripts/extract_xla_hlo_tests.py --tree path/to/xla --commit SHA

The output directory is replaced wholesale; nothing else is written.
XLA is licensed under Apache-2.0; the manifest says so for every module.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# What is taken from XLA's tree. C++ test files give at most `cap` modules each
# (None: all of them), in file order, so that a few large test files do not
# crowd out the rest and the corpus stays a few MB.
CPP_SELECTION: list[tuple[str, int | None]] = [
    ("xla/hlo/parser/hlo_parser_test.cc", None),
    ("xla/service/hlo_verifier_test.cc", None),
    ("xla/service/gpu/transforms/priority_fusion_test.cc", None),  # before 2025
    ("xla/backends/gpu/transforms/priority_fusion_test.cc", None),
    ("xla/hlo/ir/*_test.cc", 6),
    ("xla/service/*_test.cc", 4),
    ("xla/service/gpu/*_test.cc", 3),
    ("xla/service/gpu/transforms/*_test.cc", 3),
    ("xla/backends/gpu/transforms/*_test.cc", 3),
    ("xla/service/gpu/model/*_test.cc", 4),
    ("xla/hlo/transforms/*_test.cc", 4),
    ("xla/hlo/transforms/*/*_test.cc", 4),
    ("xla/hlo/analysis/*_test.cc", 3),
    ("xla/backends/gpu/*/*_test.cc", 2),
]
# `.hlo` files up to this size (the benchmark models of xla/tools/benchmarks are
# several MB each; mobilenet_v2 is kept as a large module XLA wrote itself).
HLO_FILE_LIMIT = 120_000
HLO_FILE_EXTRA = ("xla/tools/data/benchmarking/mobilenet_v2.hlo",)
MAX_MODULE_BYTES = 900_000

_RAW_STRING = re.compile(r'R"([A-Za-z_]{0,16})\((.*?)\)\1"', re.S)
_TEST_HEADER = re.compile(r"\b(TEST(?:_F|_P)?|XLA_TEST_F|XLA_TEST_P)\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)")
_CASE_NAME = re.compile(r'"(\w+)"\s*,\s*$')
# Templates filled in by the test (absl::Substitute, StrFormat): not HLO as written.
_PLACEHOLDER = re.compile(r"\$\d|\$\{|%[-0-9.]*[sdiux](?![A-Za-z0-9_.\-])|\{\{|\[\[")
_FORMATTERS = re.compile(r"(StrCat|StrFormat|Substitute|StrReplaceAll|StrJoin|Printf)\s*\(\s*$")
_LIT_SPLIT = re.compile(r"^// -----.*$", re.M)
_VERIFIED = re.compile(
    r"\b(ParseAndReturnVerifiedModule|ParseAndReturnUnverifiedModule|RunAndFilecheckHloRewrite|"
    r"ParseAndReturnModule|GetOptimizedModule|RunAndCompare\w*|MatchOptimizedHlo|ParseHloText\w*)\b"
)


@dataclass
class Module:
    text: str
    path: str
    line: int
    test: str  # Suite.Name of the enclosing test, the case name of a table, or the file for .hlo files
    how: str  # "hlo_file" or "cpp_raw_string"
    xla_call: str | None = None  # the function the test hands the string to
    expects: dict | None = None  # what the test asserts of it (see `test_expectations`)


# ---------------------------------------------------------------------------
# Reading XLA's tree


class GitTree:
    """Files of one revision of a (bare) git repository."""

    def __init__(self, git_dir: str, rev: str):
        self.git_dir = git_dir
        self.commit = self._git("rev-parse", f"{rev}^{{commit}}").strip()
        self.sizes: dict[str, int] = {}
        for line in self._git("ls-tree", "-r", "-l", self.commit).splitlines():
            meta, path = line.split("\t", 1)
            parts = meta.split()
            if parts[1] == "blob" and parts[3].isdigit():  # "BAD": an object this clone lacks
                self.sizes[path] = int(parts[3])
        self._blob = {}
        for line in self._git("ls-tree", "-r", self.commit).splitlines():
            meta, path = line.split("\t", 1)
            self._blob[path] = meta.split()[2]

    def _git(self, *args: str, stdin: bytes | None = None) -> str:
        out = subprocess.run(["git", f"--git-dir={self.git_dir}", *args], input=stdin, capture_output=True, check=True)
        return out.stdout.decode()

    def read(self, path: str) -> str | None:
        proc = subprocess.run(
            ["git", f"--git-dir={self.git_dir}", "cat-file", "blob", self._blob[path]], capture_output=True
        )
        if proc.returncode != 0:  # an object this clone does not hold (large files)
            return None
        try:
            return proc.stdout.decode()
        except UnicodeDecodeError:
            return None


class DirTree:
    """Files of a work tree."""

    def __init__(self, root: str, commit: str | None):
        self.root = Path(root)
        if commit is None:
            try:
                commit = subprocess.run(
                    ["git", "-C", str(self.root), "rev-parse", "HEAD"], capture_output=True, check=True
                ).stdout.decode().strip()
            except (subprocess.CalledProcessError, FileNotFoundError):
                raise SystemExit("--tree is not a git work tree: give its commit with --commit") from None
        self.commit = commit
        self.sizes = {
            str(p.relative_to(self.root)): p.stat().st_size
            for p in self.root.rglob("*")
            if p.is_file() and ".git" not in p.parts
        }

    def read(self, path: str) -> str | None:
        try:
            return (self.root / path).read_text()
        except (UnicodeDecodeError, OSError):
            return None


# ---------------------------------------------------------------------------
# Finding modules


def looks_like_module(text: str) -> bool:
    """XLA reads a text as a module (not a single instruction) when its first token is
    `HloModule` or `ENTRY` or its second token is `{`; the rest are single instructions."""
    body = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S).lstrip()
    if body.startswith(("HloModule", "ENTRY")):
        return True
    return re.match(r"%?[A-Za-z_][\w.\-]*\s*\{", body) is not None


def modules_of_hlo_file(path: str, text: str) -> list[Module]:
    out = []
    pieces = _LIT_SPLIT.split(text)
    line = 1
    for k, piece in enumerate(pieces):
        if piece.strip() and looks_like_module(piece):
            name = Path(path).stem + (f".part{k}" if len(pieces) > 1 else "")
            out.append(Module(piece, path, line, name, "hlo_file"))
        line += piece.count("\n") + 1
    return out


_HAS_SUBSTR = re.compile(r'HasSubstr\(\s*((?:"(?:[^"\\\n]|\\.)*"\s*)+)\)')
_EXPECTS_ERROR = re.compile(r"(?:ASSERT|EXPECT)_FALSE\(\s*\w+(?:\.status\(\))?\.ok\(\)\s*\)|StatusIs\(|IsOkAndHolds\(false\)")
_MESSAGE_OF_STATUS = re.compile(r"status\(\)\.message\(\)|status\.message\(\)")
_EXPECTS_OK = re.compile(r"(?:ASSERT|EXPECT)_TRUE\(\s*\w+(?:\.status\(\))?\.ok\(\)\s*\)|(?:TF_)?(?:ASSERT|EXPECT)_OK\(\s*verifier\(\)")


def test_expectations(body: str) -> dict | None:
    """What a test asserts after handing a module to XLA (read from its source, up to the next test):
    `{"error": True, "messages": [...HasSubstr texts...]}`, `{"error": False}`, or None when unclear."""
    messages = ["".join(re.findall(r'"((?:[^"\\\n]|\\.)*)"', m.group(1))) for m in _HAS_SUBSTR.finditer(body)]
    if _EXPECTS_ERROR.search(body):
        return {"error": True, "messages": messages}
    if _EXPECTS_OK.search(body):
        return {"error": False}
    if messages and _MESSAGE_OF_STATUS.search(body):
        return {"error": True, "messages": messages}  # EXPECT_THAT(...status().message(), HasSubstr(...))
    return None


def modules_of_cpp_file(path: str, text: str) -> list[Module]:
    headers = [(m.start(), f"{m.group(2)}.{m.group(3)}") for m in _TEST_HEADER.finditer(text)]
    out = []
    for m in _RAW_STRING.finditer(text):
        body = m.group(2)
        if m.group(1).lower() in ("pb", "mlir", "json"):
            continue
        if not looks_like_module(body) or _PLACEHOLDER.search(body):
            continue
        before = text[max(0, m.start() - 200) : m.start()]
        after = text[m.end() : m.end() + 40].lstrip()
        if _FORMATTERS.search(before) or before.rstrip().endswith("+") or after.startswith("+"):
            continue  # a piece of a module that the test assembles
        test = None
        for start, name in headers:
            if start > m.start():
                break
            test = name
        case = _CASE_NAME.search(before)
        if case is not None:
            test = f"{test}[{case.group(1)}]" if test else case.group(1)
        call = _VERIFIED.search(text, m.end(), m.end() + 600)
        next_test = [start for start, _ in headers if start > m.end()]
        rest = text[m.end() : next_test[0] if next_test else len(text)]
        out.append(
            Module(
                body, path, text.count("\n", 0, m.start(2)) + 1, test or Path(path).stem, "cpp_raw_string",
                call.group(1) if call else None, test_expectations(rest),
            )
        )
    return out


def _matches(path: str, pattern: str) -> bool:
    """fnmatch per path segment: `*` does not cross a `/`."""
    parts, pats = path.split("/"), pattern.split("/")
    return len(parts) == len(pats) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, pats))


def select(tree) -> list[Module]:
    modules: list[Module] = []
    seen_paths: set[str] = set()
    for pattern, cap in CPP_SELECTION:
        for path in sorted(p for p in tree.sizes if _matches(p, pattern)):
            if path in seen_paths:
                continue
            seen_paths.add(path)
            text = tree.read(path)
            if text is None:
                continue
            found = modules_of_cpp_file(path, text)
            modules.extend(found if cap is None else found[:cap])
    for path in sorted(p for p in tree.sizes if p.endswith(".hlo") and p.startswith("xla/")):
        if tree.sizes[path] > HLO_FILE_LIMIT and path not in HLO_FILE_EXTRA:
            continue
        text = tree.read(path)
        if text is None or "\0" in text:
            continue
        modules.extend(modules_of_hlo_file(path, text))
    # The same text in several tests is kept once (the first place it appears).
    unique: dict[str, Module] = {}
    for mod in modules:
        if len(mod.text) <= MAX_MODULE_BYTES:
            unique.setdefault(mod.text, mod)
    return list(unique.values())


# ---------------------------------------------------------------------------
# Labelling with XLA's parser (in a child process: XLA may abort on odd input)


def _label_worker(conn) -> None:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from jaxlib import _hlo

    while True:
        text = conn.recv()
        if text is None:
            return
        try:
            _hlo.hlo_module_from_text(text)
            conn.send(("accepted", ""))
        except Exception as err:  # jaxlib raises RuntimeError("INVALID_ARGUMENT: ...")
            conn.send(("rejected", str(err)))


def label(modules: list[Module]) -> list[tuple[str, str]]:
    ctx = mp.get_context("spawn")
    results: list[tuple[str, str]] = []
    proc = conn = None
    for k, mod in enumerate(modules):
        if k and k % 200 == 0:
            print(f"  labelled {k}/{len(modules)}", file=sys.stderr)
        if proc is None:
            conn, child = ctx.Pipe()
            proc = ctx.Process(target=_label_worker, args=(child,), daemon=True)
            proc.start()
            child.close()  # the worker holds the other end: its death closes the pipe
        conn.send(mod.text)
        try:
            if conn.poll(60):
                results.append(conn.recv())
                continue
        except (EOFError, ConnectionResetError):
            pass
        results.append(("aborted", "XLA's parser ended the process"))
        proc.kill()
        proc.join()
        proc = None
    if proc is not None:
        conn.send(None)
        proc.join(10)
    return results


def jaxlib_version() -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import jaxlib; print(jaxlib.__version__)"], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


# ---------------------------------------------------------------------------
# Writing


def file_name(mod: Module, taken: set[str]) -> str:
    stem = mod.path.removeprefix("xla/").rsplit(".", 1)[0].replace("/", "__")
    test = re.sub(r"[^\w.\-\[\]]", "_", mod.test)
    base = f"{stem}__{test}" if mod.how == "cpp_raw_string" else stem + mod.test.removeprefix(Path(mod.path).stem)
    if len(base) > 140:
        base = base[:120] + "_" + hashlib.sha1(base.encode()).hexdigest()[:8]
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}.{k}"
    taken.add(name)
    return name + ".hlo"


def first_error(message: str) -> dict:
    """The first `was parsing L:C: error: ...` of XLA's message, as fields."""
    m = re.search(r"was parsing (\d+):(\d+): error: ([^\n]*)", message)
    if m is None:
        return {"message": message.strip().splitlines()[0] if message.strip() else ""}
    return {"line": int(m.group(1)), "column": int(m.group(2)), "message": m.group(3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--git-dir", help="a (bare) git directory of XLA")
    src.add_argument("--tree", help="a work tree of XLA")
    ap.add_argument("--rev", default="HEAD", help="revision to read from --git-dir")
    ap.add_argument("--commit", help="the commit of --tree (default: its git HEAD)")
    ap.add_argument("--repository", default="openxla/xla", help="where the tree comes from, for the manifest")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "hlo_fixtures" / "xla_tests"))
    args = ap.parse_args()

    tree = GitTree(args.git_dir, args.rev) if args.git_dir else DirTree(args.tree, args.commit)
    modules = select(tree)
    print(f"{len(modules)} modules from {len({m.path for m in modules})} files of {args.repository}@{tree.commit[:12]}", file=sys.stderr)
    verdicts = label(modules)

    out = Path(args.out)
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as tmp:
        stage = Path(tmp) / "xla_tests"
        (stage / "modules").mkdir(parents=True)
        taken: set[str] = set()
        entries = []
        for mod, (verdict, message) in zip(modules, verdicts):
            name = file_name(mod, taken)
            (stage / "modules" / name).write_text(mod.text)
            entry = {
                "file": f"modules/{name}",
                "path": mod.path,
                "line": mod.line,
                "test": mod.test,
                "source_kind": mod.how,
                "xla_test_call": mod.xla_call,
                "xla_parser": verdict,
            }
            if mod.expects is not None:
                entry["xla_test_expects"] = mod.expects
            if verdict == "rejected":
                entry["xla_error"] = first_error(message)
            entries.append(entry)
        manifest = {
            "repository": args.repository,
            "commit": tree.commit,
            "license": "Apache-2.0",
            "labelled_with": f"jaxlib {jaxlib_version()} hlo_module_from_text",
            "generator": "scripts/extract_xla_hlo_tests.py",
            "modules": entries,
        }
        (stage / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
        (stage / "README.md").write_text(README.format(repository=args.repository, commit=tree.commit, n=len(entries)))
        if out.exists():
            import shutil

            shutil.rmtree(out)
        os.replace(stage, out)
    counts = {v: sum(e["xla_parser"] == v for e in entries) for v in ("accepted", "rejected", "aborted")}
    print(f"wrote {len(entries)} modules ({counts}) to {out}", file=sys.stderr)
    return 0


README = """# HLO modules from XLA's own tests

{n} HLO modules taken verbatim from {repository} at commit `{commit}` (Apache-2.0),
by `scripts/extract_xla_hlo_tests.py`: the `.hlo` test files of XLA's tree (split at
`// -----`) and the HLO strings of selected C++ tests (`R"(...)"` literals that XLA
would read as a module; templates filled in by the test are left out).

`MANIFEST.json` records for every file in `modules/` where it came from (`path`,
`line`, `test`: the enclosing `TEST_F(Suite, Name)`, with a table's case name in
brackets, or the file's name), how the test uses it (`xla_test_call`, e.g.
`ParseAndReturnVerifiedModule`) and what XLA's parser says of it (`xla_parser`:
`accepted` or `rejected`, with XLA's first error in `xla_error`, or `aborted` where
XLA's parser ended the process instead of answering), as labelled by the jaxlib named
in `labelled_with`. `xla_test_expects` is what the test asserts after handing the
module to XLA, read from the test's source: `{{"error": true, "messages": [...]}}` with
the `HasSubstr` texts it expects, or `{{"error": false}}`.

The commit is the one whose parser jaxlib carries, so that each test's expectations
match the labels: jaxlib 0.10.2 reads `mulhi` (added to XLA on 2026-05-22) and
`metadata_payload` (2026-06-02) but not compact get-tuple-element operands
(`%x#0`, 2026-06-16), and `hlo_parser.cc` did not change in between.

`tests/test_hlo_xla_corpus.py` checks that our parser agrees with XLA's on every one.
Regenerate with:

    python scripts/extract_xla_hlo_tests.py --git-dir XLA.git --rev {commit}
"""


if __name__ == "__main__":
    raise SystemExit(main())
