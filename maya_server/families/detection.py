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

DeepSeek-V4.1 ships no chat template (a GGUF or model folder of it carries
none, or V4's), so its template cannot tell it from V4. Two facts of the model
can (`detect_family`): its `config.json` `model_type` (`deepseek_v41`, where a
model folder is given) and its vocabulary, which put `<｜System｜>` at 128799
and `<｜deepseek_image｜>` at 129264 where V4 has placeholders and `<｜image2｜>`
(`V41_VOCABULARY`). Either makes a model with no template, or with V4's, a
`deepseek-v4.1` one; a template of another family still wins (a fine-tune that
kept V4.1's vocabulary but was trained on, say, ChatML). Each answer says why
(`Detection.reason`), for start-up and `/v1/status`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

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


V41_FAMILY = "deepseek-v4.1"
V41_MODEL_TYPE = "deepseek_v41"
"""DeepSeek-V4.1's `config.json` `model_type`."""
V41_VOCABULARY: tuple[tuple[int, str], ...] = ((128799, "<｜System｜>"), (129264, "<｜deepseek_image｜>"))
"""The tokens DeepSeek-V4.1's vocabulary has where V4's has others (`<｜place▁holder▁no▁799｜>`, `<｜image2｜>`):
(id, text). A vocabulary with both is V4.1's."""
FROM_TEMPLATE = "from the model's chat template"
"""The reason given for a family its chat template names."""
V41_TEMPLATES = (None, "deepseek-v4")
"""What a V4.1 model's chat template may name: nothing (DeepSeek ships none), or V4 (a converter's copy)."""


@dataclass(frozen=True)
class Detection:
    """The family a model names (None: nothing Maya recognises) and why, as start-up and `/v1/status` say it."""

    family: str | None
    reason: str | None = None


def detect_family(template: str | None, model_type: str | None = None,
                  token_text: Callable[[int], str | None] | None = None) -> Detection:
    """The model's family from its chat template, its `config.json` `model_type` and its vocabulary
    (`token_text`: an id's text, None where the vocabulary has no such id): `deepseek-v4.1` where the template
    names none or V4 and the model type or vocabulary is V4.1's, else the template's."""
    from_template = family_from_template(template)
    if from_template in V41_TEMPLATES:
        why = v41_evidence(model_type, token_text)
        if why is not None:
            return Detection(V41_FAMILY, why)
    return Detection(from_template, FROM_TEMPLATE if from_template else None)


def v41_evidence(model_type: str | None, token_text: Callable[[int], str | None] | None) -> str | None:
    """Why the model is DeepSeek-V4.1 (its `config.json` model type, else its vocabulary), or None."""
    if model_type == V41_MODEL_TYPE:
        return f"config.json model_type {V41_MODEL_TYPE}"
    if token_text is not None and all(token_text(token_id) == text for token_id, text in V41_VOCABULARY):
        return "vocabulary: " + ", ".join(f"{text} at {token_id}" for token_id, text in V41_VOCABULARY)
    return None


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
