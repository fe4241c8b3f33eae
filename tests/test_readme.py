"""The README and docs/ stand on their own: nothing points outside the repository, every relative link
and anchor resolves, and every setting the code reads is documented."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from maya_server.config import PARSERS
from maya_server.responses.settings import ROWS

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = "/".join(("..", "shared"))
"""The sibling folder the project was written beside, which a clone does not have (spelled in two
pieces so this file does not match itself)."""
COPIED_SCHEMA = "tests/open_responses/"
"""The Open Responses schema, copied with its own NOTICE and LICENSE: left as published."""
DOCUMENTS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
PENDING = "docs/pending-"
"""Notes other work leaves for the docs (`docs/pending-<topic>.md`), to be folded into their homes: their links must
resolve, but they need not link anywhere."""
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def repository_files() -> list[str]:
    """Tracked files plus new ones git does not ignore (what a commit would carry)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    return [name for name in listed.splitlines() if (ROOT / name).is_file()]


def text_of(name: str) -> str | None:
    data = (ROOT / name).read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_no_file_points_outside_the_repository():
    files = [name for name in repository_files() if not name.startswith(COPIED_SCHEMA)]
    assert "README.md" in files and "maya_server/app.py" in files  # the listing is the real tree
    offenders = [name for name in files if OUTSIDE in (text_of(name) or "")]
    assert offenders == []


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in document.read_text().splitlines() if line.startswith("#")}


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_relative_link_resolves(name):
    document = ROOT / name
    links = [target for target in LINK.findall(document.read_text()) if "://" not in target]
    assert links or name.startswith(PENDING), "the README and each docs page link to one another"
    for target in links:
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        assert linked.is_file() and linked.is_relative_to(ROOT), f"{name}: {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{name}: no heading for #{anchor} in {linked.name}"


def test_the_readme_links_the_responses_contract():
    assert "](docs/responses-api.md" in (ROOT / "README.md").read_text()


def test_every_setting_is_documented():
    """Somewhere in the README or docs/ (tests/test_docs_configuration.py holds docs/configuration.md to each)."""
    docs = "\n".join((ROOT / name).read_text() for name in DOCUMENTS)
    missing = [name for name in PARSERS
               if f"`{name}`" not in docs and not re.search(re.escape("--" + name.replace("_", "-")) + r"\b", docs)]
    assert missing == []


def test_every_responses_setting_has_a_row_with_its_default():
    contract = (ROOT / "docs" / "responses-api.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([A-Z_]+)` \| ([^|]+) \|", contract, re.M)}
    assert set(rows) == set(ROWS)
    for suffix, row in ROWS.items():
        written = rows[suffix].split(" (")[0].replace(",", "").strip()
        if written.endswith(" MiB"):
            written = str(int(written.removesuffix(" MiB")) * 1024 * 1024)
        assert written == str(row.default), suffix


FENCED = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.M | re.S)
GENERATES = re.compile(r"\.create\(|Runner\.run|ChatOpenAI\(|generateText\(|streamText\("
                       r"|curl [^\n]*/v1/(responses|chat)")
"""A call that has the model write: an SDK's create, an agent run, a LangChain model, the AI SDK, a curl."""
LIMITS = ("max_output_tokens", "max_tokens", "maxOutputTokens")


@pytest.mark.parametrize("name", [n for n in DOCUMENTS if not n.startswith(PENDING)])
def test_every_example_that_generates_sets_an_output_limit(name):
    """A copied example runs on the reader's model: without a limit the shipped one writes for minutes."""
    for info, code in FENCED.findall((ROOT / name).read_text()):
        if GENERATES.search(code):
            assert any(limit in code for limit in LIMITS), f"{name}: a ```{info} example sets no limit:\n{code}"
