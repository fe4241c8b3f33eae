"""Write a small seeded multimodal projector GGUF that llama.cpp's `clip.cpp` loads.

Why: the tests (and anyone trying vision without downloading a real vision model) need
llama.cpp's real image path — preprocessing, the projector graph, image embeddings in
the text model's context — on the shipped SmolLM2-135M, which has no projector. The
smallest projector `clip.cpp` accepts is LLaVA's "mlp": a patch-embedding convolution,
position embeddings, one (unused) encoder block, and a two-layer MLP whose output width
must equal the text model's embedding width (576 for SmolLM2-135M), or `mtmd` refuses it.

With `block_count = 1` the llava graph runs no encoder layers (it stops at the second to
last), so an image becomes `(image_size / patch_size)**2` embeddings that depend on its
pixels through the convolution and the MLP: different images give different embeddings.

Usage: python -m tests.engine.mmproj_fixture OUT.gguf [--text-width 576]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

IMAGE_SIZE = 64
PATCH_SIZE = 16
VISION_WIDTH = 32
HIDDEN = 64


def image_tokens() -> int:
    """How many embeddings (context positions) one image takes with this projector."""
    return (IMAGE_SIZE // PATCH_SIZE) ** 2


def write_test_mmproj(path: Path, *, text_width: int = 576, seed: int = 15) -> Path:
    """Write the projector to `path` (seeded, so the same file every time)."""
    import gguf  # a test extra: only the tests and this script need it

    rng = np.random.default_rng(seed)
    n_patches = image_tokens()

    def weights(*shape: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_string("general.name", "maya-test-mmproj")
    writer.add_string("clip.projector_type", "mlp")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.use_gelu", True)
    writer.add_uint32("clip.vision.image_size", IMAGE_SIZE)
    writer.add_uint32("clip.vision.patch_size", PATCH_SIZE)
    writer.add_uint32("clip.vision.embedding_length", VISION_WIDTH)
    writer.add_uint32("clip.vision.feed_forward_length", HIDDEN)
    writer.add_uint32("clip.vision.block_count", 1)
    writer.add_uint32("clip.vision.projection_dim", text_width)
    writer.add_uint32("clip.vision.attention.head_count", 2)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])

    # numpy shapes are ggml's `ne` reversed
    writer.add_tensor(
        "v.patch_embd.weight",
        weights(VISION_WIDTH, 3, PATCH_SIZE, PATCH_SIZE, scale=0.05).astype(np.float16),
    )
    writer.add_tensor("v.patch_embd.bias", weights(VISION_WIDTH, scale=0.01))
    writer.add_tensor("v.position_embd.weight", weights(n_patches, VISION_WIDTH, scale=0.01))
    writer.add_tensor("v.blk.0.attn_out.weight", weights(VISION_WIDTH, VISION_WIDTH, scale=0.1))
    writer.add_tensor("v.blk.0.ffn_up.weight", weights(HIDDEN, VISION_WIDTH, scale=0.1))
    writer.add_tensor("v.blk.0.ffn_down.weight", weights(VISION_WIDTH, HIDDEN, scale=0.1))
    writer.add_tensor("mm.0.weight", weights(HIDDEN, VISION_WIDTH, scale=0.5))
    writer.add_tensor("mm.0.bias", weights(HIDDEN, scale=0.1))
    writer.add_tensor("mm.2.weight", weights(text_width, HIDDEN, scale=0.5))
    writer.add_tensor("mm.2.bias", weights(text_width, scale=0.1))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--text-width", type=int, default=576)
    args = parser.parse_args()
    print(write_test_mmproj(args.out, text_width=args.text_width))


if __name__ == "__main__":
    main()
