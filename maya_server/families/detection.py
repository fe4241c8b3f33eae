"""Which model family a server speaks: the model's own chat template decides, a flag may insist.

The family decides the prompt format, tool syntax and reasoning markers. Guessing
it wrong is silent and bad (a ChatML model fed GLM's template answers in
`reasoning_content` with empty `content`), so Maya reads the template the
engine reports (llama-server's `/props`, a GGUF's `tokenizer.chat_template`,
a model directory's `tokenizer_config.json`) and recognises each family by the control tokens its
template writes. `maya` / `maya-ds4` fall back to their own family only when
the template says nothing we recognise; an explicit `--family` that
contradicts the template stops start-up, unless `--force-family` says the
operator knows better. This module only recognises families; the settings
and their wording are the edge's (`engine_setup.resolve_family`), so it
takes plain values and imports no configuration.

GLM's templates differ between releases in what the prompt says about tools
(GLM-4.7 and GLM-5 list whole OpenAI tool objects, GLM-5.1 their `function`,
GLM-5.2 adds a reasoning-effort line, GLM-5.3 a `Low` level and tool results
sorted into call order, which is also how its template is told from 5.2's), so a GLM template also names its
variant (`GLM_VARIANTS`), and the prompt is the one the model was trained on.
"""

from __future__ import annotations

_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("glm", ("[gMASK]", "<|observation|>")),
    ("deepseek-v4", ("<｜Assistant｜>", "<｜User｜>", "｜DSML｜")),
    ("chatml", ("<|im_start|>",)),
)
"""Each family's template tokens, checked in this order (GLM's and DeepSeek's never contain ChatML's)."""
GLM_VARIANTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("glm-5.3", ("reasoning_effort in ['low', 'high']", "can_sort")),
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


def base_family(name: str) -> str:
    """`glm-4.7`, `glm-5.1`… are variants of `glm`."""
    return "glm" if name.startswith("glm") else name


def contradicts(configured: str, detected: str | None) -> bool:
    """Whether the template's family (`detected`, None: it names none) is another family than the one
    configured; a GLM variant does not contradict `glm` (the edge decides what a contradiction stops)."""
    return detected is not None and base_family(configured) != base_family(detected)
