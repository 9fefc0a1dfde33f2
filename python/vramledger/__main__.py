"""python -m vramledger ARGS...: the vramledger program itself (the one
vramledger.cli finds), with ARGS."""
import os
import sys

from .cli import VramledgerError, binary


def main():
    try:
        exe = binary()
    except VramledgerError as ex:
        sys.stderr.write("vramledger: error: %s\n" % ex)
        return 1
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
