"""The cache table of scripts/bench (#52 item 7): gatewayd's route cache
against nginx's proxy_cache, side by side in one run.

- hits: a stored 2 KB answer served from memory (nginx's cache files on
  tmpfs), one worker or event loop each: req/s and CPU per request;
- coalescing: 200 clients at once on one cold key of a 300 ms upstream
  (gatewayd `coalesce`, nginx `proxy_cache_lock on`): upstream calls made and
  the slowest client's wait;
- stale: the upstream killed behind a stale entry (gatewayd `stale_if_error`,
  nginx `proxy_cache_use_stale error`): the share of calls given the stale
  answer and the slowest call.
"""
import os, re, statistics, subprocess, sys, time, urllib.request

SLOW_UPSTREAM = r'''
import sys, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
calls = 0
lock = threading.Lock()
body = b"x" * 2048
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        global calls
        if self.path == "/count":
            with lock: n = calls
            out = str(n).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out); return
        with lock: calls += 1
        if self.path.startswith("/slow"): time.sleep(0.3)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=1" if self.path.startswith("/stale") else "max-age=3600")
        self.end_headers(); self.wfile.write(body)
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def run(b):
    """`b`: the bench's namespace (its helpers, ports and settings)."""
    slow_port, doomed_port, nginx_port, gw_port = b.free_port(), b.free_port(), b.free_port(), b.free_port()
    script = b.write("slow_upstream.py", SLOW_UPSTREAM)
    slow = b.start("slow-upstream", [sys.executable, script, str(slow_port)])
    doomed = b.start("doomed-upstream", [sys.executable, script, str(doomed_port)])
    cache_dir = f"/dev/shm/gatewayd-bench-nginx-cache-{os.getpid()}"
    nginx_conf = b.write("nginx-cache.conf", b.nginx_common % (1, "nginx-cache", "nginx-cache", "off") + f"""
proxy_cache_path {cache_dir} levels=1:2 keys_zone=c:16m max_size=256m inactive=1h use_temp_path=off;
server {{ listen 127.0.0.1:{nginx_port};
  proxy_cache c; proxy_cache_lock on; proxy_cache_lock_timeout 5s; proxy_cache_use_stale error timeout http_502 http_503 http_504;
  proxy_http_version 1.1; proxy_set_header Connection ""; proxy_connect_timeout 1s;
  location /c2k {{ proxy_pass http://127.0.0.1:{b.upstream_port}; }}
  location /slow {{ proxy_pass http://127.0.0.1:{slow_port}; }}
  location /stale {{ proxy_pass http://127.0.0.1:{doomed_port}; }} }}
}}""")
    gw_conf = b.write("gatewayd-cache.yaml", f"""listeners: [{{address: 127.0.0.1:{gw_port}}}]
logging: {{access_log: false}}
cache: {{max_bytes: 256MiB}}
upstreams:
  up: {{url: "http://127.0.0.1:{b.upstream_port}"}}
  slow: {{url: "http://127.0.0.1:{slow_port}", max_connections: 256}}
  doomed: {{url: "http://127.0.0.1:{doomed_port}", connect_timeout: 1s}}
routes:
  - {{name: hits, match: {{prefix: /c2k}}, upstream: up, cache: {{ttl: 1h}}}}
  - {{name: slow, match: {{prefix: /slow}}, upstream: slow, cache: {{}}}}
  - {{name: stale, match: {{prefix: /stale}}, upstream: doomed, cache: {{stale_if_error: 10m}}}}
""")
    servers = {"gatewayd": b.start("gatewayd-cache", [b.GATEWAYD, "run", "-c", gw_conf, "--event-loops", b.LOOPS]),
               "nginx": b.start("nginx-cache", ["nginx", "-p", b.work, "-c", nginx_conf])}
    ports = {"gatewayd": gw_port, "nginx": nginx_port}
    for port in [slow_port, doomed_port, gw_port, nginx_port]:
        b.wait_port(port)
    try:
        # Hits: each stored once, then served from memory.
        for port in ports.values():
            urllib.request.urlopen(f"http://127.0.0.1:{port}/c2k").read()
        results = {name: [] for name in ports}
        for _ in range(b.ROUNDS):
            for name, port in ports.items():
                before = b.cpu_ticks(servers[name])
                rps, total, p50, p99, failed = b.run_h1(port, "/c2k")
                results[name].append((rps, p50, p99, (b.cpu_ticks(servers[name]) - before) / b.HZ * 1e6 / max(total, 1), failed))
        med = {name: [statistics.median(r[i] for r in rows) for i in range(5)] for name, rows in results.items()}
        print(f"\nCache hits, a stored 2 KB answer (wrk -t1 -c64; nginx proxy_cache on tmpfs): medians of {b.ROUNDS} interleaved rounds of {b.SECONDS}s")
        print("| cache | req/s | p50 ms | p99 ms | CPU µs/req | ÷ nginx req/s | CPU ÷ nginx | failed |")
        print("|---|---|---|---|---|---|---|---|")
        for name, (rps, p50, p99, cpu, failed) in med.items():
            print(f"| {name} | {rps:,.0f} | {p50:.2f} | {p99:.2f} | {cpu:.1f} | {rps / med['nginx'][0]:.2f} | {cpu / med['nginx'][3]:.2f} | {failed:.0f} |")

        # Coalescing: 200 clients at once on a cold key, each round a new key.
        count = lambda: int(urllib.request.urlopen(f"http://127.0.0.1:{slow_port}/count").read())
        print("\nCoalescing: 200 clients at once on one cold key of a 300 ms upstream (h2load --h1 -c200 -n200)")
        print("| cache | upstream calls | slowest client ms | median client ms | failed |")
        print("|---|---|---|---|---|")
        for round_ in range(b.ROUNDS):
            for name, port in ports.items():
                log = os.path.join(b.work, f"coalesce-{name}-{round_}.log")
                before = count()
                out = subprocess.run(["h2load", "--h1", "-c200", "-n200", f"--log-file={log}", f"http://127.0.0.1:{port}/slow/{name}-{round_}"],
                                     capture_output=True, text=True).stdout
                done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
                durations = sorted(int(line.split()[2]) / 1000 for line in open(log) if line.strip())
                print(f"| {name} | {count() - before} | {durations[-1]:.0f} | {statistics.median(durations):.0f} | "
                      f"{int(done.group(1)) - int(done.group(2)) + 200 - int(done.group(1))} |")

        # Stale: stored, made stale (max-age=1), then the upstream killed.
        for port in ports.values():
            urllib.request.urlopen(f"http://127.0.0.1:{port}/stale").read()
        time.sleep(2.5)
        doomed.kill()
        doomed.wait()
        print("\nStale answers with the upstream killed (h2load --h1 -c10 -n2000 on a stale entry)")
        print("| cache | answered 200 | slowest call ms | p99 ms |")
        print("|---|---|---|---|")
        for name, port in ports.items():
            log = os.path.join(b.work, f"stale-{name}.log")
            out = subprocess.run(["h2load", "--h1", "-c10", "-n2000", f"--log-file={log}", f"http://127.0.0.1:{port}/stale"],
                                 capture_output=True, text=True).stdout
            statuses = [int(line.split()[1]) for line in open(log) if line.strip()]
            durations = sorted(int(line.split()[2]) / 1000 for line in open(log) if line.strip())
            ok = sum(1 for s in statuses if s == 200)
            print(f"| {name} | {ok / max(len(statuses), 1) * 100:.1f}% of {len(statuses)} | {durations[-1]:.1f} | "
                  f"{durations[int(0.99 * len(durations))]:.2f} |")
    finally:
        for p in [slow, doomed, *servers.values()]:
            if p.poll() is None:
                p.kill()
        subprocess.run(["rm", "-rf", cache_dir])
