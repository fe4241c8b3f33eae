"""DeepSeek-V4.1 (`deepseek-v4.1`): the prompt of V4.1's own encoder (`encoding/encoding.py` of
DeepSeek-V4.1-Flash; deepseek-recipe's `DeepseekV41Encoding`), on the encoder shared with V4 (`deepseek_prompt.py`).

What V4.1 changed from V4:
- `<｜System｜>` (id 128799, not a special token in V4.1's tokenizer.json) after BOS when in thinking mode or when
  the conversation opens with a system message, and before every later system message; a later system message
  counts as a user turn (reasoning before it is dropped, and one that ends the conversation gets the generation
  prompt). A developer message is a system message.
- In thinking mode, first: `Reasoning Effort: N (range 1-100, the higher the value, the more thorough the
  reasoning)` and a blank line, N as the toolkit maps an OpenAI effort: `minimal`/`low` → 50, none given,
  `medium`, `high` or `xhigh` → 75 (DeepSeek's default `high`), `max` (DeepSeek's own tier) → 100. Never in chat
  mode (`none`).
- DSML tags gain a space: `<｜DSML｜ calls>`, `<｜DSML｜ invoke name="…">`, `<｜DSML｜ parameter name="…" …>`.
- An image is `<｜deepseek_image｜>` (id 129264); V4's `<｜image｜>` is a placeholder in V4.1's vocabulary.
  (deepseek-recipe spells it `<｜image｜>` unless given V4.1's spelling in its `SpecialTokens`.)
"""

from __future__ import annotations

from .deepseek_prompt import JSON_OBJECT_SCHEMA_SECTION, DeepSeekDialect
from .deepseek_v4 import DeepSeekFamily
from .dsml_parser import V41_TAGS

SYSTEM = "<｜System｜>"
IMAGE = "<｜deepseek_image｜>"
V41_EFFORT = {None: 75, "minimal": 50, "low": 50, "medium": 75, "high": 75, "xhigh": 75, "max": 100}
"""The effort number for each OpenAI effort, as DeepSeek's toolkit converts a request."""


def effort_text(effort: str | None) -> str:
    return (f"Reasoning Effort: {V41_EFFORT[effort]} "
            "(range 1-100, the higher the value, the more thorough the reasoning)\n\n")


V41 = DeepSeekDialect(tags=V41_TAGS, image=IMAGE, effort_text=effort_text, system_token=SYSTEM,
                      calls_by_id=False, empty_arguments_line=True, json_object_section=JSON_OBJECT_SCHEMA_SECTION)


class DeepSeekV41Family(DeepSeekFamily):
    name = "deepseek-v4.1"
    dialect = V41
