"""Print (or write into README.rst) the kernel inventory table.

    python -m tools.inventory_table            # print the RST table
    python -m tools.inventory_table --write    # replace it in README.rst

The rows come from ``registered_kernels()``: one per registrar and domain,
its operators in registration order (opset ranges collapsed).
"""

from __future__ import annotations

import argparse
import pathlib

import onnx_light_cpu as olc

README = pathlib.Path(__file__).resolve().parents[1] / "README.rst"
START, END = ".. inventory-table-start", ".. inventory-table-end"
HEADER = ("Registrar", "Domain", "Device", "Operators")


def inventory_table() -> str:
    rows: dict[tuple[str, str, str], list[str]] = {}
    for r in olc.registered_kernels():
        ops = rows.setdefault((r.registrar, r.domain, r.device), [])
        if r.op_type not in ops:
            ops.append(r.op_type)
    body = [(*key, ", ".join(ops)) for key, ops in rows.items()]
    # RST simple table: every column but the last must fit its border.
    widths = [max(len(row[i]) for row in [HEADER, *body]) for i in range(3)] + [40]
    border = "  ".join("=" * w for w in widths)

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([border, line(HEADER), border, *map(line, body), border])


def write_readme() -> None:
    text = README.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{START}\n\n{inventory_table()}\n\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace the table in README.rst")
    if parser.parse_args().write:
        write_readme()
    else:
        print(inventory_table())


if __name__ == "__main__":
    main()
