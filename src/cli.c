#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "util/internal.h"
#include "vramledger/alloc.h"

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("vramledger: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void cli_hint(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("vramledger: hint: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63) return (size_t)-1;
  size_t prev[64], cur[64];
  for (size_t j = 0; j <= lb; j++)
    prev[j] = j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
      size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
    memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
  }
  return prev[lb];
}

const char *cli_nearest(const char *s, const char *const *candidates, size_t n) {
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  for (size_t i = 0; i < n; i++) {
    size_t d = edit_distance(s, candidates[i]);
    /* a prefix is as good as a near miss: "llama-3-8" -> "llama-3-8b" */
    if (strncmp(s, candidates[i], strlen(s)) == 0 && strlen(s) >= 3) d = d < 2 ? d : 2;
    if (d < best_d) {
      best_d = d;
      best = candidates[i];
    }
  }
  size_t len = strlen(s);
  size_t limit = len < 4 ? 1 : len / 3 + 1;
  return best_d <= limit ? best : NULL;
}

int cli_parse(int argc, const char **argv, const struct cli_opt *opts, cli_opt_fn fn, void *ctx) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0) a = "--help";
    if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
      cli_error("unexpected argument '%s'", a);
      cli_hint("options start with '--'; see --help");
      return VL_EXIT_USAGE;
    }
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
    const struct cli_opt *o = NULL;
    for (const struct cli_opt *p = opts; p->name; p++)
      if (strlen(p->name) == nlen && strncmp(p->name, name, nlen) == 0) o = p;
    if (!o) {
      char flag[64];
      snprintf(flag, sizeof flag, "%.*s", (int)(nlen < 60 ? nlen : 60), name);
      const char *names[128];
      size_t n = 0;
      for (const struct cli_opt *p = opts; p->name && n < 128; p++)
        names[n++] = p->name;
      const char *near = cli_nearest(flag, names, n);
      cli_error("unknown option '--%s'", flag);
      if (near) cli_hint("did you mean '--%s'?", near);
      return VL_EXIT_USAGE;
    }
    const char *arg = NULL;
    if (o->has_arg) {
      if (eq) {
        arg = eq + 1;
      } else if (i + 1 < argc) {
        arg = argv[++i];
      } else {
        cli_error("option '--%s' needs a value", o->name);
        return VL_EXIT_USAGE;
      }
    } else if (eq) {
      cli_error("option '--%s' takes no value", o->name);
      return VL_EXIT_USAGE;
    }
    int rc = fn(ctx, o->id, o->name, arg);
    if (rc) return rc;
  }
  return 0;
}

int cli_u64(const char *flag, const char *arg, uint64_t lo, uint64_t hi, uint64_t *out) {
  char *end;
  errno = 0;
  if (!isdigit((unsigned char)arg[0])) goto bad; /* no sign, space or "0x": digits only */
  unsigned long long v = strtoull(arg, &end, 10);
  if (errno || *end) goto bad;
  if (v < lo || v > hi) {
    cli_error("--%s %s is out of range: give %llu to %llu", flag, arg, (unsigned long long)lo,
              (unsigned long long)hi);
    return VL_EXIT_USAGE;
  }
  *out = v;
  return 0;
bad:
  cli_error("--%s expects a whole number, got '%s'", flag, arg);
  return VL_EXIT_USAGE;
}

/* Is s a plain decimal: [-]digits[.digits][e[+-]digits], at least one
 * digit before the exponent? strtod alone takes more: "0x10" (16), "inf",
 * "nan", " 5", "+5", which a flag's value never means. */
static bool plain_decimal(const char *s) {
  size_t i = s[0] == '-', d = 0;
  for (; isdigit((unsigned char)s[i]); i++)
    d++;
  if (s[i] == '.')
    for (i++; isdigit((unsigned char)s[i]); i++)
      d++;
  if (!d) return false;
  if (s[i] == 'e' || s[i] == 'E') {
    i += s[i + 1] == '-' || s[i + 1] == '+';
    if (!isdigit((unsigned char)s[++i])) return false;
    while (isdigit((unsigned char)s[i]))
      i++;
  }
  return s[i] == '\0';
}

int cli_double(const char *flag, const char *arg, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = plain_decimal(arg) ? strtod(arg, &end) : NAN;
  if (!plain_decimal(arg) || errno || *end || !isfinite(v)) {
    cli_error("--%s expects a plain decimal number (such as 12 or 0.5), got '%s'", flag, arg);
    return VL_EXIT_USAGE;
  }
  if (v < lo || v > hi) {
    cli_error("--%s %s is out of range: give %g to %g", flag, arg, lo, hi);
    return VL_EXIT_USAGE;
  }
  *out = v;
  return 0;
}

void cli_join(char *out, size_t cap, const char *const *names, size_t n) {
  size_t o = 0;
  if (cap) out[0] = '\0';
  for (size_t i = 0; i < n && o < cap; i++) {
    int w = snprintf(out + o, cap - o, "%s%s", i ? ", " : "", names[i]);
    if (w < 0 || (size_t)w >= cap - o) break;
    o += (size_t)w;
  }
}

int cli_choice(const char *flag, const char *arg, const char *const *names) {
  size_t n = 0;
  for (; names[n]; n++)
    if (strcmp(names[n], arg) == 0) return (int)n;
  char list[256];
  cli_join(list, sizeof list, names, n);
  cli_error("--%s: unknown value '%s'; choose one of: %s", flag, arg, list);
  const char *near = cli_nearest(arg, names, n);
  if (near) cli_hint("did you mean '%s'?", near);
  return -1;
}

/* ---- secrets on a command line (docs/record.md, "Secrets") -------------- */

/* Does s[0..n) hold word (lower case) in any case? */
static bool holds_ci(const char *s, size_t n, const char *word) {
  size_t w = strlen(word);
  for (size_t i = 0; i + w <= n; i++)
    if (strncasecmp(s + i, word, w) == 0) return true;
  return false;
}

/* Does flag[0..n) match one of the patterns of VRAMLEDGER_REDACT? Both are
 * read whole (a pattern past a fixed buffer, or a long flag cut, would let
 * a secret through); without the memory to, it counts as a match. */
static bool redact_pattern(const char *flag, size_t n) {
  const char *pats = getenv("VRAMLEDGER_REDACT");
  if (!pats || !*pats) return false;
  size_t cap = strlen(pats) + 1;
  char *name = vl_malloc(n + 1), *buf = vl_malloc(cap);
  struct vl__list l;
  bool hit = !name || !buf || !vl__list_init_in(&l, pats, ',', buf, cap);
  if (!hit) {
    memcpy(name, flag, n); /* patterns match the flag as written */
    name[n] = 0;
    l.empty = true; /* empty patterns are skipped, not the end of the list */
    for (char *p; !hit && (p = vl__list_next(&l, NULL));)
      hit = *p && fnmatch(p, name, 0) == 0;
  }
  vl_free(name);
  vl_free(buf);
  return hit;
}

/* Does s[0..n) name a secret: it holds password, passwd, token, key,
 * secret, auth, credential, signature or cookie, in any case ("HF_TOKEN",
 * "--api-key", "X-Amz-Signature")? Over-broad on purpose ("--author"):
 * a value left out of a record costs less than a secret kept in it. */
static bool secret_name(const char *s, size_t n) {
  static const char *const words[] = {"password", "passwd",     "token",     "key",   "secret",
                                      "auth",     "credential", "signature", "cookie"};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (holds_ci(s, n, words[i])) return true;
  return false;
}

/* Is flag (up to its '=' or its end) a secret's: its name is a secret's
 * (secret_name), or it matches one of the comma-separated fnmatch
 * patterns of $VRAMLEDGER_REDACT ("--hf-*,-p")? */
static bool secret_flag(const char *flag) {
  if (flag[0] != '-') return false;
  size_t n = strcspn(flag, "=");
  return secret_name(flag, n) || redact_pattern(flag, n);
}

/* Is s[0..n) an environment variable's name ([A-Za-z_][A-Za-z0-9_]*), as
 * `env HF_TOKEN=... python` and `HF_TOKEN=... sh -c` pass them? */
static bool env_name(const char *s, size_t n) {
  if (!n || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return false;
  return true;
}

/* A flag whose value is "USER:PASSWORD" (curl -u/--user, -U/--proxy-user;
 * wget --user takes the user alone, and keeps it). Only the part after the
 * first ':' is a secret: python's -u takes no value, and a word after it
 * without ':' (a script) is kept. */
static bool user_flag(const char *flag, size_t n) {
  static const char *const flags[] = {"-u", "--user", "-U", "--proxy-user"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    if (strlen(flags[i]) == n && strncmp(flag, flags[i], n) == 0) return true;
  return false;
}

/* A word being rewritten into buf (n bytes); full once it does not fit. */
struct redacted {
  char *buf;
  size_t n, o;
  bool full, changed;
};

static void put(struct redacted *w, const char *s, size_t k) {
  if (w->full || w->o + k >= w->n) {
    w->full = true;
    return;
  }
  memcpy(w->buf + w->o, s, k);
  w->o += k;
  w->buf[w->o] = '\0';
}

static void put_secret(struct redacted *w) {
  put(w, "<redacted>", 10);
  w->changed = true;
}

/* One URL's query, from its '?' to end: the values of secret-looking
 * parameters (?token=, &access_token=, api_key=, X-Amz-Signature=)
 * redacted. */
static void put_query(struct redacted *w, const char *q, const char *end) {
  while (q < end) {
    size_t k = strcspn(q, "&;#");
    if (q + k > end) k = (size_t)(end - q);
    const char *eq = memchr(q, '=', k);
    if (eq && secret_name(q, (size_t)(eq - q))) {
      put(w, q, (size_t)(eq - q) + 1);
      put_secret(w);
    } else {
      put(w, q, k);
    }
    q += k;
    if (q < end) put(w, q++, 1); /* the separator */
    if (q[-1] == '#') break;
  }
  if (q < end) put(w, q, (size_t)(end - q));
}

/* arg with each URL's password (or, without one, its whole userinfo: a
 * token passed as the user, https://TOKEN@host) and secret query values
 * redacted, into w. A URL ends at a space or a quote. */
static void put_urls(struct redacted *w, const char *arg) {
  const char *p = arg;
  for (const char *s; (s = strstr(p, "://"));) {
    const char *auth = s + 3, *end = auth + strcspn(auth, " \t\"'<>");
    const char *host_end = auth + strcspn(auth, "/?# \t\"'<>");
    put(w, p, (size_t)(auth - p));
    const char *at = NULL;
    for (const char *c = auth; c < host_end; c++)
      if (*c == '@') at = c;
    if (at) {
      const char *colon = memchr(auth, ':', (size_t)(at - auth));
      if (colon) put(w, auth, (size_t)(colon - auth) + 1);
      put_secret(w);
      put(w, at, (size_t)(host_end - at));
    } else {
      put(w, auth, (size_t)(host_end - auth));
    }
    const char *q = host_end + strcspn(host_end, "?# \t\"'<>");
    if (q > end) q = end;
    put(w, host_end, (size_t)(q - host_end));
    if (q < end && *q == '?')
      put_query(w, q, end);
    else
      put(w, q, (size_t)(end - q));
    p = end;
  }
  put(w, p, strlen(p));
}

/* buf = arg[0..keep) + tail, or "<redacted>" whole where that does not
 * fit: a secret is never cut into the record. */
static const char *keep_then(char *buf, size_t n, const char *arg, size_t keep, const char *tail) {
  if (keep + strlen(tail) >= n) return "<redacted>";
  snprintf(buf, n, "%.*s%s", (int)keep, arg, tail);
  return buf;
}

const char *cli_redact_arg(const char *prev, const char *arg, char *buf, size_t n) {
  const char *eq = strchr(arg, '='), *colon;
  size_t name = eq ? (size_t)(eq - arg) : 0;
  if (eq && (secret_flag(arg) || (env_name(arg, name) && secret_name(arg, name))))
    return keep_then(buf, n, arg, name + 1, "<redacted>"); /* --password=, HF_TOKEN= */
  if (eq && user_flag(arg, name) && (colon = strchr(eq, ':')))
    return keep_then(buf, n, arg, (size_t)(colon - arg) + 1, "<redacted>"); /* --user=U:P */
  if (prev && !strchr(prev, '=') && secret_flag(prev) && arg[0] != '-') return "<redacted>";
  if (prev && user_flag(prev, strlen(prev)) && (colon = strchr(arg, ':')))
    return keep_then(buf, n, arg, (size_t)(colon - arg) + 1, "<redacted>"); /* -u U:P */
  if (prev && (!strcmp(prev, "-H") || !strcmp(prev, "--header")) && (colon = strchr(arg, ':')) &&
      secret_name(arg, (size_t)(colon - arg)))
    return keep_then(buf, n, arg, (size_t)(colon - arg) + 1, " <redacted>"); /* a header */
  if (eq && name == 8 && !strncmp(arg, "--header", 8) && (colon = strchr(eq, ':')) &&
      secret_name(eq + 1, (size_t)(colon - eq - 1)))
    return keep_then(buf, n, arg, (size_t)(colon - arg) + 1, " <redacted>"); /* --header=H: */
  struct redacted w = {buf, n, 0, false, false};
  if (n) buf[0] = '\0';
  put_urls(&w, arg);
  if (w.full && w.changed) return "<redacted>";
  return w.changed && !w.full ? buf : arg;
}
