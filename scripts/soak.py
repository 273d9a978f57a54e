"""The soak behind scripts/soak: gatewayd under mixed traffic for SOAK_SECONDS
(default 600), against an upstream that resets or stalls 1 call in 10, with a
reload every 5 s and WebSocket tunnels opened and abandoned. Every answer is
checked (the upstream echoes the request's id and path; a 502 or 504 is the
right answer to a reset or a stall, anything else is wrong). The gateway's
resident memory is sampled every 10 s; the soak fails when any answer was
wrong or RSS grew more than 1 MiB over the last half of the run.

  /usr/bin/python3 scripts/soak.py GATEWAYD_BIN   (Debian's python3, with python3-websockets)
"""
import asyncio, http.client, os, random, signal, socket, subprocess, sys, tempfile, threading, time

import websockets

SECONDS = int(os.environ.get("SOAK_SECONDS", "600"))
CHECKERS = 4


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def upstream_server(port, stop):
    """HTTP/1.1 keep-alive echo: `id path` back; 5% reset, 5% stall (never answered)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(256)

    def serve(conn):
        conn.settimeout(60)
        buf = b""
        try:
            while not stop.is_set():
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.split(b"\r\n")
                path = lines[0].split(b" ")[1]
                rid = b"-"
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"x-request-id":
                        rid = value.strip()
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                fate = random.random()
                if fate < 0.05:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    return
                if fate < 0.10:
                    time.sleep(3)
                    return
                body = rid + b" " + path
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        except OSError:
            return
        finally:
            conn.close()

    while not stop.is_set():
        listener.settimeout(0.5)
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def config(port, upstream, ws_port, generation):
    return f"""
listeners: [{{address: 127.0.0.1:{port}, protocols: [http1, h2c]}}]
logging: {{access_log: false}}
limits: {{idle_timeout: 30s}}
upstreams:
  app: {{url: "http://127.0.0.1:{upstream}", connect_timeout: 1s}}
  ws: {{url: "http://127.0.0.1:{ws_port}"}}
routes:
  - {{name: live, match: {{prefix: /live}}, upstream: ws, upgrade: [websocket]}}
  - {{name: app, upstream: app, timeout: 2s, response_headers: {{set: {{X-Generation: "{generation}"}}}}}}
"""


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.checked = self.wrong = self.failed_right = 0
        self.examples = []

    def add(self, ok, failed_right=False, example=None):
        with self.lock:
            self.checked += 1
            if failed_right:
                self.failed_right += 1
            if not ok:
                self.wrong += 1
                if example and len(self.examples) < 5:
                    self.examples.append(example)


def checker(port, deadline, tally):
    conn = None
    n = 0
    while time.monotonic() < deadline:
        n += 1
        rid = f"soak-{threading.get_ident()}-{n}"
        path = f"/item/{n}"
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", path, headers={"X-Request-Id": rid})
            answer = conn.getresponse()
            body = answer.read()
            if answer.status == 200:
                tally.add(body == f"{rid} {path}".encode(), example=(rid, path, body[:80]))
            elif answer.status in (502, 504):
                tally.add(True, failed_right=True)
            else:
                tally.add(False, example=(rid, answer.status, body[:80]))
            if answer.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            # A connection the gateway closed (a reload's drain, its keep-alive rules): a new one, nothing wrong.
            if conn:
                conn.close()
            conn = None


def h2_bursts(port, deadline):
    while time.monotonic() < deadline:
        subprocess.run(["h2load", "-n", "2000", "-c", "4", "-m", "10", f"http://127.0.0.1:{port}/h2"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2)


async def tunnels(port, deadline):
    while time.monotonic() < deadline:
        try:
            ws = await asyncio.wait_for(websockets.connect(f"ws://127.0.0.1:{port}/live"), 5)
            await ws.send("x")
            await asyncio.wait_for(ws.recv(), 5)
            if random.random() < 0.5:
                await ws.close()
            else:
                ws.transport.abort()  # abandoned without a close handshake
        except Exception:
            pass
        await asyncio.sleep(0.05)


async def ws_echo_server(ready):
    async def echo(ws, *_):
        try:
            async for message in ws:
                await ws.send(message)
        except websockets.ConnectionClosed:
            pass  # the tunnels abandon half their connections
    async with websockets.serve(echo, "127.0.0.1", 0) as server:
        ready.append(server.sockets[0].getsockname()[1])
        await asyncio.Future()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    binary = sys.argv[1]
    stop = threading.Event()
    upstream = free_port()
    threading.Thread(target=upstream_server, args=(upstream, stop), daemon=True).start()
    ready = []
    ws_loop = asyncio.new_event_loop()
    threading.Thread(target=lambda: ws_loop.run_until_complete(ws_echo_server(ready)), daemon=True).start()
    while not ready:
        time.sleep(0.05)
    port = free_port()
    work = tempfile.mkdtemp()
    path = os.path.join(work, "soak.yaml")
    with open(path, "w") as f:
        f.write(config(port, upstream, ready[0], 0))
    gateway = subprocess.Popen([binary, "run", "-c", path, "--event-loops", "2"], stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        start = time.monotonic()
        deadline = start + SECONDS
        tally = Tally()
        workers = [threading.Thread(target=checker, args=(port, deadline, tally)) for _ in range(CHECKERS)]
        workers.append(threading.Thread(target=h2_bursts, args=(port, deadline)))
        tunnel_loop = asyncio.new_event_loop()
        workers.append(threading.Thread(target=lambda: tunnel_loop.run_until_complete(tunnels(port, deadline))))
        for worker in workers:
            worker.start()
        samples, reloads, generation = [], 0, 0
        while time.monotonic() < deadline:
            time.sleep(5)
            generation += 1
            with open(path, "w") as f:
                f.write(config(port, upstream, ready[0], generation))
            gateway.send_signal(signal.SIGHUP)
            reloads += 1
            if generation % 2 == 0:
                samples.append((time.monotonic() - start, rss_kib(gateway.pid)))
                print(f"{samples[-1][0]:6.0f} s  RSS {samples[-1][1] / 1024:7.1f} MiB  checked {tally.checked}  wrong {tally.wrong}", flush=True)
        for worker in workers:
            worker.join()
        half = [kib for at, kib in samples if at >= SECONDS / 2]
        growth = (half[-1] - half[0]) / 1024 if len(half) >= 2 else 0
        alive = gateway.poll() is None
        print(f"soak: {SECONDS} s, {tally.checked} answers checked ({tally.failed_right} 502/504 for a reset or a stall), "
              f"{tally.wrong} wrong, {reloads} reloads, RSS {samples[0][1] / 1024:.1f} -> {samples[-1][1] / 1024:.1f} MiB, "
              f"last half {growth:+.2f} MiB, gatewayd {'alive' if alive else 'DEAD'}")
        for example in tally.examples:
            print("  wrong:", example)
        ok = tally.wrong == 0 and growth <= 1.0 and alive
        sys.exit(0 if ok else 1)
    finally:
        stop.set()
        gateway.terminate()
        try:
            gateway.wait(40)
        except subprocess.TimeoutExpired:
            gateway.kill()


if __name__ == "__main__":
    main()
