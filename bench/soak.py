"""Store churn at the default limits: does the server's memory track what the store counts?

Starts Maya in a subprocess (scripted engine, default Responses limits, two API keys) and, for
`--seconds`, keeps up:

- one hot chain: its oldest response is continued again and again (each turn stored, with its own
  large instructions and metadata), so it always heads the store's expiry order;
- churn on both keys: new stored conversations a few turns deep, with large unique instructions and
  tools, some deleted again, most evicted by the entry limit;
- background jobs whose readers attach, read a few events and disconnect (some reconnect with
  `starting_after`).

Every 10 s it prints the server's RSS and the store's own counted bytes (`/v1/status`). At the
end it prints the RSS growth after the warm-up against the target: growth ≤ counted bytes + 32 MB.
The warm-up is counted in requests, not seconds (a loaded machine serves fewer): by then the
store is at its entry limit, the job records at theirs and the scripted engine's record of
recent prompts full, so what grows after it is what nothing bounds.

    .venv/bin/python bench/soak.py [--seconds 120] [--warmup-requests 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from maya_process import start_maya  # noqa: E402

KEYS = ("soak-key-one", "soak-key-two")
MIB = 1024 * 1024
SLACK = 32 * MIB
SCRIPT = ["Sure, here is the answer you asked for.", "tick " * 200]


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def bulk(tag: str, size: int) -> str:
    return f"{tag} " + "".join(random.choices("abcdefghijklmnopqrstuvwxyz ", k=size))


class Load:
    def __init__(self, url: str) -> None:
        self.clients = [httpx.AsyncClient(base_url=url, timeout=60, headers={"Authorization": f"Bearer {k}"})
                        for k in KEYS]
        self.done = 0
        self.statuses: dict[int, int] = {}

    async def post(self, key: int, path: str, body: dict) -> dict | None:
        answer = await self.clients[key].post(path, json=body)
        self.count(answer.status_code)
        return answer.json() if answer.status_code == 200 else None

    def count(self, status: int) -> None:
        self.done += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1

    async def hot_chain(self, stop: float) -> None:
        root = await self.post(0, "/v1/responses", {"input": "root", "store": True})
        while time.monotonic() < stop and root is not None:
            await self.post(0, "/v1/responses", {
                "previous_response_id": root["id"], "input": bulk("turn", 2_000), "store": True,
                "instructions": bulk("hot", 60_000), "metadata": {"k": bulk("m", 400)},
            })

    async def churn(self, key: int, stop: float) -> None:
        tool = {"type": "function", "name": "lookup", "description": "",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
        while time.monotonic() < stop:
            previous = None
            for _ in range(random.randint(1, 4)):
                tool["description"] = bulk("tool", 20_000)
                body = {"input": bulk("user", 5_000), "store": True, "instructions": bulk("sys", 40_000),
                        "tools": [tool]}
                if previous:
                    body["previous_response_id"] = previous
                made = await self.post(key, "/v1/responses", body)
                previous = made["id"] if made else None
            if previous and random.random() < 0.3:
                self.count((await self.clients[key].delete(f"/v1/responses/{previous}")).status_code)

    async def background(self, key: int, stop: float) -> None:
        while time.monotonic() < stop:
            body = {"input": bulk("job", 3_000), "store": True, "background": True, "stream": True,
                    "instructions": bulk("bg", 20_000)}
            last, job_id = await self.read_some(key, "POST", "/v1/responses", json=body)
            if job_id and random.random() < 0.5:
                await self.read_some(key, "GET", f"/v1/responses/{job_id}",
                                     params={"stream": "true", "starting_after": str(last)})
            await asyncio.sleep(0.05)

    async def read_some(self, key: int, method: str, path: str, **request) -> tuple[int, str | None]:
        """Read a few events, then disconnect: (last sequence number, response id)."""
        last, job_id = 0, None
        async with self.clients[key].stream(method, path, **request) as answer:
            self.count(answer.status_code)
            if answer.status_code != 200:
                return last, None
            async for line in answer.aiter_lines():
                if line.startswith("data: "):
                    event = json.loads(line[6:])
                    last = event.get("sequence_number", last)
                    job_id = job_id or event.get("response", {}).get("id")
                    if random.random() < 0.15:
                        break
        return last, job_id


async def sample(url: str, pid: int, started: float, stop: float, load: Load, samples: list) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30,
                                 headers={"Authorization": f"Bearer {KEYS[0]}"}) as http:
        while True:
            cache = (await http.get("/v1/status")).json()["responses"]["cache"]
            elapsed = time.monotonic() - started
            samples.append((elapsed, rss_bytes(pid), cache["bytes"], load.done))
            print(f"{elapsed:6.1f}s  RSS {samples[-1][1] / MIB:7.1f} MiB  store counts {cache['bytes'] / MIB:6.1f} MiB "
                  f"in {cache['entries']:3d} entries  ({load.done} requests so far)", flush=True)
            if time.monotonic() >= stop:
                return
            await asyncio.sleep(min(10, max(0.0, stop - time.monotonic())))


async def soak(url: str, pid: int, seconds: float) -> tuple[list, Load]:
    load = Load(url)
    started = time.monotonic()
    stop = started + seconds
    samples: list = []
    workers = [load.hot_chain(stop), load.churn(0, stop), load.churn(1, stop), load.churn(1, stop),
               load.background(0, stop), load.background(1, stop)]
    await asyncio.gather(sample(url, pid, started, stop, load, samples), *workers)
    for client in load.clients:
        await client.aclose()
    return samples, load


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--warmup-requests", type=int, default=400)
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as script:
        json.dump(SCRIPT, script)
    keys = [flag for key in KEYS for flag in ("--api-key", key)]
    process, url = start_maya("--engine", "scripted", "--family", "chatml", "--script", script.name,
                              "--script-delay", "0.0005", "--ctx", "1000000", *keys)
    try:
        samples, load = asyncio.run(soak(url, process.pid, args.seconds))
    finally:
        process.terminate()
        process.wait(timeout=30)
    warm = next((s for s in samples if s[3] >= args.warmup_requests), samples[-1])
    end = samples[-1]
    growth = end[1] - warm[1]
    allowed = end[2] + SLACK
    print(f"requests: {load.done} by status {dict(sorted(load.statuses.items()))}")
    print(f"RSS after warm-up ({warm[3]} requests, {warm[0]:.0f}s): {warm[1] / MIB:.1f} MiB -> {end[1] / MIB:.1f} MiB at {end[0]:.0f}s: "
          f"growth {growth / MIB:.1f} MiB; target <= store's counted {end[2] / MIB:.1f} MiB + 32 MiB = "
          f"{allowed / MIB:.1f} MiB; growth/target = {growth / allowed:.2f} -> {'PASS' if growth <= allowed else 'FAIL'}")
    return 0 if growth <= allowed else 1


if __name__ == "__main__":
    sys.exit(main())
