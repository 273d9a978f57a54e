import Foundation
import Rewriter
import Testing

/// The request side's XML and SOAP bodies: xmltodict's `unparse` over the
/// corpus, and what a hostile client sends.
///
/// | hostile client sends | expected |
/// |---|---|
/// | markup in a value (`</id><admin>`) | escaped once: text, never elements |
/// | a key that is not an XML name (`a b`, `<x`, `1a`) | 400 invalid-parameter, nothing sent |
/// | a control character XML cannot carry | 400 |
/// | a list in a list | 400 |
@Suite struct XMLEncoderTests {
    @Test func theCorpusIsWrittenAsXmltodictUnparsesIt() throws {
        let corpus = XMLDecoderTests.corpus
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus.path).filter { $0.hasSuffix(".keep.json") }.sorted()
        #expect(files.count >= 12)
        for file in files {
            let json = try JSONReader.parse(Array(try Data(contentsOf: corpus.appendingPathComponent(file))))
            guard case .object(let document) = json, let root = document.first else { Issue.record("\(file): one root"); continue }
            var out: [UInt8] = []
            try XMLEncoder.element(root.key, root.value, into: &out)
            let expected = try String(contentsOf: corpus.appendingPathComponent("\(file.dropLast(10)).unparse.xml"), encoding: .utf8)
            #expect(String(decoding: out, as: UTF8.self) == expected, "\(file)")
        }
    }

    func object(_ value: JSONValue) -> JSONObject {
        guard case .object(let object) = value else { return JSONObject() }
        return object
    }

    func body(_ parameters: JSONValue, _ encoder: XMLEncoder) throws -> String {
        String(decoding: try encoder.encode(object(parameters)), as: UTF8.self)
    }

    @Test func aSOAPRequestIsQualifiedByTheRootsNamespace() throws {
        let parameters: JSONValue = ["id": "7", "filter": ["@kind": "tag", "#text": "a&b"], "tags": ["x", "y"], "none": .null]
        let soap11 = XMLEncoder(root: "GetUser", namespace: "urn:users", envelope: .soap11, action: "urn:users#GetUser")
        #expect(try body(parameters, soap11) == """
            <?xml version="1.0" encoding="utf-8"?>
            <soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><GetUser xmlns="urn:users"><id>7</id>\
            <filter kind="tag">a&amp;b</filter><tags>x</tags><tags>y</tags><none></none></GetUser></soap:Body></soap:Envelope>
            """)
        #expect(soap11.contentType == "text/xml; charset=utf-8")
        let soap12 = XMLEncoder(root: "GetUser", namespace: "urn:users", children: .unqualified, namespaces: [("x", "urn:x")], envelope: .soap12,
                                action: "urn:users#GetUser")
        #expect(try body(["x:id": "7"], soap12).hasSuffix("""
            <soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope"><soap:Body><tns:GetUser xmlns:tns="urn:users" xmlns:x="urn:x">\
            <x:id>7</x:id></tns:GetUser></soap:Body></soap:Envelope>
            """))
        #expect(soap12.contentType == #"application/soap+xml; charset=utf-8; action="urn:users#GetUser""#)
    }

    @Test func markupInAValueStaysText() throws {
        let plain = XMLEncoder(root: "r")
        #expect(try body(["id": "</id><admin>1</admin><id>", "@a": #"say "hi" & 'bye'"#], plain).hasSuffix(
            #"<r a="say &quot;hi&quot; &amp; 'bye'"><id>&lt;/id&gt;&lt;admin&gt;1&lt;/admin&gt;&lt;id&gt;</id></r>"#))
        #expect(try body(["n": 5, "b": true], plain).hasSuffix("<r><n>5</n><b>true</b></r>"))
    }

    @Test(arguments: ["a b", "<x", "1a", "a:b:c", "", "x>"]) func aKeyThatIsNoXMLNameIsRefused(_ key: String) {
        #expect(throws: RewriteError.self) { try XMLEncoder(root: "r").encode(JSONObject([JSONObject.Member(key: key, value: "v")])) }
    }

    @Test func charactersXMLCannotCarryAndNestedListsAreRefused() {
        #expect(throws: RewriteError.self) { try XMLEncoder(root: "r").encode(object(["a": "bell\u{07}"])) }
        #expect(throws: RewriteError.self) { try XMLEncoder(root: "r").encode(object(["a": [["x"]]])) }
        #expect(throws: RewriteError.self) { try XMLEncoder(root: "r").encode(object(["@a": ["x": "y"]])) }
    }
}
