# Sourced by the tests that start `vramledger watch` with a server:
# watch_port ERRFILE prints the port the server says on ERRFILE (its
# stderr), waiting up to 2 s for it; empty when it never said one.
watch_port() {
  for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    p=$(sed -n 's|.*http://[^ ]*:\([0-9]*\)/metrics.*|\1|p' "$1")
    [ -n "$p" ] && break
    sleep 0.1
  done
  echo "$p"
}
