"""WebSocket peers for bench/websocket.sh (PyPI `websockets`).

    python3 websocket_peer.py serve PORT                 # echo server until killed
    python3 websocket_peer.py load URL CONNS SECONDS SIZE  # ping-pong on CONNS connections; prints "messages seconds"
    python3 websocket_peer.py idle URL COUNT             # opens COUNT connections, prints "open", holds them until stdin closes
"""

import asyncio
import sys
import time

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed


async def echo(ws):
    try:
        async for message in ws:
            await ws.send(message)
    except ConnectionClosed:
        pass  # the load client closes with messages still in flight


def plain_get(connection, request):
    # A request that is no handshake (a readiness check) gets 200.
    if "Upgrade" not in request.headers:
        return connection.respond(200, "ok\n")
    return None


async def run_server(port: int):
    async with serve(echo, "127.0.0.1", port, max_size=None, ping_interval=None, compression=None,
                     process_request=plain_get):
        await asyncio.Future()


async def run_load(url: str, conns: int, seconds: float, size: int):
    payload = b"x" * size
    deadline = time.monotonic() + seconds
    counts = [0] * conns

    async def one(i: int):
        async with connect(url, max_size=None, ping_interval=None, compression=None) as ws:
            # A window of 8 messages in flight per connection.
            for _ in range(8):
                await ws.send(payload)
            while time.monotonic() < deadline:
                await ws.recv()
                counts[i] += 1
                await ws.send(payload)

    started = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(conns)))
    print(sum(counts), round(time.monotonic() - started, 3))


async def run_idle(url: str, count: int):
    sockets = []
    for start in range(0, count, 100):
        sockets += await asyncio.gather(*(connect(url, ping_interval=None) for _ in range(start, min(count, start + 100))))
    print("open", flush=True)
    await asyncio.to_thread(sys.stdin.read)
    await asyncio.gather(*(ws.close() for ws in sockets))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "serve":
        asyncio.run(run_server(int(sys.argv[2])))
    elif mode == "load":
        asyncio.run(run_load(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])))
    elif mode == "idle":
        asyncio.run(run_idle(sys.argv[2], int(sys.argv[3])))
