import Foundation
@testable import Rewriter
import Testing

/// The XML decoder's fast path (`XMLScanner`) against libxml2's reader: what
/// it reads, it reads as libxml2 does; what it cannot be sure of, it leaves
/// to libxml2 (FuzzXML holds the same on every input it explores).
///
/// | hostile or unusual upstream sends | fast path | then |
/// |---|---|---|
/// | a DTD, an undeclared entity, an undeclared prefix | declines | libxml2 refuses |
/// | another encoding declared, UTF-16, bytes that are not UTF-8, U+FFFF | declines | libxml2 decodes or refuses |
/// | a control character, `]]>` in text, `--` in a comment, `<` in an attribute | declines | libxml2 refuses |
/// | a repeated attribute, two of one local name, 33+ attributes on an element | declines | libxml2 judges |
/// | a non-ASCII name, a name with two colons, `<?xml` past the start | declines | libxml2 judges |
/// | elements past `max_json_depth`, a document of 10 MB or more | declines | libxml2 refuses (depth) or reads |
/// | CR LF and lone CR, whitespace in attributes, references, CDATA, comments, PIs | reads | as libxml2 |
@Suite struct XMLScannerTests {
    let arrays = XMLArrayPaths(["/r/a", "/Envelope/Body/GetUserResponse/GetUserResult/tags/string"])

    /// The fast path's document, checked equal to libxml2's in both modes; nil when it declined.
    func both(_ bytes: [UInt8], _ namespaces: XMLDecoder.Namespaces) throws -> JSONValue? {
        guard let fast = XMLScanner.decode(bytes, namespaces: namespaces, arrays: arrays, maxDepth: 64) else { return nil }
        let slow = try XMLDecoder.libxml2(bytes, namespaces: namespaces, arrays: arrays, maxDepth: 64)
        #expect(fast == slow, "\(String(decoding: bytes.prefix(200), as: UTF8.self)): \(JSONWriter.string(fast)) vs \(JSONWriter.string(slow))")
        return fast
    }

    @Test func theCorpusReadsAsLibxml2ReadsIt() throws {
        let folder = XMLDecoderTests.corpus
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".xml") }.sorted()
        var read = 0
        for file in files {
            let bytes = Array(try Data(contentsOf: folder.appendingPathComponent(file)))
            for mode in XMLDecoder.Namespaces.allCases where try both(bytes, mode) != nil { read += 1 }
        }
        // UTF-16 and a DOCTYPE'd document are libxml2's; the rest are the fast path's.
        #expect(read >= files.count * 2 - 8, "\(read) of \(files.count * 2)")
    }

    @Test func aSOAPAnswerTakesTheFastPath() throws {
        let soap = #"<?xml version="1.0" encoding="UTF-8"?><soap11env:Envelope xmlns:soap11env="http://schemas.xmlsoap.org/soap/envelope/" xmlns:tns="urn:users"><soap11env:Body><tns:GetUserResponse><tns:GetUserResult><tns:id>7</tns:id><tns:tags><tns:string>a</tns:string></tns:tags></tns:GetUserResult></tns:GetUserResponse></soap11env:Body></soap11env:Envelope>"#
        #expect(try both(Array(soap.utf8), .strip).map(JSONWriter.string)
            == #"{"Envelope":{"Body":{"GetUserResponse":{"GetUserResult":{"id":"7","tags":{"string":["a"]}}}}}}"#)
        #expect(try both(Array(soap.utf8), .keep) != nil)
    }

    /// libxml2's reader hands a CDATA section over with its CRs (FuzzXML found it); both readers give XML 1.0's LF.
    @Test func lineEndsInsideCDATAReadAsLF() throws {
        let text = "<r><![CDATA[a\r\nb\rc\r]]>d\r\ne</r>"
        #expect(try both(Array(text.utf8), .strip).map(JSONWriter.string) == #"{"r":"a\nb\nc\nd\ne"}"#)
    }

    @Test(arguments: [
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\r\n<!-- c -->\r\n<r a=\"x\ty\r\nz\" b='&lt;&#65;&#x1F600;'>\r\n t&amp;u\r\rv\r\n<![CDATA[ <raw>\r\n ]]></r>\n<?pi data?>\n",
        #"<r xmlns="urn:d" xmlns:p="urn:p" p:k="1" j="2"><p:a>1</p:a><a>2</a><a/></r>"#,
        #"<r xml:lang="en">x<a/>y<a>z</a> w </r>"#,
        "\u{FEFF}<?xml version='1.0' standalone='no' ?><r>caf\u{E9} \u{1F600}</r>",
        #"<r><a><b>1</b></a><a x="&#x9;"/></r>"#,
        #"<r ><a ></a ><b /></r>"#,
    ]) func wellFormedDocumentsReadAsLibxml2ReadsThem(_ text: String) throws {
        for mode in XMLDecoder.Namespaces.allCases {
            #expect(try both(Array(text.utf8), mode) != nil, "declined: \(text)")
        }
    }

    @Test(arguments: [
        #"<!DOCTYPE r [<!ENTITY e "x">]><r>&e;</r>"#, "<r>&e;</r>", "<p:r/>", #"<r p:a="1"/>"#,
        #"<?xml version="1.0" encoding="ISO-8859-1"?><r>x</r>"#, #"<?xml version="1.1"?><r/>"#,
        "<r>\u{1}</r>", "<r>]]></r>", "<r><!-- a -- b --></r>", #"<r a="<"/>"#,
        #"<r a="1" a="2"/>"#, #"<r xmlns:p="urn:p" xmlns:q="urn:p" p:a="1" q:a="2"/>"#,
        "<r\u{E9}/>", "<a:b:c/>", #"<r xml:-lang="x"/>"#, "<p:1 xmlns:p=\"urn:p\"/>", " <?xml version=\"1.0\"?><r/>", "<r/><?xml version=\"1.0\"?>",
        "<r xmlns:p=\"\"/>", "<r>&#0;</r>", "<r>&#xD800;</r>", "<r><a></b></r>", "<r/><r/>", "<r/>t", "<r>",
    ]) func whatOnlyLibxml2CanJudgeIsLeftToIt(_ text: String) throws {
        for mode in XMLDecoder.Namespaces.allCases {
            #expect(XMLScanner.decode(Array(text.utf8), namespaces: mode, arrays: arrays, maxDepth: 64) == nil, "read: \(text)")
        }
    }

    @Test func bytesNoXMLParserTakesAreLeftToLibxml2() {
        for bytes: [UInt8] in [[0x3C, 0x72, 0x3E, 0xFF, 0x3C, 0x2F, 0x72, 0x3E], Array("<r>".utf8) + [0xEF, 0xBF, 0xBF] + Array("</r>".utf8),
                               [0xFF, 0xFE, 0x3C, 0x00, 0x72, 0x00, 0x2F, 0x00, 0x3E, 0x00]] {
            #expect(XMLScanner.decode(bytes, namespaces: .strip, arrays: arrays, maxDepth: 64) == nil)
        }
        let many = "<r " + (0..<40).map { "a\($0)=\"1\"" }.joined(separator: " ") + "/>"
        #expect(XMLScanner.decode(Array(many.utf8), namespaces: .strip, arrays: arrays, maxDepth: 64) == nil)
        #expect(throws: Never.self) { try XMLDecoder.decode(Array(many.utf8)) }
        let deep = String(repeating: "<a>", count: 65) + String(repeating: "</a>", count: 65)
        #expect(XMLScanner.decode(Array(deep.utf8), namespaces: .strip, arrays: arrays, maxDepth: 64) == nil)
    }

    /// The word-at-a-time text test against the byte test: each byte value at each of the eight places among plain ones.
    @Test func eightBytesAtATimeFindWhatOneAtATimeFinds() {
        for value in 0...255 {
            for place in 0..<8 {
                var word = [UInt8](repeating: UInt8(ascii: "a"), count: 8)
                word[place] = UInt8(value)
                let packed = word.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                #expect(XMLScanner.hasSpecial(packed) == XMLScanner.isSpecial(UInt8(value)), "\(value) at \(place)")
            }
        }
        for value in 0...255 {
            let b = UInt8(value)
            let expected = XMLScanner.isNameStart(b) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: ".")
            #expect(XMLScanner.isNameCharacter(b) == expected, "\(value)")
        }
    }

    /// Text long enough to be read eight bytes at a time, with what ends or changes a run at each offset.
    @Test(arguments: ["<", "&amp;", "\r\n", "\u{E9}", "]]>", "\t"]) func longTextReadsAsLibxml2ReadsIt(_ piece: String) throws {
        for offset in 0..<20 {
            let text = "<r>" + String(repeating: "x", count: offset) + (piece == "<" ? "<a/>" : piece) + String(repeating: "y", count: 21 - offset) + "</r>"
            let read = try both(Array(text.utf8), .strip)
            #expect((read == nil) == (piece == "]]>"), "\(text)")
        }
    }
}
