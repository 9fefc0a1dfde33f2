/* lib/model/caching.c: the model of PyTorch's caching allocator, on cases
 * worked out by hand from c10/cuda/CUDACachingAllocator.cpp's rules, and a
 * long random sequence whose books must balance after every event. */
#include "testutil.h"
#include "vramledger/caching.h"

#define KiB (1ull << 10)
#define MB (1ull << 20)

static struct vl_cache *mk(uint64_t device, uint64_t mss, double gc, bool exp) {
  struct vl_cache_conf conf = {device, mss, gc, exp};
  struct vl_cache *c = NULL;
  assert_int_equal(vl_cache_new(&conf, &c), VL_OK);
  return c;
}

static uint32_t A(struct vl_cache *c, uint64_t n) {
  uint32_t h = 0;
  assert_int_equal(vl_cache_malloc(c, n, &h), VL_OK);
  assert_true(vl_cache_check(c));
  return h;
}

static struct vl_cache_stats S(const struct vl_cache *c) {
  struct vl_cache_stats s;
  vl_cache_stats(c, &s);
  return s;
}

static void
sizes(void **state) {
  (void)state;
  /* measured on the H200 (data/reference/h200-torch-2.11/basics.json) */
  assert_int_equal(vl_cache_round(1), 512);
  assert_int_equal(vl_cache_round(513), 1024);
  assert_int_equal(vl_cache_round(MB + 1), MB + 512);
  assert_int_equal(vl_cache_segment_for(1024), 2 * MB);
  assert_int_equal(vl_cache_segment_for(MB + 512), 20 * MB);
  assert_int_equal(vl_cache_segment_for(10 * MB), 10 * MB);
  assert_int_equal(vl_cache_segment_for(100 * MB + 1), 102 * MB);
}

static void pools_and_splitting(void **state) {
  (void)state;
  struct vl_cache *c = mk(0, 0, 0, false);
  A(c, 513);
  A(c, 513); /* the same 2 MiB small segment */
  assert_int_equal(S(c).allocated, 2048);
  assert_int_equal(S(c).reserved, 2 * MB);
  A(c, MB + 1); /* large pool: a 20 MiB segment, the rest split off */
  assert_int_equal(S(c).reserved, 22 * MB);
  assert_int_equal(S(c).segments, 2);
  A(c, 100 * MB); /* its own segment, exactly */
  assert_int_equal(S(c).reserved, 122 * MB);
  assert_int_equal(S(c).peak_allocated, 2048 + MB + 512 + 100 * MB);
  vl_cache_destroy(c);
}

static void reuse_merge_and_empty(void **state) {
  (void)state;
  struct vl_cache *c = mk(0, 0, 0, false);
  uint32_t a = A(c, 8 * MB), b = A(c, 8 * MB); /* both in one 20 MiB segment */
  assert_int_equal(S(c).reserved, 20 * MB);
  assert_int_equal(S(c).inactive_split, 4 * MB); /* the free rest of the segment */
  vl_cache_free(c, a);
  assert_true(vl_cache_check(c));
  assert_int_equal(S(c).inactive_split, 12 * MB);
  vl_cache_free(c, b); /* merges back into one free segment: nothing split */
  assert_true(vl_cache_check(c));
  assert_int_equal(S(c).inactive_split, 0);
  assert_int_equal(S(c).reserved, 20 * MB); /* cached, not returned */
  uint32_t d = A(c, 16 * MB);               /* reuses it: no new segment */
  assert_int_equal(S(c).cuda_mallocs, 1);
  vl_cache_free(c, d);
  vl_cache_empty(c);
  assert_true(vl_cache_check(c));
  assert_int_equal(S(c).reserved, 0);
  assert_int_equal(S(c).cuda_frees, 1);
  vl_cache_destroy(c);
}

static void fragmentation(void **state) {
  (void)state;
  struct vl_cache *c = mk(0, 0, 0, false);
  A(c, 6 * MB);
  uint32_t mid = A(c, 6 * MB);
  A(c, 6 * MB); /* 18 of 20 MiB; 2 MiB free at the end */
  vl_cache_free(c, mid);
  assert_int_equal(S(c).inactive_split, 8 * MB);
  A(c, 7 * MB); /* 6 and 2 MiB free, apart: a new 20 MiB segment */
  assert_int_equal(S(c).reserved, 40 * MB);
  assert_int_equal(S(c).segments, 2);
  A(c, 5 * MB); /* best fit: the 6 MiB hole, leaving 1 MiB unsplit (not > 1 MiB) */
  assert_int_equal(S(c).allocated, 6 * MB * 2 + 7 * MB + 6 * MB);
  vl_cache_destroy(c);
}

static void retry_and_oom(void **state) {
  (void)state;
  struct vl_cache *c = mk(40 * MB, 0, 0, false);
  uint32_t a = A(c, 20 * MB);
  vl_cache_free(c, a); /* cached */
  A(c, 30 * MB);       /* 20 + 30 > 40: the cache is freed, then it fits */
  assert_int_equal(S(c).alloc_retries, 1);
  assert_int_equal(S(c).reserved, 30 * MB);
  uint32_t h;
  assert_int_equal(vl_cache_malloc(c, 30 * MB, &h), VL_ERANGE);
  assert_int_equal(S(c).ooms, 1);
  assert_true(vl_cache_check(c));
  vl_cache_destroy(c);
}

static void max_split_size(void **state) {
  (void)state;
  struct vl_cache *c = mk(0, 64 * MB, 0, false);
  uint32_t big = A(c, 100 * MB);
  vl_cache_free(c, big);
  A(c, 8 * MB); /* below max_split_size: never from the oversize block */
  assert_int_equal(S(c).reserved, 120 * MB);
  A(c, 110 * MB); /* oversize, but the 100 MiB block is too small: new */
  assert_int_equal(S(c).reserved, 230 * MB);
  vl_cache_destroy(c);
}

static void expandable(void **state) {
  (void)state;
  struct vl_cache *c = mk(0, 0, 0, true);
  uint32_t a = A(c, 8 * MB); /* pages of 2 MiB, no 20 MiB segment */
  assert_int_equal(S(c).reserved, 8 * MB);
  uint32_t b = A(c, 3 * MB); /* the segment grows by 4 MiB */
  assert_int_equal(S(c).reserved, 12 * MB);
  assert_int_equal(S(c).segments, 1);
  vl_cache_free(c, b);
  vl_cache_free(c, a);
  assert_true(vl_cache_check(c));
  vl_cache_empty(c);
  assert_true(vl_cache_check(c));
  assert_int_equal(S(c).reserved, 0);
  vl_cache_destroy(c);
}

static void gc_threshold(void **state) {
  (void)state;
  struct vl_cache *c = mk(100 * MB, 0, 0.5, false);
  uint32_t a = A(c, 30 * MB);
  vl_cache_free(c, a); /* 30 MiB cached */
  A(c, 40 * MB);       /* 30 + 40 > 50: the old free segment goes first */
  assert_int_equal(S(c).reserved, 40 * MB);
  assert_int_equal(S(c).alloc_retries, 0);
  vl_cache_destroy(c);
}

/* 200,000 random events of PyTorch-like sizes: the books balance after
 * each one, and freeing everything leaves nothing allocated. */
static void books_balance(void **state) {
  (void)state;
  for (int mode = 0; mode < 3; mode++) {
    struct vl_cache *c = mk(mode == 1 ? 2048 * MB : 0, mode == 1 ? 32 * MB : 0, 0, mode == 2);
    uint32_t live[4096];
    int n = 0;
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      if (n > 0 && (x % 100 < 45 || n == 4096)) {
        int k = (int)((x >> 8) % (uint64_t)n);
        vl_cache_free(c, live[k]);
        live[k] = live[--n];
      } else {
        uint64_t size = (x >> 20) % 4 == 0 ? (x >> 24) % (64 * MB) : (x >> 24) % (2 * MB);
        uint32_t h;
        vl_status s = vl_cache_malloc(c, size, &h);
        if (s == VL_OK)
          live[n++] = h;
        else
          assert_int_equal(s, VL_ERANGE);
      }
      if (i % 997 == 0) assert_true(vl_cache_check(c));
      if (i % 50000 == 0) vl_cache_empty(c);
    }
    while (n)
      vl_cache_free(c, live[--n]);
    assert_true(vl_cache_check(c));
    assert_int_equal(S(c).allocated, 0);
    assert_int_equal(S(c).inactive_split, 0);
    vl_cache_empty(c);
    assert_int_equal(S(c).reserved, 0);
    vl_cache_destroy(c);
  }
}

/* Among free blocks of one size the allocator takes the lowest address,
 * and the driver decides the addresses: the same requests reserve 40 MiB
 * when the first segment lies lower, 60 MiB when the second does. */
static uint64_t ties(const uint64_t *plan_addr) {
  struct vl_cache *c = mk(0, 0, 0, false);
  const uint64_t size[2] = {20 * MB, 20 * MB};
  if (plan_addr) assert_int_equal(vl_cache_segment_addresses(c, plan_addr, size, 2), VL_OK);
  uint32_t h1 = A(c, 6 * MB), h2 = A(c, 14 * MB); /* segment 1, full */
  uint32_t h3 = A(c, 6 * MB), h4 = A(c, 14 * MB); /* segment 2, full */
  (void)h2;
  vl_cache_free(c, h1);
  vl_cache_free(c, h3); /* two free 6 MiB blocks: a tie */
  A(c, 6 * MB);         /* takes the lower one */
  vl_cache_free(c, h4); /* merges with its neighbour when that is free */
  A(c, 20 * MB);        /* a whole free segment, or a new one */
  uint64_t r = S(c).peak_reserved;
  assert_true(vl_cache_check(c));
  vl_cache_destroy(c);
  return r;
}

static void driver_addresses_break_ties(void **state) {
  (void)state;
  /* numbered as the driver mostly places them: each new one lower */
  assert_int_equal(ties(NULL), 60 * MB);
  const uint64_t first_low[2] = {1ull << 33, 1ull << 34};
  assert_int_equal(ties(first_low), 40 * MB);
  const uint64_t second_low[2] = {1ull << 34, 1ull << 33};
  assert_int_equal(ties(second_low), 60 * MB);
  /* a plan that disagrees on the first size is not used */
  struct vl_cache *c = mk(0, 0, 0, false);
  const uint64_t wrong[1] = {4 * MB}, at[1] = {1ull << 40};
  assert_int_equal(vl_cache_segment_addresses(c, at, wrong, 1), VL_OK);
  A(c, 6 * MB);
  assert_int_equal(S(c).reserved, 20 * MB);
  vl_cache_destroy(c);
  /* the trace line */
  const char *text = "s 8589934592 20971520\ns 4294967296 20971520\na 1 6291456 cuda\n";
  struct vl_trace t;
  struct vl_err err = {""};
  assert_int_equal(vl_trace_parse(text, strlen(text), &t, &err), VL_OK);
  assert_int_equal(t.n_segs, 2);
  assert_int_equal(t.seg_addr[1], 1ull << 32);
  assert_int_equal(t.seg_size[0], 20 * MB);
  assert_int_equal(t.n, 1);
  vl_trace_release(&t);
  assert_int_equal(vl_trace_parse("s 12\n", 5, &t, &err), VL_EPARSE);
  assert_int_equal(vl_trace_parse("s 12 0\n", 7, &t, &err), VL_EPARSE);
  assert_int_equal(vl_trace_parse("s x 5\n", 6, &t, &err), VL_EPARSE);
}

/* vl_cache_digest: a cycle of calls that ends where it began gives the
 * digest it began with (what lets the training replay count repeated
 * micro-batches instead of replaying them), one more live block changes
 * it; vl_cache_repeat counts the cycle's events again */
static void digest_and_repeat(void **state) {
  (void)state;
  struct vl_cache *c = mk(0, 0, 0, false);
  uint32_t w = A(c, 20 * MB);
  uint64_t before[2], d1[2], d2[2], more[2];
  vl_cache_digest(c, before);
  for (int cycle = 0; cycle < 2; cycle++) { /* a block made and let go */
    vl_cache_free(c, A(c, 30 * MB));
    vl_cache_digest(c, cycle ? d2 : d1);
  }
  assert_memory_equal(d1, d2, sizeof d1);
  assert_memory_not_equal(before, d1, sizeof d1); /* the first cycle made a segment */
  uint32_t x = A(c, 1 * MB);
  vl_cache_digest(c, more);
  assert_memory_not_equal(more, d2, sizeof d2);
  vl_cache_free(c, x);
  /* a cycle that makes and returns a segment (empty_cache), counted 3 more times */
  vl_cache_empty(c);
  struct vl_cache_stats since = S(c);
  vl_cache_free(c, A(c, 64 * MB));
  vl_cache_empty(c);
  vl_cache_repeat(c, &since, 3);
  assert_int_equal(S(c).cuda_mallocs - since.cuda_mallocs, 4);
  assert_int_equal(S(c).cuda_frees - since.cuda_frees, 4);
  assert_int_equal(S(c).reserved, since.reserved);
  vl_cache_free(c, w);
  vl_cache_destroy(c);
}

static void trace_parse_and_replay(void **state) {
  (void)state;
  const char *text =
      "m step\na 1 6291456 cuda\na 2 6291456 cuda\na 3 6291456 cuda\nf 2\n"
      "m backward\na 4 7340032 cuda model.h.0.mlp\na 5 1000 cpu model.h.0.mlp\nf 4\nf 9\na 6 12";
  struct vl_trace t;
  struct vl_err err = {""};
  assert_int_equal(vl_trace_parse(text, strlen(text), &t, &err), VL_OK);
  assert_int_equal(t.n, 10); /* the cut last line is dropped, and counted */
  assert_int_equal(t.cut_last_line, strlen("a 6 12"));
  assert_int_equal(t.n_marks, 2);
  assert_int_equal(t.per_device[1], 4);
  assert_int_equal(t.per_device[0], 1);
  struct vl_cache_conf conf = {0};
  struct vl_replay r;
  assert_int_equal(vl_trace_replay(&t, -1, &conf, &r), VL_OK); /* cuda: the trace has some */
  assert_int_equal(r.allocs, 4);
  assert_int_equal(r.skipped, 2); /* the cpu tensor and a free of an id never seen */
  assert_int_equal(r.peak_allocated, 19 * MB);
  assert_int_equal(r.peak_reserved, 40 * MB);
  assert_string_equal(t.marks[r.peak_mark], "backward");
  assert_int_equal(t.n_modules, 2); /* "" and the one module, interned once */
  assert_string_equal(t.modules[r.peak_module], "model.h.0.mlp");
  conf.device_bytes = 30 * MB; /* the second segment does not fit */
  assert_int_equal(vl_trace_replay(&t, 1, &conf, &r), VL_OK);
  assert_true(r.oom);
  vl_trace_release(&t);
  assert_int_equal(vl_trace_parse("a 0 5 cuda\n", 11, &t, &err), VL_EPARSE);
  assert_int_equal(vl_trace_parse("a 1 x cuda\n", 11, &t, &err), VL_EPARSE);
  assert_int_equal(vl_trace_parse("q\n", 2, &t, &err), VL_EPARSE);
  /* a number never runs into the next line (fuzzing found strtoull did) */
  assert_int_equal(vl_trace_parse("a 24\n5 cuda\n", 12, &t, &err), VL_EPARSE);
  assert_int_equal(vl_trace_parse("a 1 -5 cuda\n", 12, &t, &err), VL_EPARSE);
}

/* "e": the cache emptied (torch.cuda.empty_cache) at that point of the
 * trace: the freed 100 MiB segment is returned, so the 6 MiB block takes a
 * 20 MiB segment of its own and the second 100 MiB one a new segment. */
static void trace_empty_cache(void **state) {
  (void)state;
  const char *with = "a 1 104857600 cuda\nf 1\ne\na 2 6291456 cuda\na 3 104857600 cuda\n";
  const char *without = "a 1 104857600 cuda\nf 1\na 2 6291456 cuda\na 3 104857600 cuda\n";
  struct vl_trace t;
  struct vl_err err = {""};
  struct vl_cache_conf conf = {0};
  struct vl_replay r;
  assert_int_equal(vl_trace_parse(with, strlen(with), &t, &err), VL_OK);
  assert_int_equal(t.n, 5);
  assert_int_equal(vl_trace_replay(&t, -1, &conf, &r), VL_OK);
  assert_int_equal(r.peak_reserved, 120 * MB);
  vl_trace_release(&t);
  assert_int_equal(vl_trace_parse(without, strlen(without), &t, &err), VL_OK);
  assert_int_equal(vl_trace_replay(&t, -1, &conf, &r), VL_OK);
  assert_int_equal(r.peak_reserved, 200 * MB); /* the 6 MiB split the freed block */
  vl_trace_release(&t);
  assert_int_equal(vl_trace_parse("e 1\n", 4, &t, &err), VL_EPARSE);
}

/* The snapshot's events, as PyTorch's allocator records them: a segment
 * taken before the block it holds, a free as its request and completion
 * carrying the block's allocation, empty_cache()'s cudaFree; with
 * expandable segments, pages mapped onto the one segment; each live block
 * tied to the trace event that allocated it. */
static void trace_snapshot_events(void **state) {
  (void)state;
  const char *text = "a 1 1000 cuda model.h.0 at=t.py:3\na 2 104857600 cuda\nf 1\ne\n";
  struct vl_trace t;
  struct vl_err err = {""};
  struct vl_cache_conf conf = {0};
  struct vl_snapshot s;
  assert_int_equal(vl_trace_parse(text, strlen(text), &t, &err), VL_OK);
  assert_int_equal(vl_trace_snapshot(&t, -1, &conf, 1.0, t.n - 1, &s), VL_OK);
  static const struct {
    uint8_t action;
    uint64_t size;
    size_t at, frame;
  } want[] = {{VL_SNAP_SEGMENT_ALLOC, 2 * MB, 0, 0},   {VL_SNAP_ALLOC, 1024, 0, 0},
              {VL_SNAP_SEGMENT_ALLOC, 100 * MB, 1, 1}, {VL_SNAP_ALLOC, 100 * MB, 1, 1},
              {VL_SNAP_FREE_REQUESTED, 1024, 2, 0},    {VL_SNAP_FREE_COMPLETED, 1024, 2, 0},
              {VL_SNAP_SEGMENT_FREE, 2 * MB, 3, 3}};
  assert_int_equal(s.n_ev, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < s.n_ev; i++) {
    assert_int_equal(s.ev[i].action, want[i].action);
    assert_int_equal(s.ev[i].size, want[i].size);
    assert_int_equal(s.ev[i].at, want[i].at);
    assert_int_equal(s.ev[i].frame, want[i].frame);
  }
  assert_int_equal(s.ev[0].addr, s.ev[1].addr); /* the block at its segment's start */
  assert_int_equal(s.ev[6].addr, s.ev[0].addr);
  assert_int_equal(s.n_segs, 1);
  assert_int_equal(s.n_blocks, 1);
  assert_int_equal(s.block_at[0], 1); /* "a 2": its module and line, for its frame */
  assert_ptr_equal(s.trace, &t);
  vl_snapshot_release(&s);
  vl_trace_release(&t);

  const char *grow = "a 1 20971520 cuda\na 2 20971520 cuda\nf 2\ne\n";
  conf.expandable = true;
  assert_int_equal(vl_trace_parse(grow, strlen(grow), &t, &err), VL_OK);
  assert_int_equal(vl_trace_snapshot(&t, -1, &conf, 1.0, t.n - 1, &s), VL_OK);
  size_t maps = 0, unmaps = 0, allocs = 0;
  uint64_t mapped = 0;
  for (size_t i = 0; i < s.n_ev; i++) {
    allocs += s.ev[i].action == VL_SNAP_SEGMENT_ALLOC;
    if (s.ev[i].action == VL_SNAP_SEGMENT_ALLOC || s.ev[i].action == VL_SNAP_SEGMENT_MAP)
      mapped += s.ev[i].size;
    if (s.ev[i].action == VL_SNAP_SEGMENT_UNMAP) mapped -= s.ev[i].size;
    maps += s.ev[i].action == VL_SNAP_SEGMENT_MAP;
    unmaps += s.ev[i].action == VL_SNAP_SEGMENT_UNMAP;
  }
  assert_int_equal(allocs, 1); /* one segment, grown */
  assert_int_equal(maps, 1);
  assert_int_equal(unmaps, 1); /* empty_cache() unmaps the free pages */
  assert_int_equal(s.n_segs, 1);
  assert_int_equal(mapped, s.segs[0].size);
  vl_snapshot_release(&s);
  vl_trace_release(&t);
}

/* Peaks from a mark, as torch.cuda.reset_peak_memory_stats() there: what
 * is live (100 MiB) and cached (the freed 200 MiB segment) stays. */
static void trace_from_mark(void **state) {
  (void)state;
  const char *text = "a 1 104857600 cuda\na 2 209715200 cuda\nf 2\nm warm\nm measure\n"
                     "a 3 52428800 cuda\nf 3\n";
  struct vl_trace t;
  struct vl_err err = {""};
  struct vl_cache_conf conf = {0};
  struct vl_replay r;
  assert_int_equal(vl_trace_parse(text, strlen(text), &t, &err), VL_OK);
  long m = vl_trace_find_mark(&t, "measure");
  assert_int_equal(m, 1);
  assert_int_equal(vl_trace_find_mark(&t, "step"), -1);
  assert_int_equal(vl_trace_replay_from(&t, -1, &conf, 1.0, -1, &r), VL_OK);
  assert_int_equal(r.peak_allocated, 300 * MB);
  assert_false(r.from_mark_seen);
  assert_int_equal(vl_trace_replay_from(&t, -1, &conf, 1.0, m, &r), VL_OK);
  assert_true(r.from_mark_seen);
  assert_int_equal(r.peak_allocated, 150 * MB);
  assert_int_equal(r.peak_reserved, 300 * MB);
  assert_int_equal(r.peak_mark, m);
  vl_trace_release(&t);
}

/* What is live at the peak, by the mark before each allocation and by
 * module: each live allocation once (an id freed and made again counts
 * where it was made last), requests rounded to 512 B, another device's
 * allocations left out, batch allocations scaled. */
static void trace_live_at_peak(void **state) {
  (void)state;
  const char *text = "# batch 2\na 1 4 cpu\na 2 1000 meta model.w\nm forward 1\n"
                     "b 3 6291456 meta model.h\nb 4 6291456 meta model.h\nf 3\nm optimizer 1\n"
                     "a 5 2048 meta\nf 4\nm forward 2\nb 4 6291456 meta model.g\n";
  struct vl_trace t;
  struct vl_err err = {""};
  struct vl_cache_conf conf = {0};
  struct vl_replay r;
  struct vl_live_at l;
  assert_int_equal(vl_trace_parse(text, strlen(text), &t, &err), VL_OK);
  assert_int_equal(vl_trace_replay(&t, -1, &conf, &r), VL_OK);
  assert_int_equal(vl_trace_live_at(&t, -1, 1.0, r.peak_event, &l), VL_OK);
  /* at the peak (the second activation of forward 1): the parameter and both */
  assert_int_equal(l.bytes, 1024 + 2 * 6291456);
  assert_int_equal(l.n_mark, 2);
  assert_string_equal(t.marks[l.by_mark[0].key - 1], "forward 1");
  assert_int_equal(l.by_mark[0].bytes, 2 * 6291456);
  assert_int_equal(l.by_mark[0].allocations, 2);
  assert_int_equal(l.by_mark[1].key, 0); /* before the first mark: the parameter */
  assert_int_equal(l.by_mark[1].bytes, 1024);
  vl_trace_live_release(&l);
  /* at the end, the batch doubled: id 4 made again in forward 2, by model.g */
  assert_int_equal(vl_trace_live_at(&t, -1, 2.0, t.n - 1, &l), VL_OK);
  assert_int_equal(l.bytes, 1024 + 2048 + 2 * 6291456);
  assert_string_equal(t.modules[l.by_module[0].key], "model.g");
  assert_int_equal(l.by_module[0].bytes, 2 * 6291456);
  vl_trace_live_release(&l);
  assert_int_equal(vl_trace_live_at(&t, -1, 0.0, 0, &l), VL_EINVAL);
  vl_trace_release(&t);
}

/* "b" allocations grow with the batch, "a" ones do not; fields after the
 * device in any order; the batch from "# batch N"; meta replayed when no
 * cuda. */
static void trace_batch_fields_meta(void **state) {
  (void)state;
  const char *text = "# batch 2\n# a comment\n"
                     "a 1 2097152 meta model.w dtype=float32 at=train.py:3\n"
                     "b 2 3145728 meta at=model.py:40 dtype=bfloat16 model.h.0\n"
                     "a 3 512 cpu\n";
  struct vl_trace t;
  struct vl_err err = {""};
  assert_int_equal(vl_trace_parse(text, strlen(text), &t, &err), VL_OK);
  assert_int_equal(t.batch, 2);
  assert_int_equal(t.n, 3);
  assert_true(!t.ev[0].batch && t.ev[1].batch);
  assert_string_equal(t.modules[t.ev[1].module], "model.h.0");
  assert_string_equal(t.modules[t.ev[1].at], "model.py:40");
  assert_string_equal(t.modules[t.ev[1].dtype], "bfloat16");
  struct vl_cache_conf conf = {0};
  struct vl_replay r;
  assert_int_equal(vl_trace_replay(&t, -1, &conf, &r), VL_OK); /* meta: no cuda */
  assert_int_equal(r.allocs, 2);
  assert_int_equal(r.peak_allocated, 5 * MB);
  assert_string_equal(t.modules[r.peak_at], "model.py:40");
  /* batch 8 of 2: the activation x4 (12 MiB), the weight as it was */
  assert_int_equal(vl_trace_replay_scaled(&t, -1, &conf, 4.0, &r), VL_OK);
  assert_int_equal(r.peak_allocated, 14 * MB);
  assert_int_equal(vl_trace_replay_scaled(&t, -1, &conf, 0.0, &r), VL_EINVAL);
  assert_int_equal(vl_trace_replay_scaled(&t, -1, &conf, -1.0, &r), VL_EINVAL);
  vl_trace_release(&t);
  assert_int_equal(vl_trace_parse("# batch x\na 1 5 cuda\n", 20, &t, &err), VL_OK);
  assert_int_equal(t.batch, 0); /* not a number: not known */
  vl_trace_release(&t);
}

/* The last line without its newline: a whole event is kept, a fragment
 * (what a job that died mid-write leaves) left out and counted, never an
 * error, and the error message left as it was. */
static size_t cut_of(const char *text, size_t *n_events) {
  struct vl_trace t;
  struct vl_err err = {"untouched"};
  assert_int_equal(vl_trace_parse(text, strlen(text), &t, &err), VL_OK);
  assert_string_equal(err.msg, "untouched");
  size_t cut = t.cut_last_line;
  *n_events = t.n;
  vl_trace_release(&t);
  return cut;
}

static void trace_cut_last_line(void **state) {
  (void)state;
  size_t n = 0;
  /* whole events at the end of the file are kept */
  assert_int_equal(cut_of("a 1 100 cuda\nf 1", &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(cut_of("a 1 100 cuda\na 2 512 cpu model.h.0", &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(cut_of("a 1 100 cuda\nm forward 2", &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(cut_of("a 1 100 cuda\ne", &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(cut_of("a 1 100 cuda\n# a comment", &n), 0);
  assert_int_equal(n, 1);
  /* fragments: left out, their bytes counted */
  assert_int_equal(cut_of("a 1 100 cuda\na 2 51", &n), 6);
  assert_int_equal(n, 1);
  assert_int_equal(cut_of("a 1 100 cuda\na 2 512 cu", &n), 10); /* the device's name cut */
  assert_int_equal(n, 1);
  assert_int_equal(cut_of("a 1 100 cuda\nf 1 x", &n), 5);
  assert_int_equal(cut_of("a 1 100 cuda\nm", &n), 1);
  assert_int_equal(cut_of("a 1 100 cuda\ns 4096 2097", &n), 11); /* a size may lose digits */
  assert_int_equal(cut_of("a 1 100 cuda\n# batch 1", &n), 9);    /* so may a batch */
  assert_int_equal(cut_of("{\"not\": \"a trace\"}", &n), 18);    /* the only line */
  assert_int_equal(n, 0);
  /* what a fragment says is not kept: no id, no device, no batch */
  struct vl_trace t;
  struct vl_err err = {""};
  const char *text = "a 1 100 cuda\n# batch 1";
  assert_int_equal(vl_trace_parse(text, strlen(text), &t, &err), VL_OK);
  assert_int_equal(t.batch, 0);
  vl_trace_release(&t);
  text = "a 1 100 cuda\na 99999 100 c";
  assert_int_equal(vl_trace_parse(text, strlen(text), &t, &err), VL_OK);
  assert_int_equal(t.max_id, 1);
  assert_int_equal(t.per_device[3], 0);
  vl_trace_release(&t);
  /* a bad line that ends with its newline is still an error */
  assert_int_equal(vl_trace_parse("a 1 100 cuda\na 2 51\n", 20, &t, &err), VL_EPARSE);
  assert_string_equal(err.msg, "line 2: bytes (at most 2^50) and a device expected");
  /* nothing at all parses: the caller says that is no trace */
  assert_int_equal(cut_of("", &n), 0);
  assert_int_equal(n, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(sizes),
                                     cmocka_unit_test(pools_and_splitting),
                                     cmocka_unit_test(reuse_merge_and_empty),
                                     cmocka_unit_test(fragmentation),
                                     cmocka_unit_test(retry_and_oom),
                                     cmocka_unit_test(max_split_size),
                                     cmocka_unit_test(expandable),
                                     cmocka_unit_test(gc_threshold),
                                     cmocka_unit_test(books_balance),
                                     cmocka_unit_test(driver_addresses_break_ties),
                                     cmocka_unit_test(digest_and_repeat),
                                     cmocka_unit_test(trace_parse_and_replay),
                                     cmocka_unit_test(trace_empty_cache),
                                     cmocka_unit_test(trace_batch_fields_meta),
                                     cmocka_unit_test(trace_cut_last_line),
                                     cmocka_unit_test(trace_from_mark),
                                     cmocka_unit_test(trace_live_at_peak),
                                     cmocka_unit_test(trace_snapshot_events)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
