"""zeros_npz.py PATH USIZE: an .npz whose one DEFLATE member x.npy (uint8
zeros) inflates to exactly USIZE bytes; prints USIZE and the compressed size.

Gigabyte members are made in a second: after a full flush zlib's output for
the same input repeats, so one deflated MiB of zeros is written many times.
numpy.load and zipfile read the result (CRC included)."""
import struct
import sys
import zlib


def npy_head(nbytes):
    hdr = b"{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }" % nbytes
    hdr += b" " * (63 - (len(hdr) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr


def main():
    path, usize = sys.argv[1], int(sys.argv[2])
    nbytes = usize - 128
    head = npy_head(nbytes)
    assert len(head) == 128
    chunk = 1 << 20
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)]
    crc = zlib.crc32(head)
    full, rest = divmod(nbytes, chunk)
    z = bytes(chunk)
    if full:
        a = c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)
        b = c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)
        assert full < 2 or a == b
        parts.append(a + b * (full - 1))
        for _ in range(full):
            crc = zlib.crc32(z, crc)
    parts.append(c.compress(bytes(rest)) + c.flush())
    crc = zlib.crc32(bytes(rest), crc)
    data = b"".join(parts)
    assert usize < 0xFFFFFFFF
    n = b"x.npy"
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(data), usize,
                        len(n), 0) + n
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(data),
                          usize, len(n), 0, 0, 0, 0, 0, 0) + n
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central),
                      len(local) + len(data), 0)
    with open(path, "wb") as f:
        f.write(local + data + central + end)
    print(usize, len(data))


main()
