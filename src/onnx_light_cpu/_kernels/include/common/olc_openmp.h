/* omp_get_max_threads(), or a stand-in when the build has no OpenMP.  The
 * loops run on the package's pool (olc_pool.h); OpenMP is linked only for
 * its thread-count default, which OMP_NUM_THREADS and threadpoolctl set. */
#ifndef OLC_OPENMP_H
#define OLC_OPENMP_H

#ifdef _OPENMP
#include <omp.h>
#define OLC_HAVE_OPENMP 1
#else
#define OLC_HAVE_OPENMP 0
static inline int omp_get_max_threads(void) { return 1; }
#endif

#endif
