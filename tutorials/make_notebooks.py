"""Build each tutorial notebook from its .py twin (`# %%` code cells, `# %% [markdown]` text).

    python tutorials/make_notebooks.py          # rewrite every .ipynb
    python tutorials/make_notebooks.py --check  # exit 1 if a notebook differs from its twin
"""
import glob
import os
import sys

import nbformat


def cells_of(source):
    """(kind, text) for each cell of a percent-format script."""
    cells, kind, lines = [], None, []
    for line in source.splitlines():
        if line.startswith("# %%"):
            if kind is not None:
                cells.append((kind, lines))
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
            continue
        if kind == "markdown":
            line = line[2:] if line.startswith("# ") else line.lstrip("#")
        lines.append(line)
    if kind is not None:
        cells.append((kind, lines))
    return [(k, "\n".join(text).strip("\n")) for k, text in cells]


def notebook_for(py_path):
    with open(py_path) as f:
        cells = cells_of(f.read())
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for kind, text in cells:
        nb.cells.append(nbformat.v4.new_markdown_cell(text) if kind == "markdown" else nbformat.v4.new_code_cell(text))
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    return nbformat.writes(nb) + "\n"


def main(check):
    here = os.path.dirname(os.path.abspath(__file__))
    stale = []
    for py in sorted(glob.glob(os.path.join(here, "[0-9][0-9]_*.py"))):
        target, text = py[:-3] + ".ipynb", notebook_for(py)
        current = open(target).read() if os.path.exists(target) else None
        if current != text:
            stale.append(os.path.basename(target))
            if not check:
                with open(target, "w") as f:
                    f.write(text)
    if check and stale:
        print("notebooks out of date with their .py twins:", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv))
