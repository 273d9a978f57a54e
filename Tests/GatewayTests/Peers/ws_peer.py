"""A WebSocket peer for the tunnel tests, on the `websockets` library
(Debian's python3-websockets or PyPI's; the asyncio API both share).

  ws_peer.py server              echo every message; prints the port, then serves until killed
  ws_peer.py client URL [MIB]    text and binary echoes, MIB MiB each way, the close handshake
  ws_peer.py hold URL SECONDS    one echo (then prints "open"), one more every 0.2 s until the connection
                                 ends; prints the echoes and the seconds from "open" to the end
"""
import asyncio, os, sys, time
import websockets

# Every wait for the gateway has a deadline: a reply that does not come fails the peer instead of hanging it.
REPLY_SECONDS = 30


async def reply(ws):
    return await asyncio.wait_for(ws.recv(), REPLY_SECONDS)


async def echo(ws, *_):
    async for message in ws:
        await ws.send(message)


async def server():
    async with websockets.serve(echo, "127.0.0.1", 0, max_size=None) as srv:
        print(srv.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()


async def client(url, mib):
    async with websockets.connect(url, max_size=None) as ws:
        await ws.send("hello")
        assert await reply(ws) == "hello", "text echo"
        payload = os.urandom(1024)
        await ws.send(payload)
        assert await reply(ws) == payload, "binary echo"
        chunk = os.urandom(1 << 20)
        for _ in range(mib):
            await ws.send(chunk)
            assert await reply(ws) == chunk, "1 MiB echo"
        await ws.close(code=1000, reason="done")
        print(f"ok close={ws.close_code}", flush=True)


async def hold(url, seconds):
    start = opened = time.monotonic()
    echoed = 0
    try:
        async with websockets.connect(url) as ws:
            while time.monotonic() - start < seconds:
                await ws.send("ping")
                assert await reply(ws) == "ping"
                echoed += 1
                if echoed == 1:
                    opened = time.monotonic()
                    print("open", flush=True)
                # The next ping in 0.2 s, or at once when the gateway closes the connection.
                try:
                    await asyncio.wait_for(ws.wait_closed(), timeout=0.2)
                except asyncio.TimeoutError:
                    pass
    except websockets.ConnectionClosed:
        pass
    print(f"echoed={echoed} after={time.monotonic() - opened:.1f}", flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "server":
        asyncio.run(server())
    elif mode == "client":
        asyncio.run(client(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0))
    else:
        asyncio.run(hold(sys.argv[2], float(sys.argv[3])))
