/* The parallel loop every core uses: olc_parallel_for(ntasks, fn, arg, threads)
 * runs fn(arg, task, slot) once for each task in [0, ntasks).
 *
 * Why not OpenMP: an OpenMP region ends at a barrier that waits for every
 * team thread, so a worker asleep on an idle CPU or descheduled behind
 * another process stalls the caller for a wake-up or a time slice
 * (0.5-0.8 ms measured here, per region).  Here the calling thread claims
 * tasks itself, workers that are awake claim tasks too, and the call returns
 * once every claimed task is done: a worker that has not started costs
 * nothing (docs/ARCHITECTURE.md, "Threads").
 *
 * Contract for callers:
 * - tasks write disjoint outputs and each task's result depends only on its
 *   index (fixed chunk boundaries), so results are the same whoever runs a
 *   task and at any thread count;
 * - ``slot`` (0 for the caller, 1 .. threads-1 for workers) identifies the
 *   running thread for per-thread scratch; two tasks never run at once on
 *   one slot;
 * - fn must not raise or longjmp; it may call olc_parallel_for again (the
 *   inner call then runs serially in the calling task).
 *
 * The pool itself lives in one extension (_cpu, olc_pool_impl.h); every other
 * extension binds to it once at import through olc_pool.pxd, so all cores
 * share one set of workers.  Unbound (or threads <= 1), the loop is serial. */
#ifndef OLC_POOL_H
#define OLC_POOL_H

#include <stddef.h>

typedef void (*olc_task_fn)(void *arg, ptrdiff_t task, int slot);
typedef void (*olc_pool_run_fn)(ptrdiff_t ntasks, olc_task_fn fn, void *arg, int threads);

/* Set by olc_pool_bind at module import; one copy per extension module. */
static olc_pool_run_fn olc_pool_run = NULL;

static inline void olc_pool_bind(void *run) { olc_pool_run = (olc_pool_run_fn)run; }

/* Every task in order on the calling thread (slot 0). */
static inline void olc_run_serially(ptrdiff_t ntasks, olc_task_fn fn, void *arg) {
    for (ptrdiff_t t = 0; t < ntasks; ++t)
        fn(arg, t, 0);
}

static inline void olc_parallel_for(ptrdiff_t ntasks, olc_task_fn fn, void *arg, int threads) {
    if (threads > 1 && ntasks > 1 && olc_pool_run != NULL)
        olc_pool_run(ntasks, fn, arg, threads);
    else
        olc_run_serially(ntasks, fn, arg);
}

#endif
