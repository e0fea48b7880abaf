# omp_get_max_threads() with or without OpenMP (see olc_openmp.h).

cdef extern from "common/olc_openmp.h" nogil:
    int OLC_HAVE_OPENMP
    int omp_get_max_threads()
