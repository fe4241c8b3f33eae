"""Which model family a server speaks: the model's own chat template decides, a flag may insist.

The family decides the prompt format, tool syntax and reasoning markers. Guessing
it wrong is silent and bad (a ChatML model fed GLM's template answers in
`reasoning_content` with empty `content`), so Maya reads the template the
engine reports (llama-server's `/props`, a model directory's
`tokenizer_config.json`) and recognises each family by the control tokens its
template writes. `maya` / `maya-ds4` fall back to their own family only when
the template says nothing we recognise; an explicit `--family` that
contradicts the template stops start-up, unless `--force-family` says the
operator knows better.

GLM's templates differ between releases in what the prompt says about tools
(GLM-4.7 and GLM-5 list whole OpenAI tool objects, GLM-5.1 their `function`,
GLM-5.2 adds a reasoning-effort line), so a GLM template also names its
variant (`GLM_VARIANTS`), and the prompt is the one the model was trained on.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:  # the engines read templates here and must not import the CLI's config
    from ..config import ServerConfig

_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("glm", ("[gMASK]", "<|observation|>")),
    ("deepseek-v4", ("<｜Assistant｜>", "<｜User｜>", "｜DSML｜")),
    ("chatml", ("<|im_start|>",)),
)
"""Each family's template tokens, checked in this order (GLM's and DeepSeek's never contain ChatML's)."""
GLM_VARIANTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("glm-5.2", ("Reasoning Effort:",)),
    ("glm-5.1", ("tool['function']", "tool_to_json")),
    ("glm-4.7", ("tool | tojson",)),
)
"""What each GLM template variant writes, checked in this order; a GLM template with none of them is `glm`."""


def family_from_template(template: str | None) -> str | None:
    """The family whose control tokens the chat template writes (for GLM, the variant its tool listing shows),
    or None when none matches."""
    if not template:
        return None
    family = _first_match(template, _MARKERS)
    if family == "glm":
        return _first_match(template, GLM_VARIANTS) or "glm"
    return family


def _first_match(template: str, table: tuple[tuple[str, tuple[str, ...]], ...]) -> str | None:
    return next((name for name, markers in table if any(marker in template for marker in markers)), None)


def template_from_model_dir(directory: str | Path) -> str | None:
    """The `chat_template` of a model directory's `tokenizer_config.json` (or its `chat_template.jinja`)."""
    directory = Path(directory)
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8", errors="replace")
    try:
        config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    template = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(template, list):  # several named templates: the default one
        template = next((t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), None)
    return template if isinstance(template, str) else None


def base_family(name: str) -> str:
    """`glm-4.7`, `glm-5.1`… are variants of `glm`."""
    return "glm" if name.startswith("glm") else name


def resolve_family(config: ServerConfig, detected: str | None) -> ServerConfig:
    """The config with the family to serve: the template's, unless a flag names one; a flag that
    contradicts the template is a `ConfigError` naming both, unless `force_family` is set."""
    if not config.family_explicit:
        return replace(config, family=detected) if detected is not None else config
    if detected is not None and base_family(config.family) != base_family(detected) and not config.force_family:
        raise ConfigError(
            "family",
            f"--family {config.family} contradicts the model's chat template, which is {detected}; "
            f"drop --family to use {detected}, or add --force-family to serve {config.family} anyway",
        )
    return config
