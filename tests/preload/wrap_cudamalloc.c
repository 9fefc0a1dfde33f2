/* A job's own LD_PRELOAD wrapper of the CUDA runtime's cudaMalloc, as
 * tracers build them: the next cudaMalloc found with dlsym(RTLD_NEXT),
 * at its first call or, built with WRAP_EAGER, in its constructor (before
 * the interposer's; none in a process without the runtime, vramledger's
 * own under `run`); the object that defines it said on stderr at the
 * first call ("next OBJECT") and a "W" for each call, by the system call. For
 * dlsym_cuda.sh: behind the interposer, the next is the runtime, never
 * the interposer's own cudaMalloc (which would see each call twice), and
 * every call of the program passes here once. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int (*malloc_fn)(void **, size_t);
static malloc_fn next;

static void say(const char *s) { syscall(SYS_write, 2, s, strlen(s)); }

static void find_next(void) { next = (malloc_fn)dlsym(RTLD_NEXT, "cudaMalloc"); }

static void say_next(void) {
  Dl_info at;
  const char *obj = dladdr((void *)next, &at) && at.dli_fname ? at.dli_fname : "?";
  const char *base = strrchr(obj, '/');
  char line[256];
  snprintf(line, sizeof line, "next %s\n", base ? base + 1 : obj);
  say(line);
}

#ifdef WRAP_EAGER
__attribute__((constructor)) static void init(void) { find_next(); }
#endif

int cudaMalloc(void **p, size_t n) {
  static int depth, said;
  if (!next) find_next();
  if (!next) abort();
  if (!said++) say_next();
  if (depth > 8) abort(); /* handed itself back: a loop */
  say("W\n");
  depth++;
  int r = next(p, n);
  depth--;
  return r;
}
