# OpenMP helpers that compile with or without OpenMP (see olc_openmp.h).
# Cython turns ``prange`` into a serial loop when the C compiler has no
# OpenMP, so only these runtime calls need stand-ins.

cdef extern from "common/olc_openmp.h" nogil:
    int OLC_HAVE_OPENMP
    int omp_get_max_threads()
    int omp_get_thread_num()
