#!/usr/bin/env python3
"""The link order of gatewayd's functions (lld's --symbol-ordering-file),
from callgrind dumps of the binary: first what serving calls runs, hottest
first, then what only the start-up runs, then (the linker's own order)
everything never run. A call then touches a few hundred contiguous KiB of
code instead of pages spread over the whole text (docs/benchmarks.md,
issue #54), and the start-up's code, let go after start, is one stretch.

The link map of the same inputs says which functions share an input
section with others: the prebuilt Swift runtime's objects keep 1.6 MB of
their functions in one `.text`, which would move whole with any one of
them, so functions there are left where they are.

usage: symbol-order.py MAP BINARY STARTUP_DUMP SERVING_DUMP... > ORDER
"""
import collections
import re
import sys


def self_costs(dump, binary):
    """Each function's own instruction count in `binary`'s object, from one dump (a Counter by name)."""
    names, objects = {}, {}
    costs = collections.Counter()
    function, obj, call_line = None, None, False

    def resolve(table, text):
        # Callgrind names each file, object and function once, then by its number.
        match = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not match:
            return text
        if match.group(2) is not None:
            table[match.group(1)] = match.group(2)
        return table.get(match.group(1))

    for line in open(dump, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("ob="):
            obj = resolve(objects, line[3:])
        elif line.startswith("fn="):
            function = (obj, resolve(names, line[3:]))
        elif line.startswith("cob="):
            resolve(objects, line[4:])
        elif line.startswith("cfn="):
            resolve(names, line[4:])
        elif line.startswith("calls="):
            call_line = True  # the next cost line is the callee's, not this function's
        elif line[:1].isdigit() or line[:1] in "+-*":
            if call_line:
                call_line = False
                continue
            fields = line.split()
            if len(fields) >= 2 and function:
                costs[function] += int(fields[1])
    # A name like 0x1a2b3c is code callgrind found no symbol for; `f'2` its name for a recursive activation of f.
    own = collections.Counter()
    for (obj, name), cost in costs.items():
        if obj == binary and cost > 0 and name and not name.startswith("0x"):
            own[name.split("'")[0]] += cost
    return own


def shared_sections(link_map):
    """Functions in an input section bigger than 64 KiB that holds others too (lld's -Map)."""
    shared, section, members = set(), None, []

    def close():
        if section is not None and section > 65536 and len(members) > 1:
            shared.update(members)

    # `VMA LMA Size Align` then the name, indented 0 (output section), 8 (input section) or 16 (symbol).
    entry = re.compile(r"^\s*[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ ( *)(\S.*)$")
    for line in open(link_map, errors="replace"):
        match = entry.match(line.rstrip("\n"))
        if not match:
            continue
        size, indent, name = int(match.group(1), 16), len(match.group(2)), match.group(3)
        if indent == 8:
            close()
            section, members = size, []
        elif indent == 16 and section is not None:
            members.append(name)
        else:
            close()
            section, members = None, []
    close()
    return shared


def main():
    link_map, binary, startup, serving = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    immovable = shared_sections(link_map)
    served = collections.Counter()
    for dump in serving:
        served.update(self_costs(dump, binary))
    order = [name for name, _ in served.most_common() if name not in immovable]
    seen = set(order) | immovable
    for name, _ in self_costs(startup, binary).most_common():
        if name not in seen:
            seen.add(name)
            order.append(name)
    sys.stdout.write("".join(name + "\n" for name in order))


main()
