import Testing
@testable import Rewriter

@Suite struct ParamMappingTests {
    func obj(_ json: String) -> JSONObject { try! JSONReader.parseObject(Array(json.utf8)) }

    @Test func renameKeepsPositionConstantsOverwriteInPlaceDefaultsAppendInOrder() throws {
        let rules = [
            ParamRule(name: "q", from: "keywords"),
            ParamRule(name: "version", value: "2"),
            ParamRule(name: "page", type: .int, defaultValue: .number("1")),
            ParamRule(name: "mode", value: "fast"),
        ]
        let out = try rules.apply(to: obj("{\"a\":1,\"keywords\":\"x\",\"mode\":\"slow\",\"z\":true}"))
        #expect(JSONWriter.string(.object(out)) == "{\"a\":1,\"q\":\"x\",\"mode\":\"fast\",\"z\":true,\"version\":\"2\",\"page\":1}")
    }

    @Test func renameOverProducesOneKey() throws {
        let out = try [ParamRule(name: "q", from: "keywords")].apply(to: obj("{\"q\":\"old\",\"keywords\":\"new\"}"))
        #expect(out == obj("{\"q\":\"new\"}"))
    }

    @Test func requiredMissingNamesTheKey() {
        #expect(throws: RewriteError(.missingParameter, key: "keywords",
                                     detail: "required parameter 'keywords' (sent upstream as 'q') is missing")) {
            try [ParamRule(name: "q", from: "keywords", required: true)].apply(to: obj("{\"keywords\":null}"))
        }
    }

    @Test(arguments: [
        (ParamType.int, "\"0042\"", "42"), (.int, "-7", "-7"), (.int, "\"-0\"", "0"),
        (.int, "\"123456789012345678901234567890\"", "123456789012345678901234567890"),
        (.number, "\"1.50\"", "1.5"), (.number, "\"100\"", "100"), (.number, "\"2.5e1\"", "25"), (.number, "2e3", "2e3"),
        (.number, "1.50", "1.50"), (.int, "[\"1\",\"02\"]", "[1,2]"), (.number, "[\"2.50\",3]", "[2.5,3]"), (.string, "[1,true]", "[\"1\",\"true\"]"), (.bool, "\"true\"", "true"), (.bool, "\"0\"", "false"),
        (.bool, "1", "true"), (.string, "1.0", "\"1.0\""), (.string, "false", "\"false\""),
        (.timestampMs, "\"2024-05-01T12:30:00Z\"", "1714566600000"), (.timestampMs, "\"2024-05-01T14:30:00.1239+02:00\"", "1714566600123"),
        (.timestampMs, "\"2024-05-01\"", "1714521600000"), (.timestampMs, "\"1970-01-01T00:00:00Z\"", "0"),
        (.timestampMs, "\"1969-12-31T23:59:59.9995Z\"", "0"), (.timestampMs, "\"1969-12-31T23:59:59.5Z\"", "-500"),
        (.timestampMs, "\"2000-02-29T00:00:00z\"", "951782400000"), (.timestampMs, "1714566600000", "1714566600000"),
        // Past 2262 (once an Int64 overflow, found by FuzzAnswer), and truncation towards zero before 1970.
        (.timestampMs, "\"2824-04-01T00:00:00Z\"", "26957491200000"), (.timestampMs, "\"9999-12-31T23:59:59.999Z\"", "253402300799999"),
        (.timestampMs, "\"1969-12-31T23:59:58.0005Z\"", "-1999"),
        (.int, "null", "null"),
    ])
    func typeConversions(type: ParamType, input: String, expected: String) throws {
        let out = try [ParamRule(name: "k", type: type)].apply(to: obj("{\"k\":\(input)}"))
        #expect(JSONWriter.string(out["k"]!) == expected)
    }

    @Test(arguments: [
        (ParamType.int, "\"1.5\""), (.int, "1.0"), (.int, "\"abc\""), (.int, "\"\""), (.int, "true"), (.number, "\"1.\""),
        (.number, "\"0x10\""), (.bool, "\"yes\""), (.string, "[{\"a\":1}]"), (.int, "[\"1\",\"x\"]"), (.timestampMs, "\"2024-02-30T00:00:00Z\""),
        (.timestampMs, "\"2024-05-01T25:00:00Z\""), (.timestampMs, "\"yesterday\""), (.timestampMs, "\"2024-05-01T12:30:00\u{2212}02:00\""),
        (.timestampMs, "1.5"), (.file, "\"not a data uri\""), (.file, "{\"filename\":\"a\",\"base64\":\"***\"}"),
        (.file, "{\"filename\":\"a\",\"base64\":\"aGk=\",\"extra\":1}"),
    ])
    func conversionFailuresAre400sNamingTheKey(type: ParamType, input: String) {
        do {
            _ = try [ParamRule(name: "k", type: type)].apply(to: obj("{\"k\":\(input)}"))
            Issue.record("expected an error")
        } catch {
            #expect(error.key == "k")
            #expect(error.problem(route: "r").status == 400)
            #expect(error.detail.contains("'k'"))
        }
    }
}
