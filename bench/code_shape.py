"""Print the shape of the maya_server package: module sizes and function lengths.

Why: the code-quality issue asks for before/after numbers; this prints them the same way each time
(lines per module counted as physical lines, function length from its first to its last line).
"""
import ast
import statistics
import sys
from pathlib import Path


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(root="maya_server"):
    modules, functions = [], []
    for path in sorted(Path(root).rglob("*.py")):
        text = path.read_text()
        modules.append(len(text.splitlines()))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{path}:{node.lineno} {node.name}"))
    lengths = [n for n, _ in functions]
    print(f"modules {len(modules)}  lines {sum(modules)}  median {statistics.median(modules):.0f}  "
          f"p90 {percentile(modules, 0.9)}  max {max(modules)}")
    print(f"functions {len(lengths)}  median {statistics.median(lengths):.0f}  p90 {percentile(lengths, 0.9)}  "
          f"max {max(lengths)} ({max(functions)[1]})")


if __name__ == "__main__":
    main(*sys.argv[1:])
