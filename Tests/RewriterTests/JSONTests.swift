import Testing
@testable import Rewriter

@Suite struct JSONReaderTests {
    @Test(arguments: [
        ("{\"a\":1.0,\"b\":1e3,\"c\":-0,\"d\":12345678901234567890123}", "{\"a\":1.0,\"b\":1e3,\"c\":-0,\"d\":12345678901234567890123}"),
        ("{ \"z\" : [ ] , \"a\" : { } }", "{\"z\":[],\"a\":{}}"),
        ("{\"s\":\"\\u00e9\\ud83d\\ude00\\/\\\"\\\\\\b\\f\\n\\r\\t\"}", "{\"s\":\"é😀/\\\"\\\\\\b\\f\\n\\r\\t\"}"),
        ("{\"k\":[1,[2,[3]],{\"n\":null,\"t\":true,\"f\":false}]}", "{\"k\":[1,[2,[3]],{\"n\":null,\"t\":true,\"f\":false}]}"),
        ("{\"ctl\":\"\\u0001\"}", "{\"ctl\":\"\\u0001\"}"),
        ("{\"e\":-1.5E-7}", "{\"e\":-1.5E-7}"),
    ])
    func readsAndWritesBack(input: String, output: String) throws {
        #expect(JSONWriter.string(try JSONReader.parse(input)) == output)
    }

    @Test func keepsKeyOrderAndNumberSpelling() throws {
        let object = try JSONReader.parseObject(Array("{\"b\":1.50,\"a\":2}".utf8))
        #expect(object.members.map(\.key) == ["b", "a"])
        #expect(object["b"] == .number("1.50"))
    }

    @Test(arguments: [
        "", "{", "{\"a\":1,}", "[1,]", "{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":+1}", "{\"a\":1e}",
        "{\"a\":NaN}", "{\"a\":tru}", "{'a':1}", "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00x\"}", "{\"a\":\"\\x\"}",
        "{\"a\":\"tab\there\"}", "{\"a\":1}x", "{\"a\":1 \"b\":2}", "{\"a\":1,\"a\":2}", "{\"a\" 1}", "/* c */{}",
    ])
    func rejectsInvalidJSON(input: String) {
        #expect(throws: JSONError.self) { try JSONReader.parse(input) }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONError.self) { try JSONReader.parse([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xC3, 0x28, 0x22, 0x7D]) }
    }

    @Test func rejectsNonObjectTopLevelForParameters() {
        #expect(throws: JSONError.self) { try JSONReader.parseObject(Array("[1]".utf8)) }
        #expect(throws: JSONError.self) { try JSONReader.parseObject(Array("\"s\"".utf8)) }
    }

    @Test func limitsNesting() throws {
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(throws: JSONError.self) { try JSONReader.parse(deep) }
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        _ = try JSONReader.parse(ok)
        let veryDeep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONError.self) { try JSONReader.parse(veryDeep) }
    }

    @Test func duplicateKeysInLargeObjects() {
        let members = (0..<40).map { "\"k\($0)\":\($0)" } + ["\"k7\":0"]
        #expect(throws: JSONError.self) { try JSONReader.parse("{" + members.joined(separator: ",") + "}") }
    }

    @Test func writerEscapesOnlyWhatRFC8259Requires() {
        #expect(JSONWriter.string(.string("a/b\"c\\d\u{7F}é\u{1F}")) == "\"a/b\\\"c\\\\d\u{7F}é\\u001f\"")
    }

    @Test func pointers() throws {
        let doc = try JSONReader.parse("{\"a\":{\"b/c\":[10,{\"~k\":true}]},\"\":0}")
        #expect(JSONPointer("/a/b~1c/1/~0k")!.resolve(in: doc) == .bool(true))
        #expect(JSONPointer("/a/b~1c/0")!.resolve(in: doc) == .number("10"))
        #expect(JSONPointer("/")!.resolve(in: doc) == .number("0"))
        #expect(JSONPointer("")!.resolve(in: doc) == doc)
        #expect(JSONPointer("/a/b~1c/01")!.resolve(in: doc) == nil)
        #expect(JSONPointer("/missing")!.resolve(in: doc) == nil)
        #expect(JSONPointer("a") == nil)
        #expect(JSONPointer("/~2") == nil)
    }
}
