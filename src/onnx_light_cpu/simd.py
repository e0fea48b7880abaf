"""The instruction-set level the kernels use.

The level is the highest one both the CPU and the build support, capped by
``ONNX_LIGHT_CPU_MAX_SIMD=scalar|avx2|avx512|avx512vnni`` (read once, at
import).  ``avx512vnni`` is AVX-512 with the int8 dot product vpdpbusd:
only the int8 engines (MatMulInteger, MatMulNBits and QMoE at accuracy
level 4) have code for it; every other kernel runs its AVX-512 code there.
Adapters read :data:`state.level` on every call and pass it to the cores,
which pick their function once, outside any parallel loop.
"""

from __future__ import annotations

import contextlib
import os

from ._kernels import _cpu

LEVEL_NAMES = ("scalar", "avx2", "avx512", "avx512vnni")
ENV_CAP = "ONNX_LIGHT_CPU_MAX_SIMD"


def _level_from_name(name: str) -> int:
    try:
        return LEVEL_NAMES.index(name.strip().lower())
    except ValueError:
        raise ValueError(
            f"{ENV_CAP}={name!r} is not one of {', '.join(LEVEL_NAMES)}"
        ) from None


class _State:
    """Mutable holder so the level can be capped in tests without re-import."""

    __slots__ = ("level", "max_level")

    def __init__(self) -> None:
        level = _cpu.DETECTED_SIMD_LEVEL
        cap = os.environ.get(ENV_CAP)
        if cap:
            level = min(level, _level_from_name(cap))
        self.max_level = level
        self.level = level


state = _State()


def simd_level() -> str:
    """Name of the instruction-set level in use: 'scalar', 'avx2', 'avx512'
    or 'avx512vnni'."""
    return LEVEL_NAMES[state.level]


def code_level_name(name: str) -> str:
    """The level whose code a kernel without int8 dot products runs at
    level ``name``: 'avx512vnni' runs the AVX-512 code (and names it so in
    its usage path)."""
    return "avx512" if name == "avx512vnni" else name


def available_simd_levels() -> tuple[str, ...]:
    """Every level the kernels may use here, from 'scalar' up to the cap."""
    return LEVEL_NAMES[: state.max_level + 1]


@contextlib.contextmanager
def capped_simd_level(name: str):
    """Run the kernels at most at level ``name`` inside the block (for tests).

    A cap above what the CPU (or the environment's cap) allows keeps that.
    """
    previous = state.level
    state.level = min(state.max_level, _level_from_name(name))
    try:
        yield LEVEL_NAMES[state.level]
    finally:
        state.level = previous
