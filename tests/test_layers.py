"""The package's folders import one way only: registry -> naive -> ops ->
(context, usage, memory, reference, simd, threads, _kernels); nothing imports
back up, so there is no import cycle between folders."""

from __future__ import annotations

import ast
import pathlib

import onnx_light_cpu

ROOT = pathlib.Path(onnx_light_cpu.__file__).parent
# A layer may import only the layers after it in this order.
ORDER = ["__main__", "cli", "__init__", "generation", "fusion", "registry", "support",
         "gradients", "memory_estimate", "schemas", "naive", "ops",
         "reference", "context", "usage", "memory", "simd", "threads", "_kernels"]


def _layer_imports() -> set[tuple[str, str]]:
    edges = set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        layer = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            package = list(rel.parts[:-1])[:len(rel.parts) - node.level]
            module = package + (node.module.split(".") if node.module else [])
            if module:
                targets = [module[0]]
            else:  # "from . import x": a module or package of the root, else a name of __init__
                targets = [a.name if (ROOT / a.name).is_dir() or (ROOT / f"{a.name}.py").exists()
                           else "__init__" for a in node.names]
            edges.update((layer, t) for t in targets if t != layer)
    return edges


def test_layers_import_downwards_only():
    edges = _layer_imports()
    assert edges, "no relative import found: the check reads nothing"
    upward = sorted((a, b) for a, b in edges
                    if a in ORDER and b in ORDER and ORDER.index(b) < ORDER.index(a))
    assert not upward, f"imports back up: {upward}"
    unknown = sorted({x for edge in edges for x in edge} - set(ORDER))
    assert not unknown, f"layers missing from ORDER: {unknown}"
