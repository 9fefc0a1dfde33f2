/* Internal interfaces between the renderers. */
#ifndef VRAMLEDGER_RENDER_INTERNAL_H
#define VRAMLEDGER_RENDER_INTERNAL_H
#include <jansson.h>
#include <stdio.h>

#include "vramledger/model.h"

/* A job's settings as a JSON object (new reference). */
json_t *vl__settings_json(const struct vl_job *j);

/* s with <, >, & and " escaped for HTML. */
void vl__html_text(FILE *o, const char *s);

#endif
