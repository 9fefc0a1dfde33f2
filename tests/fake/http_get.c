/* http_get PORT PATH: GET http://127.0.0.1:PORT/PATH and print the whole
 * response (status line, headers, body). A test helper with no curl. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) return 1;
  char req[512];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", argv[2]);
  if (write(fd, req, (size_t)n) != n) return 1;
  char buf[4096];
  ssize_t r;
  while ((r = read(fd, buf, sizeof buf)) > 0)
    fwrite(buf, 1, (size_t)r, stdout);
  close(fd);
  return 0;
}
