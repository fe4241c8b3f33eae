"""Response store: continuation cost and stored bytes of long conversation chains.

Builds chains of stored turns in-process with the real code that shapes them
(request parsing → stored input items, the assembler's final snapshot → put)
and prints, measured in one run:

  * continuation assembly at depth 500 ÷ depth 5 (target ≤ 1.5): what the
    store does to continue the chain's tip and save the next turn — look up
    and pin the history, reserve its assembly bytes, append the new turn's
    blocks to the flat reference list, account and evict. Decoding the
    history for the prompt is request work linear in the history (as is
    rendering and tokenizing it); it is printed beside, not in the ratio.
  * stored bytes of a 500-turn chain ÷ the bytes of its unique items
    (target ≤ 1.2): items, per-response JSON, shared envelopes and 8-byte
    references, against the serialized items alone.

    .venv/bin/python bench/store_chain.py [--rounds 300] [--user-chars 300] [--answer-chars 1200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import orjson

from maya_server.neutral.events import TextDelta
from maya_server.neutral.events import Finished, Usage
from maya_server.responses.assembly.assembler import ResponseAssembler
from maya_server.responses.request.request import parse_responses_request
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store.core import ResponseStore
from maya_server.responses.persistence.stored_items import stored_input_items

OWNER = "bench"


def turn(store: ResponseStore, previous: str | None, n: int, user_chars: int, answer_chars: int) -> str:
    """Store one turn continuing `previous`; returns the new response id."""
    body = {"model": "m", "store": True, "input": f"Turn {n}: " + "q" * user_chars}
    if previous:
        body["previous_response_id"] = previous
    request = parse_responses_request(body)
    assembler = ResponseAssembler(request, model="m")
    assembler.opening()
    assembler.on_event(TextDelta(f"Answer {n}: " + "a" * answer_chars))
    assembler.on_event(Finished("stop", Usage(100 * n, 90 * n, 300, 0)))
    base = store.begin(OWNER, previous) if previous else None
    items = stored_input_items(request.input, [item["id"] for item in base.items()] if base else ())
    store.put(OWNER, assembler.snapshot(), items, base)
    if base:
        base.release()
    return assembler.id


def chain(depth: int, user_chars: int, answer_chars: int) -> tuple[ResponseStore, str, list]:
    settings = ResponsesSettings(cache_entries=depth + 10, cache_bytes=1 << 32, entry_bytes=1 << 32,
                                 assembly_bytes=1 << 32)
    store = ResponseStore(settings)
    tip = None
    for n in range(depth):
        tip = turn(store, tip, n, user_chars, answer_chars)
    return store, tip, _next_turn(tip, user_chars, answer_chars)


def _next_turn(tip: str, user_chars: int, answer_chars: int) -> list:
    """The next turn's prepared parts, built once, so the timing covers only the store's work."""
    request = parse_responses_request({"model": "m", "store": True, "previous_response_id": tip,
                                       "input": "Next: " + "q" * user_chars})
    assembler = ResponseAssembler(request, model="m")
    assembler.opening()
    assembler.on_event(TextDelta("a" * answer_chars))
    assembler.on_event(Finished("stop", Usage(1, 0, 1, 0)))
    return [request, assembler.snapshot()]


def continue_once(store: ResponseStore, tip: str, prepared: list, n: int) -> tuple[float, float]:
    """(seconds of store assembly, seconds decoding the history) for one continuation; undone after."""
    request, snapshot = prepared
    snapshot = {**snapshot, "id": f"resp_bench_{n}"}
    items = [{**item, "id": f"msg_bench_{n}"} for item in stored_input_items(request.input)]
    started = time.perf_counter()
    base = store.begin(OWNER, tip)
    store.put(OWNER, snapshot, items, base)
    base.release()
    assembled = time.perf_counter() - started
    started = time.perf_counter()
    base = store.begin(OWNER, tip)
    base.items()
    base.release()
    decoded = time.perf_counter() - started
    store.delete(OWNER, snapshot["id"])
    return assembled, decoded


def unique_item_bytes(store: ResponseStore, tip: str) -> int:
    base = store.begin(OWNER, tip)
    try:
        return base.history_bytes
    finally:
        base.release()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--user-chars", type=int, default=300)
    parser.add_argument("--answer-chars", type=int, default=1200)
    args = parser.parse_args()

    shallow = chain(5, args.user_chars, args.answer_chars)
    deep = chain(500, args.user_chars, args.answer_chars)
    times = {5: [], 500: []}
    decode = {5: [], 500: []}
    for n in range(args.rounds):  # alternate, so both depths see the same machine
        for depth, (store, tip, prepared) in ((5, shallow), (500, deep)):
            assembled, decoded = continue_once(store, tip, prepared, n)
            times[depth].append(assembled)
            decode[depth].append(decoded)
    med = {d: statistics.median(v) for d, v in times.items()}
    dec = {d: statistics.median(v) for d, v in decode.items()}
    print(f"continuation assembly (median of {args.rounds}): depth 5 {med[5] * 1e6:.1f} µs, "
          f"depth 500 {med[500] * 1e6:.1f} µs")
    print(f"  ratio depth 500 / depth 5: {med[500] / med[5]:.3f}  (target <= 1.5)")
    print(f"  (request-owned history decode, linear by nature: depth 5 {dec[5] * 1e6:.1f} µs, "
          f"depth 500 {dec[500] * 1e3:.2f} ms)")

    store, tip, _ = deep
    stored = store.stats()["bytes"]
    unique = unique_item_bytes(store, tip) + sum(len(orjson.dumps(i)) for i in store.get(OWNER, tip)["output"])
    print(f"500-turn chain: {store.stats()['entries']} responses, {stored} bytes stored, "
          f"{unique} bytes of unique items (user {args.user_chars} + answer {args.answer_chars} characters a turn)")
    print(f"  ratio stored / unique items: {stored / unique:.3f}  (target <= 1.2)")


if __name__ == "__main__":
    main()
