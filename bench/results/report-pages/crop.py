"""Cut a screenshot 24 pixels under its last non-white row and write it
again as an indexed PNG of 256 colours (Python's zlib, no imaging
library): the pages' flat colours keep, a page is a third the size.
usage: crop.py IN.png OUT.png"""
import collections
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path + ": not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), "8-bit RGB or RGBA only"
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line[i] for i in range(stride) if i % bpp < 3))
        prev = line
    return w, rows


def write_png(path, w, rows):
    """an indexed PNG: the 256 colours that cover the most pixels, every
    other colour (antialiased text's edges) as its nearest of those"""
    count = collections.Counter(r[i:i + 3] for r in rows for i in range(0, len(r), 3))
    palette = [c for c, _ in count.most_common(256)]
    index = {c: k for k, c in enumerate(palette)}

    def nearest(c):
        return min(range(len(palette)),
                   key=lambda k: sum((a - b) * (a - b) for a, b in zip(c, palette[k])))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    raw = bytearray()
    for r in rows:
        raw.append(0)
        for i in range(0, len(r), 3):
            c = r[i:i + 3]
            k = index.get(c)
            if k is None:
                k = index[c] = nearest(c)
            raw.append(k)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, len(rows), 8, 3, 0, 0, 0)))
        f.write(chunk(b"PLTE", b"".join(palette)))
        f.write(chunk(b"IDAT", zlib.compress(bytes(raw), 9)))
        f.write(chunk(b"IEND", b""))


w, rows = read_png(sys.argv[1])
white = b"\xff" * (w * 3)
last = max((y for y, r in enumerate(rows) if r != white), default=0)
write_png(sys.argv[2], w, rows[:min(len(rows), last + 25)])
