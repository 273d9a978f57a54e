"""Driver for scripts/bench: starts the upstream and every proxy, runs wrk
(HTTP/1.1 keep-alive) and h2load (h2c prior knowledge) against each in
interleaved rounds, and prints medians with ratios taken within the run."""
import os, random, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time, urllib.request

GATEWAYD = sys.argv[1]
SECONDS = int(os.environ.get("BENCH_SECONDS", "5"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
LOOPS = os.environ.get("BENCH_GATEWAYD_LOOPS", "1")
# Which tables run, e.g. BENCH_TABLES=logs (a ratio measured on its own, with more rounds).
TABLES = os.environ.get("BENCH_TABLES", "h1,h2c,logs,h2c-logs,loops,routes,spans,cache,rate,memory").split(",")
# The fixed-rate table: offered loads (requests per second) and each run's seconds.
RATES = [int(r) for r in os.environ.get("BENCH_RATES", "2000,8000").split(",")]
RATE_SECONDS = int(os.environ.get("BENCH_RATE_SECONDS", "8"))
# A bare SwiftNIO byte forwarder (Benchmarks/NIOForwarder), the floor under gatewayd: scripts/bench with BENCH_NIO_FLOOR=1.
NIO_FORWARDER = os.environ.get("NIO_FORWARDER")
# Its h2c counterpart (Benchmarks/H2Forwarder): SwiftNIO and libnghttp2, h2c in, HTTP/1.1 out.
H2_FORWARDER = os.environ.get("H2_FORWARDER")
HZ = os.sysconf("SC_CLK_TCK")
work = tempfile.mkdtemp(prefix="gatewayd-bench-")
procs = []


# Listening ports come from below the kernel's ephemeral range: a table's
# servers start minutes after the ports are picked, and the thousands of
# client connections of the tables before it would otherwise take some.
with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
    EPHEMERAL_LOW = int(f.read().split()[0])
next_port = random.randrange(max(1024, EPHEMERAL_LOW - 12000), max(2048, EPHEMERAL_LOW - 2000))


def free_port():
    global next_port
    while True:
        next_port += 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", next_port))
            except OSError:
                continue
            return next_port


def start(name, argv):
    log = open(os.path.join(work, name + ".log"), "w")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    procs.append(p)
    return p


def until(condition, timeout, what):
    """Polls `condition` until it holds; a wait with a deadline."""
    end = time.time() + timeout
    while not condition():
        if time.time() > end:
            raise SystemExit(f"{what} not within {timeout}s; logs in {work}")
        time.sleep(0.05)


def settled(read, timeout=10):
    """Waits until `read()` gives the same value twice 0.2 s apart; returns it."""
    last = [read()]

    def same():
        time.sleep(0.2)
        now = read()
        same_value, last[0] = now == last[0], now
        return same_value
    until(same, timeout, "a steady reading")
    return last[0]


def wait_port(port, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listening on 127.0.0.1:{port}; logs in {work}")


def stop_all():
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def session_pids(p):
    """The process and its children (nginx and nghttpx fork workers)."""
    out = subprocess.run(["ps", "-o", "pid=", "-g", str(p.pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()] or [p.pid]


def cpu_ticks(p):
    total = 0
    for pid in session_pids(p):
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except FileNotFoundError:
            pass
    return total


def rss_mib(p):
    total = 0
    for pid in session_pids(p):
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total / 1024


def write(name, text):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


upstream_port, upstream_port2, upstream_h2_port = free_port(), free_port(), free_port()
# The fleet store for the fleet rate-limit row: a redis-server on loopback.
redis_port = free_port()
# The OTLP collector for the span-export row: nginx answering 200 (its cost is not gatewayd's).
collector_port = free_port()
ports = {name: free_port() for name in ["nginx", "haproxy", "nghttpx", "gatewayd"]}
# What operators run: access logs on (gatewayd's default config, nginx buffered,
# HAProxy httplog), and two workers on this machine's two cores.
extra_ports = {name: free_port() for name in ["gatewayd log on", "gatewayd metrics on", "gatewayd spans on", "nginx log on", "haproxy log on",
                                              "gatewayd 2 loops", "nginx 2 workers", "haproxy 2 threads"]}
if NIO_FORWARDER:
    extra_ports["NIO forwarder"] = free_port()
    extra_ports["NIO forwarder 2 loops"] = free_port()
if H2_FORWARDER:
    extra_ports["NIO+nghttp2 forwarder"] = free_port()

nginx_common = f"""worker_processes %s; daemon off; pid {work}/%s.pid; error_log {work}/%s.err warn;
events {{ worker_connections 4096; }}
http {{ access_log %s; keepalive_requests 1000000; client_body_temp_path {work}; proxy_temp_path {work};
fastcgi_temp_path {work}; uwsgi_temp_path {work}; scgi_temp_path {work};
"""
# A legacy SOAP service's 2 KB GetUser answer (spyne's shape), for the answer-side rows.
SOAP_ANSWER = ('<?xml version="1.0" encoding="UTF-8"?>'
               "<soap11env:Envelope xmlns:soap11env=\"http://schemas.xmlsoap.org/soap/envelope/\" "
               "xmlns:tns=\"urn:users\"><soap11env:Body><tns:GetUserResponse><tns:GetUserResult><tns:id>7</tns:id><tns:name>Ann</tns:name>"
               "<tns:email>ann@example.com</tns:email><tns:active>true</tns:active><tns:tags>"
               + "".join(f"<tns:string>tag-{i}</tns:string>" for i in range(12))
               + "</tns:tags><tns:created>2024-05-01T12:30:00+00:00</tns:created><tns:bio>" + "legacy " * 180
               + "</tns:bio></tns:GetUserResult></tns:GetUserResponse></soap11env:Body></soap11env:Envelope>")
upstream_conf = write("upstream.conf", nginx_common % (1, "upstream", "upstream", "off") + f"""
server {{ listen 127.0.0.1:{upstream_port}; listen 127.0.0.1:{upstream_port2}; client_max_body_size 0; location / {{ return 200 "hello world\\n"; }}
  location /always503 {{ return 503 "busy\\n"; }}
  location /c2k {{ add_header Cache-Control "max-age=3600"; return 200 '{"x" * 2048}'; }}
  location /soap {{ default_type "text/xml; charset=utf-8"; return 200 '{SOAP_ANSWER}'; }} }}
server {{ listen 127.0.0.1:{upstream_h2_port} http2; location / {{ return 200 "hello world\\n"; }} }}
server {{ listen 127.0.0.1:{collector_port}; client_max_body_size 0; location / {{ return 200 ""; }} }}
}}""")


def nginx_conf(name, port, workers=1, log="off"):
    return write(name + ".conf", nginx_common % (workers, name, name, log) + f"""
upstream up {{ server 127.0.0.1:{upstream_port}; keepalive 64; }}
server {{ listen 127.0.0.1:{port};
  location / {{ proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection "";
               proxy_set_header X-Injected 1; }} }}
}}""")


def haproxy_conf(name, port, threads=1, log=False):
    return write(name + ".cfg", f"""global
  nbthread {threads}
  maxconn 4096
{"  log stdout format raw local0" if log else ""}
defaults
  mode http
{"  log global" + chr(10) + "  option httplog" if log else ""}
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend fe
  bind 127.0.0.1:{port}
  http-request set-header X-Injected 1
  default_backend be
backend be
  server up 127.0.0.1:{upstream_port}
""")


# The example C filter (config/examples/filters/sign.c): one request header set per call.
SIGN_WASM = os.path.abspath("config/examples/filters/sign.wasm")


def gateway_conf(name, port, access_log="false", admin=False, spans=False):
    # Metrics are kept only when an admin endpoint can serve them.
    return write(name + ".yaml", f"""listeners: [{{address: 127.0.0.1:{port}, protocols: [http1, h2c]}}]
logging: {{access_log: {access_log}}}
{f"admin: {{address: 127.0.0.1:{admin}}}" if admin else ""}
{f"tracing: {{start: true, export: {{otlp: {{endpoint: 'http://127.0.0.1:{collector_port}'}}}}}}" if spans else ""}
upstreams: {{up: {{url: "http://127.0.0.1:{upstream_port}", max_connections: 128}},
  two: {{endpoints: ["http://127.0.0.1:{upstream_port}", "http://127.0.0.1:{upstream_port2}"], max_connections: 128}}}}
filters: {{sign: {{wasm: "{SIGN_WASM}", configuration: bench-key}}, signc: {{wasm: "{SIGN_WASM}", configuration: bench-key, engine: compiled}}}}
store: {{redis: {{url: "redis://127.0.0.1:{redis_port}/0"}}}}
routes:
  - {{name: limited, match: {{path: /limited}}, upstream: up, headers: {{set: {{X-Injected: "1"}}}},
     rate_limit: {{requests: 1000000, per: 1s}}}}
  - {{name: fleet, match: {{path: /fleet}}, upstream: up, headers: {{set: {{X-Injected: "1"}}}},
     rate_limit: {{requests: 1000000, per: 1s, scope: fleet, lease: 100}}}}
  - {{name: rewrite, match: {{path: /rewrite}}, upstream: up, rewrite: {{method: GET, encoding: query}}}}
  - {{name: filtered, match: {{path: /filtered}}, upstream: up, headers: {{set: {{X-Injected: "1"}}}}, filters: [sign]}}
  - {{name: compiled, match: {{path: /compiled}}, upstream: up, headers: {{set: {{X-Injected: "1"}}}}, filters: [signc]}}
  - {{name: retry, match: {{path: /always503}}, upstream: up,
     retry: {{attempts: 2, on: [503], backoff: {{strategy: immediate}}}}}}
  - {{name: two, match: {{path: /two}}, upstream: two, headers: {{set: {{X-Injected: "1"}}}}}}
  - {{name: soap-pass, match: {{path: /soap}}, upstream: up}}
  - {{name: soap-json, match: {{path: /soap-json}}, upstream: up, rewrite: {{path: /soap}},
     response: {{xml: {{arrays: [/Envelope/Body/GetUserResponse/GetUserResult/tags/string]}}, pick: /Envelope/Body/GetUserResponse/GetUserResult,
                fields: {{id: {{from: /id, type: int}}, name: {{from: /name}}, email: {{from: /email}}, active: {{from: /active, type: bool}},
                         tags: {{from: /tags/string, array: true}}, since: {{from: /created, type: timestamp_ms}}}}}}}}
  - {{name: pass, upstream: up, headers: {{set: {{X-Injected: "1"}}}}}}
""")
# 10-key JSON body, POSTed by wrk to the rewrite route (-> GET with a query string)
rewrite_lua = write("rewrite.lua", """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"q":"swift nio","page":2,"exact":true,"tags":["a","b","c"],"sort":"stars","order":"desc",'
  .. '"since":"2024-05-01T00:00:00Z","lang":"sv","filter":"k=v&w","note":"fünf Wörter"}'
""")

spans_admin = free_port()
try:
    upstream = start("upstream", ["nginx", "-c", upstream_conf, "-p", work])
    redis = start("redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
    servers = {
        "nginx": start("nginx", ["nginx", "-c", nginx_conf("nginx", ports["nginx"]), "-p", work]),
        "haproxy": start("haproxy", ["haproxy", "-db", "-f", haproxy_conf("haproxy", ports["haproxy"])]),
        "nghttpx": start("nghttpx", ["nghttpx", "--workers=1", f"--frontend=127.0.0.1,{ports['nghttpx']};no-tls",
                                     f"--backend=127.0.0.1,{upstream_port};;proto=http/1.1", "--add-request-header=X-Injected: 1",
                                     "--no-via", "--no-location-rewrite", "--errorlog-file=/dev/null", "--accesslog-file=/dev/null",
                                     "--backend-keep-alive-timeout=30s", "--conf=/dev/null"]),
        "gatewayd": start("gatewayd", [GATEWAYD, "run", "-c", gateway_conf("gatewayd", ports["gatewayd"]), "--event-loops", LOOPS]),
        # The default config: access log on (to stderr: a file here, journald in production), metrics on.
        "gatewayd log on": start("gatewayd-log", [GATEWAYD, "run", "-c", gateway_conf("gatewayd-log", extra_ports["gatewayd log on"], "true",
                                                                                     admin=free_port()), "--event-loops", LOOPS]),
        "gatewayd metrics on": start("gatewayd-metrics", [GATEWAYD, "run", "-c", gateway_conf(
            "gatewayd-metrics", extra_ports["gatewayd metrics on"], admin=free_port()), "--event-loops", LOOPS]),
        # The same with every call's spans exported (tracing started here, sample_ratio 1).
        "gatewayd spans on": start("gatewayd-spans", [GATEWAYD, "run", "-c", gateway_conf(
            "gatewayd-spans", extra_ports["gatewayd spans on"], admin=spans_admin, spans=True), "--event-loops", LOOPS]),
        "nginx log on": start("nginx-log", ["nginx", "-p", work, "-c", nginx_conf(
            "nginx-log", extra_ports["nginx log on"], log=f"{work}/nginx-access.log combined buffer=64k flush=1s")]),
        "haproxy log on": start("haproxy-log", ["haproxy", "-db", "-f", haproxy_conf("haproxy-log", extra_ports["haproxy log on"], log=True)]),
        "gatewayd 2 loops": start("gatewayd-2", [GATEWAYD, "run", "-c", gateway_conf("gatewayd-2", extra_ports["gatewayd 2 loops"]),
                                                 "--event-loops", "2"]),
        "nginx 2 workers": start("nginx-2", ["nginx", "-p", work, "-c", nginx_conf("nginx-2", extra_ports["nginx 2 workers"], workers="auto")]),
        "haproxy 2 threads": start("haproxy-2", ["haproxy", "-db", "-f", haproxy_conf("haproxy-2", extra_ports["haproxy 2 threads"], threads=2)]),
    }
    if NIO_FORWARDER:
        servers["NIO forwarder"] = start("nio-forwarder", [NIO_FORWARDER, str(extra_ports["NIO forwarder"]), str(upstream_port)])
        servers["NIO forwarder 2 loops"] = start("nio-forwarder-2", [NIO_FORWARDER, str(extra_ports["NIO forwarder 2 loops"]),
                                                                     str(upstream_port), "2"])
    if H2_FORWARDER:
        servers["NIO+nghttp2 forwarder"] = start("h2-forwarder", [H2_FORWARDER, str(extra_ports["NIO+nghttp2 forwarder"]), str(upstream_port)])
    for port in [upstream_port, upstream_h2_port, redis_port, collector_port, *ports.values(), *extra_ports.values()]:
        wait_port(port)
    # Each process's memory once its start-up is over.
    idle_rss = {name: settled(lambda: rss_mib(p)) for name, p in servers.items()}

    def run_h1(port, path="/", script=None):
        out = subprocess.run(["wrk", "-t1", "-c64", f"-d{SECONDS}s", "--latency", *(["-s", script] if script else []),
                              f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True).stdout
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        total = int(re.search(r"(\d+) requests in", out).group(1))
        errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)

        def pct(label):
            m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)", out, re.M)
            return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
        return rps, total, pct("50"), pct("99"), int(errors.group(1)) if errors else 0

    def run_h2(port):
        log = os.path.join(work, "h2load.log")
        out = subprocess.run(["h2load", "-c16", "-m10", "-D", str(SECONDS), f"--log-file={log}", f"http://127.0.0.1:{port}/"],
                             capture_output=True, text=True).stdout
        rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
        done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
        durations = sorted(int(line.split()[2]) for line in open(log) if line.strip())
        p = lambda q: durations[min(len(durations) - 1, int(q * len(durations)))] / 1000
        return rps, int(done.group(1)), p(0.5), p(0.99), int(done.group(1)) - int(done.group(2))

    # The floor's rows: it logs nothing, and in the loops table it runs two loops.
    floor = lambda name: {"NIO forwarder": extra_ports[name]} if NIO_FORWARDER else {}
    h2_floor = {"NIO+nghttp2 forwarder": extra_ports["NIO+nghttp2 forwarder"]} if H2_FORWARDER else {}
    suites = [
        ("h1", "HTTP/1.1 (wrk -t1 -c64)", run_h1, {"direct": upstream_port, **ports, **floor("NIO forwarder")}),
        ("h2c", "h2c (h2load -c16 -m10)", run_h2, {"direct": upstream_h2_port, **{k: v for k, v in ports.items() if k != "nginx"},
                                                     **h2_floor}),
        ("logs", "HTTP/1.1, access logs on (gatewayd's default config: log and metrics on; nginx buffer=64k flush=1s; HAProxy option httplog)", run_h1,
         {"gatewayd": ports["gatewayd"], "gatewayd metrics on": extra_ports["gatewayd metrics on"],
          "gatewayd log on": extra_ports["gatewayd log on"],
          "nginx": extra_ports["nginx log on"], "haproxy": extra_ports["haproxy log on"], **floor("NIO forwarder")}),
        ("h2c-logs", "h2c, access log and metrics on", run_h2, {"gatewayd": ports["gatewayd"], "gatewayd log on": extra_ports["gatewayd log on"],
                                                                    "haproxy": extra_ports["haproxy log on"], **h2_floor}),
        ("loops", "HTTP/1.1, two workers (gatewayd --event-loops 2, nginx worker_processes auto, HAProxy nbthread 2)", run_h1,
         {"gatewayd": extra_ports["gatewayd 2 loops"], "nginx": extra_ports["nginx 2 workers"], "haproxy": extra_ports["haproxy 2 threads"],
          **floor("NIO forwarder 2 loops")}),
    ]
    # A row's process, by port (the suites above name some of them after the peer they stand for).
    by_port = {port: servers[name] for name, port in {**ports, **extra_ports}.items()}
    for title, runner, targets in (suite[1:] for suite in suites if suite[0] in TABLES):
        results = {name: [] for name in targets}
        for _ in range(ROUNDS):
            for name, port in targets.items():
                proc = upstream if name == "direct" else by_port[port]
                before = cpu_ticks(proc)
                rps, total, p50, p99, failed = runner(port)
                cpu_us = (cpu_ticks(proc) - before) / HZ * 1e6 / max(total, 1)
                results[name].append((rps, p50, p99, cpu_us, failed))
        med = {name: [statistics.median(r[i] for r in rows) for i in range(5)] for name, rows in results.items()}
        print(f"\n{title}: medians of {ROUNDS} interleaved rounds of {SECONDS}s; CPU is the proxy's own per request")
        print("| target | req/s | p50 ms | p99 ms | CPU µs/req | RSS MiB idle / after | ÷ direct | ÷ nginx | ÷ HAProxy | failed |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, (rps, p50, p99, cpu, failed) in med.items():
            ratio = lambda ref: f"{rps / med[ref][0]:.2f}" if ref in med else "—"
            server = None if name == "direct" else by_port[targets[name]]
            idle = next((idle_rss[n] for n, p in servers.items() if p is server), 0)
            rss = "—" if server is None else f"{idle:.0f} / {rss_mib(server):.0f}"
            print(f"| {name} | {rps:,.0f} | {p50:.2f} | {p99:.2f} | {cpu:.1f} | {rss} | {ratio('direct')} | {ratio('nginx')} | "
                  f"{ratio('haproxy')} | {failed:.0f} |")
        cpu = lambda row: med[row][3]
        for row, base, what in [("gatewayd metrics on", "gatewayd", "metrics on ÷ off"),
                                ("gatewayd log on", "gatewayd metrics on", "access log on ÷ off (metrics on in both)"),
                                ("gatewayd log on", "gatewayd", "default config (log and metrics on) ÷ both off")]:
            if row in med and base in med:
                # Each round's two rows ran next to each other: their ratio cancels the machine's drift between rounds.
                paired = statistics.median(a[3] / b[3] for a, b in zip(results[row], results[base]))
                print(f"gatewayd, {what}: CPU per request {cpu(row) / cpu(base):.2f} (per-round pairs: {paired:.2f}), "
                      f"req/s {med[row][0] / med[base][0]:.2f}")

    if "rate" in TABLES:
        # The load a sidecar carries: a fixed offered rate, not a closed loop's
        # maximum (which hides the cost of each wake-up). h2load paces 16
        # connections at rate/16 each; percentiles come from its per-request
        # log; CPU is the proxy's share of one core over the run. The default
        # config (access log and metrics on) against nginx and HAProxy logging,
        # gatewayd with its log off, and the upstream alone (what each adds).
        def run_rate(port, rate, h1):
            log = os.path.join(work, "rate.log")
            out = subprocess.run(["h2load", *(["--h1"] if h1 else []), "-c16", f"--rps={max(1, rate // 16)}", "-D", str(RATE_SECONDS),
                                  f"--log-file={log}", f"http://127.0.0.1:{port}/"], capture_output=True, text=True).stdout
            done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
            durations = sorted(int(line.split()[2]) for line in open(log) if line.strip())
            p = lambda q: durations[min(len(durations) - 1, int(q * len(durations)))] / 1000
            return int(done.group(1)) / RATE_SECONDS, p(0.5), p(0.99), int(done.group(1)) - int(done.group(2))

        rows = {"h1": {"direct": (upstream_port, upstream), "gatewayd": (extra_ports["gatewayd log on"], servers["gatewayd log on"]),
                       "gatewayd log off": (extra_ports["gatewayd metrics on"], servers["gatewayd metrics on"]),
                       "nginx": (extra_ports["nginx log on"], servers["nginx log on"]),
                       "haproxy": (extra_ports["haproxy log on"], servers["haproxy log on"])},
                "h2c": {"direct": (upstream_h2_port, upstream), "gatewayd": (extra_ports["gatewayd log on"], servers["gatewayd log on"]),
                        "gatewayd log off": (extra_ports["gatewayd metrics on"], servers["gatewayd metrics on"]),
                        "haproxy": (extra_ports["haproxy log on"], servers["haproxy log on"])}}
        # The floors (BENCH_NIO_FLOOR=1): what SwiftNIO (and libnghttp2) alone cost at the same rate.
        if NIO_FORWARDER:
            rows["h1"]["NIO forwarder"] = (extra_ports["NIO forwarder"], servers["NIO forwarder"])
        if H2_FORWARDER:
            rows["h2c"]["NIO+nghttp2 forwarder"] = (extra_ports["NIO+nghttp2 forwarder"], servers["NIO+nghttp2 forwarder"])
        print(f"\nFixed rate (h2load -c16 --rps=rate/16 -D {RATE_SECONDS}; access logs on, gatewayd's metrics on): medians of {ROUNDS} "
              "interleaved rounds; CPU is the proxy's share of one core; + p99 is over the upstream alone at the same rate")
        print("| protocol | rate/s | target | done/s | p50 ms | p99 ms | + p99 ms | CPU % core | CPU ÷ nginx (h1) or HAProxy (h2c) | + p99 ÷ best peer's | failed |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for proto, targets in rows.items():
            for rate in RATES:
                results = {name: [] for name in targets}
                for _ in range(ROUNDS):
                    for name, (port, proc) in targets.items():
                        before, start_t = cpu_ticks(proc), time.monotonic()
                        done, p50, p99, failed = run_rate(port, rate, proto == "h1")
                        share = (cpu_ticks(proc) - before) / HZ / (time.monotonic() - start_t) * 100
                        results[name].append((done, p50, p99, share, failed))
                med = {name: [statistics.median(r[i] for r in rs) for i in range(5)] for name, rs in results.items()}
                added = {name: med[name][2] - med["direct"][2] for name in med}
                peers = [added[n] for n in ("nginx", "haproxy") if n in added]
                for name, (done, p50, p99, share, failed) in med.items():
                    # CPU against nginx over HTTP/1.1, against HAProxy over h2c (nginx serves no h2c here).
                    peer = "nginx" if "nginx" in med else "haproxy"
                    vs_nginx = f"{share / med[peer][3]:.2f}" if name != "direct" else "—"
                    # Under 0.1 ms the added tails are within h2load's noise: a ratio of them would mean nothing.
                    vs_best = "—" if not peers or name == "direct" else f"{added[name] / min(peers):.2f}" if min(peers) >= 0.1 \
                        else "both < 0.1 ms" if added[name] < 0.1 else f"{added[name]:+.2f} vs < 0.1 ms"
                    print(f"| {proto} | {rate:,} | {name} | {done:,.0f} | {p50:.2f} | {p99:.2f} | "
                          f"{'—' if name == 'direct' else f'{added[name]:+.2f}'} | {share:.1f} | {vs_nginx} | {vs_best} | {failed:.0f} |")

    gw = servers["gatewayd"]
    if "routes" in TABLES:
        # gatewayd's own routes: pass-through, the same to an upstream of two
        # endpoints (round robin), a rewrite (10-key JSON body -> GET query
        # string), and a retrying route whose every try gets 503 (one retry per call).
        # and a Proxy-Wasm filter in C that sets one header (its VM built by the first call: its memory is measured).
        vm_mib = {}
        for path in ["/filtered", "/compiled"]:
            before_vm = rss_mib(gw)
            urllib.request.urlopen(f"http://127.0.0.1:{ports['gatewayd']}{path}").read()
            vm_mib[path] = rss_mib(gw) - before_vm
        runs = {"pass-through": ("/", None), "two endpoints": ("/two", None), "rewrite": ("/rewrite", rewrite_lua),
                "retry (2 tries)": ("/always503", None), "C filter (sets a header)": ("/filtered", None),
                "C filter, compiled": ("/compiled", None),
                "local rate limit": ("/limited", None), "fleet rate limit (Redis)": ("/fleet", None),
                "2 KB SOAP answer, passed through": ("/soap", None), "2 KB SOAP answer -> 6-field JSON": ("/soap-json", None)}
        results = {name: [] for name in runs}
        # Commands gatewayd sent (the scripts' own calls inside Redis are not counted).
        redis_commands = lambda: sum(int(n) for n in re.findall(r"cmdstat_(?:evalsha|eval|script\|load):calls=(\d+)", subprocess.run(
            ["redis-cli", "-p", str(redis_port), "INFO", "commandstats"], capture_output=True, text=True).stdout))
        fleet_calls, fleet_commands = 0, 0
        for _ in range(ROUNDS):
            for name, (path, script) in runs.items():
                before, commands = cpu_ticks(gw), redis_commands()
                rps, total, p50, p99, _ = run_h1(ports["gatewayd"], path, script)
                results[name].append((rps, p50, p99, (cpu_ticks(gw) - before) / HZ * 1e6 / max(total, 1)))
                if path == "/fleet":
                    fleet_calls, fleet_commands = fleet_calls + total, fleet_commands + redis_commands() - commands
        med = {name: [statistics.median(r[i] for r in rows) for i in range(4)] for name, rows in results.items()}
        base_rps, base_cpu = med["pass-through"][0], med["pass-through"][3]
        print(f"\ngatewayd routes (wrk -t1 -c64): medians of {ROUNDS} interleaved rounds of {SECONDS}s")
        print("| route | req/s | p50 ms | p99 ms | CPU µs/req | ÷ pass-through req/s | extra CPU ÷ plain call |")
        print("|---|---|---|---|---|---|---|")
        for name, (rps, p50, p99, cpu) in med.items():
            print(f"| {name} | {rps:,.0f} | {p50:.2f} | {p99:.2f} | {cpu:.1f} | {rps / base_rps:.2f} | {(cpu - base_cpu) / base_cpu:.2f} |")
        for name, path in [("C filter (sets a header)", "/filtered"), ("C filter, compiled", "/compiled")]:
            filtered = med[name]
            print(f"{name}: {filtered[3] - base_cpu:+.1f} µs of CPU per call over pass-through, {filtered[0] / base_rps:.2f}x its req/s; "
                  f"its VM added {vm_mib[path]:.1f} MiB of RSS on the one event loop")
        passed, translated = med["2 KB SOAP answer, passed through"], med["2 KB SOAP answer -> 6-field JSON"]
        print(f"answer translation: {translated[0] / passed[0]:.2f}x the pass-through's req/s (target 0.8x or more), "
              f"{translated[3] - passed[3]:+.1f} µs of CPU per call for decoding {len(SOAP_ANSWER)} bytes of XML and shaping them")
        local, fleet = med["local rate limit"], med["fleet rate limit (Redis)"]
        print(f"fleet rate limit: {fleet[3] / local[3]:.2f}x the local limit's CPU per call, p99 {fleet[2] / local[2]:.2f}x; "
              f"{fleet_commands / max(fleet_calls, 1):.3f} Redis commands per call (lease 100)")

    if "cache" in TABLES:
        # The route cache against nginx's proxy_cache (scripts/bench_cache.py).
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import bench_cache
        bench_cache.run(sys.modules[__name__])

    if "spans" in TABLES:
        # Span export on (every call sampled: a server and a client span each) against the same config with tracing off.
        pair = {"tracing off": "gatewayd metrics on", "spans exported": "gatewayd spans on"}
        results = {name: [] for name in pair}
        for _ in range(ROUNDS):
            for name, server in pair.items():
                before = cpu_ticks(servers[server])
                rps, total, p50, p99, _ = run_h1(extra_ports[server])
                results[name].append((rps, p50, p99, (cpu_ticks(servers[server]) - before) / HZ * 1e6 / max(total, 1), total))
        med = {name: [statistics.median(r[i] for r in rows) for i in range(4)] for name, rows in results.items()}
        print(f"\nspan export (wrk -t1 -c64, metrics on in both): medians of {ROUNDS} interleaved rounds of {SECONDS}s")
        print("| gatewayd | req/s | p50 ms | p99 ms | CPU µs/req |")
        print("|---|---|---|---|---|")
        for name, (rps, p50, p99, cpu) in med.items():
            print(f"| {name} | {rps:,.0f} | {p50:.2f} | {p99:.2f} | {cpu:.1f} |")
        def span_counts():
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{spans_admin}/metrics").read().decode()
            return (sum(float(n) for n in re.findall(r"\ngatewayd_spans_exported_total (\S+)", metrics)),
                    sum(float(n) for n in re.findall(r"gatewayd_spans_dropped_total\{[^}]*\} (\S+)", metrics)))
        # Counted once the last batches are out.
        exported, dropped = settled(span_counts)
        calls = sum(r[4] for r in results["spans exported"])
        pairs = statistics.median(a[3] / b[3] for a, b in zip(results["spans exported"], results["tracing off"]))
        off, on = med["tracing off"], med["spans exported"]
        print(f"span export: {on[3] / off[3]:.2f}x the CPU per call of tracing off (per-round pairs: {pairs:.2f}x), "
              f"p99 {on[2] / off[2]:.2f}x, req/s {on[0] / off[0]:.2f}x; {exported:.0f} spans exported and {dropped:.0f} dropped "
              f"for {calls:,} calls")

    if "memory" in TABLES:
        # Memory: a 1 GiB upload streamed through, then idle connections held open.
        status = lambda field: int(next(l for l in open(f"/proc/{gw.pid}/status") if l.startswith(field)).split()[1]) / 1024
        before_upload = status("VmRSS:")
        upload = subprocess.run(["sh", "-c", f"head -c {1 << 30} /dev/zero | curl -s -o /dev/null -w '%{{http_code}}' "
                                 f"-T - http://127.0.0.1:{ports['gatewayd']}/upload"], capture_output=True, text=True).stdout
        upload_peak = status("VmHWM:")
        base_rss = rss_mib(gw)
        idle = []

        def hold(count, opening):
            for _ in range(count):
                c = socket.create_connection(("127.0.0.1", ports["gatewayd"]))
                c.sendall(opening)
                idle.append(c)
            # Held once gatewayd has accepted every one of them.
            until(lambda: len(os.listdir(f"/proc/{gw.pid}/fd")) >= len(idle), 10, f"{len(idle)} connections accepted")
            return settled(lambda: rss_mib(gw))

        # A few of each first, so that the code they run is mapped before counting.
        hold(20, b"GET / HTTP/1.1\r\nHost: b\r\n\r\n")
        preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
        warm_rss = hold(20, preface)
        h1_rss = hold(2000, b"GET / HTTP/1.1\r\nHost: b\r\n\r\n")
        h2_rss = hold(500, preface)
        for c in idle:
            c.close()
        print(f"\nMemory (gatewayd): at start {idle_rss['gatewayd']:.1f} MiB; 1 GiB streamed upload (status {upload}): peak "
              f"{upload_peak:.0f} MiB, {upload_peak - before_upload:+.0f} MiB over the RSS before it; then {base_rss:.1f} MiB; "
              f"idle connections: {(h1_rss - warm_rss) * 1024 / 2000:.2f} KiB per HTTP/1.1 (2,000 held), "
              f"{(h2_rss - h1_rss) * 1024 / 500:.2f} KiB per h2c (500 held), {h2_rss:.1f} MiB holding them")
except BaseException:
    stop_all()
    print(f"logs kept in {work}", file=sys.stderr)
    raise
else:
    stop_all()
    shutil.rmtree(work, ignore_errors=True)
