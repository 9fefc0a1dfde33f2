/* One write() to stdout, through the PLT (stdio's writes are libc's own
 * and would pass no wrapper): what dlsym_next.sh's wrappers wrap. */
#include <unistd.h>

int main(void) {
  static const char line[] = "written\n";
  return write(1, line, sizeof line - 1) == (ssize_t)(sizeof line - 1) ? 0 : 1;
}
