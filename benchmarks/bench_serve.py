"""Load test of `kb serve`: POST /api/match of one log by 1, 8 and 32 concurrent clients.

Starts `kb serve` on a free loopback port against --db (a SQLite path or a SQLAlchemy URL, so
PostgreSQL figures come from the same command), warms it up, then for each number of clients
sends a fixed number of requests (each client sends its next one as soon as it has an answer)
and prints the median and p95 latency and the requests per second. Every answer must be a 200
with the same matches as the first one, or the run fails.

    python benchmarks/bench_serve.py --db /tmp/full.sqlite3 \
        [--log ../shared/corpus/logs/paste.log] [--clients 1,8,32] [--requests 400] [--workers 1,2]

Without --db, the shared corpus is imported once into benchmarks/out/serve-bench.sqlite3.
With --postgres, the same records are also imported into a throw-away PostgreSQL cluster
(tests/pg_server.py: Debian's `postgresql`, on loopback, removed at the end) and every level is
run against both databases in the same run, SQLite first.
The clients (httpx, asyncio) run in this process on the same machine: on 2 cores they take
CPU from the server (the "client CPU ms" column, per request), so the figures are a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests.pg_server, for --postgres
SHARED = HERE.parent.parent / "shared" / "corpus"
TEXT = {"Content-Type": "text/plain"}


def ensure_db(out: Path) -> str:
    db = out / "serve-bench.sqlite3"
    if not db.exists():
        out.mkdir(parents=True, exist_ok=True)
        source = SHARED / "records.jsonl.gz"
        print(f"importing {source} into {db} ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "kb", "--db", str(db), "import", "--quiet", str(source)],
            check=True,
        )
    return str(db)


def import_into(url: str, source: Path) -> None:
    print(f"importing {source} into {url.split('@')[-1]} ...", file=sys.stderr)
    subprocess.run(
        [sys.executable, "-m", "kb", "--db", url, "import", "--quiet", str(source)], check=True
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(db: str, workers: int, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "kb", "--db", db, "serve", "--port", str(port)]
    with open(log, "wb") as out:  # a file, not a pipe: nobody reads the access log as it runs
        process = subprocess.Popen(
            [*command, "--workers", str(workers)], stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600  # the first start may build the matcher index
    with httpx.Client(base_url=url) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise SystemExit(f"kb serve exited:\n{log.read_text()}")
            try:
                if client.get("/healthz", timeout=2).status_code == 200:
                    return process, url
            except httpx.TransportError:
                pass
            time.sleep(0.2)
    process.terminate()
    raise SystemExit("kb serve did not start")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


def signature(answer: dict[str, Any]) -> list[tuple[str, int]]:
    return sorted((m["id"], m["line"]) for m in answer["matches"])


async def run_level(
    url: str, body: bytes, clients: int, total: int, expected: Any
) -> dict[str, Any]:
    """`total` requests from `clients` concurrent clients; latencies in ms."""
    latencies: list[float] = []
    errors: list[str] = []
    remaining = total
    headers = TEXT

    async def client_loop(client: httpx.AsyncClient) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            try:
                response = await client.post("/api/match", content=body, headers=headers)
            except httpx.TransportError as exc:  # counted, not fatal: the run says how many
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                errors.append(f"{response.status_code} {response.text[:200]}")
            elif signature(response.json()) != expected:
                errors.append("a different answer")

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        started = time.perf_counter()
        cpu_before = time.process_time()
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
        elapsed = time.perf_counter() - started
        client_cpu = time.process_time() - cpu_before
    ordered = sorted(latencies)
    return {
        "clients": clients,
        "requests": len(latencies),
        "median_ms": statistics.median(ordered),
        "p95_ms": ordered[max(0, round(0.95 * len(ordered)) - 1)],
        "rps": len(latencies) / elapsed,
        "client_cpu_ms": client_cpu * 1000 / max(1, len(latencies)),
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="SQLite path or SQLAlchemy URL (default: build one)")
    parser.add_argument("--log", type=Path, default=SHARED / "logs" / "paste.log")
    parser.add_argument(
        "--records",
        type=Path,
        default=SHARED / "records.jsonl.gz",
        help="what --postgres imports (the records --db holds)",
    )
    parser.add_argument("--clients", default="1,8,32", help="concurrency levels, comma-separated")
    parser.add_argument("--requests", type=int, default=400, help="requests per level")
    parser.add_argument("--workers", default="1", help="server worker counts, comma-separated")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="also run against a throw-away PostgreSQL holding the same records",
    )
    args = parser.parse_args()

    db = args.db or ensure_db(HERE / "out")
    server = None
    databases = [db]
    if args.postgres:
        from tests import pg_server

        server = pg_server.start()
        pg_url = server.create_database("serve_bench")
        import_into(pg_url, args.records)
        databases.append(pg_url)
    try:
        for database in databases:
            run_database(database, args)
    finally:
        if server is not None:
            server.stop()


def run_database(db: str, args: argparse.Namespace) -> None:
    body = args.log.read_bytes()
    levels = [int(n) for n in args.clients.split(",")]
    print(
        f"kb serve load test: POST /api/match of {args.log.name} ({len(body):,} bytes), "
        f"{args.requests} requests a level; {platform.machine()}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d')}"
    )
    shown = db.split("@")[-1]  # no password on the screen
    print(
        f"\ndatabase: {shown}; load average before: {os.getloadavg()[0]:.1f} (other work slows it)"
    )
    for workers in (int(n) for n in args.workers.split(",")):
        log = HERE / "out" / f"bench-serve-{workers}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        process, url = start(db, workers, log)
        try:
            with httpx.Client(base_url=url, timeout=120) as client:
                stats = client.get("/api/stats").json()
                first = client.post("/api/match", content=body, headers=TEXT)
                first.raise_for_status()
                expected = signature(first.json())
                for _ in range(args.warmup):
                    client.post("/api/match", content=body, headers=TEXT)
            print(
                f"\n{workers} worker(s), {stats['records']:,} records, "
                f"{len(expected)} errors found in the log\n"
            )
            print("| clients | requests | median ms | p95 ms | req/s | client CPU ms | errors |")
            print("|---:|---:|---:|---:|---:|---:|---:|")
            failed = False
            for clients in levels:
                result = asyncio.run(run_level(url, body, clients, args.requests, expected))
                print(
                    f"| {clients} | {result['requests']} | {result['median_ms']:.1f} | "
                    f"{result['p95_ms']:.1f} | {result['rps']:.1f} | "
                    f"{result['client_cpu_ms']:.1f} | {len(result['errors'])} |",
                    flush=True,
                )
                if result["errors"]:
                    failed = True
                    print("  first error:", result["errors"][0], file=sys.stderr)
        finally:
            stop(process)
        if failed:
            raise SystemExit(f"failed; the server's log is {log}")


if __name__ == "__main__":
    main()
