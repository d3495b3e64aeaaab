"""The whole simulated pipeline against XLA:GPU's, kernel counts, and where the gap comes from.

Whole pipeline: for each lowered module of the H100 capture (`hlo_fixtures/gpu_h100/*.pre.hlo.gz`),
`simulate_fusion` with its defaults against the module the H100 ran (`.post.hlo.gz`): kernels
(`fusion.kernels_of`, an async fusion counted once) ours and XLA's, by kind of kernel
(`_xla_passes.xla_gpu_kernel_kind`), and how many modules are within 10% of XLA's count.

Pass by pass (`--attribute N`, needs jax's CUDA plugin): N of those programs compiled here,
deviceless, with XLA's module dumped after every pass that changes it
(`--xla_dump_hlo_pass_re=.*`). `simulate_fusion` is run on XLA's module after each pass up to
priority fusion; the change in our kernel count from one dump to the next is put on the pass that
made it (what simulating that pass exactly would change). What is left between our simulation of
XLA's own input to priority fusion and XLA's result here is put on "fusion and after"; the
difference between XLA's result here and the capture's is put on "jax 0.10.2 here / 0.11.2 on the
H100" (the capture's jax).

    PYTHONPATH=. python scripts/bench_pipeline.py                 # whole pipeline, 114 modules
    PYTHONPATH=. python scripts/bench_pipeline.py --no-copy-insertion --no-cse   # without the passes added last
    PYTHONPATH=. python scripts/bench_pipeline.py --gemm-rewrites  # with XLA's GEMM rewriting (off by default)
    PYTHONPATH=. python scripts/bench_pipeline.py --no-simplify     # without XLA's simplifier rules (fusion._simplify)
    PYTHONPATH=. python scripts/bench_pipeline.py --conv-rewrites   # with XLA's convolution passes (fusion._conv_rewrite)
    PYTHONPATH=. python scripts/bench_pipeline.py --triton-softmax   # with SoftmaxRewriterTriton simulated
    PYTHONPATH=. python scripts/bench_pipeline.py --no-constant-folding   # without XLA's HloConstantFolding
    PYTHONPATH=. python scripts/bench_pipeline.py --attribute 24  # + pass by pass on 24 programs
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _bench_common import print_table  # noqa: E402

CAPTURE = ROOT / "hlo_fixtures" / "gpu_h100"
DEVICE = "h100-sxm"
CAPTURE_JAX = "0.11.2"


def _read(path: Path) -> str:
    with gzip.open(path, "rt") as f:
        return f.read()


def xla_kernels(module) -> Counter:
    """XLA:GPU's kernels of an optimized module by kind (an async fusion's start and done: one)."""
    from xla_costmodel.fusion import kernels_of
    from xla_costmodel.fusion.conformance import xla_gpu_kernel_kind

    return Counter(xla_gpu_kernel_kind(k) for k in kernels_of(module) if k.opcode != "async-done")


def our_kernels(module, **options) -> tuple[Counter, object]:
    from xla_costmodel.fusion import kernels_of, simulate_fusion
    from xla_costmodel.fusion.conformance import xla_gpu_kernel_kind

    result = simulate_fusion(module, device=DEVICE, model="xla-gpu", price_totals=False, **options)
    kinds = Counter()
    for k in kernels_of(result.module):
        kind = xla_gpu_kernel_kind(k)
        if kind == "op" and k.opcode in ("dot", "convolution", "custom-call", "sort", "triangular-solve", "cholesky"):
            kind = k.opcode  # the kernels a pass before fusion would have rewritten
        kinds[kind] += 1
    return kinds, result


def within(ours: int, xla: int, tol_percent: int = 10) -> bool:
    # in integers: as a float, 33 / 30 - 1 is 0.10000000000000009, and exactly 10% off would count as a miss
    return xla > 0 and abs(ours - xla) * 100 <= tol_percent * xla


def whole_pipeline(cases: list[str], options: dict) -> list[dict]:
    from xla_costmodel.hlo import parse_hlo

    rows = []
    for n, case in enumerate(cases, 1):
        pre = parse_hlo(_read(CAPTURE / f"{case}.pre.hlo.gz"), source=f"{case}.pre.hlo")
        post = parse_hlo(_read(CAPTURE / f"{case}.post.hlo.gz"), source=f"{case}.post.hlo")
        t0 = time.perf_counter()
        ours, result = our_kernels(pre, **options)
        theirs = xla_kernels(post)
        row = {"module": case, "kernels_ours": sum(ours.values()), "kernels_xla": sum(theirs.values()),
               "simulate_s": time.perf_counter() - t0, "copies_ours": len(result.copies)}
        row["ratio"] = row["kernels_ours"] / row["kernels_xla"]
        row["ours_by_kind"] = dict(ours)
        row["xla_by_kind"] = dict(theirs)
        rows.append(row)
        print(f"[{n}/{len(cases)}] {case}: ours {row['kernels_ours']} / XLA {row['kernels_xla']}", file=sys.stderr)
    return rows


# ---------------------------------------------------------------------------
# pass by pass

_STAGE = re.compile(r"^module_(\d+)\.(.+?)\.(\d{4})\.(.+)\.txt$")
_AFTER = re.compile(r"after_([^.]+)")


def compile_with_all_dumps(program: str, dump_dir: Path, timeout_s: float = 600) -> float:
    """A deviceless XLA:GPU compile of a corpus program with a dump after every pass that changes
    the module (the compile runs in its own process: `XLA_FLAGS` are read once per process)."""
    spec = {"program": program, "args": None, "device": DEVICE, "out": str(dump_dir / "optimized.txt")}
    env = dict(os.environ, JAX_SKIP_CUDA_CONSTRAINTS_CHECK="1", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
               XLA_FLAGS=f"--xla_dump_to={dump_dir} --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=.*")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "xla_costmodel.fusion._conformance", json.dumps(spec)],
                          env=env, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.splitlines() if ln.strip()][-2:]
        raise RuntimeError(f"deviceless compile of {program} failed: {' | '.join(tail)}")
    return time.perf_counter() - t0


def stages_before_fusion(dump_dir: Path) -> list[tuple[str, Path]]:
    """(pass, file) of XLA's module after each pass that changed it, in pipeline order, up to XLA's
    input to priority fusion (the program's module: the one that reaches priority fusion)."""
    groups: dict[str, list[tuple[int, str, Path]]] = defaultdict(list)
    for f in dump_dir.iterdir():
        m = _STAGE.match(f.name)
        if m:
            groups[m.group(1)].append((int(m.group(3)), m.group(4), f))
    for files in groups.values():
        files.sort()
        cut = next((i for i, (_, name, _) in enumerate(files) if "after_priority-fusion" in name), None)
        if cut is None:
            continue
        out = []
        for _, name, f in files[:cut]:
            a = _AFTER.search(name)
            label = a.group(1) if a else name
            if label == "pipeline-start":  # a change no pass dump showed: named by its pipeline
                label = f"{name.split('.')[0]} (at its start)"
            out.append((label, f))
        return out
    raise RuntimeError(f"no module reaches priority fusion in {dump_dir}")


def attribute(case: str, keep: Path | None, options: dict) -> dict:
    """Our kernel count simulated from XLA's module after each pass, for one program, with the run's options."""
    from xla_costmodel.hlo import parse_hlo

    program, _, size = case.partition("@")
    tmp = Path(tempfile.mkdtemp(prefix="xla_passes_")) if keep is None else keep / case
    tmp.mkdir(parents=True, exist_ok=True)
    compile_s = compile_with_all_dumps(f"corpus:{program}:{size}", tmp)
    stages = stages_before_fusion(tmp)
    xla_here = sum(xla_kernels(parse_hlo((tmp / "optimized.txt").read_text())).values())
    xla_h100 = sum(xla_kernels(parse_hlo(_read(CAPTURE / f"{case}.post.hlo.gz"))).values())
    counts: list[tuple[str, int | None]] = []
    seen: dict[str, int | None] = {}
    for name, f in stages:
        text = f.read_text()
        key = hashlib.sha1(text.encode()).hexdigest()
        if key not in seen:
            try:
                seen[key] = sum(our_kernels(parse_hlo(text, source=f.name), **options)[0].values())
            except Exception:  # noqa: BLE001 - a stage our parser or pass refuses is skipped, and counted
                seen[key] = None
        counts.append((name, seen[key]))
    if keep is None:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    deltas: dict[str, int] = defaultdict(int)
    last = next((c for _, c in counts if c is not None), None)
    skipped = 0
    for name, c in counts[1:]:
        if c is None:
            skipped += 1
            continue
        if c != last:
            deltas[name] += c - last
        last = c
    lowered = next((c for _, c in counts if c is not None), None)
    return {"module": case, "compile_s": compile_s, "stages": len(counts), "stages_skipped": skipped,
            "ours_from_lowered": lowered, "ours_from_xla_input": last, "xla_here": xla_here, "xla_h100": xla_h100,
            "deltas": dict(deltas)}


def attribution_table(rows: list[dict]) -> list[dict]:
    """Passes ranked by how many kernels they move in our simulation (summed over modules)."""
    by_pass: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        for name, d in r["deltas"].items():
            by_pass[name].append(d)
        if r["ours_from_xla_input"] is not None:
            by_pass["fusion and after (XLA here vs ours from its input)"].append(
                r["xla_here"] - r["ours_from_xla_input"])
        by_pass[f"jax 0.10.2 here / {CAPTURE_JAX} on the H100"].append(r["xla_h100"] - r["xla_here"])
    out = []
    for name, ds in by_pass.items():
        moved = [d for d in ds if d]
        if not moved:
            continue
        out.append({"pass": name, "modules changed": len(moved), "kernels moved (sum |d|)": sum(abs(d) for d in moved),
                    "net kernels (sum d)": sum(moved)})
    out.sort(key=lambda r: (-r["kernels moved (sum |d|)"], r["pass"]))
    return out


#: The passes `simulate_fusion` can switch, as flags: (flag, option, the value the flag sets).
PASS_SWITCHES = (
    ("--no-copy-insertion", "copy_insertion", False),
    ("--no-cse", "cse", False),
    ("--no-simplify", "simplify", False),
    ("--no-multi-output", "multi_output", False),
    ("--gemm-rewrites", "gemm_rewrites", True),
    ("--no-conv-rewrites", "conv_rewrites", False),
    ("--triton-softmax", "triton_softmax", True),
    ("--no-constant-folding", "constant_folding", False),
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, option, value in PASS_SWITCHES:
        ap.add_argument(flag, action="store_true", help=f"simulate_fusion({option}={value})")
    ap.add_argument("--simplify", action="store_true", help="simulate_fusion(simplify=True): the default (kept for "
                    "older command lines)")
    ap.add_argument("--attribute", type=int, default=0, metavar="N",
                    help="also attribute the gap pass by pass on N programs (every k-th module; a deviceless compile each)")
    ap.add_argument("--modules", default="", help="comma-separated modules (program@size) for --attribute")
    ap.add_argument("--keep-dumps", type=Path, default=None, help="keep the pass dumps under this folder")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    cases = sorted(p.name[: -len(".pre.hlo.gz")] for p in CAPTURE.glob("*.pre.hlo.gz"))
    options = {option: value for flag, option, value in PASS_SWITCHES
               if getattr(args, flag[2:].replace("-", "_"))}
    rows = whole_pipeline(cases, options)
    n_within = sum(within(r["kernels_ours"], r["kernels_xla"]) for r in rows)
    geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    kinds = sorted({k for r in rows for k in (*r["ours_by_kind"], *r["xla_by_kind"])})
    by_kind = [{"kind": k, "ours": sum(r["ours_by_kind"].get(k, 0) for r in rows),
                "XLA (H100)": sum(r["xla_by_kind"].get(k, 0) for r in rows)} for k in kinds]
    summary = {"modules": len(rows), "within 10% of XLA's kernel count": f"{n_within}/{len(rows)}",
               "geometric mean ours/XLA": round(geo, 3), "same count": sum(r["kernels_ours"] == r["kernels_xla"] for r in rows),
               "simulate_fusion options": options or "defaults", "slowest simulation (s)": round(max(r["simulate_s"] for r in rows), 2)}
    out = {"summary": summary, "by_kind": by_kind,
           "modules": [{k: v for k, v in r.items() if not k.endswith("_by_kind")} for r in rows]}

    if args.attribute or args.modules:
        from xla_costmodel.gpu_compile import gpu_compile_unavailable_reason

        reason = gpu_compile_unavailable_reason()
        if reason is not None:
            print(f"bench_pipeline: --attribute needs XLA:GPU's compiler: {reason}", file=sys.stderr)
            return 2
        if args.modules:
            picked = [m.strip() for m in args.modules.split(",") if m.strip()]
            unknown = [m for m in picked if m not in cases]
            if unknown:
                print(f"bench_pipeline: --modules: not in the capture: {', '.join(unknown)}", file=sys.stderr)
                return 2
        else:
            step = max(1, len(cases) // args.attribute)
            picked = cases[::step][: args.attribute]
        att = []
        for n, case in enumerate(picked, 1):
            try:
                att.append(attribute(case, args.keep_dumps, options))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(f"[{n}/{len(picked)}] {case}: {exc}", file=sys.stderr)
                continue
            a = att[-1]
            print(f"[{n}/{len(picked)}] {case}: ours from lowered {a['ours_from_lowered']}, from XLA's input "
                  f"{a['ours_from_xla_input']}, XLA here {a['xla_here']}, H100 {a['xla_h100']}", file=sys.stderr)
        out["attribution"] = attribution_table(att)
        out["attributed_modules"] = att
        out["attribution_summary"] = {
            "programs": len(att),
            "ours from the lowered module within 10% of XLA here": sum(
                within(a["ours_from_lowered"], a["xla_here"]) for a in att if a["ours_from_lowered"]),
            "ours from XLA's input to priority fusion within 10% of XLA here": sum(
                within(a["ours_from_xla_input"], a["xla_here"]) for a in att if a["ours_from_xla_input"]),
            "XLA here within 10% of the H100's": sum(within(a["xla_here"], a["xla_h100"]) for a in att),
        }

    if args.json:
        print(json.dumps(out, indent=1, default=str))
        return 0
    for k, v in summary.items():
        print(f"{k}: {v}")
    print()
    import pandas as pd

    print_table("kernels by kind, all modules", pd.DataFrame(by_kind), index=False)
    worst = sorted(out["modules"], key=lambda r: -abs(math.log(r["ratio"])))[:15]
    print_table("furthest from XLA's count", pd.DataFrame(worst), index=False)
    if "attribution" in out:
        for k, v in out["attribution_summary"].items():
            print(f"{k}: {v}")
        print_table("passes by kernels they move in our simulation", pd.DataFrame(out["attribution"]), index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
