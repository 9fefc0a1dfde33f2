#!/bin/sh
# Install what the build and the tests need, from Debian, if it is missing.
set -eu
need=""
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in gcc make ninja-build cmake pkg-config libjansson-dev libcmocka-dev libgsl-dev libmicrohttpd-dev libyaml-dev clang-format python3-torch pyflakes3 python3-venv python3-pip python3-setuptools man-db chromium libjs-dygraphs; do
  have "$p" || need="$need $p"
done
[ -z "$need" ] && exit 0
echo "installing:$need"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
