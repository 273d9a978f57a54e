import Foundation
import Rewriter
import Testing

/// The answer side's XML decoder: xmltodict's convention over a corpus of
/// documents this project did not write, and what a hostile upstream sends.
///
/// | hostile upstream sends | expected |
/// |---|---|
/// | a DTD (billion laughs, XXE, any internal subset) | refused where it appears: nothing expanded, nothing fetched |
/// | an entity never declared | refused (not well-formed) |
/// | mismatched tags, two roots, text after the root, a truncated document | refused |
/// | elements nested past `max_json_depth` | refused |
/// | an empty body, bytes that are not XML | refused |
/// | UTF-16 with a BOM, character references, the predefined entities, CDATA | decoded as text |
@Suite struct XMLDecoderTests {
    static var corpus: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Corpus/xml")
    }

    @Test func theCorpusDecodesAsXmltodictParsesIt() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.path).filter { $0.hasSuffix(".xml") && !$0.hasSuffix(".unparse.xml") }.sorted()
        #expect(files.count >= 12)
        for file in files {
            let bytes = Array(try Data(contentsOf: Self.corpus.appendingPathComponent(file)))
            for mode in XMLDecoder.Namespaces.allCases {
                let expected = try JSONReader.parse(Array(try Data(contentsOf: Self.corpus.appendingPathComponent(
                    "\(file.dropLast(4)).\(mode.rawValue).json"))))
                let decoded = try XMLDecoder.decode(bytes, namespaces: mode)
                #expect(decoded == expected, "\(file), \(mode): \(JSONWriter.string(decoded).prefix(400))")
            }
        }
    }

    func decode(_ text: String, _ namespaces: XMLDecoder.Namespaces = .keep, arrays: Set<String> = [], depth: Int = 64) throws -> String {
        JSONWriter.string(try XMLDecoder.decode(Array(text.utf8), namespaces: namespaces, arrays: arrays, maxDepth: depth))
    }

    @Test func theConventionKeyByKey() throws {
        #expect(try decode("<a><b>1</b><b>2</b><c/></a>") == #"{"a":{"b":["1","2"],"c":null}}"#)
        #expect(try decode(#"<a x="1">t<b/> u </a>"#) == ##"{"a":{"@x":"1","b":null,"#text":"t u"}}"##)
        #expect(try decode("<a><![CDATA[<not markup>]]></a>") == #"{"a":"<not markup>"}"#)
        #expect(try decode("<a>&lt;&amp;&gt;&quot;&apos;&#233;&#x41;</a>") == #"{"a":"<&>\"'éA"}"#)
        #expect(try decode("<?xml version=\"1.0\"?><!-- c --><a>\n  <b>x</b>\n</a>") == #"{"a":{"b":"x"}}"#)
        // One element forced into a list; the root too.
        #expect(try decode("<r><t>1</t></r>", arrays: ["/r/t"]) == #"{"r":{"t":["1"]}}"#)
        #expect(try decode("<r><t>1</t><t>2</t></r>", arrays: ["/r/t"]) == #"{"r":{"t":["1","2"]}}"#)
        let soap = #"<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><u:User xmlns:u="urn:u" u:id="7"><u:Name>Ann</u:Name></u:User></s:Body></s:Envelope>"#
        #expect(try decode(soap, .strip) == #"{"Envelope":{"Body":{"User":{"@id":"7","Name":"Ann"}}}}"#)
        #expect(try decode(soap, .keep) == #"{"s:Envelope":{"@xmlns:s":"http://schemas.xmlsoap.org/soap/envelope/","s:Body":{"u:User":{"@xmlns:u":"urn:u","@u:id":"7","u:Name":"Ann"}}}}"#)
    }

    @Test(arguments: [
        #"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><lolz>&lol2;</lolz>"#,
        #"<?xml version="1.0"?><!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><foo>&xxe;</foo>"#,
        #"<!DOCTYPE foo SYSTEM "http://127.0.0.1:9/evil.dtd"><foo/>"#,
        "<a>&undeclared;</a>",
        "<a><b></a></b>",
        "<a/><b/>",
        "<a/>text",
        "<a><b>",
        "",
        "not xml at all",
        "\u{FEFF}\u{FEFF}<a/>",
    ]) func hostileDocumentsAreRefused(_ text: String) {
        #expect(throws: XMLDecoder.Failure.self) { try XMLDecoder.decode(Array(text.utf8)) }
    }

    @Test func depthIsBounded() throws {
        let deep = String(repeating: "<a>", count: 65) + String(repeating: "</a>", count: 65)
        #expect(throws: XMLDecoder.Failure.self) { try XMLDecoder.decode(Array(deep.utf8), maxDepth: 64) }
        let fits = String(repeating: "<a>", count: 64) + String(repeating: "</a>", count: 64)
        #expect(try XMLDecoder.decode(Array(fits.utf8), maxDepth: 64) != .null)
        // Far deeper than any stack would take, refused at the bound.
        let abyss = String(repeating: "<a>", count: 200_000)
        #expect(throws: XMLDecoder.Failure.self) { try XMLDecoder.decode(Array(abyss.utf8), maxDepth: 64) }
    }

    @Test func aRefusalSaysWhyForTheLog() {
        do {
            _ = try XMLDecoder.decode(Array("<a><b></a>".utf8))
            Issue.record("refused")
        } catch {
            #expect(error.description.hasPrefix("line 1:"))
        }
    }
}
