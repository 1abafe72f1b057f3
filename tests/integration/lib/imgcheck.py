#!/usr/bin/env python3
"""imgcheck.py FILE WIDTH HEIGHT: FILE is a valid PNG or SVG of that size.
PNG: the signature, an IHDR chunk first with a correct CRC and the size,
IEND last, every chunk's CRC right and the image data inflating to the
size its header implies. SVG: well-formed XML whose root <svg> has width
and height attributes equal to the size (optionally with "px")."""
import struct
import sys
import xml.etree.ElementTree as ET
import zlib


def check_png(data, w, h):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return "no PNG signature"
    pos, chunks, idat = 8, [], b""
    while pos < len(data):
        if pos + 8 > len(data):
            return "truncated chunk header at byte %d" % pos
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if len(body) != n or pos + 12 + n > len(data):
            return "truncated %r chunk" % kind
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            return "bad CRC in %r chunk" % kind
        chunks.append((kind, body))
        if kind == b"IDAT":
            idat += body
        pos += 12 + n
    if not chunks or chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        return "IHDR not first or IEND not last"
    pw, ph, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if (pw, ph) != (w, h):
        return "PNG is %dx%d, expected %dx%d" % (pw, ph, w, h)
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    raw = zlib.decompress(idat)
    if interlace == 0 and len(raw) != ph * (1 + (pw * channels * depth + 7) // 8):
        return "image data is %d bytes, the header implies %d" % (len(raw), ph * (1 + (pw * channels * depth + 7) // 8))
    return None


def check_svg(data, w, h):
    root = ET.fromstring(data)
    if root.tag not in ("svg", "{http://www.w3.org/2000/svg}svg"):
        return "root element is %s, not svg" % root.tag
    got = tuple(root.get(a, "").removesuffix("px") for a in ("width", "height"))
    if got != (str(w), str(h)):
        return "SVG is %sx%s, expected %dx%d" % (got[0], got[1], w, h)
    if len(root) < 3:
        return "SVG has almost nothing in it"
    return None


def main():
    path, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    data = open(path, "rb").read()
    why = check_png(data, w, h) if data[:4] == b"\x89PNG" else check_svg(data, w, h)
    if why:
        print("%s: %s" % (path, why), file=sys.stderr)
        return 1
    print("%s: %s %dx%d, %d bytes" % (path, "PNG" if data[:4] == b"\x89PNG" else "SVG", w, h, len(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
