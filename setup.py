"""Build the Cython cores of onnx_light_cpu.

The generated C files are compiled for the baseline x86-64 instruction set:
AVX2 and AVX-512 code lives in headers, inside functions that carry their
own ``target`` attribute, and is selected at run time.  A host-specific
``-march`` flag or ``-mavx2`` on a whole Cython file would let gcc
vectorise module initialisation with AVX2 and crash older CPUs with SIGILL.
"""

import glob
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = "src/onnx_light_cpu/_kernels"
# Every .pyx of the kernels folder (a family's core) and of its engines/
# subfolder (cores several families share) is one extension module, named
# by its path: "unary", "engines/gemm".
CORES = sorted(os.path.relpath(os.path.splitext(p)[0], KERNELS)
               for p in glob.glob(os.path.join(KERNELS, "*.pyx"))
               + glob.glob(os.path.join(KERNELS, "engines", "*.pyx")))


def _compiler():
    return os.environ.get("CC") or sysconfig.get_config_var("CC").split()[0] or "cc"


def _compiles(source, flags):
    """True when the C compiler accepts ``source`` with ``flags``."""
    tmp = tempfile.mkdtemp()
    try:
        path = os.path.join(tmp, "probe.c")
        with open(path, "w") as f:
            f.write(source)
        cmd = [_compiler(), *flags, path, "-o", os.path.join(tmp, "probe")]
        return subprocess.run(cmd, capture_output=True).returncode == 0
    except OSError:
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


OPENMP_PROBE = """
#include <omp.h>
int main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }
"""

AVX512_PROBE = """
#include <immintrin.h>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
static float f(const float *x) {
    __m512 v = _mm512_loadu_ps(x);
    return _mm512_reduce_add_ps(_mm512_fmadd_ps(v, v, v));
}
int main(void) { float x[16] = {0}; return (int)f(x); }
"""


def _build_flags():
    compile_args = ["-O3", "-fno-strict-aliasing", "-Wno-unused-function"]
    link_args = []
    macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
    if os.environ.get("ONNX_LIGHT_CPU_NO_OPENMP") != "1" and _compiles(
        OPENMP_PROBE, ["-fopenmp"]
    ):
        compile_args.append("-fopenmp")
        link_args.append("-fopenmp")
    else:
        print("onnx_light_cpu: building without OpenMP (kernels run serially)")
    is_x86 = platform.machine().lower() in ("x86_64", "amd64")
    if is_x86 and _compiles(AVX512_PROBE, []):
        macros.append(("OLC_HAVE_AVX512", "1"))
    elif is_x86:
        print("onnx_light_cpu: the compiler has no AVX-512 support, paths skipped")
    return compile_args, link_args, macros


# A header named by an include, a Cython extern, or the body file a header
# includes once per level (common/olc_each_level.h).
HEADER = re.compile(r'(?:extern from|#include|#define OLC_BODY\w*)\s+"([\w./]+\.h)"')
PXD = re.compile(r"^\s*(?:from\s+(\w+)\s+cimport|cimport\s+(\w+))", re.M)
INCLUDE = os.path.join(KERNELS, "include")
# Every folder of include/: the .pxd beside each header is found by its
# stem (``from olc_unary cimport ...``).
PXD_DIRS = sorted(root for root, _, files in os.walk(INCLUDE)
                  if any(f.endswith(".pxd") for f in files))


def _dependencies(pyx: str) -> list[str]:
    """The headers (transitively) and .pxd files a core's source uses, so
    that editing a shared header rebuilds every extension that includes it
    (setuptools compares only the listed files' times).  Header names are
    relative to include/ (``"common/olc_cpu.h"``)."""
    found, todo = set(), [pyx]
    while todo:
        with open(todo.pop()) as f:
            text = f.read()
        paths = [os.path.join(INCLUDE, h) for h in HEADER.findall(text)]
        for names in PXD.findall(text):
            paths += [os.path.join(d, f"{n}.pxd") for n in names if n for d in PXD_DIRS]
        for path in paths:
            if os.path.exists(path) and path not in found:
                found.add(path)
                todo.append(path)
    return sorted(found)


def _extensions():
    compile_args, link_args, macros = _build_flags()
    include = [numpy.get_include(), INCLUDE]
    exts = [
        Extension(
            f"onnx_light_cpu._kernels.{name.replace('/', '.')}",
            [f"{KERNELS}/{name}.pyx"],
            include_dirs=include,
            define_macros=macros,
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            depends=_dependencies(f"{KERNELS}/{name}.pyx"),
        )
        for name in CORES
    ]
    return cythonize(
        exts,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
        include_path=PXD_DIRS,
        quiet=True,
    )


if sys.platform == "win32":
    raise SystemExit("onnx_light_cpu supports gcc/clang builds (Linux, macOS)")

setup(ext_modules=_extensions())
