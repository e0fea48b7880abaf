"""setup.py lists, for each extension, every header and .pxd it uses, so
that editing a shared header rebuilds the extensions that include it."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
INCLUDE = re.compile(r'(?:extern from|#include)\s+"(olc_\w+\.h)"')


def _setup_namespace(monkeypatch) -> dict:
    """setup.py's definitions (CORES, KERNELS, _dependencies...), without
    running setup()."""
    pytest.importorskip("Cython")  # setup.py's build requirement (absent after `pip install .`)
    monkeypatch.chdir(ROOT)  # setup.py names its paths from the root
    ns: dict = {}
    source = (ROOT / "setup.py").read_text().split('if sys.platform == "win32"')[0]
    exec(compile(source, "setup.py", "exec"), ns)
    return ns


def test_every_header_a_core_includes_is_a_dependency(monkeypatch):
    ns = _setup_namespace(monkeypatch)
    include_dir = ROOT / ns["KERNELS"] / "include"
    for core in ns["CORES"]:
        pyx = ROOT / ns["KERNELS"] / f"{core}.pyx"
        deps = {pathlib.Path(d).name for d in ns["_dependencies"](f"{ns['KERNELS']}/{core}.pyx")}
        todo, seen = INCLUDE.findall(pyx.read_text()), set()
        while todo:  # the closure over #include
            header = todo.pop()
            assert header in deps, (core, header)
            seen.add(header)
            todo += [h for h in INCLUDE.findall((include_dir / header).read_text())
                     if h not in seen]
    unary = ns["_dependencies"](f"{ns['KERNELS']}/unary.pyx")
    assert {"olc_math.h", "olc_cpu.h", "olc_unary.h"} <= {pathlib.Path(d).name for d in unary}


def test_every_core_with_parallel_loops_binds_the_pool(monkeypatch):
    """A core whose C calls olc_parallel_for (itself or through a header)
    binds the shared pool at import, else its loops silently run serially."""
    ns = _setup_namespace(monkeypatch)
    unbound = []
    for core in ns["CORES"]:
        pyx = ROOT / ns["KERNELS"] / f"{core}.pyx"
        deps = ns["_dependencies"](f"{ns['KERNELS']}/{core}.pyx")
        texts = [pyx.read_text()] + [pathlib.Path(d).read_text() for d in deps
                                     if not d.endswith(("olc_pool.h", "olc_pool.pxd"))]
        if core != "_cpu" and any("olc_parallel_for(" in t for t in texts):
            if "olc_pool_import()" not in texts[0]:
                unbound.append(core)
    assert unbound == []


def test_no_openmp_loops_left():
    """Every parallel loop runs on the pool (olc_pool.h), whose caller never
    waits for a worker that has not started; an OpenMP region would."""
    kernels = ROOT / "src" / "onnx_light_cpu" / "_kernels"
    construct = re.compile(
        r"\bprange\b|#\s*pragma\s+omp\s+(?!simd)|\bthreadid\(|omp_get_thread_num")
    found = [str(p.relative_to(kernels)) for p in kernels.rglob("*")
             if p.suffix in (".pyx", ".pxd", ".h") and construct.search(p.read_text())]
    assert found == []
