/* The worker pool behind olc_parallel_for (olc_pool.h).  Compiled into the
 * _cpu extension only, which hands olc_pool_run_tasks to the others.
 *
 * One job at a time, announced through one 64-bit word, `state`: the job's
 * generation in the high half, 0 while it is open (OLC_POOL_CLOSED while
 * the caller sets it up).  Each thread of the job (slot 0 the caller, 1 ..
 * slots the workers) owns a contiguous range of its tasks, claimed from the
 * front; one whose range is empty steals from the back of the others'.  A
 * thread thus writes the same part of the outputs on every run when none
 * is late: with one shared counter the parts fell to whichever thread came
 * first, and the next run or layer found the lines in the other core's
 * cache (a 1x1 Conv 32 -> 192 at 28x28, 2 threads, workers spinning:
 * 95-101 us, 36-53 with the ranges; 64 at 1 thread; docs/ARCHITECTURE.md,
 * "Threads").  A range is one 64-bit word, front and back task numbers
 * counted across jobs (`base`: the number of the job's first task), so
 * that numbers of two jobs differ; claiming is a compare-and-swap of that
 * word after `state` was seen still open for the job: a worker that read
 * an old job and was descheduled can never claim a task of a later one,
 * its swap fails.  The caller claims tasks like any worker, then waits
 * only for the tasks workers claimed (`done` counts finished tasks), never
 * for a worker that has not started.
 *
 * A worker waits for the next job spinning for `spin_ns`, then sleeps on a
 * condition variable of its own.  A job wakes only the workers it may use
 * (slots 1..slots), as a binary tree: the caller wakes slots 1 and 2, the
 * worker of slot s wakes 2s + 1 and 2s + 2, each only if asleep.  One
 * condition variable for all, broadcast, woke every worker for every job,
 * also those the job could not use, and queued them on one mutex (on 16
 * cores an 8-layer int4 decode step at 16 threads: 8.0-8.2 ms broadcast,
 * 6.2-7.7 with the tree; docs/ARCHITECTURE.md, "Threads").
 * Spinning saves the wake-up (tens of microseconds a job) while the
 * machine is quiet, but a worker that spins on a CPU another process wants
 * is preempted often and then holds up the task it took, where one that
 * sleeps between jobs has used little CPU and runs at once when woken
 * (measured in docs/ARCHITECTURE.md, "Threads").  So each worker watches
 * how much of the time since it last woke it did not run (wall clock less
 * its CPU time): lost twice for over OLC_POOL_PREEMPTED_NS within
 * OLC_POOL_PREEMPTED_WINDOW_NS, workers spin only OLC_POOL_BACKOFF_SPIN_NS
 * after a job for OLC_POOL_SPIN_BACKOFF_NS (none on their caller's CPU):
 * enough to catch the next job of back-to-back kernels, not to hold a CPU
 * another process wants.  The caller waiting for a task a preempted worker
 * holds spins briefly, then moves that worker to its own CPU and sleeps
 * (olc_pool_pull).  A call from inside a task, or while another thread's
 * job runs, runs serially in its caller.  Jobs after a long wait are not
 * run serially (docs/ARCHITECTURE.md, "Threads": such a stall guard cost
 * more under load than it saved).
 *
 * A worker that wakes on the CPU its caller runs on leaves it for the job
 * (olc_pool_leave_caller_cpu): there it could only run while the caller
 * does not. */
#ifndef OLC_POOL_IMPL_H
#define OLC_POOL_IMPL_H

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "common/olc_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define OLC_POOL_PAUSE() _mm_pause()
#else
#define OLC_POOL_PAUSE() ((void)0)
#endif

#define OLC_POOL_CLOSED 0xFFFFFFFFu
/* A worker spins this long for the next job (ONNX_LIGHT_CPU_SPIN_US), then
   sleeps.  It covers the gap between the parallel kernels of one run (the
   Python between them and the serial kernels): a decode step's products
   follow each other within tens of microseconds. */
#define OLC_POOL_SPIN_NS 200000L
/* A worker that lost its CPU for this long, while it spun or ran tasks,
   was preempted by another process (a scheduler slice is 0.75 ms or more);
   twice within the window, that process keeps the CPU busy.  Once alone
   it is a daemon's turn: on the quiet 2-core VM a worker spinning between
   Abs calls lost its CPU for 0.9 ms about once every 2 s (the machine's
   agent, at a higher priority); with another process spinning on that CPU,
   or busy 2 ms out of 4, every few milliseconds. */
#define OLC_POOL_PREEMPTED_NS 500000L
#define OLC_POOL_PREEMPTED_WINDOW_NS 50000000L
/* How long the workers then spin only briefly: with 1 s, each return to
   spinning under a load busy in bursts cost a pair of stalls. */
#define OLC_POOL_SPIN_BACKOFF_NS 4000000000L
/* A worker's spin after a job meanwhile.  Sleeping at once, every job of
   back-to-back kernels had to wake it: on the 2-core VM with the second
   CPU busy 2 ms out of 4, Abs over 1M float32 at 2 threads took longer
   than at one in 44 % of the calls (a sleeping worker woke 20-100 us late
   in the free halves too), with 50 us of spin in 28 % (the busy halves). */
#define OLC_POOL_BACKOFF_SPIN_NS 50000L
enum { OLC_POOL_MAX_WORKERS = 255 };

static struct {
    _Atomic uint64_t state;        /* generation << 32 | 0 (open) or OLC_POOL_CLOSED */
    _Atomic uint32_t base;         /* the number of the job's first task */
    _Atomic(olc_task_fn) fn;       /* the job, valid while state is open */
    _Atomic(void *) arg;
    _Atomic uint32_t ntasks;
    _Atomic int slots;             /* workers of slot <= slots may claim */
    _Atomic uint32_t done;         /* tasks of the job finished */
    _Atomic int caller_waits;      /* the caller sleeps until `done` is complete */
    _Atomic int caller_cpu;        /* the CPU the job's caller ran on when it opened it */
    _Atomic long spin_ns;
    _Atomic long spin_from;        /* workers spin only briefly before this time */
    _Atomic long preempted_at;     /* when a worker last lost its CPU */
    _Atomic long pulls;            /* workers moved by olc_pool_pull (tests) */
    /* The read-ahead request (olc_pool_read_ahead): `ahead_seq` counts
       the requests, the last one is [ahead_ptr, ahead_ptr + ahead_bytes). */
    _Atomic(const char *) ahead_ptr;
    _Atomic size_t ahead_bytes;
    _Atomic uint32_t ahead_seq;
    _Atomic long ahead_lines;      /* cache lines asked for so far (tests) */
    int started;                   /* workers created (under busy) */
    pthread_mutex_t busy;          /* held by the caller of the running job */
    pthread_mutex_t lock;          /* with finished: the caller's sleep */
    pthread_cond_t finished;
} olc_pool = {
    .spin_ns = OLC_POOL_SPIN_NS,
    .busy = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .finished = PTHREAD_COND_INITIALIZER,
};

/* The range of tasks each slot claims first: front << 32 | back, task
   numbers (task + base, wrapping) front .. back - 1 unclaimed. */
static struct olc_pool_range {
    _Atomic uint64_t fb;
    char pad[56];                  /* ranges on cache lines of their own */
} olc_pool_ranges[OLC_POOL_MAX_WORKERS + 1];

#if defined(__linux__) && defined(CPU_CLR)
#define OLC_POOL_AFFINITY 1
typedef cpu_set_t olc_pool_cpus;
#else
#define OLC_POOL_AFFINITY 0
typedef int olc_pool_cpus;
#endif

/* A worker's bed, by slot (1..started; made before its worker starts). */
static struct olc_pool_bed {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    _Atomic int asleep;
    _Atomic int in_task;           /* the worker runs a task */
    _Atomic int pulled;            /* the caller moved it to its CPU (olc_pool_pull) */
    _Atomic int ready;             /* tid, clock and home are set */
    pid_t tid;
    clockid_t clock;               /* the worker's CPU time */
    long cpu_ns;                   /* the caller's reading of it */
    olc_pool_cpus home;            /* the worker's CPUs when it started */
    char pad[64];                  /* beds on cache lines of their own */
} olc_pool_beds[OLC_POOL_MAX_WORKERS + 1];

/* How long the caller spins for the tasks workers still run before it
   sleeps: four of its own mean task times, within these bounds.  A worker
   that runs finishes its task in about one; one that was preempted on a
   busy CPU may not for milliseconds, and the caller then moves it to its
   own CPU, which it leaves idle while it sleeps (olc_pool_pull). */
enum { OLC_POOL_CALLER_SPIN_MIN_NS = 2000, OLC_POOL_CALLER_SPIN_MAX_NS = 50000 };
/* How long the caller watches the CPU time of the workers that hold tasks
   before it moves those that did not run (olc_pool_pull). */
#define OLC_POOL_PULL_CHECK_NS 10000L

/* Set in workers for good and in a caller while it runs tasks. */
static _Thread_local int olc_pool_inside = 0;

static inline uint32_t olc_pool_generation(uint64_t state) { return (uint32_t)(state >> 32); }
static inline uint32_t olc_pool_next(uint64_t state) { return (uint32_t)state; }

static long olc_pool_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Claims a task of range r of the job whose open `state` is s: from the
   front when it is this thread's own range, else from the back.  1: the
   task's number is in *number; 0: the range is empty or was claimed
   meanwhile; -1: the job is no longer s.  `state` is checked after the
   range is read: a later job closes it before it writes the ranges, so
   the word read is this job's, and a swap of it fails once a later job
   has written its own numbers there. */
static int olc_pool_claim(int r, int own, uint64_t s, uint32_t *number) {
    uint64_t v = atomic_load(&olc_pool_ranges[r].fb);
    if (atomic_load(&olc_pool.state) != s)
        return -1;
    uint32_t front = (uint32_t)(v >> 32), back = (uint32_t)v;
    if (front == back)
        return 0;
    /* each half wraps on its own (numbers run on past 2^32 tasks) */
    uint64_t claimed = own ? (uint64_t)(uint32_t)(front + 1) << 32 | back
                           : (uint64_t)front << 32 | (uint32_t)(back - 1);
    if (!atomic_compare_exchange_strong(&olc_pool_ranges[r].fb, &v, claimed))
        return 0;
    *number = own ? front : back - 1;
    return 1;
}

/* A worker the caller moved to its CPU goes back to its own CPUs. */
static void olc_pool_go_home(int slot) {
#if OLC_POOL_AFFINITY
    struct olc_pool_bed *bed = &olc_pool_beds[slot];
    if (atomic_load(&bed->pulled) && atomic_exchange(&bed->pulled, 0))
        sched_setaffinity(0, sizeof bed->home, &bed->home);
#else
    (void)slot;
#endif
}

static long olc_pool_thread_cpu_ns(clockid_t clock) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0)
        return -1;
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Claim and run tasks of job `generation` until none is left to claim:
   this slot's range first, then the others' from their backs; how many
   this thread ran. */
static long olc_pool_work(uint32_t generation, int slot) {
    long ran = 0;
    for (;;) {
        uint64_t s = atomic_load(&olc_pool.state);
        if (olc_pool_generation(s) != generation || olc_pool_next(s) == OLC_POOL_CLOSED)
            return ran;
        /* Read while the job is open: a later job closes `state` before
           it writes these (olc_pool_claim checks it again). */
        olc_task_fn fn = atomic_load_explicit(&olc_pool.fn, memory_order_acquire);
        void *arg = atomic_load_explicit(&olc_pool.arg, memory_order_acquire);
        uint32_t ntasks = atomic_load_explicit(&olc_pool.ntasks, memory_order_acquire);
        uint32_t base = atomic_load_explicit(&olc_pool.base, memory_order_acquire);
        int slots = atomic_load_explicit(&olc_pool.slots, memory_order_acquire);
        if (slot > slots)
            return ran;
        uint32_t number;
        int found = 0;
        for (int i = 0; i <= slots && found == 0; ++i)
            found = olc_pool_claim((slot + i) % (slots + 1), i == 0, s, &number);
        if (found != 1)
            return ran;
        if (slot)
            atomic_store(&olc_pool_beds[slot].in_task, 1);
        fn(arg, (ptrdiff_t)(uint32_t)(number - base), slot);
        if (slot) {
            atomic_store(&olc_pool_beds[slot].in_task, 0);
            olc_pool_go_home(slot);
        }
        ran++;
        if (atomic_fetch_add(&olc_pool.done, 1) + 1 == ntasks && slot != 0
            && atomic_load(&olc_pool.caller_waits)) {
            pthread_mutex_lock(&olc_pool.lock);
            pthread_cond_signal(&olc_pool.finished);
            pthread_mutex_unlock(&olc_pool.lock);
        }
    }
}

/* Wakes the worker of `slot` if it sleeps (slot <= started). */
static void olc_pool_wake(int slot) {
    struct olc_pool_bed *bed = &olc_pool_beds[slot];
    if (!atomic_load(&bed->asleep))
        return;
    pthread_mutex_lock(&bed->lock);
    pthread_cond_signal(&bed->wake);
    pthread_mutex_unlock(&bed->lock);
}

/* The wake tree: node n (0 the caller) wakes 2n + 1 and 2n + 2 up to
   `slots`, the workers the job may use. */
static void olc_pool_wake_children(int n, int slots) {
    if (2 * n + 1 <= slots)
        olc_pool_wake(2 * n + 1);
    if (2 * n + 2 <= slots)
        olc_pool_wake(2 * n + 2);
}

/* The generation of the open job if it is not `seen`, else `seen`. */
static inline uint32_t olc_pool_new_job(uint32_t seen) {
    uint64_t s = atomic_load(&olc_pool.state);
    return olc_pool_next(s) == OLC_POOL_CLOSED ? seen : olc_pool_generation(s);
}

/* A worker woken on its caller's CPU can only run while the caller does
   not: with the other CPUs busy (another process), the kernel keeps waking
   it there, and two threads cost what one does.  Measured on a 2-core VM,
   Abs over 1M float32 with a process spinning on the second CPU: 186-196
   us at 2 threads where the worker ran on that second CPU, 262-290 (1
   thread: 251-290) where it had settled on the caller's.  Such a worker
   leaves that CPU for the job: olc_pool_leave_caller_cpu takes it out of
   the worker's affinity (1: it did, the affinity before in *saved) and
   olc_pool_restore_cpus puts it back. */
static int olc_pool_leave_caller_cpu(olc_pool_cpus *saved) {
#if OLC_POOL_AFFINITY
    int cpu = sched_getcpu();
    if (cpu < 0 || cpu != atomic_load(&olc_pool.caller_cpu)
        || sched_getaffinity(0, sizeof *saved, saved) != 0)
        return 0;
    cpu_set_t away = *saved;
    CPU_CLR(cpu, &away);
    return CPU_COUNT(&away) > 0 && sched_setaffinity(0, sizeof away, &away) == 0;
#else
    (void)saved;
    return 0;
#endif
}

static void olc_pool_restore_cpus(const olc_pool_cpus *saved) {
#if OLC_POOL_AFFINITY
    sched_setaffinity(0, sizeof *saved, saved);
#else
    (void)saved;
#endif
}

/* Whether this thread runs on the CPU the last job's caller ran on (where
   spinning would take the caller's time). */
static int olc_pool_on_caller_cpu(void) {
#if OLC_POOL_AFFINITY
    return sched_getcpu() == atomic_load(&olc_pool.caller_cpu);
#else
    return 0;
#endif
}

/* A worker's wall clock and CPU time.  Between two readings in which it
   did not sleep (it spun or ran tasks), the wall time it did not run is
   time another thread had its CPU: on the 2-core VM, a thread spinning for
   5 s lost 1.5 ms when the machine was quiet (13 preemptions, by kernel
   threads and daemons; the host's interruptions, which the wall clock
   shows, mostly count as its CPU time) and 2.6 s with another process
   spinning on its CPU. */
struct olc_pool_clocks { long wall, cpu; };

static struct olc_pool_clocks olc_pool_clocks_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (struct olc_pool_clocks){olc_pool_now_ns(), (long)ts.tv_sec * 1000000000L + ts.tv_nsec};
}

/* Whether the worker lost its CPU for over OLC_POOL_PREEMPTED_NS since
   `mark`; after two such losses within OLC_POOL_PREEMPTED_WINDOW_NS the
   workers spin only briefly for OLC_POOL_SPIN_BACKOFF_NS.  The clocks now. */
static struct olc_pool_clocks olc_pool_watch(struct olc_pool_clocks mark) {
    struct olc_pool_clocks now = olc_pool_clocks_now();
    if ((now.wall - mark.wall) - (now.cpu - mark.cpu) > OLC_POOL_PREEMPTED_NS
        && now.wall - atomic_exchange(&olc_pool.preempted_at, now.wall)
           < OLC_POOL_PREEMPTED_WINDOW_NS)
        atomic_store(&olc_pool.spin_from, now.wall + OLC_POOL_SPIN_BACKOFF_NS);
    return now;
}

/* Read-ahead: a memory-bound product (a decode step's weights times one
   row) waits on DRAM, and the serial kernels between two of them (the
   attention, the norms) leave the memory idle.  The product's adapter
   names the weights the next product will stream (olc_pool_read_ahead,
   through EvaluatorContext.streamed), and the worker of slot 1, idle
   meanwhile, prefetches them into the caches until the next job or
   request.  Measured on the 2-core VM, a 896 x 896 float32 product: 128
   us with its weights in DRAM, 42 us in L3 (docs/ARCHITECTURE.md,
   "Threads").  Prefetches, not loads: as fast here, lighter on the CPU,
   and they never fault, so a request may outlive its memory (a request
   and the pointer read with it torn by the next one: a few stray
   prefetches) and no result ever depends on them. */
enum { OLC_POOL_AHEAD_CHUNK = 4096 };
/* The last request the worker of slot 1 took up (only it uses this). */
static uint32_t olc_pool_ahead_seen = 0;

/* Posts a request to prefetch [p, p + n). */
static inline void olc_pool_read_ahead(const void *p, size_t n) {
    atomic_store(&olc_pool.ahead_ptr, (const char *)p);
    atomic_store(&olc_pool.ahead_bytes, n);
    atomic_fetch_add(&olc_pool.ahead_seq, 1);
}

static inline long olc_pool_ahead_lines(void) { return atomic_load(&olc_pool.ahead_lines); }

/* Prefetches request `seq` a chunk at a time while no job after `seen`
   opened and no later request came. */
static void olc_pool_read(uint32_t seen, uint32_t seq) {
    const char *p = atomic_load(&olc_pool.ahead_ptr);
    size_t n = atomic_load(&olc_pool.ahead_bytes);
    long lines = 0;
    for (size_t off = 0; off < n; off += OLC_POOL_AHEAD_CHUNK) {
        if (olc_pool_new_job(seen) != seen || atomic_load(&olc_pool.ahead_seq) != seq)
            break;
        size_t end = off + OLC_POOL_AHEAD_CHUNK < n ? off + OLC_POOL_AHEAD_CHUNK : n;
        for (size_t i = off; i < end; i += 64, ++lines)
            __builtin_prefetch(p + i, 0, 2);   /* into L2 (prefetcht1) */
    }
    atomic_fetch_add(&olc_pool.ahead_lines, lines);
}

/* Waits for a job after generation `seen` and returns its generation:
   spins for spin_ns (at most OLC_POOL_BACKOFF_SPIN_NS while spinning is
   cut short), then sleeps on the worker's bed.  *mark: the clocks when the
   worker last woke or watched. */
static uint32_t olc_pool_await(uint32_t seen, struct olc_pool_bed *bed,
                               struct olc_pool_clocks *mark) {
    long spin = atomic_load(&olc_pool.spin_ns);
    if (mark->wall < atomic_load(&olc_pool.spin_from) && spin > OLC_POOL_BACKOFF_SPIN_NS)
        spin = olc_pool_on_caller_cpu() ? 0 : OLC_POOL_BACKOFF_SPIN_NS;
    long deadline = mark->wall + spin;
    unsigned spins = 0;
    uint32_t job, ahead;
    /* not while spinning is cut short: another process wants the CPU */
    int reads = bed == &olc_pool_beds[1] && mark->wall >= atomic_load(&olc_pool.spin_from);
    while ((job = olc_pool_new_job(seen)) == seen) {
        OLC_POOL_PAUSE();
        if (reads && (ahead = atomic_load(&olc_pool.ahead_seq)) != olc_pool_ahead_seen) {
            olc_pool_ahead_seen = ahead;
            olc_pool_read(seen, ahead);
        }
        if ((++spins & 63) != 0 || olc_pool_now_ns() <= deadline)
            continue;
        olc_pool_watch(*mark);
        /* asleep is set before the job is looked for, and the caller opens
           the job before it looks at asleep: one of the two sees the other
           (sequentially consistent). */
        pthread_mutex_lock(&bed->lock);
        atomic_store(&bed->asleep, 1);
        while ((job = olc_pool_new_job(seen)) == seen)
            pthread_cond_wait(&bed->wake, &bed->lock);
        atomic_store(&bed->asleep, 0);
        pthread_mutex_unlock(&bed->lock);
        *mark = olc_pool_clocks_now();
        break;
    }
    return job;
}

static void *olc_pool_worker(void *slot_as_pointer) {
    int slot = (int)(intptr_t)slot_as_pointer;
    struct olc_pool_bed *bed = &olc_pool_beds[slot];
    olc_pool_inside = 1;
#if OLC_POOL_AFFINITY
    bed->tid = (pid_t)syscall(SYS_gettid);
    if (pthread_getcpuclockid(pthread_self(), &bed->clock) == 0
        && sched_getaffinity(0, sizeof bed->home, &bed->home) == 0)
        atomic_store(&bed->ready, 1);
#endif
    uint32_t seen = olc_pool_generation(atomic_load(&olc_pool.state));
    struct olc_pool_clocks mark = olc_pool_clocks_now();
    for (;;) {
        seen = olc_pool_await(seen, bed, &mark);
        olc_pool_wake_children(slot, atomic_load_explicit(&olc_pool.slots, memory_order_acquire));
        olc_pool_cpus saved;
        int moved = olc_pool_leave_caller_cpu(&saved);
        olc_pool_work(seen, slot);
        if (moved)
            olc_pool_restore_cpus(&saved);
        olc_pool_go_home(slot);
        mark = olc_pool_watch(mark);
    }
    return NULL;
}

/* Create workers up to `wanted` (caller holds busy); how many of them exist. */
static int olc_pool_grow(int wanted) {
    if (wanted > OLC_POOL_MAX_WORKERS)
        wanted = OLC_POOL_MAX_WORKERS;
    while (olc_pool.started < wanted) {
        pthread_attr_t attr;
        pthread_t thread;
        sigset_t all, old;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        struct olc_pool_bed *bed = &olc_pool_beds[olc_pool.started + 1];
        pthread_mutex_init(&bed->lock, NULL);
        pthread_cond_init(&bed->wake, NULL);
        atomic_store(&bed->asleep, 0);
        /* after fork() a bed may still hold a parent's worker's thread id */
        atomic_store(&bed->ready, 0);
        atomic_store(&bed->in_task, 0);
        atomic_store(&bed->pulled, 0);
        sigfillset(&all); /* workers inherit a full mask: signals go to Python's threads */
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int failed = pthread_create(&thread, &attr, olc_pool_worker,
                                    (void *)(intptr_t)(olc_pool.started + 1));
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
        if (failed)
            break;
        olc_pool.started++;
    }
    return olc_pool.started < wanted ? olc_pool.started : wanted;
}

/* Before the caller sleeps for tasks workers hold: a worker whose CPU
   time stands still in the middle of a task was preempted by another
   process; the caller moves it to its own CPU, which it is about to leave
   idle (the kernel's balancing leaves a thread that ran within the last
   0.5 ms where it is, so it waited for the other process's slice).  The
   worker goes back to its CPUs after the task (olc_pool_go_home). */
static void olc_pool_pull(int slots, uint32_t ntasks) {
#if OLC_POOL_AFFINITY
    int cpu = sched_getcpu();
    if (cpu < 0)
        return;
    for (int k = 1; k <= slots; ++k) {
        struct olc_pool_bed *bed = &olc_pool_beds[k];
        bed->cpu_ns = atomic_load(&bed->ready) && atomic_load(&bed->in_task)
                    ? olc_pool_thread_cpu_ns(bed->clock) : -1;
    }
    long until = olc_pool_now_ns() + OLC_POOL_PULL_CHECK_NS;
    while (atomic_load(&olc_pool.done) < ntasks && olc_pool_now_ns() < until)
        OLC_POOL_PAUSE();
    cpu_set_t here;
    CPU_ZERO(&here);
    CPU_SET(cpu, &here);
    for (int k = 1; k <= slots && atomic_load(&olc_pool.done) < ntasks; ++k) {
        struct olc_pool_bed *bed = &olc_pool_beds[k];
        if (bed->cpu_ns < 0 || !atomic_load(&bed->in_task)
            || olc_pool_thread_cpu_ns(bed->clock) != bed->cpu_ns)
            continue;
        if (sched_setaffinity(bed->tid, sizeof here, &here) != 0)
            continue;
        atomic_fetch_add(&olc_pool.pulls, 1);
        /* Moved first, marked after.  The worker clears in_task before it
           looks at pulled, and this looks at in_task after marking: one of
           the two sees the other, so whoever takes the mark back sends
           the worker home (a worker that finished meanwhile never stays
           on this CPU). */
        atomic_store(&bed->pulled, 1);
        if (!atomic_load(&bed->in_task) && atomic_exchange(&bed->pulled, 0))
            sched_setaffinity(bed->tid, sizeof bed->home, &bed->home);
    }
#else
    (void)slots;
    (void)ntasks;
#endif
}

static void olc_pool_run_tasks(ptrdiff_t ntasks, olc_task_fn fn, void *arg, int threads) {
    if (olc_pool_inside || ntasks >= (ptrdiff_t)OLC_POOL_CLOSED
        || pthread_mutex_trylock(&olc_pool.busy) != 0) {
        olc_run_serially(ntasks, fn, arg);
        return;
    }
    int slots = olc_pool_grow(threads - 1);
#if OLC_POOL_AFFINITY
    atomic_store(&olc_pool.caller_cpu, sched_getcpu());
#endif
    uint32_t generation = olc_pool_generation(atomic_load(&olc_pool.state)) + 1;
    atomic_store(&olc_pool.state, ((uint64_t)generation << 32) | OLC_POOL_CLOSED);
    atomic_store_explicit(&olc_pool.fn, fn, memory_order_release);
    atomic_store_explicit(&olc_pool.arg, arg, memory_order_release);
    /* numbered from after the last job's tasks (`ntasks` still holds their count) */
    uint32_t base = atomic_load(&olc_pool.base) + atomic_load(&olc_pool.ntasks);
    atomic_store_explicit(&olc_pool.base, base, memory_order_release);
    atomic_store_explicit(&olc_pool.ntasks, (uint32_t)ntasks, memory_order_release);
    atomic_store_explicit(&olc_pool.slots, slots, memory_order_release);
    atomic_store(&olc_pool.done, 0);
    /* slot k's range: tasks n k / (slots + 1) .. n (k + 1) / (slots + 1) */
    for (int k = 0; k <= slots; ++k) {
        uint32_t lo = base + (uint32_t)((uint64_t)ntasks * k / (slots + 1));
        uint32_t hi = base + (uint32_t)((uint64_t)ntasks * (k + 1) / (slots + 1));
        atomic_store(&olc_pool_ranges[k].fb, (uint64_t)lo << 32 | hi);
    }
    atomic_store(&olc_pool.state, (uint64_t)generation << 32);
    olc_pool_wake_children(0, slots);
    olc_pool_inside = 1;
    long start = olc_pool_now_ns();
    long ran = olc_pool_work(generation, 0);
    long task_ns = ran ? (olc_pool_now_ns() - start) / ran : OLC_POOL_CALLER_SPIN_MAX_NS;
    long spin = 4 * task_ns < OLC_POOL_CALLER_SPIN_MIN_NS ? OLC_POOL_CALLER_SPIN_MIN_NS
              : 4 * task_ns > OLC_POOL_CALLER_SPIN_MAX_NS ? OLC_POOL_CALLER_SPIN_MAX_NS
              : 4 * task_ns;
    olc_pool_inside = 0;
    /* Only tasks a worker claimed are left: spin briefly, then sleep until
       the worker finishing the last one signals. */
    long deadline = 0;
    unsigned spins = 0;
    while (atomic_load(&olc_pool.done) < (uint32_t)ntasks) {
        OLC_POOL_PAUSE();
        if ((++spins & 63) != 0)
            continue;
        long now = olc_pool_now_ns();
        if (deadline == 0) {
            deadline = now + spin;
        } else if (now > deadline) {
            olc_pool_pull(slots, (uint32_t)ntasks);
            pthread_mutex_lock(&olc_pool.lock);
            atomic_store(&olc_pool.caller_waits, 1);
            while (atomic_load(&olc_pool.done) < (uint32_t)ntasks)
                pthread_cond_wait(&olc_pool.finished, &olc_pool.lock);
            atomic_store(&olc_pool.caller_waits, 0);
            pthread_mutex_unlock(&olc_pool.lock);
        }
    }
    pthread_mutex_unlock(&olc_pool.busy);
}

/* After fork() the child has no workers; locks held by the parent's other
   threads are reset. */
static void olc_pool_after_fork_child(void) {
    olc_pool.started = 0;
    olc_pool_inside = 0;
    pthread_mutex_init(&olc_pool.busy, NULL);
    pthread_mutex_init(&olc_pool.lock, NULL);
    pthread_cond_init(&olc_pool.finished, NULL);
    atomic_store(&olc_pool.caller_waits, 0);
    atomic_store(&olc_pool.spin_from, 0);
}

static int olc_pool_init(void) {
    const char *spin = getenv("ONNX_LIGHT_CPU_SPIN_US");
    if (spin != NULL && *spin)
        atomic_store(&olc_pool.spin_ns, atol(spin) * 1000L);
    return pthread_atfork(NULL, NULL, olc_pool_after_fork_child);
}

static inline void *olc_pool_entry(void) { return (void *)olc_pool_run_tasks; }
static inline int olc_pool_started(void) { return olc_pool.started; }
static inline long olc_pool_pulls(void) { return atomic_load(&olc_pool.pulls); }
static inline long olc_pool_spin_ns(void) { return atomic_load(&olc_pool.spin_ns); }
static inline void olc_pool_set_spin_ns(long ns) { atomic_store(&olc_pool.spin_ns, ns); }
/* Moves the task numbering on by n (tests: numbers that wrap past 2^32). */
static inline void olc_pool_skip_numbers(uint32_t n) {
    pthread_mutex_lock(&olc_pool.busy);
    atomic_store(&olc_pool.base, atomic_load(&olc_pool.base) + n);
    pthread_mutex_unlock(&olc_pool.busy);
}
static inline long olc_pool_spin_stopped_ns_left(void) {
    long left = atomic_load(&olc_pool.spin_from) - olc_pool_now_ns();
    return left > 0 ? left : 0;
}

#endif
