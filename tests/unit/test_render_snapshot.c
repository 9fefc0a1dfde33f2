/* lib/render/snapshot.c: the allocator's state after tests/data/traces/
 * batch.trace (one 20 MiB segment holding a 4 MiB, a 4 MiB and an 8 MiB
 * block, worked out in test_render_trace.c) written as the pickle
 * torch.cuda.memory._dump_snapshot() makes, read back by an unpickler of
 * the opcodes it may use (Python's Lib/pickle.py: PROTO, EMPTY_DICT,
 * EMPTY_LIST, MARK, SETITEMS, APPENDS, BINUNICODE, BININT, LONG1, NEWTRUE,
 * NEWFALSE, STOP; anything else fails the test) into JSON, and checked:
 * the segments and blocks are the snapshot's, their sizes add up, each
 * event of device_traces has the keys memory_viz reads. */
#include "render_capture.h"
#include "vramledger/caching.h"
#include "vramledger/render.h"

#define M (1ull << 20)

/* the stack machine of pickle, for those opcodes; NULL on anything else */
static json_t *unpickle(const unsigned char *p, size_t n) {
  json_t *stack[256];
  size_t sp = 0, marks[64], mp = 0;
  size_t i = 0;
  if (n < 2 || p[0] != 0x80 || p[1] != 2) return NULL; /* PROTO 2 */
  for (i = 2; i < n;) {
    unsigned char c = p[i++];
    if (sp >= 250 || mp >= 62) return NULL;
    switch (c) {
    case '}': stack[sp++] = json_object(); break;
    case ']': stack[sp++] = json_array(); break;
    case '(': marks[mp++] = sp; break;
    case 0x88: stack[sp++] = json_true(); break;
    case 0x89: stack[sp++] = json_false(); break;
    case 'X': {
      if (i + 4 > n) return NULL;
      size_t len = p[i] | (size_t)p[i + 1] << 8 | (size_t)p[i + 2] << 16 | (size_t)p[i + 3] << 24;
      i += 4;
      if (i + len > n) return NULL;
      stack[sp++] = json_stringn((const char *)p + i, len);
      if (!stack[sp - 1]) return NULL; /* not UTF-8 */
      i += len;
      break;
    }
    case 'J': {
      if (i + 4 > n) return NULL;
      int32_t v = (int32_t)((uint32_t)p[i] | (uint32_t)p[i + 1] << 8 | (uint32_t)p[i + 2] << 16 |
                            (uint32_t)p[i + 3] << 24);
      i += 4;
      stack[sp++] = json_integer(v);
      break;
    }
    case 0x8a: { /* LONG1: little-endian two's complement */
      size_t k = p[i++];
      if (k > 8 || i + k > n || (k && (p[i + k - 1] & 0x80))) return NULL; /* positive only */
      uint64_t v = 0;
      for (size_t b = 0; b < k; b++)
        v |= (uint64_t)p[i + b] << (8 * b);
      i += k;
      stack[sp++] = json_integer((json_int_t)v);
      break;
    }
    case 'u': { /* SETITEMS: pairs above the mark into the dict below it */
      if (!mp) return NULL;
      size_t m = marks[--mp];
      if (m == 0 || (sp - m) % 2 || !json_is_object(stack[m - 1])) return NULL;
      for (size_t k = m; k < sp; k += 2) {
        if (!json_is_string(stack[k])) return NULL;
        json_object_set_new(stack[m - 1], json_string_value(stack[k]), stack[k + 1]);
        json_decref(stack[k]);
      }
      sp = m;
      break;
    }
    case 'e': { /* APPENDS */
      if (!mp) return NULL;
      size_t m = marks[--mp];
      if (m == 0 || !json_is_array(stack[m - 1])) return NULL;
      for (size_t k = m; k < sp; k++)
        json_array_append_new(stack[m - 1], stack[k]);
      sp = m;
      break;
    }
    case '.': return sp == 1 && !mp && i == n ? stack[0] : NULL;
    default: fail_msg("opcode 0x%02x at byte %zu: not one the snapshot may use", c, i - 1);
    }
  }
  return NULL;
}

static void the_pickle_is_the_snapshot(void **state) {
  (void)state;
  size_t len = 0;
  char *text = tu_read("tests/data/traces/batch.trace", &len);
  struct vl_trace tr;
  struct vl_err err = {""};
  assert_int_equal(vl_trace_parse(text, len, &tr, &err), VL_OK);
  free(text);
  struct vl_cache_conf conf = {0, 0, 0, false};
  struct vl_snapshot s;
  assert_int_equal(vl_trace_snapshot(&tr, -1, &conf, 1.0, tr.n - 1, &s), VL_OK);
  char *out = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&out, &n);
  assert_int_equal(vl_render_snapshot(f, &s), 0);
  fclose(f);
  json_t *root = unpickle((const unsigned char *)out, n);
  assert_non_null(root);
  json_t *segs = json_object_get(root, "segments");
  assert_int_equal(json_array_size(segs), s.n_segs);
  assert_int_equal(s.n_segs, 1);
  json_t *seg = json_array_get(segs, 0);
  assert_int_equal(rc_num(seg, "total_size"), 20 * M);
  assert_string_equal(rc_str(seg, "segment_type"), "large");
  assert_true(json_is_false(json_object_get(seg, "is_expandable")));
  /* live at the end: model.w's two 4 MiB blocks and the optimizer's 8 MiB */
  assert_int_equal(rc_num(seg, "allocated_size"), 16 * M);
  json_t *blocks = json_object_get(seg, "blocks");
  uint64_t sum = 0, live = 0;
  for (size_t i = 0; i < json_array_size(blocks); i++) {
    json_t *b = json_array_get(blocks, i);
    sum += (uint64_t)rc_num(b, "size");
    if (!strcmp(rc_str(b, "state"), "active_allocated")) live += (uint64_t)rc_num(b, "size");
  }
  assert_int_equal(sum, 20 * M); /* the blocks tile the segment */
  assert_int_equal(live, 16 * M);
  /* one device, its events in order, each with what memory_viz reads */
  json_t *traces = json_object_get(root, "device_traces");
  assert_int_equal(json_array_size(traces), 1);
  json_t *ev = json_array_get(traces, 0);
  assert_int_equal(json_array_size(ev), s.n_ev);
  double last = -1;
  for (size_t i = 0; i < json_array_size(ev); i++) {
    json_t *e = json_array_get(ev, i);
    rc_str(e, "action");
    rc_num(e, "size");
    assert_true(json_is_array(json_object_get(e, "frames")));
    assert_true(rc_num(e, "time_us") >= last);
    last = rc_num(e, "time_us");
  }
  assert_string_equal(rc_str(json_array_get(ev, 0), "action"), "segment_alloc");
  json_decref(root);
  free(out);
  vl_snapshot_release(&s);
  vl_trace_release(&tr);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_pickle_is_the_snapshot),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
