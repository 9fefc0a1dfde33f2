/* libvramledger-preload.so: sees every GPU memory allocation of a program
 * with no code change (LD_PRELOAD, set by `vramledger run`).
 *
 * Runtime API by symbol interposition (cudaMalloc, cudaFree, async, managed,
 * pitch, 3D, pools); driver API (cuMemAlloc, cuMemCreate/cuMemRelease, ...)
 * by wrapping what dlsym, cuGetProcAddress and cudaGetDriverEntryPoint hand
 * out, which is how PyTorch reaches cuMemCreate for expandable segments.
 *
 * Rules: the program gets exactly what the real call returns; no CUDA call
 * is made from here but the reading of a pool's reservation after the
 * program's own pool call returned and the runtime's version (a constant)
 * when an entry point is asked for, and never inside dlsym; a failure of
 * ours (no
 * record, no counters) disables us, never the program; fork-safe (the
 * child starts with no slot and no table); thread-safe (the pointer table
 * is split in SHARDS shards by pointer, each under a mutex of its own held
 * for a bounded number of steps; a pool is read with no lock held;
 * counters are atomics). libc only. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../lib/measure/msbuckets.h"
#include "vramledger/counters.h"

#define EXPORT __attribute__((visibility("default")))

typedef int cudaError_t;
typedef int CUresult;
typedef void *cudaStream_t;
typedef void *cudaMemPool_t;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
struct cudaPitchedPtr {
  void *ptr;
  size_t pitch, xsize, ysize;
};
struct cudaExtent {
  size_t width, height, depth;
};

/* ---- state ------------------------------------------------------------ */

/* the slot's claim, the libraries' names and a new pool's slot (not the
 * table's shards, which have their own, nor a pool's reading) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct vl_counters *counters;       /* shared with the sampler, or NULL */
static struct vl_counters_slot *slot;      /* ours */
static struct vl_counters_slot local_slot; /* when there is no shared file */
static bool rings;                         /* the counters have a ring a slot (ring_ms) */
static struct vl_msbucket *ring;           /* our slot's, or NULL */
static int record_fd = -1;
static int trace_calls; /* VRAMLEDGER_PRELOAD_TRACE=1: each counted allocation to stderr */
static _Atomic int started;
static __thread int depth; /* > 0 inside a runtime call: its driver calls are not counted again */

/* pointer (or handle) -> size: open addressing with linear probing; key 0
 * = empty. The table holds the live allocations only: a free shifts the
 * entries after it back (no tombstones), and the table is sized by what is
 * live, grown at 3/4 full and shrunk under 1/8 (never under TABLE_MIN).
 * Resizing never rehashes the whole table under the lock: the previous
 * table (`old`) stays searchable while each call moves up to TABLE_MOVE of
 * its entries into the new one (looking at TABLE_SCAN slots at most), and once empty it is unmapped
 * a piece per call, outside the lock (a whole table at once took 10-20 ms for 96 MiB). A new table
 * can fill to 3/4 only after 3/8 (grown) or 1/4 (shrunk) of the old one's slots in more inserts, so
 * with TABLE_MOVE >= 4 the old one is empty long before. In `old`, a moved or freed entry leaves
 * TOMB so the searches there still find what is behind it. When no larger table can be had (`ulimit
 * -v`), the table fills up to 15/16, then an allocation is not counted and the counters say so.
 *
 * The table is SHARDS tables, a pointer's shard chosen by its hash's top
 * bits (the slot within by its low bits), each with its own lock: threads that allocate at once
 * wait for each other only when their pointers share a shard (one lock took a fifth of the calls of
 * 8 threads to the futex on the H200 host, bench/results/run-interposer/raw.jsonl:preload-table/).
 */
struct entry {
  uint64_t key, size;
  uint32_t lib; /* who asked: an index into libs[] */
};
struct table {
  struct entry *e; /* mmap'ed, cap entries; NULL: none yet */
  size_t cap, used;
};
#define SHARD_BITS 6
#define SHARDS (1u << SHARD_BITS)
#define TABLE_MIN (1u << 9)     /* 12 KiB a shard */
#define TABLE_MOVE 8            /* entries of `old` moved per call: >= 4 (above) */
#define TABLE_SCAN 64           /* slots of `old` looked at per call, at most */
#define UNMAP_PIECE (64u << 10) /* bytes of an emptied table unmapped per call */
#define TOMB (~0ull)
struct span {
  char *p;
  size_t len;
};
struct shard {
  pthread_mutex_t lock;
  struct table cur, old; /* under the shard's lock */
  size_t old_next;       /* the next slot of `old` to move, the same */
} __attribute__((aligned(64)));
static struct shard shards[SHARDS] = {[0 ... SHARDS - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}};

/* in a child of fork, whose copies of the locks may be held */
static void shards_init(void) {
  for (unsigned i = 0; i < SHARDS; i++)
    pthread_mutex_init(&shards[i].lock, NULL);
}

static uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

static size_t hash(uint64_t k, size_t cap) { return (size_t)mix(k) & (cap - 1); }

static struct shard *shard_of(uint64_t key) {
  return &shards[mix(key) >> (64 - SHARD_BITS)]; /* bits hash() never uses below 2^58 slots */
}

/* What is left to unmap of emptied tables, of every shard (a shard's own
 * list would wait for calls of that shard): a shrinking table can empty
 * several smaller ones while a large one is still going. */
#define RETIRING_MAX 64
static pthread_mutex_t retire_lock = PTHREAD_MUTEX_INITIALIZER;
static struct span retiring[RETIRING_MAX]; /* under retire_lock */
static _Atomic unsigned n_retiring;        /* written under retire_lock */

/* With no lock of ours held: an emptied table (gone, if any) joins what is
 * to be unmapped; the next piece of it is handed out in *piece, and in
 * *rest what cannot wait (with RETIRING_MAX tables going already). The
 * caller unmaps both. */
static void retire(const struct table *gone, struct span *piece, struct span *rest) {
  *rest = (struct span){0};
  *piece = (struct span){0};
  if (!gone->e && !atomic_load_explicit(&n_retiring, memory_order_relaxed)) return;
  pthread_mutex_lock(&retire_lock);
  unsigned n = atomic_load_explicit(&n_retiring, memory_order_relaxed);
  if (gone->e) {
    if (n == RETIRING_MAX) *rest = retiring[--n];
    retiring[n++] = (struct span){(char *)gone->e, gone->cap * sizeof *gone->e};
  }
  if (n) {
    struct span *r = &retiring[n - 1];
    size_t k = r->len < UNMAP_PIECE ? r->len : UNMAP_PIECE;
    *piece = (struct span){r->p, k};
    r->p += k;
    r->len -= k;
    if (!r->len) n--;
  }
  atomic_store_explicit(&n_retiring, n, memory_order_relaxed);
  pthread_mutex_unlock(&retire_lock);
}

static void unmap_spans(const struct span *a, const struct span *b) {
  if (a->len) munmap(a->p, a->len);
  if (b->len) munmap(b->p, b->len);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The slot of key in t, or SIZE_MAX. */
static size_t table_find(const struct table *t, uint64_t key) {
  if (!t->e) return SIZE_MAX;
  for (size_t j = hash(key, t->cap);; j = (j + 1) & (t->cap - 1)) {
    if (t->e[j].key == key) return j;
    if (!t->e[j].key) return SIZE_MAX;
  }
}

/* Remove slot j of cur, moving back the entries of its probe run that
 * would no longer be found (Knuth 6.4, algorithm R). */
static void table_delete(struct table *cur, size_t j) {
  size_t mask = cur->cap - 1;
  for (size_t i = j, k = j;;) {
    cur->e[i].key = 0;
    for (;;) {
      k = (k + 1) & mask;
      if (!cur->e[k].key) {
        cur->used--;
        return;
      }
      size_t h = hash(cur->e[k].key, cur->cap);
      /* the entry at k stays when its home h lies cyclically in (i, k] */
      if (i <= k ? (i < h && h <= k) : (i < h || h <= k)) continue;
      cur->e[i] = cur->e[k];
      i = k;
      break;
    }
  }
}

/* Put e into cur (room checked by the caller); an entry of the same key
 * that it replaces goes to *was (when not NULL; else key 0 there). */
static void table_put(struct table *cur, struct entry e, struct entry *was) {
  size_t j = hash(e.key, cur->cap);
  while (cur->e[j].key && cur->e[j].key != e.key)
    j = (j + 1) & (cur->cap - 1);
  if (was) *was = cur->e[j].key ? cur->e[j] : (struct entry){0};
  if (!cur->e[j].key) cur->used++;
  cur->e[j] = e;
}

/* Move up to budget slots of `old` into cur; an emptied `old` goes to
 * *gone, for the caller to unmap once the lock is released. */
static void table_move(struct shard *sh, size_t budget, struct table *gone) {
  struct table *old = &sh->old;
  for (size_t scan = budget * (TABLE_SCAN / TABLE_MOVE);
       old->e && old->used && sh->old_next < old->cap && budget && scan; scan--) {
    struct entry *x = &old->e[sh->old_next++];
    if (!x->key || x->key == TOMB) continue;
    budget--;
    table_put(&sh->cur, *x, NULL);
    x->key = TOMB;
    old->used--;
  }
  if (old->e && (!old->used || sh->old_next == old->cap) && !gone->e) {
    *gone = *old;
    *old = (struct table){0};
  }
}

static struct entry *table_map(size_t cap) {
  void *p = mmap(NULL, cap * sizeof(struct entry), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  /* small pages: a transparent huge page is 2 MiB zeroed at one call's
   * first touch */
  madvise(p, cap * sizeof(struct entry), MADV_NOHUGEPAGE);
  return p;
}

/* Start moving cur into a new table of cap entries (no move under way:
 * cur becomes `old`, an empty one is let go at the next move). mmap only
 * reserves: the pages are touched as entries come. */
static bool table_resize(struct shard *sh, size_t cap) {
  struct entry *e = table_map(cap);
  if (!e) return false;
  if (sh->cur.e) {
    sh->old = sh->cur;
    sh->old_next = 0;
  }
  sh->cur = (struct table){e, cap, 0};
  return true;
}

/* Room in cur for one more entry. @return false when there is none and
 * none can be had (the allocation goes uncounted). */
static bool table_room(struct shard *sh, struct table *gone) {
  const struct table *cur = &sh->cur;
  if (!cur->e) return table_resize(sh, TABLE_MIN);
  if ((cur->used + 1) * 4 < cur->cap * 3) return true;
  if (sh->old.e) /* not reached (see above): finish the move first */
    table_move(sh, sh->old.cap, gone);
  if (sh->old.e) return (cur->used + 1) * 16 < cur->cap * 15;
  if (table_resize(sh, cur->cap * 2)) return true;
  return (cur->used + 1) * 16 < cur->cap * 15;
}

/* Counters: the slot's fields are updated atomically so the sampler reads
 * consistent values without a lock. */

/* After a change of the slot's live bytes: into the bucket of this
 * millisecond, for a sampler that wakes less often than it samples
 * (lib/measure/msbuckets.h). CLOCK_MONOTONIC is the record's clock, read
 * in the vDSO (no system call). */
static void note_ms(uint64_t live) {
  if (!ring) return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
  vl__msb_note(ring, VL_COUNTERS_RING_MS, ms, live, &slot->live);
}
static void start_flusher(void);
static _Atomic int flusher_started;

/* Who allocates: the library each allocation call came from (its file's
 * base name, by dladdr of the return address), with its live bytes; PyTorch's
 * own allocator is libc10_cuda, cuBLAS and NCCL allocate for themselves.
 * The return address -> library answers are cached (dladdr takes the
 * loader's lock: it is never called under ours). */
#define MAX_LIBS 16
static struct {
  char name[48];
  uint64_t live; /* atomically */
} libs[MAX_LIBS];
static unsigned n_libs; /* under lock */

static uint32_t lib_of(const char *path) { /* under lock */
  const char *b = path ? strrchr(path, '/') : NULL;
  b = b ? b + 1 : path ? path : "?";
  char name[48];
  size_t k = 0;
  for (; *b && k + 1 < sizeof name; b++) /* safe inside a JSON string */
    name[k++] = (*b == '"' || *b == '\\' || (unsigned char)*b < 0x20) ? '_' : *b;
  name[k] = '\0';
  for (unsigned i = 0; i < n_libs; i++)
    if (strcmp(libs[i].name, name) == 0) return i;
  if (n_libs == MAX_LIBS) return MAX_LIBS - 1; /* the last one takes the rest */
  memcpy(libs[n_libs].name, name, k + 1);
  return n_libs++;
}

/* What could not be counted, said once a run: a bit in the counters
 * (`run` records it, `report` makes it a finding) and one line on stderr,
 * from the first process that meets it (once a process without the
 * shared counters). Not under lock. */
static void say_lost(uint32_t bit, const char *text) {
  static uint32_t said; /* without counters: this process's bits */
  uint32_t was = counters ? __atomic_fetch_or(&counters->lost, bit, __ATOMIC_RELAXED)
                          : __atomic_fetch_or(&said, bit, __ATOMIC_RELAXED);
  if (was & bit) return;
  ssize_t w = write(2, text, strlen(text));
  (void)w;
}

/* The process's slot in the counters, taken at its first allocation (a
 * process that never allocates takes none). A slot already holding our pid
 * is the program's before an exec: what it held went with that image. A
 * new one is the lowest free slot, which the sampler's scan relies on
 * (vramledger/counters.h). With
 * every slot taken the process counts in local_slot, and it is said.
 * Under lock. @return false when no slot could be had. */
static _Atomic int slot_claimed; /* set, with release, once slot and ring are */
/* Slot i's ring ours, said in the slot before anything is counted there
 * (the sampler tells an older interposer's slot by it). */
static void take_ring(unsigned i) {
  ring = rings && i < VL_COUNTERS_RING_SLOTS ? vl_counters_ring(counters, i) : NULL;
  __atomic_store_n(&counters->slot[i].rings, ring ? 1u : 0u, __ATOMIC_RELEASE);
}
static bool claim_slot(void) {
  if (!counters) return true;
  uint32_t me = (uint32_t)getpid();
  unsigned n = counters->slots < VL_COUNTERS_SLOTS ? counters->slots : VL_COUNTERS_SLOTS;
  for (unsigned i = 0; i < n; i++)
    if (__atomic_load_n(&counters->slot[i].pid, __ATOMIC_ACQUIRE) == me) {
      struct vl_counters_slot *s = &counters->slot[i];
      __atomic_store_n(&s->live, 0, __ATOMIC_RELAXED);
      __atomic_store_n(&s->allocs, 0, __ATOMIC_RELAXED);
      __atomic_store_n(&s->frees, 0, __ATOMIC_RELAXED);
      slot = s;
      take_ring(i);
      return true;
    }
  for (unsigned i = 0; i < n; i++) {
    uint32_t expect = 0;
    if (__atomic_compare_exchange_n(&counters->slot[i].pid, &expect, me, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      slot = &counters->slot[i];
      take_ring(i);
      return true;
    }
  }
  __atomic_add_fetch(&counters->no_slot, 1, __ATOMIC_RELAXED);
  return false;
}

static void table_full(void) {
  if (counters) __atomic_add_fetch(&counters->uncounted, 1, __ATOMIC_RELAXED);
}

/* The process's slot, claimed at its first allocation (under lock, once).
 * @return false when none could be had. */
static bool slot_ready(void) {
  if (atomic_load_explicit(&slot_claimed, memory_order_acquire)) return true;
  bool ok = true;
  pthread_mutex_lock(&lock);
  if (!atomic_load_explicit(&slot_claimed, memory_order_relaxed)) {
    ok = claim_slot();
    atomic_store_explicit(&slot_claimed, 1, memory_order_release);
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

/* The library of a call site: from the cache of return addresses (one
 * word an entry, the address above the library's index: read and written
 * without a lock), or dladdr's answer (taken with no lock of ours held: it
 * takes the loader's). */
#define CALLER_CACHE 64
#define CALLER_LIB_BITS 16
static _Atomic uint64_t callers[CALLER_CACHE];

static uint32_t caller_lib(void *caller) {
  uintptr_t c = (uintptr_t)caller;
  size_t ci = (c >> 4) & (CALLER_CACHE - 1);
  bool cacheable = c && c >> (64 - CALLER_LIB_BITS) == 0; /* user addresses: 47 bits */
  uint64_t w = atomic_load_explicit(&callers[ci], memory_order_relaxed);
  if (cacheable && w >> CALLER_LIB_BITS == c) return (uint32_t)(w & ((1u << CALLER_LIB_BITS) - 1));
  Dl_info di = {0};
  if (!(caller && dladdr(caller, &di))) di.dli_fname = NULL;
  pthread_mutex_lock(&lock);
  uint32_t lib = lib_of(di.dli_fname);
  pthread_mutex_unlock(&lock);
  if (cacheable)
    atomic_store_explicit(&callers[ci], (uint64_t)c << CALLER_LIB_BITS | lib, memory_order_relaxed);
  return lib;
}

/* The slot's peak raised to live. Shards count side by side: a plain
 * load and store could put a smaller peak over a larger one. */
static void peak_at_least(uint64_t live) {
  uint64_t p = __atomic_load_n(&slot->peak, __ATOMIC_RELAXED);
  while (live > p && !__atomic_compare_exchange_n(&slot->peak, &p, live, true, __ATOMIC_RELAXED,
                                                  __ATOMIC_RELAXED))
    ;
}

/* Under sh->lock, room made: key's entry in the shard, its bytes counted
 * (what the same key held before, freed unseen, uncounted). */
static void table_count(struct shard *sh, uint64_t key, uint64_t size, uint32_t lib) {
  /* the same key again: its free went by unseen (the driver never hands
   * out a live address twice), so what it held is gone */
  struct entry was = {0};
  size_t j = table_find(&sh->old, key);
  if (j != SIZE_MAX) {
    was = sh->old.e[j];
    sh->old.e[j].key = TOMB;
    sh->old.used--;
  }
  struct entry dup;
  table_put(&sh->cur, (struct entry){key, size, lib}, &dup);
  if (dup.key) was = dup;
  if (was.key) {
    __atomic_sub_fetch(&libs[was.lib].live, was.size, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&slot->live, was.size, __ATOMIC_RELAXED);
  }
  __atomic_add_fetch(&libs[lib].live, size, __ATOMIC_RELAXED);
  uint64_t live = __atomic_add_fetch(&slot->live, size, __ATOMIC_RELAXED);
  peak_at_least(live);
  __atomic_add_fetch(&slot->allocs, 1, __ATOMIC_RELAXED);
  note_ms(live);
}

static void count_alloc(uint64_t key, uint64_t size, void *caller) {
  if (!key || key == TOMB) return;
  if (!atomic_load_explicit(&flusher_started, memory_order_relaxed) &&
      !atomic_exchange(&flusher_started, 1))
    start_flusher(); /* processes that never allocate never get a thread */
  bool no_slot = !slot_ready(), full = false;
  uint32_t lib = caller_lib(caller);
  struct shard *sh = shard_of(key);
  struct table gone = {0};
  pthread_mutex_lock(&sh->lock);
  table_move(sh, TABLE_MOVE, &gone);
  if (table_room(sh, &gone))
    table_count(sh, key, size, lib);
  else
    full = true; /* out of memory for bookkeeping: not counted, never fail the program */
  pthread_mutex_unlock(&sh->lock);
  struct span piece, rest;
  retire(&gone, &piece, &rest);
  unmap_spans(&piece, &rest);
  if (no_slot)
    say_lost(VL_COUNTERS_LOST_NO_SLOT,
             "vramledger-preload: every counter slot is taken: this process's GPU allocations "
             "are left out of the live counts (the record says how many processes)\n");
  if (full) {
    table_full();
    say_lost(VL_COUNTERS_LOST_TABLE,
             "vramledger-preload: no memory to track more allocations (ulimit -v?): new ones "
             "are not counted from now on (the record says how many)\n");
    return;
  }
  if (trace_calls) { /* who asked for what, for diagnosis */
    char buf[160];
    int k = snprintf(buf, sizeof buf, "vramledger-preload: %llu bytes by %s\n",
                     (unsigned long long)size, libs[lib].name);
    if (k > 0) {
      ssize_t w = write(2, buf, (size_t)(k < (int)sizeof buf ? k : (int)sizeof buf - 1));
      (void)w;
    }
  }
}

/* In the wrappers: the caller is whoever called the wrapper. */
#define COUNT_ALLOC(key, size) count_alloc((key), (size), __builtin_return_address(0))

static void count_free(uint64_t key) {
  if (!key || key == TOMB) return;
  struct shard *sh = shard_of(key);
  struct table gone = {0};
  pthread_mutex_lock(&sh->lock);
  struct entry x = {0};
  size_t j = table_find(&sh->cur, key);
  if (j != SIZE_MAX) {
    x = sh->cur.e[j];
    table_delete(&sh->cur, j);
  } else if ((j = table_find(&sh->old, key)) != SIZE_MAX) {
    x = sh->old.e[j];
    sh->old.e[j].key = TOMB;
    sh->old.used--;
  }
  if (x.key) {
    uint64_t live = __atomic_sub_fetch(&slot->live, x.size, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&libs[x.lib].live, x.size, __ATOMIC_RELAXED);
    __atomic_add_fetch(&slot->frees, 1, __ATOMIC_RELAXED);
    note_ms(live);
  }
  table_move(sh, TABLE_MOVE, &gone);
  /* fewer than 1/8 live: a table half the size (a quarter full) */
  if (!sh->old.e && sh->cur.cap > TABLE_MIN && sh->cur.used * 8 < sh->cur.cap)
    table_resize(sh, sh->cur.cap / 2);
  pthread_mutex_unlock(&sh->lock);
  struct span piece, rest;
  retire(&gone, &piece, &rest);
  unmap_spans(&piece, &rest);
}

/* ---- stream-ordered pools (cudaMallocAsync) ----------------------------
 *
 * What a pool holds from the driver is its reservation, not the sum of its
 * live allocations: a freed block stays in the pool until the pool is
 * trimmed or, above its release threshold, until a synchronisation
 * (PyTorch's cudaMallocAsync backend sets the threshold to the maximum, so
 * only cudaMemPoolTrimTo gives memory back, and its memory_reserved() is
 * the pool's reservation). So an allocation from a pool goes into the table
 * with size 0 and the pool's CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT counts
 * instead, read again after each call that can change it. The queries are
 * driver calls made on the program's own thread, after its call returned,
 * and only once the program uses a pool; without the driver's pool
 * functions the allocations count at their size, as before. */
typedef void *CUmemoryPool;
#define CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT 5
#define MAX_POOLS 32

static struct {
  CUresult (*ctx_device)(int *);
  CUresult (*device_pool)(CUmemoryPool *, int);
  CUresult (*attr)(CUmemoryPool, int, void *);
} pool_api;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

/* A pool and its last reading. No lock is taken to find or read a pool:
 * whoever asks for a reading sets `again`; whoever holds `reading` reads
 * the driver and, before letting go, looks at `again` once more, so every
 * change is followed by a reading that began after it, and no caller waits
 * for another's driver call (pool_reread). Slots are taken under `lock`. */
static struct pool {
  _Atomic(CUmemoryPool) h; /* NULL: a free slot */
  uint64_t reserved;       /* the last reading; by the holder of `reading` */
  atomic_int again, reading;
} pools[MAX_POOLS];
static atomic_uint n_pools;     /* slots ever taken */
static _Atomic int pools_dirty; /* a pool block was freed since the last reading */
static uint64_t pools_reserved; /* the readings' sum, atomically */

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym(void);

static void pool_lookup(void) {
  /* the driver is loaded by now (a pool call just succeeded); NOLOAD never
   * loads it */
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  dlsym_fn d = real_dlsym();
  if (!h || !d) return;
  *(void **)&pool_api.ctx_device = d(h, "cuCtxGetDevice");
  *(void **)&pool_api.device_pool = d(h, "cuDeviceGetMemPool");
  *(void **)&pool_api.attr = d(h, "cuMemPoolGetAttribute");
}

/* Pools can be read: pool allocations count through the reservation. */
static int pools_readable(void) {
  pthread_once(&pool_once, pool_lookup);
  return pool_api.attr != NULL;
}

/* The pool cudaMallocAsync draws from: the current device's current pool. */
static CUmemoryPool current_pool(void) {
  int dev;
  CUmemoryPool p = NULL;
  if (!pool_api.ctx_device || !pool_api.device_pool || pool_api.ctx_device(&dev) != 0 ||
      pool_api.device_pool(&p, dev) != 0)
    return NULL;
  return p;
}

/* Live bytes moved by a pool's new reading. */
static void pools_move(uint64_t before, uint64_t after) {
  uint64_t live;
  if (after == before) return;
  if (after > before) {
    __atomic_add_fetch(&pools_reserved, after - before, __ATOMIC_RELAXED);
    live = __atomic_add_fetch(&slot->live, after - before, __ATOMIC_RELAXED);
    peak_at_least(live);
  } else {
    __atomic_sub_fetch(&pools_reserved, before - after, __ATOMIC_RELAXED);
    live = __atomic_sub_fetch(&slot->live, before - after, __ATOMIC_RELAXED);
  }
  note_ms(live);
}

static struct pool *pool_find(CUmemoryPool p) {
  if (!p) return NULL; /* a free slot's h is NULL too */
  unsigned n = atomic_load(&n_pools);
  for (unsigned i = 0; i < n; i++)
    if (atomic_load_explicit(&pools[i].h, memory_order_acquire) == p) return &pools[i];
  return NULL;
}

/* p's slot, taken if p is new; NULL when all MAX_POOLS are taken. */
static struct pool *pool_slot(CUmemoryPool p) {
  struct pool *q = pool_find(p);
  if (q || !p) return q; /* found, or no pool */
  pthread_mutex_lock(&lock);
  unsigned n = atomic_load(&n_pools), i = 0;
  if (!(q = pool_find(p))) {
    while (i < n && atomic_load(&pools[i].h)) /* a slot a destroyed pool left */
      i++;
    if (i < MAX_POOLS) {
      q = &pools[i];
      q->reserved = 0;
      atomic_store_explicit(&q->h, p, memory_order_release);
      if (i == n) atomic_store(&n_pools, n + 1);
    }
  }
  pthread_mutex_unlock(&lock);
  return q;
}

/* q read again now, or, while another thread reads it, by that thread
 * when it is done (see struct pool). */
static void pool_reread(struct pool *q) {
  atomic_store(&q->again, 1);
  while (atomic_load(&q->again) && !atomic_exchange(&q->reading, 1)) {
    atomic_store(&q->again, 0);
    CUmemoryPool h = atomic_load_explicit(&q->h, memory_order_acquire);
    uint64_t v = 0;
    if (h && pool_api.attr(h, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) == 0) {
      pools_move(q->reserved, v);
      q->reserved = v;
    }
    atomic_store(&q->reading, 0);
  }
}

/* A pool goes away (destroyed): what it reserved is given back. */
static void pool_forget(CUmemoryPool p) {
  struct pool *q = pool_find(p);
  if (!q) return;
  while (atomic_exchange(&q->reading, 1)) /* a reading of it in flight */
    sched_yield();
  pools_move(q->reserved, 0);
  q->reserved = 0;
  atomic_store(&q->again, 0);
  atomic_store_explicit(&q->h, NULL, memory_order_release);
  atomic_store(&q->reading, 0);
  /* the slot was free from the line before: a new pool may have taken it
   * and asked for a reading while we held it */
  if (atomic_load(&q->again)) pool_reread(q);
}

/* An allocation from a pool (NULL: the current one) succeeded. With no
 * pool functions, or more pools than MAX_POOLS, it counts at its size. */
static void pool_alloc(uint64_t key, uint64_t size, CUmemoryPool p, void *caller) {
  struct pool *q = NULL;
  if (pools_readable() && (p = p ? p : current_pool())) q = pool_slot(p);
  count_alloc(key, q ? 0 : size, caller);
  if (q) pool_reread(q);
}

/* A pool was trimmed: read again. */
static void pool_trimmed(CUmemoryPool p) {
  struct pool *q;
  if (pools_readable() && (q = pool_slot(p))) pool_reread(q);
}

/* A pool block was freed: it stays reserved; the driver gives back what a
 * pool holds above its release threshold at the next synchronisation
 * (pools_synced reads the pools again then). */
static void pool_free(uint64_t key) {
  count_free(key);
  if (pool_api.attr) atomic_store(&pools_dirty, 1);
}

static void pools_synced(void) {
  if (!atomic_load_explicit(&pools_dirty, memory_order_relaxed) ||
      !atomic_exchange(&pools_dirty, 0))
    return;
  unsigned n = atomic_load(&n_pools);
  for (unsigned i = 0; i < n; i++)
    if (atomic_load_explicit(&pools[i].h, memory_order_relaxed)) pool_reread(&pools[i]);
}

/* ---- the record -------------------------------------------------------- */

/* Each process writes its own stream of the record, STREAMS/interposer.
 * PID.jsonl (VRAMLEDGER_STREAMS, the folder `run` made; docs/record.md,
 * "Streams"): no other process writes that file, so no other writer can
 * cut our lines, nor we theirs. It is opened at the process's first line
 * (a process that neither allocates nor marks leaves no file), once; a
 * forked child opens its own (after_fork_child). The file is told from
 * another that got its descriptor: a job that closes the descriptors it
 * inherited and opens files of its own may be given the same number
 * (daemons do). */
static char streams_dir[4096];
static dev_t record_dev;
static ino_t record_ino;
static atomic_bool record_cut; /* a line of ours went out cut: closed by the next write */

/* record_fd, opened when its number does not refer to our stream (not
 * yet, or no longer: the number is the job's now, and left alone). A file
 * there already (the same PID before an exec, or reused) that ends inside
 * a line has it closed by our first write. */
static bool record_ok(void) {
  struct stat st;
  if (record_fd >= 0 && fstat(record_fd, &st) == 0 && st.st_dev == record_dev &&
      st.st_ino == record_ino)
    return true;
  if (!streams_dir[0]) return false;
  char path[sizeof streams_dir + 64];
  int k = snprintf(path, sizeof path, "%s/interposer.%d.jsonl", streams_dir, (int)getpid());
  if (k <= 0 || (size_t)k >= sizeof path) return false;
  int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return false;
  }
  char last = '\n';
  if (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n')
    atomic_store(&record_cut, true);
  record_dev = st.st_dev; /* the same file whichever thread opens it */
  record_ino = st.st_ino;
  /* two threads' first lines at once (the flusher's, a mark): one
   * descriptor stays, with no lock (a fork mid-way must not leave one held) */
  int was = __atomic_load_n(&record_fd, __ATOMIC_ACQUIRE);
  if (!__atomic_compare_exchange_n(&record_fd, &was, fd, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    close(fd);
    return true; /* another thread's, just opened */
  }
  return true; /* a number before (the job's now, it closed ours) is left alone */
}

/* A line that does not go out whole (a full disk, ulimit -f: a short
 * write cuts it) is lost whole, and counted for `run` to say in the record.
 * A write past `ulimit -f` raises SIGXFSZ in the writing thread, which
 * would kill the job for a line of ours: it is blocked across the write
 * and taken back when the write raised it (a SIGXFSZ of the job's own,
 * already pending, is left). After a cut line of ours, the next write
 * begins with a newline and a gap line over it, in the same write: the
 * next line is never fused with the cut one (docs/record.md, "gap"; its
 * bytes are in the counters' record_lost_bytes). */
static void write_line(const char *line, int len) {
  if (!streams_dir[0] || len <= 0) return;
  int saved = errno;
  ssize_t w = -1;
  char gap[128];
  struct iovec iov[2] = {{NULL, 0}, {(void *)line, (size_t)len}};
  bool cut = record_ok() && atomic_exchange(&record_cut, false);
  if (cut) {
    int k = snprintf(gap, sizeof gap,
                     "\n{\"type\":\"gap\",\"t_ns\":%llu,\"lost_bytes\":0,\"error\":\"a line cut "
                     "by a failed write\"}\n",
                     (unsigned long long)now_ns());
    if (k > 0 && (size_t)k < sizeof gap) iov[0] = (struct iovec){gap, (size_t)k};
  }
  const ssize_t n = (ssize_t)(iov[0].iov_len + iov[1].iov_len);
  if (record_fd >= 0) {
    sigset_t xfsz, keep, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &keep);
    bool had = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
    do { /* one write per line, the gap line with it */
      w = iov[0].iov_len ? writev(record_fd, iov, 2) : write(record_fd, line, (size_t)len);
    } while (w < 0 && errno == EINTR);
    if (w < 0 && errno == EFBIG && !had) {
      struct timespec zero = {0, 0};
      sigtimedwait(&xfsz, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &keep, NULL);
  }
  if (w > 0 && w < n) atomic_store(&record_cut, true);
  if (w != n && cut && w <= 0) atomic_store(&record_cut, true); /* still open */
  if (w != n && counters)
    __atomic_add_fetch(&counters->record_lost_bytes, (uint64_t)len, __ATOMIC_RELAXED);
  errno = saved; /* the job's errno is its own */
}

static void flush_counters(void) {
  char buf[2048];
  int n = snprintf(buf, sizeof buf,
                   "{\"type\":\"alloc\",\"t_ns\":%llu,\"pid\":%d,\"live\":%llu,\"peak\":%llu,"
                   "\"allocs\":%llu,\"frees\":%llu,\"pools\":%llu,\"libs\":{",
                   (unsigned long long)now_ns(), (int)getpid(),
                   (unsigned long long)__atomic_load_n(&slot->live, __ATOMIC_RELAXED),
                   (unsigned long long)__atomic_load_n(&slot->peak, __ATOMIC_RELAXED),
                   (unsigned long long)__atomic_load_n(&slot->allocs, __ATOMIC_RELAXED),
                   (unsigned long long)__atomic_load_n(&slot->frees, __ATOMIC_RELAXED),
                   (unsigned long long)__atomic_load_n(&pools_reserved, __ATOMIC_RELAXED));
  /* live bytes by the library that asked (pool blocks count in pools) */
  pthread_mutex_lock(&lock);
  for (unsigned i = 0; i < n_libs && n > 0 && (size_t)n < sizeof buf - 80; i++)
    n += snprintf(buf + n, sizeof buf - (size_t)n, "%s\"%s\":%llu", i ? "," : "", libs[i].name,
                  (unsigned long long)__atomic_load_n(&libs[i].live, __ATOMIC_RELAXED));
  pthread_mutex_unlock(&lock);
  if (n > 0 && (size_t)n < sizeof buf - 3) n += snprintf(buf + n, sizeof buf - (size_t)n, "}}\n");
  write_line(buf, n);
}

/* Background flusher: an alloc line every 100 ms while the counts move. */
static void *flusher(void *arg) {
  (void)arg;
  uint64_t last = ~0ull;
  for (;;) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    uint64_t c = __atomic_load_n(&slot->allocs, __ATOMIC_RELAXED) +
                 __atomic_load_n(&slot->frees, __ATOMIC_RELAXED);
    if (c != last) flush_counters();
    last = c;
  }
  return NULL;
}

static void on_exit_flush(void) {
  if (streams_dir[0] && __atomic_load_n(&slot->allocs, __ATOMIC_RELAXED)) flush_counters();
}

static void start_flusher(void) {
  if (!streams_dir[0]) return;
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_create(&t, &a, flusher, NULL);
  pthread_attr_destroy(&a);
}

/* In the child of a fork: nothing allocated yet, a slot of its own, a new
 * flusher (threads do not survive fork), and a usable lock. */
static void after_fork_child(void) {
  pthread_mutex_init(&lock, NULL);
  /* The parent's tables, copied, are let go of, not unmapped: another
   * thread of the parent may have been halfway through writing a table's
   * size or a span's when fork copied them, and a wrong length would unmap
   * a mapping of the child's. They cost the child address space only (its
   * pages are the parent's until written, and nothing writes them). */
  memset(shards, 0, sizeof shards);
  shards_init();
  pthread_mutex_init(&retire_lock, NULL);
  atomic_store(&n_retiring, 0);
  local_slot = (struct vl_counters_slot){0};
  slot = &local_slot;
  ring = NULL;
  atomic_store(&slot_claimed, 0); /* a slot at the child's first allocation */
  memset(pools, 0, sizeof pools); /* the child has none of the parent's device memory */
  atomic_store(&n_pools, 0);
  pools_reserved = 0;
  n_libs = 0;
  memset(libs, 0, sizeof libs);
  for (unsigned i = 0; i < CALLER_CACHE; i++) /* library indices of the parent's */
    atomic_store_explicit(&callers[i], 0, memory_order_relaxed);
  atomic_store(&flusher_started, 0);
  /* the parent's stream is the parent's: the child opens its own (its
   * PID) at its first line */
  if (record_fd >= 0) close(record_fd);
  record_fd = -1;
  atomic_store(&record_cut, false);
}

/* The counters file at path (open at fd) is len bytes or more, each page
 * with its disk blocks (vramledger/counters.h): a page without them (a
 * sparse file, from an older `run` on a nearly full disk) kills the
 * process that first writes it when the disk has no room (SIGBUS). Else
 * nothing is counted there, said once a process; the program runs on. */
static bool counters_backed(int fd, const char *path, size_t len) {
  struct stat st;
  if (fstat(fd, &st) == 0 &&
      vl_counters_backed((long long)st.st_size, (long long)st.st_blocks, len))
    return true;
  char buf[PATH_MAX + 200];
  int k = snprintf(buf, sizeof buf,
                   "vramledger-preload: the counters file '%s' is shorter than %zu bytes or "
                   "sparse (a page without disk blocks): not counted there, the program runs on\n",
                   path, len);
  if (k > 0) {
    ssize_t w = write(2, buf, (size_t)(k < (int)sizeof buf ? k : (int)sizeof buf - 1));
    (void)w;
  }
  return false;
}

__attribute__((constructor)) static void init(void) {
  if (atomic_exchange(&started, 1)) return;
  slot = &local_slot;
  const char *c = getenv("VRAMLEDGER_COUNTERS");
  if (c && *c) {
    int fd = open(c, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    /* a file of another layout (another version of vramledger) is left
     * alone, and no more than the file is mapped: touching a page past its
     * end would kill the program. An older `run`'s file has no rings. */
    bool big = fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= (off_t)VL_COUNTERS_FILE_BYTES;
    size_t len = big ? VL_COUNTERS_FILE_BYTES : sizeof *counters;
    if (fd >= 0 && !counters_backed(fd, c, len)) {
      close(fd);
      fd = -1;
    }
    if (fd >= 0) {
      void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      const struct vl_counters *m = p;
      if (p != MAP_FAILED && m->magic == VL_COUNTERS_MAGIC && m->version == VL_COUNTERS_VERSION) {
        counters = p;
        rings = big && m->ring_ms == VL_COUNTERS_RING_MS;
      } else if (p != MAP_FAILED) {
        munmap(p, len);
      }
    }
    if (fd >= 0) close(fd);
  }
  const char *tr = getenv("VRAMLEDGER_PRELOAD_TRACE");
  trace_calls = tr && *tr == '1';
  const char *r = getenv("VRAMLEDGER_STREAMS"); /* the stream is opened at the first line */
  if (r && *r && strlen(r) < sizeof streams_dir) memcpy(streams_dir, r, strlen(r) + 1);
  pthread_atfork(NULL, NULL, after_fork_child);
  atexit(on_exit_flush);
}

/*! Stamp a phase into the run record: `vl_mark("forward")`. A program (or
 * the PyTorch probe, through ctypes) may call it; harmless outside `run`. */
EXPORT void vl_mark(const char *name) {
  char buf[256];
  char safe[96];
  size_t k = 0;
  for (const char *p = name ? name : ""; *p && k + 1 < sizeof safe; p++)
    safe[k++] = (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) ? '_' : *p;
  safe[k] = '\0';
  int n =
      snprintf(buf, sizeof buf, "{\"type\":\"mark\",\"t_ns\":%llu,\"pid\":%d,\"name\":\"%s\"}\n",
               (unsigned long long)now_ns(), (int)getpid(), safe);
  write_line(buf, n);
}

/*! Live and peak bytes this process allocated through CUDA (for tests and
 * for the probe). */
EXPORT void vl_preload_counts(uint64_t *live, uint64_t *peak) {
  struct vl_counters_slot *s = slot ? slot : &local_slot;
  if (live) *live = __atomic_load_n(&s->live, __ATOMIC_RELAXED);
  if (peak) *peak = __atomic_load_n(&s->peak, __ATOMIC_RELAXED);
}

/* ---- real symbols -------------------------------------------------------- */

static dlsym_fn real_dlsym_fn;

static dlsym_fn real_dlsym(void) {
  if (!real_dlsym_fn) {
    /* dlvsym, not dlsym: we are dlsym */
    real_dlsym_fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real_dlsym_fn) real_dlsym_fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  }
  return real_dlsym_fn;
}

/* The real runtime functions: found with RTLD_NEXT, or remembered when a
 * program looks them up in a handle with dlsym (a runtime loaded with
 * RTLD_LOCAL is not in RTLD_NEXT's scope). */
enum {
  RT_cudaMalloc,
  RT_cudaFree,
  RT_cudaMallocAsync,
  RT_cudaMallocFromPoolAsync,
  RT_cudaFreeAsync,
  RT_cudaMallocManaged,
  RT_cudaMallocPitch,
  RT_cudaMalloc3D,
  RT_cudaGetDriverEntryPoint,
  RT_cudaGetDriverEntryPointByVersion,
  RT_cudaMemPoolTrimTo,
  RT_cudaMemPoolDestroy,
  RT_cudaStreamSynchronize,
  RT_cudaDeviceSynchronize,
  RT_COUNT
};
static const char *const rt_names[RT_COUNT] = {"cudaMalloc",
                                               "cudaFree",
                                               "cudaMallocAsync",
                                               "cudaMallocFromPoolAsync",
                                               "cudaFreeAsync",
                                               "cudaMallocManaged",
                                               "cudaMallocPitch",
                                               "cudaMalloc3D",
                                               "cudaGetDriverEntryPoint",
                                               "cudaGetDriverEntryPointByVersion",
                                               "cudaMemPoolTrimTo",
                                               "cudaMemPoolDestroy",
                                               "cudaStreamSynchronize",
                                               "cudaDeviceSynchronize"};
static void *rt_real[RT_COUNT];

static void *rt(int i) {
  void *p = __atomic_load_n(&rt_real[i], __ATOMIC_ACQUIRE);
  if (!p) {
    dlsym_fn d = real_dlsym();
    if (d) p = d(RTLD_NEXT, rt_names[i]);
    if (p) __atomic_store_n(&rt_real[i], p, __ATOMIC_RELEASE);
  }
  return p;
}

#define REAL(name, type) __typeof__(&name) real_##name = (__typeof__(&name))rt(RT_##name);

/* ---- runtime API --------------------------------------------------------- */

#define ENTER() (slot ? (void)0 : init(), depth++)
#define LEAVE() (depth--)

EXPORT cudaError_t cudaMalloc(void **p, size_t n) {
  REAL(cudaMalloc, cudaError_t(*)(void **, size_t));
  if (!real_cudaMalloc) return 35; /* cudaErrorInsufficientDriver: no runtime behind us */
  int outer = depth == 0;          /* a runtime call made by another is counted once */
  ENTER();
  cudaError_t r = real_cudaMalloc(p, n);
  LEAVE();
  if (outer && r == 0 && p) COUNT_ALLOC((uint64_t)(uintptr_t)*p, n);
  return r;
}

EXPORT cudaError_t cudaFree(void *p) {
  REAL(cudaFree, cudaError_t(*)(void *));
  if (!real_cudaFree) return 35;
  int outer = depth == 0; /* a runtime call made by another is counted once */
  ENTER();
  cudaError_t r = real_cudaFree(p);
  LEAVE();
  if (outer && r == 0) count_free((uint64_t)(uintptr_t)p);
  return r;
}

EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) {
  REAL(cudaMallocAsync, cudaError_t(*)(void **, size_t, cudaStream_t));
  if (!real_cudaMallocAsync) return 35;
  int outer = depth == 0; /* a runtime call made by another is counted once */
  ENTER();
  cudaError_t r = real_cudaMallocAsync(p, n, s);
  LEAVE();
  if (outer && r == 0 && p)
    pool_alloc((uint64_t)(uintptr_t)*p, n, NULL, __builtin_return_address(0));
  return r;
}

EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s) {
  REAL(cudaMallocFromPoolAsync, cudaError_t(*)(void **, size_t, cudaMemPool_t, cudaStream_t));
  if (!real_cudaMallocFromPoolAsync) return 35;
  int outer = depth == 0; /* a runtime call made by another is counted once */
  ENTER();
  cudaError_t r = real_cudaMallocFromPoolAsync(p, n, pool, s);
  LEAVE();
  if (outer && r == 0 && p)
    pool_alloc((uint64_t)(uintptr_t)*p, n, pool, __builtin_return_address(0));
  return r;
}

EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
  REAL(cudaFreeAsync, cudaError_t(*)(void *, cudaStream_t));
  if (!real_cudaFreeAsync) return 35;
  int outer = depth == 0; /* a runtime call made by another is counted once */
  ENTER();
  cudaError_t r = real_cudaFreeAsync(p, s);
  LEAVE();
  if (outer && r == 0) pool_free((uint64_t)(uintptr_t)p);
  return r;
}

EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  REAL(cudaMemPoolTrimTo, cudaError_t(*)(cudaMemPool_t, size_t));
  if (!real_cudaMemPoolTrimTo) return 35;
  int outer = depth == 0;
  ENTER();
  cudaError_t r = real_cudaMemPoolTrimTo(pool, keep);
  LEAVE();
  if (outer && r == 0) pool_trimmed(pool);
  return r;
}

EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  REAL(cudaMemPoolDestroy, cudaError_t(*)(cudaMemPool_t));
  if (!real_cudaMemPoolDestroy) return 35;
  int outer = depth == 0;
  ENTER();
  cudaError_t r = real_cudaMemPoolDestroy(pool);
  LEAVE();
  if (outer && r == 0) pool_forget(pool);
  return r;
}

/* Synchronisations release what a pool holds above its release threshold;
 * read the pools again only when a pool block was freed since. */
EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  REAL(cudaStreamSynchronize, cudaError_t(*)(cudaStream_t));
  if (!real_cudaStreamSynchronize) return 35;
  cudaError_t r = real_cudaStreamSynchronize(s);
  if (r == 0 && depth == 0) pools_synced();
  return r;
}

EXPORT cudaError_t cudaDeviceSynchronize(void) {
  REAL(cudaDeviceSynchronize, cudaError_t(*)(void));
  if (!real_cudaDeviceSynchronize) return 35;
  cudaError_t r = real_cudaDeviceSynchronize();
  if (r == 0 && depth == 0) pools_synced();
  return r;
}

EXPORT cudaError_t cudaMallocManaged(void **p, size_t n, unsigned flags) {
  REAL(cudaMallocManaged, cudaError_t(*)(void **, size_t, unsigned));
  if (!real_cudaMallocManaged) return 35;
  int outer = depth == 0; /* a runtime call made by another is counted once */
  ENTER();
  cudaError_t r = real_cudaMallocManaged(p, n, flags);
  LEAVE();
  if (outer && r == 0 && p) COUNT_ALLOC((uint64_t)(uintptr_t)*p, n);
  return r;
}

EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h) {
  REAL(cudaMallocPitch, cudaError_t(*)(void **, size_t *, size_t, size_t));
  if (!real_cudaMallocPitch) return 35;
  int outer = depth == 0; /* a runtime call made by another is counted once */
  ENTER();
  cudaError_t r = real_cudaMallocPitch(p, pitch, w, h);
  LEAVE();
  if (outer && r == 0 && p && pitch) COUNT_ALLOC((uint64_t)(uintptr_t)*p, *pitch * h);
  return r;
}

EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pp, struct cudaExtent e) {
  REAL(cudaMalloc3D, cudaError_t(*)(struct cudaPitchedPtr *, struct cudaExtent));
  if (!real_cudaMalloc3D) return 35;
  int outer = depth == 0; /* a runtime call made by another is counted once */
  ENTER();
  cudaError_t r = real_cudaMalloc3D(pp, e);
  LEAVE();
  if (outer && r == 0 && pp)
    COUNT_ALLOC((uint64_t)(uintptr_t)pp->ptr, pp->pitch * e.height * e.depth);
  return r;
}

/* ---- driver API, reached through entry points ----------------------------- */

/* A driver function comes in variants a program chooses when it asks for it,
 * and each variant we hand out must call the real one it stands for:
 *  - per-thread default stream: functions with a stream argument have a
 *    _ptsz twin (cuGetProcAddress's flag CU_GET_PROC_ADDRESS_PER_THREAD_
 *    DEFAULT_STREAM, or the name); slot 1 below, slot 0 the legacy one;
 *  - versions: cuMemAlloc, cuMemFree and cuMemAllocPitch before CUDA 3.2
 *    (cudaVersion < 3020, or the plain exported names) take 32-bit pointers
 *    and are handed out unwrapped; cuGetProcAddress from CUDA 12.0
 *    (cudaVersion >= 12000, or the name cuGetProcAddress_v2) takes a fifth
 *    argument, the status. Handing a program the 4-argument wrapper for the
 *    5-argument function left its status unwritten: NCCL read "symbol not
 *    found" for its driver functions and crashed in its first collective
 *    (2 H200s, bench/results/parallel-calibration/). */
#define PTDS_FLAG 2ull /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */

static CUresult (*drv_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*drv_cuMemFree)(CUdeviceptr);
static CUresult (*drv_cuMemAllocAsync[2])(CUdeviceptr *, size_t, void *);
static CUresult (*drv_cuMemFreeAsync[2])(CUdeviceptr, void *);
static CUresult (*drv_cuMemAllocManaged)(CUdeviceptr *, size_t, unsigned);
static CUresult (*drv_cuMemAllocPitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
static CUresult (*drv_cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const void *,
                                   unsigned long long);
static CUresult (*drv_cuMemRelease)(CUmemGenericAllocationHandle);
static CUresult (*drv_cuMemAllocFromPoolAsync[2])(CUdeviceptr *, size_t, CUmemoryPool, void *);
static CUresult (*drv_cuMemPoolTrimTo)(CUmemoryPool, size_t);
static CUresult (*drv_cuMemPoolDestroy)(CUmemoryPool);
static CUresult (*drv_cuCtxSynchronize)(void);
static CUresult (*drv_cuStreamSynchronize[2])(void *);

/* Handles of cuMemCreate are counted apart from pointers: a handle and a
 * pointer may share a value. Keys of handles get the top bit flipped. */
#define HANDLE_KEY(h) ((uint64_t)(h) ^ 0x8000000000000000ull)

static CUresult w_cuMemAlloc(CUdeviceptr *p, size_t n) {
  CUresult r = drv_cuMemAlloc(p, n);
  if (r == 0 && p && !depth) COUNT_ALLOC(*p, n);
  return r;
}
static CUresult w_cuMemFree(CUdeviceptr p) {
  CUresult r = drv_cuMemFree(p);
  if (r == 0 && !depth) count_free(p);
  return r;
}
static CUresult alloc_async(int v, CUdeviceptr *p, size_t n, void *s, void *caller) {
  CUresult r = drv_cuMemAllocAsync[v](p, n, s);
  if (r == 0 && p && !depth) pool_alloc(*p, n, NULL, caller);
  return r;
}
static CUresult w_cuMemAllocAsync(CUdeviceptr *p, size_t n, void *s) {
  return alloc_async(0, p, n, s, __builtin_return_address(0));
}
static CUresult w_cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, void *s) {
  return alloc_async(1, p, n, s, __builtin_return_address(0));
}
static CUresult alloc_from_pool(int v, CUdeviceptr *p, size_t n, CUmemoryPool pool, void *s,
                                void *caller) {
  CUresult r = drv_cuMemAllocFromPoolAsync[v](p, n, pool, s);
  if (r == 0 && p && !depth) pool_alloc(*p, n, pool, caller);
  return r;
}
static CUresult w_cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, void *s) {
  return alloc_from_pool(0, p, n, pool, s, __builtin_return_address(0));
}
static CUresult w_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool,
                                               void *s) {
  return alloc_from_pool(1, p, n, pool, s, __builtin_return_address(0));
}
static CUresult free_async(int v, CUdeviceptr p, void *s) {
  CUresult r = drv_cuMemFreeAsync[v](p, s);
  if (r == 0 && !depth) pool_free(p);
  return r;
}
static CUresult w_cuMemFreeAsync(CUdeviceptr p, void *s) { return free_async(0, p, s); }
static CUresult w_cuMemFreeAsync_ptsz(CUdeviceptr p, void *s) { return free_async(1, p, s); }
static CUresult w_cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  CUresult r = drv_cuMemPoolTrimTo(pool, keep);
  if (r == 0 && !depth) pool_trimmed(pool);
  return r;
}
/* a synchronisation through the driver (a static runtime's, or the
 * program's own) releases what pools hold above their threshold too */
static CUresult w_cuCtxSynchronize(void) {
  CUresult r = drv_cuCtxSynchronize();
  if (r == 0 && !depth) pools_synced();
  return r;
}
static CUresult stream_sync(int v, void *s) {
  CUresult r = drv_cuStreamSynchronize[v](s);
  if (r == 0 && !depth) pools_synced();
  return r;
}
static CUresult w_cuStreamSynchronize(void *s) { return stream_sync(0, s); }
static CUresult w_cuStreamSynchronize_ptsz(void *s) { return stream_sync(1, s); }
static CUresult w_cuMemPoolDestroy(CUmemoryPool pool) {
  CUresult r = drv_cuMemPoolDestroy(pool);
  if (r == 0 && !depth) pool_forget(pool);
  return r;
}
static CUresult w_cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned f) {
  CUresult r = drv_cuMemAllocManaged(p, n, f);
  if (r == 0 && p && !depth) COUNT_ALLOC(*p, n);
  return r;
}
static CUresult w_cuMemAllocPitch(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e) {
  CUresult r = drv_cuMemAllocPitch(p, pitch, w, h, e);
  if (r == 0 && p && pitch && !depth) COUNT_ALLOC(*p, *pitch * h);
  return r;
}
static CUresult w_cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const void *prop,
                              unsigned long long flags) {
  CUresult r = drv_cuMemCreate(h, n, prop, flags);
  if (r == 0 && h && !depth) COUNT_ALLOC(HANDLE_KEY(*h), n);
  return r;
}
static CUresult w_cuMemRelease(CUmemGenericAllocationHandle h) {
  CUresult r = drv_cuMemRelease(h);
  if (r == 0 && !depth) count_free(HANDLE_KEY(h));
  return r;
}

/* cuGetProcAddress in its two ABIs (4 arguments; 5 from CUDA 12.0) */
static CUresult (*real_cuGetProcAddress)(const char *, void **, int, unsigned long long);
static CUresult (*real_cuGetProcAddress_v2)(const char *, void **, int, unsigned long long, void *);
static CUresult w_cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags);
static CUresult w_cuGetProcAddress_v2(const char *sym, void **pfn, int ver,
                                      unsigned long long flags, void *status);

/* What we hand out for the driver function NAME (a base name, without _v2
 * or _ptsz), asked for at CUDA version VER (0: the newest) in stream variant
 * PTDS, whose real pointer is REAL: our wrapper, remembering REAL in the
 * slot of that variant; or REAL itself for what we do not count. */
struct dfn {
  const char *name;
  bool v1_before_3020; /* 32-bit pointers before CUDA 3.2 */
  void *wrap[2];       /* legacy, per-thread default stream (NULL: none) */
  void **real[2];
};
#define ONE(fn)                                                                                    \
  {(void *)w_##fn, NULL}, { (void **)&drv_##fn, NULL }
#define TWO(fn)                                                                                    \
  {(void *)w_##fn, (void *)w_##fn##_ptsz}, { (void **)&drv_##fn[0], (void **)&drv_##fn[1] }
static const struct dfn dfns[] = {
    {"cuMemAlloc", true, ONE(cuMemAlloc)},
    {"cuMemFree", true, ONE(cuMemFree)},
    {"cuMemAllocPitch", true, ONE(cuMemAllocPitch)},
    {"cuMemAllocManaged", false, ONE(cuMemAllocManaged)},
    {"cuMemCreate", false, ONE(cuMemCreate)},
    {"cuMemRelease", false, ONE(cuMemRelease)},
    {"cuMemPoolTrimTo", false, ONE(cuMemPoolTrimTo)},
    {"cuMemPoolDestroy", false, ONE(cuMemPoolDestroy)},
    {"cuCtxSynchronize", false, ONE(cuCtxSynchronize)},
    {"cuMemAllocAsync", false, TWO(cuMemAllocAsync)},
    {"cuMemAllocFromPoolAsync", false, TWO(cuMemAllocFromPoolAsync)},
    {"cuMemFreeAsync", false, TWO(cuMemFreeAsync)},
    {"cuStreamSynchronize", false, TWO(cuStreamSynchronize)},
};
#undef ONE
#undef TWO
#define N_DFNS (sizeof dfns / sizeof dfns[0])

static bool is_ours(void *p) {
  if (p == (void *)w_cuGetProcAddress || p == (void *)w_cuGetProcAddress_v2) return true;
  for (size_t i = 0; i < N_DFNS; i++)
    if (p == dfns[i].wrap[0] || (dfns[i].wrap[1] && p == dfns[i].wrap[1])) return true;
  return false;
}

static void *wrap_driver(const char *name, void *real, int ver, bool ptds) {
  if (!real || !name || is_ours(real)) return real;
  if (strcmp(name, "cuGetProcAddress") == 0) {
    if (ver != 0 && ver < 12000) {
      *(void **)&real_cuGetProcAddress = real;
      return (void *)w_cuGetProcAddress;
    }
    *(void **)&real_cuGetProcAddress_v2 = real;
    return (void *)w_cuGetProcAddress_v2;
  }
  for (size_t i = 0; i < N_DFNS; i++) {
    const struct dfn *f = &dfns[i];
    if (strcmp(name, f->name) != 0) continue;
    if (f->v1_before_3020 && ver != 0 && ver < 3020) return real;
    /* functions without a stream argument have one variant whatever the
     * flag asked */
    int v = ptds && f->wrap[1] ? 1 : 0;
    __atomic_store_n(f->real[v], real, __ATOMIC_RELEASE);
    return f->wrap[v];
  }
  return real;
}

/* The variant a name stands for when looked up with dlsym: "X_v2" is X at
 * the newest version, "X_ptsz"/"X_ptds" X per thread, plain "X" the first
 * version (the library exports the old ABI under the plain name; for a
 * function with one ABI the version changes nothing in wrap_driver). */
static void *wrap_by_name(const char *name, void *real) {
  char base[64];
  size_t n = strlen(name);
  if (n >= sizeof base) return real;
  memcpy(base, name, n + 1);
  int ver = 1; /* the first version */
  bool ptds = false;
  char *us = strrchr(base, '_');
  if (us && strcmp(us, "_v2") == 0) {
    *us = 0;
    ver = 0;
  } else if (us && (strcmp(us, "_ptsz") == 0 || strcmp(us, "_ptds") == 0)) {
    *us = 0;
    ptds = true;
    ver = 0;
  }
  return wrap_driver(base, real, ver, ptds);
}

static CUresult w_cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags) {
  CUresult r = real_cuGetProcAddress(sym, pfn, ver, flags);
  if (r == 0 && pfn) *pfn = wrap_driver(sym, *pfn, ver, (flags & PTDS_FLAG) != 0);
  return r;
}

static CUresult w_cuGetProcAddress_v2(const char *sym, void **pfn, int ver,
                                      unsigned long long flags, void *status) {
  CUresult r = real_cuGetProcAddress_v2(sym, pfn, ver, flags, status);
  if (r == 0 && pfn) *pfn = wrap_driver(sym, *pfn, ver, (flags & PTDS_FLAG) != 0);
  return r;
}

/* cudaGetDriverEntryPoint hands out the version of the runtime's own CUDA */
static int runtime_version(void) {
  static int v;
  if (!v) {
    dlsym_fn d = real_dlsym();
    int (*get)(int *) = d ? (int (*)(int *))d(RTLD_NEXT, "cudaRuntimeGetVersion") : NULL;
    int got = 0;
    if (!get || get(&got) != 0 || got <= 0) got = 12000;
    v = got;
  }
  return v;
}

/* cudaEnablePerThreadDefaultStream */
#define RT_PTDS_FLAG 2ull

EXPORT cudaError_t cudaGetDriverEntryPoint(const char *sym, void **pfn, unsigned long long flags,
                                           void *status) {
  REAL(cudaGetDriverEntryPoint, cudaError_t(*)(const char *, void **, unsigned long long, void *));
  if (!real_cudaGetDriverEntryPoint) return 35;
  cudaError_t r = real_cudaGetDriverEntryPoint(sym, pfn, flags, status);
  if (r == 0 && pfn) *pfn = wrap_driver(sym, *pfn, runtime_version(), (flags & RT_PTDS_FLAG) != 0);
  return r;
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *sym, void **pfn, unsigned ver,
                                                    unsigned long long flags, void *status) {
  REAL(cudaGetDriverEntryPointByVersion,
       cudaError_t(*)(const char *, void **, unsigned, unsigned long long, void *));
  if (!real_cudaGetDriverEntryPointByVersion) return 35;
  cudaError_t r = real_cudaGetDriverEntryPointByVersion(sym, pfn, ver, flags, status);
  if (r == 0 && pfn) *pfn = wrap_driver(sym, *pfn, (int)ver, (flags & RT_PTDS_FLAG) != 0);
  return r;
}

/* dlsym: programs that dlopen libcuda and look functions up by name get our
 * wrappers; cuGetProcAddress itself is wrapped so the functions it hands out
 * are too. Nothing here calls CUDA. */
/* RTLD_NEXT is relative to the caller: called from here, the real dlsym
 * searches after us, and a library loaded between us and the caller (a
 * sanitizer runtime resolving its interceptors) would get itself back.
 * glibc's _dl_sym takes the caller explicitly (GLIBC_PRIVATE, with the same
 * signature since 2.3; no longer exported since 2.34). Without it, a
 * caller loaded after us (a job's own LD_PRELOAD, which `run` puts behind
 * ours) is answered by the objects after it in load order (link_after):
 * two wrappers of write() preloaded as A:B must get B's and libc's, never
 * each other's or their own, or they call each other forever. A caller
 * loaded before us (the program, a sanitizer runtime) keeps the search
 * after us, unless what it found is the caller's own: then the objects
 * after the caller are asked as well. Those objects are opened again with
 * RTLD_NOLOAD for a handle; no dlopen otherwise: it is intercepted by
 * sanitizer runtimes before they work, and they come before us. */
typedef void *(*dl_sym_fn)(void *, const char *, void *);

/* name as defined in the objects after caller_lm, in load order: the
 * first that defines it itself (a handle's lookup also searches the
 * object's dependencies: their definitions are theirs, found in their own
 * turn), never skip's. */
static void *link_after(dlsym_fn d, const char *name, struct link_map *caller_lm,
                        const void *skip_base) {
  for (struct link_map *l = caller_lm->l_next; l; l = l->l_next) {
    void *h = l->l_name && l->l_name[0] ? dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    if (!h) continue;
    void *p = d(h, name);
    dlclose(h);
    Dl_info at;
    struct link_map *owner = NULL;
    if (p && dladdr1(p, &at, (void **)&owner, RTLD_DL_LINKMAP) && owner == l &&
        at.dli_fbase != skip_base)
      return p;
  }
  return NULL;
}

/* our own object's link map, or NULL */
static struct link_map *self_map(void) {
  static struct link_map *self;
  Dl_info info;
  if (!self && !dladdr1((void *)self_map, &info, (void **)&self, RTLD_DL_LINKMAP)) return NULL;
  return self;
}

/* Is lm after our own object in load order? */
static bool loaded_after_us(const struct link_map *lm) {
  struct link_map *self = self_map();
  for (const struct link_map *l = self ? self->l_next : NULL; l; l = l->l_next)
    if (l == lm) return true;
  return false;
}

/* Is p defined in an object before ours in load order (the program, a
 * library preloaded before us)? Such a definition calls us, not the other
 * way round: a wrapper before us found by RTLD_DEFAULT. */
static bool defined_before_us(void *p) {
  Dl_info at;
  struct link_map *owner = NULL;
  if (!dladdr1(p, &at, (void **)&owner, RTLD_DL_LINKMAP) || !owner) return false;
  return owner != self_map() && !loaded_after_us(owner);
}

static void *dlsym_after(dlsym_fn d, const char *name, void *caller) {
  Dl_info info, at;
  struct link_map *lm = NULL;
  if (dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm && loaded_after_us(lm)) {
    void *p = link_after(d, name, lm, info.dli_fbase);
    if (p) return p;
  }
  void *p = d(RTLD_NEXT, name);
  if (!p || !lm || !dladdr(p, &at) || at.dli_fbase != info.dli_fbase) return p;
  return link_after(d, name, lm, info.dli_fbase);
}

/* Is the caller a wrapper of name behind us: an object loaded after ours
 * that defines name itself (a job's LD_PRELOAD after the interposer's)?
 * Our own function reaches it (rt: the next definition after us), so it
 * is given the next one after itself, as without us: handed ours, it would
 * call us back (each call through us twice), and rt_real set to the
 * definition after it would skip it from then on. */
static bool wrapper_after_us(dlsym_fn d, const char *name, void *caller) {
  Dl_info info, at;
  struct link_map *lm = NULL, *owner = NULL;
  if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !loaded_after_us(lm))
    return false;
  void *h = lm->l_name && lm->l_name[0] ? dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
  if (!h) return false;
  void *own = d(h, name);
  dlclose(h);
  return own && dladdr1(own, &at, (void **)&owner, RTLD_DL_LINKMAP) && owner == lm;
}

static void *dlsym_next(dlsym_fn d, const char *name, void *caller) {
  static dl_sym_fn dl_sym;
  static int looked;
  if (!looked) {
    dl_sym = (dl_sym_fn)dlvsym(RTLD_DEFAULT, "_dl_sym", "GLIBC_PRIVATE");
    looked = 1;
  }
  return dl_sym ? dl_sym(RTLD_NEXT, name, caller) : dlsym_after(d, name, caller);
}

/* Our own runtime functions, in rt_names' order: their addresses in this
 * object (static aliases bind here), never the first definition in the
 * global scope, which is a job's wrapper preloaded before us: handed
 * that, the wrapper would call itself. */
#define OWN(f) static __typeof__(f) own_##f __attribute__((alias(#f)));
OWN(cudaMalloc)
OWN(cudaFree)
OWN(cudaMallocAsync)
OWN(cudaMallocFromPoolAsync)
OWN(cudaFreeAsync)
OWN(cudaMallocManaged)
OWN(cudaMallocPitch)
OWN(cudaMalloc3D)
OWN(cudaGetDriverEntryPoint)
OWN(cudaGetDriverEntryPointByVersion)
OWN(cudaMemPoolTrimTo)
OWN(cudaMemPoolDestroy)
OWN(cudaStreamSynchronize)
OWN(cudaDeviceSynchronize)
static void *const rt_ours[RT_COUNT] = {(void *)own_cudaMalloc,
                                        (void *)own_cudaFree,
                                        (void *)own_cudaMallocAsync,
                                        (void *)own_cudaMallocFromPoolAsync,
                                        (void *)own_cudaFreeAsync,
                                        (void *)own_cudaMallocManaged,
                                        (void *)own_cudaMallocPitch,
                                        (void *)own_cudaMalloc3D,
                                        (void *)own_cudaGetDriverEntryPoint,
                                        (void *)own_cudaGetDriverEntryPointByVersion,
                                        (void *)own_cudaMemPoolTrimTo,
                                        (void *)own_cudaMemPoolDestroy,
                                        (void *)own_cudaStreamSynchronize,
                                        (void *)own_cudaDeviceSynchronize};

EXPORT void *dlsym(void *handle, const char *name) {
  dlsym_fn d = real_dlsym();
  if (!d) return NULL;
  void *caller = __builtin_return_address(0);
  void *p = handle == RTLD_NEXT ? dlsym_next(d, name, caller) : d(handle, name);
  if (!p || name[0] != 'c' || name[1] != 'u') return p;
  if (strncmp(name, "cuda", 4) == 0) {
    for (int i = 0; i < RT_COUNT; i++)
      if (strcmp(name, rt_names[i]) == 0) {
        if (handle == RTLD_NEXT && wrapper_after_us(d, name, caller)) return p;
        void *ours = rt_ours[i];
        if (ours == p) return p;            /* already resolved to us */
        if (defined_before_us(p)) return p; /* it reaches us itself: never our next */
        __atomic_store_n(&rt_real[i], p, __ATOMIC_RELEASE);
        return ours;
      }
    return p;
  }
  return wrap_by_name(name, p);
}
