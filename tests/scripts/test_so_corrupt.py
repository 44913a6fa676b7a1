#!/usr/bin/env python3
"""test_so_corrupt.py BUILD SRC [--copies N] [--seed S] [--keep DIR] [-v] -- corrupted copies of
a compiled model .so through `cnnrun X.so info` and `cnnrun X.so infer` (issue 26): no copy may
crash or abort (a signal exit, a sanitizer report or a hang fails it); each is refused with a
message naming the file (exit 1), or runs to the intact model's logits bit for bit (damage in
bytes nothing reads).

The model is models/fmnist_cnn.yml (7 MB, sealed by cnnc: runtime/cnnc_seal.h).  The copies:
byte flips at random and at structural offsets (ELF header, program headers, dynamic section,
symbol and hash tables, relocations, the checksum note, the descriptor, code, weights),
truncations at random and at every segment and section boundary, zeroed ranges at random and
over whole structures, appended bytes, random garbage runs.  Then the same structural damage in
copies whose checksum is recomputed ("resealed"): what a sealed file's checksum would hide, so
the structural checks (runtime/rt_elf*.c) alone must keep the loader from faulting.

The default suite runs 40 copies + 20 resealed (~15 s); test_so_corrupt_full (label long,
CNNC_SO_CORRUPT_FULL=1, runs only with CNNC_RUN_LONG=1: `CNNC_RUN_LONG=1 ctest -L long`) runs
200 + 100 (~2 min on 2 cores).  --copies N: N + N/2.  --keep DIR keeps every copy and a CSV of
the outcomes.
"""
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib  # noqa: E402


def args():
    a = sys.argv[1:]
    opt = {"copies": None, "seed": 26, "keep": None, "v": False}
    pos = []
    while a:
        x = a.pop(0)
        if x == "--copies":
            opt["copies"] = int(a.pop(0))
        elif x == "--seed":
            opt["seed"] = int(a.pop(0))
        elif x == "--keep":
            opt["keep"] = a.pop(0)
        elif x == "-v":
            opt["v"] = True
        else:
            pos.append(x)
    if len(pos) < 2:
        sys.exit(__doc__)
    return pos[0], pos[1], opt


# ---- ELF layout (what the structural damage aims at) ------------------------------------------
class Elf:
    def __init__(self, b):
        self.b = b
        self.phoff, = struct.unpack_from("<Q", b, 32)
        self.shoff, = struct.unpack_from("<Q", b, 40)
        self.phnum, = struct.unpack_from("<H", b, 56)
        self.shnum, self.shstrndx = struct.unpack_from("<HH", b, 60)
        self.ph = [struct.unpack_from("<IIQQQQQQ", b, self.phoff + 56 * i) for i in range(self.phnum)]
        sh = [struct.unpack_from("<IIQQQQIIQQ", b, self.shoff + 64 * i) for i in range(self.shnum)]
        stro = sh[self.shstrndx][4]
        self.sections = {}
        for s in sh:
            name = b[stro + s[0]: b.index(b"\0", stro + s[0])].decode()
            if s[1] != 8 and s[5]:  # not NOBITS
                self.sections[name] = (s[4], s[5])  # file offset, size
        self.loads = [p for p in self.ph if p[0] == 1]

    def file_off(self, vaddr):
        for p in self.loads:
            if p[3] <= vaddr < p[3] + p[5]:
                return p[2] + vaddr - p[3]
        return None

    def dynsym(self, name):
        off, size = self.sections[".dynsym"]
        stro = self.sections[".dynstr"][0]
        for i in range(size // 24):
            st_name, _, _, _, value, sz = struct.unpack_from("<IBBHQQ", self.b, off + 24 * i)
            if self.b[stro + st_name: self.b.index(b"\0", stro + st_name)].decode() == name:
                return self.file_off(value), sz
        return None

    def structures(self):
        """[(name, offset, size)] of what the loader and the runtime read."""
        out = [("ehdr", 0, 64), ("phdrs", self.phoff, 56 * self.phnum), ("shdrs", self.shoff, 64 * self.shnum)]
        for name in (".dynsym", ".gnu.hash", ".dynstr", ".rela.dyn", ".dynamic", ".note.cnnc", ".data.rel.ro",
                     ".text", ".rodata", ".symtab", ".comment"):
            if name in self.sections:
                out.append((name,) + self.sections[name])
        d = self.dynsym("cnnc_model_v1")
        if d:
            out.append(("descriptor", d[0], d[1]))
        return out


def seal_desc(b):
    """Offset of the seal note's descriptor (cnnc_seal.h: note "cnnc", type "SEAL"), or None."""
    i = b.find(b"\x05\x00\x00\x00\x18\x00\x00\x00SEALcnnc\x00")
    return i + 20 if i >= 0 else None


def xxh64(b):
    P1, P2, P3, P4, P5, M = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                             0x27D4EB2F165667C5, (1 << 64) - 1)
    rotl = lambda x, r: ((x << r) | (x >> (64 - r))) & M  # noqa: E731

    def rnd(acc, x):
        return rotl((acc + x * P2) & M, 31) * P1 & M

    n, i = len(b), 0
    if n >= 32:
        v = [(P1 + P2) & M, P2, 0, (-P1) & M]
        words = struct.unpack_from("<%dQ" % (n // 32 * 4), b)
        for k in range(0, len(words), 4):
            v = [rnd(v[j], words[k + j]) for j in range(4)]
        i = n // 32 * 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for x in v:
            h = ((h ^ rnd(0, x)) * P1 + P4) & M
    else:
        h = P5
    h = (h + n) & M
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, struct.unpack_from("<Q", b, i)[0]), 27) * P1 + P4) & M
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (struct.unpack_from("<I", b, i)[0] * P1 & M), 23) * P2 + P3) & M
        i += 4
    while i < n:
        h = rotl(h ^ (b[i] * P5 & M), 11) * P1 & M
        i += 1
    h ^= h >> 33
    h = h * P2 & M
    h ^= h >> 29
    h = h * P3 & M
    return h ^ (h >> 32)


def reseal(b):
    """b with its checksum note recomputed (the file as if cnnc had written it so)."""
    d = seal_desc(b)
    if d is None or d + 24 > len(b):
        return b
    b = bytearray(b)
    b[d + 8: d + 16] = struct.pack("<Q", len(b))
    b[d + 16: d + 24] = bytes(8)
    b[d + 16: d + 24] = struct.pack("<Q", xxh64(bytes(b)))
    return bytes(b)


# ---- the damage ------------------------------------------------------------------------------------
def damages(elf, n_copies, rnd, structural_only=False):
    b, n = elf.b, len(elf.b)
    st = elf.structures()
    small = [s for s in st if s[0] not in (".rodata", ".text", ".symtab", ".comment")]
    out = []

    def flip(off, what):
        off = min(max(off, 0), n - 1)
        bit = 1 << rnd.randrange(8)
        c = bytearray(b)
        c[off] ^= bit
        out.append(("flip %s @%d ^%d" % (what, off, bit), bytes(c)))

    def zero(off, ln, what):
        c = bytearray(b)
        c[off: off + ln] = bytes(len(c[off: off + ln]))
        out.append(("zero %s @%d +%d" % (what, off, ln), bytes(c)))

    def garbage(off, ln, what):
        c = bytearray(b)
        c[off: off + ln] = bytes(rnd.randrange(256) for _ in range(len(c[off: off + ln])))
        out.append(("garbage %s @%d +%d" % (what, off, ln), bytes(c)))

    kinds = ["flip_struct"] * 6 + ["zero_struct"] * 2 + ["garbage_struct"]
    if not structural_only:
        kinds += ["flip_any"] * 5 + ["trunc"] * 3 + ["zero_any"] * 2 + ["flip_data"] * 2 + ["append", "garbage_any"]
    cuts = sorted({o for s in st for o in (s[1], s[1] + s[2] // 2, s[1] + s[2] - 1, s[1] + s[2])} |
                  {p[2] + p[4] for p in elf.ph} | {1, 16, 63, 64, n - 1, n - 8, n - 64})
    cuts = [c for c in cuts if 0 < c < n]
    while len(out) < n_copies:
        k = kinds[len(out) % len(kinds)] if len(out) < len(kinds) * 2 else rnd.choice(kinds)
        name, off, size = rnd.choice(small)
        if k == "flip_struct":
            flip(off + rnd.randrange(max(size, 1)), name)
        elif k == "zero_struct":
            if rnd.random() < 0.5:
                zero(off, size, name + " (whole)")
            else:
                a = off + rnd.randrange(max(size, 1))
                zero(a, rnd.randint(1, 64), name)
        elif k == "garbage_struct":
            a = off + rnd.randrange(max(size, 1))
            garbage(a, rnd.randint(2, 32), name)
        elif k == "flip_any":
            flip(rnd.randrange(n), "anywhere")
        elif k == "flip_data":
            name, off, size = rnd.choice([s for s in st if s[0] in (".rodata", ".text", "descriptor")])
            flip(off + rnd.randrange(size), name)
        elif k == "trunc":
            c = rnd.choice(cuts) if rnd.random() < 0.6 else rnd.randrange(1, n)
            out.append(("truncate to %d" % c, b[:c]))
        elif k == "zero_any":
            a = rnd.randrange(n)
            zero(a, rnd.choice([1, 8, 64, 4096, 65536]), "anywhere")
        elif k == "append":
            out.append(("append %d" % (len(out) % 7 + 1), b + bytes(rnd.randrange(256) for _ in range(len(out) % 7 + 1))))
        elif k == "garbage_any":
            garbage(rnd.randrange(n), rnd.randint(2, 256), "anywhere")
    return out[:n_copies]


# ---- named cases: a refusal that says what is wrong --------------------------------------------------
def named_cases(elf, fake):
    """[(what, bytes, regex of the message)]: each check of runtime/rt_elf*.c that a case reaches."""
    b, n = elf.b, len(elf.b)
    ro, _ = elf.sections[".rodata"]
    dyn, dsz = elf.sections[".dynamic"]
    rela, rsz = elf.sections[".rela.dyn"]
    gh, _ = elf.sections[".gnu.hash"]

    def put(data, off, raw):
        c = bytearray(data)
        c[off: off + len(raw)] = raw
        return bytes(c)

    def dyn_entry(tag):
        for k in range(dsz // 16):
            t, = struct.unpack_from("<q", b, dyn + 16 * k)
            if t == tag:
                return dyn + 16 * k
        raise KeyError(tag)

    relacount = dyn_entry(0x6ffffff9)
    n_rela, = struct.unpack_from("<Q", b, relacount + 8)
    text_va = [p for p in elf.loads if p[1] & 1][0][3]

    def writable_at(data, off):
        """data with the load segment that maps file offset off made writable; off's vaddr."""
        for i, p in enumerate(elf.ph):
            if p[0] == 1 and p[2] <= off < p[2] + p[5]:
                return put(data, elf.phoff + 56 * i + 4, struct.pack("<I", p[1] | 2)), p[3] + off - p[2]
        raise KeyError(off)

    rela_w, rela_va = writable_at(b, rela)
    gh_w, gh_va = writable_at(b, gh)
    cases = [
        ("a weight byte flipped", put(b, ro + 100, bytes([b[ro + 100] ^ 1])), r"checksum mismatch \(XXH64"),
        ("100 bytes cut off", b[:-100], r"truncated: the file has %d bytes, cnnc wrote %d" % (n - 100, n)),
        ("a byte appended", b + b"\0", r"corrupt model file: the file has %d bytes, cnnc wrote %d" % (n + 1, n)),
        ("resealed: DT_RELAENT gone", reseal(put(b, dyn_entry(9), struct.pack("<q", 0x6ffffe00))),
         r"relocation entries of 0 bytes"),
        ("resealed: PT_PHDR elsewhere", reseal(put(b, elf.phoff + 16, struct.pack("<Q", 1 << 40))),
         r"program header segment .* does not map the program headers"),
        ("resealed: bloom size 3", reseal(put(b, gh + 8, struct.pack("<I", 3))), r"GNU hash table header"),
        ("resealed: a relocation of type R_X86_64_64", reseal(put(b, rela + 24 * 5 + 8, struct.pack("<Q", 1))),
         r"relocation 5 has type 1, which cnnc models do not use"),
        ("resealed: a relocation into the code", reseal(put(b, rela + 24 * 5, struct.pack("<Q", text_va))),
         r"relocation 5 writes 0x%x, outside the writable segments" % text_va),
        ("resealed: a relocation that rewrites a later one", reseal(put(rela_w, rela + 24 * 5, struct.pack("<Q", rela_va + 24 * 6))),
         r"relocation 5 writes 0x%x, inside the relocation table" % (rela_va + 24 * 6)),
        ("resealed: a relocation into the GNU hash table", reseal(put(gh_w, rela + 24 * 5, struct.pack("<Q", gh_va + 16))),
         r"relocation 5 writes 0x%x, inside the GNU hash table" % (gh_va + 16)),
        ("resealed: DT_RELACOUNT one too many", reseal(put(b, relacount + 8, struct.pack("<Q", n_rela + 1))),
         r"%d relative relocations announced, %d present" % (n_rela + 1, n_rela)),
        ("the note's name damaged", put(b, seal_desc(b) - 8, b"CNNC"), r"exports cnnc_seal_v1 but its checksum note is missing"),
    ]
    return cases


# ---- running a copy --------------------------------------------------------------------------------
def run(cmd, timeout=60):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
        return r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        return "timeout", ""


def outcome(cnnrun, so, inp, ref, tmp):
    """("refused"|"ran"|"FAIL ...", detail) of one copy."""
    out = os.path.join(tmp, "out.bin")
    results = []
    for cmd in ([cnnrun, so, "info"], [cnnrun, so, "infer", "--input", inp, "--output", out, "--threads", "1"]):
        if os.path.exists(out):
            os.unlink(out)
        rc, text = run(cmd)
        name = os.path.basename(so)
        if rc == "timeout":
            return "FAIL hang", cmd[2]
        if rc < 0 or rc > 128:
            return "FAIL signal %d" % (-rc if rc < 0 else rc - 128), cmd[2] + ": " + text[-300:]
        if "Sanitizer" in text or "runtime error:" in text:
            return "FAIL sanitizer", text[:400]
        if rc == 0:
            if cmd[2] == "infer":
                with open(out, "rb") as f:
                    if f.read() != ref:
                        return "FAIL wrong logits", "infer exited 0 with other outputs"
            results.append("ran")
        elif rc == 1 and name in text:
            results.append("refused")
        else:
            return "FAIL exit %d" % rc, cmd[2] + ": " + text[-300:]
    if results == ["ran", "ran"]:
        return "ran", ""
    if results == ["refused", "refused"]:
        return "refused", ""
    return "FAIL inconsistent", "info %s, infer %s" % tuple(results)


def main():
    build, src, opt = args()
    cnnc, cnnrun = os.path.join(build, "cnnc"), os.path.join(build, "cnnrun")
    testlib.need_built(cnnc, cnnrun)
    full = os.environ.get("CNNC_SO_CORRUPT_FULL", "0") == "1"
    if full and os.environ.get("CNNC_RUN_LONG", "0") != "1":
        print("skip: 200 corrupted copies run only with CNNC_RUN_LONG=1")
        return testlib.SKIP
    n = opt["copies"] or (200 if full else 40)
    n_sealed = n // 2
    checks = testlib.Checks(verbose=opt["v"])
    tmp = tempfile.mkdtemp(prefix="cnnc-corrupt-")
    try:
        so = os.path.join(tmp, "intact.so")
        r = subprocess.run([cnnc, os.path.join(src, "models", "fmnist_cnn.yml"), "-o", so, "--target-cpu", "x86-64"],
                           capture_output=True, text=True)
        if not checks.check(r.returncode == 0, "compile fmnist_cnn: " + r.stderr[-300:]):
            return checks.summary()
        b = open(so, "rb").read()
        rnd = random.Random(opt["seed"])
        inp = os.path.join(tmp, "in.idx")
        with open(inp, "wb") as f:  # 4 images: idx3 u8 [4, 28, 28]
            f.write(bytes([0, 0, 8, 3]) + struct.pack(">III", 4, 28, 28) + bytes(rnd.randrange(256) for _ in range(4 * 784)))
        ref_out = os.path.join(tmp, "ref.bin")
        rc, text = run([cnnrun, so, "infer", "--input", inp, "--output", ref_out, "--threads", "1"])
        if not checks.check(rc == 0, "the intact model runs: %s" % text[-300:]):
            return checks.summary()
        ref = open(ref_out, "rb").read()
        checks.check(seal_desc(b) is not None, "the .so carries cnnc's checksum note")
        elf = Elf(b)
        for i, (what, data, pat) in enumerate(named_cases(elf, None)):
            p = os.path.join(tmp, "named%d.so" % i)
            with open(p, "wb") as f:
                f.write(data)
            rc, text = run([cnnrun, p, "info"])
            checks.check(rc == 1 and re.search(r"named%d\.so: .*" % i + pat, text) is not None,
                         "%s: want exit 1 and /%s/, got %s: %s" % (what, pat, rc, text[-300:]))
        fake = os.path.join(build, "tests", "libfake_model.so")
        if os.path.exists(fake):
            rc, text = run([cnnrun, fake, "info"])
            checks.check(rc == 0, "the unsealed hand-made libfake_model.so still opens: %s" % text[-300:])
        copies = [(d, c) for d, c in damages(elf, n, rnd)]
        copies += [("resealed " + d, reseal(c)) for d, c in damages(elf, n_sealed, rnd, structural_only=True)]
        tally = {}
        log = []
        for i, (what, data) in enumerate(copies):
            p = os.path.join(tmp, "c%03d.so" % i)
            with open(p, "wb") as f:
                f.write(data)
            res, detail = outcome(cnnrun, p, inp, ref, tmp)
            key = ("resealed " if what.startswith("resealed") else "") + res
            tally[key] = tally.get(key, 0) + 1
            log.append((i, what, res, detail))
            checks.check(not res.startswith("FAIL"), "copy %d (%s): %s %s" % (i, what, res, detail))
            if opt["keep"]:
                os.makedirs(opt["keep"], exist_ok=True)
                shutil.copy(p, os.path.join(opt["keep"], "c%03d.so" % i))
            os.unlink(p)
        if opt["keep"]:
            with open(os.path.join(opt["keep"], "outcomes.csv"), "w") as f:
                for i, what, res, detail in log:
                    f.write('%d,"%s","%s","%s"\n' % (i, what, res, detail.replace('"', "'").replace("\n", " ")))
        print("%d copies (%d resealed): %s" % (len(copies), n_sealed,
                                                 ", ".join("%s %d" % kv for kv in sorted(tally.items()))))
        for i, what, res, detail in log:
            if opt["v"]:
                print("  %3d %-45s %s" % (i, what[:45], res))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
