import Testing
@testable import Rewriter

@Suite struct RuleTests {
    func apply(_ rule: Rule, _ method: String, _ target: String, json: String? = nil, contentType: String? = nil) throws -> RewrittenRequest {
        let request = IncomingRequest(
            method: method, target: target, contentType: json != nil ? (contentType ?? "application/json") : contentType,
            body: Array((json ?? "").utf8))
        return try rule.apply(to: request, boundary: { "BOUNDARY" })
    }

    @Test(arguments: [("GET", true), ("HEAD", true), ("DELETE", true), ("POST", false), ("PUT", false), ("PATCH", false), ("PURGE", false)])
    func autoPlacementByUpstreamMethod(method: String, query: Bool) throws {
        let out = try apply(Rule(method: method), "POST", "/p", json: "{\"a\":1}")
        #expect(out.method == method)
        #expect(out.target == (query ? "/p?a=1" : "/p"))
        #expect(out.body == (query ? nil : Array("{\"a\":1}".utf8)))
        #expect(out.contentType == (query ? nil : "application/json"))
    }

    @Test func templateConsumesVariablesAndTheRestJoinsWithAmpersand() throws {
        let rule = Rule(path: try URITemplate("/v1/search{?q,sort}"))
        let out = try apply(rule, "GET", "/search?q=a%20b&page=2&sort=x&tag=1&tag=2")
        #expect(out.target == "/v1/search?q=a%20b&sort=x&page=2&tag%5B%5D=1&tag%5B%5D=2")
        let noQuery = try apply(Rule(path: try URITemplate("/items/{id}")), "GET", "/x?id=7&v=1")
        #expect(noQuery.target == "/items/7?v=1")
    }

    @Test func aPrefixModifierOnAListOrObjectIsA400NamingTheKey() throws {
        let rule = Rule(path: try URITemplate("/u/{id:3}/{tag:2}"))
        #expect(try apply(rule, "GET", "/x?id=abcdef&tag=xyz").target == "/u/abc/xy")
        for (json, key) in [(#"{"id":[1,2],"tag":"a"}"#, "id"), (#"{"id":"a","tag":{"k":"v"}}"#, "tag")] {
            do {
                _ = try apply(rule, "POST", "/x", json: json)
                Issue.record("expected an error for \(json)")
            } catch let error as RewriteError {
                #expect(error.problem(route: "r").status == 400)
                #expect(error.key == key)
            }
        }
    }

    @Test func captureValuesOverwriteInPlace() throws {
        var request = IncomingRequest(method: "GET", target: "/u?id=9&x=1")
        request.captures = [("id", "a/b"), ("new", "n")]
        let out = try Rule(path: try URITemplate("/users/{id}")).apply(to: request)
        #expect(out.target == "/users/a%2Fb?x=1&new=n")
    }

    @Test func actualQueryReplacesOnlyTheQuery() throws {
        var rule = Rule(method: "POST")
        rule.actualQuery = JSONObject(["api": "v2"])
        let out = try apply(rule, "POST", "/p", json: "{\"a\":1}")
        #expect(out.target == "/p?api=v2")
        #expect(out.body == Array("{\"a\":1}".utf8))
    }

    @Test func emptyActualQuerySuppressesTheDerivedOne() throws {
        var rule = Rule()
        rule.actualQuery = JSONObject()
        let out = try apply(rule, "GET", "/p?a=1")
        #expect(out.target == "/p")
        #expect(out.body == nil)
    }

    @Test func actualBodyOnAGetIsSentAsJSONAndTheQueryStillDerived() throws {
        var rule = Rule()
        rule.actualBody = ["fixed": true]
        let out = try apply(rule, "GET", "/p?a=1")
        #expect(out.target == "/p?a=1")
        #expect(out.body == Array("{\"fixed\":true}".utf8))
        #expect(out.contentType == "application/json")
    }

    @Test func formBodyUsesPlusForSpacesUnlessSet() throws {
        let out = try apply(Rule(encoding: .form), "POST", "/p", json: "{\"a\":\"x y\",\"b\":[1]}")
        #expect(out.body == Array("a=x+y&b%5B%5D=1".utf8))
        #expect(out.contentType == "application/x-www-form-urlencoded")
        let percent = try apply(Rule(encoding: .form, query: QueryOptions(spaces: .percent)), "POST", "/p", json: "{\"a\":\"x y\"}")
        #expect(percent.body == Array("a=x%20y".utf8))
    }

    @Test func multipartWithFileParam() throws {
        let rule = Rule(encoding: .multipart, params: [ParamRule(name: "f", type: .file)])
        let out = try apply(rule, "POST", "/p", json: "{\"f\":{\"filename\":\"x.bin\",\"content_type\":\"application/pdf\",\"base64\":\"AAE=\"}}")
        #expect(out.contentType == "multipart/form-data; boundary=BOUNDARY")
        let expected = Array("--BOUNDARY\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.bin\"\r\nContent-Type: application/pdf\r\n\r\n".utf8)
            + [0, 1] + Array("\r\n--BOUNDARY--\r\n".utf8)
        #expect(out.body == expected)
    }

    @Test func typedQueryValuesBecomeJSONTypes() throws {
        let rule = Rule(method: "POST", params: [ParamRule(name: "n", type: .int), ParamRule(name: "b", type: .bool),
                                                 ParamRule(name: "t", type: .timestampMs)])
        let out = try apply(rule, "GET", "/p?n=5&b=true&s=5&t=2024-05-01T00:00:00Z")
        #expect(out.body == Array("{\"n\":5,\"b\":true,\"s\":\"5\",\"t\":1714521600000}".utf8))
        #expect(out.target == "/p")
    }

    @Test func fromSources() throws {
        let body = try apply(Rule(from: .body, encoding: .query), "POST", "/p?q=1", json: "{\"b\":2}")
        #expect(body.target == "/p?b=2")
        let query = try apply(Rule(from: .query, encoding: .query), "POST", "/p?q=1", json: "{\"b\":2}")
        #expect(query.target == "/p?q=1")
        let form = try apply(Rule(encoding: .json), "POST", "/p", json: "a=1&a=2", contentType: "application/x-www-form-urlencoded; charset=utf-8")
        #expect(form.body == Array("{\"a\":[\"1\",\"2\"]}".utf8))
        let vendorJSON = try apply(Rule(encoding: .query), "POST", "/p", json: "{\"v\":1}", contentType: "application/vnd.api+json")
        #expect(vendorJSON.target == "/p?v=1")
        // Media types compare case-insensitively, parameters and spaces aside.
        let shouted = try apply(Rule(encoding: .query), "POST", "/p", json: "{\"v\":2}", contentType: " Application/JSON ; charset=UTF-8")
        #expect(shouted.target == "/p?v=2")
        let shoutedForm = try apply(Rule(encoding: .query), "POST", "/p", json: "a=3", contentType: "APPLICATION/X-WWW-FORM-URLENCODED")
        #expect(shoutedForm.target == "/p?a=3")
        #expect(throws: RewriteError.self) { try apply(Rule(), "POST", "/p", json: "{}", contentType: "application/jsonx") }
    }

    @Test func badBodiesAreClientErrors() throws {
        #expect(throws: RewriteError.self) { try apply(Rule(), "POST", "/p", json: "{\"a\":") }
        #expect(throws: RewriteError.self) { try apply(Rule(), "POST", "/p", json: "[1,2]") }
        do {
            _ = try apply(Rule(), "POST", "/p", json: "<xml/>", contentType: "text/xml")
            Issue.record("expected an error")
        } catch let error as RewriteError {
            #expect(error.problem(route: "r").status == 415)
        }
    }

    @Test func allValuesOmittedLeavesNoDanglingQuestionMark() throws {
        #expect(try apply(Rule(method: "GET"), "POST", "/p", json: "{\"a\":null}").target == "/p")
    }

    /// A body that is JSON but not an object, and one cut short, are each called what they are.
    @Test func jsonBodiesThatCarryNoParametersAreNamedForWhatTheyAre() throws {
        #expect(throws: RewriteError(.notAnObject, detail: "the request body is a JSON array, not an object: parameters are read from a JSON object")) {
            try apply(Rule(), "POST", "/p", json: "[1,2]")
        }
        #expect(throws: RewriteError(.invalidJSON, detail: "the request body is not valid JSON: unexpected end of input at byte 21")) {
            try apply(Rule(), "POST", "/p", json: #"{"a":1,"b":[1,2],"c":"#)
        }
        #expect(throws: RewriteError(.invalidJSON, detail: "the request body is not valid JSON: unexpected end of input at byte 7")) {
            try apply(Rule(), "POST", "/p", json: #"{"a":1,"#)
        }
    }
}
