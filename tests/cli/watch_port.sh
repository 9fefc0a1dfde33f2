# Sourced by the tests that start `vramledger watch` with a server:
# watch_port ERRFILE prints the port the server says on ERRFILE (its
# stderr), waiting up to 60 s for it (a busy machine); empty when it never
# said one.
watch_port() {
  for i in $(seq 600); do
    p=$(sed -n 's|.*http://[^ ]*:\([0-9]*\)/metrics.*|\1|p' "$1")
    [ -n "$p" ] && break
    sleep 0.1
  done
  echo "$p"
}
