#!/usr/bin/python3
"""Helpers of writers.sh: build safetensors inputs, compare tensor files,
and read npz / pth outputs back with NumPy and PyTorch (Debian's
python3-numpy and python3-torch). Expected values never come from amn: every
input is made here, every output is read by the reference libraries or by
this file's own safetensors parser."""
import json
import struct
import sys
import zipfile

import numpy as np

# safetensors dtype -> (itemsize, numpy dtype that holds the same bytes)
DTYPES = {
    'BOOL': (1, '|b1'), 'U8': (1, '|u1'), 'I8': (1, '|i1'), 'U16': (2, '<u2'),
    'I16': (2, '<i2'), 'U32': (4, '<u4'), 'I32': (4, '<i4'), 'U64': (8, '<u8'),
    'I64': (8, '<i8'), 'F16': (2, '<f2'), 'BF16': (2, '|V2'), 'F32': (4, '<f4'),
    'F64': (8, '<f8'), 'F8_E4M3': (1, '|u1'), 'F8_E5M2': (1, '|u1'),
    'C64': (8, '<c8'),
}
SHAPES = [(), (5,), (3, 4), (2, 3, 4), (2, 0, 3), (1, 1, 1, 7)]


def read_safetensors(path):
    """name -> (dtype, shape, bytes), and the metadata."""
    with open(path, 'rb') as f:
        blob = f.read()
    (n,) = struct.unpack('<Q', blob[:8])
    hdr = json.loads(blob[8:8 + n])
    meta = hdr.pop('__metadata__', None)
    base = 8 + n
    out = {}
    for k, v in hdr.items():
        a, b = v['data_offsets']
        out[k] = (v['dtype'], tuple(v['shape']), blob[base + a:base + b])
    return out, meta


def write_safetensors(path, tensors):
    hdr, off, blobs = {}, 0, []
    for k, (dt, shape, data) in tensors.items():
        hdr[k] = {'dtype': dt, 'shape': list(shape), 'data_offsets': [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    h = json.dumps(hdr, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


def make(path, dtypes, max_dims=8):
    """Tensors of every listed dtype in several shapes (0-d and empty ones
    included), random bytes (NaN payloads, subnormals, negative zero: every
    bit pattern must survive)."""
    rng = np.random.default_rng(len(path) * 7919 + len(dtypes))
    tensors = {}
    for dt in dtypes:
        size = DTYPES[dt][0]
        for i, shape in enumerate(s for s in SHAPES if len(s) <= max_dims):
            n = int(np.prod(shape, dtype=np.int64)) * size
            data = rng.integers(0, 256, n, dtype=np.uint8)
            if dt == 'BOOL':
                data &= 1
            tensors['t.%s.%d' % (dt.lower(), i)] = (dt, shape, data.tobytes())
    write_safetensors(path, tensors)


def same(a, b):
    ta, _ = read_safetensors(a)
    tb, _ = read_safetensors(b)
    if ta.keys() != tb.keys():
        sys.exit('names differ: %s' % sorted(set(ta) ^ set(tb)))
    for k in ta:
        if ta[k] != tb[k]:
            sys.exit('tensor %s differs: %s %s against %s %s' %
                     (k, ta[k][0], ta[k][1], tb[k][0], tb[k][1]))


def check_npz(path, ref):
    """numpy.load gives every tensor of ref, bit for bit; every member's NPY
    header is the one np.save writes; every array starts 64-byte aligned."""
    tensors, _ = read_safetensors(ref)
    with np.load(path) as z:
        if sorted(z.files) != sorted(tensors):
            sys.exit('npz members %s, expected %s' % (sorted(z.files), sorted(tensors)))
        for k, (dt, shape, data) in tensors.items():
            a = z[k]
            want = np.dtype(DTYPES[dt][1])
            if a.dtype != want or a.shape != shape or a.tobytes() != data:
                sys.exit('npz %s: %s %s, expected %s %s' % (k, a.dtype, a.shape, want, shape))
    zf = zipfile.ZipFile(path)
    bad = zf.testzip()  # every member's CRC-32
    if bad:
        sys.exit('npz CRC mismatch in %s' % bad)
    with open(path, 'rb') as f:
        blob = f.read()
    for info in zf.infolist():
        k = info.filename[:-4]
        dt, shape, data = tensors[k]
        fake = np.lib.stride_tricks.as_strided(np.zeros(1, DTYPES[dt][1]), shape,
                                               [0] * len(shape))
        import io
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, np.lib.format.header_data_from_array_1_0(fake))
        hdr = buf.getvalue()
        raw = zf.read(info)
        if raw[:len(hdr)] != hdr:
            sys.exit('npz %s: NPY header %r, np.save writes %r' % (k, raw[:len(hdr)], hdr))
        # Data offset in the file: local header, name, extra, NPY header.
        lh = blob[info.header_offset:info.header_offset + 30]
        n, e = struct.unpack('<HH', lh[26:30])
        start = info.header_offset + 30 + n + e + len(hdr)
        if start % 64:
            sys.exit('npz %s: array data at %d, not 64-byte aligned' % (k, start))


def check_pth(path, ref):
    """torch.load(weights_only=True) gives every tensor of ref bit for bit."""
    import torch
    torch_dtypes = {'BOOL': torch.bool, 'U8': torch.uint8, 'I8': torch.int8,
                    'I16': torch.int16, 'I32': torch.int32, 'I64': torch.int64,
                    'F16': torch.float16, 'BF16': torch.bfloat16, 'F32': torch.float32,
                    'F64': torch.float64, 'C64': torch.complex64}
    tensors, _ = read_safetensors(ref)
    sd = torch.load(path, weights_only=True)
    if list(sd.keys()) != list(tensors.keys()) and sorted(sd) != sorted(tensors):
        sys.exit('pth keys %s, expected %s' % (sorted(sd), sorted(tensors)))
    for k, (dt, shape, data) in tensors.items():
        t = sd[k]
        if t.dtype != torch_dtypes[dt] or tuple(t.shape) != shape or not t.is_contiguous():
            sys.exit('pth %s: %s %s, expected %s %s' % (k, t.dtype, tuple(t.shape), dt, shape))
        got = t.view(torch.int16).numpy().tobytes() if dt == 'BF16' else t.numpy().tobytes()
        if got != data:
            sys.exit('pth %s: bytes differ' % k)
    zf = zipfile.ZipFile(path)
    if zf.testzip():
        sys.exit('pth CRC mismatch')
    names = zf.namelist()
    want = ['archive/data.pkl', 'archive/byteorder'] + \
        ['archive/data/%d' % i for i in range(len(tensors))] + ['archive/version']
    if names != want:
        sys.exit('pth members %s, expected %s' % (names, want))
    import pickletools
    allowed = {'collections OrderedDict', 'torch._utils _rebuild_tensor_v2'} | \
        {'torch %sStorage' % k for k in ('Bool', 'Byte', 'Char', 'Short', 'Int', 'Long', 'Half',
                                         'BFloat16', 'Float', 'Double', 'ComplexFloat')}
    for op, arg, _ in pickletools.genops(zf.read('archive/data.pkl')):
        if 'GLOBAL' in op.name and arg not in allowed:
            sys.exit('pth pickle names global %s' % arg)
    if zf.read('archive/byteorder') != b'little' or zf.read('archive/version') != b'3\n':
        sys.exit('pth byteorder/version records')
    with open(path, 'rb') as f:
        blob = f.read()
    for info in zf.infolist():
        lh = blob[info.header_offset:info.header_offset + 30]
        n, e = struct.unpack('<HH', lh[26:30])
        if (info.header_offset + 30 + n + e) % 64:
            sys.exit('pth %s: data not 64-byte aligned' % info.filename)


def make_big(path, big_bytes):
    """A sparse safetensors file: 'a.small' (16 bytes), 'b.big' (big_bytes
    of zeros, a hole on disk) and 'c.after' (8 bytes), so the member after
    the big one starts past 4 GiB."""
    small = bytes(range(16))
    after = b'amn-tail'
    hdr = {'a.small': {'dtype': 'U8', 'shape': [16], 'data_offsets': [0, 16]},
           'b.big': {'dtype': 'U8', 'shape': [big_bytes], 'data_offsets': [16, 16 + big_bytes]},
           'c.after': {'dtype': 'U8', 'shape': [8],
                       'data_offsets': [16 + big_bytes, 24 + big_bytes]}}
    h = json.dumps(hdr, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + small)
        f.seek(8 + len(h) + 16 + big_bytes)
        f.write(after)


def check_big(path, big_bytes, kind, full_crc):
    """ZIP64 records where they must be, and the readers' view of them."""
    zf = zipfile.ZipFile(path)
    infos = {i.filename: i for i in zf.infolist()}
    with open(path, 'rb') as f:
        f.seek(-22, 2)
        eocd = f.read(22)
        f.seek(-98, 2)
        z64 = f.read(4)
    if z64 != b'PK\x06\x06':
        sys.exit('%s: no ZIP64 end of central directory record' % path)
    if kind == 'npz':
        big, after = infos['b.big.npy'], infos['c.after.npy']
        with zf.open(big) as m:  # numpy's header parser on the member itself
            ver = np.lib.format.read_magic(m)
            shape, fortran, dtype = np.lib.format._read_array_header(m, ver)
        if (shape, fortran, dtype) != ((big_bytes,), False, np.dtype('u1')):
            sys.exit('npz big header: %s %s %s' % (shape, fortran, dtype))
        with np.load(path) as z:  # numpy.load opens it; small members load
            if z['a.small'].tobytes() != bytes(range(16)) or z['c.after'].tobytes() != b'amn-tail':
                sys.exit('npz small members differ')
    else:
        big, after = infos['archive/data/1'], infos['archive/data/2']
        import pickletools
        import io
        out = io.StringIO()
        pickletools.dis(zf.read('archive/data.pkl'), out)  # a well-formed pickle
        if ('%d' % big_bytes) not in out.getvalue():
            sys.exit('pth pickle lacks the big shape')
    if big.file_size < big_bytes or big.file_size < 1 << 32:
        sys.exit('big member size %d' % big.file_size)
    if after.header_offset < 1 << 32:
        sys.exit('member after the big one at %d' % after.header_offset)
    if full_crc:  # zipfile checks the CRC-32 when it reaches the end
        with zf.open(big) as m:
            while m.read(64 << 20):
                pass
    print('%s: %d members, big %d bytes, next at %d, EOCD %s' %
          (path, len(infos), big.file_size, after.header_offset, eocd[:4]))


def make_name(path, literal):
    """A one-tensor safetensors file whose name is the bytes of a Python
    bytes literal, put into the JSON header as they are (so JSON escapes
    such as \\u0000 and raw non-UTF-8 bytes both reach the reader)."""
    import ast
    name = ast.literal_eval(literal)
    h = b'{"' + name + b'":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b'\0\0\x80\x3f')


def make_cast(path, ref):
    """F32 tensors of 1-2 MiB (the converter writes such casts in place,
    every thread its own pieces, each piece's CRC-32 folded into its
    member's) and a small one; ref: the same as BF16, cast by PyTorch
    (finite values: torch makes every NaN 0x7fc0)."""
    import torch
    rng = np.random.default_rng(17)
    tensors, cast = {}, {}
    for name, shape in (('t.a', (513, 1031)), ('t.b', (64, 4096)), ('t.c', (3, 5))):
        x = (rng.standard_normal(shape) * np.float32(3)).astype('<f4')
        x.flat[:4] = [0.0, -0.0, 1e-40, -3.4e38]  # zeros, a subnormal, near the top
        tensors[name] = ('F32', shape, x.tobytes())
        b = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy()
        cast[name] = ('BF16', shape, b.astype('<i2').tobytes())
    write_safetensors(path, tensors)
    write_safetensors(ref, cast)


def make_complex(pth, npz):
    """Complex tensors as PyTorch and NumPy save them: torch.save of
    complex64 / complex128 tensors (a non-contiguous view too) and
    np.savez of '<c8', '<c16' and big-endian '>c16' arrays, each beside a
    real one; a random seed, NaN and signed zeros in the parts."""
    import torch
    g = torch.Generator().manual_seed(34)
    z = torch.randn(8, 5, dtype=torch.complex64, generator=g)
    z[0, 0] = complex(float('nan'), -0.0)
    w = torch.randn(3, 4, dtype=torch.complex128, generator=g)
    torch.save({'z': z, 'w': w, 'wt': w.t(), 'r': torch.randn(4, generator=g)}, pth)
    rng = np.random.default_rng(34)
    a = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))).astype('<c8')
    b = (rng.standard_normal(5) - 1j * rng.standard_normal(5)).astype('<c16')
    np.savez(npz, a=a, b=b, be=b.astype('>c16'), f=np.ones(3, np.float32))


def torch_bytes(t):
    return t.contiguous().numpy().astype(t.numpy().dtype.newbyteorder('<')).tobytes()


def same_complex(a, b):
    """Two tensor files (.pth or .npz) hold the same tensors: names, dtypes
    (a big-endian NumPy array counts as its little-endian dtype), shapes and
    little-endian bytes."""
    def load(path):
        if path.endswith('.npz'):
            with np.load(path) as f:
                return {k: (f[k].dtype.newbyteorder('<'), f[k].shape,
                            f[k].astype(f[k].dtype.newbyteorder('<')).tobytes()) for k in f.files}
        import torch
        sd = torch.load(path, weights_only=True)
        return {k: (t.numpy().dtype, tuple(t.shape), torch_bytes(t)) for k, t in sd.items()}
    x, y = load(a), load(b)
    if sorted(x) != sorted(y):
        sys.exit('names differ: %s, %s' % (sorted(x), sorted(y)))
    for k in x:
        if x[k] != y[k]:
            sys.exit('tensor %s differs: %s %s against %s %s' %
                     (k, x[k][0], x[k][1], y[k][0], y[k][1]))


def check_safetensors_c64(path, ref):
    """A safetensors output's C64 tensors hold ref's complex64 bytes."""
    import torch
    sd = torch.load(ref, weights_only=True)
    tensors, _ = read_safetensors(path)
    for k, t in sd.items():
        if t.dtype != torch.complex64:
            continue
        if tensors[k] != ('C64', tuple(t.shape), torch_bytes(t)):
            sys.exit('safetensors %s: %s %s' % (k, tensors[k][0], tensors[k][1]))


def batch(lines):
    """Run many commands in one process (torch and numpy import once): each
    line is a command and its arguments; prints FAIL lines, exits 1 if any."""
    failed = 0
    for line in lines:
        words = line.split('\t')
        try:
            dispatch(words[0], words[1:])
        except SystemExit as e:
            if e.code:
                print('FAIL: %s: %s' % (' '.join(words), e.code))
                failed += 1
    sys.exit(1 if failed else 0)


def dispatch(cmd, args):
    if cmd == 'make':
        make(args[0], args[2:], int(args[1]))
    elif cmd == 'same':
        same(args[0], args[1])
    elif cmd == 'npz':
        check_npz(args[0], args[1])
    elif cmd == 'pth':
        check_pth(args[0], args[1])
    elif cmd == 'make-big':
        make_big(args[0], int(args[1]))
    elif cmd == 'check-big':
        check_big(args[0], int(args[1]), args[2], args[3] == '1')
    elif cmd == 'make-cast':
        make_cast(args[0], args[1])
    elif cmd == 'make-name':
        make_name(args[0], args[1])
    elif cmd == 'make-complex':
        make_complex(args[0], args[1])
    elif cmd == 'same-complex':
        same_complex(args[0], args[1])
    elif cmd == 'st-c64':
        check_safetensors_c64(args[0], args[1])
    elif cmd == 'batch':
        with open(args[0]) as f:
            batch([ln.rstrip('\n') for ln in f if ln.strip()])
    else:
        sys.exit('unknown command ' + cmd)


if __name__ == '__main__':
    dispatch(sys.argv[1], sys.argv[2:])

