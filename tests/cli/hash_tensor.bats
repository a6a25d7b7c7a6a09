#!/usr/bin/env bats
# `pccl hash-tensor`: raw / npy (v1, v2, v3) / safetensors fixtures written at test
# time by python3 (standard library only), hash cross-checks between the three
# formats of the same bytes, --json shape, bad files (exit 1, one-line reason),
# bad flags (exit 2), --device cuda without a GPU.
# PCCL_BIN points at the binary (default build/bin/pccl under the repo root).

bats_require_minimum_version 1.5.0 # run --separate-stderr

setup() {
    REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
    PCCL="${PCCL_BIN:-$REPO/build/bin/pccl}"
    if [ ! -x "$PCCL" ]; then
        echo "pccl binary not found at $PCCL (set PCCL_BIN)" >&2
        return 1
    fi
    D="$BATS_TEST_TMPDIR"
    # w: 12 float32 values; ids: 5 int64; b: 4 bfloat16. Written as raw, npy v1/v2/v3 and one safetensors file.
    python3 - "$D" <<'PY'
import json, struct, sys
d = sys.argv[1]
w = struct.pack('<12f', *[i * 0.25 - 1 for i in range(12)])
ids = struct.pack('<5q', 1, -2, 3, -4, 5)
b = struct.pack('<4H', 0x3f80, 0x4000, 0xbf80, 0x0000)

def npy(descr, shape, body, ver=1, fortran=False):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, repr(tuple(shape)))
    pre = 10 if ver == 1 else 12
    h += ' ' * ((64 - (pre + len(h) + 1) % 64) % 64) + '\n'
    hb = h.encode('latin1')
    return b'\x93NUMPY' + bytes([ver, 0]) + (struct.pack('<H', len(hb)) if ver == 1 else struct.pack('<I', len(hb))) + hb + body

def st(entries, meta=True):
    hdr, data = {}, b''
    if meta: hdr['__metadata__'] = {'format': 'pt'}
    for name, dt, shape, body in entries:
        hdr[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [len(data), len(data) + len(body)]}
        data += body
    hj = json.dumps(hdr).encode()
    hj += b' ' * ((8 - len(hj) % 8) % 8)
    return struct.pack('<Q', len(hj)) + hj + data

def put(name, data): open(f'{d}/{name}', 'wb').write(data)
put('w.raw', w)
put('all.raw', b'\0' * 16 + w + ids)
put('w1.npy', npy('<f4', (3, 4), w, 1))
put('w2.npy', npy('<f4', (12,), w, 2))
put('w3.npy', npy('<f4', (2, 6), w, 3))
put('ids.npy', npy('<i8', (5,), ids))
put('model.safetensors', st([('w', 'F32', [3, 4], w), ('ids', 'I64', [5], ids), ('b', 'BF16', [2, 2], b)]))
# bad files
put('fortran.npy', npy('<f4', (3, 4), w, 1, True))
put('bigendian.npy', npy('>f4', (12,), w))
put('trunc.npy', npy('<f4', (3, 4), w)[:-1])
put('badmagic.npy', b'\x93NUMPX' + npy('<f4', (12,), w)[6:])
good = st([('w', 'F32', [3, 4], w)])
put('trunc.safetensors', good[:-4])
put('hdrlen.safetensors', struct.pack('<Q', 1 << 40) + good[8:])
put('badjson.safetensors', struct.pack('<Q', 6) + b'{"w": ' + w)
put('mismatch.safetensors', st([('w', 'F64', [3, 4], w)]))
put('offsets.safetensors', struct.pack('<Q', 64) + json.dumps({'w': {'dtype': 'F32', 'shape': [12], 'data_offsets': [8, 56]}}).encode().ljust(64) + w)
PY
}

hash_of() { # FILE ARGS... -> the hash column of the first line
    "$PCCL" hash-tensor "$@" | head -n 1 | awk '{print $4}'
}

@test "raw, npy v1/v2/v3 and safetensors of the same bytes hash the same" {
    h=$(hash_of "$D/w.raw" --dtype float32)
    [[ "$h" =~ ^[0-9a-f]{16}$ ]]
    [ "$(hash_of "$D/w1.npy")" = "$h" ]
    [ "$(hash_of "$D/w2.npy" --format npy)" = "$h" ]
    [ "$(hash_of "$D/w3.npy")" = "$h" ]
    run "$PCCL" hash-tensor "$D/model.safetensors"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 3 ]
    [ "${lines[0]}" = "w float32 [3,4] $h" ]
    [[ "${lines[1]}" == "ids int64 [5] "* ]]
    [[ "${lines[2]}" == "b bfloat16 [2,2] "* ]]
    # a range of a raw file: --offset/--count select exactly the tensor's bytes
    [ "$(hash_of "$D/all.raw" --dtype f32 --offset 16 --count 12)" = "$h" ]
    ids=$(hash_of "$D/ids.npy")
    [ "$(hash_of "$D/all.raw" --dtype int64 --offset 64 --count 5)" = "$ids" ]
    [ "${lines[1]}" = "ids int64 [5] $ids" ]
}

@test "the hash depends on the selected range" {
    a=$(hash_of "$D/w.raw" --dtype f32)
    b=$(hash_of "$D/w.raw" --dtype f32 --count 11)
    c=$(hash_of "$D/w.raw" --dtype u8 --offset 4)
    [ "$a" != "$b" ] && [ "$a" != "$c" ] && [ "$b" != "$c" ]
}

@test "--json prints one object with every tensor" {
    run --separate-stderr "$PCCL" hash-tensor "$D/model.safetensors" --json
    [ "$status" -eq 0 ]
    printf '%s' "$output" | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert d['format'] == 'safetensors' and d['device'] == 'cpu'
t = d['tensors']
assert [x['name'] for x in t] == ['w', 'ids', 'b'], t
assert t[0]['shape'] == [3, 4] and t[0]['bytes'] == 48 and t[0]['dtype'] == 'float32'
assert t[2]['dtype'] == 'bfloat16' and t[2]['bytes'] == 8
assert all(len(x['hash']) == 16 for x in t)"
}

@test "bad files: exit 1 with a one-line reason" {
    for f in fortran.npy:fortran bigendian.npy:big-endian trunc.npy:truncated badmagic.npy:magic \
             trunc.safetensors:"out of range" hdrlen.safetensors:"past the end" badjson.safetensors:JSON \
             mismatch.safetensors:"needs 96 bytes" offsets.safetensors:"out of range"; do
        file=${f%%:*} why=${f#*:}
        fmt=npy; [[ $file == *.safetensors ]] && fmt=safetensors
        run --separate-stderr "$PCCL" hash-tensor "$D/$file" --format $fmt
        [ "$status" -eq 1 ] || { echo "$file: status $status"; false; }
        [ -z "$output" ]
        [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
        [[ "$stderr" == *"$why"* ]] || { echo "$file: $stderr"; false; }
    done
    run --separate-stderr "$PCCL" hash-tensor "$D/w1.npy" --dtype int32
    [ "$status" -eq 1 ] && [[ "$stderr" == *"is float32"* ]]
    run --separate-stderr "$PCCL" hash-tensor "$D/w.raw" --dtype f64 --offset 8 --count 6
    [ "$status" -eq 1 ] && [[ "$stderr" == *"past the end"* ]]
    run --separate-stderr "$PCCL" hash-tensor "$D/w.raw" --dtype f32 --offset 49
    [ "$status" -eq 1 ]
    run --separate-stderr "$PCCL" hash-tensor "$D/missing.raw" --dtype f32
    [ "$status" -eq 1 ] && [[ "$stderr" == *"cannot open"* ]]
}

@test "bad flags: exit 2" {
    run "$PCCL" hash-tensor "$D/w.raw"
    [ "$status" -eq 2 ] && [[ "$output" == *"--dtype"* ]]
    run "$PCCL" hash-tensor "$D/w.raw" --dtype f33
    [ "$status" -eq 2 ]
    run "$PCCL" hash-tensor "$D/w.raw" --dtype f32 --format tar
    [ "$status" -eq 2 ]
    run "$PCCL" hash-tensor "$D/w.raw" --dtype f32 --offset -1
    [ "$status" -eq 2 ]
    run "$PCCL" hash-tensor "$D/w.raw" --dtype f32 --device tpu
    [ "$status" -eq 2 ]
    run "$PCCL" hash-tensor "$D/w1.npy" --count 3
    [ "$status" -eq 2 ]
    run "$PCCL" hash-tensor
    [ "$status" -eq 2 ]
    run "$PCCL" hash-tensor "$D/w.raw" "$D/w1.npy" --dtype f32
    [ "$status" -eq 2 ]
    run "$PCCL" hash-tensor --bogus
    [ "$status" -eq 2 ]
}

@test "--device cuda hashes on the GPU or says why it cannot" {
    run --separate-stderr "$PCCL" hash-tensor "$D/w1.npy" --device cuda
    if [ "$status" -eq 0 ]; then
        [ "$(printf '%s' "$output" | awk '{print $4}')" = "$(hash_of "$D/w1.npy")" ]
    else
        [ "$status" -eq 1 ]
        [[ "$stderr" == *"CUDA"* ]]
    fi
}
