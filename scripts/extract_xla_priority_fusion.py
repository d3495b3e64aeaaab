#!/usr/bin/env python
"""Extract the HLO and FileCheck patterns of XLA's `priority_fusion_test.cc` into `tests/data/xla_priority_fusion/`.

Reads the test file from a git directory holding XLA's history (a clone or a
bare mirror of openxla/xla or a fork carrying it) at a given commit, and writes
for every `TEST_F` of the file:

- `<Class>.<TestName>.hlo`: the HLO module the test parses, verbatim but
  dedented (for
  `LimitNumberOfParameters`, whose module the test builds in a loop, the
  module that loop builds);
- `<Class>.<TestName>.filecheck`: the FileCheck pattern the test runs on the fused
  module, verbatim, where it has one;
- `SOURCE.json`: repository, path, commit, licence, and per test its line,
  fixture class and files.

What each test expects (its `EXPECT_THAT` / `GmockMatch` / `IsOkAndHolds`
assertions and the options it sets) is written by hand, in XLA's terms, in
`cases.json` next to them; this script does not touch that file.

    python scripts/extract_xla_priority_fusion.py --git-dir PATH/TO/xla.git \
        [--commit 6b73c4c49eb0c5aee1963c1e34c7cc8ba92ac202] [--out tests/data/xla_priority_fusion]

The files are XLA's (Apache-2.0): data for checking, not code.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_COMMIT = "6b73c4c49eb0c5aee1963c1e34c7cc8ba92ac202"
TEST_PATH = "xla/backends/gpu/transforms/priority_fusion_test.cc"
MAX_OPERANDS_AND_OUTPUTS = 96  # MaxOperandsAndOutputsPerFusion() in gpu_fusible.h

_TEST = re.compile(r"^TEST_F\((\w+),\s*(\w+)\)\s*\{", re.M)
_RAW = re.compile(r'R"(\w*)\((.*?)\)\1"', re.S)


def _limit_number_of_parameters() -> str:
    """The module `LimitNumberOfParameters` builds: a chain of 96 scalar adds, one parameter each."""
    lines = ["HloModule m", "", "ENTRY main {", "add0 = f32[] parameter(0)"]
    for i in range(1, MAX_OPERANDS_AND_OUTPUTS + 1):
        lines.append(f"p{i} = f32[] parameter({i})")
        lines.append(f"add{i} = f32[] add(add{i - 1}, p{i})")
    return "\n".join(lines) + "\n}"


def split_tests(source: str) -> list[tuple[str, str, int, str]]:
    """`(fixture class, test name, line, body)` for every `TEST_F` of `source`."""
    heads = list(_TEST.finditer(source))
    out = []
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(source)
        out.append((m.group(1), m.group(2), source.count("\n", 0, m.start()) + 1, source[m.end():end]))
    return out


def extract(source: str) -> dict[str, dict]:
    """Per test (`Class.Name`): its class, line, HLO text and FileCheck pattern (None where it has none)."""
    tests = {}
    for cls, name, line, body in split_tests(source):
        strings = [m.group(2) for m in _RAW.finditer(body)]
        checks = [s for s in strings if "CHECK" in s]
        hlo = [s for s in strings if "ENTRY" in s and "CHECK" not in s]
        if name == "LimitNumberOfParameters":
            hlo = [_limit_number_of_parameters()]
        if len(hlo) != 1 or len(checks) > 1:
            raise SystemExit(f"{name}: expected one HLO module and at most one FileCheck pattern, "
                             f"found {len(hlo)} and {len(checks)}")
        key = f"{cls}.{name}"  # gtest's full name: two classes both have a DoNotFuseIntoRoot
        if key in tests:
            raise SystemExit(f"{key}: defined twice")
        tests[key] = {"class": cls, "line": line, "hlo": hlo[0], "filecheck": checks[0] if checks else None}
    return tests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True, help="a git directory with XLA's history")
    parser.add_argument("--commit", default=DEFAULT_COMMIT)
    parser.add_argument("--repository", default="openxla/xla", help="recorded as the source repository")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "xla_priority_fusion")
    args = parser.parse_args(argv)

    try:
        source = subprocess.run(
            ["git", f"--git-dir={args.git_dir}", "show", f"{args.commit}:{TEST_PATH}"],
            check=True, capture_output=True, text=True,
        ).stdout
        commit = subprocess.run(
            ["git", f"--git-dir={args.git_dir}", "rev-parse", args.commit],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    except subprocess.CalledProcessError as e:
        print(f"extract_xla_priority_fusion: git: {e.stderr.strip()}", file=sys.stderr)
        return 2
    tests = extract(source)
    args.out.mkdir(parents=True, exist_ok=True)
    index = {}
    for name, t in tests.items():
        # Dedented (the test indents its raw strings); otherwise verbatim.
        (args.out / f"{name}.hlo").write_text(textwrap.dedent(t["hlo"]).strip("\n") + "\n")
        entry = {"class": t["class"], "line": t["line"], "hlo": f"{name}.hlo", "filecheck": None}
        if t["filecheck"] is not None:
            (args.out / f"{name}.filecheck").write_text(textwrap.dedent(t["filecheck"]).strip("\n") + "\n")
            entry["filecheck"] = f"{name}.filecheck"
        index[name] = entry
    meta = {
        "repository": args.repository,
        "path": TEST_PATH,
        "commit": commit,
        "license": "Apache-2.0",
        "tests": index,
    }
    (args.out / "SOURCE.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{len(tests)} tests from {args.repository}@{commit[:12]}:{TEST_PATH} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
