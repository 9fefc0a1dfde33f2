/* A model of PyTorch's CUDA caching allocator (vramledger/caching.h).
 *
 * The rules, from c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.x):
 * - round_size: requests round up to 512 B (kMinBlockSize).
 * - pools: rounded sizes <= 1 MiB (kSmallSize) go to the small pool, the
 *   rest to the large pool; a block never moves between pools.
 * - get_free_block: the smallest free block of the pool with size >= the
 *   request, ties to the lowest address (BlockComparatorSize). With
 *   max_split_size: a request below it never takes a block at or above it;
 *   a request at or above it takes only blocks < request + 20 MiB.
 * - a new segment (cudaMalloc) when none fits: 2 MiB (kSmallBuffer) for the
 *   small pool, 20 MiB (kLargeBuffer) for requests < 10 MiB
 *   (kMinLargeAlloc), else the request rounded up to 2 MiB (kRoundLarge).
 * - should_split: small pool when the remainder >= 512 B; large pool when
 *   the request < max_split_size and the remainder > 1 MiB. The request
 *   takes the front of the block, the remainder stays free after it.
 * - free: the block merges with free neighbours of its segment.
 * - when cudaMalloc would exceed the device: free cached blocks
 *   (release_available_cached_blocks: with max_split_size, the oversize
 *   free blocks, largest first; then release_cached_blocks: every wholly
 *   free segment, counted in num_alloc_retries) and try again; then OOM.
 * - garbage_collection_threshold: before a cudaMalloc that would take
 *   reserved above threshold x device, wholly free segments are returned,
 *   the least recently used first (PyTorch ages blocks by gc_count; this
 *   model orders them by when they were last freed).
 * - expandable_segments: one segment per pool that grows by 2 MiB pages
 *   at its end and gives free pages back on empty_cache (the model of
 *   ExpandableSegment: map/unmap of kLargeBuffer-aligned pages; to be
 *   checked on a GPU trace).
 * Free blocks are kept per pool in treaps ordered by (size, address), one
 * treap a size class (8 classes a power of two, as TLSF does) with a bitmap
 * of the classes that hold any: a search looks in the request's class,
 * then takes the smallest block of the next class that is not empty. The
 * choice is the same as one ordered set's; the trees are a few blocks
 * deep instead of a few thousand (about twice the events a second:
 * bench/results/speed/README.md#caching-bench). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/internal.h"
#include "vramledger/alloc.h"
#include "vramledger/caching.h"
#include "pytorch_constants.h"

#define NONE (-1)
#define NCLASS 496 /* size classes: below 8 B one a size, then 8 a power of two */

uint64_t vl_cache_round(uint64_t size) {
  return size < VL_PT_MIN_BLOCK_SIZE ? VL_PT_MIN_BLOCK_SIZE
                                     : vl__round_up(size, VL_PT_MIN_BLOCK_SIZE);
}

uint64_t vl_cache_segment_for(uint64_t size) {
  if (size <= VL_PT_SMALL_SIZE) return VL_PT_SMALL_BUFFER;
  if (size < VL_PT_MIN_LARGE_ALLOC) return VL_PT_LARGE_BUFFER;
  return vl__round_up(size, VL_PT_ROUND_LARGE);
}

struct blk {
  uint64_t addr, size, requested, freed_at;
  int32_t prev, next; /* neighbours in the segment */
  uint32_t seg;
  uint8_t pool, allocated, in_tree, live;
};

struct seg {
  uint64_t size;
  int32_t first; /* its first block */
  uint8_t pool, live;
};

struct vl_cache {
  struct vl_cache_conf conf;
  struct blk *b;
  struct tn *t; /* the free treaps' nodes, by block index */
  uint32_t nb, capb;
  int32_t free_slot; /* a chain of unused block slots (through .next) */
  struct seg *s;
  uint32_t ns, caps;
  int32_t root[2][NCLASS];              /* free treaps: small, large pool; by size class */
  uint64_t used[2][(NCLASS + 63) / 64]; /* classes whose treap is not empty */
  int32_t grow_seg[2];                  /* expandable: each pool's segment */
  int32_t grow_last[2];                 /* and the last block found at its end (seg_last) */
  uint64_t clock;
  /* the lowest segment address so far: a new segment is numbered below
   * it, as the driver places most of them on the H200 (eleven allocator
   * histories, bench/results/replay-histories parts 2, 3, 5 and
   * nccl-run's: in nine, 61 to 97 % of segments lie below the one
   * before; in two, 43 and 49 %), so among free blocks of one size the
   * newest segment's is taken first */
  uint64_t low_addr;
  uint64_t *plan_addr, *plan_size; /* the driver's segment addresses, in order */
  size_t n_plan, plan_i;
  uint32_t rng;
  struct vl_cache_stats st;
};

static uint32_t rnd(struct vl_cache *c) {
  c->rng ^= c->rng << 13;
  c->rng ^= c->rng >> 17;
  c->rng ^= c->rng << 5;
  return c->rng;
}

/* The free treaps: nodes apart from the blocks (compact: the search walks
 * only these), parent links, insert and remove by rotations. */
struct tn {
  uint64_t size, addr;
  int32_t l, r, p;
  uint32_t prio;
};

/* the size class: monotone in size */
static unsigned size_class(uint64_t size) {
  if (size < 8) return (unsigned)size;
  unsigned fl = 63u - (unsigned)__builtin_clzll(size);
  return (fl - 3) * 8 + (unsigned)((size >> (fl - 3)) & 7) + 8;
}

/* (size, addr) order */
static bool tless(const struct tn *x, const struct tn *y) {
  return x->size < y->size || (x->size == y->size && x->addr < y->addr);
}

static void relink(struct vl_cache *c, int32_t *root, int32_t parent, int32_t old, int32_t x) {
  if (parent == NONE)
    *root = x;
  else if (c->t[parent].l == old)
    c->t[parent].l = x;
  else
    c->t[parent].r = x;
}

/* x goes up over its parent */
static void rotate_up(struct vl_cache *c, int32_t *root, int32_t x) {
  struct tn *t = c->t;
  int32_t p = t[x].p, g = t[p].p;
  if (t[p].l == x) {
    t[p].l = t[x].r;
    if (t[x].r != NONE) t[t[x].r].p = p;
    t[x].r = p;
  } else {
    t[p].r = t[x].l;
    if (t[x].l != NONE) t[t[x].l].p = p;
    t[x].l = p;
  }
  t[p].p = x;
  t[x].p = g;
  relink(c, root, g, p, x);
}

static void tree_insert(struct vl_cache *c, int32_t x) {
  struct blk *n = &c->b[x];
  struct tn *t = c->t;
  unsigned k = size_class(n->size);
  int32_t *root = &c->root[n->pool][k];
  c->used[n->pool][k / 64] |= 1ull << (k % 64);
  t[x] = (struct tn){
      .size = n->size, .addr = n->addr, .l = NONE, .r = NONE, .p = NONE, .prio = rnd(c)};
  n->in_tree = 1;
  int32_t y = *root, parent = NONE;
  while (y != NONE) {
    parent = y;
    y = tless(&t[x], &t[y]) ? t[y].l : t[y].r;
  }
  t[x].p = parent;
  if (parent == NONE)
    *root = x;
  else if (tless(&t[x], &t[parent]))
    t[parent].l = x;
  else
    t[parent].r = x;
  while (t[x].p != NONE && t[t[x].p].prio < t[x].prio)
    rotate_up(c, root, x);
}

static void tree_remove(struct vl_cache *c, int32_t x) {
  if (!c->b[x].in_tree) return;
  struct tn *t = c->t;
  int pool = c->b[x].pool;
  unsigned k = size_class(t[x].size);
  int32_t *root = &c->root[pool][k];
  while (t[x].l != NONE && t[x].r != NONE) /* down, under the child of higher priority */
    rotate_up(c, root, t[t[x].l].prio > t[t[x].r].prio ? t[x].l : t[x].r);
  int32_t child = t[x].l != NONE ? t[x].l : t[x].r;
  if (child != NONE) t[child].p = t[x].p;
  relink(c, root, t[x].p, x, child);
  if (*root == NONE) c->used[pool][k / 64] &= ~(1ull << (k % 64));
  c->b[x].in_tree = 0;
}

/* the smallest free block of the pool with size >= want, ties to the
 * lowest address */
static int32_t lower_bound(const struct vl_cache *c, int pool, uint64_t want) {
  const struct tn *t = c->t;
  unsigned k = size_class(want);
  int32_t y = c->root[pool][k], best = NONE;
  while (y != NONE) {
    if (t[y].size >= want) {
      best = y;
      y = t[y].l;
    } else {
      y = t[y].r;
    }
  }
  if (best != NONE) return best;
  /* every block of a higher class is larger: the first such class's least */
  for (unsigned w = (k + 1) / 64, from = (k + 1) % 64; w < (NCLASS + 63) / 64; w++, from = 0) {
    uint64_t bits = from < 64 ? c->used[pool][w] & (~0ull << from) : 0;
    if (!bits) continue;
    y = c->root[pool][w * 64 + (unsigned)__builtin_ctzll(bits)];
    while (t[y].l != NONE)
      y = t[y].l;
    return y;
  }
  return NONE;
}

static int32_t new_blk(struct vl_cache *c) {
  if (c->free_slot != NONE) {
    int32_t x = c->free_slot;
    c->free_slot = c->b[x].next;
    memset(&c->b[x], 0, sizeof c->b[x]);
    return x;
  }
  if (c->nb == c->capb) {
    uint32_t nc = c->capb ? c->capb * 2 : 1024;
    struct blk *q = vl_realloc(c->b, (size_t)nc * sizeof *q);
    if (!q) return NONE;
    c->b = q;
    struct tn *u = vl_realloc(c->t, (size_t)nc * sizeof *u);
    if (!u) return NONE;
    c->t = u;
    c->capb = nc;
  }
  memset(&c->b[c->nb], 0, sizeof c->b[0]);
  return (int32_t)c->nb++;
}

static void drop_blk(struct vl_cache *c, int32_t x) {
  c->b[x].live = 0;
  c->b[x].next = c->free_slot;
  c->free_slot = x;
}

static void account(struct vl_cache *c) {
  if (c->st.allocated > c->st.peak_allocated) c->st.peak_allocated = c->st.allocated;
  if (c->st.reserved > c->st.peak_reserved) c->st.peak_reserved = c->st.reserved;
}

/* Is this free block inside a segment that is not wholly free? */
static bool is_split(const struct vl_cache *c, int32_t x) {
  return c->b[x].prev != NONE || c->b[x].next != NONE;
}

static void set_free(struct vl_cache *c, int32_t x, bool free_now) {
  /* inactive_split bookkeeping happens around every change of a block */
  if (!c->b[x].allocated && is_split(c, x) && !free_now) c->st.inactive_split -= c->b[x].size;
  if (free_now && is_split(c, x)) c->st.inactive_split += c->b[x].size;
}

static void release_segment(struct vl_cache *c, uint32_t si) {
  struct seg *s = &c->s[si];
  int32_t x = s->first;
  tree_remove(c, x);
  drop_blk(c, x);
  c->st.reserved -= s->size;
  c->st.segments--;
  c->st.cuda_frees++;
  s->live = 0;
  if (c->grow_seg[s->pool] == (int32_t)si) c->grow_seg[s->pool] = NONE;
}

/* Return wholly free segments: all of them (max_age 0), or those freed
 * before `before` until reserved <= target. */
static void release_free_segments(struct vl_cache *c, uint64_t target, bool oldest_first) {
  for (;;) {
    int32_t pick = NONE;
    for (uint32_t i = 0; i < c->ns; i++) {
      struct seg *s = &c->s[i];
      if (!s->live) continue;
      int32_t x = s->first;
      if (c->b[x].allocated || c->b[x].next != NONE) continue; /* not wholly free */
      if (!oldest_first) {
        release_segment(c, i);
        continue;
      }
      if (pick == NONE || c->b[x].freed_at < c->b[c->s[pick].first].freed_at) pick = (int32_t)i;
    }
    if (!oldest_first || pick == NONE || c->st.reserved <= target) return;
    release_segment(c, (uint32_t)pick);
  }
}

/* With max_split_size: free oversize cached blocks, the smallest that is
 * large enough first, else the largest ones until enough is freed
 * (release_available_cached_blocks). Only wholly free segments can go. */
static bool release_available(struct vl_cache *c, uint64_t want) {
  if (!c->conf.max_split_size) return false;
  bool any = false;
  for (uint32_t i = 0; i < c->ns; i++) {
    struct seg *s = &c->s[i];
    int32_t x = s->live ? s->first : NONE;
    if (x == NONE || c->b[x].allocated || c->b[x].next != NONE) continue;
    if (s->size < c->conf.max_split_size || s->pool == 0) continue;
    release_segment(c, i);
    any = true;
    if (s->size >= want) break;
  }
  return any;
}

static bool would_fit(const struct vl_cache *c, uint64_t more) {
  return !c->conf.device_bytes || c->st.reserved + more <= c->conf.device_bytes;
}

static int32_t new_segment(struct vl_cache *c, int pool, uint64_t size) {
  if (c->ns == c->caps) {
    uint32_t nc = c->caps ? c->caps * 2 : 64;
    struct seg *q = vl_realloc(c->s, (size_t)nc * sizeof *q);
    if (!q) return NONE;
    c->s = q;
    c->caps = nc;
  }
  int32_t x = new_blk(c);
  if (x == NONE) return NONE;
  uint32_t si = c->ns++;
  c->s[si] = (struct seg){.size = size, .first = x, .pool = (uint8_t)pool, .live = 1};
  uint64_t addr = c->low_addr - size - VL_PT_ROUND_LARGE;
  bool planned = false;
  if (c->plan_i < c->n_plan && c->plan_size[c->plan_i] == size) {
    addr = c->plan_addr[c->plan_i++]; /* where the driver put it */
    planned = true;
  } else {
    c->plan_i = c->n_plan; /* the replay left the history: number the rest */
  }
  c->b[x] = (struct blk){.addr = addr,
                         .size = size,
                         .prev = NONE,
                         .next = NONE,
                         .seg = si,
                         .pool = (uint8_t)pool,
                         .live = 1};
  if (!planned) c->low_addr = addr; /* segments never touch: no merging across */
  c->st.reserved += size;
  c->st.segments++;
  c->st.cuda_mallocs++;
  account(c);
  return x;
}

/* expandable: the last block of the pool's segment si, walked from the
 * last one found before where that is still a live block of si (blocks are
 * added and merged at the list's end, so the walk is a step or two), else
 * from the segment's first. Walking from the first each time made a long
 * expandable replay quadratic in its blocks: 91 % of unit_formula's time
 * went to its one expandable job shape. */
static int32_t seg_last(struct vl_cache *c, int pool, int32_t si) {
  int32_t last = c->grow_last[pool];
  if (last == NONE || (uint32_t)last >= c->nb || !c->b[last].live || c->b[last].seg != (uint32_t)si)
    last = c->s[si].first;
  while (c->b[last].next != NONE)
    last = c->b[last].next;
  c->grow_last[pool] = last;
  return last;
}

/* expandable: grow the pool's segment at its end by whole pages so that a
 * free tail block of at least `need` exists; returns that block. */
static int32_t grow(struct vl_cache *c, int pool, uint64_t need) {
  int32_t si = c->grow_seg[pool];
  if (si == NONE) {
    uint64_t size = vl__round_up(need, VL_PT_EXPANDABLE_PAGE);
    if (!would_fit(c, size)) return NONE;
    int32_t x = new_segment(c, pool, size);
    if (x == NONE) return NONE;
    c->grow_seg[pool] = (int32_t)c->b[x].seg;
    return x;
  }
  int32_t last = seg_last(c, pool, si);
  uint64_t tail = c->b[last].allocated ? 0 : c->b[last].size;
  uint64_t more = vl__round_up(need - tail, VL_PT_EXPANDABLE_PAGE);
  if (!would_fit(c, more)) return NONE;
  c->s[si].size += more;
  c->st.reserved += more;
  c->st.cuda_mallocs++; /* a map, not a cudaMalloc: counted the same */
  account(c);
  if (tail) {
    set_free(c, last, false);
    tree_remove(c, last);
    c->b[last].size += more;
    set_free(c, last, true);
    tree_insert(c, last);
    return last;
  }
  int32_t x = new_blk(c);
  if (x == NONE) return NONE;
  c->b[x] = (struct blk){.addr = c->b[last].addr + c->b[last].size,
                         .size = more,
                         .prev = last,
                         .next = NONE,
                         .seg = (uint32_t)si,
                         .pool = (uint8_t)pool,
                         .live = 1};
  c->b[last].next = x;
  set_free(c, x, true);
  tree_insert(c, x);
  return x;
}

vl_status vl_cache_new(const struct vl_cache_conf *conf, struct vl_cache **out) {
  *out = NULL;
  if (conf->gc_threshold < 0 || conf->gc_threshold >= 1) return VL_EINVAL;
  struct vl_cache *c = vl_calloc(1, sizeof *c);
  if (!c) return VL_ENOMEM;
  c->conf = *conf;
  for (int k = 0; k < NCLASS; k++)
    c->root[0][k] = c->root[1][k] = NONE;
  c->grow_seg[0] = c->grow_seg[1] = NONE;
  c->grow_last[0] = c->grow_last[1] = NONE;
  c->free_slot = NONE;
  c->low_addr = 1ull << 60;
  c->rng = 0x9e3779b9u;
  *out = c;
  return VL_OK;
}

void vl_cache_destroy(struct vl_cache *c) {
  if (!c) return;
  vl_free(c->b);
  vl_free(c->t);
  vl_free(c->s);
  vl_free(c->plan_addr);
  vl_free(c->plan_size);
  vl_free(c);
}

vl_status vl_cache_segment_addresses(struct vl_cache *c, const uint64_t *addr, const uint64_t *size,
                                     size_t n) {
  vl_free(c->plan_addr);
  vl_free(c->plan_size);
  c->plan_addr = c->plan_size = NULL;
  c->n_plan = c->plan_i = 0;
  if (!n) return VL_OK;
  c->plan_addr = vl_malloc(n * sizeof *addr);
  c->plan_size = vl_malloc(n * sizeof *size);
  if (!c->plan_addr || !c->plan_size) {
    vl_free(c->plan_addr);
    vl_free(c->plan_size);
    c->plan_addr = c->plan_size = NULL;
    return VL_ENOMEM;
  }
  memcpy(c->plan_addr, addr, n * sizeof *addr);
  memcpy(c->plan_size, size, n * sizeof *size);
  c->n_plan = n;
  /* numbered segments go below every planned one */
  for (size_t i = 0; i < n; i++)
    if (addr[i] < c->low_addr) c->low_addr = addr[i];
  return VL_OK;
}

static int32_t find(struct vl_cache *c, int pool, uint64_t size) {
  uint64_t mss = c->conf.max_split_size;
  int32_t x = lower_bound(c, pool, size);
  if (x == NONE || !mss) return x;
  if (size < mss && c->b[x].size >= mss) return NONE;
  if (size >= mss && c->b[x].size >= size + VL_PT_LARGE_BUFFER) return NONE;
  return x;
}

vl_status vl_cache_malloc(struct vl_cache *c, uint64_t req, uint32_t *handle) {
  uint64_t size = vl_cache_round(req);
  int pool = size <= VL_PT_SMALL_SIZE ? 0 : 1;
  int32_t x = find(c, pool, size);
  if (x == NONE && c->conf.expandable) {
    x = grow(c, pool, size);
    if (x == NONE) { /* give back what is free, then try once more */
      vl_cache_empty(c);
      c->st.alloc_retries++;
      x = grow(c, pool, size);
    }
    if (x == NONE) {
      c->st.ooms++;
      return VL_ERANGE;
    }
  } else if (x == NONE) {
    uint64_t segsz = vl_cache_segment_for(size);
    if (c->conf.gc_threshold > 0 && c->conf.device_bytes &&
        (double)(c->st.reserved + segsz) > c->conf.gc_threshold * (double)c->conf.device_bytes)
      release_free_segments(
          c, (uint64_t)(c->conf.gc_threshold * (double)c->conf.device_bytes) - segsz, true);
    if (!would_fit(c, segsz)) {
      if (!(release_available(c, segsz) && would_fit(c, segsz))) {
        release_free_segments(c, 0, false);
        c->st.alloc_retries++;
        x = find(c, pool, size); /* nothing to find: every free segment is gone */
      }
    }
    if (x == NONE) {
      if (!would_fit(c, segsz)) {
        c->st.ooms++;
        return VL_ERANGE;
      }
      x = new_segment(c, pool, segsz);
      if (x == NONE) return VL_ENOMEM;
    }
  }
  /* take x: split when the rules say so */
  tree_remove(c, x);
  set_free(c, x, false);
  uint64_t rest = c->b[x].size - size;
  bool split = pool == 0 ? rest >= VL_PT_MIN_BLOCK_SIZE
                         : (!c->conf.max_split_size || size < c->conf.max_split_size) &&
                               rest > VL_PT_SMALL_SIZE;
  if (c->conf.expandable && pool == 1) split = rest >= VL_PT_MIN_BLOCK_SIZE;
  if (split) {
    int32_t y = new_blk(c);
    if (y == NONE) return VL_ENOMEM;
    struct blk *bx = &c->b[x];
    c->b[y] = (struct blk){.addr = bx->addr + size,
                           .size = rest,
                           .prev = x,
                           .next = bx->next,
                           .seg = bx->seg,
                           .pool = bx->pool,
                           .live = 1};
    if (bx->next != NONE) c->b[bx->next].prev = y;
    bx->next = y;
    bx->size = size;
    set_free(c, y, true);
    tree_insert(c, y);
  }
  struct blk *bx = &c->b[x];
  bx->allocated = 1;
  bx->requested = req;
  c->st.allocated += bx->size;
  c->st.requested += req;
  c->st.live_blocks++;
  account(c);
  *handle = (uint32_t)x;
/* a developer's build: where each block lands (bench/accuracy/replay_segments.py) */
#ifdef VL_PROG_LOG
  fprintf(stderr, "# land %llu in segment %u of %llu at %llu\n", (unsigned long long)size, bx->seg,
          (unsigned long long)c->s[bx->seg].size,
          (unsigned long long)(bx->addr - c->b[c->s[bx->seg].first].addr));
#endif
  return VL_OK;
}

void vl_cache_free(struct vl_cache *c, uint32_t h) {
  if (h >= c->nb || !c->b[h].live || !c->b[h].allocated) return;
  int32_t x = (int32_t)h;
  struct blk *bx = &c->b[x];
  bx->allocated = 0;
  bx->freed_at = ++c->clock;
  c->st.allocated -= bx->size;
  c->st.requested -= bx->requested;
  c->st.live_blocks--;
  /* merge with free neighbours */
  for (int side = 0; side < 2; side++) {
    int32_t y = side ? c->b[x].next : c->b[x].prev;
    if (y == NONE || c->b[y].allocated) continue;
    set_free(c, y, false);
    tree_remove(c, y);
    if (side) { /* y after x */
      c->b[x].size += c->b[y].size;
      c->b[x].next = c->b[y].next;
      if (c->b[y].next != NONE) c->b[c->b[y].next].prev = x;
    } else { /* y before x: y absorbs x */
      c->b[y].size += c->b[x].size;
      c->b[y].next = c->b[x].next;
      if (c->b[x].next != NONE) c->b[c->b[x].next].prev = y;
      c->b[y].freed_at = c->b[x].freed_at;
      drop_blk(c, x);
      x = y;
    }
    if (side) drop_blk(c, y);
  }
  c->s[c->b[x].seg].first = c->b[x].prev == NONE ? x : c->s[c->b[x].seg].first;
  set_free(c, x, true);
  tree_insert(c, x);
}

void vl_cache_empty(struct vl_cache *c) {
  if (c->conf.expandable) { /* unmap the free pages at each segment's end */
    for (int pool = 0; pool < 2; pool++) {
      int32_t si = c->grow_seg[pool];
      if (si == NONE) continue;
      int32_t last = seg_last(c, pool, si);
      if (c->b[last].allocated) continue;
      uint64_t start =
          vl__round_up(c->b[last].addr - c->b[c->s[si].first].addr, VL_PT_EXPANDABLE_PAGE);
      uint64_t end = c->s[si].size, give = end > start ? end - start : 0;
      if (c->b[last].prev == NONE && give == c->s[si].size) {
        release_segment(c, (uint32_t)si);
        continue;
      }
      if (!give) continue;
      set_free(c, last, false);
      tree_remove(c, last);
      c->b[last].size -= give;
      c->s[si].size -= give;
      c->st.reserved -= give;
      c->st.cuda_frees++;
      if (c->b[last].size) {
        set_free(c, last, true);
        tree_insert(c, last);
      } else { /* the page boundary fell on the block's start */
        c->b[c->b[last].prev].next = NONE;
        drop_blk(c, last);
      }
    }
    return;
  }
  release_free_segments(c, 0, false);
}

void vl_cache_reset_peaks(struct vl_cache *c) {
  c->st.peak_allocated = c->st.allocated;
  c->st.peak_reserved = c->st.reserved;
}

void vl_cache_stats(const struct vl_cache *c, struct vl_cache_stats *s) { *s = c->st; }

static void mix(uint64_t d[2], uint64_t v) {
  /* two lanes of splitmix64's finaliser, seeded apart */
  for (int i = 0; i < 2; i++) {
    uint64_t z = d[i] ^ (v + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    d[i] = z ^ (z >> 31);
  }
}

/* a wholly free segment's place among them by when it was freed: what
 * release_free_segments reads of the clock */
static uint64_t free_rank(const struct vl_cache *c, int32_t x) {
  uint64_t r = 0;
  for (uint32_t i = 0; i < c->ns; i++) {
    const struct blk *f = &c->b[c->s[i].first];
    if (c->s[i].live && !f->allocated && f->next == NONE && f->freed_at < c->b[x].freed_at) r++;
  }
  return r;
}

void vl_cache_digest(const struct vl_cache *c, uint64_t out[2]) {
  uint64_t d[2] = {0, 0};
  mix(d, c->low_addr);
  mix(d, c->plan_i);
  for (int pool = 0; pool < 2; pool++)
    mix(d, (uint64_t)(int64_t)c->grow_seg[pool]);
  for (uint32_t i = 0; i < c->ns; i++) {
    const struct seg *s = &c->s[i];
    if (!s->live) continue;
    mix(d, i);
    mix(d, s->pool);
    mix(d, s->size);
    for (int32_t x = s->first; x != NONE; x = c->b[x].next) {
      const struct blk *b = &c->b[x];
      mix(d, b->addr);
      mix(d, b->size);
      if (b->allocated) { /* whose it is: the handle the caller frees it by */
        mix(d, (uint64_t)x);
        mix(d, b->requested);
      } else {
        mix(d, b->prev == NONE && b->next == NONE ? free_rank(c, x) : UINT64_MAX);
      }
    }
  }
  out[0] = d[0];
  out[1] = d[1];
}

void vl_cache_repeat(struct vl_cache *c, const struct vl_cache_stats *since, uint64_t times) {
  struct vl_cache_stats *s = &c->st;
  s->cuda_mallocs += times * (s->cuda_mallocs - since->cuda_mallocs);
  s->cuda_frees += times * (s->cuda_frees - since->cuda_frees);
  s->alloc_retries += times * (s->alloc_retries - since->alloc_retries);
  s->ooms += times * (s->ooms - since->ooms);
}

static uint32_t tree_count(const struct vl_cache *c, int32_t x, int32_t parent, unsigned k,
                           bool *ok) {
  if (x == NONE) return 0;
  const struct blk *b = &c->b[x];
  const struct tn *t = &c->t[x];
  if (!b->live || b->allocated || !b->in_tree || t->p != parent) *ok = false;
  if (size_class(t->size) != k) *ok = false;
  if (t->size != b->size || t->addr != b->addr) *ok = false;
  if (t->l != NONE && (!tless(&c->t[t->l], t) || c->t[t->l].prio > t->prio)) *ok = false;
  if (t->r != NONE && (!tless(t, &c->t[t->r]) || c->t[t->r].prio > t->prio)) *ok = false;
  return 1 + tree_count(c, t->l, x, k, ok) + tree_count(c, t->r, x, k, ok);
}

void vl_cache_walk(const struct vl_cache *c,
                   void (*seg)(void *ctx, const struct vl_cache_segment *),
                   void (*blk)(void *ctx, const struct vl_cache_block *), void *ctx) {
  for (uint32_t i = 0; i < c->ns; i++) {
    const struct seg *s = &c->s[i];
    if (!s->live) continue;
    struct vl_cache_segment vs = {c->b[s->first].addr, s->size, s->pool == 0};
    seg(ctx, &vs);
    for (int32_t x = s->first; x != NONE; x = c->b[x].next) {
      const struct blk *b = &c->b[x];
      struct vl_cache_block vb = {b->addr, b->size, b->allocated ? b->requested : 0,
                                  b->allocated != 0};
      blk(ctx, &vb);
    }
  }
}

uint64_t vl_cache_block_addr(const struct vl_cache *c, uint32_t h) {
  return h < c->nb && c->b[h].live ? c->b[h].addr : 0;
}

bool vl_cache_check(const struct vl_cache *c) {
  uint64_t alloc = 0, res = 0, split = 0, segs = 0, live = 0;
  uint32_t free_blocks = 0;
  bool ok = true;
  for (uint32_t i = 0; i < c->ns; i++) {
    const struct seg *s = &c->s[i];
    if (!s->live) continue;
    segs++;
    res += s->size;
    uint64_t sum = 0, addr = c->b[s->first].addr;
    if (c->b[s->first].prev != NONE) ok = false;
    for (int32_t x = s->first, prev = NONE; x != NONE; prev = x, x = c->b[x].next) {
      const struct blk *b = &c->b[x];
      if (!b->live || b->prev != prev || b->addr != addr || b->seg != i) ok = false;
      if (prev != NONE && !b->allocated && !c->b[prev].allocated) ok = false; /* unmerged */
      addr += b->size;
      sum += b->size;
      if (b->allocated) {
        alloc += b->size;
        live++;
      } else {
        free_blocks++;
        if (!b->in_tree) ok = false;
        if (b->prev != NONE || b->next != NONE) split += b->size;
      }
    }
    if (sum != s->size) ok = false;
  }
  uint32_t in_trees = 0;
  for (int pool = 0; pool < 2; pool++)
    for (unsigned k = 0; k < NCLASS; k++) {
      bool used = (c->used[pool][k / 64] >> (k % 64)) & 1;
      if (used != (c->root[pool][k] != NONE)) ok = false;
      in_trees += tree_count(c, c->root[pool][k], NONE, k, &ok);
    }
  return ok && in_trees == free_blocks && alloc == c->st.allocated && res == c->st.reserved &&
         split == c->st.inactive_split && segs == c->st.segments && live == c->st.live_blocks &&
         alloc <= res;
}
