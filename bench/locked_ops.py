#!/usr/bin/env python3
"""Counts the locked read-modify-writes (x86 `lock`-prefixed instructions and `xchg` with
memory) a workload executes per cycle, from two callgrind runs of it with --dump-instr=yes
that differ only in their number of cycles: (count of the larger - count of the smaller) /
(difference of the cycles). On this VM one costs about 7.5 ns uncontended, as much as 40
instructions, and callgrind's instruction counts do not show it.

  valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=/tmp/a BENCH --workload cycle --n 10000
  valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=/tmp/b BENCH --workload cycle --n 30000
  bench/locked_ops.py /tmp/a /tmp/b 20000 [--by-function BENCH]

Prints the count per cycle of each object (a shared library, the binary), and with
--by-function, of each function of that binary. Needs objdump (binutils).
"""
import collections
import re
import subprocess
import sys


def costs(path):
    """The objects of a callgrind file and the Ir of each (object id, instruction address)."""
    objects, counts = {}, collections.defaultdict(int)
    current, address, after_call = None, 0, False
    for line in open(path):
        if line.startswith(("ob=", "cob=")):
            m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line.strip())
            if m.group(2):
                objects[m.group(1)] = m.group(2)
            if line.startswith("ob="):
                current = m.group(1)
            continue
        if line.startswith("calls="):
            after_call = True  # the next cost line is the call's inclusive cost
            continue
        if not line[:1] or line[0] not in "0123456789+-*":
            continue
        parts = line.split()
        token = parts[0]
        if token.startswith("0x"):
            address = int(token, 16)
        elif token[0] in "+-":
            address += int(token)
        elif token != "*":
            address = int(token)
        if after_call:
            after_call = False
        elif len(parts) >= 3:
            counts[(current, address)] += int(parts[2])
    return objects, counts


def locked_instructions(binary):
    """Address -> enclosing function of each locked read-modify-write in `binary`."""
    out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", binary], capture_output=True, text=True).stdout
    function, found = None, {}
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            function = m.group(1)
            continue
        m = re.match(r"\s*([0-9a-f]+):\s+(.*)", line)
        if m:
            instruction = m.group(2).strip()
            if instruction.startswith("lock ") or (instruction.startswith("xchg") and "(" in instruction):
                found[int(m.group(1), 16)] = function
    return found


def per_object(path):
    objects, counts = costs(path)
    totals, functions = collections.defaultdict(int), collections.defaultdict(int)
    for object_id, name in objects.items():
        if not name.startswith("/"):
            continue
        try:
            locked = locked_instructions(name)
        except OSError:
            continue
        for (owner, address), count in counts.items():
            if owner == object_id and address in locked:
                totals[name] += count
                functions[(name, locked[address])] += count
    return totals, functions


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    small, large, cycles = sys.argv[1], sys.argv[2], float(sys.argv[3])
    by_function = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--by-function" else None
    (a, fa), (b, fb) = per_object(small), per_object(large)
    total = 0.0
    for name in sorted(b):
        per_cycle = (b[name] - a.get(name, 0)) / cycles
        total += per_cycle
        if abs(per_cycle) >= 0.01:
            print(f"{per_cycle:7.2f}  {name}")
    print(f"{total:7.2f}  in all, per cycle")
    if by_function:
        rows = [((fb[k] - fa.get(k, 0)) / cycles, k[1]) for k in fb if k[0] == by_function]
        for per_cycle, function in sorted(rows, reverse=True):
            if per_cycle >= 0.05:
                print(f"{per_cycle:7.2f}  {function[:140]}")


if __name__ == "__main__":
    main()
