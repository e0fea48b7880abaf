# cython: language_level=3
"""What this build and this CPU offer: instruction-set level and OpenMP."""

from olc_openmp cimport OLC_HAVE_OPENMP, omp_get_max_threads

from olc_cpu cimport OLC_HAVE_AVX512, olc_detect_simd_level

#: Highest level the CPU and the build support (0 scalar, 1 avx2, 2 avx512,
#: 3 avx512vnni).
DETECTED_SIMD_LEVEL = olc_detect_simd_level()
#: Whether the AVX-512 paths were compiled in.
BUILT_WITH_AVX512 = bool(OLC_HAVE_AVX512)
#: Whether the cores were compiled with OpenMP.
BUILT_WITH_OPENMP = bool(OLC_HAVE_OPENMP)


def openmp_max_threads():
    """``omp_get_max_threads()``: OMP_NUM_THREADS or a threadpoolctl limit."""
    return omp_get_max_threads()
