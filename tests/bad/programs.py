#!/usr/bin/env python3
"""Writes the malformed programs tests/bad/program-*.amp (run by hand; needs
python3 and the zstd command, neither of which make check uses).

    tests/bad/programs.py A.amp B.amp tests/bad

A.amp is tiny-mlp's program as amp-emit writes it; B.amp another program of
the same model (mlp_down pinned to grid [3, 1, 5]). Each file below breaks
one thing and keeps the rest valid; tests/bats/amp-emit.bats and amp-run.bats
name the verdict each must get."""
import struct, subprocess, sys

a, b, out = sys.argv[1], sys.argv[2], sys.argv[3]


def sections(path):
    d = open(path, 'rb').read()
    n = struct.unpack_from('<I', d, 12)[0]
    s = []
    for i in range(n):
        sid, enc, off, size = struct.unpack_from('<IIQQ', d, 16 + 24 * i)
        s.append([sid, enc, d[off:off + size]])
    return d, s


def build(secs, magic=b'AMPPROG\0', version=3):
    hdr = magic + struct.pack('<II', version, len(secs))
    off = 16 + 24 * len(secs)
    table, body = b'', b''
    for sid, enc, x in secs:
        table += struct.pack('<IIQQ', sid, enc, off + len(body), len(x))
        body += x
    return hdr + table + body


def plain(sid, secs):
    for s, enc, x in secs:
        if s == sid:
            return subprocess.run(['zstd', '-dc'], input=x, capture_output=True,
                                  check=True).stdout if enc == 1 else x


def replace(secs, sid, enc, x):
    return [[s, enc if s == sid else e, x if s == sid else y] for s, e, y in secs]


def write(name, data):
    open(out + '/' + name, 'wb').write(data)


da, sa = sections(a)
db, sb = sections(b)
write('program-bad-magic.amp', build(sa, magic=b'AMPPROX\0'))
write('program-version.amp', build(sa, version=4))
write('program-short.amp', da[:12])
write('program-truncated.amp', da[:len(da) // 2])
write('program-missing-section.amp', build([s for s in sa if s[0] != 3]))
rows = bytearray(sa[1][2])
for i in range(len(rows) // 2, len(rows) // 2 + 16):
    rows[i] ^= 0x5a
write('program-corrupt-zstd.amp', build(replace(sa, 2, 1, bytes(rows))))
# a ROWS frame whose header claims 8 GiB of content
frame = b'\x28\xb5\x2f\xfd\xe0' + struct.pack('<Q', 1 << 33) + bytes([(16 << 3) | 3, 0, 0, 0])
write('program-zstd-size.amp', build(replace(sa, 2, 1, frame)))
r, t = plain(2, sa), plain(3, sa)
write('program-row-count.amp', build(replace(sa, 2, 0, struct.pack('<I', 0x7fffffff) + r[4:])))
write('program-table-count.amp', build(replace(sa, 3, 0, struct.pack('<I', 0x7fffffff) + t[4:])))
t2 = bytearray(t)
struct.pack_into('<I', t2, 16, (1 << 28) - 1)   # entry 0's SEND address count
write('program-patch-count.amp', build(replace(sa, 3, 0, bytes(t2))))
r2 = bytearray(r)
pos = 4
for i in range(struct.unpack_from('<I', r2, 0)[0]):
    last = pos + 4
    pos += 4 + struct.unpack_from('<I', r2, pos)[0]
r2[last + 8] = 0x7f                             # the last row's first instruction
write('program-row-opcode.amp', build(replace(sa, 2, 0, bytes(r2))))
# the STAGE text edited (one digit of the machine's sync_cycles), its hash not
st = sa[0][2].replace(b'sync_cycles: 600', b'sync_cycles: 601', 1)
write('program-stage-hash.amp', build(replace(sa, 1, 0, st)))
# A's STAGE and HASH with B's ROWS and TABLE: the hash holds, the rows do not
write('program-stage-mismatch.amp', build([sa[0], sb[1], sb[2], sa[3]]))


def fnv1a(x):
    h = 0xcbf29ce484222325
    for c in x:
        h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
    return struct.pack('<Q', h)


# the STAGE text edited (the last send's destination address + 32) with its
# hash recomputed: only the decode comparison sees it
lines = sa[0][2].split(b'\n')
k = max(i for i, l in enumerate(lines) if b' kind: send, ' in l)
pre, rest = lines[k].split(b'dst: [', 1)
tile, rest = rest.split(b', ', 1)
addr, rest = rest.split(b']', 1)
lines[k] = pre + b'dst: [' + tile + b', ' + str(int(addr) + 32).encode() + b']' + rest
st2 = b'\n'.join(lines)
write('program-stage-address.amp', build([[1, 0, st2], sa[1], sa[2], [4, 0, fnv1a(st2)]]))


# MODEL sections (amp-emit --model): the hash of the text, then the text
import os
model = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'share', 'models',
                          'tiny-mlp.yaml'), 'rb').read()
eps = model.replace(b'eps: 1e-6', b'eps: 0.5', 1)
assert eps != model
# a model whose layernorm eps differs from the stage's, its hash right
write('program-model-eps.amp', build(sa + [[5, 0, fnv1a(eps) + eps]]))
# the model text edited after its hash was taken
write('program-model-hash.amp', build(sa + [[5, 0, fnv1a(model) + eps]]))


# the STAGE's machine header raising max_transfer_bytes (16592 -> 65536),
# its hash recomputed: the rows and the stage agree, the machine file does not
st3 = sa[0][2].replace(b'max_transfer_bytes: 16592', b'max_transfer_bytes: 65536', 1)
assert st3 != sa[0][2]
write('program-raised-header.amp', build([[1, 0, st3], sa[1], sa[2], [4, 0, fnv1a(st3)]]))

# a ROWS frame that truly decodes to 3 GiB (of zeros) in under 100 KB: more
# than the STAGE's machine holds in SRAM, refused before it is decoded
big = subprocess.run('head -c 3221225472 /dev/zero | zstd -q -19 --stream-size=3221225472 -c', shell=True,
                     capture_output=True, check=True).stdout
write('program-rows-3g.amp', build(replace(sa, 2, 1, big)))

# a model whose layernorm reads its scale and bias swapped (gamma and beta),
# embedded with its own hash right: the stage's provenance records the
# model it was planned from, whose hash this is not
wired = model.replace(b'scale: ln_s, bias: ln_b', b'scale: ln_b, bias: ln_s', 1)
assert wired != model
write('program-model-wiring.amp', build(sa + [[5, 0, fnv1a(wired) + wired]]))
