/* A separated list (a,b,c) split in place in a copy of the caller's text:
 * the one loop of the list options of fit and sensitivity. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

bool vl__list_init(struct vl__list *l, const char *text, char sep) {
  l->sep = sep;
  l->next = NULL;
  if (strlen(text) >= sizeof l->buf) return false;
  snprintf(l->buf, sizeof l->buf, "%s", text);
  l->next = l->buf;
  return true;
}

char *vl__list_next(struct vl__list *l, bool *gap) {
  char *item = l->next;
  if (!item || !*item) return NULL;
  char *end = strchr(item, l->sep);
  if (end) *end++ = '\0';
  l->next = end;
  if (gap) *gap = end && *end == l->sep;
  return item;
}
