/* A separated list (a,b,c) split in place in a copy of the caller's text:
 * the one loop of the list options and of the lists read from files; and
 * a list of PIDs said in words. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

bool vl__list_init_in(struct vl__list *l, const char *text, char sep, char *dst, size_t cap) {
  l->sep = sep;
  l->next = NULL;
  l->empty = false;
  size_t n = strlen(text);
  if (cap == 0 || n >= cap) return false;
  memmove(dst, text, n + 1); /* dst may be text itself */
  l->next = dst;
  return true;
}

bool vl__list_init(struct vl__list *l, const char *text, char sep) {
  return vl__list_init_in(l, text, sep, l->buf, sizeof l->buf);
}

char *vl__list_next(struct vl__list *l, bool *gap) {
  char *item = l->next;
  if (!item || (!*item && !l->empty)) return NULL;
  char *end = strchr(item, l->sep);
  if (end) *end++ = '\0';
  l->next = end;
  if (gap) *gap = end && *end == l->sep;
  return item;
}

void vl__pid_list(char *buf, size_t cap, const unsigned *pids, unsigned n, bool more) {
  buf[0] = '\0';
  if (!n) return;
  size_t k = (size_t)snprintf(buf, cap, "PID%s ", n > 1 || more ? "s" : "");
  for (unsigned i = 0; i < n && i < VL__PIDS_SHOWN && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%u", i ? ", " : "", pids[i]);
  if (k < cap && more) snprintf(buf + k, cap - k, ", ...");
}
