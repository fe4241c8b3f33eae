"""Time to first token with one 1024×768 image ÷ the same request without it.

Maya on the default model (SmolLM2-135M) with the seeded test projector
(`tests/engine/mmproj_fixture.py`, LLaVA "mlp", 64-pixel input → 16 image
tokens), in its own process, read with the OpenAI SDK, streaming; the first text
delta marks the first token. The image is a data URL of a noisy 1024×768 PNG
(≈2.3 MB), so the ratio covers what an image costs Maya end to end: base64 and
Pillow decode, the pixel check, the scaling to the projector's input (85x64
here) and its PNG, the multimodal prompt, and
llama.cpp's preprocessing and projector. A fresh image each round (a new seed)
keeps llama-server's prompt cache from reusing the image's embeddings; the text
is the same. A real vision encoder (hundreds of ViT layers' worth of work) costs
far more than this projector: the figure bounds Maya's own overhead.

    .venv/bin/python bench/vision_ttft.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import base64
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from openai import OpenAI
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from maya_process import start_maya  # noqa: E402

from tests.engine.mmproj_fixture import write_test_mmproj  # noqa: E402

QUESTION = "Describe the picture in one sentence."


def image_url(seed: int) -> str:
    pixels = np.random.default_rng(seed).integers(0, 256, (768, 1024, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def ttft(client: OpenAI, content) -> float:
    started = time.perf_counter()
    stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": content}],
                                            max_tokens=8, temperature=0, stream=True)
    try:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                return time.perf_counter() - started
    finally:
        stream.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mmproj = write_test_mmproj(Path(tmp) / "mmproj.gguf")
        process, url = start_maya("--mmproj", str(mmproj), "--slots", "1", "--ctx", "2048")
        try:
            client = OpenAI(base_url=url + "/v1", api_key="none")
            text = [{"type": "text", "text": QUESTION}]
            ttft(client, text)  # warm-up
            plain, with_image = [], []
            for seed in range(args.rounds):
                picture = {"type": "image_url", "image_url": {"url": image_url(seed)}}
                plain.append(ttft(client, text))
                with_image.append(ttft(client, [*text, picture]))
        finally:
            process.terminate()
            process.wait(timeout=30)
    ratio = statistics.median(with_image) / statistics.median(plain)
    print(f"median TTFT with one 1024x768 image / without: {ratio:.2f} "
          f"({statistics.median(with_image) * 1000:.0f} ms / {statistics.median(plain) * 1000:.0f} ms, "
          f"{args.rounds} rounds)")


if __name__ == "__main__":
    main()
