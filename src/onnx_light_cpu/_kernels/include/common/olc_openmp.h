/* OpenMP entry points, or serial stand-ins when the build has no OpenMP. */
#ifndef OLC_OPENMP_H
#define OLC_OPENMP_H

#ifdef _OPENMP
#include <omp.h>
#define OLC_HAVE_OPENMP 1
#else
#define OLC_HAVE_OPENMP 0
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
#endif

#endif
