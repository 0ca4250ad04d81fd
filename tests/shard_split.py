#!/usr/bin/env python3
"""Sharded checkpoints for tests/t_shards.sh, written independently of cis2.

  shard_split.py split SRC DST N (round|chunk) [SEED]
      SRC/model.safetensors as N shards in DST, as Hugging Face lays them out:
      model-0000k-of-0000N.safetensors and model.safetensors.index.json
      ({"metadata": {"total_size": ...}, "weight_map": {tensor: shard}}), the
      tensors dealt round robin or in runs, each shard's header keys in an
      order shuffled by SEED; SRC's config.json and tokenizer.json copied.
  shard_split.py expect SRC OUT
      the file `cis2 join-shards` must write for any sharding of SRC, read from
      model/shards.h's definition: the tensors sorted by name (bytewise), each
      one's bytes unchanged, header {"__metadata__":{"format":"pt"}, NAME:
      {"dtype","shape","data_offsets"}, ...} without spaces, padded with spaces
      to a multiple of 8 bytes.
"""
import json, random, shutil, struct, sys


def read(path):
    with open(path, 'rb') as f:
        b = f.read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop('__metadata__', None)
    base = 8 + n
    return {k: (v['dtype'], v['shape'], b[base + v['data_offsets'][0]:base + v['data_offsets'][1]])
            for k, v in h.items()}


def write(path, tensors, names, meta):
    hdr, off = {}, 0
    if meta is not None:
        hdr['__metadata__'] = meta
    for k in names:
        dt, shape, data = tensors[k]
        hdr[k] = {'dtype': dt, 'shape': shape, 'data_offsets': [off, off + len(data)]}
        off += len(data)
    h = json.dumps(hdr, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h)
        for k in names:
            f.write(tensors[k][2])


def main():
    cmd, src = sys.argv[1], sys.argv[2]
    t = read(src + '/model.safetensors')
    if cmd == 'expect':
        write(sys.argv[3], t, sorted(t, key=lambda s: s.encode()), {'format': 'pt'})
        return
    dst, n, mode = sys.argv[3], int(sys.argv[4]), sys.argv[5]
    rng = random.Random(int(sys.argv[6]) if len(sys.argv) > 6 else 1)
    names = list(t)
    rng.shuffle(names)
    groups = [names[i::n] for i in range(n)] if mode == 'round' else \
        [names[len(names) * i // n:len(names) * (i + 1) // n] for i in range(n)]
    wm = {}
    for i, g in enumerate(groups):
        f = 'model-%05d-of-%05d.safetensors' % (i + 1, n)
        write(dst + '/' + f, t, g, {'format': 'pt'})
        wm.update({k: f for k in g})
    total = sum(len(v[2]) for v in t.values())
    with open(dst + '/model.safetensors.index.json', 'w') as f:
        json.dump({'metadata': {'total_size': total}, 'weight_map': dict(sorted(wm.items()))}, f, indent=2)
    for f in ('config.json', 'tokenizer.json'):
        shutil.copy(src + '/' + f, dst + '/' + f)


if __name__ == '__main__':
    main()
