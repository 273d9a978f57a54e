import Rewriter
import Testing
@testable import Gateway

@Suite(.ownThreads) struct ConfigErrorTests {
    func issues(_ yaml: String, environment: [String: String] = [:]) -> [String] {
        do {
            _ = try ConfigLoader.load(yaml: yaml, file: "t.yaml", environment: environment)
            return []
        } catch {
            return error.issues.map(\.description)
        }
    }

    @Test func aFleetLimitNeedsAStoreAndTheStoreAGoodURL() {
        let noStore = issues("""
            listeners: [{address: 127.0.0.1:1}]
            routes: [{name: r, upstream: echo, rate_limit: {requests: 5, scope: fleet, lease: 6, on_store_failure: maybe}}]
            """)
        #expect(noStore.count == 3, "\(noStore)")
        #expect(noStore.contains { $0.contains("t.yaml:2") && $0.contains("routes[0].rate_limit.scope") && $0.contains("needs a top-level store") })
        #expect(noStore.contains { $0.contains("routes[0].rate_limit.lease") && $0.contains("at most requests + burst (5)") })
        #expect(noStore.contains { $0.contains("routes[0].rate_limit.on_store_failure") && $0.contains("local | deny") })
        let noStoreElsewhere = issues("""
            listeners: [{address: 127.0.0.1:1}]
            upstreams: {auth: {url: "http://127.0.0.1:2"}}
            routes:
              - name: r
                upstream: echo
                retry: {budget: {scope: fleet}}
                validate: [{status: 401, then: {refresh: {request: {upstream: auth, path: /t}, capture: {pointer: /t, header: A}, share: fleet}}}]
            """)
        #expect(noStoreElsewhere.count == 2 && noStoreElsewhere.allSatisfy { $0.contains("needs a top-level store") }, "\(noStoreElsewhere)")
        #expect(noStoreElsewhere.contains { $0.contains("routes[0].retry.budget.scope") })
        #expect(noStoreElsewhere.contains { $0.contains("routes[0].validate[0].then.refresh.share") })
        let badStore = issues("""
            listeners: [{address: 127.0.0.1:1}]
            store:
              redis: {url: "http://cache:6379", timeout: 1h, prefix: x}
            """)
        #expect(badStore.count == 3, "\(badStore)")
        #expect(badStore.contains { $0.contains("t.yaml:3") && $0.contains("store.redis.url") && $0.contains("redis://") })
        #expect(badStore.contains { $0.contains("store.redis.timeout") })
        #expect(badStore.contains { $0.contains("store.redis.prefix") })
    }

    @Test func storeURLsParse() throws {
        let full = try #require(StoreConfig.parse(url: "rediss://user:pa:ss@[::1]:6380/2"))
        #expect(full.host == "::1" && full.port == 6380 && full.database == 2 && full.tls && full.password == "pa:ss")
        let plain = try #require(StoreConfig.parse(url: "redis://cache"))
        #expect(plain.host == "cache" && plain.port == 6379 && plain.database == 0 && !plain.tls && plain.password == nil)
        for bad in ["redis://", "redis://h:0", "redis://h/x", "redis://h/99999", "tcp://h:1"] { #expect(StoreConfig.parse(url: bad) == nil, "\(bad)") }
    }

    @Test func theStorePasswordIsNeverShown() throws {
        let loaded = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:1}]
            store: {redis: {url: "redis://:in-the-url@127.0.0.1:6379", password: literal-secret}}
            """, file: "t.yaml", environment: [:])
        #expect(loaded.config.store?.password == "literal-secret")
        #expect(!loaded.redacted.contains("in-the-url") && !loaded.redacted.contains("literal-secret"))
    }

    @Test func aBadURLIsReportedWithTheUpstreamsOtherProblems() {
        let found = issues("listeners: [{address: 127.0.0.1:1}]\nupstreams: {legacy: {url: ftp://example.com, connect_timeout: fast}}")
        #expect(found.count == 2, "\(found)")
        #expect(found.contains { $0.contains("upstreams.legacy.url") } && found.contains { $0.contains("upstreams.legacy.connect_timeout") })
    }

    @Test func everyErrorIsReportedWithLineAndKeyPath() {
        let yaml = """
            listeners:
              - address: 127.0.0.1:80800
                protocols: [http1, h3]
            limits: {header_timeout: 10, idle_timeout: 1x, max_body_bytes: many}
            upstreams:
              legacy: {url: ftp://x, max_conections: 3}
            routes:
              - name: a
                match: {path: /a, prefix: /b}
                upstream: nowhere
                rewrite:
                  path: /v1/{id
                  encoding: yaml
                  params:
                    when: {type: date}
                    k: {value: 1, required: true}
                timeout: soon
                retry: {attempts: 0, backoff: {strategy: linear}, on: [teapot, 700]}
                validate:
                  - status: 2xx
                    else: explode
                  - json: {pointer: error, absent: true}
              - name: a
                upstream: echo
                headers: {set: {"Bad Name": x, X-Ok: "${env:MISSING}"}}
                surprise: true
            """
        let found = issues(yaml)
        let expected = [
            "t.yaml:2:14: listeners[0].address: port 80800 is out of range: a port is 0 to 65535 (0: any free port)",
            "t.yaml:3:24: listeners[0].protocols[1]: expected one of http1 | h2c | h2, found 'h3'",
            "t.yaml:4:26: limits.header_timeout: expected a duration such as 250ms, 2s, 1m or 1h30m (at most 8760h), found '10'",
            "t.yaml:4:44: limits.idle_timeout: expected a duration such as 250ms, 2s, 1m or 1h30m (at most 8760h), found '1x'",
            "t.yaml:4:64: limits.max_body_bytes: expected an integer, found 'many'",
            "t.yaml:6:17: upstreams.legacy.url: expected http://host[:port][/path] or https://..., found 'ftp://x'",
            "t.yaml:6:26: upstreams.legacy.max_conections: unknown key (did you mean max_connections? known here: url, endpoints, balance, health_check, outlier, max_pending, max_requests, max_connections, connect_timeout, idle_timeout, http2, headers, tls)",
            "t.yaml:9:12: routes[0].match.prefix: give either path or prefix, not both",
            "t.yaml:10:15: routes[0].upstream: unknown upstream 'nowhere' (declared: echo, legacy)",
            "t.yaml:12:13: routes[0].rewrite.path: invalid URI template: unclosed expression at character 5",
            "t.yaml:13:17: routes[0].rewrite.encoding: expected one of auto | query | json | form | multipart | xml, found 'yaml'",
            "t.yaml:15:22: routes[0].rewrite.params.when.type: expected one of int | number | bool | string | timestamp_ms | file, found 'date'",
            "t.yaml:16:12: routes[0].rewrite.params.k: a constant (value) takes no from, default or required",
            "t.yaml:17:14: routes[0].timeout: expected a duration such as 250ms, 2s, 1m or 1h30m (at most 8760h), found 'soon'",
            "t.yaml:18:23: routes[0].retry.attempts: must be between 1 and 10, found 0",
            "t.yaml:18:46: routes[0].retry.backoff.strategy: expected one of immediate | fixed | exponential | fibonacci, found 'linear'",
            "t.yaml:18:60: routes[0].retry.on[0]: expected connect-failure, reset, timeout, refused-stream, 5xx, a status or a range like 500-504, found 'teapot'",
            "t.yaml:18:68: routes[0].retry.on[1]: status 700 is not between 100 and 599",
            "t.yaml:20:17: routes[0].validate[0].status: expected a status, a range like 200-299 or a comma-separated list, found '2xx'",
            "t.yaml:21:15: routes[0].validate[0].else: expected one of next | accept | fail | pass | retry, or a refresh mapping, found 'explode'",
            "t.yaml:22:25: routes[0].validate[1].json.pointer: not a JSON pointer (RFC 6901), e.g. /error or /data/0/id",
            "t.yaml:23:11: routes[1].name: route name 'a' is used twice",
            "t.yaml:25:21: routes[1].headers.set.Bad Name: not a valid header name",
            "t.yaml:25:42: routes[1].headers.set.X-Ok: environment variable MISSING is not set (write ${env:MISSING:-default} for a default)",
            "t.yaml:26:5: routes[1].surprise: unknown key (known here: name, match, upstream, rewrite, headers, response_headers, keep_host, timeout, retry, validate, rate_limit, upgrade, filters, response, cache)",
        ]
        for line in expected { #expect(found.contains(line), "missing: \(line)") }
        for line in found where !expected.contains(line) { Issue.record("unexpected: \(line)") }
    }

    @Test(arguments: [
        ("", "t.yaml:1:1: the file is empty"),
        ("listeners: [", "invalid YAML"),
        ("listeners: []\nlisteners: []", "duplicate key: listeners"),
        ("routes: []", "t.yaml:1:1: listeners: missing: at least one listener is needed"),
        ("listeners: [{address: 127.0.0.1:1, protocols: [h2]}]", "h2 needs tls"),
        ("listeners: [{address: 127.0.0.1:1}]\nupstreams: {echo: {url: http://x}}", "'echo' is built in"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, rewrite: {path: '/x{#f}'}}]", "a fragment"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, rewrite: {path: 'x{y}'}}]", "must start with '/'"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, rewrite: {params: {f: {type: file}}}}]", "type: file needs encoding: multipart"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, rewrite: {params: {n: {type: int, default: abc}}}}]", "does not convert to type int"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, match: {path: '/a/x{id}'}}]", "are whole segments"),
        // What cannot work is refused, naming the smallest value that can.
        ("listeners: [{address: 127.0.0.1:1}]\nupstreams: {a: {url: 'http://127.0.0.1:2', connect_timeout: 0s}}",
         "upstreams.a.connect_timeout: must be at least 1ms: 0s would fail every connection (502)"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, timeout: 0s}]", "routes[0].timeout: must be at least 1ms: 0s would answer every call 504"),
        ("listeners: [{address: 127.0.0.1:1}]\nlimits: {header_timeout: 0s}", "limits.header_timeout: must be at least 100ms"),
        ("listeners: [{address: 127.0.0.1:1}]\nlimits: {idle_timeout: 10ms}", "limits.idle_timeout: must be at least 100ms"),
        ("listeners: [{address: 127.0.0.1:1}]\nupstreams: {a: {url: 'http://127.0.0.1:2', idle_timeout: 0s}}", "upstreams.a.idle_timeout: must be at least 1ms"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, retry: {per_try_timeout: 0s}}]", "routes[0].retry.per_try_timeout: must be at least 1ms"),
        ("listeners: [{address: 127.0.0.1:1}]\nlimits: {max_body_bytes: 0}", "limits.max_body_bytes"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, match: {methods: [GETT]}}]", "routes[0].match.methods: 'GETT' is no standard method: did you mean GET?"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, retry: {methods: [PSOT]}}]", "did you mean POST?"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, headers: {set: {X: '${file:nope.txt}'}}}]", "nope.txt for ${file:nope.txt}: no such file"),
        ("listeners: [{address: 127.0.0.1:1}]\nlisteners: [{address: 127.0.0.1:1, forwarded: {trust: [10.0.0.0/33]}}]", "duplicate key"),
        ("listeners: [{address: 127.0.0.1:1, forwarded: {trust: [10.0.0.0/33]}}]", "listeners[0].forwarded.trust[0]: expected an address or CIDR range"),
        ("listeners: [{address: 127.0.0.1:99999}]", "listeners[0].address: port 99999 is out of range: a port is 0 to 65535"),
        ("listeners:\n\t- {address: 127.0.0.1:1}", "t.yaml:2:1: invalid YAML: a tab where YAML reads indentation; indent with spaces only"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, match: {path: /a}, rewrite: {prefix: /v2/}}]",
         "rewrite.prefix: replaces the route's match.prefix, which it has not"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, match: {prefix: /a/}, rewrite: {prefix: /v2/../x/}}]",
         "without '.' or '..' segments"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, match: {prefix: /a/}, rewrite: {prefix: /v2/, path: /x}}]",
         "give either prefix or path, not both"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, headers: {set: {X: \"${vault:x}\"}}}]", "unknown interpolation"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, validate: [{header: {name: X, matches: '('}}]}]", "invalid regular expression"),
        ("listeners: [{address: 127.0.0.1:1}]\nadmin: {address: 0.0.0.0:9901}", "t.yaml:2:18: admin.address: 0.0.0.0:9901 is not a loopback address; set admin.allow_remote: true"),
        ("listeners: [{address: 127.0.0.1:1}]\nadmin: {address: 0.0.0.0:9901, allow_remote: true}", "t.yaml:2:46: admin.allow_remote: a non-loopback admin endpoint needs admin.token"),
        ("listeners: [{address: 127.0.0.1:1}]\nadmin: {address: 127.0.0.1:9901, token: short}", "t.yaml:2:41: admin.token: too short: at least 16 characters"),
        ("listeners: [{address: 127.0.0.1:1}]\nlogging: {format: xml}", "t.yaml:2:19: logging.format: expected one of text | json | logfmt, found 'xml'"),
        ("listeners: [{address: 127.0.0.1:1}]\nlimits: {drain_timeout: soon}", "limits.drain_timeout"),
        // The cache's keys, as an operator might get them wrong.
        ("listeners: [{address: 127.0.0.1:1}]\ncache: {max_bytes: lots}", "t.yaml:2:20: cache.max_bytes: expected a size such as 8MiB or 65536, found 'lots'"),
        ("listeners: [{address: 127.0.0.1:1}]\ncache: {max_bytes: 99999999GiB}", "cache.max_bytes: must be between 1024 and 1099511627776 bytes"),
        ("listeners: [{address: 127.0.0.1:1}]\ncache: {max_bytes: 1MiB, max_entry_bytes: 2MiB}", "cache.max_entry_bytes: must be at most max_bytes (1048576)"),
        ("listeners: [{address: 127.0.0.1:1}]\ncache: {max_byte: 1MiB}", "cache.max_byte: unknown key (did you mean max_bytes?"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, cache: {ttl: forever}}]", "routes[0].cache.ttl: expected a duration"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, cache: {key: [cookie]}}]",
         "routes[0].cache.key[0]: expected query or header:NAME, found 'cookie'"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, cache: {key: [\"header:Bad Name\"]}}]", "routes[0].cache.key[0]: expected query or header:NAME"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, cache: {scope: fleet}}]", "routes[0].cache.scope: fleet needs a top-level store"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, cache: {coalesce: sometimes}}]", "routes[0].cache.coalesce: expected true or false"),
        ("listeners: [{address: 127.0.0.1:1}]\nroutes: [{name: r, upstream: echo, cache: {stale_if_eror: 1m}}]", "did you mean stale_if_error?"),
    ])
    func singleProblems(yaml: String, message: String) {
        let found = issues(yaml)
        #expect(found.contains { $0.contains(message) }, "\(found)")
    }

    /// Found by FuzzConfig: a duration past what the clock holds trapped the
    /// loader (an Int64 overflow) instead of being an error.
    @Test func durationsPastAYearAreRefused() {
        let yaml = """
            limits: {header_timeout: 1077777777777777777777777777777777s, idle_timeout: 8761h, drain_timeout: 8760h}
            routes: [{name: a, upstream: echo, timeout: 300000000000000000000000000ms}]
            """
        #expect(issues(yaml) == [
            "t.yaml:1:1: listeners: missing: at least one listener is needed",
            "t.yaml:1:26: limits.header_timeout: expected a duration such as 250ms, 2s, 1m or 1h30m (at most 8760h), found '1077777777777777777777777777777777s'",
            "t.yaml:1:77: limits.idle_timeout: expected a duration such as 250ms, 2s, 1m or 1h30m (at most 8760h), found '8761h'",
            "t.yaml:2:45: routes[0].timeout: expected a duration such as 250ms, 2s, 1m or 1h30m (at most 8760h), found '300000000000000000000000000ms'",
        ])
        #expect(DurationParser.parse("8759h59m60s") == .seconds(365 * 24 * 3600))
        // What the timers are set with: whole nanoseconds, as the components say.
        var random = SplitMix64(seed: 9)
        for _ in 0..<10000 {
            let duration = Duration(secondsComponent: Int64(random.next() % 63_072_000) - 31_536_000,
                                    attosecondsComponent: Int64(random.next() % 1_000_000_000_000_000_000))
            let (seconds, attoseconds) = duration.components
            #expect(duration.nanosecondCount == seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        }
    }

    @Test func interpolationFromEnvironmentAndEscapes() throws {
        let yaml = """
            listeners: [{address: 127.0.0.1:0}]
            routes:
              - name: r
                upstream: echo
                headers: {set: {X-Key: "${env:KEY}-$${literal}"}}
            """
        let loaded = try ConfigLoader.load(yaml: yaml, environment: ["KEY": "v"])
        #expect(loaded.config.routes[0].headers.set == [.init(name: "X-Key", value: "v-${literal}")])
        #expect(loaded.secrets == ["v"])
    }

    @Test func injectedValuesCannotSplitHeaders() {
        let yaml = "listeners: [{address: 127.0.0.1:0}]\nroutes: [{name: r, upstream: echo, headers: {set: {X-Key: \"${env:KEY}\"}}}]"
        #expect(issues(yaml, environment: ["KEY": "a\r\nInjected: 1"]).contains { $0.contains("must not contain CR, LF or NUL") })
    }

    @Test func yesAndNoStayStrings() throws {
        let yaml = "listeners: [{address: 127.0.0.1:0}]\nroutes: [{name: r, upstream: echo, rewrite: {params: {c: {value: no}, d: {value: 2024-01-01}}}}]"
        let rule = try ConfigLoader.load(yaml: yaml).config.routes[0].rewrite!
        #expect(rule.params.map(\.value) == [.string("no"), .string("2024-01-01")])
    }

    func warnings(_ yaml: String) throws -> [String] {
        try ConfigLoader.load(yaml: yaml, file: "t.yaml", environment: [:]).warnings.map(\.description)
    }

    /// What loads but cannot do what it says is a warning, naming both ends.
    @Test func unreachableRoutesAndARefreshWithoutARetryAreWarned() throws {
        let shadowed = try warnings("""
            listeners: [{address: 127.0.0.1:1}]
            routes:
              - {name: a, upstream: echo, match: {prefix: /a/}}
              - {name: ab, upstream: echo, match: {prefix: /a/b/}}
              - {name: user, upstream: echo, match: {path: "/a/{id}"}}
              - {name: get-only, upstream: echo, match: {methods: [GET], prefix: /x/}}
              - {name: x-post, upstream: echo, match: {methods: [POST], path: /x/1}}
              - {name: x-get, upstream: echo, match: {methods: [GET], path: /x/2}}
              - {name: host, upstream: echo, match: {host: b.example, prefix: /h/}}
              - {name: h, upstream: echo, match: {prefix: /h/}}
              - {name: all, upstream: echo}
              - {name: late, upstream: echo, match: {path: /late}}
            """)
        #expect(shadowed == [
            "t.yaml:4:5: routes[1]: never matched: routes[0] (a) takes every request this route would (first match wins); move this route above it",
            "t.yaml:5:5: routes[2]: never matched: routes[0] (a) takes every request this route would (first match wins); move this route above it",
            "t.yaml:8:5: routes[5]: never matched: routes[3] (get-only) takes every request this route would (first match wins); move this route above it",
            "t.yaml:12:5: routes[9]: never matched: routes[8] (all) takes every request this route would (first match wins); move this route above it",
        ])
        let refresh = """
              - name: r
                upstream: echo
                RETRY
                validate: [{status: 401, then: {refresh: {request: {upstream: echo, path: /t}, capture: {pointer: /t, header: A}}}}]
            """
        for (retry, warned) in [("", true), ("retry: {attempts: 1}", true), ("retry: {attempts: 2}", false)] {
            let found = try warnings("listeners: [{address: 127.0.0.1:1}]\nroutes:\n" + refresh.replacingOccurrences(of: "RETRY", with: retry))
            #expect(found.contains { $0.contains("a refresh replays the call as a retry, and this route allows none") } == warned, "\(retry): \(found)")
        }
        #expect(NearestName.closest(to: "max_conections", in: ["max_connections", "max_pending"]) == "max_connections")
        #expect(NearestName.closest(to: "surprise", in: ["name", "match"]) == nil)
        #expect(NearestName.closest(to: "LINK", in: ConfigReader.standardMethods) == nil, "a name that is known is no typo")
    }

    /// Warnings are not held back until the errors are fixed.
    @Test func warningsComeWithTheErrors() {
        do {
            _ = try ConfigLoader.load(yaml: """
                listeners: [{address: 127.0.0.1:1}]
                routes:
                  - {name: all, upstream: echo}
                  - {name: late, upstream: echo, match: {path: /x}}
                  - {name: bad, upstream: nope}
                """, file: "t.yaml")
            Issue.record("loaded")
        } catch {
            #expect(error.issues.map(\.description) == ["t.yaml:5:27: routes[2].upstream: unknown upstream 'nope' (declared: echo)"])
            #expect(error.warnings.count == 1 && error.warnings[0].description.contains("routes[1]: never matched"), "\(error.warnings)")
        }
    }

    /// A duplicate key is reported, and every other problem with it: the
    /// later occurrence is read, the first set aside.
    @Test func aDuplicateKeyStopsNoOtherCheck() {
        let found = issues("""
            listeners: [{address: 127.0.0.1:1}]
            upstreams:
              app: {url: "http://127.0.0.1:2"}
              app: {url: "http://127.0.0.1:3", max_conections: 2}
            routes:
              - {name: r, upstream: nope, timeout: 0s}
            """)
        #expect(found == [
            "t.yaml:3:3: duplicate key: app (the later one is read)",
            "t.yaml:4:36: upstreams.app.max_conections: unknown key (did you mean max_connections? known here: url, endpoints, balance, health_check, outlier, max_pending, max_requests, max_connections, connect_timeout, idle_timeout, http2, headers, tls)",
            "t.yaml:6:25: routes[0].upstream: unknown upstream 'nope' (declared: echo, app)",
            "t.yaml:6:40: routes[0].timeout: must be at least 1ms: 0s would answer every call 504",
        ], "\(found)")
    }
}
